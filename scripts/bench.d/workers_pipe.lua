-- N no-op defined tasks through the queue (tasker run --store).
dofile(tasker.args[2] or "workers_defs.lua")
local n = tonumber(tasker.args[1]) or 10000
local hs = {}
for i = 1, n do hs[i] = noop{args = {i = i}} end
tasker.all(hs)

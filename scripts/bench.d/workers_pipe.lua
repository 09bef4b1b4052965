-- N defined tasks through the queue (tasker run --store). MODE: noop (the
-- default), nap (10 ms each), or drain: no-ops that say when they started;
-- prints the seconds from the first start to the last (the bench starts
-- the workers once all N are queued).
dofile(tasker.args[2] or "workers_defs.lua")
local n = tonumber(tasker.args[1]) or 10000
local mode = tasker.args[3] or "noop"
local f = ({noop = noop, nap = nap, drain = probe})[mode]
local hs = {}
for i = 1, n do hs[i] = f{args = {i = i}} end
if mode ~= "drain" then
  tasker.all(hs)
  return
end
local first, last = math.huge, -math.huge
for _, h in ipairs(hs) do
  local t = h:await()
  if t < first then first = t end
  if t > last then last = t end
end
print(string.format("%.3f", last - first))

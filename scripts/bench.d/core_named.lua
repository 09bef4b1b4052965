-- core_secrets.lua without the secrets: the same named tasks, nothing masked.
local n = tonumber(tasker.args[1]) or 200000
local hs = {}
local noop = function() end
for i = 1, n do hs[i] = tasker.add{name = "task " .. i, run = noop} end
tasker.all(hs)

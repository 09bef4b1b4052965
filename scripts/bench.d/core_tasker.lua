-- 200,000 no-op tasks: tasker.add each, one tasker.all.
local n = tonumber(tasker.args[1]) or 200000
local hs = {}
local noop = function() end
for i = 1, n do hs[i] = tasker.add(noop) end
tasker.all(hs)

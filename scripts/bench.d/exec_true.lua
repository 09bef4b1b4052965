-- N tasks, each running `true` through tasker.exec (no shell).
local n = tonumber(tasker.args[1]) or 2000
local hs = {}
for i = 1, n do hs[i] = tasker.add(function() tasker.exec{"true"} end) end
tasker.all(hs)

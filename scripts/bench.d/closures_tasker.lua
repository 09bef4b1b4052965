-- The shape real pipelines have: 200,000 tasks, each a new closure that
-- captures its loop variable, through one interceptor and one reactor.
local n = tonumber(tasker.args[1]) or 200000
tasker.intercept{name = "pass", fn = function(t, held) return nil end}
tasker.react{name = "never", when = function(t, result) return false end, fn = function() end}
local hs = {}
for i = 1, n do
  hs[i] = tasker.add(function() return i end)
end
tasker.all(hs)

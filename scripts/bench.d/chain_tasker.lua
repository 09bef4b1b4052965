-- 200,000 no-op tasks through one interceptor and one reactor whose
-- 'when' says no (pass "bare" to run without them).
local n = tonumber(tasker.args[1]) or 200000
if tasker.args[2] ~= "bare" then
  tasker.intercept{name = "pass", fn = function(t, held) return nil end}
  tasker.react{name = "never", when = function(t, result) return false end, fn = function() end}
end
local hs = {}
local noop = function() end
for i = 1, n do hs[i] = tasker.add(noop) end
tasker.all(hs)

-- The same calls in plain Lua per task: the interceptor with a task view,
-- the coroutine, and the reactor's 'when' with a result table.
local n = tonumber(arg[1]) or 200000
local intercept = function(t, held) return nil end
local when = function(t, result) return false end
local values = {}
local noop = function() end
for i = 1, n do
  local t = {id = i, name = "task", args = {}, tags = {}, priority = 0, attempt = 1}
  intercept(t, 0)
  local co = coroutine.create(noop)
  local ok, v = coroutine.resume(co)
  when(t, {ok = ok, value = v})
  values[i] = v
end

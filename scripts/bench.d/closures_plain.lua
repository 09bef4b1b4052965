-- The same calls in plain Lua per task: a new closure capturing the loop
-- variable, the interceptor with a task view, the coroutine, and the
-- reactor's 'when' with a result table.
local n = tonumber(arg[1]) or 200000
local intercept = function(t, held) return nil end
local when = function(t, result) return false end
local values = {}
for i = 1, n do
  local body = function() return i end
  local t = {id = i, name = "task", args = {}, tags = {}, priority = 0, attempt = 1}
  intercept(t, 0)
  local co = coroutine.create(body)
  local ok, v = coroutine.resume(co)
  when(t, {ok = ok, value = v})
  values[i] = v
end

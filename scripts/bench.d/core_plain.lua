-- The floor: per task, create a coroutine, resume it to the end, store the value.
local n = tonumber(arg[1]) or 200000
local values = {}
local noop = function() end
local t0 = os.clock()
for i = 1, n do
  local co = coroutine.create(noop)
  local ok, v = coroutine.resume(co)
  values[i] = v
end

-- Reload latency: from a write of the used file returning to the first task
-- that sees the new interceptor, over N reloads (run with --watch).
local n = tonumber(tasker.args[1]) or 50
local dir = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
local rules = tasker.args[2]
local function write(v)
  local f = assert(io.open(rules, "w"))
  f:write(("tasker.intercept{name = 'v', fn = function(t) t.args.v = %d end}\n"):format(v))
  f:close()
end
write(0)
tasker.use(rules)
local function probe() return tasker.add(function(ctx) return ctx.args.v end):await() end
local lat = {}
for k = 1, n do
  tasker.sleep(0.03)  -- let the previous reload settle (outside the measurement)
  write(k)
  local t0 = tasker.now()
  while probe() ~= k do tasker.sleep(0.0005) end
  lat[k] = tasker.now() - t0
end
table.sort(lat)
local function pct(p) return lat[math.max(1, math.ceil(#lat * p))] * 1000 end
print(string.format("%.1f %.1f %.1f", pct(0.5), pct(0.99), lat[#lat] * 1000))

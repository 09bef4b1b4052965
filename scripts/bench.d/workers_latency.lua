-- Latency from handing a task to the queue to its start on an idle worker,
-- one task at a time: prints p50 and p99 in ms.
dofile(tasker.args[2] or "workers_defs.lua")
local n = tonumber(tasker.args[1]) or 200
local lat = {}
for i = 1, n do
  local t0 = tasker.now()
  local started = probe{args = {i = i}}:await()
  lat[i] = (started - t0) * 1000
end
table.sort(lat)
print(string.format("%.2f %.2f", lat[math.ceil(n * 0.5)], lat[math.ceil(n * 0.99)]))

-- Latency from handing a task to the queue to its start on a worker, one
-- task at a time: prints p50, p99 and the worst in ms. With a gap (seconds)
-- the worker sits idle that long before each task (its heartbeats and the
-- queue's upkeep happen meanwhile); without, tasks go back to back.
dofile(tasker.args[2] or "workers_defs.lua")
local n = tonumber(tasker.args[1]) or 200
local gap = tonumber(tasker.args[3]) or 0
local lat = {}
for i = 1, n do
  if gap > 0 then tasker.sleep(gap) end
  local t0 = tasker.now()
  local started = probe{args = {i = i}}:await()
  lat[i] = (started - t0) * 1000
end
table.sort(lat)
print(string.format("%.2f %.2f %.2f", lat[math.ceil(n * 0.5)], lat[math.ceil(n * 0.99)], lat[n]))

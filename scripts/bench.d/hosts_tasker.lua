-- `true` N times on each of h1..h5 over their masters (concurrency from the
-- command line), then M more one at a time on h1, each timed: per-command
-- overhead over an open master. Prints "p50 p99" in ms on the last line.
local per_host = tonumber(tasker.args[1]) or 100
local timed = tonumber(tasker.args[2]) or 200
local hs = {}
for k = 1, 5 do
  for i = 1, per_host do hs[#hs + 1] = tasker.add(function() tasker.exec{"true", host = "h" .. k} end) end
end
tasker.all(hs)
local t = {}
for i = 1, timed do
  local t0 = tasker.now()
  tasker.exec{"true", host = "h1"}
  t[i] = (tasker.now() - t0) * 1000
end
table.sort(t)
print(string.format("%.2f %.2f", t[math.ceil(#t * 0.5)], t[math.ceil(#t * 0.99)]))

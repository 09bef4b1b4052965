-- RSS per task: 100,000 tasks waiting (start = false) or suspended in sleep.
local mode, n = tasker.args[1], tonumber(tasker.args[2]) or 100000
local function rss()
  for line in io.lines("/proc/self/status") do
    local kb = line:match("^VmRSS:%s+(%d+)")
    if kb then return tonumber(kb) * 1024 end
  end
end
collectgarbage("collect")
local before = rss()
local hs = {}
if mode == "waiting" then
  for i = 1, n do hs[i] = tasker.add{start = false, run = function() end} end
else
  for i = 1, n do hs[i] = tasker.add(function() tasker.sleep(600) end) end
  tasker.sleep(0.2)
  assert(hs[n]:state() == "running", "not all started: raise --concurrency")
end
collectgarbage("collect")
print(string.format("%.0f", (rss() - before) / n))
tasker.exit(0)

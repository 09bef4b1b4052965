-- scripts/bench http: RSS growth over N requests (after a warm-up of 10,000).
-- Prints "<rss after warm-up KB> <rss at the end KB>".
local url, n, c = tasker.args[1], tonumber(tasker.args[2]), tonumber(tasker.args[3])
http.configure{concurrency = c, retry = false}

local function rss_kb()
  for line in io.lines("/proc/self/status") do
    local kb = line:match("^VmRSS:%s+(%d+)")
    if kb then return tonumber(kb) end
  end
end

local function run(count)
  local next_i = 0
  local workers = {}
  for w = 1, c do
    workers[w] = tasker.add(function()
      while next_i < count do
        next_i = next_i + 1
        assert(http.get(url).status == 200)
      end
    end)
  end
  tasker.all(workers)
end

run(10000)
collectgarbage()
local before = rss_kb()
run(n)
collectgarbage()
print(before, rss_kb())

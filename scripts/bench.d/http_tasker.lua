-- scripts/bench http: N GETs of URL, at most C at once (C tasks, each
-- fetching its share in turn, so the task count does not grow with N).
-- Prints the seconds the requests took.
local url, n, c = tasker.args[1], tonumber(tasker.args[2]), tonumber(tasker.args[3])
http.configure{concurrency = c, retry = false}
local next_i, failures = 0, 0
local t0 = tasker.now()
local workers = {}
for w = 1, c do
  workers[w] = tasker.add(function()
    while next_i < n do
      next_i = next_i + 1
      if http.get(url).status ~= 200 then failures = failures + 1 end
    end
  end)
end
tasker.all(workers)
if failures > 0 then error(failures .. " requests failed") end
print(string.format("%.4f", tasker.now() - t0))

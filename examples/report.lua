-- report.lua: gather JSON from several endpoints at once, merge it, and
-- write a JSON report and a Markdown report.
--   tasker run --var out=/tmp/report examples/report.lua https://svc-a/metrics https://svc-b/metrics
-- Each endpoint answers {"service": ..., "requests": n, "errors": n}.

local out = tasker.vars.out or "."
local urls = tasker.args
if #urls == 0 then error("give the endpoints to gather") end

local fetches = {}
for i, url in ipairs(urls) do
  fetches[i] = tasker.add{name = url, retry = {attempts = 2, delay = 0.2},
                          run = function() return http.get(url, {check = true}):json() end}
end
local services = tasker.all(fetches)
table.sort(services, function(a, b) return a.service < b.service end)

local total = {requests = 0, errors = 0}
for _, s in ipairs(services) do
  total.requests = total.requests + s.requests
  total.errors = total.errors + s.errors
end
local report = {generated = os.date("!%Y-%m-%dT%H:%M:%SZ"), services = json.array(services), total = total}

tasker.sh("mkdir -p '" .. out .. "'")
local f = assert(io.open(out .. "/report.json", "w"))
f:write(json.encode(report, {pretty = true}), "\n")
f:close()

local md = {"# Service report", "", "| service | requests | errors | error rate |", "|---|---|---|---|"}
for _, s in ipairs(services) do
  md[#md + 1] = ("| %s | %d | %d | %.1f%% |"):format(s.service, s.requests, s.errors, 100 * s.errors / math.max(1, s.requests))
end
md[#md + 1] = ("| **total** | %d | %d | %.1f%% |"):format(total.requests, total.errors, 100 * total.errors / math.max(1, total.requests))
f = assert(io.open(out .. "/report.md", "w"))
f:write(table.concat(md, "\n"), "\n")
f:close()
print(("wrote %s/report.json and %s/report.md (%d services)"):format(out, out, #services))

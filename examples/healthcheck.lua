-- healthcheck.lua: probe endpoints concurrently (timeout, retries), print a
-- table, post one alert to a webhook if any is down, and exit 1 if so.
--   tasker run --var webhook=https://hooks.example/alert examples/healthcheck.lua URL...

local urls = tasker.args
if #urls == 0 then error("give the URLs to probe: tasker run examples/healthcheck.lua URL...") end
local webhook = tasker.vars.webhook
local TIMEOUT = tonumber(tasker.vars.timeout) or 2

local function probe(url)
  local ok, resp = pcall(http.get, url, {timeout = TIMEOUT, retry = {attempts = 2, delay = 0.1}})
  if not ok then return {url = url, up = false, detail = resp.code or resp.kind} end
  return {url = url, up = resp.status < 400, detail = tostring(resp.status), ms = math.floor(resp.elapsed * 1000)}
end

local probes = {}
for i, url in ipairs(urls) do probes[i] = tasker.add{name = url, run = function() return probe(url) end} end
local results = tasker.all(probes)

local down = {}
for _, r in ipairs(results) do
  print(("%-4s %-8s %6s  %s"):format(r.up and "UP" or "DOWN", r.detail, r.ms and (r.ms .. "ms") or "-", r.url))
  if not r.up then down[#down + 1] = r.url .. " (" .. r.detail .. ")" end
end
print(("%d of %d up"):format(#results - #down, #results))

if #down > 0 then
  if webhook then
    http.post(webhook, {text = "down: " .. table.concat(down, ", ")}, {check = true})
    log.info("alert posted", {down = #down})
  end
  tasker.exit(1)
end

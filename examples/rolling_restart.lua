-- rolling_restart.lua: restart a service on an inventory group a batch at a
-- time, each host checked healthy before the next batch starts; stops once
-- more than max_failures hosts failed (the rest are not touched) and prints
-- one line per host. Exits 1 if any host failed or was not reached.
--   tasker run --var inventory=fleet.ini --var group=web --var batch=25% \
--     --var max_failures=1 --var pause=10 examples/rolling_restart.lua
-- restart= and check= are shell commands run on each host ({host} is its
-- name); the defaults restart and check the systemd unit service= ("app").
local v = tasker.vars
local hosts = tasker.hosts(v.inventory or "fleet.ini", v.group or "all")
local service = v.service or "app"
local restart = v.restart or ("sudo systemctl restart " .. service)
local check = v.check or ("systemctl is-active --quiet " .. service)
local tries = tonumber(v.tries) or 5            -- health checks per host
local interval = tonumber(v.interval) or 2      -- seconds between them

-- "25%" stays a percentage, "2" becomes a count
local function share(text, default)
  if text == nil then return default end
  return tonumber(text) or text
end

local report = {}   -- host name -> what happened to it
local roll = tasker.rolling{
  name = "restart " .. service, hosts = hosts,
  batch = share(v.batch, 1), max_failures = share(v.max_failures, 0), pause = tonumber(v.pause) or 0,
  run = function(ctx, h)
    local function on_host(template) return (template:gsub("{host}", h.name)) end
    local ok, err = pcall(function()
      tasker.sh(on_host(restart), {host = h, timeout = 120})
      for i = 1, tries do
        if tasker.sh(on_host(check), {host = h, check = false, timeout = 30}).ok then return end
        if i < tries then tasker.sleep(interval) end
      end
      error({kind = "health", message = "not healthy after " .. tries .. " check(s)"})
    end)
    if ok then
      report[h.name] = "restarted, healthy"
      return true
    end
    local why = type(err) == "table" and (err.kind == "ssh" and "unreachable (" .. err.code .. ")" or err.message) or tostring(err)
    report[h.name] = "FAILED: " .. why
    error(err, 0)
  end}

local ok, err = roll:result()
for _, h in ipairs(hosts) do
  print(string.format("%-16s %s", h.name, report[h.name] or ("not restarted: " .. (ok and "?" or err.message))))
end
local failed = 0
for _, what in pairs(report) do if what:find("^FAILED") then failed = failed + 1 end end
if not ok or failed > 0 then tasker.exit(1) end

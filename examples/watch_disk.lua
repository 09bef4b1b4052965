-- watch_disk.lua: check disk usage and a log file's growth every interval,
-- and warn when they cross a threshold. Runs until Ctrl-C (or N checks).
--   tasker run --var path=/var --var log=/var/log/syslog --var max_percent=90 \
--              --var max_growth_mb=100 --var every=60 examples/watch_disk.lua
local v = tasker.vars
local path, logfile = v.path or "/", v.log
local max_percent = tonumber(v.max_percent) or 90
local max_growth = (tonumber(v.max_growth_mb) or 100) * 1024 * 1024
local checks = tonumber(v.checks)              -- stop after this many (for tests)
local last_size, done = nil, 0

local function usage_percent()
  -- POSIX df: the 5th column of the second line is "NN%"
  local out = tasker.exec{"df", "-P", path}.stdout
  return tonumber(out:match("\n[^\n]-(%d+)%%"))
end

local function log_size()
  if not logfile then return nil end
  local r = tasker.exec{"stat", "-c", "%s", logfile, check = false}
  return r.ok and tonumber(r.stdout) or nil
end

local schedule
schedule = tasker.every(tonumber(v.every) or 60, {name = "disk-check", run = function()
  local percent = usage_percent()
  if percent >= max_percent then
    log.warn("disk almost full", {path = path, used = percent .. "%"})
  else
    log.info("disk ok", {path = path, used = percent .. "%"})
  end
  local size = log_size()
  if size and last_size and size - last_size > max_growth then
    log.warn("log grew fast", {log = logfile, grew_mb = (size - last_size) // (1024 * 1024)})
  end
  last_size = size or last_size
  done = done + 1
  if checks and done >= checks then schedule:cancel() end
end})

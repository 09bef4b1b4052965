-- fleet_df.lua: disk usage of every host of an inventory group, over SSH;
-- one line per host, an unreachable host named with why; exits 1 if any host
-- is unreachable or over the threshold.
--   tasker run --var inventory=fleet.ini --var group=web --var max_percent=90 examples/fleet_df.lua
-- Hosts are ssh destinations or aliases of your ssh config (TASKER_SSH_CONFIG,
-- or tasker.configure{ssh_config=...}, to use another config).
local v = tasker.vars
local hosts = tasker.hosts(v.inventory or "fleet.ini", v.group or "all")
local max_percent = tonumber(v.max_percent) or 90
local path = v.path or "/"

local handles = {}
for i, h in ipairs(hosts) do
  handles[i] = tasker.add{name = "df " .. h.name, timeout = 30, run = function()
    -- POSIX df: the 5th column of the second line is "NN%"
    local out = tasker.exec{"df", "-P", path, host = h}.stdout
    return tonumber(out:match("\n[^\n]-(%d+)%%"))
  end}
end
tasker.some(handles)   -- every host answered or failed

local bad = 0
for i, h in ipairs(hosts) do
  local ok, value = handles[i]:result()
  if not ok then
    bad = bad + 1
    local why = type(value) == "table" and (value.kind == "ssh" and value.code or value.kind) or tostring(value)
    print(string.format("%-16s unreachable (%s)", h.name, why))
  elseif value >= max_percent then
    bad = bad + 1
    print(string.format("%-16s %3d%%  over %d%%", h.name, value, max_percent))
  else
    print(string.format("%-16s %3d%%", h.name, value))
  end
end
if bad > 0 then tasker.exit(1) end

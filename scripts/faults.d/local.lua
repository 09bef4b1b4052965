-- The fault suite's pipeline for one process (file journal).
-- Args: N tasks, base duration in seconds, bytes of padding per value.
-- Every body run appends "start" and "done" to marks/<name>, so the suite
-- can count how often each body ran and when it finished.
local n = tonumber(tasker.args[1])
local dur = tonumber(tasker.args[2])
local pad = tonumber(tasker.args[3] or "0")

local function mark(name, line)
  local f = assert(io.open("marks/" .. name, "a"))
  f:write(line, "\n")
  f:close()
end

local hs = {}
for i = 1, n do
  -- spread the finishes over the run: durations 0.5x to 1.4x the base
  local t = dur * (0.5 + (i * 7 % 10) / 10)
  hs[i] = tasker.add{name = "t" .. i, run = function(ctx)
    mark("t" .. i, "start")
    tasker.sleep(t)
    mark("t" .. i, "done")
    return i * 2, string.rep("v", pad)
  end}
end

-- a task after all the others: the journal must never hold it before them
local total = tasker.add{name = "total", after = hs, run = function()
  mark("total", "start")
  local sum = 0
  for _, h in ipairs(hs) do sum = sum + h:await() end
  mark("total", "done")
  return sum
end}
print("sum " .. total:await())

-- reload/pipeline.lua: change rules.lua while this runs, and the next tasks
-- follow the new rules; a broken edit keeps the old rules (the error is
-- logged with file:line).
--   tasker run --watch examples/reload/pipeline.lua [seconds [interval]]
-- Try: while it runs, edit the limit in examples/reload/rules.lua and save.

tasker.use("rules.lua")

local seconds = tonumber(tasker.args[1]) or 3
local interval = tonumber(tasker.args[2]) or 0.5
local t0 = tasker.now()
local n = 0
while tasker.now() - t0 < seconds do
  n = n + 1
  local h = tasker.add{name = "job-" .. n, args = {size = n % 7}, run = function(ctx)
    return ctx.args.verdict or "allowed"
  end}
  print(("job-%d (size %d): %s"):format(n, n % 7, h:await()))
  tasker.sleep(interval)
end

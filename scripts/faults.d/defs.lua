-- The fault suite's definitions, loaded by workers and by the coordinator.
-- Every body run appends "start WORKER" and "done WORKER" to marks/<name>.
local function mark(name, line)
  local f = assert(io.open("marks/" .. name, "a"))
  f:write(line, "\n")
  f:close()
end

job = tasker.define("job", function(ctx, args)
  local who = tasker.vars.worker or "coordinator"
  mark("j" .. args.i, "start " .. who)
  tasker.sleep(args.t)
  mark("j" .. args.i, "done " .. who)
  return args.i * 2, who
end)

-- deploy.lua: build -> test -> deploy -> smoke check, rolling back when the
-- deployed version fails its smoke check.
--   tasker run --var build="make" --var test="make test" --var deploy="./deploy.sh" \
--              --var smoke="curl -fsS localhost:8080/health" --var rollback="./rollback.sh" \
--              examples/deploy.lua
-- Each step is a shell command (defaults just echo). A failed step skips the
-- ones after it (kind `dependency`); the exit code is 1 if anything failed.

local v = tasker.vars

local function step(name, command, spec)
  spec = spec or {}
  spec.name = name
  spec.run = function()
    local r = tasker.sh(command)          -- raises (kind exec) on a non-zero exit
    log.info(name .. " done")
    return r.stdout
  end
  return tasker.add(spec)
end

local build  = step("build",  v.build  or "echo building",  {timeout = 1800})
local test   = step("test",   v.test   or "echo testing",   {after = build, timeout = 1800})
local deploy = step("deploy", v.deploy or "echo deploying", {after = test, timeout = 600})
-- a fresh deployment may need a moment: retry the smoke check a few times
local smoke  = step("smoke",  v.smoke  or "echo healthy",   {after = deploy,
                    retry = {attempts = tonumber(v.smoke_attempts) or 3, delay = tonumber(v.smoke_delay) or 2}})

-- Runs only if the smoke check did not succeed, and only undoes a deployment
-- that actually happened.
local rollback = tasker.add{name = "rollback", after = smoke, when = "failure", run = function()
  if deploy:state() ~= "succeeded" then return "nothing to roll back" end
  tasker.sh(v.rollback or "echo rolling back")
  log.warn("rolled back")
  return "rolled back"
end}

for _, h in ipairs({build, test, deploy, smoke}) do
  local ok, err = h:result()
  print(("%-8s %s"):format(h.name, ok and "ok" or h:state() .. ": " .. tostring(err)))
end
local ok, what = rollback:result()
print(("%-8s %s"):format("rollback", ok and what or "not needed"))

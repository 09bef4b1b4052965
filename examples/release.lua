-- Release the service: build, test, then roll out to an environment.
-- A pipeline as a command: see `tasker run examples/release.lua --help`.
--   tasker run examples/release.lua --env staging             # build, test (the default target)
--   RELEASE_TOKEN=... tasker run examples/release.lua --env prod --replicas 4 rollout
-- Each step is a shell command; the defaults only echo.

local env = tasker.param{name = "env", choices = {"staging", "prod"}, required = true,
                         help = "where to roll out"}
local replicas = tasker.param{name = "replicas", type = "integer", default = 2, help = "instances to run"}
local dry = tasker.param{name = "dry-run", type = "boolean", default = false, help = "say what would be done"}
local build_cmd = tasker.param{name = "build-cmd", default = "echo building", help = "the build command"}
local test_cmd = tasker.param{name = "test-cmd", default = "echo testing", help = "the test command"}

local function sh(command)
  if dry then print("would run: " .. command) return end
  tasker.sh(command, {stream = true})
end

tasker.target("build", {help = "compile the release"}, function() sh(build_cmd) end)
tasker.target("test", {help = "run the tests", after = {"build"}}, function() sh(test_cmd) end)
tasker.target("rollout", {help = "roll the tested build out", after = {"test"}}, function()
  -- read only when rolling out: the token is masked in everything tasker writes
  local token = tasker.secret("RELEASE_TOKEN")
  sh(string.format("echo rolling out %d replicas to %s with token %s", replicas, env, token))
end)
tasker.target("default", {after = {"test"}}, function() end)

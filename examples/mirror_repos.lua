-- mirror_repos.lua: update many git clones in parallel, a few at a time,
-- and print one line per repository.
--   tasker run --var jobs=4 examples/mirror_repos.lua ~/src/repo1 ~/src/repo2 ...
-- A repository that fails (not a clone, diverged, network) is reported and
-- does not stop the others; the exit code is 1 if any failed.

local jobs = tonumber(tasker.vars.jobs) or 4

local function git(dir, ...)
  local command = {"git", "-C", dir, ...}  -- `...` must be last to keep all its values
  command.timeout = 300
  return (tasker.exec(command).stdout:gsub("%s+$", ""))
end

local function update(dir)
  local before = git(dir, "rev-parse", "HEAD")
  git(dir, "pull", "--ff-only", "--quiet")
  local after = git(dir, "rev-parse", "HEAD")
  if before == after then return "up to date" end
  return ("updated %s..%s"):format(before:sub(1, 7), after:sub(1, 7))
end

local specs = {}
for i, dir in ipairs(tasker.args) do
  specs[i] = {name = dir, retry = {attempts = 2, delay = 1}, run = function()
    -- report failures as values so one bad repository does not stop the group
    local ok, result = pcall(update, dir)
    return ok and result or ("FAILED: " .. tostring(type(result) == "table" and result.message or result))
  end}
end

local results = tasker.parallel(specs, {concurrency = jobs}):await()
local failed = 0
for i, dir in ipairs(tasker.args) do
  if results[i]:find("^FAILED") then failed = failed + 1 end
  print(("%-40s %s"):format(dir, results[i]))
end
print(("%d repositories, %d failed"):format(#tasker.args, failed))
if failed > 0 then tasker.exit(1) end

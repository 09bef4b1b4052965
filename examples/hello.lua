-- hello.lua: the shape of a tasker pipeline.
--   tasker run examples/hello.lua [name]
-- Tasks run concurrently as coroutines; the engine handles retries,
-- timeouts, dependencies and the final summary.

local who = tasker.args[1] or "world"

-- A plain task: a function. Its return values are the task's value.
local greet = tasker.add{name = "greet", run = function(ctx)
  tasker.sleep(0.05)                      -- waits without blocking others
  return "hello, " .. who
end}

-- A flaky step, retried with exponential backoff until it works.
local flaky = tasker.add{
  name = "flaky",
  retry = {attempts = 3, delay = 0.01},
  run = function(ctx)
    if ctx.attempt < 3 then error("not yet (attempt " .. ctx.attempt .. ")") end
    return "worked on attempt " .. ctx.attempt
  end,
}
flaky:on("retry", function(h, attempt, err)
  print(("retrying %s after attempt %d: %s"):format(h.name, attempt, tostring(err)))
end)

-- Runs only after both succeeded.
local report = tasker.add{name = "report", after = {greet, flaky}, run = function()
  return greet:await() .. "; flaky " .. flaky:await()
end}

-- Fan out: ten squares at once, collected in input order.
local squares = {}
for i = 1, 10 do
  squares[i] = tasker.add{name = "square-" .. i, run = function() return i * i end}
end

print(report:await())
print("squares: " .. table.concat(tasker.all(squares), " "))

-- The definitions the workers bench runs.
noop = tasker.define("noop", function() end)
-- When it started, on the machine's monotonic clock (the same in every process).
probe = tasker.define("probe", function() return tasker.now() end)
-- A job of 10 ms.
nap = tasker.define("nap", function() tasker.sleep(0.01) end)

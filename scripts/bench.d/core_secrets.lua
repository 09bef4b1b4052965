-- core_tasker.lua with three secrets registered: every output tasker writes
-- (the journal's strings and values, stderr, events) is masked.
for _, name in ipairs{"BENCH_SECRET_1", "BENCH_SECRET_2", "BENCH_SECRET_3"} do tasker.secret(name) end
local n = tonumber(tasker.args[1]) or 200000
local hs = {}
local noop = function() end
for i = 1, n do hs[i] = tasker.add{name = "task " .. i, run = noop} end
tasker.all(hs)

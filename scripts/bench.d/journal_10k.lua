-- 10,000 small tasks with names, values and a few dependencies: the run a
-- resume reuses whole, and the report draws.
local n = tonumber(tasker.args[1]) or 10000
local prev
for i = 1, n do
  local spec = {name = "step-" .. i, args = {i = i}, run = function(ctx) return ctx.args.i * 2, "ok" end}
  if i % 100 == 0 and prev then spec.after = prev end
  local h = tasker.add(spec)
  if i % 100 == 1 then prev = h end
end

-- The fault suite's pipeline for a coordinator: N defined jobs (named j1..jN)
-- of T seconds each, spread over workers. Args: N, T.
dofile("defs.lua")
local n, t = tonumber(tasker.args[1]), tonumber(tasker.args[2])
local hs = {}
for i = 1, n do hs[i] = job{name = "j" .. i, args = {i = i, t = t}} end
local sum = 0
for i, h in ipairs(hs) do
  local v, who = h:await()
  print("j" .. i .. " by " .. who)
  sum = sum + v
end
print("sum " .. sum)

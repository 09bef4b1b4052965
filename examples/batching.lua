-- batching.lua: ship events in batches of N, or every T seconds.
--   tasker run examples/batching.lua [count]
-- An interceptor holds each "ship" task until N are waiting (or the oldest
-- has waited max_hold seconds); the task that completes a batch releases
-- the others, which run first, in order. Anything left over is released
-- when the run would otherwise be idle, so nothing is lost.

local BATCH, WINDOW = 5, 0.2
local count = tonumber(tasker.args[1]) or 12

tasker.intercept{
  name = "batch",
  max_hold = WINDOW,
  fn = function(t, held)
    if t.tags[1] ~= "ship" then return end      -- other tasks pass untouched
    if held < BATCH - 1 then return "hold" end  -- wait for the batch to fill
    -- the fifth releases the four held before it
  end,
}

local shipped = {}
local handles = {}
for i = 1, count do
  handles[i] = tasker.add{
    name = "event-" .. i,
    tags = {"ship"},
    args = {payload = "event " .. i},
    run = function(ctx) shipped[#shipped + 1] = ctx.args.payload end,
  }
end
tasker.all(handles)
print(("shipped %d events: %s"):format(#shipped, table.concat(shipped, ", ")))

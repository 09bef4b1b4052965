-- batch_events.lua: collect events and ship them to a collector in batches
-- of N, or every T seconds, whichever comes first (hold + max_hold).
--   tasker run --var collector=https://collector.example/events examples/batch_events.lua [count]
-- Each event is a small "ship" task; an interceptor holds ship tasks until N
-- are waiting (or the oldest has waited T). A released batch runs together:
-- each puts its event in the buffer, the first also adds one "flush" task,
-- which runs right after the batch and posts the buffer as one JSON array.
-- Whatever is held at the end is released, so nothing is lost.

local collector = tasker.vars.collector or error("give --var collector=URL")
local BATCH = tonumber(tasker.vars.batch) or 5
local WINDOW = tonumber(tasker.vars.window) or 0.5
local count = tonumber(tasker.args[1]) or 12
local PACE = tonumber(tasker.vars.pace) or 0.01  -- seconds between events (a stand-in for a real source)

tasker.intercept{name = "batch", max_hold = WINDOW, fn = function(t, held)
  if t.tags[1] == "ship" and held < BATCH - 1 then return "hold" end
end}

local buffer, flushes, shipped = {}, {}, 0

local function flush()
  local batch = buffer
  buffer = {}
  http.post(collector, json.array(batch), {check = true})
  shipped = shipped + #batch
end

local function ship(ctx)
  buffer[#buffer + 1] = ctx.args.event
  if #buffer == 1 then flushes[#flushes + 1] = tasker.add{name = "flush", run = flush} end
end

local ships = {}
for i = 1, count do
  local event = {id = i, at = os.time(), what = "event " .. i}  -- an event arrives
  ships[i] = tasker.add{name = "event-" .. i, tags = {"ship"}, args = {event = event}, run = ship}
  tasker.sleep(PACE)
end
tasker.all(ships)
tasker.all(flushes)
print(("shipped %d events in %d batches"):format(shipped, #flushes))

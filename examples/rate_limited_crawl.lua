-- rate_limited_crawl.lua: follow paginated JSON ({"items": [...], "next": url})
-- for several collections at once, at most R requests per second overall.
--   tasker run --var rate=5 examples/rate_limited_crawl.lua https://api.example/a https://api.example/b
-- The limit is an on="http" interceptor that spaces requests 1/R apart
-- ("delay" asks again later); it applies to every request, retries included.

local RATE = tonumber(tasker.vars.rate) or 5
local starts = tasker.args
if #starts == 0 then error("give the first page of each collection") end

local origin = starts[1]:match("^(https?://[^/]+)")
local interval, next_free = 1 / RATE, 0
tasker.intercept{name = "rate", on = "http", fn = function(t)
  local now = tasker.now()
  if now < next_free then return "delay", next_free - now end
  next_free = now + interval
end}

local function crawl(url)
  local items, pages = {}, 0
  while url do
    local page = http.get(url, {check = true}):json()
    pages = pages + 1
    for _, item in ipairs(page.items) do items[#items + 1] = item end
    -- "next" may be relative to the page it came from
    url = page.next ~= json.null and page.next or nil
    if url and url:sub(1, 1) == "/" then url = origin .. url end
  end
  return {items = items, pages = pages}
end

local t0 = tasker.now()
local crawls = {}
for i, url in ipairs(starts) do crawls[i] = tasker.add{name = "crawl-" .. i, run = function() return crawl(url) end} end
local total, pages = 0, 0
for i, c in ipairs(tasker.all(crawls)) do
  print(("%s: %d items over %d pages"):format(starts[i], #c.items, c.pages))
  total, pages = total + #c.items, pages + c.pages
end
local seconds = tasker.now() - t0
print(("%d items, %d requests, %.1f requests/s (limit %g)"):format(total, pages, pages / seconds, RATE))

-- token_refresh.lua: fetch many items from an API that wants a bearer
-- token which expires. An interceptor puts the current token on every
-- request; on 401 one reactor refreshes it, once for the whole storm, while
-- new requests wait, then the failed requests go out again with the new token.
--   tasker run --var api=https://api.example.com examples/token_refresh.lua 1 2 3
-- GET {api}/items/{id} needs "Authorization: Bearer <token>";
-- POST {api}/token answers {"token": "..."}.

local api = tasker.vars.api or error("give the API's address: --var api=https://...")
local token = os.getenv("API_TOKEN") or "none-yet"
local refreshes = 0

tasker.intercept{name = "auth", on = "http", fn = function(t)
  if t.url ~= api .. "/token" then t.headers.authorization = "Bearer " .. token end
end}

tasker.react{
  name = "refresh-token", on = "http",
  requeue = true, reintercept = true, suspend = true, timeout = 10,
  when = function(t, resp) return resp.status == 401 end,
  fn = function(t, resp)
    token = http.post(api .. "/token", nil, {check = true}):json().token
    refreshes = refreshes + 1
    log.info("token refreshed")
  end,
}

local ids = #tasker.args > 0 and tasker.args or {"1", "2", "3", "4", "5", "6", "7", "8"}
local fetches = {}
for i, id in ipairs(ids) do
  fetches[i] = tasker.add{name = "item-" .. id, run = function()
    return http.get(api .. "/items/" .. id, {check = true}):json().item
  end}
end
local items = tasker.all(fetches)
print(("fetched %d items (%s) after %d token refresh(es)"):format(#items, table.concat(items, ","), refreshes))

-- token_refresh_tasks.lua: many API calls share one token; when it expires,
-- exactly one refresh runs, the calls that failed meanwhile wait for it and
-- run again with the new token.
--   tasker run examples/token_refresh_tasks.lua
-- (The "API" is simulated so the recipe runs anywhere; token_refresh.lua is
-- the same recipe with real HTTP requests.)

local token = {value = "expired", version = 1}
local refreshes = 0

-- Every call gets the current token, also when it runs again after a refresh.
tasker.intercept{name = "auth", fn = function(t)
  t.args.token = token.value
end}

-- On 401: refresh once for the whole storm, hold new calls meanwhile,
-- then run the failed calls again through "auth" (reintercept).
tasker.react{
  name = "refresh-token",
  requeue = true, reintercept = true, suspend = true, timeout = 5,
  when = function(t, result) return not result.ok and type(result.error) == "table" and result.error.status == 401 end,
  fn = function(t, result)
    refreshes = refreshes + 1
    tasker.sleep(0.05)  -- the token endpoint
    token = {value = "fresh-" .. (token.version + 1), version = token.version + 1}
  end,
}

local function call_api(ctx)
  tasker.sleep(0.01)  -- network
  if ctx.args.token == "expired" then error({status = 401, message = "token expired"}) end
  return ("%s ok with %s"):format(ctx.name, ctx.args.token)
end

local calls = {}
for i = 1, 20 do calls[i] = tasker.add{name = "call-" .. i, run = call_api} end
local results = tasker.all(calls)
print(results[1])
print(results[20])
print(("%d calls succeeded after %d token refresh"):format(#results, refreshes))

-- rules.lua: loaded by pipeline.lua with tasker.use; reloaded on save
-- under --watch. Names keep held tasks across reloads.
local limit = 4

tasker.intercept{name = "size-limit", fn = function(t)
  if t.args.size > limit then
    t.args.verdict = "too big (limit " .. limit .. ")"
  end
end}

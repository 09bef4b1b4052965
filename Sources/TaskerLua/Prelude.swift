/// Lua helpers compiled once at start-up. Building the task view `t` here,
/// with constant keys, costs a fraction of pushing each field from Swift,
/// and only what the callback changed comes back.
enum Prelude {
    static let source = """
        local next = next
        local function view(id, name, args, tags, priority, attempt)
          return {id = id, name = name or ("task-" .. id), args = args or {}, tags = tags or {},
                  priority = priority, attempt = attempt}
        end
        -- what changed in t: a value, or nil when unchanged (an args or tags
        -- table created here counts only if something was put in it)
        local function changed(t, name0, args, args0, tags, tags0, priority)
          local a, g = t.args, t.tags
          if a == args0 and (args ~= nil or next(a) == nil) then a = nil end
          if g == tags0 and (tags ~= nil or next(g) == nil) then g = nil end
          return t.priority ~= priority and t.priority or nil, t.name ~= name0 and t.name or nil, a, g
        end
        local function intercept(fn, held, id, name, args, tags, priority, attempt)
          local t = view(id, name, args, tags, priority, attempt)
          local name0, args0, tags0 = t.name, t.args, t.tags
          local decision, seconds = fn(t, held)
          return decision, seconds, changed(t, name0, args, args0, tags, tags0, priority)
        end
        local function when(fn, ok, v, id, name, args, tags, priority, attempt)
          local result
          if ok then result = {ok = true, value = v} else result = {ok = false, error = v} end
          return fn(view(id, name, args, tags, priority, attempt), result) and true or false
        end
        return intercept, when
        """
}

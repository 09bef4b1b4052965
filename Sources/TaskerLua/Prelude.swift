/// Lua helpers compiled once at start-up. Building the task view `t` here,
/// with constant keys, costs a fraction of pushing each field from Swift;
/// `name`, `args` and `tags` are filled in only when read, and only what
/// the callback changed comes back.
enum Prelude {
    static let source = """
        local next, rawget, rawset, setmetatable = next, rawget, rawset, setmetatable
        local lazy = {__index = function(t, k)
          if k == "args" or k == "tags" then
            local v = {}
            rawset(t, k, v)
            return v
          elseif k == "name" then
            return "task-" .. rawget(t, "id")
          end
        end}
        local function view(id, name, args, tags, priority, attempt)
          if name == nil and args == nil and tags == nil then
            -- the common case: half the hash part, half the garbage
            return setmetatable({id = id, priority = priority, attempt = attempt}, lazy)
          end
          return setmetatable({id = id, name = name, args = args, tags = tags,
                               priority = priority, attempt = attempt}, lazy)
        end
        -- a field that changed, or nil (an args or tags table made on first
        -- read counts only if something was put in it)
        local function part(t, k, given)
          local v = rawget(t, k)
          if v == given or (given == nil and type(v) == "table" and next(v) == nil) then return nil end
          return v
        end
        local function intercept(fn, held, id, name, args, tags, priority, attempt)
          local t = view(id, name, args, tags, priority, attempt)
          local decision, seconds = fn(t, held)
          local p, n = rawget(t, "priority"), rawget(t, "name")
          return decision, seconds, p ~= priority and p or nil, n ~= name and n or nil,
                 part(t, "args", args), part(t, "tags", tags)
        end
        local function when(fn, ok, v, id, name, args, tags, priority, attempt)
          local result
          if ok then result = {ok = true, value = v} else result = {ok = false, error = v} end
          return fn(view(id, name, args, tags, priority, attempt), result) and true or false
        end
        return intercept, when
        """
}

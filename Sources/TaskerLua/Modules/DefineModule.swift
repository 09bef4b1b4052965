import CLua
import CLuaShim
import TaskerCore

/// `tasker.define(name [, opts], fn) -> add_fn`: a named task function
/// whose args and values are JSON, the unit that can later run on another
/// machine. Without a store it runs in this process like any task:
/// `add_fn{args=, id=, after=, …}` adds a task whose body calls
/// `fn(ctx, args)`. Written in Lua (the body must yield like any task body);
/// `add_fn` tail-calls `tasker.add`, so its errors name the caller's line.
final class DefineModule: LuaModule {
    unowned let runtime: LuaRuntime

    init(runtime: LuaRuntime) { self.runtime = runtime }

    static let source = """
        local usage, add, encode, decode, pack, unpack, spec_fields, remote, note, queued, check, fast_name, null, mask = ...
        local defined = {}
        -- With a store, an attempt lost with its worker is tried again
        -- unless the task says how to retry.
        local lost_retry = {attempts = 4, delay = 1, when = function(err)
          return type(err) == "table" and err.kind == "lost"
        end}
        -- "src=in/a.png, dst=out/a.png": a task's args in its default name,
        -- so the status line, the summary and `show` tell the tasks apart.
        -- A name is shown everywhere: what looks secret in args is not in it
        -- (the rule of --var keys: token, secret, passw, key, auth…).
        local secret_parts = {\(secretWords.map { "\"\($0)\"" }.joined(separator: ", "))}
        -- Keys repeat from task to task: each is looked at once (a bounded
        -- memo, so a run of unique keys does not grow it for ever).
        local secret_seen, secret_seen_count = {}, 0
        local function secret_key(k)
          local known = secret_seen[k]
          if known ~= nil then return known end
          local lower = tostring(k):lower()
          known = false
          for _, p in ipairs(secret_parts) do if lower:find(p, 1, true) then known = true; break end end
          if secret_seen_count < 4096 then secret_seen[k] = known; secret_seen_count = secret_seen_count + 1 end
          return known
        end
        local function shown_value(k, v)
          local t = type(v)
          if t == "table" then return "{…}" end
          if k ~= nil and secret_key(k) then return "***" end
          -- json.null's tostring is an address: a name, and so the task's
          -- identity, would change from run to run
          if v == null then return "null" end
          if t ~= "string" then return tostring(v) end
          if v:find("://", 1, true) then
            v = v:gsub("(//[^/@:]*):[^/@]*@", "%1:***@")
            v = v:gsub("([?&])([^=&#]+)=([^&#]*)", function(sep, key, value)
              return sep .. key .. "=" .. (secret_key(key) and "***" or value)
            end)
          end
          return v
        end
        local function shown_pair(k, v)
          if math.type(k) == "integer" then return shown_value(nil, v) end
          return tostring(k) .. "=" .. shown_value(k, v)
        end
        -- Integers by value, then anything else by its text.
        local function key_order(a, b)
          local ta, tb = math.type(a), math.type(b)
          if ta == "integer" and tb == "integer" then return a < b end
          if not ta and not tb and type(a) == "string" and type(b) == "string" then return a < b end
          local sa, sb = tostring(a), tostring(b)
          if sa ~= sb then return sa < sb end
          -- 1 and "1": the number first (equal, they took the order pairs
          -- gave, which changes from run to run, and the name with it)
          return type(a) < type(b)
        end
        -- Runs once per task (its default name): one key, the usual case,
        -- is shown without sorting or gathering (a fifth of the time).
        local function short_args(args)
          if type(args) ~= "table" then return args ~= nil and shown_value(nil, args) or nil end
          local first, value = next(args)
          if first == nil then return nil end
          local text
          if next(args, first) == nil then
            text = shown_pair(first, value)
          else
            local keys, n = {}, 0
            for k in pairs(args) do n = n + 1; keys[n] = k end
            table.sort(keys, key_order)
            local parts = {}
            for i, k in ipairs(keys) do
              if i > 8 then parts[i] = "…"; break end
              parts[i] = shown_pair(k, args[k])
            end
            text = table.concat(parts, ", ")
          end
          if #text > 60 then
            -- masked before the cut: a secret cut in half is no longer found
            text = mask(text)
          end
          if #text > 60 then
            -- over 60 characters: the first 59 and "…" (cut by bytes, a
            -- text of fewer characters lost its end, or half of one)
            local ok, past = pcall(utf8.offset, text, 61)
            if not ok then
              text = text:sub(1, 60) .. "…"
            elseif past and past <= #text then
              text = text:sub(1, utf8.offset(text, 60) - 1) .. "…"
            end
          end
          return text
        end
        local function define(name, opts, fn, ...)
          if fn == nil and type(opts) == "function" then fn, opts = opts, nil end
          for i = 1, select("#", ...) do
            if select(i, ...) ~= nil then
              usage("tasker.define takes a name, options and a function, and got " .. type(select(i, ...)) .. " as argument #" .. (i + 3), 2)
            end
          end
          if type(name) ~= "string" or name == "" then
            usage("bad argument #1 to 'tasker.define' (non-empty string expected, got " .. type(name) .. ")", 2)
          end
          if defined[name] then usage("tasker.define: '" .. name .. "' is already defined", 2) end
          if opts ~= nil and type(opts) ~= "table" then
            usage("bad argument #2 to 'tasker.define' (table expected, got " .. type(opts) .. ")", 2)
          end
          if type(fn) ~= "function" then
            usage("bad argument #" .. (opts == nil and 2 or 3) .. " to 'tasker.define' (function expected, got " .. type(fn) .. ")", 2)
          end
          local defaults = {}
          for k, v in pairs(opts or {}) do
            if not spec_fields[k] then
              usage("unknown option '" .. tostring(k) .. "' to 'tasker.define' (spec fields other than run, args and id)", 2)
            end
            defaults[k] = v
          end
          -- the options are read as tasker.add reads a spec: a bad one is
          -- an error here, at the define, not at the first add
          note(name, fn, defaults)
          local function body(ctx)
            -- A body captures the same values with a store or without, so
            -- a task's identity (and ctx.idempotency_key) is the same.
            if queued() then return remote(name, ctx.args) end
            local results = pack(fn(ctx, ctx.args))
            for i = 1, results.n do
              if results[i] ~= nil then
                local ok, err = pcall(encode, results[i])
                if not ok then
                  error("defined task '" .. name .. "' returned a value JSON cannot hold (value #" .. i .. ": "
                        .. tostring(type(err) == "table" and err.message or err) .. ")", 0)
                end
              end
            end
            return unpack(results, 1, results.n)
          end
          defined[name] = body
          return function(spec, ...)
            -- `add_fn(spec, {timeout = 5})` would run without the timeout
            for i = 1, select("#", ...) do
              local extra = select(i, ...)
              if extra ~= nil then
                usage("'" .. name .. "' takes one argument, the spec table, and got " .. type(extra) .. " as argument #"
                      .. (i + 1) .. "; options go in the spec: " .. name .. "{args = {...}, timeout = 5}", 2)
              end
            end
            if spec == nil then spec = {} end
            if type(spec) ~= "table" then
              usage("bad argument #1 to '" .. name .. "' (table expected, got " .. type(spec) .. ")", 2)
            end
            local s = {}
            for k, v in pairs(defaults) do s[k] = v end
            for k, v in pairs(spec) do
              if k == "run" then usage("'" .. name .. "' runs its defined function: 'run' cannot be given", 2) end
              s[k] = v
            end
            if s.args ~= nil then
              local problem = check(s.args)
              if problem then usage("'" .. name .. "': args must be JSON (" .. problem .. ")", 2) end
            end
            if s.name == nil then
              s.name = fast_name(name, s.args)
              if not s.name then
                local shown = short_args(s.args)
                s.name = shown and (name .. "(" .. shown .. ")") or name
              end
            end
            s.run = body
            if queued() and s.retry == nil then s.retry = lost_retry end
            return add(s)
          end
        end
        -- A worker starts a claimed attempt: the task's body with the args.
        local function start(name, args_json, timeout)
          local body = defined[name]
          if not body then return nil, "no task function '" .. name .. "' is defined by this worker's file" end
          local ok, args = true, args_json  -- a table: decoded already (the tagged form)
          if type(args_json) == "string" then ok, args = pcall(decode, args_json) end
          if not ok then return nil, "the args of '" .. name .. "' are not JSON" end
          -- named as the coordinator names a task added without a name
          -- (`resize(src=a.png)`), so ctx.name and the worker's logs read
          -- as they would in one process
          local shown_name = fast_name(name, args)
          if not shown_name then
            local shown = short_args(args)
            shown_name = shown and (name .. "(" .. shown .. ")") or name
          end
          return add{name = shown_name, args = args, run = body, timeout = timeout}
        end
        return define, start
        """

    /// Spec fields `opts` may set for every task of a definition.
    static let optionFields = ["name", "tags", "priority", "timeout", "retry", "after", "when", "start", "delay", "key"]

    func install(in runtime: LuaRuntime) {
        let L = runtime.L
        let s = LuaStack(L)
        let top = lua_gettop(L)
        defer { lua_settop(L, top) }
        pushSource(Self.source, named: "=[tasker.define]", in: L)
        push({ L in DefineModule.this(L!).raiseUsage(L!) }, in: L)
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(LUA_RIDX_GLOBALS))
        let globals = lua_gettop(L)
        s.rawGet(globals, "tasker")
        s.rawGet(-1, "add")
        tasker_remove(L, -2)
        s.rawGet(globals, "json")
        s.rawGet(-1, "encode")
        s.rawGet(-2, "decode")
        tasker_remove(L, -3)
        s.rawGet(globals, "table")
        s.rawGet(-1, "pack")
        s.rawGet(-2, "unpack")
        tasker_remove(L, -3)
        tasker_remove(L, globals)  // leaves: chunk, usage, add, encode, decode, pack, unpack
        s.newTable(hash: Int32(Self.optionFields.count))
        for f in Self.optionFields {
            s.push(true)
            s.rawSet(-2, f)
        }
        push({ L in DefineModule.this(L!).remoteCall(L!) }, in: L)
        // Named in package.loaded, so a defined task's identity (which
        // walks what its body captures) stays the same from run to run,
        // with a store or without, and `--resume --store` can reuse it.
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(LUA_RIDX_GLOBALS))
        s.rawGet(-1, "package")
        s.rawGet(-1, "loaded")
        s.newTable(hash: 2)
        lua_pushvalue(L, -5)
        s.rawSet(-2, "call")
        push({ L in
            lua_pushboolean(L, DefineModule.this(L!).runtime.options.remote != nil ? 1 : 0)
            return 1
        }, in: L)
        lua_pushvalue(L, -1)
        s.rawSet(-3, "queued")
        lua_rotate(L, -5, 1)  // queued below package, loaded, module table and globals
        s.rawSet(-2, "tasker.queue")
        s.pop(3)  // leaves …, remote, queued
        push({ L in DefineModule.this(L!).note(L!) }, in: L)
        lua_rotate(L, -2, 1)  // …, remote, note, queued
        push({ L in DefineModule.this(L!).jsonProblem(L!) }, in: L)
        push({ L in DefineModule.this(L!).fastName(L!) }, in: L)
        lua_pushlightuserdata(L, JSONModule.null)
        push({ L in
            let s = LuaStack(L!)
            s.push(SecretMask.shared.mask(s.string(1) ?? ""))
            return 1
        }, in: L)
        guard tasker_pcall_traceback(L, 14, 2) == LUA_OK else {
            preconditionFailure("tasker.define did not load: \(s.describe(-1))")
        }
        startRef = luaL_ref(L, tasker_registryindex())
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(LUA_RIDX_GLOBALS))
        s.rawGet(-1, "tasker")
        lua_pushvalue(L, -3)
        s.rawSet(-2, "define")
    }

    /// The Lua function a worker starts a claimed attempt with.
    private(set) var startRef: Int32 = LUA_NOREF

    /// Each definition's version: a hash of its function as task identities
    /// hash a body (bytecode without line numbers, and what it captures, by
    /// value), so moving code or editing comments keeps it and editing the
    /// body changes it; nil when it cannot be taken (it captures a coroutine…).
    private(set) var versions: [String: String?] = [:]

    /// What the coordinator said of the attempts a worker runs: the
    /// attempt's number there and the task's idempotency key there, so
    /// `ctx` reads the same as in one process.
    struct ClaimedContext {
        var attempt: Int
        var key: String?
    }
    var claimed: [TaskID: ClaimedContext] = [:]

    /// `note(name, fn)`: records a definition's version (never raises).
    func note(_ L: OpaquePointer) -> Int32 {
        guard let name = LuaStack(L).string(1) else { return 0 }
        if lua_type(L, 3) == LUA_TTABLE {
            lua_pushvalue(L, 2)
            LuaStack(L).rawSet(3, "run")
            let top = lua_gettop(L)
            do {
                _ = try SpecReader(runtime: runtime, L: L, function: "tasker.define").read(3, argument: 2)
            } catch {
                guard case .usage(let m) = error else { return TASKER_RAISE }
                return runtime.usage(L, m.replacingOccurrences(of: "in 'tasker.define' spec", with: "in 'tasker.define' options"))
            }
            lua_settop(L, top)
            lua_pushnil(L)
            LuaStack(L).rawSet(3, "run")
        }
        versions[name] = runtime.identities.version(ofFunctionAt: 2, in: L)
        return 0
    }

    /// `usage(message, level)`: a usage error naming the line `level` calls up.
    func raiseUsage(_ L: OpaquePointer) -> Int32 {
        let s = LuaStack(L)
        let level = Int32(s.integer(2) ?? 1)
        runtime.pushErrorTable(L, kind: "usage", message: s.string(1) ?? "usage error", where: s.whereString(level: level))
        return TASKER_RAISE
    }
}

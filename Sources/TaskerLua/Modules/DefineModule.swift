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
        local usage, add, encode, pack, unpack, spec_fields = ...
        local defined = {}
        return function(name, opts, fn)
          if fn == nil and type(opts) == "function" then fn, opts = opts, nil end
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
          defined[name] = true
          local function body(ctx)
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
          return function(spec)
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
              local ok, err = pcall(encode, s.args)
              if not ok then
                usage("'" .. name .. "': args must be JSON (" .. tostring(type(err) == "table" and err.message or err) .. ")", 2)
              end
            end
            s.name = s.name or name
            s.run = body
            return add(s)
          end
        end
        """

    /// Spec fields `opts` may set for every task of a definition.
    static let optionFields = ["name", "tags", "priority", "timeout", "retry", "after", "when", "start", "delay", "key"]

    func install(in runtime: LuaRuntime) {
        let L = runtime.L
        let s = LuaStack(L)
        let top = lua_gettop(L)
        defer { lua_settop(L, top) }
        var source = Self.source
        let status = source.withUTF8 { b in
            b.withMemoryRebound(to: CChar.self) { tasker_loadbuffer(L, $0.baseAddress, $0.count, "=[tasker.define]") }
        }
        precondition(status == LUA_OK, "the tasker.define source does not compile")
        push({ L in DefineModule.this(L!).raiseUsage(L!) }, in: L)
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(LUA_RIDX_GLOBALS))
        let globals = lua_gettop(L)
        s.rawGet(globals, "tasker")
        s.rawGet(-1, "add")
        tasker_remove(L, -2)
        s.rawGet(globals, "json")
        s.rawGet(-1, "encode")
        tasker_remove(L, -2)
        s.rawGet(globals, "table")
        s.rawGet(-1, "pack")
        s.rawGet(-2, "unpack")
        tasker_remove(L, -3)
        tasker_remove(L, globals)  // leaves: chunk, usage, add, encode, pack, unpack
        s.newTable(hash: Int32(Self.optionFields.count))
        for f in Self.optionFields {
            s.push(true)
            s.rawSet(-2, f)
        }
        guard tasker_pcall_traceback(L, 6, 1) == LUA_OK else {
            preconditionFailure("tasker.define did not load: \(s.describe(-1))")
        }
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(LUA_RIDX_GLOBALS))
        s.rawGet(-1, "tasker")
        lua_pushvalue(L, -3)
        s.rawSet(-2, "define")
    }

    /// `usage(message, level)`: a usage error naming the line `level` calls up.
    func raiseUsage(_ L: OpaquePointer) -> Int32 {
        let s = LuaStack(L)
        let level = Int32(s.integer(2) ?? 1)
        runtime.pushErrorTable(L, kind: "usage", message: s.string(1) ?? "usage error", where: s.whereString(level: level))
        return TASKER_RAISE
    }
}

import CLua
import CLuaShim

/// A Lua module that owns its state: a type whose functions come from one
/// registration table (Lua's `luaL_Reg` shape) and reach their module
/// instance through an upvalue, not through fields of the runtime. The
/// runtime keeps the list (`LuaRuntime.modules`) and installs each once the
/// state exists.
///
///     final class Greeter: LuaModule {
///         var greeted = 0
///         static let functions: [(String, tasker_SwiftFunction)] = [
///             ("hello", { L in Greeter.this(L!).hello(L!) }),
///         ]
///         func hello(_ L: OpaquePointer) -> Int32 { greeted += 1; LuaStack(L).push("hello"); return 1 }
///         func install(in runtime: LuaRuntime) { pushTable(Self.functions, in: runtime.L) /* then set a global */ }
///     }
protocol LuaModule: AnyObject {
    /// Registers the module's functions and globals; runs once, on the loop.
    func install(in runtime: LuaRuntime)
    /// The run is over (before the summary): release what the run held.
    func runEnded()
}

extension LuaModule {
    func runEnded() {}

    /// The module instance a function was pushed by (its upvalue 2).
    static func this(_ L: OpaquePointer) -> Self {
        Unmanaged<Self>.fromOpaque(lua_touserdata(L, tasker_upvalueindex(2))!).takeUnretainedValue()
    }

    /// Calls `body` with the module instance a function was pushed by,
    /// borrowed (no retain: the runtime keeps its modules longer than the
    /// state whose functions call them). For functions called per task.
    @inline(__always)
    static func with(_ L: OpaquePointer, _ body: (Self) -> Int32) -> Int32 {
        Unmanaged<Self>.fromOpaque(lua_touserdata(L, tasker_upvalueindex(2))!)._withUnsafeGuaranteedRef(body)
    }

    /// Pushes `fn` as a Lua function bound to this instance. Unretained: the
    /// runtime keeps its modules as long as the state lives.
    func push(_ fn: tasker_SwiftFunction, in L: OpaquePointer) {
        lua_pushlightuserdata(L, Unmanaged.passUnretained(self).toOpaque())
        LuaStack(L).push(fn, upvalues: 1)
    }

    /// The same with an integer the function reads as its upvalue 3.
    func push(_ fn: tasker_SwiftFunction, in L: OpaquePointer, upvalue: Int) {
        lua_pushlightuserdata(L, Unmanaged.passUnretained(self).toOpaque())
        lua_pushinteger(L, lua_Integer(upvalue))
        LuaStack(L).push(fn, upvalues: 2)
    }

    /// Pushes a new table holding `functions`, each bound to this instance.
    func pushTable(_ functions: [(String, tasker_SwiftFunction)], in L: OpaquePointer) {
        let s = LuaStack(L)
        s.newTable(hash: Int32(functions.count))
        for (name, fn) in functions {
            push(fn, in: L)
            s.rawSet(-2, name)
        }
    }

    /// Creates the metatable `name` (luaL_newmetatable also sets __name)
    /// with `index` as __index, `methods` in a table it reads as its
    /// upvalue 3, and the metamethods, each bound to this instance;
    /// returns its registry ref.
    func makeMetatable(_ name: String, index: tasker_SwiftFunction, methods: [(String, tasker_SwiftFunction)],
                       metamethods: [(String, tasker_SwiftFunction)], in L: OpaquePointer) -> Int32 {
        let s = LuaStack(L)
        luaL_newmetatable(L, name)
        lua_pushlightuserdata(L, Unmanaged.passUnretained(self).toOpaque())
        if methods.isEmpty {
            s.push(index, upvalues: 1)
        } else {
            pushTable(methods, in: L)
            s.push(index, upvalues: 2)
        }
        s.rawSet(-2, "__index")
        for (event, fn) in metamethods {
            push(fn, in: L)
            s.rawSet(-2, event)
        }
        return s.ref()
    }

    /// Pops the value on top of the stack into the global `name` and
    /// `package.loaded[name]` (so `require(name)` returns it too).
    func setGlobal(_ name: String, in L: OpaquePointer) {
        let s = LuaStack(L)
        let value = lua_gettop(L)
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(LUA_RIDX_GLOBALS))
        lua_pushvalue(L, value)
        s.rawSet(-2, name)
        s.rawGet(-1, "package")
        s.rawGet(-1, "loaded")
        lua_pushvalue(L, value)
        s.rawSet(-2, name)
        lua_settop(L, value - 1)
    }

    /// Compiles a module's Lua source (`name` as its chunk name) and pushes
    /// the chunk; a source that does not compile is a bug of tasker's.
    func pushSource(_ source: String, named name: String, in L: OpaquePointer) {
        var source = source
        let status = source.withUTF8 { b in
            b.withMemoryRebound(to: CChar.self) { tasker_loadbuffer(L, $0.baseAddress, $0.count, name) }
        }
        precondition(status == LUA_OK, "\(name) does not compile")
    }

    /// Pushes the global `library.name` (`json.encode`) without metamethods.
    func pushGlobal(_ library: String, _ name: String, in L: OpaquePointer) {
        let s = LuaStack(L)
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(LUA_RIDX_GLOBALS))
        s.rawGet(-1, library)
        s.rawGet(-1, name)
        tasker_remove(L, -2)
        tasker_remove(L, -2)
    }

    /// Adds `functions`, each bound to this instance, to the `tasker` table
    /// (modules that extend it: `tasker.sleep`, `tasker.exec`, `tasker.use`).
    func addToTaskerTable(_ functions: [(String, tasker_SwiftFunction)], in L: OpaquePointer) {
        let s = LuaStack(L)
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(LUA_RIDX_GLOBALS))
        s.rawGet(-1, "tasker")
        for (name, fn) in functions {
            push(fn, in: L)
            s.rawSet(-2, name)
        }
        s.pop(2)
    }

    /// Replaces `library.name` (a C function of Lua's own, such as
    /// `os.execute`) with `fn` where the caller can yield, keeping the
    /// original for the places that cannot.
    func replaceWithWaitingVariant(_ library: String, _ name: String, _ fn: tasker_SwiftFunction, in L: OpaquePointer) {
        let s = LuaStack(L)
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(LUA_RIDX_GLOBALS))
        s.rawGet(-1, library)
        let lib = lua_gettop(L)
        s.rawGet(lib, name)  // the original
        lua_pushlightuserdata(L, Unmanaged.passUnretained(self).toOpaque())
        tasker_pushwaitingvariant(L, fn)
        s.rawSet(lib, name)
        s.pop(2)
    }
}

import CLua
import CLuaShim
import TaskerCore

/// `tasker.intercept` and `tasker.react`: hooks written in Lua. Owns what
/// the script registered (each `remove` holds its index), and the fiber of
/// every reaction running. Interceptors run synchronously inside the
/// engine's admission of a task (`runInterceptor`), reactors' `when` inside
/// its finish (`reactorWants`); a reaction's `fn` runs later as a fiber of
/// its own (`startReaction`).
final class HookModule: LuaModule {
    /// The runtime keeps this module (a strong reference back would be a
    /// cycle). Checked: cheap since nothing refers weakly to the runtime or
    /// its engines on the per-task path (a weak reference gives an object a
    /// side table, and each retain of it then takes the slow path).
    unowned let runtime: LuaRuntime
    /// What the script registered, by the index its `remove` holds.
    private var registrations: [Registration?] = []
    /// The fiber of each running reaction, by reaction id.
    var reactionFibers: [Int: Fiber] = [:]

    init(runtime: LuaRuntime) { self.runtime = runtime }

    static let functions: [(String, tasker_SwiftFunction)] = [
        ("intercept", { L in HookModule.this(L!).intercept(L!) }),
        ("react", { L in HookModule.this(L!).react(L!) }),
    ]

    func install(in runtime: LuaRuntime) { addToTaskerTable(Self.functions, in: runtime.L) }

    /// Something a script registered that it can take back.
    enum Registration {
        case interceptor(LuaInterceptor)
        case reactor(LuaReactor)
    }

    /// Pushes `{name = ..., remove = function}`, what `tasker.intercept` and
    /// `tasker.react` return.
    func pushRegistrationObject(_ L: OpaquePointer, name: String, _ registration: Registration) {
        let s = LuaStack(L)
        s.newTable(hash: 2)
        s.push(name)
        s.rawSet(-2, "name")
        registrations.append(registration)
        push({ L in HookModule.this(L!).remove(L!) }, in: L, upvalue: registrations.count - 1)
        s.rawSet(-2, "remove")
    }

    /// `obj.remove()`: the registration whose index is upvalue 3 stops applying.
    private func remove(_ L: OpaquePointer) -> Int32 {
        let index = Int(lua_tointegerx(L, tasker_upvalueindex(3), nil))
        switch registrations[index] {
        case .interceptor(let i)?: i.engine.removeInterceptor(i)
        case .reactor(let r)?: r.engine.removeReactor(r)
        case nil: break
        }
        registrations[index] = nil
        return 0
    }

    /// The engine of tasks or of HTTP requests.
    func engine(for target: HookTarget) -> Engine { target == .task ? runtime.engine : runtime.httpEngine }

    /// Reads `on` from the spec table at 1; nil if it is neither.
    static func readTarget(_ L: OpaquePointer) -> HookTarget? {
        let s = LuaStack(L)
        s.rawGet(1, "on")
        defer { s.pop() }
        if s.isNoneOrNil(-1) { return .task }
        switch s.string(-1) {
        case "task": return .task
        case "http": return .http
        default: return nil
        }
    }

    /// A reaction's fiber ended.
    func reactionEnded(_ reaction: Reaction) { reactionFibers[reaction.id] = nil }
}

/// What an interceptor or reactor applies to: `on = "task"` or `"http"`.
enum HookTarget {
    case task, http
}

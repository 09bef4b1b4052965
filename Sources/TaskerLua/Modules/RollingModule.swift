import CLua
import CLuaShim
import TaskerCore

/// `tasker.rolling{hosts=, batch=, max_failures=, pause=, per_host=, name=,
/// run=function(ctx, host) ... end}`: a group handle whose members, one per
/// host (named after it), start batch by batch (Engine+Rolling). `batch`
/// and `max_failures` are counts or percentages of the hosts ("25%");
/// defaults: batch 1, max_failures 0, pause 0, per_host 1. Bad arguments
/// are usage errors at the caller's line.
final class RollingModule: LuaModule {
    unowned let runtime: LuaRuntime
    /// `function(run, host) return function(ctx, ...) return run(ctx, host, ...) end end`.
    private var bind: Int32 = 0

    init(runtime: LuaRuntime) { self.runtime = runtime }

    static let functions: [(String, tasker_SwiftFunction)] = [
        ("rolling", { L in RollingModule.this(L!).rolling(L!) }),
    ]

    static let source = "return function(run, host) return function(ctx, ...) return run(ctx, host, ...) end end"
    static let options: Set<String> = ["hosts", "batch", "max_failures", "pause", "per_host", "name", "run"]

    func install(in runtime: LuaRuntime) {
        let L = runtime.L
        addToTaskerTable(Self.functions, in: L)
        pushSource(Self.source, named: "=[tasker.rolling]", in: L)
        precondition(tasker_pcall(L, 0, 1) == LUA_OK, "tasker.rolling's helper runs")
        bind = LuaStack(L).ref()
    }

    func rolling(_ L: OpaquePointer) -> Int32 {
        let rt = runtime, fn = "tasker.rolling"
        let s = LuaStack(L)
        guard s.type(1) == LUA_TTABLE else { return rt.argError(L, fn, 1, "table") }
        lua_settop(L, 1)
        let o = OptionReader(L: L, table: 1, function: fn, known: Self.options)
        if let message = o.unknownOption() { return rt.usage(L, message) }
        func bad(_ field: String, _ expected: String) -> Int32 {
            rt.usage(L, "bad field '\(field)' in '\(fn)' (\(expected) expected, got \(s.got(-1, expected: expected)))")
        }
        s.rawGet(1, "run")  // 2
        guard s.type(2) == LUA_TFUNCTION else { return bad("run", "function") }
        s.rawGet(1, "hosts")  // 3
        guard s.type(3) == LUA_TTABLE else { return bad("hosts", "list of hosts") }
        var hosts: [(name: String, address: String)] = []
        for k in stride(from: 1, through: s.rawLength(3), by: 1) {
            s.rawGet(3, k)
            switch RemoteTarget.read(L, at: lua_gettop(L)) {
            case .success(let t?): hosts.append((t.name, t.destination.shown))
            case .success(nil): return rt.usage(L, "bad element #\(k) in '\(fn)' hosts (address string or host object expected, got nil)")
            case .failure(let why): return rt.usage(L, "bad element #\(k) in '\(fn)' hosts" + why.message)
            }
            s.pop()
        }
        let n = hosts.count
        s.rawGet(1, "batch")
        guard let batch = Self.share(L, of: n, atLeastOne: true, default: 1) else { return bad("batch", "integer >= 1 or percentage") }
        s.pop()
        s.rawGet(1, "max_failures")
        guard let maxFailures = Self.share(L, of: n, atLeastOne: false, default: 0) else {
            return bad("max_failures", "integer >= 0 or percentage")
        }
        s.pop()
        s.rawGet(1, "pause")
        let pause = s.isNoneOrNil(-1) ? 0 : s.number(-1)
        guard let pause, pause >= 0, pause.isFinite else { return bad("pause", "non-negative number") }
        s.pop()
        s.rawGet(1, "per_host")
        let perHost = s.isNoneOrNil(-1) ? 1 : s.integer(-1)
        guard let perHost, perHost >= 1 else { return bad("per_host", "integer >= 1") }
        s.pop()
        s.rawGet(1, "name")
        guard s.isNoneOrNil(-1) || s.type(-1) == LUA_TSTRING else { return bad("name", "string") }
        let name = s.string(-1)
        s.pop()
        let groupID = rt.engine.taskCount + 1
        var members: [TaskSpec] = []
        var reused: [Int: TaskValue] = [:]
        members.reserveCapacity(n)
        for (k, h) in hosts.enumerated() {
            let top = lua_gettop(L)
            lua_rawgeti(L, tasker_registryindex(), lua_Integer(bind))
            lua_pushvalue(L, 2)
            s.rawGet(3, k + 1)
            guard tasker_pcall(L, 2, 1) == LUA_OK else { return TASKER_RAISE }
            var p = ParsedSpec(spec: TaskSpec(name: h.name, body: rt.taskBody))
            p.body = lua_gettop(L)
            var spec = p.spec
            // a host done in the run resumed is not done again
            reused[k] = rt.identify(p, as: groupID + k + 1, into: &spec, in: L)
            rt.commit(p, as: groupID + k + 1, into: &spec, in: L)
            members.append(spec)
            lua_settop(L, top)
        }
        let policy = RollingPolicy(batch: batch, maxFailures: maxFailures, pause: pause, perHost: perHost)
        let id = rt.engine.addRolling(TaskSpec(name: name, body: nil), members: members, hosts: hosts.map(\.address),
                                      policy: policy, reused: reused)
        precondition(id == groupID, "group ids are assigned in add order")
        rt.identifyGroup(id, kind: 3, count: members.count)
        HandleModule.push(L, id, metatable: rt.refs.handleMeta)
        return 1
    }

    /// The value on top as a number of the `n` hosts: an integer, or a
    /// percentage ("25%", rounded down; at least one for a batch); nil if bad.
    static func share(_ L: OpaquePointer, of n: Int, atLeastOne: Bool, default value: Int) -> Int? {
        let s = LuaStack(L)
        if s.isNoneOrNil(-1) { return value }
        if lua_type(L, -1) == LUA_TNUMBER {
            guard let v = s.integer(-1), v >= (atLeastOne ? 1 : 0) else { return nil }
            return v
        }
        guard lua_type(L, -1) == LUA_TSTRING, let text = s.string(-1), text.hasSuffix("%"),
              let pct = Double(text.dropLast().trimmingCharacters(in: .whitespaces)),
              pct >= 0, pct <= 100, !atLeastOne || pct > 0 else { return nil }
        let share = Int((Double(n) * pct / 100).rounded(.down))
        return atLeastOne ? max(1, share) : share
    }
}

import CLua
import CLuaShim
import TaskerCore

/// The `tasker` table (README: Tasks): adding tasks, waiting for several,
/// groups, schedules, pausing starts, the exit; `tasker.args` and
/// `tasker.vars`. Installed first: other modules add their functions to the
/// table (`tasker.sleep`, `tasker.exec`, `tasker.use`, `tasker.intercept`…).
final class TaskerModule: LuaModule {
    /// The runtime keeps this module (a strong reference back would be a
    /// cycle). Checked: cheap since nothing refers weakly to the runtime or
    /// its engines on the per-task path (a weak reference gives an object a
    /// side table, and each retain of it then takes the slow path).
    unowned let runtime: LuaRuntime

    init(runtime: LuaRuntime) { self.runtime = runtime }

    static let functions: [(String, tasker_SwiftFunction)] = [
        ("add", { L in TaskerModule.with(L!) { $0.add(L!, $0.runtime) } }),
        ("all", { L in TaskerModule.this(L!).combine(L!, "tasker.all") }),
        ("any", { L in TaskerModule.this(L!).combine(L!, "tasker.any") }),
        ("every", { L in TaskerModule.this(L!).every(L!) }),
        ("exit", { L in TaskerModule.this(L!).exit(L!) }),
        ("parallel", { L in TaskerModule.this(L!).group(L!, serial: false) }),
        ("pause", { L in TaskerModule.this(L!).runtime.pauseStarts(); return 0 }),
        ("resume", { L in TaskerModule.this(L!).runtime.resumeStarts(); return 0 }),
        ("serial", { L in TaskerModule.this(L!).group(L!, serial: true) }),
        ("some", { L in TaskerModule.this(L!).combine(L!, "tasker.some") }),
    ]

    /// Makes the `tasker` global (and `require("tasker")`).
    func install(in runtime: LuaRuntime) {
        let L = runtime.L
        let s = LuaStack(L)
        pushTable(Self.functions, in: L)
        s.newTable(array: Int32(runtime.options.args.count))
        for (i, a) in runtime.options.args.enumerated() {
            s.push(a)
            s.rawSet(-2, i + 1)
        }
        s.rawSet(-2, "args")
        s.newTable(hash: Int32(runtime.options.vars.count))
        for (k, v) in runtime.options.vars {
            s.push(v)
            s.rawSet(-2, k)
        }
        s.rawSet(-2, "vars")
        setGlobal("tasker", in: L)
    }

    /// `rt` is `runtime`, passed so that it is borrowed, not retained.
    func add(_ L: OpaquePointer, _ rt: LuaRuntime) -> Int32 {
        // `--help` and `list` go on past an add (the engine is closed: the
        // task never starts), so declarations after it are described too;
        // not past a loop of thousands (completion runs it at every TAB)
        if rt.options.describeOnly {
            rt.chunk.describedAdds += 1
            if rt.chunk.describedAdds > LuaRuntime.describedAddsKept { return rt.describeStop(L) }
        }
        let top = lua_gettop(L)
        // `tasker.add(fn, {timeout = 5})` reads naturally and would run
        // without the timeout: options belong in the spec.
        if let extra = Self.extraArgument(L, after: 1) {
            return rt.usage(L, "tasker.add takes one argument, the body or a spec table, and got \(LuaStack(L).typeName(extra)) "
                            + "as argument #\(extra); options go in the spec: tasker.add{run = fn, timeout = 5}")
        }
        let parsed: ParsedSpec
        do {
            parsed = try SpecReader(runtime: rt, L: L, function: "tasker.add").read(1, argument: 1)
        } catch {
            guard case .usage(let m) = error else { return TASKER_RAISE }
            return rt.usage(L, m)
        }
        if let explicitID = parsed.explicitID, rt.identities.isTaken(explicitID) {
            return rt.usage(L, "tasker.add: id '\(explicitID)' is already used by another task in this run (ids name tasks across runs, for --resume)")
        }
        let id = rt.engine.taskCount + 1
        var spec = parsed.spec
        if case .reaction? = rt.driver.current?.kind { spec.ownedByReaction = true }
        let reused = rt.identify(parsed, as: id, into: &spec, in: L)
        rt.commit(parsed, as: id, into: &spec, in: L)
        let added = reused.map { rt.engine.addReused(spec, value: $0) } ?? rt.engine.add(spec)
        precondition(added == id, "task ids are assigned in add order")
        if rt.engine.leader(of: id) != nil { rt.dropParts(id) }
        lua_settop(L, top)
        HandleModule.push(L, id, metatable: rt.refs.handleMeta)
        return 1
    }

    /// `tasker.all`, `tasker.any`, `tasker.some`: answer at once when the
    /// handles allow it; otherwise suspend until they do.
    func combine(_ L: OpaquePointer, _ fn: String) -> Int32 {
        let rt = runtime
        guard let ids = rt.handleList(L, 1, allowSingle: false) else {
            return rt.argError(L, fn, 1, "list of task handles")
        }
        if let me = rt.waitsOnItself(ids) {
            return rt.usage(L, "\(fn): task '\(rt.engine.name(me))' cannot wait for itself (it would never finish)")
        }
        switch fn {
        case "tasker.all":
            if let failed = ids.first(where: { rt.engine.outcome($0).map { $0.state != .succeeded } ?? false }) {
                for id in ids where !rt.engine.isFinished(id) {
                    rt.engine.cancel(id, reason: "tasker.all: task '\(rt.engine.name(failed))' did not succeed")
                }
                let status = rt.raise(L, rt.engine.outcome(failed)!.failure!)
                if rt.isMainThread(L) { rt.rememberHandedError(L, -1, from: failed) }
                return status
            }
            if ids.allSatisfy({ rt.engine.isFinished($0) }) {
                _ = rt.push(.values(ids, compact: false), onto: L)
                tasker_remove(L, -2)
                return 1
            }
            if let status = rt.cannotWait(L, fn) { return status }
            return rt.suspend(L, .wait(AllWaiter(ids: ids)))
        case "tasker.any":
            guard !ids.isEmpty else { return rt.usage(L, "tasker.any: the list of handles is empty (nothing could succeed)") }
            if let winner = ids.first(where: { rt.engine.state($0) == .succeeded }) {
                for id in ids where id != winner && !rt.engine.isFinished(id) {
                    rt.engine.cancel(id, reason: "tasker.any: task '\(rt.engine.name(winner))' succeeded first")
                }
                guard case .succeeded(let v)? = rt.engine.outcome(winner) else { return 0 }
                return rt.pushValues(L, v)
            }
            if ids.allSatisfy({ rt.engine.isFinished($0) }) {
                let status = rt.raise(L, anyFailure(ids, engine: rt.engine))
                if rt.isMainThread(L) { rt.rememberHandedError(L, -1, from: ids[0]) }
                return status
            }
            if let status = rt.cannotWait(L, fn) { return status }
            return rt.suspend(L, .wait(AnyWaiter(ids: ids)))
        default:
            if ids.allSatisfy({ rt.engine.isFinished($0) }) {
                _ = rt.push(.values(ids, compact: true), onto: L)
                tasker_remove(L, -2)
                return 1
            }
            if let status = rt.cannotWait(L, fn) { return status }
            return rt.suspend(L, .wait(SomeWaiter(ids: ids)))
        }
    }

    /// `tasker.parallel(specs [, opts])`, `tasker.serial(specs [, opts])`.
    func group(_ L: OpaquePointer, serial: Bool) -> Int32 {
        let rt = runtime
        let fn = serial ? "tasker.serial" : "tasker.parallel"
        let s = LuaStack(L)
        guard s.type(1) == LUA_TTABLE else { return rt.argError(L, fn, 1, "list of task specs") }
        var concurrency = Int.max
        var failFast = true
        var name: String?
        if !s.isNoneOrNil(2) {
            guard s.type(2) == LUA_TTABLE else { return rt.argError(L, fn, 2, "table") }
            let options = OptionReader(L: L, table: 2, function: fn, known: ["concurrency", "fail_fast", "name"])
            if let message = options.unknownOption() { return rt.usage(L, message) }
            s.rawGet(2, "concurrency")
            if !s.isNoneOrNil(-1) {
                guard let c = s.integer(-1), c >= 1 else {
                    return rt.usage(L, "bad field 'concurrency' in '\(fn)' options (integer >= 1 expected, got \(s.got(-1, expected: "integer >= 1")))")
                }
                concurrency = c
            }
            s.rawGet(2, "fail_fast")
            if !s.isNoneOrNil(-1) {
                guard s.type(-1) == LUA_TBOOLEAN else {
                    return rt.usage(L, "bad field 'fail_fast' in '\(fn)' options (boolean expected, got \(s.got(-1, expected: "boolean")))")
                }
                failFast = s.boolean(-1)
            }
            s.rawGet(2, "name")
            if !s.isNoneOrNil(-1) {
                guard let n = s.string(-1) else {
                    return rt.usage(L, "bad field 'name' in '\(fn)' options (string expected, got \(s.got(-1, expected: "string")))")
                }
                name = n
            }
            s.pop(3)
        }
        if serial {
            concurrency = 1
            failFast = true
        }
        let count = s.rawLength(1)
        let groupID = rt.engine.taskCount + 1
        var members: [TaskSpec] = []
        var reused: [Int: TaskValue] = [:]
        members.reserveCapacity(count)
        let reader = SpecReader(runtime: rt, L: L, function: fn)
        for k in stride(from: 1, through: count, by: 1) {
            let top = lua_gettop(L)
            s.rawGet(1, k)
            do {
                let parsed = try reader.read(-1, argument: 1)
                if let explicitID = parsed.explicitID, rt.identities.isTaken(explicitID) {
                    return rt.usage(L, "\(fn): id '\(explicitID)' is already used by another task in this run (member #\(k))")
                }
                var spec = parsed.spec
                reused[k - 1] = rt.identify(parsed, as: groupID + k, into: &spec, in: L)
                rt.commit(parsed, as: groupID + k, into: &spec, in: L)
                members.append(spec)
            } catch {
                guard case .usage(let m) = error else { return TASKER_RAISE }
                return rt.usage(L, "\(m) (member #\(k))")
            }
            lua_settop(L, top)
        }
        let spec = TaskSpec(name: name, body: nil)
        let id = rt.engine.addGroup(spec, members: members, concurrency: concurrency, failFast: failFast, reused: reused)
        precondition(id == groupID, "group ids are assigned in add order")
        rt.identifyGroup(id, kind: serial ? 2 : 1, count: members.count)
        HandleModule.push(L, id, metatable: rt.refs.handleMeta)
        return 1
    }

    static let minimumInterval = 0.001

    /// `tasker.every(seconds, spec)`.
    /// The first argument past the first `count` that is not nil (trailing
    /// nils, an unpacked list's, are not a mistake).
    static func extraArgument(_ L: OpaquePointer, after count: Int32) -> Int32? {
        let top = lua_gettop(L)
        guard top > count else { return nil }
        return ((count + 1)...top).first { lua_type(L, $0) != LUA_TNIL }
    }

    func every(_ L: OpaquePointer) -> Int32 {
        let rt = runtime
        let s = LuaStack(L)
        guard let interval = s.number(1), interval > 0, interval.isFinite else {
            return rt.argError(L, "tasker.every", 1, "positive number")
        }
        // A shorter interval would fire faster than the loop can turn.
        guard interval >= Self.minimumInterval else {
            return rt.usage(L, "bad argument #1 to 'tasker.every' (an interval of at least \(Self.minimumInterval) s expected, got \(interval))")
        }
        if let extra = Self.extraArgument(L, after: 2) {
            return rt.usage(L, "tasker.every takes an interval and a body or spec table, and got \(s.typeName(extra)) "
                            + "as argument #\(extra); options go in the spec: tasker.every(60, {run = fn, timeout = 5})")
        }
        let parsed: ParsedSpec
        do {
            parsed = try SpecReader(runtime: rt, L: L, function: "tasker.every").read(2, argument: 2)
        } catch {
            guard case .usage(let m) = error else { return TASKER_RAISE }
            return rt.usage(L, m)
        }
        let scheduleID = rt.engine.taskCount + 1
        var template = parsed.spec
        rt.commit(parsed, as: scheduleID, into: &template, in: L)
        template.after = []
        template.start = true
        template.key = nil
        var scheduleSpec = TaskSpec(name: parsed.spec.name, body: nil)
        scheduleSpec.after = parsed.spec.after
        scheduleSpec.when = parsed.spec.when
        scheduleSpec.start = parsed.spec.start
        let id = rt.engine.addSchedule(scheduleSpec, interval: interval) { [unowned rt] _ in
            let instance = rt.engine.taskCount + 1
            var spec = template
            rt.copyParts(from: scheduleID, to: instance, into: &spec, in: rt.L)
            return spec
        }
        precondition(id == scheduleID, "schedule ids are assigned in add order")
        lua_settop(L, 2)
        HandleModule.push(L, id, metatable: rt.refs.handleMeta)
        return 1
    }

    /// `tasker.exit([code])`: cancel what is left and end the run.
    func exit(_ L: OpaquePointer) -> Int32 {
        let rt = runtime
        let s = LuaStack(L)
        var code = 0
        if !s.isNoneOrNil(1) {
            guard let c = s.integer(1), c >= 0, c <= 255 else { return rt.argError(L, "tasker.exit", 1, "integer 0-255") }
            code = c
        }
        rt.requestExit(Int32(code))
        if rt.driver.current != nil, lua_isyieldable(L) != 0 { return rt.suspend(L, .exit) }
        // Outside a coroutine (a handler): stop this code with an error the
        // engine ignores, since the run is ending anyway.
        let status = rt.raise(L, TaskFailure(.cancelled, "tasker.exit(\(code))"))
        rt.driver.exitUnwind = lua_topointer(L, -1)
        return status
    }
}

import CLua
import CLuaShim
import TaskerCore

/// The `tasker` module (README: Tasks, Processes): one registration table, one
/// small function per entry.
enum TaskerModule {
    static let functions: [(String, tasker_SwiftFunction)] = [
        ("add", { L in LuaRuntime.from(L!).apiAdd(L!) }),
        ("all", { L in LuaRuntime.from(L!).apiCombine(L!, "tasker.all") }),
        ("any", { L in LuaRuntime.from(L!).apiCombine(L!, "tasker.any") }),
        ("every", { L in LuaRuntime.from(L!).apiEvery(L!) }),
        ("exit", { L in LuaRuntime.from(L!).apiExit(L!) }),
        ("parallel", { L in LuaRuntime.from(L!).apiGroup(L!, serial: false) }),
        ("pause", { L in LuaRuntime.from(L!).pauseStarts(); return 0 }),
        ("resume", { L in LuaRuntime.from(L!).resumeStarts(); return 0 }),
        ("serial", { L in LuaRuntime.from(L!).apiGroup(L!, serial: true) }),
        ("some", { L in LuaRuntime.from(L!).apiCombine(L!, "tasker.some") }),
    ]

    static func install(_ rt: LuaRuntime) -> Int32 {
        let L = rt.L
        let s = LuaStack(L)
        s.newTable(hash: Int32(functions.count + 2))
        for (name, fn) in functions {
            s.push(fn)
            s.rawSet(-2, name)
        }
        s.newTable(array: Int32(rt.options.args.count))
        for (i, a) in rt.options.args.enumerated() {
            s.push(a)
            s.rawSet(-2, i + 1)
        }
        s.rawSet(-2, "args")
        s.newTable(hash: Int32(rt.options.vars.count))
        for (k, v) in rt.options.vars {
            s.push(v)
            s.rawSet(-2, k)
        }
        s.rawSet(-2, "vars")
        return lua_gettop(L)
    }
}

extension LuaRuntime {
    func apiAdd(_ L: OpaquePointer) -> Int32 {
        if options.describeOnly { return describeStop(L) }
        let top = lua_gettop(L)
        let parsed: ParsedSpec
        do {
            parsed = try SpecReader(runtime: self, L: L, function: "tasker.add").read(1, argument: 1)
        } catch {
            guard case .usage(let m) = error else { return TASKER_RAISE }
            return usage(L, m)
        }
        if let explicitID = parsed.explicitID, identities.isTaken(explicitID) {
            return usage(L, "tasker.add: id '\(explicitID)' is already used by another task in this run (ids name tasks across runs, for --resume)")
        }
        let id = engine.taskCount + 1
        var spec = parsed.spec
        if parsed.predicate != 0 { spec.retryWhen = predicate(for: id) }
        if case .reaction? = current?.kind { spec.ownedByReaction = true }
        var reused: String?
        if options.identify || parsed.explicitID != nil {
            let entry = identities.record(id, explicitID: parsed.explicitID, name: parsed.spec.name,
                                          body: parsed.body, args: parsed.args, in: L)
            if !options.reuse.isEmpty, let text = entry.text { reused = options.reuse[text] }
        }
        commit(parsed, as: id, in: L)
        let added: TaskID
        if let reused, let value = storedValues(reused, slot: id, in: L) {
            added = engine.addReused(spec, value: value)
        } else {
            added = engine.add(spec)
        }
        precondition(added == id, "task ids are assigned in add order")
        if engine.leader(of: id) != nil { dropParts(id) }
        lua_settop(L, top)
        modules.handles.push(L, id)
        return 1
    }

    /// `tasker.all`, `tasker.any`, `tasker.some`: answer at once when the
    /// handles allow it; otherwise suspend until they do.
    func apiCombine(_ L: OpaquePointer, _ fn: String) -> Int32 {
        guard let ids = handleList(L, 1, allowSingle: false) else {
            return argError(L, fn, 1, "list of task handles")
        }
        if let me = waitsOnItself(ids) {
            return usage(L, "\(fn): task '\(engine.name(me))' cannot wait for itself (it would never finish)")
        }
        switch fn {
        case "tasker.all":
            if let failed = ids.first(where: { engine.outcome($0).map { $0.state != .succeeded } ?? false }) {
                for id in ids where !engine.isFinished(id) {
                    engine.cancel(id, reason: "tasker.all: task '\(engine.name(failed))' did not succeed")
                }
                let status = raise(L, engine.outcome(failed)!.failure!)
                if isMainThread(L) { rememberHandedError(L, -1, from: failed) }
                return status
            }
            if ids.allSatisfy({ engine.isFinished($0) }) {
                _ = push(.values(ids, compact: false), onto: L)
                tasker_remove(L, -2)
                return 1
            }
            if let status = cannotWait(L, fn) { return status }
            return suspend(L, .wait(AllWaiter(ids: ids)))
        case "tasker.any":
            guard !ids.isEmpty else { return usage(L, "tasker.any: the list of handles is empty (nothing could succeed)") }
            if let winner = ids.first(where: { engine.state($0) == .succeeded }) {
                for id in ids where id != winner && !engine.isFinished(id) {
                    engine.cancel(id, reason: "tasker.any: task '\(engine.name(winner))' succeeded first")
                }
                guard case .succeeded(let v)? = engine.outcome(winner) else { return 0 }
                return pushValues(L, v)
            }
            if ids.allSatisfy({ engine.isFinished($0) }) {
                return raise(L, anyFailure(ids, engine: engine))
            }
            if let status = cannotWait(L, fn) { return status }
            return suspend(L, .wait(AnyWaiter(ids: ids)))
        default:
            if ids.allSatisfy({ engine.isFinished($0) }) {
                _ = push(.values(ids, compact: true), onto: L)
                tasker_remove(L, -2)
                return 1
            }
            if let status = cannotWait(L, fn) { return status }
            return suspend(L, .wait(SomeWaiter(ids: ids)))
        }
    }

    /// `tasker.parallel(specs [, opts])`, `tasker.serial(specs [, opts])`.
    func apiGroup(_ L: OpaquePointer, serial: Bool) -> Int32 {
        let fn = serial ? "tasker.serial" : "tasker.parallel"
        let s = LuaStack(L)
        guard s.type(1) == LUA_TTABLE else { return argError(L, fn, 1, "list of task specs") }
        var concurrency = Int.max
        var failFast = true
        var name: String?
        if !s.isNoneOrNil(2) {
            guard s.type(2) == LUA_TTABLE else { return argError(L, fn, 2, "table") }
            let options = OptionReader(L: L, table: 2, function: fn, known: ["concurrency", "fail_fast", "name"])
            if let message = options.unknownOption() { return usage(L, message) }
            s.rawGet(2, "concurrency")
            if !s.isNoneOrNil(-1) {
                guard let c = s.integer(-1), c >= 1 else {
                    return usage(L, "bad field 'concurrency' in '\(fn)' options (integer >= 1 expected, got \(s.got(-1, expected: "integer >= 1")))")
                }
                concurrency = c
            }
            s.rawGet(2, "fail_fast")
            if !s.isNoneOrNil(-1) {
                guard s.type(-1) == LUA_TBOOLEAN else {
                    return usage(L, "bad field 'fail_fast' in '\(fn)' options (boolean expected, got \(s.got(-1, expected: "boolean")))")
                }
                failFast = s.boolean(-1)
            }
            s.rawGet(2, "name")
            if !s.isNoneOrNil(-1) {
                guard let n = s.string(-1) else {
                    return usage(L, "bad field 'name' in '\(fn)' options (string expected, got \(s.got(-1, expected: "string")))")
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
        let groupID = engine.taskCount + 1
        var members: [TaskSpec] = []
        members.reserveCapacity(count)
        let reader = SpecReader(runtime: self, L: L, function: fn)
        for k in stride(from: 1, through: count, by: 1) {
            let top = lua_gettop(L)
            s.rawGet(1, k)
            do {
                let parsed = try reader.read(-1, argument: 1)
                var spec = parsed.spec
                if parsed.predicate != 0 { spec.retryWhen = predicate(for: groupID + k) }
                commit(parsed, as: groupID + k, in: L)
                members.append(spec)
            } catch {
                guard case .usage(let m) = error else { return TASKER_RAISE }
                return usage(L, "\(m) (member #\(k))")
            }
            lua_settop(L, top)
        }
        let spec = TaskSpec(name: name, body: nil)
        let id = engine.addGroup(spec, members: members, concurrency: concurrency, failFast: failFast)
        precondition(id == groupID, "group ids are assigned in add order")
        modules.handles.push(L, id)
        return 1
    }

    static let minimumInterval = 0.001

    /// `tasker.every(seconds, spec)`.
    func apiEvery(_ L: OpaquePointer) -> Int32 {
        let s = LuaStack(L)
        guard let interval = s.number(1), interval > 0, interval.isFinite else {
            return argError(L, "tasker.every", 1, "positive number")
        }
        // A shorter interval would fire faster than the loop can turn.
        guard interval >= LuaRuntime.minimumInterval else {
            return usage(L, "bad argument #1 to 'tasker.every' (an interval of at least \(LuaRuntime.minimumInterval) s expected, got \(interval))")
        }
        let parsed: ParsedSpec
        do {
            parsed = try SpecReader(runtime: self, L: L, function: "tasker.every").read(2, argument: 2)
        } catch {
            guard case .usage(let m) = error else { return TASKER_RAISE }
            return usage(L, m)
        }
        let scheduleID = engine.taskCount + 1
        commit(parsed, as: scheduleID, in: L)
        var template = parsed.spec
        template.after = []
        template.start = true
        template.key = nil
        let hasPredicate = parsed.predicate != 0
        var scheduleSpec = TaskSpec(name: parsed.spec.name, body: nil)
        scheduleSpec.after = parsed.spec.after
        scheduleSpec.when = parsed.spec.when
        scheduleSpec.start = parsed.spec.start
        let id = engine.addSchedule(scheduleSpec, interval: interval) { [unowned self] _ in
            let instance = self.engine.taskCount + 1
            self.copyParts(from: scheduleID, to: instance, in: self.L)
            var spec = template
            if hasPredicate { spec.retryWhen = self.predicate(for: instance) }
            return spec
        }
        precondition(id == scheduleID, "schedule ids are assigned in add order")
        lua_settop(L, 2)
        modules.handles.push(L, id)
        return 1
    }

    /// `tasker.exit([code])`: cancel what is left and end the run.
    func apiExit(_ L: OpaquePointer) -> Int32 {
        let s = LuaStack(L)
        var code = 0
        if !s.isNoneOrNil(1) {
            guard let c = s.integer(1), c >= 0, c <= 255 else { return argError(L, "tasker.exit", 1, "integer 0-255") }
            code = c
        }
        requestExit(Int32(code))
        if current != nil, lua_isyieldable(L) != 0 { return suspend(L, .exit) }
        // Outside a coroutine (a handler): stop this code with an error the
        // engine ignores, since the run is ending anyway.
        return raise(L, TaskFailure(.cancelled, "tasker.exit(\(code))"))
    }
}

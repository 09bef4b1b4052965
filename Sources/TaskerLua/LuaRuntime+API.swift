import CLua
import CLuaShim
import Logging
import TaskerCore

/// Helpers for the Swift functions that Lua calls: usage errors at the
/// caller's file:line, reading handles, and suspending the caller.
/// Each returns a trampoline status (results, `TASKER_RAISE` or a yield).
extension LuaRuntime {
    /// Raises a `usage` error naming the caller's file:line.
    func usage(_ L: OpaquePointer, _ message: String) -> Int32 {
        pushErrorTable(L, kind: "usage", message: message, where: LuaStack(L).callerPosition())
        return TASKER_RAISE
    }

    /// "bad argument #2 to 'tasker.sleep' (number expected, got string)"
    func argError(_ L: OpaquePointer, _ fn: String, _ arg: Int32, _ expected: String, index: Int32? = nil) -> Int32 {
        usage(L, "bad argument #\(arg) to '\(fn)' (\(expected) expected, got \(LuaStack(L).got(index ?? arg, expected: expected)))")
    }

    /// A usage error for the first key of the table at `t` that is not in
    /// `known` ("unknown field 'x' in 'tasker.react' spec (known: …)"), or nil.
    func unknownField(_ L: OpaquePointer, table t: Int32, known: Set<String>, in what: String) -> Int32? {
        guard let shown = OptionReader.unknownKey(L, t, allowed: known) else { return nil }
        return usage(L, "unknown field \(shown) in \(what) (known: \(known.sorted().joined(separator: ", ")))")
    }

    /// Raises an error value built from a failure (not a usage error).
    func raise(_ L: OpaquePointer, _ failure: TaskFailure) -> Int32 {
        pushFailure(L, failure)
        return TASKER_RAISE
    }

    /// The task id of the handle at `i`, or nil.
    func handleID(_ L: OpaquePointer, _ i: Int32) -> TaskID? { HandleModule.id(L, i) }

    /// Reads a handle or a list of handles (for `after`, `all`, ...).
    func handleList(_ L: OpaquePointer, _ i: Int32, allowSingle: Bool) -> [TaskID]? {
        if let id = handleID(L, i) { return allowSingle ? [id] : nil }
        guard lua_type(L, i) == LUA_TTABLE else { return nil }
        let t = lua_absindex(L, i)
        let n = Int(lua_rawlen(L, t))
        var ids: [TaskID] = []
        ids.reserveCapacity(n)
        for k in 0..<n {
            lua_rawgeti(L, t, lua_Integer(k + 1))
            let id = handleID(L, -1)
            tasker_pop(L, 1)
            guard let id else { return nil }
            ids.append(id)
        }
        return ids
    }

    /// The engine work behind a handle (a follower's leader).
    func workOf(_ id: TaskID) -> TaskID {
        var id = id
        while let leader = engine.leader(of: id) { id = leader }
        return id
    }

    /// Whether the calling task would wait on itself (or a group holding it).
    func waitsOnItself(_ ids: [TaskID]) -> TaskID? {
        guard let me = driver.current?.taskID else { return nil }
        var mine: Set<TaskID> = [workOf(me)]
        var p = engine.parent(me)
        while let g = p {
            mine.insert(g)
            p = engine.parent(g)
        }
        return ids.first { mine.contains(workOf($0)) }
    }

    /// The reactor whose reaction is running now, when task `id` waits for
    /// that reaction to end: awaiting it there would never finish.
    func reactionWaitedOnBy(_ id: TaskID) -> String? {
        // a task reactor's: an HTTP reactor's reaction waits on requests
        guard let f = driver.current, case .reaction(let r) = f.kind,
              (r.reactor as? LuaReactor)?.target == .task else { return nil }
        let work = workOf(id)
        return r.tasks.contains { workOf($0) == work } ? r.reactor.name : nil
    }

    /// Whether the calling task awaiting task `id` (`await`, `result`)
    /// would close a cycle of tasks each awaiting the next: the chain of
    /// names (the caller first and last), or nil. Found as the wait starts,
    /// so a cycle beside other work is broken at once, not when the whole
    /// run has nothing left. Only single awaits are followed: a task
    /// waiting on `all`, a group or its `after` may be freed by another
    /// task's failure (fail-fast, a dependency not met), and is left to the
    /// idle check. The look is bounded (a chain of 50,000 tasks each
    /// awaiting the one before would make every await walk it).
    func waitCycle(_ id: TaskID) -> [String]? {
        guard let me = driver.current?.taskID else { return nil }
        let target = workOf(me)
        var chain = [target]
        var at = workOf(id)
        while chain.count <= Self.cycleLookLimit {
            if at == target {
                return (chain + [target]).map { engine.name($0) }
            }
            guard !engine.isFinished(at), let f = driver.fibersByTask[at], let w = f.wait as? AwaitWait,
                  let next = w.ids.first else { return nil }
            chain.append(at)
            at = workOf(next)
        }
        return nil
    }

    static let cycleLookLimit = 32

    /// The error a wait that would close a cycle raises in its task.
    static func deadlock(_ cycle: [String]) -> TaskFailure {
        let names = cycle.map { "'\($0)'" }
        let chain = names[0] + " waits for " + names.dropFirst().joined(separator: ", which waits for ")
        return TaskFailure(.deadlock, "\(chain): none of them could finish")
    }

    /// Checks that the caller may suspend; returns a raise status if not.
    func cannotWait(_ L: OpaquePointer, _ fn: String) -> Int32? {
        if options.describeOnly { return describeStop(L, at: fn) }
        guard driver.current != nil else {
            return usage(L, "\(fn): cannot yield in \(driver.callContext ?? "this context")")
        }
        guard lua_isyieldable(L) != 0 else {
            return usage(L, "\(fn): cannot yield inside a C function (a table.sort comparator, "
                         + "a metamethod called from C such as __tostring, or a __gc/__close handler)")
        }
        // a plan waits on tasks as it always did (`endPlan` says where)
        if !(fn.hasPrefix("h:") || fn == "tasker.all" || fn == "tasker.any" || fn == "tasker.some"),
           let status = planStops(L, fn) { return status }
        return nil
    }

    /// Tasks a description lets the main chunk add before it stops there.
    static let describedAddsKept = 1000

    /// `--help`, `tasker list`: the main chunk has come to its first
    /// process, request or wait (tasks it adds never start), or to its
    /// 1,001st add; what it declared so far is the description. Raises a
    /// marker the driver takes as the chunk's end.
    /// The same, noting where the main chunk stopped and at what call
    /// (`RunResult.planStop`: `--help` says what it may not show).
    func describeStop(_ L: OpaquePointer, at fn: String) -> Int32 {
        if chunk.planStop == nil, let main = chunk.mainFiber, driver.current === main {
            let position = LuaStack(L).innermostLuaPosition() ?? chunk.scriptPath
            chunk.planStop = "\(position): the main chunk calls \(fn) there"
        }
        return describeStop(L)
    }

    func describeStop(_ L: OpaquePointer) -> Int32 {
        lua_pushlightuserdata(L, Self.describeMarker)
        return TASKER_RAISE
    }

    /// `--resume --plan` runs nothing: where the main chunk (or a coroutine
    /// it runs) would start a process, a request, a sleep or a change to
    /// files (`fn`), its evaluation stops, and the plan says where (the
    /// first such place: a `pcall` that catches the stop gets it again at
    /// the next one). Elsewhere (a reused task's `finish` handler) the call
    /// is refused. Nil: not a plan.
    func planStops(_ L: OpaquePointer, _ fn: String) -> Int32? {
        // a description stops at a change to files too
        if options.describeOnly { return describeStop(L, at: fn) }
        guard options.planOnly else { return nil }
        guard let main = chunk.mainFiber, driver.current === main else {
            return usage(L, "\(fn): a plan (--resume --plan) runs nothing")
        }
        if chunk.planStop == nil {
            let position = LuaStack(L).innermostLuaPosition() ?? chunk.scriptPath
            // a reused task's `finish` handler added by the main chunk runs in it
            chunk.planStop = "\(position): \(driver.callContext ?? "the main chunk") calls \(fn) there, which would run"
        }
        return describeStop(L)
    }

    /// A unique address, never dereferenced.
    // Safety: set once when first used (a `static let`), never written after;
    // only its value is compared, on the loop thread.
    nonisolated(unsafe) static let describeMarker = UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1)

    /// What the main chunk declared (`describeOnly`), as JSON.
    func describeDeclarations() -> String? {
        let s = LuaStack(L)
        let top = lua_gettop(L)
        defer { lua_settop(L, top) }
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(modules.command.describeRef))
        guard tasker_pcall_traceback(L, 0, 1) == LUA_OK else { return nil }
        return s.string(-1)
    }

    /// Suspends the caller until the driver has performed `op`.
    func suspend(_ L: OpaquePointer, _ op: PendingOp) -> Int32 {
        driver.current?.pending = op
        lua_pushlightuserdata(L, tasker_engine_mark())
        return tasker_yield_status(1)
    }

    /// Calls the function below `nargs` arguments on the main thread, outside
    /// any coroutine, in a context that cannot yield (handlers, predicates).
    /// Returns whether it succeeded; on error logs it and leaves nothing.
    func callProtected(nargs: Int32, nresults: Int32, context: String) -> Bool {
        guard let error = callForError(nargs: nargs, nresults: nresults, context: context) else { return true }
        // tasker.exit or os.exit in it unwinds it: no error of its own
        if !driver.lastCallExited { logger.error("error in \(context): \(error)") }
        return false
    }

    /// Whether the value at `i` is the error `tasker.exit` raised to stop a
    /// handler's code (see `DriverState.exitUnwind`).
    func isExitUnwind(_ L: OpaquePointer, _ i: Int32) -> Bool {
        guard let unwind = driver.exitUnwind, lua_type(L, i) == LUA_TTABLE else { return false }
        return lua_topointer(L, i) == unwind
    }

    /// Seconds a handler, predicate or interceptor may run before the hook
    /// stops it as a runaway.
    static let callBudget = 2.0

    /// Like `callProtected`, but returns the error text (with traceback)
    /// instead of logging it. The call gets `callBudget` seconds; past that
    /// the hook stops it as a runaway.
    /// Without a traceback (interceptors and `when` predicates, called for
    /// every task) there is no message handler either: an error that says
    /// not where it was raised (a table, "C stack overflow") is given
    /// `definedAt`, where the function called is defined.
    /// `task`: a hook's call names the task it runs for (see
    /// `DriverState.callTask`); nil leaves it as it is.
    func callForError(nargs: Int32, nresults: Int32, context: String, traceback: Bool = true,
                      definedAt: String? = nil, task: TaskID?? = nil) -> String? {
        let saved = driver.callContext
        driver.callContext = context
        let savedTask = driver.callTask
        if let task { driver.callTask = task }
        let savedBudget = tasker_set_budget(crt, Monotonic.now() &+ Monotonic.nanos(LuaRuntime.callBudget))
        defer {
            driver.callContext = saved
            driver.callTask = savedTask
            tasker_set_budget(crt, savedBudget)
        }
        let status = traceback ? tasker_pcall_traceback(L, nargs, nresults) : tasker_pcall(L, nargs, nresults)
        driver.lastCallExited = false
        guard status != LUA_OK else { return nil }
        tasker_reset_hook(L)  // a stop made it check every instruction
        driver.lastCallExited = isExitUnwind(L, -1)
        defer { tasker_pop(L, 1) }
        return describeRaised(on: L, traceback: traceback, definedAt: definedAt)
    }

    /// The error value on top of `L`'s stack (a thread of this state) as a
    /// message: a string as it is, a table raised as JSON after where it
    /// was raised. Leaves the stack as it was.
    func describeRaised(on L: OpaquePointer, traceback: Bool = true, definedAt: String? = nil) -> String {
        if lua_type(L, -1) == LUA_TSTRING {
            let message = LuaStack(L).describe(-1)
            guard !traceback, LuaRuntime.positionlessLuaErrors.contains(message), let definedAt else { return message }
            return "\(definedAt): \(message)"
        }
        if lua_type(L, -1) == LUA_TTABLE, isErrorTable(L, -1) { return LuaStack(L).describe(-1) }
        // a value raised (`error({code = 7})`, a table as JSON, as a task's
        // is): where it was raised, as a string error says
        let described = lua_type(L, -1) == LUA_TTABLE ? describeErrorTable(L, -1) ?? LuaStack(L).describe(-1) : LuaStack(L).describe(-1)
        guard traceback else { return definedAt.map { "\($0): \(described)" } ?? described }
        lua_getfield(L, tasker_registryindex(), TASKER_ERROR_WHERE)
        defer { tasker_pop(L, 1) }
        guard let position = LuaStack(L).string(-1) else { return described }
        return "\(position): \(described)"
    }
}

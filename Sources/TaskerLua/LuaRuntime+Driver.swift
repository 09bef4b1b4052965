import CLua
import CLuaShim
import TaskerCore

/// The coroutine driver: start, resume, and end fibers; perform the engine
/// call a fiber yielded for.
extension LuaRuntime {
    // MARK: threads

    /// A thread from the pool, or a new one anchored in the threads table.
    func makeFiber(_ kind: Fiber.Kind) -> Fiber {
        if let f = driver.fiberPool.popLast() {
            f.reuse(as: kind)
            return f
        }
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(refs.threads))
        let thread = lua_newthread(L)!
        let anchor = luaL_ref(L, -2)
        tasker_pop(L, 1)
        return Fiber(runtime: self, kind: kind, thread: thread, anchor: anchor)
    }

    /// Returns a finished fiber's thread to the pool (or lets it go).
    private func retire(_ f: Fiber) {
        f.finished = true
        f.wait?.cancel()  // a timer, a process (SIGTERM, then SIGKILL after 2 s)…
        f.wait = nil
        if !f.endedNormally || f.isAborted {
            for p in f.processes { p.cancel() }  // the same for os.execute and io.popen
        }
        f.processes = []
        if let id = f.taskID, driver.fibersByTask[id] === f { driver.fibersByTask[id] = nil }
        if case .reaction(let reaction) = f.kind { hooks.reactionEnded(reaction) }
        let co = f.thread
        tasker_setfiber(co, nil)
        // Only a thread that returned normally is reused: after an error
        // raised by the hook, Lua 5.4.4 leaves hooks disabled on it.
        let clean = lua_status(co) == LUA_OK && lua_gettop(co) == 0 && f.endedNormally
        if !clean {
            tasker_request_interrupt(crt, 0)
            // Closes pending to-be-closed variables, under a budget like any
            // other code tasker runs outside a task.
            let saved = tasker_set_budget(crt, Monotonic.now() &+ Monotonic.nanos(LuaRuntime.callBudget))
            _ = lua_resetthread(co)
            tasker_set_budget(crt, saved)
            lua_settop(co, 0)
        }
        if clean && driver.fiberPool.count < 256 {
            driver.fiberPool.append(f)
        } else {
            lua_rawgeti(L, tasker_registryindex(), lua_Integer(refs.threads))
            luaL_unref(L, -1, f.anchor)
            tasker_pop(L, 1)
        }
    }

    // MARK: starting

    func startMain(_ chunkIndex: Int32) {
        let f = makeFiber(.main)
        chunk.mainFiber = f
        driver.sliceEnd = Monotonic.now() &+ LuaRuntime.sliceNanos
        lua_xmove(L, f.thread, 1)
        resume(f, nargs: 0)
    }

    func startAttempt(_ run: AttemptRun) {
        guard engine.isCurrent(run) else { return }
        let f = makeFiber(.task(run))
        driver.fibersByTask[run.task] = f
        let co = f.thread
        lua_rawgeti(co, tasker_registryindex(), lua_Integer(refs.bodies))
        lua_rawgeti(co, -1, lua_Integer(run.task))
        tasker_remove(co, -2)
        ContextModule.push(co, run, metatable: refs.contextMeta)
        resume(f, nargs: 1)
    }

    // MARK: resuming

    func resume(_ f: Fiber, with r: Resumption) {
        guard !f.finished else { return }
        if f.isAborted || (driver.exitRequested != nil && f === chunk.mainFiber) {
            close(f)
            return
        }
        // A paused task goes no further than the wait it is in.
        if let id = f.taskID, engine.isPaused(id) {
            f.heldWhilePaused = r
            return
        }
        if let run = f.run, engine.hasLentSlot(run) {
            // It gave its slot back while it waited: take one again first.
            engine.reclaimSlot(run) { [unowned self] in self.enqueue(.resume(f, r)) }
            return
        }
        let nargs = push(r, onto: f.thread)
        if f === chunk.mainFiber { rememberTaskError(r, pushed: nargs, on: f.thread) }
        resume(f, nargs: nargs)
    }

    /// The main chunk is handed a task's error (`await`, `all`, `any`): keep the
    /// value, so that if the main chunk raises it, the run reports that
    /// task's failure (exit 1) rather than a script error.
    private func rememberTaskError(_ r: Resumption, pushed n: Int32, on co: OpaquePointer) {
        let id: TaskID
        switch r {
        case .luaFailureOf(let t), .failureOfTasks(_, let t): id = t
        case .taskResult(let t, _) where engine.outcome(t)?.failure != nil: id = t
        default: return
        }
        // `false, err` (await, all) or `true, false, err` (result): err on top.
        guard n >= 2 else { return }
        rememberHandedError(co, -1, from: id)
    }

    /// Notes that the value at `i` on `co` is task `id`'s error, handed to
    /// the main chunk (every path: a wait, or a task that had already
    /// failed); `mainErrorTask(of:)` finds it again.
    func rememberHandedError(_ co: OpaquePointer, _ i: Int32, from id: TaskID) {
        guard lua_type(co, i) != LUA_TNIL, lua_checkstack(co, 3) != 0 else { return }
        let v = lua_absindex(co, i)
        lua_rawgeti(co, tasker_registryindex(), lua_Integer(refs.handedErrors))
        lua_pushvalue(co, v)
        LuaStack(co).push(engine.name(id))
        lua_rawset(co, -3)
        tasker_pop(co, 1)
    }

    /// Whether `co` runs the main chunk.
    func isMainThread(_ co: OpaquePointer) -> Bool { chunk.mainFiber.map { $0.thread == co } ?? false }

    /// The task whose error the main chunk raised with the value on top of
    /// `co`: that value itself, or `error(err)` of it (a string with the
    /// raising line's position in front).
    private func errorTask(raised co: OpaquePointer) -> String? {
        guard lua_checkstack(co, 3) != 0 else { return nil }
        lua_rawgeti(co, tasker_registryindex(), lua_Integer(refs.handedErrors))
        defer { tasker_pop(co, 1) }
        lua_pushvalue(co, -2)
        lua_rawget(co, -2)
        defer { tasker_pop(co, 1) }
        if let name = LuaStack(co).string(-1) { return name }
        guard lua_type(co, -3) == LUA_TSTRING, let raised = LuaStack(co).string(-3) else { return nil }
        // "file.lua:12: " + the task's message
        guard let colon = raised.range(of: ": ") else { return nil }
        let inner = String(raised[colon.upperBound...])
        LuaStack(co).push(inner)
        lua_rawget(co, -3)
        defer { tasker_pop(co, 1) }
        return LuaStack(co).string(-1)
    }

    func resume(_ f: Fiber, nargs: Int32) {
        let co = f.thread
        driver.current = f
        tasker_set_deadlines(crt, f.taskID.map(engine.deadline) ?? f.deadline, driver.sliceEnd)
        tasker_request_interrupt(crt, f.isAborted ? 1 : 0)
        var nres: Int32 = 0
        let status = lua_resume(co, L, nargs, &nres)
        driver.current = nil
        tasker_set_deadlines(crt, 0, 0)
        tasker_request_interrupt(crt, 0)
        switch status {
        case LUA_OK: fiberReturned(f, nres)
        case LUA_YIELD:
            if tasker_take_hook_yield(crt, co) != 0 {
                // The hook paused it: stopped (closed now) or its slice ended.
                if f.isAborted { fiberFailed(f) } else { continueLater(f) }
                return
            }
            tasker_pop(co, nres)
            fiberYielded(f)
        default: fiberFailed(f)
        }
    }

    private func fiberReturned(_ f: Fiber, _ nres: Int32) {
        f.endedNormally = true
        switch f.kind {
        case .main:
            retire(f)
            if !chunk.targetsAdded && modules.command.runTargetsRef != LUA_NOREF && driver.exitRequested == nil {
                // The targets named after FILE (or `default`), from a main
                // fiber of their own: its errors are the main chunk's.
                chunk.targetsAdded = true
                lua_rawgeti(L, tasker_registryindex(), lua_Integer(modules.command.runTargetsRef))
                startMain(lua_gettop(L))
                return
            }
            mainDone = true
            // described: the tasks it added never start, nothing to wait for
            if options.describeOnly { finish() }
        case .task(let run):
            if let failure = f.isAborted ? f.aborted : overran(run) {
                retire(f)
                engine.complete(run, with: .failure(failure))
                return
            }
            let value = storeValues(f.thread, count: nres, slot: run.task)
            retire(f)
            engine.complete(run, with: .success(value))
        case .reaction(let reaction):
            let failure = f.isAborted ? f.aborted : nil
            retire(f)
            hooks.engine(of: reaction).reactionEnded(reaction, failure: failure)
        }
    }

    private func fiberFailed(_ f: Fiber) {
        let co = f.thread
        switch f.kind {
        case .main:
            mainDone = true
            if (options.describeOnly || options.planOnly) && lua_touserdata(co, -1) == LuaRuntime.describeMarker {
                retire(f)  // described, or planned as far as it can be: not an error
                if options.describeOnly { finish() }
                return
            }
            if driver.exitRequested == nil && !interrupted {
                if !f.isAborted, let name = errorTask(raised: co) { chunk.mainErrorTask = name }
                chunk.mainError = traceback(co)
                if let said = chunk.commandLineError, let first = chunk.mainError?.split(separator: "\n").first, first.hasSuffix("usage: " + said) {
                    chunk.mainError = String(first)
                    chunk.mainErrorIsCommandLine = true
                }
                // a description's tasks never start: nothing to cancel (no handler runs)
                if !options.describeOnly { engine.cancelAll(reason: "the main chunk failed") }
            }
            retire(f)
            if options.describeOnly { finish() }
        case .task(let run):
            let failure = f.aborted ?? storeError(co, slot: run.task)
            retire(f)
            engine.complete(run, with: .failure(failure))
        case .reaction(let reaction):
            let failure = f.aborted ?? TaskFailure(.reactor, "reactor '\(reaction.reactor.name)' failed: "
                + traceback(co).components(separatedBy: "\nstack traceback:")[0])
            retire(f)
            hooks.engine(of: reaction).reactionEnded(reaction, failure: failure)
        }
    }

    /// A body that returns after its deadline (a long C call the hook could
    /// not interrupt, such as a huge `string.rep`) timed out all the same.
    private func overran(_ run: AttemptRun) -> TaskFailure? {
        let deadline = engine.deadline(run.task)
        guard deadline != 0, Monotonic.now() >= deadline else { return nil }
        return engine.timeoutFailure(run.task)
    }

    /// The error on top of `co` with the traceback of where it was raised.
    func traceback(_ co: OpaquePointer) -> String {
        let s = LuaStack(co)
        let table = s.type(-1) == LUA_TTABLE && !isErrorTable(co, -1) ? describeErrorTable(co, -1) : nil
        var message = table ?? s.describe(-1)
        // a value raised (a table), or a message of Lua's that has no
        // position ("C stack overflow"): where it was raised, as a string
        // error says (the stack of a failed resume is still there)
        let positionless = s.type(-1) == LUA_TSTRING ? LuaRuntime.positionlessLuaErrors.contains(message) : !isErrorTable(co, -1)
        if positionless, let position = s.innermostLuaPosition() { message = "\(position): \(message)" }
        // not given to luaL_traceback as the message: a C string ends at a NUL
        luaL_traceback(L, co, nil, 0)
        defer { tasker_pop(L, 1) }
        return message + "\n" + (LuaStack(L).string(-1) ?? "")
    }

    private func fiberYielded(_ f: Fiber) {
        guard let op = f.pending else {
            // Only engine calls yield an engine thread; anything else is a bug.
            f.aborted = TaskFailure(.error, "internal error: a coroutine yielded without an engine call")
            close(f)
            return
        }
        f.pending = nil
        if f.isAborted || (driver.exitRequested != nil && f === chunk.mainFiber) {
            close(f)
            return
        }
        perform(op, for: f)
    }

    /// Ends a fiber that will not be resumed (cancelled, timed out, exit).
    func close(_ f: Fiber) {
        guard !f.finished else { return }
        if f === chunk.mainFiber { mainDone = true }
        retire(f)
    }

    // MARK: engine calls

    private func perform(_ op: PendingOp, for f: Fiber) {
        switch op {
        case .wait(let w):
            // Waiting on other tasks: the slot goes to someone else meanwhile.
            if w.lendsSlot, let run = f.run { engine.lendSlot(run) }
            f.wait = w
            w.start(f, in: self)
        case .exit:
            close(f)
        }
    }

    /// A `FiberWait` is over: resume its fiber with `result`.
    func finishWait(_ f: Fiber, _ result: Resumption) {
        guard !f.finished else { return }
        f.wait = nil
        enqueue(.resume(f, result))
    }

    // MARK: the interrupt hook

    /// Called by the count hook when the running code may have to stop or
    /// pause (aborted, past a deadline or budget, a signal, its slice over).
    static let onInterrupt: @convention(c) (OpaquePointer?, UnsafeMutablePointer<Int32>?) -> Int32 = { L, stop in
        guard let L else { return Int32(TASKER_HOOK_GO_ON) }
        return LuaRuntime.from(L).hookCheck(L, stop)
    }

    private func hookCheck(_ L: OpaquePointer, _ stop: UnsafeMutablePointer<Int32>?) -> Int32 {
        let now = Monotonic.now()
        let budget = tasker_budget(crt)
        if budget != 0 {
            // Code tasker called where nothing can yield (a handler, a
            // predicate, __tostring): only its budget stops it. After Ctrl-C
            // these still run: they are the cancel paths.
            guard now >= budget else { return Int32(TASKER_HOOK_GO_ON) }
            pushFailure(L, budgetOverrun(L))
            return Int32(TASKER_HOOK_RAISE)
        }
        guard let f = driver.current else {
            guard interrupted else { return Int32(TASKER_HOOK_GO_ON) }
            pushFailure(L, TaskFailure(.cancelled, "interrupted"))
            return Int32(TASKER_HOOK_RAISE)
        }
        if let reason = stopReason(for: f) {
            // Yielding out of the fiber cannot be caught by a pcall in it;
            // where it cannot yield, the raise repeats until it escapes.
            if lua_isyieldable(L) != 0 {
                stop?.pointee = 1
                return Int32(TASKER_HOOK_YIELD)
            }
            pushFailure(L, reason)
            return Int32(TASKER_HOOK_RAISE)
        }
        let slice = tasker_slice(crt)
        if slice != 0 && now >= slice {
            if lua_isyieldable(L) != 0 {
                stop?.pointee = 0
                return Int32(TASKER_HOOK_YIELD)
            }
            tasker_set_slice(crt, now &+ LuaRuntime.sliceNanos)  // cannot pause here; ask again later
        }
        return Int32(TASKER_HOOK_GO_ON)
    }

    /// Why the running fiber must stop now, if it must. The reason sticks.
    func stopReason(for f: Fiber) -> TaskFailure? {
        if f.isAborted { return f.aborted }
        let now = Monotonic.now()
        switch f.kind {
        case .task(let run):
            let deadline = engine.deadline(run.task)
            if deadline != 0 && now >= deadline {
                f.aborted = engine.timeoutFailure(run.task)
            } else if interrupted {
                f.aborted = TaskFailure(.cancelled, "task '\(engine.name(run.task))' was cancelled: interrupted")
            }
        case .reaction(let reaction):
            if f.deadline != 0 && now >= f.deadline {
                f.aborted = hooks.reactionTimeout(reaction)
            } else if interrupted {
                f.aborted = TaskFailure(.cancelled, "reactor '\(reaction.reactor.name)' was stopped: interrupted")
            }
        case .main:
            if interrupted || driver.exitRequested != nil { f.aborted = TaskFailure(.cancelled, "interrupted") }
        }
        return f.aborted
    }

    /// A handler, predicate, interceptor or __tostring past its budget.
    func budgetOverrun(_ L: OpaquePointer) -> TaskFailure {
        var failure = TaskFailure(.timeout, "\(driver.callContext ?? "a callback (such as __tostring)") ran longer than \(formatSeconds(LuaRuntime.callBudget)) (a runaway loop?)")
        failure.position = LuaStack(L).whereString(level: 0)
        return failure
    }
}

/// The body of every Lua task: the function stored for the task's id.
final class LuaTaskBody: TaskBody {
    unowned let runtime: LuaRuntime

    init(runtime: LuaRuntime) { self.runtime = runtime }

    func startAttempt(_ run: AttemptRun, engine: Engine) {
        runtime.enqueue(.start(run))
    }

    func abortAttempt(_ run: AttemptRun, reason: TaskFailure, engine: Engine) {
        guard let f = runtime.driver.fibersByTask[run.task], f.run?.token == run.token else { return }
        f.aborted = reason
        if runtime.driver.current === f {
            // Running now (it cancelled itself): the hook stops it soon.
            tasker_request_interrupt(runtime.crt, 1)
        } else {
            runtime.enqueue(.close(f))
        }
    }
}

extension LuaRuntime {
    /// `h:pause()`: the engine stops its timeout clock; a running body is
    /// held at its next wait and the process it waits on is stopped.
    /// A group's members (and a schedule's instance) are paused with it.
    func pauseTask(_ id: TaskID) {
        for t in engine.pauseScope(id) where engine.pause(t) {
            driver.fibersByTask[t]?.wait?.pause()
        }
    }

    /// `h:resume()`: back where it was, members too.
    func resumeTask(_ id: TaskID) {
        for t in engine.pauseScope(id) where engine.resume(t) {
            guard let f = driver.fibersByTask[t] else { continue }
            f.wait?.resume()
            if let held = f.heldWhilePaused {
                f.heldWhilePaused = nil
                enqueue(.resume(f, held))
            }
        }
    }
}

import CLua
import CLuaShim
import TaskerCore

/// The coroutine driver: start, resume, and end fibers; perform the engine
/// call a fiber yielded for.
extension LuaRuntime {
    // MARK: threads

    /// A thread from the pool, or a new one anchored in the threads table.
    func makeFiber(_ kind: Fiber.Kind) -> Fiber {
        if let f = fiberPool.popLast() {
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
        f.timer?.cancel()
        f.timer = nil
        f.execTask?.cancel()  // SIGTERM, then SIGKILL after 2 s
        f.execTask = nil
        if let id = f.request {
            f.request = nil
            abandonRequest(id, by: f)
        }
        if let id = f.taskID, fibersByTask[id] === f { fibersByTask[id] = nil }
        if case .reaction(let reaction) = f.kind { reactionFibers[reaction.id] = nil }
        let co = f.thread
        tasker_setfiber(co, nil)
        // Only a thread that returned normally is reused: after an error
        // raised by the hook, Lua 5.4.4 leaves hooks disabled on it.
        let clean = lua_status(co) == LUA_OK && lua_gettop(co) == 0 && f.endedNormally
        if !clean {
            crt.pointee.interrupt = 0
            _ = lua_resetthread(co)  // closes pending to-be-closed variables
            lua_settop(co, 0)
        }
        if clean && fiberPool.count < 256 {
            fiberPool.append(f)
        } else {
            lua_rawgeti(L, tasker_registryindex(), lua_Integer(refs.threads))
            luaL_unref(L, -1, f.anchor)
            tasker_pop(L, 1)
        }
    }

    // MARK: starting

    func startMain(_ chunkIndex: Int32) {
        let f = makeFiber(.main)
        mainFiber = f
        lua_xmove(L, f.thread, 1)
        resume(f, nargs: 0)
    }

    func startAttempt(_ run: AttemptRun) {
        guard engine.isCurrent(run) else { return }
        let f = makeFiber(.task(run))
        fibersByTask[run.task] = f
        let co = f.thread
        lua_rawgeti(co, tasker_registryindex(), lua_Integer(refs.bodies))
        lua_rawgeti(co, -1, lua_Integer(run.task))
        tasker_remove(co, -2)
        pushContext(co, run)
        resume(f, nargs: 1)
    }

    // MARK: resuming

    func resume(_ f: Fiber, with r: Resumption) {
        guard !f.finished else { return }
        if f.aborted != nil || (exitCode != nil && f === mainFiber) {
            close(f)
            return
        }
        let nargs = push(r, onto: f.thread)
        resume(f, nargs: nargs)
    }

    func resume(_ f: Fiber, nargs: Int32) {
        let co = f.thread
        current = f
        crt.pointee.deadline_ns = f.taskID.map(engine.deadline) ?? f.deadline
        crt.pointee.interrupt = f.aborted != nil ? 1 : 0
        var nres: Int32 = 0
        let status = lua_resume(co, L, nargs, &nres)
        current = nil
        crt.pointee.deadline_ns = 0
        crt.pointee.interrupt = 0
        switch status {
        case LUA_OK: fiberReturned(f, nres)
        case LUA_YIELD:
            tasker_pop(co, nres)
            fiberYielded(f)
        default: fiberFailed(f)
        }
    }

    private func fiberReturned(_ f: Fiber, _ nres: Int32) {
        f.endedNormally = true
        switch f.kind {
        case .main:
            mainDone = true
            retire(f)
        case .task(let run):
            if let failure = f.aborted {
                retire(f)
                engine.complete(run, with: .failure(failure))
                return
            }
            let value = storeValues(f.thread, count: nres, slot: run.task)
            retire(f)
            engine.complete(run, with: .success(value))
        case .reaction(let reaction):
            let failure = f.aborted
            retire(f)
            engine(of: reaction).reactionEnded(reaction, failure: failure)
        }
    }

    private func fiberFailed(_ f: Fiber) {
        let co = f.thread
        switch f.kind {
        case .main:
            mainDone = true
            if exitCode == nil && !interrupted {
                mainError = traceback(co)
                engine.cancelAll(reason: "the main chunk failed")
            }
            retire(f)
        case .task(let run):
            let failure = f.aborted ?? storeError(co, slot: run.task)
            retire(f)
            engine.complete(run, with: .failure(failure))
        case .reaction(let reaction):
            let failure = f.aborted ?? TaskFailure(.reactor, "reactor '\(reaction.reactor.name)' failed: "
                + traceback(co).components(separatedBy: "\nstack traceback:")[0])
            retire(f)
            engine(of: reaction).reactionEnded(reaction, failure: failure)
        }
    }

    /// The error on top of `co` with the traceback of where it was raised.
    func traceback(_ co: OpaquePointer) -> String {
        let s = LuaStack(co)
        let message = s.describe(-1)
        luaL_traceback(L, co, message, 0)
        defer { tasker_pop(L, 1) }
        return LuaStack(L).string(-1) ?? message
    }

    private func fiberYielded(_ f: Fiber) {
        guard let op = f.pending else {
            // Only engine calls yield an engine thread; anything else is a bug.
            f.aborted = TaskFailure(.error, "internal error: a coroutine yielded without an engine call")
            close(f)
            return
        }
        f.pending = nil
        if f.aborted != nil || (exitCode != nil && f === mainFiber) {
            close(f)
            return
        }
        perform(op, for: f)
    }

    /// Ends a fiber that will not be resumed (cancelled, timed out, exit).
    func close(_ f: Fiber) {
        guard !f.finished else { return }
        if let id = f.waitingOn { engine.removeWaiter(id, f) }
        f.waitingOn = nil
        if f === mainFiber { mainDone = true }
        retire(f)
    }

    // MARK: engine calls

    private func perform(_ op: PendingOp, for f: Fiber) {
        switch op {
        case .sleep(let seconds):
            f.timer = loop.schedule(after: seconds) { [unowned self] in
                f.timer = nil
                self.enqueue(.resume(f, .nothing))
            }
        case .await(let id, let mode):
            f.awaitMode = mode
            f.waitingOn = id
            engine.addWaiter(id, f)
        case .all(let ids):
            let waiter = AllWaiter(runtime: self, fiber: f, ids: ids)
            for id in ids { engine.addWaiter(id, waiter) }
        case .any(let ids):
            let waiter = AnyWaiter(runtime: self, fiber: f, ids: ids)
            for id in ids { engine.addWaiter(id, waiter) }
        case .some(let ids):
            let waiter = SomeWaiter(runtime: self, fiber: f, ids: ids)
            for id in ids { engine.addWaiter(id, waiter) }
        case .exec(let request):
            startExec(request, for: f)
        case .http(let setup):
            performHTTP(setup, for: f)
        case .exit:
            close(f)
        }
    }

    // MARK: the interrupt hook

    /// Called by the count hook when the running code may have to stop
    /// (aborted, past its deadline, or Ctrl-C): push the error to raise.
    static let onInterrupt: @convention(c) (OpaquePointer?) -> Int32 = { L in
        guard let L else { return 0 }
        let rt = LuaRuntime.from(L)
        let reason = rt.current.map(rt.stopReason(for:)) ?? rt.callbackOverrun(L)
        guard let reason else { return 0 }
        rt.pushFailure(L, reason)
        return 1
    }

    /// Why the running fiber must stop now, if it must. The reason sticks,
    /// so code that catches it is stopped again at the next check.
    func stopReason(for f: Fiber) -> TaskFailure? {
        if let reason = f.aborted { return reason }
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
                f.aborted = reactionTimeout(reaction)
            } else if interrupted {
                f.aborted = TaskFailure(.cancelled, "reactor '\(reaction.reactor.name)' was stopped: interrupted")
            }
        case .main:
            if interrupted { return TaskFailure(.cancelled, "interrupted") }
        }
        return f.aborted
    }

    /// A handler, predicate or interceptor (no fiber) past its budget.
    /// After Ctrl-C these still run: they are the cancel paths, and a
    /// runaway one is what a second Ctrl-C is for.
    func callbackOverrun(_ L: OpaquePointer) -> TaskFailure? {
        let deadline = crt.pointee.deadline_ns
        guard deadline != 0, Monotonic.now() >= deadline else { return nil }
        var failure = TaskFailure(.timeout, "\(callContext ?? "a callback") ran longer than \(formatSeconds(LuaRuntime.callBudget)) (a runaway loop?)")
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
        guard let f = runtime.fibersByTask[run.task], f.run?.token == run.token else { return }
        f.aborted = reason
        if runtime.current === f {
            // Running now (it cancelled itself): the hook stops it soon.
            tasker_request_interrupt(runtime.crt, 1)
        } else {
            runtime.enqueue(.close(f))
        }
    }
}

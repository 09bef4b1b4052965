import CLua
import CLuaShim
import TaskerCore

/// A reactor written in Lua: `when(t, result)` chooses, `fn(t, result)` runs
/// as a coroutine (it may wait: sleep, await, add tasks).
final class LuaReactor: TaskReactor {
    /// The runtime keeps its hook module, which registered this; only the
    /// runtime's engines call this, while the runtime lives.
    unowned let hooks: HookModule
    let target: HookTarget
    let name: String
    let options: ReactorOptions
    let when: Int32?
    let function: Int32
    /// Names this reactor's 'when' in errors from code it runs.
    let whenContext: String
    /// Where its `when` is defined, for an error that does not say where.
    let whenDefinedAt: String?

    init(hooks: HookModule, target: HookTarget, name: String, options: ReactorOptions, when: Int32?, function: Int32,
         whenDefinedAt: String?) {
        self.whenDefinedAt = whenDefinedAt
        self.hooks = hooks
        self.target = target
        self.name = name
        self.options = options
        self.when = when
        self.function = function
        self.whenContext = "the 'when' of reactor '\(name)'"
    }

    func wants(_ id: TaskID, outcome: TaskOutcome, engine: Engine) -> Result<Bool, TaskFailure> {
        let hooks = self.hooks  // one checked load, not two
        return hooks.reactorWants(self, id, outcome, engine: engine, rt: hooks.runtime)
    }

    func react(_ reaction: Reaction, engine: Engine) {
        hooks.runtime.enqueue(.call { [unowned hooks] in hooks.startReaction(self, reaction) })
    }

    func abort(_ reaction: Reaction, engine: Engine) {
        hooks.abortReaction(reaction)
    }

    var engine: Engine { hooks.engine(for: target) }
}

extension HookModule {
    static let reactFields: Set<String> = ["name", "on", "when", "fn", "requeue", "suspend", "reintercept",
                                           "timeout", "max_requeues"]

    /// `tasker.react{name=, on="task", when=, fn=, requeue=, suspend=,
    /// reintercept=, timeout=, max_requeues=}`.
    func react(_ L: OpaquePointer) -> Int32 {
        let rt = runtime
        let s = LuaStack(L)
        guard s.type(1) == LUA_TTABLE else { return rt.argError(L, "tasker.react", 1, "table") }
        func bad(_ field: String, _ expected: String) -> Int32 {
            rt.usage(L, "bad field '\(field)' in 'tasker.react' spec (\(expected) expected, got \(s.got(-1, expected: expected)))")
        }
        if let status = rt.unknownField(L, table: 1, known: Self.reactFields, in: "'tasker.react' spec") { return status }
        var options = ReactorOptions()
        var name = "reactor-\(rt.engine.reactors.count + rt.httpEngine.reactors.count + 1)"
        s.rawGet(1, "fn")
        guard s.type(-1) == LUA_TFUNCTION else { return bad("fn", "function") }
        let fnIndex = lua_gettop(L)
        s.rawGet(1, "when")
        guard s.isNoneOrNil(-1) || s.type(-1) == LUA_TFUNCTION else { return bad("when", "function") }
        let whenIndex: Int32 = s.isNoneOrNil(-1) ? 0 : lua_gettop(L)
        s.rawGet(1, "name")
        if !s.isNoneOrNil(-1) {
            guard let n = s.string(-1) else { return bad("name", "string") }
            name = n
        }
        guard let target = Self.readTarget(L) else {
            s.rawGet(1, "on")
            return bad("on", "\"task\" or \"http\"")
        }
        for (field, keyPath) in [("requeue", \ReactorOptions.requeue), ("suspend", \.suspend), ("reintercept", \.reintercept)] {
            s.rawGet(1, field)
            if !s.isNoneOrNil(-1) {
                guard s.type(-1) == LUA_TBOOLEAN else { return bad(field, "boolean") }
                options[keyPath: keyPath] = s.boolean(-1)
            }
        }
        s.rawGet(1, "timeout")
        if !s.isNoneOrNil(-1) {
            guard let t = s.number(-1), t > 0, t.isFinite else { return bad("timeout", "positive number") }
            options.timeout = t
        }
        s.rawGet(1, "max_requeues")
        if !s.isNoneOrNil(-1) {
            guard let m = s.integer(-1), m >= 0 else { return bad("max_requeues", "non-negative integer") }
            options.maxRequeues = m
        }
        lua_pushvalue(L, fnIndex)
        let fnRef = luaL_ref(L, tasker_registryindex())
        var whenRef: Int32?
        var whenDefinedAt: String?
        if whenIndex != 0 {
            lua_pushvalue(L, whenIndex)
            whenRef = luaL_ref(L, tasker_registryindex())
            tasker_push_defined_at(L, whenIndex)
            whenDefinedAt = s.string(-1)
            s.pop()
        }
        let reactor = LuaReactor(hooks: self, target: target, name: name, options: options, when: whenRef, function: fnRef,
                                 whenDefinedAt: whenDefinedAt)
        rt.useModule.register(reactor)
        pushRegistrationObject(L, name: name, .reactor(reactor))
        return 1
    }

    /// `engine` is the one asking; `rt` is `runtime`, passed so that it is
    /// borrowed, not retained (this runs for every task).
    func reactorWants(_ r: LuaReactor, _ id: TaskID, _ outcome: TaskOutcome, engine: Engine,
                      rt: LuaRuntime) -> Result<Bool, TaskFailure> {
        guard let when = r.when else { return .success(true) }
        let L = rt.L
        let base = lua_gettop(L)
        defer { lua_settop(L, base) }
        LuaStack(L).pushRegistry(when)
        pushReactionArguments(L, r, id, outcome, engine: engine, rt: rt)
        if let error = rt.callForError(nargs: 2, nresults: 1, context: r.whenContext, traceback: false,
                                        definedAt: r.whenDefinedAt,
                                        task: .some(r.target == .http ? rt.http.calls[id]?.task : id)) {
            let message = error.components(separatedBy: "\nstack traceback:")[0]
            return .failure(TaskFailure(.reactor, "reactor '\(r.name)' failed in 'when': \(message)"))
        }
        return .success(lua_toboolean(L, -1) != 0)
    }

    /// Pushes `t` and `result` ({ok, value} or {ok, error}). The result is
    /// not delivered yet, so it comes from the held outcome, not the engine's.
    private func pushReactionArguments(_ L: OpaquePointer, _ r: LuaReactor, _ id: TaskID, _ outcome: TaskOutcome,
                                       engine: Engine, rt: LuaRuntime) {
        let s = LuaStack(L)
        if r.target == .http {
            rt.http.pushRequestTable(L, id, attempt: engine.attempts(id))
            rt.http.pushRequestResult(L, outcome)
            return
        }
        TaskViewModule.push(L, id, attempt: engine.attempts(id), metatable: rt.refs.taskViewMeta)
        s.newTable(hash: 2)
        switch outcome {
        case .succeeded(let v):
            lua_pushboolean(L, 1)
            s.rawSet(-2, "ok")
            if rt.pushValues(L, v, firstOnly: true) == 1 { s.rawSet(-2, "value") }
        case .failed(let f), .cancelled(let f), .skipped(let f):
            lua_pushboolean(L, 0)
            s.rawSet(-2, "ok")
            rt.pushFailure(L, f)
            s.rawSet(-2, "error")
        }
    }

    /// Runs `fn(t, result)` of the first task as a reaction fiber.
    func startReaction(_ r: LuaReactor, _ reaction: Reaction) {
        guard !reaction.ended, let first = reaction.tasks.first else { return }
        let rt = runtime
        let f = rt.makeFiber(.reaction(reaction))
        if let timeout = r.options.timeout { f.deadline = Monotonic.now() &+ Monotonic.nanos(timeout) }
        reactionFibers[reaction.id] = f
        let co = f.thread
        LuaStack(co).pushRegistry(r.function)
        pushReactionArguments(co, r, first, r.engine.heldOutcome(first)
                              ?? .cancelled(TaskFailure(.cancelled, "task '\(r.engine.name(first))' was cancelled")),
                              engine: r.engine, rt: rt)
        rt.resume(f, nargs: 2)
    }

    /// Ends every running reaction (the run is being interrupted or exited):
    /// reactions are not tasks, so cancelling the tasks does not stop them.
    func stopReactions(reason: String) {
        let rt = runtime
        for (_, f) in reactionFibers where !f.finished {
            guard case .reaction(let reaction) = f.kind else { continue }
            let failure = TaskFailure(.cancelled, "reactor '\(reaction.reactor.name)' was stopped: \(reason)")
            f.aborted = failure
            if rt.driver.current !== f { rt.enqueue(.close(f)) }
            engine(of: reaction).reactionEnded(reaction, failure: failure)
        }
    }

    func abortReaction(_ reaction: Reaction) {
        let rt = runtime
        guard let f = reactionFibers[reaction.id], !f.finished else { return }
        f.aborted = reactionTimeout(reaction)
        if rt.driver.current === f { tasker_request_interrupt(rt.crt, 1) } else { rt.enqueue(.close(f)) }
    }

    /// The engine a reaction belongs to (its reactor's: tasks or requests).
    func engine(of reaction: Reaction) -> Engine {
        (reaction.reactor as? LuaReactor)?.engine ?? runtime.engine
    }

    func reactionTimeout(_ reaction: Reaction) -> TaskFailure {
        TaskFailure(.reactor, "reactor '\(reaction.reactor.name)' exceeded its timeout of \(formatSeconds(reaction.reactor.options.timeout ?? 0))")
    }

}

import CLua
import CLuaShim
import Logging
import TaskerCore

/// Defined tasks as a worker runs them, and what a coordinator logs.
extension LuaRuntime {
    /// A warning line in the run's log, from any thread (the queue's).
    public var warningLog: @Sendable (String) -> Void {
        let logger = logger
        return { logger.warning("\($0)") }
    }
}

extension LuaRuntime {
    /// A worker's start of a claimed attempt: adds a task running the
    /// defined function `name` with `args` (JSON). Returns the task, or why
    /// it could not be started (no such definition, args not JSON, the
    /// pipeline raised).
    public func startDefined(name: String, args: String, timeout: Double?, attempt: Int = 1,
                             key: String? = nil) -> Result<TaskID, TaskFailure> {
        loop.assertInLoop()
        let define = module(DefineModule.self)
        let s = LuaStack(L)
        let top = lua_gettop(L)
        defer { lua_settop(L, top) }
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(define.startRef))
        s.push(name)
        if args.hasPrefix(StoredValueCodec.taggedPrefix) {
            // the coordinator's tagged form: the value as it was there
            guard StoredValueDecoder.push(args, onto: L, arrayMeta: json.arrayMeta) == 1 else {
                return .failure(TaskFailure(.usage, "the args of '\(name)' are not readable"))
            }
        } else {
            s.push(args)
        }
        if let timeout { s.push(timeout) } else { lua_pushnil(L) }
        if let error = callForError(nargs: 3, nresults: 2, context: "starting '\(name)'") {
            return .failure(TaskFailure(.error, error))
        }
        if let id = handleID(L, -2) {
            define.claimed[id] = DefineModule.ClaimedContext(attempt: max(1, attempt), key: key)
            return .success(id)
        }
        return .failure(TaskFailure(.usage, s.string(-1) ?? "'\(name)' could not be started"))
    }
}

extension LuaRuntime {
    /// The definitions the script made, with their versions (a worker
    /// claims only these).
    public var definedVersions: [String: String?] { module(DefineModule.self).versions }
}

extension LuaRuntime {
    /// Frees a finished task nobody will ask about again (a worker's job,
    /// once reported): a worker that runs for weeks must not grow with
    /// every job it ran.
    public func release(_ id: TaskID) {
        module(DefineModule.self).claimed[id] = nil
        enqueue(.call { [unowned self] in
            dropAllParts(id)
            engine.forgetFinished(id)
        })
    }
}

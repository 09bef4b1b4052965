import CLua
import CLuaShim
import Logging
import TaskerCore

/// The body of a defined task when the run has a store: the attempt goes to
/// the queue and the task waits for a worker to run it (its slot lent
/// meanwhile: the workers bound how many run). Retries, cancel and priority
/// stay the engine's, in this process; the queue only carries one attempt
/// at a time. The attempt's timeout goes with it: the worker times it from
/// its claim (time queued is not the attempt's), the clock here stops.
extension DefineModule {
    /// `remote(name, args)`: hands the calling task's current attempt over
    /// and returns the values the worker's run returned.
    func remoteCall(_ L: OpaquePointer) -> Int32 {
        let s = LuaStack(L)
        guard let queue = runtime.options.remote, let name = s.string(1) else {
            return runtime.usage(L, "defined tasks go to a queue only in a run with --store")
        }
        if let status = runtime.cannotWait(L, name) { return status }
        guard let f = runtime.driver.current, case .task(let run) = f.kind else {
            return runtime.usage(L, "'\(name)' runs only as a task's body")
        }
        var args: String
        if lua_type(L, 2) <= LUA_TNIL {
            args = "null"
        } else {
            let json: (text: [UInt8], exact: Bool)
            do {
                json = try runtime.json.encodeJSONNotingKeys(L, 2)
            } catch {
                return runtime.usage(L, "'\(name)': args must be JSON (\(error.message))")
            }
            args = String(decoding: json.text, as: UTF8.self)
            // What plain JSON changes (integer keys of a sparse table, keys
            // of mixed kinds, holes) goes in the stored values' tagged form,
            // which the worker reads back as it was here; so does a text
            // the worker would take for that form (`{"$v":2,"values":…}`).
            // Only then: encoding twice was ~5,000 instructions a job.
            if !json.exact || args.hasPrefix(StoredValueCodec.taggedPrefix),
               let stored = try? StoredValueEncoder.encode(L, first: 2, count: 1, limit: LuaRuntime.maxRemoteValueBytes,
                                                           arrayMeta: runtime.json.arrayMeta),
               stored.hasPrefix(StoredValueCodec.taggedPrefix) {
                args = stored
            }
        }
        let engine = runtime.engine
        // The worker's ctx reads the attempt, the key and (to compare) the
        // definition's version as they are here.
        let attempt = RemoteAttempt(task: run.task, attempt: max(1, engine.attempts(run.task)), name: name, args: args,
                                    priority: engine.priority(run.task), timeout: engine.timeout(run.task),
                                    key: runtime.idempotencyKey(run.task, in: L), version: versions[name] ?? nil,
                                    secrets: Self.secretsJSON(in: args))
        if attempt.timeout != nil { engine.handTimeoutOver(run) }
        return runtime.suspend(L, .wait(RemoteWait(queue: queue, attempt: attempt)))
    }
}

extension DefineModule {
    /// The registered secrets in `args` as a JSON array, or nil.
    static func secretsJSON(in args: String) -> String? {
        let found = SecretMask.shared.values(in: args)
        guard !found.isEmpty else { return nil }
        return "[" + found.map { JSONEscaping.tasker.quoted($0) }.joined(separator: ",") + "]"
    }
}

/// One attempt on the queue. Ending the wait (timeout, cancel, the run
/// ends) takes the attempt back from the queue.
final class RemoteWait: FiberWait {
    let queue: RemoteQueue
    let attempt: RemoteAttempt
    private var waiting = false
    private var loop: EventLoop?

    init(queue: RemoteQueue, attempt: RemoteAttempt) {
        self.queue = queue
        self.attempt = attempt
    }

    var lendsSlot: Bool { true }

    /// Inside `start`: a result given there (the queue gave up before)
    /// waits for the next turn, as the fiber is still being suspended.
    private var starting = false

    func start(_ fiber: Fiber, in runtime: LuaRuntime) {
        waiting = true
        starting = true
        defer { starting = false }
        // Work is under way elsewhere: the run is not idle (nor deadlocked).
        loop = runtime.loop
        runtime.loop.beginActivity()
        let target = LoopBound((fiber, runtime, self), loop: runtime.loop)
        queue.submit(attempt) { outcome in
            let finish: @Sendable () -> Void = {
                let (fiber, runtime, wait) = target.value
                guard wait.waiting else { return }
                wait.waiting = false
                runtime.loop.endActivity()
                runtime.finishWait(fiber, wait.resumption(outcome, runtime))
            }
            // a batch of results is delivered on the loop already
            if target.loop.inLoop, !target.value.2.starting { finish() } else { target.loop.execute(finish) }
        }
    }

    func cancel() {
        guard waiting else { return }
        waiting = false
        loop?.endActivity()
        queue.cancel(task: attempt.task, attempt: attempt.attempt)
    }

    /// `true, values…` from the worker's JSON array, or the worker's failure.
    private func resumption(_ outcome: RemoteOutcome, _ runtime: LuaRuntime) -> Resumption {
        switch outcome {
        case .failed(let failure):
            // What the body raised there (a string stays a string), as in
            // one process; an engine error comes as its kind and message.
            guard let raised = failure.payload as? RemoteErrorValue else { return .failure(failure) }
            return .push { co in
                lua_pushboolean(co, 0)
                let n = runtime.pushJSONValues(raised.json, onto: co)
                if n == 1 { return 2 }
                if n > 1 { tasker_pop(co, n) }
                var plain = failure
                plain.payload = nil
                runtime.pushFailure(co, plain)
                return 2
            }
        case .succeeded(let json):
            return .push { co in
                lua_pushboolean(co, 1)
                let n = runtime.pushJSONValues(json, onto: co)
                guard n >= 0 else {
                    lua_settop(co, lua_gettop(co) - 1)
                    lua_pushboolean(co, 0)
                    runtime.pushFailure(co, TaskFailure(.error, "the worker's values for '\(self.attempt.name)' are not a JSON array"))
                    return 2
                }
                return 1 + n
            }
        }
    }
}

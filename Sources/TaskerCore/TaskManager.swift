import Foundation

/// The engine for Swift programs: task bodies are async closures; the engine
/// runs on its own loop thread and you talk to it with async calls.
///
///     let tasks = TaskManager(concurrency: 4)
///     let fetch = await tasks.add(name: "fetch", timeout: 2, retry: RetryPolicy(attempts: 3)) { ctx in
///         try await download(attempt: ctx.attempt)
///     }
///     let value = try await fetch.value
public final class TaskManager: Sendable {
    let loop: EventLoop
    let engine: LoopBound<Engine>

    public init(concurrency: Int = 16) {
        let loop = EventLoop()
        self.loop = loop
        self.engine = LoopBound(Engine(loop: loop, concurrency: concurrency), loop: loop)
        let thread = Thread { loop.run() }
        thread.name = "tasker.loop"
        thread.start()
    }

    deinit { loop.stop() }

    /// Adds a task; returns its handle once the engine has it.
    public func add(name: String? = nil, priority: Int = 0, timeout: Double? = nil,
                    retry: RetryPolicy = .none,
                    retryWhen: (@Sendable (TaskFailure, Int) -> Bool)? = nil, after: [TaskHandle] = [],
                    when: DependencyCondition = .success, start: Bool = true, delay: Double = 0,
                    key: String? = nil,
                    _ body: @escaping @Sendable (TaskContext) async throws -> any Sendable) async -> TaskHandle {
        let engine = self.engine
        let id: TaskID = await onLoop {
            var spec = TaskSpec(name: name, body: SwiftTaskBody(body: body, engine: engine))
            spec.priority = priority
            spec.timeout = timeout
            spec.retry = retry
            spec.retryWhen = retryWhen
            spec.after = after.map(\.id)
            spec.when = when
            spec.start = start
            spec.delay = delay
            spec.key = key
            return engine.value.add(spec)
        }
        return TaskHandle(id: id, manager: self)
    }

    /// Runs `body` on the loop thread and returns its result.
    func onLoop<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            loop.execute { continuation.resume(returning: body()) }
        }
    }
}

/// What a Swift task body knows about its attempt.
public struct TaskContext: Sendable {
    public let id: TaskID
    public let name: String
    public let attempt: Int
}

/// A task added to a `TaskManager`.
public struct TaskHandle: Sendable, Hashable {
    public let id: TaskID
    let manager: TaskManager

    /// The task's value; throws its `TaskFailure` if it failed or was cancelled.
    public var value: any Sendable {
        get async throws {
            let outcome = await self.outcome
            switch outcome {
            case .succeeded(.swift(let v)): return v
            case .succeeded: return ()
            case .failed(let f), .cancelled(let f), .skipped(let f): throw f
            }
        }
    }

    /// Waits for the final outcome.
    public var outcome: TaskOutcome {
        get async {
            let engine = manager.engine
            let id = self.id
            return await withCheckedContinuation { continuation in
                manager.loop.execute {
                    engine.value.addWaiter(id, ContinuationWaiter(continuation))
                }
            }
        }
    }

    public var state: TaskState {
        get async {
            let engine = manager.engine
            let id = self.id
            return await manager.onLoop { engine.value.state(id) }
        }
    }

    public func cancel() {
        let engine = manager.engine
        let id = self.id
        manager.loop.execute { engine.value.cancel(id) }
    }

    public func start() {
        let engine = manager.engine
        let id = self.id
        manager.loop.execute { engine.value.start(id) }
    }

    public static func == (a: TaskHandle, b: TaskHandle) -> Bool { a.id == b.id && a.manager === b.manager }
    public func hash(into h: inout Hasher) { h.combine(id) }
}

private final class ContinuationWaiter: TaskWaiter {
    let continuation: CheckedContinuation<TaskOutcome, Never>

    init(_ c: CheckedContinuation<TaskOutcome, Never>) { continuation = c }

    func taskFinished(_ id: TaskID, engine: Engine) {
        continuation.resume(returning: engine.outcome(id)!)
    }
}

/// Runs an async closure per attempt in a Swift task; cancelling or timing
/// out the attempt cancels that Swift task.
private final class SwiftTaskBody: TaskBody {
    let body: @Sendable (TaskContext) async throws -> any Sendable
    let engine: LoopBound<Engine>
    var running: [UInt64: Task<Void, Never>] = [:]

    init(body: @escaping @Sendable (TaskContext) async throws -> any Sendable, engine: LoopBound<Engine>) {
        self.body = body
        self.engine = engine
    }

    func startAttempt(_ run: AttemptRun, engine e: Engine) {
        let context = TaskContext(id: run.task, name: e.name(run.task), attempt: run.attempt)
        let body = self.body
        let engine = self.engine
        let me = LoopBound(self, loop: e.loop)
        e.loop.beginActivity()
        running[run.token] = Task {
            let result: Result<TaskValue, TaskFailure>
            do {
                result = .success(.swift(try await body(context)))
            } catch let failure as TaskFailure {
                result = .failure(failure)
            } catch is CancellationError {
                result = .failure(TaskFailure(.cancelled, "task '\(context.name)' was cancelled"))
            } catch {
                result = .failure(TaskFailure(.error, "\(error)", payload: nil))
            }
            engine.loop.execute {
                me.value.running[run.token] = nil
                engine.loop.endActivity()
                engine.value.complete(run, with: result)
            }
        }
    }

    func abortAttempt(_ run: AttemptRun, reason: TaskFailure, engine: Engine) {
        running[run.token]?.cancel()
    }
}

/// What a task body does; implemented by runtimes (Lua coroutines, Swift
/// closures). Called on the engine's loop.
public protocol TaskBody: AnyObject {
    /// Runs one attempt. Report its end with `engine.complete(run, with:)`.
    func startAttempt(_ run: AttemptRun, engine: Engine)
    /// The attempt was cancelled or timed out: stop it. The engine already
    /// moved on; a later `complete` for this run is ignored.
    func abortAttempt(_ run: AttemptRun, reason: TaskFailure, engine: Engine)
}

/// Everything `add` needs to know about a task (README: Tasks).
public struct TaskSpec {
    public var name: String?
    public var priority: Int = 0
    /// Seconds per attempt.
    public var timeout: Double?
    public var retry: RetryPolicy = .none
    /// Asked after a failed attempt that may be retried; `false` stops.
    public var retryWhen: ((TaskFailure, Int) -> Bool)?
    public var after: [TaskID] = []
    public var when: DependencyCondition = .success
    /// `false` keeps the task waiting until `start`.
    public var start: Bool = true
    /// Seconds before it becomes ready.
    public var delay: Double = 0
    /// Single-flight key.
    public var key: String?
    /// Work of a reaction (see `TaskRecord.ownedByReaction`).
    public var ownedByReaction = false
    /// The task's derived identity went to whoever counts identities by
    /// task id (a journal's writer thread, see `AddedIdentities`), and it
    /// has no tags: a recorder of its finish can leave the identity to
    /// that counter instead of looking it up.
    public var identityHandedOver = false
    public var body: TaskBody?

    public init(name: String? = nil, body: TaskBody?) {
        self.name = name
        self.body = body
    }
}

/// Who is told when a task (handle) reaches its final state. Called once.
public protocol TaskWaiter: AnyObject {
    func taskFinished(_ id: TaskID, engine: Engine)
}

/// Lifecycle events, for the Lua runtime's `h:on`, the status line and the
/// events file. All methods have empty defaults.
public protocol EngineObserver: AnyObject {
    /// False for an observer whose `taskAdded` does nothing: the engine then
    /// does not call it for each of 200,000 tasks (default true).
    var observesAdds: Bool { get }
    /// False for an observer whose `taskStarted` does nothing (default true).
    var observesStarts: Bool { get }
    /// False for an observer not to be told of finishes (default true).
    var observesFinishes: Bool { get }
    func taskAdded(_ id: TaskID, engine: Engine)
    func taskStarted(_ id: TaskID, engine: Engine)
    func taskProgress(_ id: TaskID, fraction: Double, message: String?, engine: Engine)
    func taskRetrying(_ id: TaskID, failedAttempt: Int, failure: TaskFailure, delay: Double, engine: Engine)
    /// A later attempt (2, 3, …) took a slot and started: when it really
    /// began, after the retry's delay and any wait for a slot.
    func taskAttemptStarted(_ id: TaskID, attempt: Int, engine: Engine)
    func taskFinished(_ id: TaskID, outcome: TaskOutcome, engine: Engine)
    /// A reactor sent the task round again (`requeue`): how the attempt
    /// that it reacted to ended.
    func taskRequeued(_ id: TaskID, attempt: Int, outcome: TaskOutcome, engine: Engine)
    func taskReacting(_ id: TaskID, reactor: String, engine: Engine)
    func taskHeld(_ id: TaskID, by interceptor: String, engine: Engine)
    func taskReleased(_ id: TaskID, by interceptor: String, engine: Engine)
    /// Reused from an earlier run: it finishes at once without starting.
    func taskReused(_ id: TaskID, engine: Engine)
    /// Something that happened to the run or a task apart from its
    /// attempts: a pause, its end, the stop (for the journal's timeline).
    func runMarked(_ mark: RunMark, engine: Engine)
}

/// What `EngineObserver.runMarked` reports.
public enum RunMark: Sendable, Equatable {
    /// `tasker.pause()` / SIGUSR1: nothing new starts.
    case startsPaused
    /// `tasker.resume()` / SIGUSR2 (or the stop ending a pause's wait).
    case startsResumed
    /// `h:pause()` / `h:resume()` of a task (each member of a group too).
    case taskPaused(TaskID)
    case taskResumed(TaskID)
    /// Nothing starts from here on: a signal (`SIGINT`) or `tasker.exit(n)`.
    case stopped(String)
}

extension EngineObserver {
    public var observesAdds: Bool { true }
    public var observesStarts: Bool { true }
    public var observesFinishes: Bool { true }
    public func taskAdded(_ id: TaskID, engine: Engine) {}
    public func taskStarted(_ id: TaskID, engine: Engine) {}
    public func taskProgress(_ id: TaskID, fraction: Double, message: String?, engine: Engine) {}
    public func taskRetrying(_ id: TaskID, failedAttempt: Int, failure: TaskFailure, delay: Double, engine: Engine) {}
    public func taskAttemptStarted(_ id: TaskID, attempt: Int, engine: Engine) {}
    public func taskFinished(_ id: TaskID, outcome: TaskOutcome, engine: Engine) {}
    public func taskRequeued(_ id: TaskID, attempt: Int, outcome: TaskOutcome, engine: Engine) {}
    public func taskReacting(_ id: TaskID, reactor: String, engine: Engine) {}
    public func taskHeld(_ id: TaskID, by interceptor: String, engine: Engine) {}
    public func taskReleased(_ id: TaskID, by interceptor: String, engine: Engine) {}
    public func taskReused(_ id: TaskID, engine: Engine) {}
    public func runMarked(_ mark: RunMark, engine: Engine) {}
}

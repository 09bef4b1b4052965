/// Where the attempts of defined tasks go when a run has a store
/// (`tasker run --store`): another process runs them. The runtime hands
/// each attempt over and waits; the queue calls `done` once, on any
/// thread.
public protocol RemoteQueue: AnyObject, Sendable {
    func submit(_ attempt: RemoteAttempt, done: @escaping @Sendable (RemoteOutcome) -> Void)
    /// The attempt is no longer wanted (cancel, timeout, the run ends);
    /// `done` is not called for it after this.
    func cancel(task: TaskID, attempt: Int)
}

public struct RemoteAttempt: Sendable {
    public var task: TaskID
    public var attempt: Int
    public var name: String
    /// The args as JSON.
    public var args: String
    public var priority: Int
    public var timeout: Double?
    /// The task's `ctx.idempotency_key` here, so the worker's is the same.
    public var key: String?
    /// A hash of the definition's body here, to tell when a worker runs
    /// another version of it.
    public var version: String?
    /// The run's secrets that occur in `args`, as a JSON array (nil: none):
    /// the worker masks them in what it writes, as this process does.
    public var secrets: String?

    public init(task: TaskID, attempt: Int, name: String, args: String, priority: Int, timeout: Double?,
                key: String? = nil, version: String? = nil, secrets: String? = nil) {
        self.task = task
        self.attempt = attempt
        self.name = name
        self.args = args
        self.priority = priority
        self.timeout = timeout
        self.key = key
        self.version = version
        self.secrets = secrets
    }
}

/// A `TaskFailure` payload: the value a body raised on a worker, as a JSON
/// array of one value, when it was not one of the engine's error tables (a
/// string raised there is the same string here, as in one process).
public struct RemoteErrorValue: Sendable {
    public var json: String
    public init(json: String) { self.json = json }
}

public enum RemoteOutcome: Sendable {
    /// The values as a JSON array.
    case succeeded(String)
    case failed(TaskFailure)
}

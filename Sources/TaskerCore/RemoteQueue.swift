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

    public init(task: TaskID, attempt: Int, name: String, args: String, priority: Int, timeout: Double?) {
        self.task = task
        self.attempt = attempt
        self.name = name
        self.args = args
        self.priority = priority
        self.timeout = timeout
    }
}

public enum RemoteOutcome: Sendable {
    /// The values as a JSON array.
    case succeeded(String)
    case failed(TaskFailure)
}

/// How a reactor's reactions behave (README, Reactors).
public struct ReactorOptions: Sendable {
    /// Run the task again when the reaction ends (at most `maxRequeues` times).
    public var requeue = false
    /// While a reaction runs, no other task starts (running ones continue).
    public var suspend = false
    /// A requeued task passes the interceptors again.
    public var reintercept = false
    /// Seconds a reaction may take; past that its tasks fail (kind `reactor`).
    public var timeout: Double?
    public var maxRequeues = 3

    public init() {}
}

/// Runs after a task's final attempt (after its retries), before anyone
/// sees the result:
///
///     final attempt ─▶ when? ─no─▶ finish
///                       │yes
///                       ▼
///     reaction (one at a time; later triggers join it) ─▶ requeue / finish / fail
public protocol TaskReactor: AnyObject {
    var name: String { get }
    var options: ReactorOptions { get }
    /// Whether to react to this result; a failure fails the task (kind `reactor`).
    func wants(_ id: TaskID, outcome: TaskOutcome, engine: Engine) -> Result<Bool, TaskFailure>
    /// Starts the reaction's work; report its end with `engine.reactionEnded`.
    func react(_ reaction: Reaction, engine: Engine)
    /// The reaction timed out: stop its work (its end is ignored afterwards).
    func abort(_ reaction: Reaction, engine: Engine)
}

/// One run of a reactor, shared by every task that triggered it meanwhile.
public final class Reaction {
    public let id: Int
    /// Strong: a reactor removed while its reaction runs (`r:remove()`,
    /// from the reaction itself too) lives until the reaction ends.
    public let reactor: TaskReactor
    /// The tasks waiting on it, the first being the one that started it.
    public internal(set) var tasks: [TaskID]
    var timer: LoopTimer?
    public internal(set) var ended = false

    init(id: Int, reactor: TaskReactor, first: TaskID) {
        self.id = id
        self.reactor = reactor
        self.tasks = [first]
    }
}

/// A task's number: 1, 2, 3… in add order, unique per engine.
public typealias TaskID = Int

/// The task states the README lists under Tasks. Exactly one of the last
/// four ends every task: `skipped` is a task that never ran because its
/// `after`/`when` condition was not met, which is not a failure and not a
/// cancellation (a `when = "failure"` alert on a good night).
public enum TaskState: String, Sendable, CaseIterable {
    case waiting, pending, held, running, paused, reacting, succeeded, failed, cancelled, skipped

    public var isFinal: Bool { self == .succeeded || self == .failed || self == .cancelled || self == .skipped }
}

/// Why a task (or an API call) failed. `kind == .error` is an error raised by
/// user code, passed through unchanged; the others are raised by the engine.
public struct TaskFailure: Error, Sendable, CustomStringConvertible {
    /// An open set of kinds: the engine's own are here; runtimes and
    /// modules add theirs (`http`, `exec`, `json`…) as extensions, so the
    /// core needs no word of its clients.
    public struct Kind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// Raised by user code, passed through unchanged.
        public static let error = Kind(rawValue: "error")
        public static let timeout = Kind(rawValue: "timeout")
        public static let cancelled = Kind(rawValue: "cancelled")
        public static let discarded = Kind(rawValue: "discarded")
        public static let dependency = Kind(rawValue: "dependency")
        public static let interceptor = Kind(rawValue: "interceptor")
        public static let reactor = Kind(rawValue: "reactor")
        public static let usage = Kind(rawValue: "usage")
        public static let deadlock = Kind(rawValue: "deadlock")
    }

    public var kind: Kind
    public var message: String
    /// What a runtime attaches to find its own error value again (the Lua
    /// runtime: the slot holding the raised Lua value).
    public var payload: (any Sendable)?
    /// "file:line" of the script code the error is about, when known.
    public var position: String?
    /// Seconds the failed work asked to wait before another try (HTTP
    /// `Retry-After`); a retry waits this long, capped by `max_delay`.
    public var retryAfter: Double?
    /// A short reason for the run's summary ("skipped: dependency 'build'
    /// failed"); `description` when absent.
    public var summary: String?
    /// Trying again cannot help (a program that is not on PATH): retried
    /// only when the task's `when` asks for it.
    public var permanent = false
    /// The task's `after`/`when` condition was not met: it ends `skipped`.
    public var conditionUnmet = false

    public init(_ kind: Kind, _ message: String, payload: (any Sendable)? = nil) {
        self.kind = kind
        self.message = message
        self.payload = payload
    }

    public var description: String {
        let text = kind == .error ? message : "\(kind.rawValue): \(message)"
        guard let position, !position.isEmpty else { return text }
        return "\(position): \(text)"
    }

    /// Cancellation and discards end a task `cancelled`; everything else `failed`.
    public var endsCancelled: Bool { kind == .cancelled || kind == .discarded || kind == .dependency }
}

/// The final result of a task.
/// Failures are boxed (`indirect`): the common case, a success, stays a
/// few words and is cheap to copy on the per-task path.
public enum TaskOutcome: Sendable {
    case succeeded(TaskValue)
    indirect case failed(TaskFailure)
    indirect case cancelled(TaskFailure)
    /// Never ran: its `after`/`when` condition was not met (kind `dependency`).
    indirect case skipped(TaskFailure)

    public var state: TaskState {
        switch self {
        case .succeeded: .succeeded
        case .failed: .failed
        case .cancelled: .cancelled
        case .skipped: .skipped
        }
    }

    public var failure: TaskFailure? {
        switch self {
        case .succeeded: nil
        case .failed(let f), .cancelled(let f), .skipped(let f): f
        }
    }

    static func ending(with failure: TaskFailure) -> TaskOutcome {
        if failure.conditionUnmet { return .skipped(failure) }
        return failure.endsCancelled ? .cancelled(failure) : .failed(failure)
    }
}

/// What a task returned. A concrete enum, not an existential: the per-task
/// path copies it, and casts would cost more than the work.
public enum TaskValue: Sendable {
    /// No values.
    case none
    /// One integer, the commonest small result (a count, a code, an
    /// index): kept here, so a runtime stores nothing for it.
    case integer(Int64)
    /// Values a runtime keeps itself (the Lua runtime: in its values table,
    /// under `slot`, the id of the task that produced them).
    case stored(slot: TaskID, count: Int32)
    /// A group's value: its members, in input order; the runtime lists
    /// each member's first value.
    case group([TaskID])
    /// A Swift value (tasks whose body is a Swift closure); boxed.
    indirect case swift(any Sendable)
}

/// `after`/`when`: which outcomes of the dependencies let a task start.
/// `success`: every one succeeded (the first that did not skips it at
/// once); `failure`: any one did not succeed, judged when all are final
/// (a rollback after `{deploy, smoke}` runs when either failed); `always`:
/// all final, whatever their outcomes.
public enum DependencyCondition: String, Sendable {
    case success, failure, always

    /// A dependency ending in `state` settles the condition as not met
    /// before the others end.
    func failsEarly(on state: TaskState) -> Bool { self == .success && state != .succeeded }
}

/// One run of a task body. `token` tells a late report of an aborted attempt
/// from the current one.
public struct AttemptRun: Sendable, Hashable {
    public let task: TaskID
    public let attempt: Int
    public let token: UInt64

    public init(task: TaskID, attempt: Int, token: UInt64) {
        self.task = task
        self.attempt = attempt
        self.token = token
    }
}

/// What a run ended with, by kind of handle (see `Engine.summary()`).
public struct RunCounts: Sendable {
    /// Plain tasks (and single-flight handles) per final state.
    public var tasks: [TaskState: Int] = [:]
    /// `parallel`/`serial` groups and `every` schedules per final state.
    public var groups: [TaskState: Int] = [:]
    public var failed: [TaskID] = []
    public var cancelled: [TaskID] = []
    public var skipped: [TaskID] = []
    /// Succeeded tasks that were reused from an earlier run (resume).
    public var reused = 0
    /// Tasks that took more than one attempt, whatever their end.
    public var retried = 0

    public init() {}
}

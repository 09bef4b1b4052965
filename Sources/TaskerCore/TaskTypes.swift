/// A task's number: 1, 2, 3… in add order, unique per engine.
public typealias TaskID = Int

/// The task states the README lists under Tasks. Exactly one of the last three ends every task.
public enum TaskState: String, Sendable, CaseIterable {
    case waiting, pending, held, running, reacting, succeeded, failed, cancelled

    public var isFinal: Bool { self == .succeeded || self == .failed || self == .cancelled }
}

/// Why a task (or an API call) failed. `kind == .error` is an error raised by
/// user code, passed through unchanged; the others are raised by the engine.
public struct TaskFailure: Error, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        case error, timeout, cancelled, discarded, dependency, http, exec, json
        case interceptor, reactor, usage, deadlock
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

    public var state: TaskState {
        switch self {
        case .succeeded: .succeeded
        case .failed: .failed
        case .cancelled: .cancelled
        }
    }

    public var failure: TaskFailure? {
        switch self {
        case .succeeded: nil
        case .failed(let f), .cancelled(let f): f
        }
    }

    static func ending(with failure: TaskFailure) -> TaskOutcome {
        failure.endsCancelled ? .cancelled(failure) : .failed(failure)
    }
}

/// What a task returned. A concrete enum, not an existential: the per-task
/// path copies it, and casts would cost more than the work.
public enum TaskValue: Sendable {
    /// No values.
    case none
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
public enum DependencyCondition: String, Sendable {
    case success, failure, always

    func isMet(by state: TaskState) -> Bool {
        switch self {
        case .success: state == .succeeded
        case .failure: state != .succeeded
        case .always: true
        }
    }
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

    public init() {}
}

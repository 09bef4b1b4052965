/// A run as the journal keeps it. Times are Unix seconds (wall clock).
public struct JournalRun: Sendable {
    public var id: String
    /// The pipeline file's real path (runs of one file are found by it).
    public var pipeline: String
    public var args: [String]
    /// `--var` values, secret-looking ones redacted.
    public var vars: [String: String]
    public var started: Double
    public var ended: Double?
    public var exitCode: Int?
    /// Tasks per final state (`succeeded`, `failed`, `cancelled`, `reused`).
    public var counts: [String: Int]
    public var pid: Int
    /// The run this one resumed, if any.
    public var resumedFrom: String?

    public init(id: String, pipeline: String, args: [String], vars: [String: String], started: Double,
                pid: Int, resumedFrom: String? = nil) {
        self.id = id
        self.pipeline = pipeline
        self.args = args
        self.vars = vars
        self.started = started
        self.counts = [:]
        self.pid = pid
        self.resumedFrom = resumedFrom
    }

    /// Seconds from start to end (nil while running, or if it died).
    public var duration: Double? { ended.map { $0 - started } }
}

/// One attempt of a task; times in seconds since the run started.
public struct JournalAttempt: Sendable, Equatable {
    public var start: Double
    public var end: Double
    public var error: String?
    public var kind: String?

    public init(start: Double, end: Double, error: String? = nil, kind: String? = nil) {
        self.start = start
        self.end = end
        self.error = error
        self.kind = kind
    }
}

/// A task as the journal keeps it; times in seconds since the run started.
public struct JournalTask: Sendable {
    public var id: Int
    /// What names the task across runs (`spec.id` or derived), nil if it
    /// has none; then `notResumable` says why.
    public var identity: String?
    public var notResumable: String?
    public var name: String
    /// `task`, `group` or `schedule`.
    public var kind: String
    public var tags: [String]
    public var after: [Int]
    /// A final state, or `running` while the run goes on (`lost` if it died).
    public var state: String
    public var attempts: Int
    public var added: Double
    public var started: Double?
    public var ended: Double?
    public var held: Double
    public var reused: Bool
    public var error: String?
    public var errorKind: String?
    /// The values as JSON (an array), when they could be stored.
    public var value: String?
    /// Every attempt, when there was more than one (else `started`/`ended`).
    public var attemptLog: [JournalAttempt]

    public init(id: Int, name: String, state: String) {
        self.id = id
        self.name = name
        self.kind = "task"
        self.tags = []
        self.after = []
        self.state = state
        self.attempts = 0
        self.added = 0
        self.held = 0
        self.reused = false
        self.attemptLog = []
    }

    public var duration: Double? {
        guard let started, let ended else { return nil }
        return ended - started
    }

    /// The attempts to draw: the log, or the one attempt there was.
    public var allAttempts: [JournalAttempt] {
        if !attemptLog.isEmpty { return attemptLog }
        guard let started else { return [] }
        return [JournalAttempt(start: started, end: ended ?? started, error: error, kind: errorKind)]
    }
}

/// HTTP requests of one run to one host.
public struct JournalHostRequests: Sendable {
    public var host: String
    public var requests: Int
    public var retries: Int
    public var failures: Int

    public init(host: String, requests: Int = 0, retries: Int = 0, failures: Int = 0) {
        self.host = host
        self.requests = requests
        self.retries = retries
        self.failures = failures
    }
}

/// Something recorded of the run or one task apart from its entry, when it
/// happened (a killed run keeps it): a pause and its end and the interrupt,
/// drawn on the report's timeline; what a task's processes wrote.
public struct JournalMark: Sendable, Equatable {
    public enum Kind: UInt8, Sendable {
        case paused = 0, resumed, interrupted
        /// `detail` is what the task's processes wrote (the last MiB);
        /// `failedOutput` when the task failed.
        case output, failedOutput

        public var name: String {
            switch self {
            case .paused: "paused"
            case .resumed: "resumed"
            case .interrupted: "interrupted"
            case .output: "output"
            case .failedOutput: "failed output"
            }
        }
    }

    public var kind: Kind
    /// Seconds into the run.
    public var at: Double
    /// The task it is about; 0: the whole run (`tasker.pause()`, a signal).
    public var task: Int
    /// The signal's name for an interrupt; the text of an output.
    public var detail: String?

    public init(_ kind: Kind, at: Double, task: Int = 0, detail: String? = nil) {
        self.kind = kind
        self.at = at
        self.task = task
        self.detail = detail
    }
}

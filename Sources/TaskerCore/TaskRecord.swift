/// The engine's record of one task handle. Loop-confined, owned by `Engine`.
///
/// A record is a handle and, unless it follows another task's work (single
/// flight), also that work. `state` is the work's state; `outcome` is the
/// handle's final result, set exactly once.
final class TaskRecord {
    enum Role {
        case work
        case follower(leader: TaskID)
        case group(GroupState)
        case schedule(ScheduleState)
    }

    let id: TaskID
    var explicitName: String?
    /// Where the work stands; only its transitions write it (see
    /// `TaskLifecycle`), applied by the engine.
    var lifecycle: TaskLifecycle
    var state: TaskState { lifecycle.state }
    var role: Role = .work

    // spec
    var priority = 0
    var condition = DependencyCondition.success
    var body: TaskBody?
    var after: [TaskID] = []
    /// Added by a reaction: starts even while reactors suspend, and is not
    /// reacted to (a reaction must not wait on itself).
    let ownedByReaction: Bool
    /// Succeeded in an earlier run; never started in this one.
    var reused = false
    /// See `TaskSpec.identityHandedOver`.
    var identityHandedOver = false
    /// See `Engine.finishThroughSink`.
    var finishesThroughSink = false
    /// An `every` instance: nobody holds its handle, so once it has ended
    /// well its record can go (see `Engine.forgetFinished`).
    var ephemeral = false
    /// `Engine.stamps` readings, kept only when the engine keeps times.
    var addedAt: UInt64 = 0
    var startedAt: UInt64 = 0

    // the handle
    /// Set only by `Engine.finishHandle`, with `finalState`.
    var outcome: TaskOutcome?
    /// `outcome?.state`, kept apart: the hot checks need no outcome copy.
    var finalState: TaskState?
    /// Who to tell at the finish: the first waiter inline (the common case
    /// costs no array), the rest in `moreWaiters`.
    var waiter: TaskWaiter?
    var moreWaiters: [TaskWaiter] = []
    var dependents: [TaskID] = []

    /// What most tasks never use (a timeout, retries, a key, a delay,
    /// followers, timers), apart: the record stays
    /// small for the 200,000-task loop. Made on the first write of a value
    /// other than the default.
    private var rare: RareParts?

    init(id: TaskID, startRequested: Bool, ownedByReaction: Bool) {
        self.id = id
        self.lifecycle = TaskLifecycle(startRequested: startRequested)
        self.ownedByReaction = ownedByReaction
    }

    var name: String { explicitName ?? "task-\(id)" }

    private var parts: RareParts {
        if let rare { return rare }
        let r = RareParts()
        rare = r
        return r
    }

    var timeout: Double? {
        get { rare?.timeout }
        set { if newValue != nil || rare != nil { parts.timeout = newValue } }
    }
    var retry: RetryPolicy {
        get { rare?.retry ?? .none }
        set { if newValue != .none || rare != nil { parts.retry = newValue } }
    }
    var retryWhen: ((TaskFailure, Int) -> Bool)? {
        get { rare?.retryWhen }
        set { if newValue != nil || rare != nil { parts.retryWhen = newValue } }
    }
    var delay: Double {
        get { rare?.delay ?? 0 }
        set { if newValue != 0 || rare != nil { parts.delay = newValue } }
    }
    var key: String? {
        get { rare?.key }
        set { if newValue != nil || rare != nil { parts.key = newValue } }
    }
    var parent: TaskID? {
        get { rare?.parent }
        set { if newValue != nil || rare != nil { parts.parent = newValue } }
    }
    var timer: LoopTimer? {
        get { rare?.timer }
        set { if newValue != nil || rare != nil { parts.timer = newValue } }
    }
    var timeoutTimer: LoopTimer? {
        get { rare?.timeoutTimer }
        set { if newValue != nil || rare != nil { parts.timeoutTimer = newValue } }
    }
    var followers: [TaskID] {
        get { rare?.followers ?? [] }
        _modify { yield &parts.followers }
    }
}

/// A record's rarely used parts (see `TaskRecord.rare`).
final class RareParts {
    var timeout: Double?
    var retry = RetryPolicy.none
    var retryWhen: ((TaskFailure, Int) -> Bool)?
    var delay: Double = 0
    var key: String?
    var parent: TaskID?
    var timer: LoopTimer?
    var timeoutTimer: LoopTimer?
    var followers: [TaskID] = []
}

/// What a reacting task keeps: how many reactions are pending, the result
/// they hold back, and what they asked for.
final class ReactingState {
    var pending: Int
    let outcome: TaskOutcome
    var failure: TaskFailure?
    var requeueLimit: Int?
    var reintercept = false

    init(pending: Int, outcome: TaskOutcome) {
        self.pending = pending
        self.outcome = outcome
    }
}

/// A `parallel` or `serial` group: members start as the group allows.
final class GroupState {
    let members: [TaskID]
    let concurrency: Int
    let failFast: Bool
    var nextToStart = 0
    var finished = 0
    var running = 0
    var firstFailure: (index: Int, failure: TaskFailure)?
    /// A rolling group's batches (nil: parallel or serial).
    var rolling: RollingState?
    /// Members a resumed run reuses, with their stored values: they
    /// succeed as the group starts, and are never started.
    var reused: [TaskID: TaskValue] = [:]
    /// Inside `finishReusedMembers`.
    var startingReused = false

    init(members: [TaskID], concurrency: Int, failFast: Bool) {
        self.members = members
        self.concurrency = max(1, concurrency)
        self.failFast = failFast
    }
}

/// An `every` schedule: a new instance per tick, never two at once.
final class ScheduleState {
    let interval: Double
    let makeInstance: (Int) -> TaskSpec
    var count = 0
    var current: TaskID?
    var firstTick: UInt64 = 0
    var ticks: UInt64 = 0

    init(interval: Double, makeInstance: @escaping (Int) -> TaskSpec) {
        self.interval = interval
        self.makeInstance = makeInstance
    }
}

import DequeModule

/// The task engine: records, states, the ready queue, concurrency slots,
/// dependencies, delays, retries, timeouts, cancellation, single flight,
/// groups and schedules (README, Tasks). It knows nothing of Lua.
///
/// Confinement: an `Engine` lives on one `EventLoop` and every method must
/// be called on that loop's thread. Callouts (bodies, waiters, observers)
/// happen synchronously; runtimes that run user code queue it instead of
/// running it inside the callout.
///
///     let engine = Engine(loop: loop, concurrency: 4)
///     let id = engine.add(TaskSpec(name: "fetch", body: myBody))
///     engine.addWaiter(id, waiter)
public final class Engine {
    public let loop: EventLoop
    public var concurrency: Int {
        didSet { scheduleDispatch() }
    }
    public var observers: [EngineObserver] = [] {
        didSet {
            addObservers = observers.filter(\.observesAdds)
            startObservers = observers.filter(\.observesStarts)
            finishObservers = observers.filter(\.observesFinishes)
        }
    }
    /// The observers that want `taskAdded`, `taskStarted`, `taskFinished`.
    private(set) var addObservers: [EngineObserver] = []
    private(set) var startObservers: [EngineObserver] = []
    private(set) var finishObservers: [EngineObserver] = []
    /// Set by `keepStartLog(wake:)`.
    var startLog: StartLog?
    /// Set by `keepQuickFinishes`.
    var quickFinishes: QuickFinishLog?
    /// Set by `setFinishSink(_:)`: the owner keeps the sink alive for as
    /// long as `finishSink` lends it to calls (both are set together, and
    /// never cleared).
    var finishSinkOwner: FinishSink?
    var finishSink: Unmanaged<FinishSink>?
    /// Set by `keepTimes(_:)`: each task then keeps when it was added and
    /// first started (in its `facts`); the journal reads them at the
    /// finish, which is cheaper than an observer keeping a table of its own.
    public private(set) var stamps: TickSource?
    /// The interceptor chain, in registration order (see `TaskInterceptor`).
    public internal(set) var interceptors: [TaskInterceptor] = []
    var batches: [ObjectIdentifier: HeldBatch] = [:]

    var records: [TaskRecord?] = [nil]
    private var ready = ReadyQueue()
    /// Tasks released from an interceptor's batch, then the task that
    /// released them: they go before the ready queue, in this order.
    var released = Deque<TaskID>()
    /// Ready work of reactions: starts first, and even while suspended.
    private var reactionReady = Deque<TaskID>()
    public internal(set) var reactors: [TaskReactor] = []
    var reactions: [ObjectIdentifier: Reaction] = [:]
    /// Per reactor: the last attempt token its last successful reaction
    /// covers (attempts that started before it ended).
    var coverage: [ObjectIdentifier: UInt64] = [:]
    var nextReaction = 0
    var running = 0
    /// Attempts that lent their slot while waiting and are woken, waiting
    /// for a slot again: they go before tasks not yet started.
    var reclaiming = Deque<(run: AttemptRun, resume: () -> Void)>()
    /// Final states of records freed by `forgetFinished`.
    var forgottenCounts: [TaskState: Int] = [:]
    /// After an interrupt or `tasker.exit`: nothing starts any more.
    public private(set) var closed = false
    /// See `cancelAdds(reason:)`.
    private(set) var cancelsAdds: String?
    var keyIndex: [String: TaskID] = [:]
    /// Rolling members running per host, across the run.
    let hostSlots = HostSlots()
    private var dispatchScheduled = false
    private var nextToken: UInt64 = 0
    /// Handles not yet final.
    public internal(set) var unfinishedCount = 0
    /// Another engine on the same loop that a suspending reaction in either
    /// holds back too (a runtime with a second engine for its own kind of
    /// work links the two). Unowned, not weak: whoever links two engines
    /// keeps both as long as they run, and a weak reference would give each
    /// engine a side table, making every retain of it take the slow path.
    public unowned var peer: Engine?
    /// `tasker.pause()`: nothing new starts until `resumeStarts()` (work of
    /// reactions still does).
    public internal(set) var startsPaused = false
    /// `cancelAll` is going through every task (dependents wait their turn).
    var cancellingAll = false
    /// While positive, no new attempt starts (reactors with `suspend`).
    public var suspended = 0 {
        didSet { if suspended == 0 { scheduleDispatch() } }
    }

    public init(loop: EventLoop, concurrency: Int = 16) {
        self.loop = loop
        self.concurrency = max(1, concurrency)
    }

    // MARK: adding

    /// Adds a task; returns its id. It starts when its spec allows.
    @discardableResult
    public func add(_ spec: TaskSpec) -> TaskID {
        let r = newRecord(spec)
        if let key = spec.key, let leaderID = keyIndex[key], let leader = record(leaderID), !leader.state.isFinal {
            r.role = .follower(leader: leaderID)
            r.body = nil
            leader.followers.append(r.id)
            leader.lifecycle.handleJoined()
            notifyAdded(r.id)
            return r.id
        }
        if let key = spec.key { keyIndex[key] = r.id }
        notifyAdded(r.id)
        attachDependencies(r, spec.after)
        if let reason = cancelsAdds { cancel(r.id, reason: reason) }
        return r.id
    }

    /// Adds a task that is already done: it succeeded in an earlier run and
    /// its values are reused (a resumed run). It never starts, so no
    /// interceptor or reactor sees it; observers see it added, reused and
    /// finished.
    @discardableResult
    public func addReused(_ spec: TaskSpec, value: TaskValue) -> TaskID {
        let r = newRecord(spec)
        r.reused = true
        r.after = spec.after
        notifyAdded(r.id)
        for o in observers { o.taskReused(r.id, engine: self) }
        finishWork(r, .succeeded(value))
        return r.id
    }

    /// Whether the task was reused from an earlier run (see `addReused`).
    public func isReused(_ id: TaskID) -> Bool { record(id)?.reused ?? false }

    func newRecord(_ spec: TaskSpec) -> TaskRecord {
        let r = TaskRecord(id: records.count, startRequested: spec.start, ownedByReaction: spec.ownedByReaction)
        r.explicitName = spec.name
        r.priority = spec.priority
        r.timeout = spec.timeout
        r.retry = spec.retry
        r.retryWhen = spec.retryWhen
        r.condition = spec.when
        r.after = spec.after  // known to observers from `taskAdded` on
        r.delay = spec.delay
        r.key = spec.key
        r.body = spec.body
        r.identityHandedOver = spec.identityHandedOver
        if let stamps { r.addedAt = stamps.now() }
        records.append(r)
        unfinishedCount += 1
        return r
    }

    private func notifyAdded(_ id: TaskID) {
        for o in addObservers { o.taskAdded(id, engine: self) }
    }

    func attachDependencies(_ r: TaskRecord, _ after: [TaskID]) {
        r.after = after
        for depID in after {
            guard let dep = record(depID) else { continue }
            if let outcome = dep.outcome {
                if r.condition.failsEarly(on: outcome.state) {
                    cancelWork(r, dependencyFailure(r, dep, outcome.state))
                    return
                }
                r.lifecycle.dependencyAlreadyEnded(succeeded: outcome.state == .succeeded)
            } else {
                r.lifecycle.dependencyAdded()
                dep.dependents.append(r.id)
            }
        }
        if r.lifecycle.unmetDependencies == 0 { dependenciesSettled(r) }
    }

    // MARK: queries

    @inline(__always)
    func record(_ id: TaskID) -> TaskRecord? {
        id > 0 && id < records.count ? records[id] : nil
    }

    public var taskCount: Int { records.count - 1 }

    public func name(_ id: TaskID) -> String { record(id)?.name ?? "task-\(id)" }

    /// The name the spec gave (nil when the name is the default `task-N`).
    public func explicitName(_ id: TaskID) -> String? { record(id)?.explicitName }


    /// The handle's state (a follower shows its leader's work until it ends).
    public func state(_ id: TaskID) -> TaskState {
        guard let r = record(id) else { return .cancelled }
        if let s = r.finalState { return s }
        if case .follower(let leader) = r.role { return record(leader)?.state ?? .waiting }
        return r.lifecycle.isPaused ? .paused : r.state
    }

    public func outcome(_ id: TaskID) -> TaskOutcome? { record(id)?.outcome }

    /// Whether the handle has its final outcome (cheaper than `outcome`).
    public func isFinished(_ id: TaskID) -> Bool { record(id)?.finalState != nil }

    public func attempts(_ id: TaskID) -> Int {
        guard let r = record(id) else { return 0 }
        if case .follower(let leader) = r.role { return record(leader)?.lifecycle.attempts ?? 0 }
        return r.lifecycle.attempts
    }

    /// The monotonic deadline (ns) of the task's running attempt, or 0.
    public func deadline(_ id: TaskID) -> UInt64 { record(id)?.lifecycle.deadline ?? 0 }

    public func isCurrent(_ run: AttemptRun) -> Bool {
        record(run.task)?.lifecycle.attempt(run.token) != nil
    }

    public func parent(_ id: TaskID) -> TaskID? { record(id)?.parent }

    /// The tasks this one was added `after`.
    public func dependencies(_ id: TaskID) -> [TaskID] { record(id)?.after ?? [] }

    public func groupMembers(_ id: TaskID) -> [TaskID]? {
        guard let r = record(id), case .group(let g) = r.role else { return nil }
        return g.members
    }

    /// Registers `waiter` to be told once when the handle is final. If it
    /// already is, the waiter is told at once.
    public func addWaiter(_ id: TaskID, _ waiter: TaskWaiter) {
        guard let r = record(id) else { return }
        if r.finalState != nil {
            waiter.taskFinished(id, engine: self)
        } else {
            if r.waiter == nil { r.waiter = waiter } else { r.moreWaiters.append(waiter) }
        }
    }

    public func removeWaiter(_ id: TaskID, _ waiter: TaskWaiter) {
        guard let r = record(id) else { return }
        if r.waiter === waiter { r.waiter = nil }
        r.moreWaiters.removeAll { $0 === waiter }
    }

    /// Counts per final state (tasks apart from groups and schedules), and
    /// the failed, cancelled and skipped tasks in id order. A group fails when a
    /// member fails: that is one failure, the member's.
    public func summary() -> RunCounts {
        var c = RunCounts()
        c.tasks = forgottenCounts
        for case let r? in records {
            let s = state(r.id)
            switch r.role {
            case .group, .schedule:
                c.groups[s, default: 0] += 1
            default:
                c.tasks[s, default: 0] += 1
                if r.reused { c.reused += 1 }
                if r.lifecycle.attempts > 1 { c.retried += 1 }
                if s == .failed { c.failed.append(r.id) }
                if s == .cancelled { c.cancelled.append(r.id) }
                if s == .skipped { c.skipped.append(r.id) }
            }
        }
        return c
    }

    // MARK: starting

    /// Starts a `start = false` task; no effect in any other state.
    public func start(_ id: TaskID) {
        guard let r = record(id), r.finalState == nil, r.lifecycle.requestStart() else { return }
        tryMakeReady(r)
    }

    /// Dependencies ended and start requested: the work starts (after the
    /// spec's delay, if any).
    func tryMakeReady(_ r: TaskRecord) {
        guard r.lifecycle.isReady, r.finalState == nil else { return }
        guard r.delay > 0 else { return startWork(r) }
        let until = loop.clock.now &+ Monotonic.nanos(r.delay)
        r.lifecycle.delay(until: until)
        r.timer = loop.schedule(at: until) { [unowned self] in
            r.timer = nil
            self.startWork(r)
        }
    }

    @inline(__always)
    private func startWork(_ r: TaskRecord) {
        switch r.role {
        case .work: enqueueReady(r)
        case .group: startGroup(r)
        case .schedule: startSchedule(r)
        case .follower: break
        }
    }

    /// Into a ready queue, unless its lifecycle says it cannot go there.
    func enqueueReady(_ r: TaskRecord) {
        guard r.lifecycle.queue().contains(.enqueue) else { return }
        pushReady(r)
    }

    /// Puts a task its lifecycle has queued into the ready queue it belongs to.
    func pushReady(_ r: TaskRecord) {
        if r.ownedByReaction {
            reactionReady.append(r.id)
        } else {
            ready.push(r.id, priority: r.priority)
        }
        scheduleDispatch()
    }

    /// Released tasks continue through the chain before anything else.
    func interceptFirst(_ ids: [TaskID]) {
        released.append(contentsOf: ids)
        scheduleDispatch()
    }

    func scheduleDispatch() {
        guard !dispatchScheduled else { return }
        dispatchScheduled = true
        loop.enqueue { [unowned self] in self.dispatch() }
    }

    /// Starts ready tasks while slots are free: a reaction's own work first,
    /// then released tasks, then by priority. Each passes the interceptors
    /// right before it starts (so it sees current state, e.g. a fresh token);
    /// a held or delayed task takes no slot.
    public func dispatch() {
        dispatchScheduled = false
        guard !closed else { return }
        while running < concurrency, let (run, resume) = reclaiming.popFirst() {
            guard let r = record(run.task), r.lifecycle.reclaimSlot(token: run.token) else { continue }
            running += 1
            resume()
        }
        while running < concurrency, let id = nextToStart() {
            // A stale entry (cancelled, released again) or a paused task
            // (parked until resumed) does not start.
            guard let r = record(id), case .admit(let chain) = r.lifecycle.take() else { continue }
            guard admit(r, from: chain) else { continue }
            beginAttempt(r)
        }
    }

    private func nextToStart() -> TaskID? {
        if let id = reactionReady.popFirst() { return id }
        guard suspended == 0, !startsPaused else { return nil }
        return released.popFirst() ?? ready.pop()
    }

    /// Stops starting anything: queued tasks stay where they are until they
    /// are cancelled (an interrupt, `tasker.exit`). `reason` is what
    /// stopped the run (`SIGINT`, `exit(3)` from `tasker.exit` or `os.exit`), for the journal.
    public func close(reason: String) {
        guard !closed else { return }
        closed = true
        mark(.stopped(reason))
    }

    /// From now on a task added is cancelled at once with `reason` (after
    /// an interrupt: cleanup code that adds a task and waits for it gets
    /// its cancellation, where the task would wait for a start that never
    /// comes and end as a deadlock).
    public func cancelAdds(reason: String) {
        cancelsAdds = reason
    }

    /// A running attempt waits on other tasks: its slot goes to someone else
    /// meanwhile (so tasks that await the tasks they add cannot fill every
    /// slot and starve them).
    public func lendSlot(_ run: AttemptRun) {
        guard let r = record(run.task), r.lifecycle.lendSlot(token: run.token).contains(.freeSlot) else { return }
        running -= 1
        scheduleDispatch()
    }

    /// Whether the attempt has lent its slot (see `lendSlot`).
    public func hasLentSlot(_ run: AttemptRun) -> Bool {
        record(run.task)?.lifecycle.attempt(run.token)?.slot == .lent
    }

    /// The attempt is about to go on: `resume` runs once it has a slot again,
    /// now if one is free, else before any task not yet started. Never runs
    /// if the attempt ends first (cancelled, timed out).
    public func reclaimSlot(_ run: AttemptRun, _ resume: @escaping () -> Void) {
        guard let r = record(run.task), r.lifecycle.attempt(run.token)?.slot == .lent else {
            resume()
            return
        }
        if running < concurrency && reclaiming.isEmpty && !closed {
            _ = r.lifecycle.reclaimSlot(token: run.token)
            running += 1
            resume()
        } else {
            reclaiming.append((run, resume))
            scheduleDispatch()
        }
    }

    /// The token of the latest attempt started.
    var currentToken: UInt64 { nextToken }

    func newToken() -> UInt64 {
        nextToken &+= 1
        return nextToken
    }
}

extension Engine {
    /// The task whose work a single-flight follower follows.
    public func leader(of id: TaskID) -> TaskID? {
        guard let r = record(id), case .follower(let leader) = r.role else { return nil }
        return leader
    }
}

extension Engine {
    /// Whether the work behind a record has ended (a cancelled leader
    /// handle may still have work running for its followers).
    public func isWorkFinished(_ id: TaskID) -> Bool { record(id)?.state.isFinal ?? true }

    public func isGroupOrSchedule(_ id: TaskID) -> Bool {
        guard let r = record(id) else { return false }
        switch r.role {
        case .group, .schedule: return true
        default: return false
        }
    }
}

/// What a recorder wants to know of a task, read in one look-up.
public struct TaskFacts: Sendable {
    /// Whether the spec gave a name (else it is the default `task-N`).
    public var hasExplicitName = false
    public var attempts = 0
    public var isReused = false
    public var isGroup = false
    public var isSchedule = false
    /// An `every` run.
    public var isEphemeral = false
    public var hasDependencies = false
    /// See `TaskSpec.identityHandedOver`.
    public var identityHandedOver = false
    /// When it was added and first started (`Engine.stamps` readings; 0:
    /// not started, or the engine does not keep times).
    public var added: UInt64 = 0
    public var started: UInt64 = 0
}

extension Engine {
    public func facts(_ id: TaskID) -> TaskFacts {
        guard let r = record(id) else { return TaskFacts() }
        return facts(of: r)
    }

    @inline(__always)
    func facts(of r: TaskRecord) -> TaskFacts {
        var f = TaskFacts()
        f.added = r.addedAt
        f.started = r.startedAt
        f.hasExplicitName = r.explicitName != nil
        f.attempts = r.lifecycle.attempts
        switch r.role {
        case .group: f.isGroup = true
        case .schedule: f.isSchedule = true
        case .follower(let leader): f.attempts = record(leader)?.lifecycle.attempts ?? 0
        default: break
        }
        f.isReused = r.reused
        f.isEphemeral = r.ephemeral
        f.hasDependencies = !r.after.isEmpty
        f.identityHandedOver = r.identityHandedOver
        return f
    }
}

extension Engine {
    /// From now on each task keeps when it was added and first started
    /// (`TaskFacts.added`, `.started`), read from `source`.
    public func keepTimes(_ source: TickSource) {
        stamps = source
    }

    /// Whether the task is an `every` instance (see `forgetFinished`).
    public func isEphemeral(_ id: TaskID) -> Bool { record(id)?.ephemeral ?? false }

    /// Frees a finished `every` instance's record; the summary still counts
    /// it. A schedule that ticks for days must not grow with every tick.
    public func forgetFinished(_ id: TaskID) {
        guard let r = record(id), let state = r.finalState, r.lifecycle.isFinished else { return }
        forgottenCounts[state, default: 0] += 1
        records[id] = nil
    }

    /// Frees the record of a final task nobody will ask about again (its
    /// only waiter has its outcome): an engine that runs millions of
    /// short-lived tasks keeps 8 bytes for each.
    public func forget(_ id: TaskID) {
        guard let r = record(id), r.finalState != nil, r.lifecycle.isFinished else { return }
        records[id] = nil
    }

    /// Work added by a reaction (it starts while reactors suspend).
    public func isOwnedByReaction(_ id: TaskID) -> Bool { record(id)?.ownedByReaction ?? false }

    public func priority(_ id: TaskID) -> Int { record(id)?.priority ?? 0 }

    /// Seconds an attempt of task `id` may take (nil: no limit).
    public func timeout(_ id: TaskID) -> Double? { record(id)?.timeout }

    /// Interceptors may change a task's priority and name before it starts.
    public func setPriority(_ id: TaskID, _ priority: Int) { record(id)?.priority = priority }
    public func setName(_ id: TaskID, _ name: String) { record(id)?.explicitName = name }
}

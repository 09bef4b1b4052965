/// Where a task's work stands, as one value: each stage carries the data
/// only it has (the batch holding it, the attempt in a slot or lending it,
/// the time left while paused, until when a retry waits, the reactions it
/// waits for). Transitions are the only writers; each returns what the
/// engine must do (free a slot, disarm a timer, announce a start, deliver
/// the outcome), and the
/// engine does it: the value owns no timer, queue or observer, so it is
/// tested without a loop (`TaskLifecycleTests`). Out of `finished` nothing
/// moves it (every task ends in exactly one final state).
///
///     var life = TaskLifecycle()
///     life.queue()                          // waiting -> queued (shown pending)
///     life.take()                           // -> admitting: the interceptors are asked
///     life.begin(token: 1)                  // -> running in a slot, [.announceStart]
///     life.endAttempt()                     // the slot is freed: the engine decides
///     life.finish(.succeeded)               // -> finished: .deliver, once
struct TaskLifecycle {
    /// Where the interceptor chain resumes when the task is admitted.
    enum Chain: Equatable {
        /// From the interceptor at this index (0: the whole chain).
        case from(Int)
        /// Past every interceptor (a requeue without reintercept).
        case skip
    }

    enum Slot: Equatable {
        /// Groups and schedules, and an attempt that has just ended.
        case none
        case held
        /// Given back while the attempt waits on other tasks.
        case lent
    }

    /// An attempt's timeout clock.
    enum Clock: Equatable {
        case none
        case ticking(deadline: UInt64)
        /// Paused with this much left (ns).
        case stopped(remaining: UInt64)
    }

    struct Attempt: Equatable {
        var token: UInt64
        var slot: Slot
        var clock: Clock
    }

    enum Stage {
        /// Not ready yet: dependencies to end, a start to come.
        case waiting(unmet: Int, dependencyFailed: Bool)
        /// Serving the spec's `delay`, then ready.
        case delaying(until: UInt64)
        /// In a ready queue.
        case queued(Chain)
        /// Taken from a queue; the interceptors are being asked.
        case admitting(Chain)
        /// Came up to start while paused: queued again on resume.
        case parked(Chain)
        /// In an interceptor's batch.
        case held(by: HeldBatch)
        /// A retry's backoff or an interceptor's delay: queued again then.
        case backingOff(until: UInt64, Chain)
        /// Its work runs: an attempt (in a slot or lending it), a group's
        /// members or a schedule's ticks (no slot), or an attempt that has
        /// just ended while the engine decides what comes next.
        case running(Attempt)
        /// Its result waits for reactions.
        case reacting(ReactingState)
        case finished(TaskState)
    }

    /// What the engine must do after a transition (a set: no allocation).
    struct Actions: OptionSet {
        let rawValue: UInt8

        /// Tell observers the task started (once, at its first attempt).
        static let announceStart = Actions(rawValue: 1)
        /// Give a concurrency slot back.
        static let freeSlot = Actions(rawValue: 2)
        /// Disarm the attempt's timeout timer.
        static let disarmTimeout = Actions(rawValue: 4)
        /// Put the task back in a ready queue.
        static let enqueue = Actions(rawValue: 8)
    }

    /// What `take()` found when a task came up to start.
    enum Taken: Equatable {
        /// Not queued any more (cancelled, released twice): skip it.
        case stale
        /// Paused: parked until resumed.
        case parked
        /// Ask the interceptors from here.
        case admit(Chain)
    }

    private(set) var stage: Stage = .waiting(unmet: 0, dependencyFailed: false)
    private(set) var attempts = 0
    /// Requeues asked for by reactors.
    private(set) var requeues = 0
    /// `h:pause()`: not started while set; a running attempt's clock stops.
    private(set) var isPaused = false
    /// False for a `start = false` task until `start()`.
    private(set) var startRequested: Bool
    /// Handles on this work (single flight adds followers' handles).
    private(set) var handles = 1
    /// Between a failed attempt and its retry the task shows `running`.
    private var retrying = false

    init(startRequested: Bool = true) {
        self.startRequested = startRequested
    }

    /// The state users see (`paused` is shown by the engine, from `isPaused`).
    var state: TaskState {
        switch stage {
        case .waiting, .delaying: .waiting
        case .queued, .admitting, .parked, .backingOff: retrying ? .running : .pending
        case .held: .held
        case .running: .running
        case .reacting: .reacting
        case .finished(let s): s
        }
    }

    var isFinished: Bool {
        if case .finished = stage { return true }
        return false
    }

    // MARK: before it is ready

    /// A dependency that has not ended yet.
    mutating func dependencyAdded() {
        guard case .waiting(let unmet, let failed) = stage else { return }
        stage = .waiting(unmet: unmet + 1, dependencyFailed: failed)
    }

    /// A dependency that had ended when it was added.
    mutating func dependencyAlreadyEnded(succeeded: Bool) {
        guard !succeeded, case .waiting(let unmet, _) = stage else { return }
        stage = .waiting(unmet: unmet, dependencyFailed: true)
    }

    /// A dependency ended; returns whether none is left.
    mutating func dependencyEnded(succeeded: Bool) -> Bool {
        guard case .waiting(let unmet, let failed) = stage else { return false }
        stage = .waiting(unmet: unmet - 1, dependencyFailed: failed || !succeeded)
        return unmet == 1
    }

    var unmetDependencies: Int {
        if case .waiting(let unmet, _) = stage { return unmet }
        return 0
    }

    /// Whether a dependency ended other than succeeded (`when = "failure"`).
    var dependencyFailed: Bool {
        if case .waiting(_, let failed) = stage { return failed }
        return false
    }

    /// Waiting for nothing but a slot: dependencies ended, start requested.
    var isReady: Bool {
        guard startRequested, case .waiting(0, _) = stage else { return false }
        return true
    }

    /// `h:start()`; returns false when it was requested already.
    mutating func requestStart() -> Bool {
        guard !startRequested, !isFinished else { return false }
        startRequested = true
        return true
    }

    /// The spec's delay: ready at `until`.
    mutating func delay(until: UInt64) {
        guard isReady else { return }
        stage = .delaying(until: until)
    }

    // MARK: queues and admission

    /// Into a ready queue: first time, after a delay or backoff, on resume.
    /// Returns `[.enqueue]` unless nothing can queue it (final, running).
    mutating func queue() -> Actions {
        switch stage {
        case .waiting, .delaying: stage = .queued(.from(0))
        case .backingOff(_, let chain), .parked(let chain): stage = .queued(chain)
        default: return []
        }
        return .enqueue
    }

    /// Came up to start: whether to ask the interceptors, and from where.
    mutating func take() -> Taken {
        guard case .queued(let chain) = stage else { return .stale }
        if isPaused {
            stage = .parked(chain)
            return .parked
        }
        stage = .admitting(chain)
        return .admit(chain)
    }

    /// An interceptor holds it in `batch`.
    mutating func hold(by batch: HeldBatch) {
        guard case .admitting = stage else { return }
        stage = .held(by: batch)
    }

    /// Let go by its batch: queued to continue at interceptor `index`.
    /// Returns false when it was not held.
    mutating func release(resumingAt index: Int) -> Bool {
        guard case .held = stage else { return false }
        stage = .queued(.from(index))
        return true
    }

    /// The task whose `execute` released a batch goes after the batch.
    mutating func queueBehindReleased(resumingAt index: Int) {
        guard case .admitting = stage else { return }
        stage = .queued(.from(index))
    }

    /// An interceptor's `delay`: asked again from the same interceptor.
    mutating func delayAdmission(until: UInt64, resumingAt index: Int) {
        guard case .admitting = stage else { return }
        stage = .backingOff(until: until, .from(index))
    }

    /// An attempt starts in a slot; nil unless it was being admitted.
    mutating func begin(token: UInt64) -> Actions? {
        guard case .admitting = stage else { return nil }
        return started(Attempt(token: token, slot: .held, clock: .none))
    }

    /// A group or schedule starts its work (it takes no slot).
    mutating func beginWithoutSlot() -> Actions {
        guard !isFinished else { return [] }
        return started(Attempt(token: 0, slot: .none, clock: .none))
    }

    private mutating func started(_ attempt: Attempt) -> Actions {
        attempts += 1
        retrying = false
        stage = .running(attempt)
        return attempts == 1 ? .announceStart : []
    }

    // MARK: a running attempt

    /// The attempt in a slot or lending it, if `token` is the current one.
    func attempt(_ token: UInt64) -> Attempt? {
        guard case .running(let a) = stage, a.slot != .none, a.token == token else { return nil }
        return a
    }

    /// An attempt holds a slot or lends it.
    var inSlot: Bool {
        if case .running(let a) = stage { return a.slot != .none }
        return false
    }

    /// The latest attempt's token (0 before the first).
    var token: UInt64 {
        switch stage {
        case .running(let a): a.token
        default: 0
        }
    }

    /// The timeout clock started: it ends at `deadline`.
    mutating func clockStarted(deadline: UInt64) {
        guard case .running(var a) = stage, a.slot != .none else { return }
        a.clock = .ticking(deadline: deadline)
        stage = .running(a)
    }

    /// The attempt's time is kept elsewhere from now on (a worker times a
    /// defined task from its claim): its clock here is off. Returns
    /// `[.disarmTimeout]` when it was on.
    mutating func clockHandedOver(token: UInt64) -> Actions {
        guard var a = attempt(token), a.clock != .none else { return [] }
        a.clock = .none
        stage = .running(a)
        return .disarmTimeout
    }

    var deadline: UInt64 {
        guard case .running(let a) = stage, case .ticking(let deadline) = a.clock else { return 0 }
        return deadline
    }

    /// The attempt waits on other tasks: its slot is lent. Returns
    /// `[.freeSlot]` unless it is not current or lent already.
    mutating func lendSlot(token: UInt64) -> Actions {
        guard var a = attempt(token), a.slot == .held else { return [] }
        a.slot = .lent
        stage = .running(a)
        return .freeSlot
    }

    /// The attempt has its slot again; false unless it was lent.
    mutating func reclaimSlot(token: UInt64) -> Bool {
        guard var a = attempt(token), a.slot == .lent else { return false }
        a.slot = .held
        stage = .running(a)
        return true
    }

    /// The attempt ended (reported, timed out, stopped): it leaves its slot.
    /// Returns `[.freeSlot]` if it held one (a lent one is free already),
    /// `[.disarmTimeout]` if its clock ran; nil if no attempt was in a slot.
    mutating func endAttempt() -> Actions? {
        guard case .running(var a) = stage, a.slot != .none else { return nil }
        var actions: Actions = a.slot == .held ? .freeSlot : []
        if case .ticking = a.clock { actions.insert(.disarmTimeout) }
        a.slot = .none
        a.clock = .none
        stage = .running(a)
        return actions
    }

    /// A failed attempt is retried at `until`.
    mutating func backOff(until: UInt64) {
        guard case .running(let a) = stage, a.slot == .none else { return }
        retrying = true
        stage = .backingOff(until: until, .from(0))
    }

    // MARK: reactions

    /// Its result waits for reactions (`state` counts them).
    mutating func react(_ state: ReactingState) {
        guard case .running(let a) = stage, a.slot == .none else { return }
        stage = .reacting(state)
    }

    var reactions: ReactingState? {
        if case .reacting(let s) = stage { return s }
        return nil
    }

    /// A reactor asked to run it again.
    mutating func requeue(reintercept: Bool) -> Actions {
        switch stage {
        case .reacting: break
        case .running(let a) where a.slot == .none: break
        default: return []
        }
        requeues += 1
        retrying = false
        stage = .queued(reintercept ? .from(0) : .skip)
        return .enqueue
    }

    // MARK: pause

    /// Nil when it is finished or paused already; a running attempt's clock
    /// stops (`[.disarmTimeout]`) with the time left kept.
    mutating func pause(now: UInt64) -> Actions? {
        guard !isFinished, !isPaused else { return nil }
        isPaused = true
        guard case .running(var a) = stage, case .ticking(let deadline) = a.clock else { return [] }
        a.clock = .stopped(remaining: deadline > now ? deadline - now : 0)
        stage = .running(a)
        return .disarmTimeout
    }

    enum Resumed: Equatable {
        case asItWas
        /// A stopped clock goes on: arm the timeout for `deadline`.
        case rearm(deadline: UInt64)
        /// It was parked: put it back in a ready queue.
        case enqueue
    }

    /// Nil unless paused.
    mutating func resume(now: UInt64) -> Resumed? {
        guard isPaused else { return nil }
        isPaused = false
        switch stage {
        case .running(var a):
            guard case .stopped(let remaining) = a.clock else { return .asItWas }
            let deadline = now &+ remaining
            a.clock = .ticking(deadline: deadline)
            stage = .running(a)
            return .rearm(deadline: deadline)
        case .parked:
            return queue().isEmpty ? .asItWas : .enqueue
        default:
            return .asItWas
        }
    }

    // MARK: handles

    /// A single-flight follower's handle shares this work.
    mutating func handleJoined() { handles += 1 }

    /// A handle on this work was cancelled; returns whether none is left.
    mutating func handleLeft() -> Bool {
        handles -= 1
        return handles == 0
    }

    // MARK: the end

    enum Finished: Equatable {
        /// Deliver the final outcome (handle, followers, group).
        case deliver
        /// The same, and take it out of the batch that held it.
        case deliverLeaving(HeldBatch)

        static func == (a: Finished, b: Finished) -> Bool {
            switch (a, b) {
            case (.deliver, .deliver): true
            case (.deliverLeaving(let x), .deliverLeaving(let y)): x === y
            default: false
            }
        }
    }

    /// The work ended: what to do, once; nil after. An attempt in a slot
    /// must have ended first (`endAttempt`).
    mutating func finish(_ final: TaskState) -> Finished? {
        assert(final.isFinal, "finished with a state that is not final")
        let finished: Finished
        switch stage {
        case .finished: return nil
        case .held(let batch): finished = .deliverLeaving(batch)
        case .running(let a):
            assert(a.slot == .none, "finished with an attempt in a slot")
            finished = .deliver
        default: finished = .deliver
        }
        stage = .finished(final)
        return finished
    }
}

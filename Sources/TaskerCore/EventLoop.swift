import DequeModule
import HeapModule
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One thread that owns the engine and the Lua state (docs/ARCHITECTURE.md: one state,
/// one thread). Other threads talk to it only through `execute(_:)`.
///
/// A turn: run jobs sent from other threads, fire due timers, then drain
/// microtasks (work queued on the loop itself). When nothing is queued, no
/// timer is armed and no outside operation is in flight, the loop is idle and
/// calls `onIdle` — the engine uses that to settle tasks that can never start.
///
///     let loop = EventLoop()
///     loop.execute { print("on the loop") }
///     loop.run()            // blocks until loop.stop()
public final class EventLoop: @unchecked Sendable {
    // Safety: `inbox`, `stopRequested` and `sleepingInPoller` are guarded
    // by `lock`; `loopThread` is atomic; `poller` is set before `run` and
    // only read after. Everything else is confined to the loop thread: the
    // entry points assert it in debug builds (like NIO's
    // preconditionInEventLoop).
    private let lock = ConditionLock()
    private var inbox: [@Sendable () -> Void] = []
    private var stopRequested = false
    /// The thread inside `run` (`threadID()`; 0: none), which stores it when
    /// `run` starts and clears it when `run` returns. `inLoop` reads it
    /// without a lock.
    private let loopThread = Atomic<UInt>(0)
    /// The loop is inside `poller.poll`: a job from another thread wakes it.
    private var sleepingInPoller = false

    /// Descriptors the loop thread waits on itself (the process reactor's
    /// epoll set): set before `run`. Without one the loop sleeps on a
    /// condition variable.
    public var poller: LoopPoller?
    /// When the poller last looked, so that a busy loop still looks every
    /// `pollInterval` (children's output and exits are not held up by a
    /// long run of Lua work).
    private var lastPoll: UInt64 = 0
    static let pollInterval: UInt64 = 1_000_000

    private var timers = Heap<TimerEntry>()
    private var timerSequence: UInt64 = 0
    /// Cancelled timers still in the heap (they leave it lazily; see
    /// `timerCancelled`).
    private var cancelledTimers = 0
    /// Armed timers that keep the loop busy (not the status line's ticker).
    fileprivate var busyTimers = 0
    private var microtasks = Deque<() -> Void>()
    /// Work for the next turn, after timers have fired (see `enqueueNextTurn`).
    private var deferred = Deque<() -> Void>()
    private var activity = 0
    /// How long one turn may drain work before timers and jobs from other
    /// threads (signals) get their turn.
    public static let turnBudget: UInt64 = 10_000_000

    /// Called on the loop when it has nothing left to do (see type docs);
    /// returns whether it changed anything (then idleness is checked again).
    public var onIdle: (() -> Bool)?

    /// Where timers read the time (see `LoopClock`).
    public let clock: LoopClock

    public init(clock: LoopClock = SystemClock()) {
        self.clock = clock
    }

    // MARK: any thread

    /// Runs `job` on the loop thread in a later turn.
    public func execute(_ job: @escaping @Sendable () -> Void) {
        let here = inLoop
        lock.lock()
        inbox.append(job)
        let wake = wakeUp(from: here)
        lock.unlock()
        if wake { poller?.wake() }
    }

    /// Ends `run()` after the current turn.
    public func stop() {
        let here = inLoop
        lock.lock()
        stopRequested = true
        let wake = wakeUp(from: here)
        lock.unlock()
        if wake { poller?.wake() }
    }

    /// With `lock` held, after queueing: wakes a loop waiting on its
    /// condition, and returns whether the poller must be woken (outside the
    /// lock). The loop thread itself (`here`) wakes nothing: it looks at the
    /// inbox before it waits again. It may be inside the poller then (the
    /// process reactor's callbacks run on it), but only after the wait has
    /// returned; waking it would cost a write and one more empty wait.
    private func wakeUp(from here: Bool) -> Bool {
        if here { return false }
        lock.signal()
        return sleepingInPoller
    }

    /// Whether the caller is the thread running the loop; lock-free, like
    /// NIO's inEventLoop. A relaxed load is enough: the one thread that can
    /// find its own identity there is the one that stored it (its own
    /// stores are visible to it), and any other thread sees 0 or another
    /// thread's identity, false either way. (A thread that reuses an ended
    /// loop thread's identity starts after that thread's clearing store.)
    @inline(__always)
    public var inLoop: Bool {
        loopThread.load(ordering: .relaxed) == Self.threadID()
    }

    /// The calling thread's identity as a number (never 0).
    @inline(__always)
    private static func threadID() -> UInt {
        #if canImport(Darwin)
        UInt(bitPattern: pthread_self())
        #else
        UInt(pthread_self())
        #endif
    }

    /// Debug builds only: the journal and stored values ask once per task.
    @inline(__always)
    public func assertInLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(inLoop, "must run on the event loop thread", file: file, line: line)
    }

    // MARK: loop thread only

    /// Queues `work` to run in this turn, after the work already queued.
    @inline(__always)
    public func enqueue(_ work: @escaping () -> Void) {
        assert(inLoop, "EventLoop.enqueue off the loop thread")
        microtasks.append(work)
    }

    /// Queues `work` for the next turn, after due timers have fired and jobs
    /// from other threads have run: a long computation that pauses itself
    /// lets the rest of the program move.
    public func enqueueNextTurn(_ work: @escaping () -> Void) {
        assert(inLoop, "EventLoop.enqueueNextTurn off the loop thread")
        deferred.append(work)
    }

    /// Runs `action` at `deadline` (monotonic ns) unless cancelled first.
    /// A timer that does not `keepAlive` (a display refresh) never stops the
    /// loop from counting as idle.
    @discardableResult
    public func schedule(at deadline: UInt64, keepAlive: Bool = true, _ action: @escaping () -> Void) -> LoopTimer {
        assert(inLoop, "EventLoop.schedule off the loop thread")
        let timer = LoopTimer(deadline: deadline, loop: self, keepAlive: keepAlive, action: action)
        if keepAlive { busyTimers += 1 }
        timerSequence &+= 1
        timers.insert(TimerEntry(deadline: deadline, sequence: timerSequence, timer: timer))
        return timer
    }

    @discardableResult
    public func schedule(after seconds: Double, keepAlive: Bool = true, _ action: @escaping () -> Void) -> LoopTimer {
        schedule(at: clock.now &+ Monotonic.nanos(seconds), keepAlive: keepAlive, action)
    }

    /// Marks an outside operation in flight (a Swift task, a request): the
    /// loop is not idle until the matching `endActivity()`.
    public func beginActivity() {
        assert(inLoop, "EventLoop.beginActivity off the loop thread")
        activity += 1
    }

    public func endActivity() {
        assert(inLoop, "EventLoop.endActivity off the loop thread")
        activity -= 1
    }

    /// Runs the loop on the calling thread until `stop()`; `first` runs on
    /// the loop before anything else (set-up that must happen on the loop).
    public func run(startingWith first: () -> Void = {}) {
        // Two threads running one loop would share its unlocked state.
        let started = loopThread.compareExchange(expected: 0, desired: Self.threadID(), ordering: .relaxed).exchanged
        precondition(started, "EventLoop.run: the loop is already running")
        defer { loopThread.store(0, ordering: .relaxed) }
        first()
        drainMicrotasks()
        while true {
            lock.lock()
            let jobs = inbox
            inbox.removeAll(keepingCapacity: true)
            let stopping = stopRequested
            lock.unlock()
            if stopping { return }
            for job in jobs { job() }
            if let poller, Monotonic.now() &- lastPoll >= Self.pollInterval {
                lastPoll = Monotonic.now()
                poller.poll(until: 0)
            }
            fireDueTimers()
            if !deferred.isEmpty {
                microtasks.append(contentsOf: deferred)
                deferred.removeAll(keepingCapacity: true)
            }
            drainMicrotasks()
            waitForWork()
        }
    }

    /// Runs queued work for at most `turnBudget`; what is left runs after
    /// the next round of timers and jobs, so work that keeps queueing more
    /// work never starves them.
    private func drainMicrotasks() {
        guard !microtasks.isEmpty else { return }
        let start = Monotonic.now()
        var n = 0
        while let work = microtasks.popFirst() {
            work()
            n &+= 1
            if n & 63 == 0 && Monotonic.now() &- start > Self.turnBudget { return }
        }
    }

    /// Fires the timers due now that were armed before this call: a timer
    /// that re-arms itself for the same instant waits for the next turn.
    private func fireDueTimers() {
        guard !timers.isEmpty else { return }
        let now = clock.now
        let armedBefore = timerSequence
        while let first = timers.min, first.deadline <= now, first.sequence <= armedBefore {
            _ = timers.popMin()
            if let action = first.timer.take() {
                action()
                drainMicrotasks()
            } else {
                cancelledTimers -= 1
            }
        }
    }

    private func nextDeadline() -> UInt64? {
        while let first = timers.min {
            if first.timer.isCancelled {
                _ = timers.popMin()
                cancelledTimers -= 1
                continue
            }
            return first.deadline
        }
        return nil
    }

    /// A cancelled timer stays in the heap until its deadline; most are
    /// cancelled long before (a request's 30 s timeout, cancelled when the
    /// response arrives), so at thousands per second they would pile up.
    /// Rebuild the heap once they are more than half of it.
    fileprivate func timerCancelled() {
        cancelledTimers += 1
        guard cancelledTimers > 1024, cancelledTimers * 2 > timers.count else { return }
        timers = Heap(timers.unordered.filter { !$0.timer.isCancelled })
        cancelledTimers = 0
    }

    private func waitForWork() {
        if busyTimers == 0 && activity == 0 && microtasks.isEmpty && deferred.isEmpty, let onIdle {
            lock.lock()
            let quiet = inbox.isEmpty && !stopRequested
            lock.unlock()
            if quiet {
                let changed = onIdle()
                drainMicrotasks()
                if changed || busyTimers > 0 || activity > 0 { return }
            }
        }
        lock.lock()
        if inbox.isEmpty && !stopRequested && microtasks.isEmpty && deferred.isEmpty {
            let next = nextDeadline()
            if next == nil || next! > clock.now {
                // A manual clock only moves when the program moves it.
                let until = clock.isManual ? nil : next
                if let poller {
                    sleepingInPoller = true
                    lock.unlock()
                    // A job sent between the unlock and the wait still
                    // wakes it: `wake` makes the poller's descriptor ready.
                    poller.poll(until: until)
                    lastPoll = Monotonic.now()
                    lock.lock()
                    sleepingInPoller = false
                } else {
                    lock.wait(until: until)
                }
            }
        }
        lock.unlock()
    }
}

/// Descriptors an `EventLoop` waits on in its own thread instead of
/// sleeping (one thread fewer than a poller of their own).
public protocol LoopPoller: AnyObject, Sendable {
    /// On the loop thread: handles what is ready, waiting for it until
    /// `deadline` (monotonic ns; nil: no limit, 0: only looks) or `wake`.
    func poll(until deadline: UInt64?)
    /// Any thread: makes a `poll` in progress return.
    func wake()
}

/// A timer armed on an `EventLoop`; loop-confined.
public final class LoopTimer {
    public let deadline: UInt64
    private unowned let loop: EventLoop
    private let keepAlive: Bool
    private var action: (() -> Void)?

    init(deadline: UInt64, loop: EventLoop, keepAlive: Bool, action: @escaping () -> Void) {
        self.deadline = deadline
        self.loop = loop
        self.keepAlive = keepAlive
        self.action = action
    }

    public var isCancelled: Bool { action == nil }

    /// Disarms the timer and drops what it captured.
    public func cancel() {
        if take() != nil { loop.timerCancelled() }
    }

    fileprivate func take() -> (() -> Void)? {
        guard let action else { return nil }
        self.action = nil
        if keepAlive { loop.busyTimers -= 1 }
        return action
    }
}

private struct TimerEntry: Comparable {
    let deadline: UInt64
    let sequence: UInt64
    let timer: LoopTimer

    static func < (a: TimerEntry, b: TimerEntry) -> Bool {
        a.deadline != b.deadline ? a.deadline < b.deadline : a.sequence < b.sequence
    }

    static func == (a: TimerEntry, b: TimerEntry) -> Bool {
        a.deadline == b.deadline && a.sequence == b.sequence
    }
}

/// A value that may only be touched on its loop's thread (like NIOLoopBound):
/// lets loop-confined objects ride in `@Sendable` closures sent to the loop.
public struct LoopBound<Value>: @unchecked Sendable {
    // Safety: `_value` is reachable only through `value`, which traps unless
    // called on `loop`'s thread (in release builds too, like NIOLoopBound:
    // the check is lock-free), so it is never touched concurrently.
    public let loop: EventLoop
    private let _value: Value

    public init(_ value: Value, loop: EventLoop) {
        self.loop = loop
        self._value = value
    }

    public var value: Value {
        precondition(loop.inLoop, "LoopBound.value off its loop's thread")
        return _value
    }
}

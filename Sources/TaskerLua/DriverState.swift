import DequeModule
import TaskerCore

/// What the runtime's driver keeps between turns: the work queued for the
/// drain loop, the fiber running now, each task's fiber, the pool of
/// finished fibers, the turn's time slice, and where the run's end stands.
struct DriverState {
    /// When the run began (the summary's duration).
    let started = Monotonic.now()
    var work = Deque<Work>()
    var drainScheduled = false
    var current: Fiber?
    /// The fiber running each task's current attempt, by task id.
    var fibersByTask = TaskTable<Fiber>()
    /// Fibers whose threads finished cleanly, ready for reuse.
    var fiberPool: [Fiber] = []
    /// When the current turn's slice ends: fibers resumed in this turn share
    /// it (one clock read per turn, not per resume).
    var sliceEnd: UInt64 = 0
    /// The signal whose stop has been applied (nothing starts after it).
    var interruptApplied = false
    var finishedRun = false
    /// The code `tasker.exit` or `os.exit` asked for: the run is ending.
    var exitRequested: Int32?
    /// The error `tasker.exit` raised to stop a handler's code (it cannot
    /// yield there): its unwinding, not an error of the handler's. Only
    /// compared, never dereferenced.
    var exitUnwind: UnsafeRawPointer?
    /// Whether the last `callForError` failed on `exitUnwind`.
    var lastCallExited = false
    /// Names the non-yieldable code running now ("an event handler").
    var callContext: String?
    /// Set while a hook runs (an interceptor, a reactor's `when`) to the
    /// task it runs for, which its log lines name: for an HTTP hook, the
    /// task that made the request (`.some(nil)`: the main chunk did).
    var callTask: TaskID??
}

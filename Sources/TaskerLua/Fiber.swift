import CLua
import CLuaShim
import TaskerCore

/// One engine-driven coroutine: the main chunk or one attempt of a task body.
/// Its thread carries a pointer to it in the thread's extra space, which is
/// how the coroutine library tells engine threads from user coroutines.
/// Loop-confined; kept alive by the runtime while its thread may run.
final class Fiber {
    enum Kind {
        case main
        case task(AttemptRun)
        case reaction(Reaction)
    }

    unowned let runtime: LuaRuntime
    private(set) var kind: Kind
    let thread: OpaquePointer
    let anchor: Int32
    /// Set when the attempt was cancelled or timed out: never resumed again.
    var aborted: TaskFailure? {
        get { abort?.failure }
        set { abort = newValue.map(Abort.init) }
    }
    var isAborted: Bool { abort != nil }
    /// Boxed: a `TaskFailure?` holds an existential, so each copy of it
    /// (every `aborted != nil` on the hot path) went through generic value
    /// witnesses; a box is checked by a pointer compare.
    private var abort: Abort?
    private final class Abort {
        let failure: TaskFailure
        init(_ failure: TaskFailure) { self.failure = failure }
    }
    /// What the last engine yield asked for; the driver performs it.
    var pending: PendingOp?
    /// What it waits for now (sleep, a process, a pipe…), if that is a
    /// `FiberWait`; closing the fiber cancels it.
    var wait: FiberWait?
    var finished = false
    /// Monotonic deadline for fibers that are not task attempts (reactions).
    var deadline: UInt64 = 0
    var endedNormally = false
    /// Shell commands it started (`os.execute`, `io.popen`): terminated if
    /// it is cancelled or fails.
    var processes: [ShellProcess] = []
    /// Its task is paused: the resumption that came meanwhile, held.
    var heldWhilePaused: Resumption?

    init(runtime: LuaRuntime, kind: Kind, thread: OpaquePointer, anchor: Int32) {
        self.runtime = runtime
        self.kind = kind
        self.thread = thread
        self.anchor = anchor
        tasker_setfiber(thread, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Makes a pooled fiber (its thread finished cleanly) new again.
    func reuse(as kind: Kind) {
        self.kind = kind
        abort = nil
        pending = nil
        wait = nil
        finished = false
        endedNormally = false
        deadline = 0
        processes = []
        tasker_setfiber(thread, Unmanaged.passUnretained(self).toOpaque())
    }

    var run: AttemptRun? {
        if case .task(let run) = kind { return run }
        return nil
    }

    var taskID: TaskID? { run?.task }
}

enum AwaitMode {
    /// `h:await()`: values, or raise the error.
    case raising
    /// `h:result()`: `true, values…` or `false, err`.
    case result
}

/// Something a fiber waits for: it starts, it can be cancelled, and when it
/// is over it hands the fiber its result with `runtime.finishWait`. A new
/// way to wait (a process, a pipe, a database call) is a type of its own
/// that conforms; the driver needs no new case. See docs/ARCHITECTURE.md.
protocol FiberWait: AnyObject {
    /// Begins the wait for `fiber` (on the loop, after it has yielded).
    func start(_ fiber: Fiber, in runtime: LuaRuntime)
    /// The fiber was closed while waiting (cancel, timeout, exit): stop.
    func cancel()
    /// Whether a task waiting here gives its slot back meanwhile (it waits
    /// on other tasks).
    var lendsSlot: Bool { get }
    /// The task was paused / resumed while waiting here (a process is
    /// stopped and continued).
    func pause()
    func resume()
}

extension FiberWait {
    var lendsSlot: Bool { false }
    func pause() {}
    func resume() {}
}

/// An engine call that suspends the calling coroutine.
enum PendingOp {
    case wait(FiberWait)
    case exit
}

/// How a suspended fiber is resumed.
enum Resumption {
    case nothing
    /// Its time slice ended; it goes on where it was (no values).
    case continueSlice
    case taskResult(TaskID, AwaitMode)
    case values([TaskID], compact: Bool)
    case anyWinner(TaskID)
    case failure(TaskFailure)
    /// A failure made of tasks' failures (`tasker.any`, all failed): raised
    /// by the main chunk, the run reports task `naming`'s failure.
    case failureOfTasks(TaskFailure, naming: TaskID)
    case luaFailureOf(TaskID)
    /// Pushes `true, values…` (or `false, err`) itself; returns the count.
    case push((OpaquePointer) -> Int32)
}

/// Work the runtime runs from its drain loop, never nested in other Lua code.
enum Work {
    case start(AttemptRun)
    case resume(Fiber, Resumption)
    case close(Fiber)
    case event(TaskID, TaskEvent)
    case call(() -> Void)
}

enum TaskEvent {
    case start
    case progress(Double, String?)
    case retry(Int, TaskFailure, Double)
    case finish
}

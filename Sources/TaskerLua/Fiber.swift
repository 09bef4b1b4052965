import CLua
import CLuaShim
import TaskerCore

/// One engine-driven coroutine: the main chunk or one attempt of a task body.
/// Its thread carries a pointer to it in the thread's extra space, which is
/// how the coroutine library tells engine threads from user coroutines.
/// Loop-confined; kept alive by the runtime while its thread may run.
final class Fiber: TaskWaiter {
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
    var aborted: TaskFailure?
    /// What the last engine yield asked for; the driver performs it.
    var pending: PendingOp?
    /// How a finished awaited task is handed back.
    var awaitMode = AwaitMode.raising
    var timer: LoopTimer?
    var waitingOn: TaskID?
    var finished = false
    /// Monotonic deadline for fibers that are not task attempts (reactions).
    var deadline: UInt64 = 0
    /// A process this fiber waits for; cancelled when the fiber is closed.
    var execTask: Task<Void, Never>?
    /// The HTTP request this fiber waits for (an id in `httpEngine`).
    var request: TaskID?
    var endedNormally = false
    /// Shell commands it started (`os.execute`, `io.popen`): terminated if
    /// it is cancelled or fails.
    var processes: [ShellProcess] = []

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
        aborted = nil
        pending = nil
        awaitMode = .raising
        timer = nil
        waitingOn = nil
        finished = false
        endedNormally = false
        deadline = 0
        execTask = nil
        request = nil
        processes = []
        tasker_setfiber(thread, Unmanaged.passUnretained(self).toOpaque())
    }

    var run: AttemptRun? {
        if case .task(let run) = kind { return run }
        return nil
    }

    var taskID: TaskID? { run?.task }

    func taskFinished(_ id: TaskID, engine: Engine) {
        if engine !== runtime.engine {
            guard request == id else { return }
            request = nil
            runtime.requestFinished(id, for: self)
            return
        }
        guard waitingOn == id else { return }
        waitingOn = nil
        runtime.enqueue(.resume(self, .taskResult(id, awaitMode)))
    }
}

enum AwaitMode {
    /// `h:await()`: values, or raise the error.
    case raising
    /// `h:result()`: `true, values…` or `false, err`.
    case result
}

/// An engine call that suspends the calling coroutine.
enum PendingOp {
    case sleep(Double)
    case await(TaskID, AwaitMode)
    case all([TaskID])
    case any([TaskID])
    case some([TaskID])
    case exec(ExecRequest)
    case http(HTTPCallSetup)
    case exit
    /// Anything else: `start` begins the wait; whoever finishes it enqueues
    /// `.resume(fiber, .push {...})`.
    case custom((Fiber) -> Void)
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
    case luaFailureOf(TaskID)
    case exec(ExecOutcome, ExecRequest)
    case http(TaskOutcome, HTTPCall)
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

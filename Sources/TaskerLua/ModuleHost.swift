import CLua
import Logging
import TaskerCore

/// What a module may use of the runtime that hosts it: errors worded the
/// one way, the loop, waiting (suspend a caller, refuse where it cannot
/// wait), the task engine, the task running now, the log, and the other
/// modules. A module typed against this reaches nothing else of the
/// runtime: the libraries are (`LogModule`, `SleepModule`, `JSONModule`,
/// `FSModule`). The modules that are the runtime's own machinery hold the
/// runtime itself: the task API (`tasker`, handles, `ctx`, the task view,
/// spec reading, which `http` shares), the hooks, `tasker.use` (reloads),
/// `tasker.define` and the command's parameters and targets, which read
/// the driver, the per-task tables and the main chunk's state. `exec` and
/// `sh` still hold it too (they need little more than this surface).
protocol ModuleHost: AnyObject {
    var loop: EventLoop { get }
    var engine: Engine { get }
    var logger: Logger { get }
    /// The task whose code runs now (nil: the main chunk, a hook).
    var currentTask: TaskID? { get }
    /// Code runs in a fiber now (a task, the main chunk, a reaction), not in
    /// a hook or handler called from Swift.
    var inFiber: Bool { get }
    /// A usage error (kind `usage`) at the caller's line.
    func usage(_ L: OpaquePointer, _ message: String) -> Int32
    /// `bad argument #arg to 'fn' (expected expected, got …)`.
    func argError(_ L: OpaquePointer, _ fn: String, _ arg: Int32, _ expected: String, index: Int32?) -> Int32
    /// Raises `failure` as an error table at the caller.
    func raise(_ L: OpaquePointer, _ failure: TaskFailure) -> Int32
    /// Pushes an error table of `kind` (the form every raised error has).
    func pushErrorTable(_ co: OpaquePointer, kind: String, message: String, where position: String?)
    /// Whether the value at `i` has the metatable anchored at `ref`.
    func hasMetatable(_ co: OpaquePointer, _ i: Int32, _ ref: Int32) -> Bool
    /// A status when the caller cannot wait here (a hook, a handler), else nil.
    func cannotWait(_ L: OpaquePointer, _ fn: String) -> Int32?
    /// A status when a plan's evaluation stops at `fn` (`--resume --plan`).
    func planStops(_ L: OpaquePointer, _ fn: String) -> Int32?
    /// Suspends the caller until the driver has performed `op`.
    func suspend(_ L: OpaquePointer, _ op: PendingOp) -> Int32
    /// Resumes `fiber`, whose wait is over, with `result`.
    func finishWait(_ fiber: Fiber, _ result: Resumption)
    /// The installed module of type `M`.
    func module<M: LuaModule>(_ type: M.Type) -> M
}

extension ModuleHost {
    func argError(_ L: OpaquePointer, _ fn: String, _ arg: Int32, _ expected: String) -> Int32 {
        argError(L, fn, arg, expected, index: nil)
    }
}

extension LuaRuntime: ModuleHost {
    var currentTask: TaskID? {
        if let hookTask = driver.callTask { return hookTask }
        guard let f = driver.current else { return nil }
        // a reaction names the task it reacts to (a task reactor's: an
        // HTTP reactor's tasks are requests)
        if case .reaction(let r) = f.kind, (r.reactor as? LuaReactor)?.target == .task { return r.tasks.first }
        return f.taskID
    }
    var inFiber: Bool { driver.current != nil }
}

import CLua
import Logging
import TaskerCore

/// What a module may use of the runtime that hosts it: errors worded the
/// one way, the loop, waiting (suspend a caller, refuse where it cannot
/// wait), the task engine, the task running now, the log, and the other
/// modules. A module typed against this reaches nothing else of the
/// runtime; `LogModule` and `SleepModule` are, the others still hold the
/// runtime itself.
protocol ModuleHost: AnyObject {
    var loop: EventLoop { get }
    var engine: Engine { get }
    var logger: Logger { get }
    /// The task whose code runs now (nil: the main chunk, a hook).
    var currentTask: TaskID? { get }
    /// A usage error (kind `usage`) at the caller's line.
    func usage(_ L: OpaquePointer, _ message: String) -> Int32
    /// `bad argument #arg to 'fn' (expected expected, got …)`.
    func argError(_ L: OpaquePointer, _ fn: String, _ arg: Int32, _ expected: String, index: Int32?) -> Int32
    /// A status when the caller cannot wait here (a hook, a handler), else nil.
    func cannotWait(_ L: OpaquePointer, _ fn: String) -> Int32?
    /// Suspends the caller until the driver has performed `op`.
    func suspend(_ L: OpaquePointer, _ op: PendingOp) -> Int32
    /// The installed module of type `M`.
    func module<M: LuaModule>(_ type: M.Type) -> M
}

extension ModuleHost {
    func argError(_ L: OpaquePointer, _ fn: String, _ arg: Int32, _ expected: String) -> Int32 {
        argError(L, fn, arg, expected, index: nil)
    }
}

extension LuaRuntime: ModuleHost {
    var currentTask: TaskID? { driver.current?.taskID }
}

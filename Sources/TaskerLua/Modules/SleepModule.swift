import CLua
import CLuaShim
import TaskerCore

/// `tasker.sleep(seconds)` and `tasker.now()`: the smallest module that
/// waits, and the worked example of how one is built (docs/ARCHITECTURE.md).
/// The function checks its argument, makes sure its caller may wait, and
/// suspends the caller on a `SleepWait`; the runtime starts the wait once
/// the caller has yielded, and cancels it if the caller is closed.
final class SleepModule: LuaModule {
    unowned let host: any ModuleHost

    init(host: any ModuleHost) { self.host = host }

    static let functions: [(String, tasker_SwiftFunction)] = [
        ("sleep", { L in SleepModule.this(L!).sleep(L!) }),
        ("now", { L in SleepModule.this(L!).now(L!) }),
    ]

    func install(in runtime: LuaRuntime) { addToTaskerTable(Self.functions, in: runtime.L) }

    func sleep(_ L: OpaquePointer) -> Int32 {
        guard let seconds = LuaStack(L).number(1), seconds >= 0, !seconds.isNaN else {
            return host.argError(L, "tasker.sleep", 1, "non-negative number")
        }
        if let status = host.cannotWait(L, "tasker.sleep") { return status }
        return host.suspend(L, .wait(SleepWait(seconds: seconds)))
    }

    /// Seconds on the monotonic clock (for measuring, not for dates).
    func now(_ L: OpaquePointer) -> Int32 {
        LuaStack(L).push(Double(Monotonic.now()) / 1e9)
        return 1
    }
}

/// A timer that resumes the fiber; cancelling it (the fiber was closed)
/// stops the timer.
final class SleepWait: FiberWait {
    let seconds: Double
    private var timer: LoopTimer?

    init(seconds: Double) { self.seconds = seconds }

    func start(_ fiber: Fiber, in runtime: LuaRuntime) {
        timer = runtime.loop.schedule(after: seconds) { [unowned runtime] in
            runtime.finishWait(fiber, .nothing)
        }
    }

    func cancel() { timer?.cancel() }
}

import CLua
import CLuaShim
import DequeModule
import Foundation
import Logging
import TaskerCore
import TaskerHTTP

/// Runs one pipeline: one `lua_State`, confined to one `EventLoop` thread,
/// driving the main chunk and every task body as coroutines of that state.
///
/// Every entry point runs on the loop thread. Lua code runs only from the
/// drain loop (`drain()`), one coroutine at a time, so a coroutine is never
/// interrupted by another one; engine callouts only queue `Work`.
public final class LuaRuntime {
    public struct Options: Sendable {
        public var concurrency = 16
        public var args: [String] = []
        public var vars: [String: String] = [:]
        /// Where `print` writes; nil keeps Lua's own `print` (stdout).
        public var output: (@Sendable (String) -> Void)?
        /// Log records at this level and above are written (`--log-level`).
        public var logLevel: Logger.Level = .info
        /// Where log lines (the `log` module, handler errors, reloads) go.
        /// Free the Lua state and every record at the end. A process that
        /// exits right after the run (the CLI) skips this: the OS frees it
        /// all at once, and freeing 200k tasks one by one costs ~20 ms.
        public var tearDown = true
        /// Reload files loaded with `tasker.use` when they change.
        public var watch = false
        public var diagnostics: @Sendable (String) -> Void = { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }

        public init() {}
    }

    public let loop: EventLoop
    public let engine: Engine
    /// HTTP requests are tasks of their own engine: the `on="http"`
    /// interceptors and reactors, retries and the in-flight cap apply to
    /// them, and they take no task slot.
    public let httpEngine: Engine
    let options: Options
    /// The `log` module and the runtime's own messages; lines go to `options.diagnostics`.
    let logger: Logger
    let L: OpaquePointer
    let crt: UnsafeMutablePointer<tasker_Runtime>
    var refs = Refs()

    var work = Deque<Work>()
    private var drainScheduled = false
    var current: Fiber?
    var mainFiber: Fiber?
    var mainDone = false
    var mainError: String?
    /// The fiber running each task's current attempt, by task id.
    var fibersByTask = TaskTable<Fiber>()
    /// Fibers whose threads finished cleanly, ready for reuse.
    var fiberPool: [Fiber] = []
    /// What the script registered, by the index its `remove` holds.
    var registrations: [Registration?] = []
    /// Files loaded with `tasker.use`, by absolute path.
    var usedFiles: [String: UsedFile] = [:]
    /// While a used file runs: what it registers (not installed yet).
    var staging: Registrations?
    var watcher: FileWatcher?
    /// Successful reloads so far.
    public internal(set) var reloads = 0
    var scriptDirectory = "."
    /// The fiber of each running reaction, by reaction id.
    var reactionFibers: [Int: Fiber] = [:]
    /// Tasks with a retry `when` predicate stored, by task id.
    var hasPredicate = TaskTable<Bool>()
    /// Tasks with `h:on` handlers, by task id.
    var handlerTasks = TaskTable<Bool>()
    lazy var taskBody = LuaTaskBody(runtime: self)
    lazy var requestBody = LuaRequestBody(runtime: self)
    /// Each request's call state, by its id in `httpEngine`.
    var httpCalls = TaskTable<HTTPCall>()
    var httpSettings = HTTPSettings()
    /// Opened at the first request (after `http.configure` has had its say).
    var transport: HTTPTransport?
    var exitCode: Int32?
    /// Ctrl-C/SIGTERM arrived (the loop may not have seen it yet).
    var interrupted: Bool {
        get { crt.pointee.signalled != 0 }
        set { if newValue { tasker_signal(crt) } }
    }
    var finishedRun = false
    var scriptPath = ""
    /// Names the non-yieldable code running now ("an event handler").
    var callContext: String?
    var onFinish: ((RunResult) -> Void)?
    /// Called on the loop after each successful reload, with the file.
    public var onReload: ((String) -> Void)?
    let startTime = Monotonic.now()

    /// Creates the state on the loop thread.
    public init(loop: EventLoop, options: Options) throws {
        loop.assertInLoop()
        self.loop = loop
        self.options = options
        self.engine = Engine(loop: loop, concurrency: options.concurrency)
        self.httpEngine = Engine(loop: loop, concurrency: HTTPSettings().concurrency)
        engine.peer = httpEngine
        httpEngine.peer = engine
        let level = options.logLevel, sink = options.diagnostics
        self.logger = Logger(label: "tasker") { _ in LineLogHandler(level: level, sink: sink) }
        crt = .allocate(capacity: 1)
        crt.initialize(to: tasker_Runtime(owner: nil, interrupt: 0, signalled: 0, deadline_ns: 0, on_interrupt: nil))
        var err = [CChar](repeating: 0, count: 512)
        guard let L = tasker_newstate(crt, &err, err.count) else {
            crt.deallocate()
            throw RuntimeError.setup(String(decoding: err.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        self.L = L
        crt.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
        crt.pointee.on_interrupt = LuaRuntime.onInterrupt
        engine.observers.append(self)
        installModules()
        loop.onIdle = { [unowned self] in self.idle() }
    }

    deinit {
        lua_close(L)
        crt.deallocate()
    }

    /// The runtime of the state `L` belongs to (any of its threads).
    @inline(__always)
    static func from(_ L: OpaquePointer) -> LuaRuntime {
        Unmanaged<LuaRuntime>.fromOpaque(tasker_runtime(L).pointee.owner).takeUnretainedValue()
    }

    // MARK: the work queue

    func enqueue(_ w: Work) {
        work.append(w)
        guard !drainScheduled else { return }
        drainScheduled = true
        loop.enqueue { [unowned self] in self.drain() }
    }

    /// Runs queued work until none is left, letting the engine start ready
    /// tasks in between: many coroutines per loop turn.
    func drain() {
        drainScheduled = false
        repeat {
            while let w = work.popFirst() { perform(w) }
            engine.dispatch()
            httpEngine.dispatch()
        } while !work.isEmpty
    }

    private func perform(_ w: Work) {
        switch w {
        case .start(let run): startAttempt(run)
        case .resume(let f, let r): resume(f, with: r)
        case .close(let f): close(f)
        case .event(let id, let e): fireHandlers(id, e)
        case .call(let body): body()
        }
    }

    // MARK: ending the run

    /// Nothing is queued, no timer armed, nothing in flight.
    private func idle() -> Bool {
        if finishedRun { return false }
        if mainDone || exitCode != nil, engine.unfinishedCount == 0 {
            finish()
            return true
        }
        if httpEngine.settleIdle() || engine.settleIdle() { return true }
        // Nothing can move: break the deadlock instead of hanging.
        logger.warning("nothing can make progress (tasks wait on each other); cancelling what is left")
        engine.cancelAll(reason: "deadlock: nothing could make progress")
        httpEngine.cancelAll(reason: "deadlock: nothing could make progress")
        if !mainDone, let f = mainFiber, f.waitingOn == nil, f.timer == nil {
            // the main chunk waits on something no task will deliver
            enqueue(.resume(f, .failure(TaskFailure(.cancelled, "the main chunk was waiting on nothing that could finish"))))
        }
        return true
    }

    func finish() {
        guard !finishedRun else { return }
        finishedRun = true
        watcher?.stop()
        let (counts, failedIDs) = engine.summary()
        let failed = failedIDs.map { id in
            (name: engine.name(id), message: engine.outcome(id)?.failure?.description ?? "failed")
        }
        let code: Int32 = interrupted ? 130
            : exitCode ?? (mainError != nil ? 2 : (failed.isEmpty ? 0 : 1))
        let result = RunResult(exitCode: code, counts: counts, failed: failed, mainError: mainError,
                               seconds: Double(Monotonic.now() - startTime) / 1e9)
        onFinish?(result)
    }

    /// Ctrl-C / SIGTERM: cancel everything (stopping runaway Lua through the
    /// hook), let cancel paths run, then finish.
    public func interrupt() {
        interrupted = true
        tasker_signal(crt)
        engine.cancelAll(reason: "interrupted")
        httpEngine.cancelAll(reason: "interrupted")
        stopReactions(reason: "interrupted")
        if let f = mainFiber, !f.finished { enqueue(.close(f)) }
    }

    /// `tasker.exit(code)`.
    func requestExit(_ code: Int32) {
        guard exitCode == nil else { return }
        exitCode = code
        engine.cancelAll(reason: "tasker.exit(\(code))")
        httpEngine.cancelAll(reason: "tasker.exit(\(code))")
        stopReactions(reason: "tasker.exit(\(code))")
        if let f = mainFiber, !f.finished, f !== current { enqueue(.close(f)) }
    }
}

/// What a run ended with.
public struct RunResult: Sendable {
    public var exitCode: Int32
    public var counts: [TaskState: Int]
    public var failed: [(name: String, message: String)]
    public var mainError: String?
    public var seconds: Double
}

public enum RuntimeError: Error, CustomStringConvertible {
    case setup(String)
    case load(String)

    public var description: String {
        switch self {
        case .setup(let m), .load(let m): m
        }
    }
}

/// Registry tables the runtime keeps, by reference.
struct Refs {
    var bodies: Int32 = 0     // [task id] = function
    var values: Int32 = 0     // [task id] = value or packed values
    var errors: Int32 = 0     // [task id] = raised Lua error value
    var args: Int32 = 0       // [task id] = ctx.args table
    var tags: Int32 = 0       // [task id] = ctx.tags table
    var handlers: Int32 = 0   // [task id] = {handle, start = {...}, ...}
    var handles: Int32 = 0    // [task id] = handle userdata (weak values)
    var threads: Int32 = 0    // anchors of live threads
    var predicates: Int32 = 0 // [task id] = retry.when function
    var handleMeta: Int32 = 0
    var taskViewMeta: Int32 = 0
    var contextMeta: Int32 = 0
    var errorMeta: Int32 = 0
    var jsonArrayMeta: Int32 = 0
    var responseMeta: Int32 = 0
}

/// Lets a signal handler on another thread stop runaway Lua code at once
/// (the count hook polls the flag); the rest of the interrupt runs on the
/// loop via `LuaRuntime.interrupt()`.
public struct InterruptHandle: @unchecked Sendable {
    // Safety: `request()` only stores into a `volatile sig_atomic_t`, the
    // one kind of write C allows from any thread or signal handler; the
    // pointer lives as long as the runtime, which outlives the run.
    fileprivate let runtime: UnsafeMutablePointer<tasker_Runtime>

    public func request() { tasker_signal(runtime) }
}

extension LuaRuntime {
    public var interruptHandle: InterruptHandle { InterruptHandle(runtime: crt) }
}

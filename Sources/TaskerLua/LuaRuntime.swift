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
/// Every entry point runs on the loop thread. Coroutines run only from the
/// drain loop (`drain()`), one at a time, so a coroutine is never
/// interrupted by another one; engine callouts queue `Work`, except the
/// three that must answer at once (an interceptor, a reactor's `when`, a
/// retry's `when`), which make a protected call that cannot yield.
public final class LuaRuntime {
    public struct Options: Sendable {
        public var concurrency = 16
        public var args: [String] = []
        public var vars: [String: String] = [:]
        /// Where `print` writes; nil keeps Lua's own `print` (stdout).
        public var output: (@Sendable (String) -> Void)?
        /// Log records at this level and above are written (`--log-level`).
        public var logLevel: Logger.Level = .info
        /// `--log-format`: logfmt lines or JSON objects.
        public var logFormat: LineLogHandler.Format = .logfmt
        /// Where log lines (the `log` module, handler errors, reloads) go.
        /// Free the Lua state and every record at the end. A process that
        /// exits right after the run (the CLI) skips this: the OS frees it
        /// all at once, and freeing 200k tasks one by one costs ~20 ms.
        public var tearDown = true
        /// The only run in this process (the CLI): its loop thread also
        /// waits on the process reactor's descriptors, so the reactor needs
        /// no thread of its own. Runs that share a process (tests) leave it
        /// to the reactor's thread.
        public var soleRun = false
        /// Reload files loaded with `tasker.use` when they change.
        public var watch = false
        /// Derive every task's identity when it is added (the journal
        /// records them; a resumed run matches them).
        public var identify = false
        /// A resumed run: the identities of tasks that succeeded before,
        /// with their values (a JSON array); those tasks are not run again.
        public var reuse: [String: String] = [:]
        /// How many of `args` (from the start) parameters may take: the
        /// words after a `--` are the script's as they are. Nil: all.
        public var parameterWords: Int?
        /// `--resume --plan`: the main chunk runs, task bodies do not (only
        /// reused tasks finish); the run ends where the main chunk would
        /// wait for a task that must run (`RunResult.planStop`).
        public var planOnly = false
        /// `--help` and `tasker list`: the main chunk runs until its first
        /// task, process, request or wait (nothing of those happens), to
        /// learn the parameters and targets it declares
        /// (`RunResult.description`).
        public var describeOnly = false
        /// Where defined tasks run when the run has a store (`--store`):
        /// nil runs them in this process.
        public var remote: RemoteQueue?
        public var diagnostics: @Sendable (String) -> Void = { StandardError.write(($0 + "\n")) }
        /// Where JSON log lines go (`--log-format json`): masked so that
        /// they stay JSON.
        public var jsonDiagnostics: @Sendable (String) -> Void = { StandardError.write($0 + "\n", json: true) }

        public init() {}
    }

    public var loop: EventLoop { engine.loop }
    public let engine: Engine
    /// HTTP requests are tasks of their own engine: the `on="http"`
    /// interceptors and reactors, retries and the in-flight cap apply to
    /// them, and they take no task slot.
    public let httpEngine: Engine
    let options: Options
    /// The `log` module and the runtime's own messages; lines go to `options.diagnostics`.
    let logger: Logger
    /// The Lua state and the C record its count hook reads.
    let lua: LuaStateHandle
    var L: OpaquePointer { lua.L }
    /// The C record the count hook reads (deadlines, the signal, the owner).
    var crt: OpaquePointer { lua.record }
    var refs = Refs()
    /// The driver's state: queued work, the fibers, the turn's time slice.
    var driver = DriverState()

    /// The pipeline file's main chunk: its fiber, where it stands, how it failed.
    var chunk = MainChunk()
    /// The main chunk has ended (returned or failed); the first time, the
    /// callback hears of it.
    var mainDone: Bool {
        get { chunk.done }
        set {
            let was = chunk.done
            chunk.done = newValue
            if newValue && !was { callbacks.mainDone?() }
        }
    }
    /// Who is told of the run's moments (see `RunCallbacks`).
    public var callbacks = RunCallbacks()
    /// Whether the main chunk raised (or the file did not load).
    public var mainChunkFailed: Bool { chunk.mainError != nil }
    lazy var taskBody = LuaTaskBody(runtime: self)
    /// The fields of a spec table and of a retry table (see `SpecReader`),
    /// made at the first read, on the thread that reads (every thread of
    /// the state shares the registry and the strings).
    private var specKeysMade: InternedKeys?
    private var retryKeysMade: InternedKeys?
    func specKeys(_ L: OpaquePointer) -> InternedKeys {
        if let k = specKeysMade { return k }
        let k = InternedKeys(SpecReader.fieldOrder, in: L)
        specKeysMade = k
        return k
    }
    func retryKeys(_ L: OpaquePointer) -> InternedKeys {
        if let k = retryKeysMade { return k }
        let k = InternedKeys(SpecReader.retryFieldOrder, in: L)
        retryKeysMade = k
        return k
    }
    /// Each task's identity across runs (see `TaskIdentities`). A `let`:
    /// the journal reads it per task, and a computed path through the
    /// module list cost a retain each time.
    let identities = TaskIdentities()
    /// Modules that own their state (see `LuaModule`); kept as long as the
    /// state, since their functions hold them unretained.
    var modules = ModuleList()
    /// Every process group the run's `exec`/`sh` calls started.
    public var processGroups: ProcessGroups { modules.exec.groups }
    /// Ctrl-C/SIGTERM/SIGHUP arrived (the loop may not have seen it yet).
    var interrupted: Bool { tasker_signalled(crt) != 0 }
    /// A journal records the run: keep each task's process output for it.
    public func keepTaskOutput() { modules.exec.outputs.keeping = true }

    /// What task `id`'s processes wrote (the last MiB), once; nil if nothing.
    public func takeTaskOutput(_ id: TaskID) -> [UInt8]? { modules.exec.outputs.take(id) }

    /// Whether some task's output waits for `takeTaskOutput`.
    public var holdsTaskOutput: Bool { modules.exec.outputs.holdsAny }

    /// A fiber running pure Lua this long without waiting is paused so the
    /// rest of the run can move (a time slice).
    static let sliceNanos: UInt64 = 10_000_000

    /// Creates the state on the loop thread.
    public init(loop: EventLoop, options: Options) throws {
        loop.assertInLoop()
        self.options = options
        self.engine = Engine(loop: loop, concurrency: options.concurrency)
        self.httpEngine = Engine(loop: loop, concurrency: HTTPSettings().concurrency)
        engine.peer = httpEngine
        httpEngine.peer = engine
        let level = options.logLevel, format = options.logFormat, sink = options.diagnostics, jsonSink = options.jsonDiagnostics
        self.logger = Logger(label: "tasker") { _ in LineLogHandler(level: level, format: format, sink: sink, jsonSink: jsonSink) }
        let crt: OpaquePointer = tasker_runtime_new()
        var err = [CChar](repeating: 0, count: 512)
        guard let L = tasker_newstate(crt, &err, err.count) else {
            tasker_runtime_free(crt)
            throw RuntimeError.setup(String(decoding: err.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        lua = LuaStateHandle(L: L, record: crt)
        identities.runtime = self
        tasker_runtime_set_owner(crt, Unmanaged.passUnretained(self).toOpaque(), LuaRuntime.onInterrupt)
        engine.observers.append(self)
        // A child that exits without reading what it is sent (a pipe to
        // `head`) must not kill the process: EPIPE is an ordinary error.
        signal(SIGPIPE, SIG_IGN)
        installModules()
        loop.onIdle = { [unowned self] in self.idle() }
    }

    deinit {
        lua_close(L)
        tasker_runtime_free(crt)
    }

    /// The runtime of the state `L` belongs to (any of its threads).
    @inline(__always)
    static func from(_ L: OpaquePointer) -> LuaRuntime {
        Unmanaged<LuaRuntime>.fromOpaque(tasker_runtime_owner(tasker_runtime(L))).takeUnretainedValue()
    }

    // MARK: the work queue

    func enqueue(_ w: Work) {
        driver.work.append(w)
        guard !driver.drainScheduled else { return }
        driver.drainScheduled = true
        loop.enqueue { [unowned self] in self.drain() }
    }

    /// Runs queued work, letting the engine start ready tasks in between:
    /// many coroutines per loop turn. After a turn's budget the rest waits
    /// for the next turn, so timers and signals are never starved.
    func drain() {
        driver.drainScheduled = false
        let start = Monotonic.now()
        driver.sliceEnd = start &+ LuaRuntime.sliceNanos
        var n = 0
        repeat {
            while let w = driver.work.popFirst() {
                perform(w)
                n &+= 1
                if n & 15 == 0 && Monotonic.now() &- start > EventLoop.turnBudget {
                    driver.drainScheduled = true
                    loop.enqueueNextTurn { [unowned self] in self.drain() }
                    return
                }
            }
            if interrupted && !driver.interruptApplied { applyInterrupt() }
            engine.dispatch()
            httpEngine.dispatch()
        } while !driver.work.isEmpty
    }

    /// Whether a resumption of `f` is queued (breaking a deadlock may just
    /// have woken it: it must not be resumed twice).
    private func isQueued(_ f: Fiber) -> Bool {
        driver.work.contains { w in
            if case .resume(let g, _) = w { return g === f }
            return false
        }
    }

    /// A fiber whose time slice ended goes on after timers and other work
    /// have had a turn.
    func continueLater(_ f: Fiber) {
        loop.enqueueNextTurn { [unowned self] in self.enqueue(.resume(f, .continueSlice)) }
    }

    private func perform(_ w: Work) {
        switch w {
        case .start(let run): startAttempt(run)
        case .resume(let f, let r): resume(f, with: r)
        case .close(let f): close(f)
        case .event(let id, let e): modules.handles.fireHandlers(id, e)
        case .call(let body): body()
        }
    }

    // MARK: ending the run

    /// Nothing is queued, no timer armed, nothing in flight.
    private func idle() -> Bool {
        if driver.finishedRun { return false }
        if mainDone || driver.exitRequested != nil, engine.unfinishedCount == 0 {
            finish()
            return true
        }
        if httpEngine.settleIdle() || engine.settleIdle() { return true }
        if options.planOnly { return endPlan() }
        // Nothing can move: tasks wait on each other. Break the cycle: the
        // waiting tasks fail with kind `deadlock`.
        let message = "nothing could make progress (tasks wait on each other)"
        logger.warning("deadlock: \(message); failing what is left")
        engine.failAll(TaskFailure(.deadlock, message))
        httpEngine.cancelAll(reason: "deadlock: \(message)")
        if !mainDone, let f = chunk.mainFiber, !isQueued(f) {
            // the main chunk waits on something no task will deliver
            f.wait?.cancel()
            f.wait = nil
            enqueue(.resume(f, .failure(TaskFailure(.deadlock, "the main chunk was waiting on nothing that could finish"))))
        }
        return true
    }

    /// A plan's evaluation went as far as it can: where the main chunk
    /// waits for tasks that would run (nothing runs them), if it does.
    private func endPlan() -> Bool {
        if !mainDone, let f = chunk.mainFiber, let wait = f.wait as? TasksWait {
            let position = LuaStack(f.thread).innermostLuaPosition() ?? chunk.scriptPath
            let names = wait.ids.filter { !engine.isFinished($0) }.prefix(3).map { "'\(engine.name($0))'" }
            chunk.planStop = "\(position): the main chunk waits there for \(names.joined(separator: ", ")), which would run"
        }
        requestExit(0)
        return true
    }

    func finish() {
        guard !driver.finishedRun else { return }
        driver.finishedRun = true
        useModule.watcher?.stop()
        for m in modules.all { m.runEnded() }
        let c = engine.summary()
        let failed = c.failed.map { id in
            (name: engine.name(id), message: engine.outcome(id)?.failure?.description ?? "failed")
        }
        let reason = { (id: TaskID) in
            let f = self.engine.outcome(id)?.failure
            return (name: self.engine.name(id), message: f?.summary ?? f?.description ?? "cancelled")
        }
        let signal = tasker_signalled(crt)
        let code: Int32 = signal != 0 ? 128 + signal
            : driver.exitRequested ?? (chunk.mainError != nil && chunk.mainErrorTask == nil ? 2 : (failed.isEmpty && chunk.mainErrorTask == nil ? 0 : 1))
        var result = RunResult(exitCode: code, counts: c.tasks, failed: failed, mainError: chunk.mainError,
                               seconds: Double(Monotonic.now() - driver.started) / 1e9)
        result.groups = c.groups
        result.reused = c.reused
        result.retried = c.retried
        result.cancelled = c.cancelled.map(reason)
        result.skipped = c.skipped.map(reason)
        result.mainErrorTask = chunk.mainErrorTask
        result.planStop = chunk.planStop
        result.commandLineError = chunk.mainErrorIsCommandLine
        if options.describeOnly { result.description = describeDeclarations() }
        result.signal = signal
        callbacks.finished?(result)
    }

    /// SIGINT/SIGTERM/SIGHUP (from any thread, through `loop.execute`):
    /// record it, then stop everything.
    public func interrupt(signal: Int32 = SIGINT) {
        tasker_signal(crt, signal)
        applyInterrupt()
    }

    /// Cancels everything (stopping runaway Lua through the hook), lets the
    /// cancel paths run, then the run finishes. From here on nothing starts.
    private func applyInterrupt() {
        guard !driver.interruptApplied else { return }
        driver.interruptApplied = true
        let sig = tasker_signalled(crt)
        let reason = sig != 0 ? Signals.name(sig) : "interrupted"
        engine.close(reason: reason)
        httpEngine.close(reason: reason)
        resumeStarts()  // ends a pause's wait; nothing starts after close()
        engine.cancelAll(reason: "interrupted")
        httpEngine.cancelAll(reason: "interrupted")
        engine.cancelAdds(reason: "interrupted")
        httpEngine.cancelAdds(reason: "interrupted")
        hooks.stopReactions(reason: "interrupted")
        if let f = chunk.mainFiber, !f.finished, f !== driver.current { enqueue(.close(f)) }
    }

    /// `tasker.pause()` / SIGUSR1: nothing new starts; running tasks go on.
    /// The run waits while paused, even with nothing running (SIGUSR2 or
    /// `tasker.resume()` lets it go on; an interrupt still ends it).
    public func pauseStarts() {
        guard !engine.startsPaused else { return }
        engine.pauseStarts()
        loop.beginActivity()
    }

    /// `tasker.resume()` / SIGUSR2.
    public func resumeStarts() {
        guard engine.startsPaused else { return }
        engine.resumeStarts()
        loop.endActivity()
    }

    public var startsPaused: Bool { engine.startsPaused }

    /// A line in the run's log (as tasker's own messages are).
    public func logNotice(_ message: String) { logger.info("\(message)") }

    /// `tasker.exit(code)`.
    func requestExit(_ code: Int32) {
        guard driver.exitRequested == nil else { return }
        driver.exitRequested = code
        engine.close(reason: "exit(\(code))")  // tasker.exit or os.exit
        resumeStarts()
        httpEngine.close(reason: "exit(\(code))")
        engine.cancelAll(reason: "tasker.exit(\(code))")
        httpEngine.cancelAll(reason: "tasker.exit(\(code))")
        hooks.stopReactions(reason: "tasker.exit(\(code))")
        if let f = chunk.mainFiber, !f.finished, f !== driver.current { enqueue(.close(f)) }
    }
}

/// What a run ended with.
public struct RunResult: Sendable {
    public var exitCode: Int32
    /// Tasks per final state (groups and schedules apart, in `groups`).
    public var counts: [TaskState: Int]
    public var groups: [TaskState: Int] = [:]
    /// Succeeded tasks reused from an earlier run (resume).
    public var reused = 0
    /// Tasks that took more than one attempt.
    public var retried = 0
    public var failed: [(name: String, message: String)]
    /// Cancelled tasks with a short reason ("cancelled: interrupted").
    public var cancelled: [(name: String, message: String)] = []
    /// Tasks whose condition was not met, with the reason ("skipped: dependency 'deploy' succeeded").
    public var skipped: [(name: String, message: String)] = []
    public var mainError: String?
    /// When the main chunk raised a task's error (from `await`, `all`…): that task.
    public var mainErrorTask: String?
    /// The signal that interrupted the run, or 0.
    public var signal: Int32 = 0
    /// A plan's evaluation stopped here (`Options.planOnly`).
    public var planStop: String?
    /// `mainError` is about the command line (a bad parameter, an unknown
    /// target): one line, and no tasks ran.
    public var commandLineError = false
    /// `Options.describeOnly`: the parameters and targets declared, as JSON
    /// (`{"params": [...], "targets": [...]}`).
    public var description: String?
    public var seconds: Double

    public init(exitCode: Int32, counts: [TaskState: Int], failed: [(name: String, message: String)],
                mainError: String?, seconds: Double) {
        self.exitCode = exitCode
        self.counts = counts
        self.failed = failed
        self.mainError = mainError
        self.seconds = seconds
    }
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
    var handedErrors: Int32 = 0 // [error value] = name of the task whose error the main chunk was handed
    var errorMeta: Int32 = 0
    /// The metatables of task handles, `ctx` and the task view `t` (made by
    /// `HandleModule`, `ContextModule`, `TaskViewModule`), here so that the
    /// per-task pushes need no module.
    var handleMeta: Int32 = 0
    var contextMeta: Int32 = 0
    var taskViewMeta: Int32 = 0
    /// Which tasks have an entry in the rare tables (see `TaskFlags`).
    var flags = TaskFlags()
}

/// Lets a signal handler on another thread stop runaway Lua code at once
/// (the count hook polls the flag); the rest of the interrupt runs on the
/// loop via `LuaRuntime.interrupt()`.
public struct InterruptHandle: @unchecked Sendable {
    // Safety: `request` only does an atomic compare-and-swap on the C
    // record (C11 atomics); the record lives as long as the runtime, which
    // outlives the run.
    fileprivate let runtime: OpaquePointer

    /// Records `signal` (the first one wins); returns the first one.
    @discardableResult
    public func request(_ signal: Int32) -> Int32 { tasker_signal(runtime, signal) }
}

extension LuaRuntime {
    public var interruptHandle: InterruptHandle { InterruptHandle(runtime: crt) }
}

/// A Lua state and the C record its count hook reads (deadlines, the
/// signal, the owner): made together, freed together (`LuaRuntime.deinit`).
struct LuaStateHandle {
    let L: OpaquePointer
    let record: OpaquePointer
}

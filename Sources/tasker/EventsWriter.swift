import Foundation
import TaskerCore
import TaskerLua

/// `--events FILE`: one JSON object per line per event, written as it
/// happens. Every line has `t` (seconds since the run started), `ts` (UTC,
/// ISO 8601) and `event`; task events add `id`, `name`, `state` and `error`
/// when there is one. The first line is `run`, the last `end`.
final class EventsWriter: EngineObserver {
    private let out: OutputFile
    private let start = Monotonic.now()
    /// Set once the runtime exists (tags of added tasks).
    weak var runtime: LuaRuntime?

    init(output: OutputFile) {
        self.out = output
    }

    var error: String? { out.error }

    /// A line for `event`, stamped now; its keys are written in order.
    private func line(_ event: StaticString) -> EventLine {
        EventLine(event: event, t: (Double(Monotonic.now() - start) / 1e6).rounded() / 1e3, ts: Self.timestamp())
    }

    private func write(_ line: EventLine) {
        var line = line
        out.writeLine(line.finish())
    }

    /// A task's line: `id`, `name` and `state`, with `before` the keys that
    /// sort before `id`.
    private func write(_ event: StaticString, _ id: TaskID, _ engine: Engine, state: TaskState? = nil,
                       before: (inout EventLine) -> Void = { _ in }) {
        var l = line(event)
        before(&l)
        if !l.hasError { l.error(nil) }
        l.id(id)
        l.nameAndState(id, engine, state: state)
        write(l)
    }

    /// `2026-11-22T04:41:12.345Z`.
    static func timestamp() -> String {
        var tv = timeval()
        gettimeofday(&tv, nil)
        var t = tv.tv_sec
        var parts = tm()
        gmtime_r(&t, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
                      Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), Int(tv.tv_usec / 1000))
    }

    // MARK: the run

    func runStarted(id: String, pipeline: String, args: [String]) {
        var l = line("run")
        l.key("args")
        l.w.strings(args)
        l.key("pipeline")
        l.w.string(pipeline)
        l.key("run")
        l.w.string(id)
        l.key("version")
        l.w.string(Tasker.version)
        write(l)
    }

    func runEnded(_ result: RunResult, exitCode: Int32) {
        var l = line("end")
        l.key("counts")
        l.counts(result.counts)
        l.key("exit_code")
        l.w.integer(Int(exitCode))
        l.key("groups")
        l.counts(result.groups)
        l.key("seconds")
        l.w.double(result.seconds)
        write(l)
    }

    /// A used file was reloaded (not a task event: no id).
    func reloaded(_ file: String) {
        var l = line("reloaded")
        l.key("file")
        l.w.string(file)
        l.key("state")
        l.w.string("reloaded")
        write(l)
    }

    func request(_ e: RequestEvent) {
        var l = line("request")
        l.key("attempt")
        l.w.integer(e.attempt)
        if let c = e.code {
            l.key("code")
            l.w.string(c)
        }
        l.key("elapsed")
        l.w.double((e.elapsed * 1e6).rounded() / 1e6)
        // the task that made it (none for the main chunk's), as task events
        // name it; the request's own number apart
        if let task = e.task {
            l.key("id")
            l.w.integer(task)
        }
        l.key("method")
        l.w.string(e.method)
        if let name = e.taskName {
            l.key("name")
            l.w.string(name)
        }
        l.key("request")
        l.w.integer(e.id)
        if let r = e.retryIn {
            l.key("retry_in")
            l.w.double(r)
        }
        if let s = e.status {
            l.key("status")
            l.w.integer(s)
        }
        l.key("url")
        l.w.string(e.url)
        write(l)
    }

    // MARK: tasks

    func taskAdded(_ id: TaskID, engine: Engine) {
        var l = line("added")
        l.key("after")
        l.w.beginArray()
        for d in engine.dependencies(id) { l.w.integer(d) }
        l.w.endArray()
        l.error(nil)
        l.id(id)
        l.nameAndState(id, engine)
        l.key("tags")
        l.w.strings(runtime?.tags(of: id) ?? [])
        write(l)
    }

    func taskStarted(_ id: TaskID, engine: Engine) { write("started", id, engine) }

    /// Said as it is reused, just before it ends: its state is the one it
    /// ends in (its handle is succeeded at once).
    func taskReused(_ id: TaskID, engine: Engine) { write("reused", id, engine, state: .succeeded) }

    func taskProgress(_ id: TaskID, fraction: Double, message: String?, engine: Engine) {
        var l = line("progress")
        l.error(nil)
        l.key("fraction")
        l.w.double(fraction)
        l.id(id)
        if let message {
            l.key("message")
            l.w.string(message)
        }
        l.nameAndState(id, engine)
        write(l)
    }

    func taskRetrying(_ id: TaskID, failedAttempt: Int, failure: TaskFailure, delay: Double, engine: Engine) {
        write("retry", id, engine) { l in
            l.key("attempt")
            l.w.integer(failedAttempt)
            l.key("delay")
            l.w.double(delay)
            l.error(failure.description)
        }
    }

    func taskHeld(_ id: TaskID, by interceptor: String, engine: Engine) {
        interception("held", id, interceptor, engine)
    }

    func taskReleased(_ id: TaskID, by interceptor: String, engine: Engine) {
        interception("released", id, interceptor, engine)
    }

    private func interception(_ event: StaticString, _ id: TaskID, _ interceptor: String, _ engine: Engine) {
        var l = line(event)
        l.error(nil)
        l.id(id)
        l.key("interceptor")
        l.w.string(interceptor)
        l.nameAndState(id, engine)
        write(l)
    }

    func taskReacting(_ id: TaskID, reactor: String, engine: Engine) {
        var l = line("reacting")
        l.error(nil)
        l.id(id)
        l.key("name")
        l.w.string(engine.name(id))
        l.key("reactor")
        l.w.string(reactor)
        l.key("state")
        l.w.string(engine.state(id).rawValue)
        write(l)
    }

    /// `paused`/`resumed` of the run's starts (no id) or of a task, and
    /// `stopped` with what stopped the run (`SIGINT`, `exit(3)`).
    func runMarked(_ mark: RunMark, engine: Engine) {
        switch mark {
        case .startsPaused, .startsResumed:
            var l = line(mark == .startsPaused ? "paused" : "resumed")
            l.key("state")
            l.w.string(mark == .startsPaused ? "paused" : "running")
            write(l)
        case .taskPaused(let id): write("paused", id, engine)
        case .taskResumed(let id): write("resumed", id, engine)
        case .stopped(let why):
            var l = line("stopped")
            l.key("reason")
            l.w.string(why)
            write(l)
        }
    }

    func taskFinished(_ id: TaskID, outcome: TaskOutcome, engine: Engine) {
        write("finished", id, engine) { l in l.error(outcome.failure?.description) }
    }
}

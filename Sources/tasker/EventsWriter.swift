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

    private func write(_ event: String, _ fields: [String: Any]) {
        var object = fields
        object["t"] = (Double(Monotonic.now() - start) / 1e6).rounded() / 1e3
        object["ts"] = Self.timestamp()
        object["event"] = event
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        // `--events -` may be a terminal: C1 and DEL escaped as well (still JSON).
        out.writeLine(TerminalText.escapingC1(json: String(decoding: data, as: UTF8.self)))
    }

    private func write(_ event: String, _ id: TaskID, _ engine: Engine, extra: [String: Any] = [:]) {
        var object: [String: Any] = ["id": id, "name": engine.name(id), "state": engine.state(id).rawValue]
        object.merge(extra) { $1 }
        write(event, object)
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
        write("run", ["run": id, "pipeline": pipeline, "args": args, "version": Tasker.version])
    }

    func runEnded(_ result: RunResult, exitCode: Int32) {
        var counts: [String: Int] = [:]
        for (state, n) in result.counts { counts[state.rawValue] = n }
        var groups: [String: Int] = [:]
        for (state, n) in result.groups { groups[state.rawValue] = n }
        write("end", ["exit_code": Int(exitCode), "counts": counts, "groups": groups, "seconds": result.seconds])
    }

    /// A used file was reloaded (not a task event: no id).
    func reloaded(_ file: String) {
        write("reloaded", ["file": file, "state": "reloaded"])
    }

    func request(_ e: RequestEvent) {
        var object: [String: Any] = ["id": e.id, "method": e.method, "url": e.url, "attempt": e.attempt,
                                     "elapsed": (e.elapsed * 1e6).rounded() / 1e6]
        if let s = e.status { object["status"] = s }
        if let c = e.code { object["code"] = c }
        if let r = e.retryIn { object["retry_in"] = r }
        write("request", object)
    }

    // MARK: tasks

    func taskAdded(_ id: TaskID, engine: Engine) {
        write("added", id, engine, extra: ["after": engine.dependencies(id), "tags": runtime?.tags(of: id) ?? []])
    }

    func taskStarted(_ id: TaskID, engine: Engine) { write("started", id, engine) }

    func taskReused(_ id: TaskID, engine: Engine) { write("reused", id, engine) }

    func taskProgress(_ id: TaskID, fraction: Double, message: String?, engine: Engine) {
        var extra: [String: Any] = ["fraction": fraction]
        if let message { extra["message"] = message }
        write("progress", id, engine, extra: extra)
    }

    func taskRetrying(_ id: TaskID, failedAttempt: Int, failure: TaskFailure, delay: Double, engine: Engine) {
        write("retry", id, engine, extra: ["attempt": failedAttempt, "error": failure.description, "delay": delay])
    }

    func taskHeld(_ id: TaskID, by interceptor: String, engine: Engine) {
        write("held", id, engine, extra: ["interceptor": interceptor])
    }

    func taskReleased(_ id: TaskID, by interceptor: String, engine: Engine) {
        write("released", id, engine, extra: ["interceptor": interceptor])
    }

    func taskReacting(_ id: TaskID, reactor: String, engine: Engine) {
        write("reacting", id, engine, extra: ["reactor": reactor])
    }

    /// `paused`/`resumed` of the run's starts (no id) or of a task, and
    /// `stopped` with what stopped the run (`SIGINT`, `exit(3)`).
    func runMarked(_ mark: RunMark, engine: Engine) {
        switch mark {
        case .startsPaused: write("paused", ["state": "paused"])
        case .startsResumed: write("resumed", ["state": "running"])
        case .taskPaused(let id): write("paused", id, engine)
        case .taskResumed(let id): write("resumed", id, engine)
        case .stopped(let why): write("stopped", ["reason": why])
        }
    }

    func taskFinished(_ id: TaskID, outcome: TaskOutcome, engine: Engine) {
        var extra: [String: Any] = [:]
        if let f = outcome.failure { extra["error"] = f.description }
        write("finished", id, engine, extra: extra)
    }
}

import Foundation
import TaskerCore
import TaskerJournal
import TaskerLua

/// Turns a run's engine events into journal writes: the run when it
/// starts, each task when its first attempt starts (so a run that dies
/// shows it lost) and when it finishes (in completion order), the run's end
/// with its counts and HTTP requests per host. Runs on the loop; the
/// writer thread does the SQLite work.
final class JournalRecorder: EngineObserver {
    private let writer: JournalWriter
    let runID: String
    private let start = Monotonic.now()
    /// Set once the runtime exists (identities, values, tags).
    weak var runtime: LuaRuntime?
    /// Tasks not finished yet (a schedule that ticks for days must not
    /// grow this).
    private var tasks: [TaskID: Progress] = [:]
    private var hosts: [String: JournalHostRequests] = [:]

    /// What is known of a task before it finishes.
    private struct Progress {
        var added: Double
        var started: Double?
        var attemptStart: Double?
        var heldSince: Double?
        var held: Double = 0
        var log: [JournalAttempt] = []
    }

    init(writer: JournalWriter, run: JournalRun) {
        self.writer = writer
        self.runID = run.id
        writer.submit(.runStarted(run))
    }

    private var now: Double { Double(Monotonic.now() &- start) / 1e9 }

    private func progress(_ id: TaskID) -> Progress? { tasks[id] }

    func taskAdded(_ id: TaskID, engine: Engine) {
        tasks[id] = Progress(added: now)
    }

    func taskStarted(_ id: TaskID, engine: Engine) {
        guard tasks[id] != nil else { return }
        let t = now
        tasks[id]?.started = t
        tasks[id]?.attemptStart = t
        writer.submit(.taskStarted(run: runID, id: id, identity: runtime?.identity(of: id).text,
                                   name: engine.name(id), added: tasks[id]?.added ?? t, started: t))
    }

    func taskRetrying(_ id: TaskID, failedAttempt: Int, failure: TaskFailure, delay: Double, engine: Engine) {
        guard var p = progress(id) else { return }
        let t = now
        p.log.append(JournalAttempt(start: p.attemptStart ?? t, end: t, error: failure.description, kind: failure.kind.rawValue))
        p.attemptStart = t + delay
        tasks[id] = p
    }

    func taskHeld(_ id: TaskID, by interceptor: String, engine: Engine) {
        tasks[id]?.heldSince = now
    }

    func taskReleased(_ id: TaskID, by interceptor: String, engine: Engine) {
        guard let since = progress(id)?.heldSince else { return }
        tasks[id]?.held += now - since
        tasks[id]?.heldSince = nil
    }

    func taskFinished(_ id: TaskID, outcome: TaskOutcome, engine: Engine) {
        guard var p = tasks.removeValue(forKey: id) else { return }
        let t = now
        if let since = p.heldSince { p.held += t - since }
        var task = JournalTask(id: id, name: engine.name(id), state: outcome.state.rawValue)
        let reused = engine.isReused(id)
        task.reused = reused
        task.kind = engine.isGroupOrSchedule(id) ? (engine.groupMembers(id) != nil ? "group" : "schedule") : "task"
        task.after = engine.dependencies(id)
        task.attempts = engine.attempts(id)
        task.added = p.added
        task.started = p.started
        task.ended = t
        task.held = p.held
        if let f = outcome.failure {
            task.error = f.description
            task.errorKind = f.kind.rawValue
        }
        if let runtime {
            let identity = runtime.identity(of: id)
            task.identity = identity.text
            task.notResumable = identity.notResumable
            task.tags = runtime.tags(of: id)
            if outcome.state == .succeeded, task.notResumable == nil {
                switch runtime.storableValues(of: id) {
                case .json(let text): task.value = text
                case .notStorable(let why): task.notResumable = why
                }
            }
        }
        if !p.log.isEmpty {
            p.log.append(JournalAttempt(start: p.attemptStart ?? t, end: t, error: task.error, kind: task.errorKind))
            task.attemptLog = p.log
        }
        writer.submit(.taskFinished(run: runID, task))
    }

    /// One HTTP attempt (from the runtime's request events).
    func request(_ e: RequestEvent) {
        let host = URLComponents(string: e.url).map { c in (c.host ?? "?") + (c.port.map { ":\($0)" } ?? "") } ?? "?"
        var h = hosts[host] ?? JournalHostRequests(host: host)
        h.requests += 1
        if e.retryIn != nil {
            h.retries += 1
        } else if e.code != nil || (e.status ?? 0) >= 400 {
            h.failures += 1
        }
        hosts[host] = h
    }

    /// The run's end; then the writer flushes and stops. Returns a write
    /// error, if the journal could not be written.
    func finish(_ result: RunResult, exitCode: Int32) -> String? {
        var counts: [String: Int] = [:]
        for (state, n) in result.counts { counts[state.rawValue] = n }
        if result.reused > 0 { counts["reused"] = result.reused }
        writer.submit(.runEnded(id: runID, ended: Date().timeIntervalSince1970, exitCode: Int(exitCode), counts: counts,
                                requests: hosts.values.sorted { $0.host < $1.host }))
        return writer.close()
    }
}

import Foundation
import Synchronization
import TaskerCore

/// The coordinator's side of the queue (`tasker run --store`): attempts of
/// defined tasks are inserted in batches by a connection thread, their
/// endings come back by NOTIFY (with a slow poll as a backstop) and are
/// handed to whoever waits for them.
public final class QueueCoordinator: RemoteQueue {
    public let run: String
    private let db: PGThread
    private let state = Mutex(State())

    private struct Key: Hashable {
        var task: TaskID
        var attempt: Int
    }

    private struct Waiter {
        var done: @Sendable (RemoteOutcome) -> Void
        var name: String
        var since: UInt64
    }

    private struct State {
        var waiting: [Key: Waiter] = [:]
        var outbox: [RemoteAttempt] = []
        var flushing = false
        var fetching = false
        /// Finished ids named by notifications, not read yet.
        var named: [Int64] = []
        /// Look by every waiting attempt (a tick, or a notification without ids).
        var scan = false
        var error: String?
        var listener: PGListener?
        /// Names already warned about (no live worker defines them; a
        /// worker ran another version), and when live workers were last
        /// looked up.
        var warnedUndefined: Set<String> = []
        var warnedVersion: Set<String> = []
        var checkedWorkers: UInt64 = 0
        var checking = false
        var warn: (@Sendable (String) -> Void)?
    }

    /// Seconds an attempt waits before the coordinator looks whether any
    /// live worker defines its task (tests shorten it).
    static let undefinedAfter: Double = {
        if let s = ProcessInfo.processInfo.environment["TASKER_TEST_UNDEFINED_AFTER"], let v = Double(s), v >= 0 { return v }
        return 30
    }()

    /// Where warnings go (the run's log); stderr until set.
    public func onWarning(_ warn: @escaping @Sendable (String) -> Void) {
        state.withLock { $0.warn = warn }
    }

    private func warn(_ message: String) {
        if let w = state.withLock({ $0.warn }) {
            w(message)
        } else {
            FileHandle.standardError.write(Data("tasker: warning: \(message)\n".utf8))
        }
    }

    /// Connects (so a bad URL fails the run at once) and creates the schema.
    public init(url: String, run: String) throws {
        self.run = run
        db = PGThread(url: url, name: "tasker.queue")
        try db.sync { c throws in try QueueSchema.ensure(c) }
        let listener = PGListener(
            url: url, channels: [QueueStore.doneChannel], tick: 1,
            onNotify: { [weak self] _, payload in self?.notified(payload) },
            onTick: { [weak self] in
                self?.fetch(scan: true)
                self?.checkUndefined()
            })
        state.withLock { $0.listener = listener }
    }

    public func stop() {
        state.withLock { s in
            let l = s.listener
            s.listener = nil
            return l
        }?.stop()
        db.stop()
    }

    /// A database error seen while the run went on, if any.
    public var lastError: String? { state.withLock { $0.error } }

    public func submit(_ a: RemoteAttempt, done: @escaping @Sendable (RemoteOutcome) -> Void) {
        let start = state.withLock { s in
            s.waiting[Key(task: a.task, attempt: a.attempt)] = Waiter(done: done, name: a.name, since: Monotonic.now())
            s.outbox.append(a)
            if s.flushing { return false }
            s.flushing = true
            return true
        }
        if start { flush() }
    }

    /// Inserts what accumulated since the last insert: while one batch is
    /// in flight the next one gathers.
    private func flush() {
        db.submit { [self] c, error in
            let jobs = state.withLock { s in
                let j = s.outbox
                s.outbox = []
                return j
            }
            var failure = error?.message
            if let c, !jobs.isEmpty {
                do { try QueueStore.enqueue(run: run, jobs, c) } catch { failure = "\(error)" }
            }
            if let failure {
                // The attempts were not handed over: they fail now (their
                // retries, if any, try again).
                fail(jobs, TaskFailure(.init(rawValue: "store"), "cannot queue the task: \(failure)"))
            }
            let again = state.withLock { s in
                if s.outbox.isEmpty {
                    s.flushing = false
                    return false
                }
                return true
            }
            if again { flush() }
        }
    }

    private func fail(_ jobs: [RemoteAttempt], _ failure: TaskFailure) {
        let callbacks = state.withLock { s in
            s.error = failure.message
            return jobs.compactMap { s.waiting.removeValue(forKey: Key(task: $0.task, attempt: $0.attempt))?.done }
        }
        for cb in callbacks { cb(.failed(failure)) }
    }

    /// `run id,id,…` (or just `run`): attempts of some run finished.
    private func notified(_ payload: String) {
        let parts = payload.split(separator: " ", maxSplits: 1)
        guard parts.first.map(String.init) == run else { return }
        if parts.count == 2 {
            fetch(ids: parts[1].split(separator: ",").compactMap { Int64($0) })
        } else {
            fetch(scan: true)
        }
    }

    /// Reads finished attempts: those named, or (`scan`) any this run still
    /// waits for. While one read is in flight the next requests gather.
    private func fetch(ids: [Int64] = [], scan: Bool = false) {
        let start = state.withLock { s in
            guard !s.waiting.isEmpty else { return false }
            s.named += ids
            s.scan = s.scan || scan
            if s.fetching { return false }
            s.fetching = true
            return true
        }
        guard start else { return }
        db.submit { [self] c, _ in
            let (ids, scan, tasks) = state.withLock { s in
                let r = (s.named, s.scan, s.scan ? Array(Set(s.waiting.keys.map(\.task))) : [])
                s.named = []
                s.scan = false
                return r
            }
            var rows: [FinishedJob] = []
            if let c {
                do {
                    rows = scan ? try QueueStore.finished(run: run, tasks: tasks, c) : try QueueStore.finished(ids: ids, c)
                } catch {
                    state.withLock { $0.error = "\(error)" }
                }
            }
            var deliveries: [(@Sendable (RemoteOutcome) -> Void, RemoteOutcome)] = []
            var otherVersions: [FinishedJob] = []
            let again = state.withLock { s in
                for r in rows {
                    guard let w = s.waiting.removeValue(forKey: Key(task: r.task, attempt: r.attempt)) else { continue }
                    deliveries.append((w.done, Self.outcome(r)))
                    if let v = r.version, let ran = r.ranVersion, v != ran, s.warnedVersion.insert(r.name).inserted {
                        otherVersions.append(r)
                    }
                }
                s.fetching = false
                return !s.named.isEmpty || s.scan
            }
            for r in otherVersions {
                warn("'\(r.name)' ran on worker \(r.worker ?? "?") with another version of its definition "
                     + "(the worker's \(r.ranVersion ?? "?"), this pipeline's \(r.version ?? "?")): update the workers' FILE")
            }
            for (cb, o) in deliveries { cb(o) }
            if again { fetch() }
        }
    }

    static func outcome(_ r: FinishedJob) -> RemoteOutcome {
        switch r.state {
        case "succeeded": return .succeeded(r.result ?? "[]")
        default:
            let kind = TaskFailure.Kind(rawValue: r.errorKind ?? "error")
            var failure = r.errorWhere == nil
                ? r.error.map { Self.failure(kind, described: $0) } ?? TaskFailure(kind, "the task \(r.state) on a worker")
                : TaskFailure(kind, r.error ?? "the task \(r.state) on a worker")
            failure.payload = r.errorValue.map(RemoteErrorValue.init(json:))
            if let position = r.errorWhere { failure.position = position }
            return .failed(failure)
        }
    }

    /// Warns (once per name) about attempts that waited past
    /// `undefinedAfter` for a definition no live worker has: they stay
    /// queued, never failed for it, but someone must start such a worker.
    /// Looks at most every few seconds.
    private func checkUndefined() {
        let now = Monotonic.now()
        let after = UInt64(Self.undefinedAfter * 1e9)
        let names: [String: Int] = state.withLock { s in
            guard !s.checking, now &- s.checkedWorkers >= min(after, 5_000_000_000) else { return [:] }
            var due: [String: Int] = [:]
            for w in s.waiting.values where now &- w.since >= after && !s.warnedUndefined.contains(w.name) {
                due[w.name, default: 0] += 1
            }
            if !due.isEmpty {
                s.checking = true
                s.checkedWorkers = now
            }
            return due
        }
        guard !names.isEmpty else { return }
        db.submit { [self] c, _ in
            let undefined = c.flatMap { try? QueueStore.undefined(Array(names.keys), $0) } ?? []
            let fresh = state.withLock { s in
                s.checking = false
                return undefined.filter { s.warnedUndefined.insert($0).inserted }
            }
            for name in fresh.sorted() {
                let n = names[name] ?? 0
                warn("no live worker defines '\(name)': \(n) task\(n == 1 ? "" : "s") of it wait in the queue "
                     + "(start `tasker worker` with a FILE that defines it)")
            }
        }
    }

    /// A worker records a failure as its description (`[position: ]kind:
    /// message`): taken apart again, so it reads as it would in one process
    /// (not `usage: usage: …`).
    static func failure(_ kind: TaskFailure.Kind, described text: String) -> TaskFailure {
        let marker = "\(kind.rawValue): "
        guard kind != .error else { return TaskFailure(kind, text) }
        if text.hasPrefix(marker) { return TaskFailure(kind, String(text.dropFirst(marker.count))) }
        // A position is `file:line`: no space (a message merely holding
        // "usage: " stays whole).
        guard let r = text.range(of: ": " + marker), !text[..<r.lowerBound].contains(" ") else { return TaskFailure(kind, text) }
        var f = TaskFailure(kind, String(text[r.upperBound...]))
        f.position = String(text[..<r.lowerBound])
        return f
    }

    public func cancel(task: TaskID, attempt: Int) {
        let inDatabase = state.withLock { s in
            guard s.waiting.removeValue(forKey: Key(task: task, attempt: attempt)) != nil else { return false }
            // Not inserted yet: it never will be.
            let before = s.outbox.count
            s.outbox.removeAll { $0.task == task && $0.attempt == attempt }
            return s.outbox.count == before
        }
        guard inDatabase else { return }
        db.submit { [run] c, _ in
            if let c { try? QueueStore.cancel(run: run, task: task, attempt: attempt, c) }
        }
    }
}

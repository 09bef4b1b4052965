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

    private struct State {
        var waiting: [Key: @Sendable (RemoteOutcome) -> Void] = [:]
        var outbox: [QueuedJob] = []
        var flushing = false
        var fetching = false
        var fetchAgain = false
        var error: String?
        var listener: PGListener?
    }

    /// Connects (so a bad URL fails the run at once) and creates the schema.
    public init(url: String, run: String) throws {
        self.run = run
        db = PGThread(url: url, name: "tasker.queue")
        try db.sync { c throws in try QueueSchema.ensure(c) }
        let listener = PGListener(
            url: url, channels: [QueueStore.doneChannel], tick: 1,
            onNotify: { [weak self] _, payload in
                guard let self, payload == self.run else { return }
                self.fetch()
            },
            onTick: { [weak self] in self?.fetch() })
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
        let job = QueuedJob(run: run, task: a.task, attempt: a.attempt, name: a.name, args: a.args,
                            priority: a.priority, timeout: a.timeout)
        let start = state.withLock { s in
            s.waiting[Key(task: a.task, attempt: a.attempt)] = done
            s.outbox.append(job)
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
                do { try QueueStore.enqueue(jobs, c) } catch { failure = "\(error)" }
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

    private func fail(_ jobs: [QueuedJob], _ failure: TaskFailure) {
        let callbacks = state.withLock { s in
            s.error = failure.message
            return jobs.compactMap { s.waiting.removeValue(forKey: Key(task: $0.task, attempt: $0.attempt)) }
        }
        for cb in callbacks { cb(.failed(failure)) }
    }

    /// Reads the attempts that finished since the last read.
    private func fetch() {
        let start = state.withLock { s in
            if s.fetching {
                s.fetchAgain = true
                return false
            }
            guard !s.waiting.isEmpty else { return false }
            s.fetching = true
            return true
        }
        guard start else { return }
        db.submit { [self] c, error in
            var rows: [FinishedJob] = []
            if let c {
                do { rows = try QueueStore.takeFinished(run: run, c) } catch {
                    state.withLock { $0.error = "\(error)" }
                }
            }
            var deliveries: [(@Sendable (RemoteOutcome) -> Void, RemoteOutcome)] = []
            let again = state.withLock { s in
                for r in rows {
                    guard let cb = s.waiting.removeValue(forKey: Key(task: r.task, attempt: r.attempt)) else { continue }
                    deliveries.append((cb, Self.outcome(r)))
                }
                s.fetching = false
                let a = s.fetchAgain
                s.fetchAgain = false
                return a
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
            return .failed(TaskFailure(kind, r.error ?? "the task \(r.state) on a worker"))
        }
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

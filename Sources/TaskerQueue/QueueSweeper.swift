import Synchronization
import TaskerCore

/// A worker's upkeep of `tasker_jobs` and the queue's list, every second:
/// deletes the finished rows of runs that ended more than `retain` seconds
/// ago, in batches (outside a burst of jobs, or every 3 s: see
/// `QueueWorker`), vacuums each table when dead rows pile up, rebuilds its
/// indexes when they stay big over a near-empty table (neither while an
/// old snapshot keeps them from doing any good: `HeldSnapshots`), and every 30 s
/// tidies the list (`QueueStore.tidyList`), on a connection of its own
/// (claims and completions never wait behind it). One sweep at a time; a
/// sweep goes on until nothing is left or the worker stops.
final class QueueSweeper: Sendable {
    private let retain: Double
    private let db: PGThread
    private struct State {
        var sweeping = false
        var stopping = false
        /// Tables vacuumed in a burst since they were last shrunk: their
        /// empty pages wait for a quiet sweep.
        var pagesKept: Set<String> = []
        /// Other sessions' snapshots, as far as the upkeep goes.
        var held = HeldSnapshots()
    }
    private let state = Mutex(State())
    /// Rows deleted so far (tests, logs).
    let deleted = Atomic<Int>(0)
    /// Hears why a sweep failed (not an outage: that waits).
    private let report: @Sendable (String) -> Void

    init(url: String, retain: Double, report: @escaping @Sendable (String) -> Void) {
        self.retain = retain
        self.report = report
        // It waits for the server for ever, as the worker does; an outage
        // is the worker's to report.
        // Its statements may rightly take long (deleting a big run's rows,
        // VACUUM): they are waited for, not abandoned and sent again.
        db = PGThread(url: url, name: "tasker.sweep", outageLimit: nil, answerWait: nil)
    }

    /// Starts a sweep unless one is going on; `deleting` false: the vacuum
    /// and index checks only (dead rows pile up fastest while jobs stream).
    /// `inBurst`: jobs stream through this worker now, so a table is
    /// vacuumed only when its dead rows pile up, and keeps its pages: the
    /// shrinking waits for a quiet second. Giving pages back takes the
    /// table's exclusive lock, which every claim then waits behind (seen:
    /// a vacuum of the queue's list took 168 ms in the middle of a run of
    /// 2,000 short jobs, and the run's end waited behind it too).
    func sweep(deleting: Bool = true, inBurst: Bool = false) {
        let start = state.withLock { s in
            guard !s.sweeping, !s.stopping else { return false }
            s.sweeping = true
            return true
        }
        guard start else { return }
        let retain = self.retain
        db.submit({ [self] c, _ in
            defer { state.withLock { $0.sweeping = false } }
            while !state.withLock({ $0.stopping }) {
                let n = deleting ? try QueueStore.sweep(retain: retain, c) : 0
                deleted.add(n, ordering: .relaxed)
                if n < Retention.batch {
                    try QueueStore.forgetSweptRuns(retain: retain, c)
                    try tidyListIfDue(c)
                    let oldest = try QueueStore.oldestHeld(c)
                    let rebuilds = state.withLock { s in
                        s.held.look(oldest.any, bySessions: oldest.bySessions)
                        return s.held.mayRebuild
                    }
                    // each table's upkeep on its own: one that fails does not skip the other's
                    var failure: Error?
                    for kept in QueueStore.Kept.all {
                        do {
                            let (owed, may) = state.withLock { s in
                                (s.pagesKept.contains(kept.table), s.held.mayVacuum(kept.table, now: Monotonic.now()))
                            }
                            if may, try QueueStore.vacuumIfDead(kept, shrinking: !inBurst, pagesKept: owed, c) {
                                state.withLock { s in
                                    if inBurst { s.pagesKept.insert(kept.table) } else { s.pagesKept.remove(kept.table) }
                                    s.held.vacuumed(kept.table, at: Monotonic.now())
                                }
                            }
                            if !inBurst && rebuilds { try QueueStore.reindexIfBloated(kept, c) }
                        } catch {
                            failure = failure ?? error
                        }
                    }
                    if let failure { throw failure }
                    return
                }
            }
        }, failed: { [self] error in
            state.withLock { $0.sweeping = false }
            report("the upkeep of the queue's tables (deleting ended runs' rows, vacuum, index rebuild) failed: \(error.message)")
        })
    }

    /// When the queue's list was last tidied (on the sweeper's thread);
    /// at first, when the sweeper started: the tidy scans every job, and a
    /// worker that tidied at its start did so beside the jobs it had just
    /// started to claim (four workers started together: four scans of the
    /// whole table within their first second). What it repairs comes from
    /// a process of an earlier release, and waits an interval at most.
    private let listTidied = Mutex<UInt64>(Monotonic.now())

    private func tidyListIfDue(_ c: PGConnection) throws {
        let now = Monotonic.now()
        let due = listTidied.withLock { last in
            guard Double(now &- last) / 1e9 >= QueueStore.listTidyInterval else { return false }
            last = now
            return true
        }
        if due { try QueueStore.tidyList(c) }
    }

    /// Ends the sweep going on after its current batch, and the connection.
    func stop() {
        state.withLock { $0.stopping = true }
        // not waited for: a statement of its may wait for ever (a frozen
        // server, a rebuild behind a long transaction)
        db.stop(waiting: false)
    }
}

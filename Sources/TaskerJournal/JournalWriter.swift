import Foundation

/// Writes the journal on its own thread, in batches, in the order writes
/// were submitted (completion order, so a task never lands before its
/// dependencies). The run's thread only appends to a list under a lock.
/// A batch commits every 50 ms: a `kill -9` loses at most the last ones.
public final class JournalWriter {
    private let queue = WriteQueue()
    private let done = DispatchSemaphore(value: 0)
    static let interval = 0.05

    /// Opens the journal in `directory` (creating it and its tables, so
    /// that errors show here) and starts the thread, which keeps its own
    /// connection.
    public init(directory: String) throws {
        _ = try Journal.open(directory: directory)
        let queue = self.queue, done = self.done
        let thread = Thread {
            var failure: String?
            var statements: WriterStatements?
            do { statements = try WriterStatements(Journal.open(directory: directory)) } catch { failure = "\(error)" }
            var batch: [JournalWrite] = []
            while true {
                let closing = queue.take(into: &batch, waitingUpTo: JournalWriter.interval)
                if !batch.isEmpty && failure == nil {
                    do { try statements?.write(batch) } catch { failure = "\(error)" }
                }
                batch.removeAll(keepingCapacity: true)
                if closing { break }
            }
            queue.finish(failure)
            done.signal()
        }
        thread.name = "tasker.journal"
        thread.start()
    }

    public func submit(_ write: JournalWrite) { queue.append(write) }

    /// Writes what is left and stops the thread; returns the first write
    /// error, if any (the run goes on without the journal when it fails).
    @discardableResult
    public func close() -> String? {
        queue.close()
        done.wait()
        return queue.failure
    }
}

/// The writes waiting for the thread.
private final class WriteQueue: Sendable {
    private struct State {
        var pending: [JournalWrite] = []
        var closing = false
        var failure: String?
    }
    private let condition = NSCondition()
    // Guarded by `condition` (NSCondition is a lock the type system does not see).
    private nonisolated(unsafe) var state = State()

    func append(_ w: JournalWrite) {
        condition.lock()
        state.pending.append(w)
        condition.unlock()
    }

    func close() {
        condition.lock()
        state.closing = true
        condition.signal()
        condition.unlock()
    }

    /// Swaps the pending writes into `batch` (an empty array whose storage
    /// the appender reuses: two buffers go back and forth, so a long run
    /// does not allocate a batch's worth of memory every 50 ms); returns
    /// whether the writer is closing.
    func take(into batch: inout [JournalWrite], waitingUpTo seconds: Double) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        if !state.closing { _ = condition.wait(until: Date(timeIntervalSinceNow: seconds)) }
        swap(&batch, &state.pending)
        return state.closing
    }

    func finish(_ failure: String?) {
        condition.lock()
        state.failure = failure
        condition.unlock()
    }

    var failure: String? {
        condition.lock()
        defer { condition.unlock() }
        return state.failure
    }
}

/// The prepared statements of the writer's connection.
private final class WriterStatements {
    let db: SQLiteDatabase
    let insertRun: SQLiteStatement
    let upsertTask: SQLiteStatement
    let startTask: SQLiteStatement
    let endRun: SQLiteStatement
    let insertRequests: SQLiteStatement

    init(_ db: SQLiteDatabase) throws {
        self.db = db
        // It only appends: a small page cache keeps a long run's memory flat.
        try db.execute("PRAGMA cache_size = -256")
        insertRun = try db.prepare("""
            INSERT OR REPLACE INTO runs(id, pipeline, args, vars, started, pid, resumed_from)
            VALUES(?, ?, ?, ?, ?, ?, ?)
            """)
        upsertTask = try db.prepare("""
            INSERT OR REPLACE INTO tasks(run, id, identity, not_resumable, name, kind, tags, after, state,
                attempts, added, started, ended, held, reused, error, error_kind, value, attempt_log)
            VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        startTask = try db.prepare("""
            INSERT OR IGNORE INTO tasks(run, id, identity, name, kind, state, attempts, added, started, held, reused)
            VALUES(?, ?, ?, ?, 'task', 'running', 1, ?, ?, 0, 0)
            """)
        endRun = try db.prepare("UPDATE runs SET ended = ?, exit_code = ?, counts = ? WHERE id = ?")
        insertRequests = try db.prepare("""
            INSERT OR REPLACE INTO requests(run, host, requests, retries, failures) VALUES(?, ?, ?, ?, ?)
            """)
    }

    /// One transaction per batch. A task that started and finished in the
    /// same batch is written once.
    func write(_ batch: [JournalWrite]) throws {
        var finishedHere = Set<Int>()
        for w in batch { if case .taskFinished(_, let t) = w { finishedHere.insert(t.id) } }
        try db.execute("BEGIN IMMEDIATE")
        do {
            for w in batch { try write(w, skippingStartsOf: finishedHere) }
            try db.execute("COMMIT")
        } catch {
            try? db.execute("ROLLBACK")
            throw error
        }
    }

    private func write(_ w: JournalWrite, skippingStartsOf finished: Set<Int>) throws {
        switch w {
        case .runStarted(let r):
            insertRun.bindAll([.text(r.id), .text(r.pipeline), .text(JSONText.strings(r.args)),
                               .text(JSONText.map(r.vars)), .double(r.started), .int(r.pid), .text(r.resumedFrom)])
            try insertRun.run()
        case .taskStarted(let run, let id, let identity, let name, let added, let started):
            guard !finished.contains(id) else { return }
            startTask.bindAll([.text(run), .int(id), .text(identity), .text(name), .double(added), .double(started)])
            try startTask.run()
        case .taskFinished(let run, let t):
            let s = upsertTask
            s.bind(1, run)
            s.bind(2, t.id)
            s.bind(3, t.identity)
            s.bind(4, t.notResumable)
            s.bind(5, t.name)
            s.bind(6, t.kind)
            s.bind(7, t.tags.isEmpty ? nil : JSONText.strings(t.tags))
            s.bind(8, t.after.isEmpty ? nil : JSONText.ints(t.after))
            s.bind(9, t.state)
            s.bind(10, t.attempts)
            s.bind(11, t.added)
            s.bind(12, t.started)
            s.bind(13, t.ended)
            s.bind(14, t.held)
            s.bind(15, t.reused ? 1 : 0)
            s.bind(16, t.error)
            s.bind(17, t.errorKind)
            s.bind(18, t.value)
            s.bind(19, t.attemptLog.isEmpty ? nil : JSONText.attempts(t.attemptLog))
            try s.run()
        case .runEnded(let id, let ended, let code, let counts, let requests):
            endRun.bindAll([.double(ended), .int(code), .text(JSONText.counts(counts)), .text(id)])
            try endRun.run()
            for h in requests {
                insertRequests.bindAll([.text(id), .text(h.host), .int(h.requests), .int(h.retries), .int(h.failures)])
                try insertRequests.run()
            }
        }
    }
}

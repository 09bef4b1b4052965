import CSQLite

/// The journal in a SQLite file (see `Journal` for where and how it opens).
public final class SQLiteJournalStore: JournalStore {
    let db: SQLiteDatabase
    private var insertLog: SQLiteStatement?
    /// Pages in the WAL after this connection's last commit, when it
    /// checkpoints itself (a run's writer); nil otherwise.
    private let walPages: UnsafeMutablePointer<Int32>?
    public let takesQuickRuns: Bool

    /// Opens (and unless `create` is false, creates) the journal in `directory`.
    /// `busyTimeout`: ms one statement waits for another process's lock
    /// (a writer that tries again itself passes a short one).
    /// `checkpointsItself`: a run's writer, which folds the WAL into the
    /// file in `maintain` (while its run goes on) instead of in the commit
    /// that passes 1,000 pages: that one was often the run's last, and the
    /// run's end waited for its syncs (5-15 ms).
    public init(directory: String, create: Bool = true, busyTimeout: Int32 = 5000, checkpointsItself: Bool = false) throws {
        self.busyTimeout = busyTimeout
        db = try Journal.open(directory: directory, create: create, busyTimeout: busyTimeout,
                              attempts: busyTimeout < 1000 ? 3 : 20)
        takesQuickRuns = ((try? JournalSchema.storedVersion(db)) ?? 0) >= JournalSchema.quickRunsFrom
        if checkpointsItself {
            // A WAL grown while other runs kept it from being rewound (its
            // frames still read) is cut back to this when it is.
            try? db.execute("PRAGMA journal_size_limit = \(Self.walSizeLimit)")
            let pages = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
            pages.initialize(to: 0)
            tasker_sqlite_count_wal_pages(db.handle, pages)
            walPages = pages
        } else {
            walPages = nil
        }
    }

    deinit {
        // no commit calls the hook any more (the connection closes after
        // this body, without a checkpoint)
        if let walPages {
            sqlite3_wal_hook(db.handle, nil, nil)
            walPages.deallocate()
        }
    }

    private let busyTimeout: Int32

    /// The WAL's size past which `maintain` and a run's end fold it in
    /// (SQLite's own default).
    static let checkpointPages: Int32 = 1_000
    static let walSizeLimit = 16 << 20

    /// Folds what it can of the WAL into the file, waiting for nobody: the
    /// next commit of this connection writes the WAL from its start again
    /// when all of it is in and nobody reads it.
    public func maintain() {
        guard let walPages, walPages.pointee >= Self.checkpointPages else { return }
        try? db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        walPages.pointee = 0
    }

    /// At a run's end, a WAL past `checkpointPages` is folded in and
    /// emptied, unless another connection reads it (not waited for: the
    /// last run to end empties it). A folded-in WAL is only written from
    /// its start again by the connection that folded it: the next process
    /// to open the journal rebuilds the WAL's index and takes every frame
    /// for new, so a series of short runs grew it without end.
    private func emptyWAL() {
        guard let walPages, walPages.pointee >= Self.checkpointPages else { return }
        sqlite3_busy_timeout(db.handle, 0)
        try? db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        sqlite3_busy_timeout(db.handle, busyTimeout)
        walPages.pointee = 0
    }

    private static let runColumns = "id, pipeline, args, vars, started, ended, exit_code, counts, pid, resumed_from"

    public func insert(_ r: JournalRun) throws {
        let s = try db.prepare("""
            INSERT OR REPLACE INTO runs(id, pipeline, args, vars, started, pid, resumed_from)
            VALUES(?, ?, ?, ?, ?, ?, ?)
            """)
        s.bindAll([.text(r.id), .text(r.pipeline), .text(RunColumns.args(r.args)),
                   .text(RunColumns.vars(r.vars)), .double(r.started), .int(r.pid), .text(r.resumedFrom)])
        try s.run()
        // The writer only appends: a bounded page cache keeps a long run's
        // memory flat. 2 MiB: at 256 KiB the pages of each batch were read
        // back from the WAL (24 MB read for 6 MB written in a 200,000-task
        // run; 5 MB at this size, 4 MB of it the checkpoints').
        try db.execute("PRAGMA cache_size = -2048")
    }

    public func lastLogSeq(run: String) throws -> Int { try logSeq(run: run) }

    private func logSeq(run: String) throws(SQLiteError) -> Int {
        let last = try db.prepare("SELECT COALESCE(MAX(seq), 0) FROM task_log WHERE run = ?")
        last.bind(1, run)
        return try last.next() ? last.int(0) : 0
    }

    public func appendLog(run: String, seq: Int, data: [UInt8]) throws { try insertLogRow(run: run, seq: seq, data: data) }

    /// In one transaction, which takes the write lock at its start (the
    /// writer hands over at most 8 MiB at a time, so another run's writer
    /// finds the lock free between them: see `PendingRows.write`).
    public func appendLogs(run: String, seq: Int, rows: [[UInt8]]) throws {
        guard rows.count > 1 else {
            if let row = rows.first { try insertLogRow(run: run, seq: seq, data: row) }
            return
        }
        try db.transaction { () throws(SQLiteError) in
            for (k, row) in rows.enumerated() { try insertLogRow(run: run, seq: seq + k, data: row) }
        }
    }

    private func insertLogRow(run: String, seq: Int, data: [UInt8]) throws(SQLiteError) {
        let s: SQLiteStatement
        if let insertLog {
            s = insertLog
        } else {
            s = try db.prepare("INSERT INTO task_log(run, seq, data) VALUES(?, ?, ?)")
            insertLog = s
        }
        s.bind(1, run)
        s.bind(2, seq)
        try s.run(bindingInPlace: data, at: 3)
    }

    public func update(run: String, args: [String], vars: [String: String]) throws {
        // The row's first version held a secret in clear: its bytes are
        // overwritten where it leaves them, and the log file is emptied at
        // the run's end (`end`), so no copy outlives the run.
        try db.execute("PRAGMA secure_delete = ON")
        defer { try? db.execute("PRAGMA secure_delete = OFF") }
        let s = try db.prepare("UPDATE runs SET args = ?, vars = ? WHERE id = ?")
        s.bindAll([.text(RunColumns.args(args)), .text(RunColumns.vars(vars)), .text(run)])
        try s.run()
        rewroteCommandLine = true
    }

    /// `update` masked the recorded command line.
    private var rewroteCommandLine = false

    public func end(run: String, ended: Double, exitCode: Int, counts: [String: Int],
                    requests: [JournalHostRequests]) throws {
        try db.transaction { () throws(SQLiteError) in
            let s = try db.prepare("UPDATE runs SET ended = ?, exit_code = ?, counts = ? WHERE id = ?")
            s.bindAll([.double(ended), .int(exitCode), .text(RunColumns.counts(counts)), .text(run)])
            try s.run()
            let r = try db.prepare("INSERT OR REPLACE INTO requests(run, host, requests, retries, failures) VALUES(?, ?, ?, ?, ?)")
            for h in requests {
                r.bindAll([.text(run), .text(h.host), .int(h.requests), .int(h.retries), .int(h.failures)])
                try r.run()
            }
        }
        // the WAL still holds the row as first written: into the file
        // (its masked version) and the log emptied
        if rewroteCommandLine {
            try? db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        } else {
            emptyWAL()
        }
    }

    public func runs(id: String?, pipeline: String?, limit: Int?) throws -> [JournalRun] {
        var sql = "SELECT \(Self.runColumns) FROM runs"
        if id != nil {
            sql += " WHERE id = ?"
        } else if pipeline != nil {
            sql += " WHERE pipeline = ?"
        }
        sql += " ORDER BY id DESC"
        if let limit { sql += " LIMIT \(max(0, limit))" }
        let s = try db.prepare(sql)
        if let key = id ?? pipeline { s.bind(1, key) }
        var out: [JournalRun] = []
        while try s.next() {
            var r = JournalRun(id: s.text(0) ?? "", pipeline: s.text(1) ?? "", args: RunColumns.args(from: s.text(2)) ?? [],
                               vars: RunColumns.vars(from: s.text(3)) ?? [:], started: s.double(4), pid: s.int(8),
                               resumedFrom: s.text(9))
            r.ended = s.optionalDouble(5)
            r.exitCode = s.optionalInt(6)
            r.counts = RunColumns.counts(from: s.text(7)) ?? [:]
            out.append(r)
        }
        return out
    }

    public func logRows(run: String, _ each: (UnsafeRawBufferPointer) -> Void) throws {
        let s = try db.prepare("SELECT data FROM task_log WHERE run = ? ORDER BY seq")
        s.bind(1, run)
        while try s.next() { s.withBlob(0, each) }
    }

    public func requests(run: String) throws -> [JournalHostRequests] {
        let s = try db.prepare("SELECT host, requests, retries, failures FROM requests WHERE run = ? ORDER BY host")
        s.bind(1, run)
        var out: [JournalHostRequests] = []
        while try s.next() {
            out.append(JournalHostRequests(host: s.text(0) ?? "", requests: s.int(1), retries: s.int(2), failures: s.int(3)))
        }
        return out
    }

    public func runIDs(skippingNewest keep: Int) throws -> [String] {
        let old = try db.prepare("SELECT id FROM runs ORDER BY id DESC LIMIT -1 OFFSET ?")
        old.bind(1, max(0, keep))
        var ids: [String] = []
        while try old.next() { if let id = old.text(0) { ids.append(id) } }
        return ids
    }

    public func delete(runs ids: [String]) throws {
        guard !ids.isEmpty else { return }
        try db.transaction { () throws(SQLiteError) in
            for table in ["task_log", "requests", "runs"] {
                let d = try db.prepare("DELETE FROM \(table) WHERE \(table == "runs" ? "id" : "run") = ?")
                for id in ids {
                    d.bind(1, id)
                    try d.run()
                }
            }
        }
        try? db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    }

    public func unendedRuns() throws -> [UnendedRun] {
        let open = try db.prepare("SELECT id, pid, started FROM runs WHERE ended IS NULL")
        var out: [UnendedRun] = []
        while try open.next() {
            if let id = open.text(0) { out.append(UnendedRun(id: id, pid: open.int(1), host: nil, started: open.double(2))) }
        }
        return out
    }

    public func settle(run: String, lost: [UInt8]?, ended: Double, counts: [String: Int]) throws {
        try db.transaction { () throws(SQLiteError) in
            let still = try db.prepare("SELECT 1 FROM runs WHERE id = ? AND ended IS NULL")
            still.bind(1, run)
            guard try still.next() else { return }
            still.reset()
            if let lost { try insertLogRow(run: run, seq: logSeq(run: run) + 1, data: lost) }
            let end = try db.prepare("UPDATE runs SET ended = ?, exit_code = -1, counts = ? WHERE id = ?")
            end.bindAll([.double(ended), .text(RunColumns.counts(counts)), .text(run)])
            try end.run()
        }
    }
}

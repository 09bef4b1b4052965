import Foundation

/// Reads the journal for history (`tasker runs`, `show`, `report`) and
/// resume. Opening it also settles runs whose process died: their
/// unfinished tasks become failed attempts of kind `lost`.
public final class JournalReader {
    let db: SQLiteDatabase

    public init(directory: String, create: Bool = false) throws {
        db = try Journal.open(directory: directory, create: create)
        try settleDeadRuns()
    }

    /// Runs newest first; of one pipeline when given.
    public func runs(pipeline: String? = nil, limit: Int? = nil) throws -> [JournalRun] {
        var sql = "SELECT id, pipeline, args, vars, started, ended, exit_code, counts, pid, resumed_from FROM runs"
        if pipeline != nil { sql += " WHERE pipeline = ?" }
        sql += " ORDER BY id DESC"
        if let limit { sql += " LIMIT \(max(0, limit))" }
        let s = try db.prepare(sql)
        if let pipeline { s.bind(1, pipeline) }
        var out: [JournalRun] = []
        while try s.next() { out.append(Self.run(from: s)) }
        return out
    }

    /// The run `id`, or for `last` the newest run (of `pipeline` when given).
    public func run(_ id: String, pipeline: String? = nil) throws -> JournalRun? {
        if id == "last" { return try runs(pipeline: pipeline, limit: 1).first }
        let s = try db.prepare("""
            SELECT id, pipeline, args, vars, started, ended, exit_code, counts, pid, resumed_from
            FROM runs WHERE id = ?
            """)
        s.bind(1, id)
        return try s.next() ? Self.run(from: s) : nil
    }

    /// The run's tasks in add order.
    public func tasks(of run: String) throws -> [JournalTask] {
        let s = try db.prepare("""
            SELECT id, identity, not_resumable, name, kind, tags, after, state, attempts, added, started,
                   ended, held, reused, error, error_kind, value, attempt_log
            FROM tasks WHERE run = ? ORDER BY id
            """)
        s.bind(1, run)
        var out: [JournalTask] = []
        while try s.next() {
            var t = JournalTask(id: s.int(0), name: s.text(3) ?? "", state: s.text(7) ?? "failed")
            t.identity = s.text(1)
            t.notResumable = s.text(2)
            t.kind = s.text(4) ?? "task"
            t.tags = Self.decode(s.text(5)) ?? []
            t.after = Self.decode(s.text(6)) ?? []
            t.attempts = s.int(8)
            t.added = s.double(9)
            t.started = s.optionalDouble(10)
            t.ended = s.optionalDouble(11)
            t.held = s.double(12)
            t.reused = s.int(13) != 0
            t.error = s.text(14)
            t.errorKind = s.text(15)
            t.value = s.text(16)
            if let log = s.text(17), let list = Self.decode(log) as [[String: Any]]? {
                t.attemptLog = list.map { a in
                    JournalAttempt(start: a["start"] as? Double ?? 0, end: a["end"] as? Double ?? 0,
                                   error: a["error"] as? String, kind: a["kind"] as? String)
                }
            }
            out.append(t)
        }
        return out
    }

    public func requests(of run: String) throws -> [JournalHostRequests] {
        let s = try db.prepare("SELECT host, requests, retries, failures FROM requests WHERE run = ? ORDER BY host")
        s.bind(1, run)
        var out: [JournalHostRequests] = []
        while try s.next() {
            out.append(JournalHostRequests(host: s.text(0) ?? "", requests: s.int(1), retries: s.int(2), failures: s.int(3)))
        }
        return out
    }

    /// What a resume of `run` may reuse: identity → stored values (JSON).
    public func reusable(from run: String) throws -> [String: String] {
        let s = try db.prepare("""
            SELECT identity, value FROM tasks
            WHERE run = ? AND state = 'succeeded' AND identity IS NOT NULL AND not_resumable IS NULL
            """)
        s.bind(1, run)
        var out: [String: String] = [:]
        while try s.next() {
            if let identity = s.text(0) { out[identity] = s.text(1) ?? "[]" }
        }
        return out
    }

    /// Deletes all but the newest `keep` runs; returns how many went.
    @discardableResult
    public func prune(keep: Int) throws -> Int {
        let old = try db.prepare("SELECT id FROM runs ORDER BY id DESC LIMIT -1 OFFSET ?")
        old.bind(1, max(0, keep))
        var ids: [String] = []
        while try old.next() { if let id = old.text(0) { ids.append(id) } }
        guard !ids.isEmpty else { return 0 }
        try db.execute("BEGIN IMMEDIATE")
        do {
            for table in ["tasks", "requests"] {
                let d = try db.prepare("DELETE FROM \(table) WHERE run = ?")
                for id in ids { d.bind(1, id); try d.run() }
            }
            let d = try db.prepare("DELETE FROM runs WHERE id = ?")
            for id in ids { d.bind(1, id); try d.run() }
            try db.execute("COMMIT")
        } catch {
            try? db.execute("ROLLBACK")
            throw error
        }
        try? db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return ids.count
    }

    // MARK: runs whose process died

    /// A run without an end whose process is gone died (killed, power
    /// lost): its tasks still `running` become failed attempts of kind
    /// `lost`, and the run gets an end (its last recorded moment).
    func settleDeadRuns() throws {
        let open = try db.prepare("SELECT id, pid, started FROM runs WHERE ended IS NULL")
        var dead: [(id: String, started: Double)] = []
        while try open.next() {
            let pid = open.int(1)
            if !Self.isTasker(pid: pid), let id = open.text(0) { dead.append((id, open.double(2))) }
        }
        guard !dead.isEmpty else { return }
        try db.execute("BEGIN IMMEDIATE")
        do {
            let lose = try db.prepare("""
                UPDATE tasks SET state = 'failed', error_kind = 'lost', ended = COALESCE(ended, started),
                    error = 'lost: the run ended while the task was running'
                WHERE run = ? AND state NOT IN ('succeeded', 'failed', 'cancelled')
                """)
            let last = try db.prepare("SELECT MAX(COALESCE(ended, started, added)) FROM tasks WHERE run = ?")
            let end = try db.prepare("UPDATE runs SET ended = ?, exit_code = -1, counts = ? WHERE id = ? AND ended IS NULL")
            for run in dead {
                lose.bind(1, run.id)
                try lose.run()
                last.bind(1, run.id)
                var offset = 0.0
                if try last.next() { offset = last.optionalDouble(0) ?? 0; last.reset() }
                end.bindAll([.double(run.started + offset), .text(JSONText.counts(try counts(of: run.id))), .text(run.id)])
                try end.run()
            }
            try db.execute("COMMIT")
        } catch {
            try? db.execute("ROLLBACK")
            throw error
        }
    }

    private func counts(of run: String) throws -> [String: Int] {
        let s = try db.prepare("SELECT state, reused, COUNT(*) FROM tasks WHERE run = ? AND kind = 'task' GROUP BY state, reused")
        s.bind(1, run)
        var out: [String: Int] = [:]
        while try s.next() {
            out[s.text(0) ?? "?", default: 0] += s.int(2)
            if s.int(1) != 0 { out["reused", default: 0] += s.int(2) }
        }
        return out
    }

    /// Whether `pid` is a live tasker process (a recycled pid is not).
    static func isTasker(pid: Int) -> Bool {
        guard pid > 0, kill(pid_t(pid), 0) == 0 || errno == EPERM else { return false }
        guard let cmd = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8) else { return true }
        return cmd.hasPrefix("tasker")
    }

    // MARK: decoding

    static func run(from s: SQLiteStatement) -> JournalRun {
        var r = JournalRun(id: s.text(0) ?? "", pipeline: s.text(1) ?? "", args: decode(s.text(2)) ?? [],
                           vars: decode(s.text(3)) ?? [:], started: s.double(4), pid: s.int(8),
                           resumedFrom: s.text(9))
        r.ended = s.optionalDouble(5)
        r.exitCode = s.optionalInt(6)
        r.counts = decode(s.text(7)) ?? [:]
        return r
    }

    static func decode<T>(_ text: String?) -> T? {
        guard let text, let data = text.data(using: .utf8) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? T
    }
}

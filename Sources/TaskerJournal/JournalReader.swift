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

    /// The run's tasks in add order, each as last recorded.
    public func tasks(of run: String) throws -> [JournalTask] {
        try entries(of: run).map(\.task)
    }

    /// The latest entry of each task of the run, in id order.
    func entries(of run: String) throws -> [JournalEntry] {
        let s = try db.prepare("SELECT data FROM task_log WHERE run = ? ORDER BY seq")
        s.bind(1, run)
        var latest: [Int: JournalEntry] = [:]
        while try s.next() {
            guard let list = s.withBlob(0, { JournalCodec.decode($0) }) else { continue }
            // The latest entry wins, except that a task seen running never
            // undoes a final state (the two may share a batch in any order).
            for e in list where e.state != .running || latest[e.id].map({ $0.state == .running }) ?? true {
                latest[e.id] = e
            }
        }
        return latest.values.sorted { $0.id < $1.id }
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
        var out: [String: String] = [:]
        for e in try entries(of: run) where e.state == .succeeded && e.notResumable == nil {
            if let identity = e.identity.text { out[identity] = e.value ?? "[]" }
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
            for table in ["task_log", "requests"] {
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
        for run in dead {
            var entries = try self.entries(of: run.id)
            var lost: [JournalEntry] = []
            for i in entries.indices where entries[i].state == .running {
                entries[i].state = .failed
                entries[i].errorKind = "lost"
                entries[i].error = "lost: the run ended while the task was running"
                entries[i].ended = entries[i].ended ?? entries[i].started
                lost.append(entries[i])
            }
            var counts: [String: Int] = [:]
            for e in entries where e.kind == .task {
                counts[e.state.name, default: 0] += 1
                if e.reused { counts["reused", default: 0] += 1 }
            }
            let last = entries.map { $0.ended ?? $0.started ?? $0.added }.max() ?? 0
            try db.execute("BEGIN IMMEDIATE")
            do {
                let still = try db.prepare("SELECT 1 FROM runs WHERE id = ? AND ended IS NULL")
                still.bind(1, run.id)
                if try still.next() {
                    still.reset()
                    if !lost.isEmpty {
                        let log = try TaskLog(db, run: run.id)
                        var blob: [UInt8] = []
                        JournalCodec.encode(lost, into: &blob)
                        try log.append(encoded: blob)
                    }
                    let end = try db.prepare("UPDATE runs SET ended = ?, exit_code = -1, counts = ? WHERE id = ?")
                    end.bindAll([.double(run.started + last), .text(JSONText.counts(counts)), .text(run.id)])
                    try end.run()
                }
                try db.execute("COMMIT")
            } catch {
                try? db.execute("ROLLBACK")
                throw error
            }
        }
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

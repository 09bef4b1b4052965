import Foundation
import TaskerJournal

/// The run journal in the PostgreSQL database of `--store`: the same rows
/// as the file journal (`tasker_runs`, `tasker_task_log`, `tasker_requests`),
/// so history, resume and the report work from any machine that reaches
/// the database. One connection, on the thread that uses the store. When
/// the server goes away (a restart, a stop) each call waits for it
/// (reconnecting with backoff) and is tried again, up to the outage limit:
/// every write here is safe to repeat.
public final class PGJournalStore: JournalStore {
    /// The run's end waits for a server that is away for what is left of
    /// the outage limit: an outage that began at the end is ridden out as
    /// long as the run would ride it out, one that already failed the run
    /// (away past the limit) is not waited for again.
    public var endWait: Double { max(0, StoreOutage.limit - session.downFor) }

    private let session: PGSession
    private let host: String

    public init(url: String) throws {
        session = PGSession(url: url, limit: StoreOutage.limit)
        // Past an outage's limit the run failed, but its journal is still
        // written if the server is back by the end (see `endWait`).
        session.triesAfterGivingUp = true
        host = JournalReader.hostName
        // A server that is not there at the start fails at once; one
        // restarting just then is waited for.
        try session.run(patient: false, pause: Self.sleep) { c, _ in try QueueSchema.ensure(c) }
    }

    /// Runs `body` on a live connection, waiting for the server while it
    /// is away (`body` may run twice).
    @discardableResult
    private func use<T>(_ body: (PGConnection) throws -> T) throws -> T {
        try session.run(pause: Self.sleep) { c, _ in try body(c) }
    }

    private static func sleep(_ seconds: Double) -> Bool {
        Thread.sleep(forTimeInterval: seconds)
        return true
    }

    private static let runColumns = "id, pipeline, args, vars, started, ended, exit_code, counts, pid, resumed_from"

    public func insert(_ r: JournalRun) throws {
        try use { db in try db.query("""
            INSERT INTO tasker_runs (id, pipeline, args, vars, started, pid, host, resumed_from)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
            ON CONFLICT (id) DO UPDATE SET pipeline = $2, args = $3, vars = $4, started = $5, pid = $6, host = $7,
              resumed_from = $8, ended = NULL, exit_code = NULL, counts = NULL
            """, [r.id, r.pipeline, RunColumns.args(r.args), RunColumns.vars(r.vars), String(r.started), String(r.pid),
                  host, r.resumedFrom]) }
    }

    public func lastLogSeq(run: String) throws -> Int {
        try use { db in try Self.lastLogSeq(run: run, db) }
    }

    private static func lastLogSeq(run: String, _ db: PGConnection) throws -> Int {
        let rows = try db.query("SELECT COALESCE(MAX(seq), 0) FROM tasker_task_log WHERE run = $1", [run])
        return try rows.first?.optionalInt(0) ?? 0
    }

    public func appendLog(run: String, seq: Int, data: [UInt8]) throws {
        try use { db in try Self.appendLog(run: run, seq: seq, data: data, db) }
    }

    private static func appendLog(run: String, seq: Int, data: [UInt8], _ db: PGConnection) throws {
        // Written again after a reconnect, a row may be there already.
        try db.query("INSERT INTO tasker_task_log (run, seq, data) VALUES ($1, $2, $3) ON CONFLICT (run, seq) DO NOTHING",
                     [run, String(seq), hex(data)])
    }

    public func update(run: String, args: [String], vars: [String: String]) throws {
        try use { db in
            try db.query("UPDATE tasker_runs SET args = $1, vars = $2 WHERE id = $3",
                         [RunColumns.args(args), RunColumns.vars(vars), run])
        }
    }

    public func end(run: String, ended: Double, exitCode: Int, counts: [String: Int],
                    requests: [JournalHostRequests]) throws {
        try use { db in try db.transaction {
            try db.query("UPDATE tasker_runs SET ended = $1, exit_code = $2, counts = $3 WHERE id = $4",
                         [String(ended), String(exitCode), RunColumns.counts(counts), run])
            for h in requests {
                try db.query("""
                    INSERT INTO tasker_requests (run, host, requests, retries, failures) VALUES ($1, $2, $3, $4, $5)
                    ON CONFLICT (run, host) DO UPDATE SET requests = $3, retries = $4, failures = $5
                    """, [run, h.host, String(h.requests), String(h.retries), String(h.failures)])
            }
        } }
    }

    public func runs(id: String?, pipeline: String?, limit: Int?) throws -> [JournalRun] {
        var sql = "SELECT \(Self.runColumns) FROM tasker_runs"
        var params: [String?] = []
        if let key = id ?? pipeline {
            sql += id != nil ? " WHERE id = $1" : " WHERE pipeline = $1"
            params.append(key)
        }
        sql += " ORDER BY id DESC"
        if let limit {  // a parameter: the statement's text must not vary (it is prepared)
            params.append(String(max(0, limit)))
            sql += " LIMIT $\(params.count)::bigint"
        }
        return try use { db in try db.query(sql, params) }.rows.map { v throws(PGError) in
            var r = JournalRun(id: try v.text(0), pipeline: try v.text(1), args: RunColumns.args(from: v.optionalText(2)) ?? [],
                               vars: RunColumns.vars(from: v.optionalText(3)) ?? [:], started: try v.double(4),
                               pid: try v.optionalInt(8) ?? 0, resumedFrom: v.optionalText(9))
            r.ended = try v.optionalDouble(5)
            r.exitCode = try v.optionalInt(6)
            r.counts = RunColumns.counts(from: v.optionalText(7)) ?? [:]
            return r
        }
    }

    public func logRows(run: String, _ each: (UnsafeRawBufferPointer) -> Void) throws {
        let rows = try use { db in try db.query("SELECT data FROM tasker_task_log WHERE run = $1 ORDER BY seq", [run]) }
        for row in rows.rows {
            guard let text = row.optionalText(0), let bytes = Self.unhex(text) else { continue }
            bytes.withUnsafeBytes(each)
        }
    }

    public func requests(run: String) throws -> [JournalHostRequests] {
        try use { db in try db.query("SELECT host, requests, retries, failures FROM tasker_requests WHERE run = $1 ORDER BY host", [run]) }
            .rows.map { v throws(PGError) in
                JournalHostRequests(host: try v.text(0), requests: try v.int(1), retries: try v.int(2), failures: try v.int(3))
            }
    }

    public func runIDs(skippingNewest keep: Int) throws -> [String] {
        try use { db in try db.query("SELECT id FROM tasker_runs ORDER BY id DESC OFFSET $1", [String(max(0, keep))]) }
            .firstColumn
    }

    /// Also the queue's rows of those runs: all that is recorded of them.
    public func delete(runs ids: [String]) throws {
        guard !ids.isEmpty else { return }
        let list = PGArray.text(ids)
        try use { db in try db.transaction {
            for (table, column) in [("tasker_task_log", "run"), ("tasker_requests", "run"), ("tasker_jobs", "run"),
                                    ("tasker_coordinators", "run"), ("tasker_runs", "id")] {
                try db.query("DELETE FROM \(table) WHERE \(column) = ANY($1::text[])", [list])
            }
        } }
    }

    public func unendedRuns() throws -> [UnendedRun] {
        try use { db in try db.query("SELECT id, pid, host, started FROM tasker_runs WHERE ended IS NULL") }.rows.map { v throws(PGError) in
            UnendedRun(id: try v.text(0), pid: try v.int(1), host: v.optionalText(2), started: try v.double(3))
        }
    }

    public func settle(run: String, lost: [UInt8]?, ended: Double, counts: [String: Int]) throws {
        try use { db in try db.transaction {
            let open = try db.query("SELECT 1 FROM tasker_runs WHERE id = $1 AND ended IS NULL FOR UPDATE", [run])
            guard open.count > 0 else { return }
            if let lost { try Self.appendLog(run: run, seq: Self.lastLogSeq(run: run, db) + 1, data: lost, db) }
            try db.query("UPDATE tasker_runs SET ended = $1, exit_code = -1, counts = $2 WHERE id = $3",
                         [String(ended), RunColumns.counts(counts), run])
        } }
    }

    // MARK: bytea as text

    private static let digits = Array("0123456789abcdef".utf8)

    /// `\x` and two hex digits a byte: bytea's text input.
    static func hex(_ bytes: [UInt8]) -> String {
        var out = [UInt8](repeating: 0, count: 2 + 2 * bytes.count)
        out[0] = UInt8(ascii: "\\")
        out[1] = UInt8(ascii: "x")
        for (i, b) in bytes.enumerated() {
            out[2 + 2 * i] = digits[Int(b >> 4)]
            out[3 + 2 * i] = digits[Int(b & 15)]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// bytea's text output (hex format) back to bytes.
    static func unhex(_ text: String) -> [UInt8]? {
        let u = Array(text.utf8)
        guard u.count >= 2, u[0] == UInt8(ascii: "\\"), u[1] == UInt8(ascii: "x"), u.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: c - 48
            case 97...102: c - 87
            case 65...70: c - 55
            default: nil
            }
        }
        var out = [UInt8]()
        out.reserveCapacity((u.count - 2) / 2)
        var i = 2
        while i < u.count {
            guard let hi = nibble(u[i]), let lo = nibble(u[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }
}

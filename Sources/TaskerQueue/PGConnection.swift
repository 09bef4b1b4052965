import CPostgres
import Foundation
import TaskerCore
#if canImport(Glibc)
import Glibc
#endif

/// A PostgreSQL error: the server's message (or libpq's) and its SQLSTATE.
public struct PGError: Error, CustomStringConvertible {
    public let message: String
    public let sqlState: String?
    public var description: String { message }
}

/// One blocking libpq connection: a thin typed layer (connect, run with
/// text parameters, read text results, LISTEN notifications). Used by one
/// thread at a time, its owner (`PGThread`): libpq blocks.
final class PGConnection {
    private let conn: OpaquePointer

    /// How long a statement's answer is waited for (see
    /// `defaultAnswerWait`; nil: for ever).
    fileprivate(set) var answerWait: Double?

    /// A connection to `url`: one opened ahead for it if any is left (see
    /// `PGConnectionsAhead`), else a new one.
    static func open(url: String, answerWait: Double? = PGConnection.defaultAnswerWait) throws -> PGConnection {
        // One the server closed since (stopped or restarted meanwhile) is
        // not taken: its first statement would fail as an outage, where a
        // server down at the start is a plain connection error.
        if let ahead = PGConnectionsAhead.take(url: url), case let c = try ahead.get(), !c.closedByServer {
            c.answerWait = answerWait
            return c
        }
        return try PGConnection(url: url, answerWait: answerWait)
    }

    /// Whether the server has closed this idle connection, or said why it
    /// will (a shutdown's FATAL): anything to read on it, which nothing
    /// was asked for, or the socket hung up.
    var closedByServer: Bool {
        var p = pollfd(fd: PQsocket(conn), events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) != 0
    }

    /// Connects to `url` (`postgres://user@host:port/db?...`).
    init(url: String, answerWait: Double? = PGConnection.defaultAnswerWait) throws {
        self.answerWait = answerWait
        // libpq's parse errors repeat the string, password and all.
        do { try StoreURL.check(url) } catch { throw PGError(message: error.description, sqlState: nil) }
        // libpq loads at the first connection, not at every start.
        var err = [CChar](repeating: 0, count: 512)
        guard tasker_pq_load(&err, err.count) == 0 else {
            let why = String(decoding: err.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw PGError(message: "--store needs libpq (Debian: libpq5): \(why)", sqlState: nil)
        }
        guard let c = Self.connect(url) else { throw PGError(message: "out of memory", sqlState: nil) }
        guard PQstatus(c) == CONNECTION_OK else {
            let message = StoreURL.redact(Self.trimmed(String(cString: PQerrorMessage(c))), url: url)
            PQfinish(c)
            throw PGError(message: "cannot connect to PostgreSQL: \(message)", sqlState: Self.connectState(message))
        }
        conn = c
        // Notices ("relation already exists, skipping") are not for users.
        PQsetNoticeProcessor(c, { _, _ in }, nil)
        // Sends and waits go through poll(2) with a deadline (`answer`).
        PQsetnonblocking(c, 1)
    }

    deinit { PQfinish(conn) }

    /// What tasker sets unless the URL (`?connect_timeout=30`) or libpq's
    /// environment (`PGCONNECT_TIMEOUT`) says otherwise: a server that
    /// accepts the connection and never answers (hung, or a pooler whose
    /// server is down) fails the attempt after 5 s instead of blocking for
    /// ever, so an outage's limit holds; and a connection to a host that
    /// vanished is found dead by TCP within about half a minute, not the
    /// system's two hours (`tcp_user_timeout`: libpq 12 and later).
    static var defaults: [(key: String, value: String)] {
        var d: [(key: String, value: String)] = []
        if getenv("PGCONNECT_TIMEOUT") == nil { d.append(("connect_timeout", "5")) }
        d += [("keepalives", "1"), ("keepalives_idle", "10"), ("keepalives_interval", "5"), ("keepalives_count", "3")]
        if PQlibVersion() >= 120000 { d.append(("tcp_user_timeout", "30000")) }
        return d
    }

    /// `PQconnectdbParams` with `defaults` first and the URL last: libpq
    /// applies keywords in order, so what the URL sets wins.
    private static func connect(_ url: String) -> OpaquePointer? {
        let pairs = defaults + [("dbname", url)]
        let keys = pairs.map { strdup($0.key) }
        let values = pairs.map { strdup($0.value) }
        defer {
            keys.forEach { free($0) }
            values.forEach { free($0) }
        }
        let k = keys.map { UnsafePointer($0) } + [nil]
        let v = values.map { UnsafePointer($0) } + [nil]
        return PQconnectdbParams(k, v, 1)
    }

    /// libpq gives no SQLSTATE for a failed connection. A server that is
    /// there but shutting down or starting up (a restart) says so in words
    /// (in English unless `lc_messages` says otherwise), or closes the new
    /// connection: 57P03, cannot_connect_now, a passing state. Anything
    /// else (refused, no such host, a wrong password) is 08001.
    private static func connectState(_ message: String) -> String {
        let passing = ["the database system is shutting down", "the database system is starting up",
                       "the database system is in recovery mode", "the database system is not yet accepting connections",
                       "server closed the connection unexpectedly"]
        return passing.contains { message.contains($0) } ? "57P03" : "08001"
    }

    /// The socket, for waiting on notifications with poll(2).
    var socket: Int32 { PQsocket(conn) }

    var isBroken: Bool { abandoned || PQstatus(conn) != CONNECTION_OK }

    /// The server did not answer in time: the connection's state is
    /// unknown, it is not used again (the session opens a new one).
    private var abandoned = false

    /// Seconds a statement's answer may take before the connection counts
    /// as broken (a server that stopped answering: its processes stopped,
    /// a proxy that holds the connection and forwards nothing); the session
    /// then reconnects, so an outage's limit holds. 60, or
    /// `TASKER_STORE_ANSWER_WAIT` (tests shorten it). Maintenance that may
    /// rightly take longer (VACUUM, an index rebuild, a schema upgrade)
    /// waits for ever.
    static let defaultAnswerWait: Double = {
        if let text = ProcessInfo.processInfo.environment["TASKER_STORE_ANSWER_WAIT"],
           let v = Double(text), v > 0, v.isFinite { return v }
        return 60
    }()

    /// Runs `sql` with text parameters ($1, $2, …; nil is NULL) and returns
    /// the rows as text (nil for NULL). Statements are prepared on first use
    /// and kept by their text (planning a claim cost about as much as
    /// running it), so a statement's text must not vary with its data:
    /// values go in parameters, lists in array parameters. `once`: a
    /// statement a connection runs once (its set-up, a registration): sent
    /// with its parameters, not prepared first (a round trip less each, on
    /// the way to a run's first job).
    @discardableResult
    func query(_ sql: String, _ params: [String?] = [], once: Bool = false) throws -> PGRows {
        let name = once ? nil : try preparedName(sql, params.count)
        var cStrings: [UnsafeMutablePointer<CChar>?] = params.map { $0.map { strdup($0) } ?? nil }
        defer { for p in cStrings { free(p) } }
        let sent: Int32 = cStrings.withUnsafeMutableBufferPointer { buf in
            buf.withMemoryRebound(to: UnsafePointer<CChar>?.self) { values in
                if let name {
                    PQsendQueryPrepared(conn, name, Int32(params.count), values.baseAddress, nil, nil, 0)
                } else {
                    PQsendQueryParams(conn, sql, Int32(params.count), nil, values.baseAddress, nil, nil, 0)
                }
            }
        }
        return try rows(of: answer(sent: sent, within: answerWait))
    }

    /// Prepares `sql` now, as its first `query` would.
    func prepare(_ sql: String, parameters: Int) throws {
        _ = try preparedName(sql, parameters)
    }

    /// Names of the statements prepared on this connection, by their text.
    private var prepared: [String: String] = [:]
    /// More distinct statements than this means texts that vary: those are
    /// run unprepared rather than kept forever.
    static let preparedLimit = 64

    private func preparedName(_ sql: String, _ count: Int) throws -> String? {
        if let name = prepared[sql] { return name }
        guard prepared.count < Self.preparedLimit else { return nil }
        let name = "tasker\(prepared.count)"
        _ = try rows(of: answer(sent: PQsendPrepare(conn, name, sql, Int32(count), nil), within: answerWait))
        prepared[sql] = name
        return name
    }

    private func rows(of result: OpaquePointer?) throws -> PGRows {
        guard let result else { throw PGError(message: Self.trimmed(String(cString: PQerrorMessage(conn))), sqlState: nil) }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK:
            return PGRows(result)
        default:
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            throw PGError(message: Self.trimmed(String(cString: PQresultErrorMessage(result))), sqlState: state)
        }
    }

    /// Runs `body` in a transaction, rolled back when it throws.
    func transaction(_ body: () throws -> Void) throws {
        try execute("BEGIN")
        do {
            try body()
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// A statement whose answer was not waited for (`answerWait`), or
    /// whose process died, goes on in the server until it notices the
    /// connection is closed: it looks every 5 s while one runs (PostgreSQL
    /// 14 and later), else each such statement would hold a backend and
    /// its locks (a schema upgrade's, every later tasker waiting behind).
    static func dropStatementsOfAGoneClient(_ c: PGConnection) throws {
        try c.query("""
            SELECT set_config('client_connection_check_interval', '5000', false)
            WHERE current_setting('server_version_num')::int >= 140000
            """, once: true)
    }

    /// Runs several statements without parameters (set-up; maintenance,
    /// which may rightly take long, `waitingForEver`).
    func execute(_ sql: String, waitingForEver: Bool = false) throws {
        guard let result = try answer(sent: PQsendQuery(conn, sql), within: waitingForEver ? nil : answerWait) else {
            throw PGError(message: Self.trimmed(String(cString: PQerrorMessage(conn))), sqlState: nil)
        }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            throw PGError(message: Self.trimmed(String(cString: PQresultErrorMessage(result))), sqlState: state)
        }
    }

    /// The result of the statement just sent (`sent`: what `PQsend…`
    /// returned): the first error among its results, else the last one;
    /// nil when libpq failed (its message says why). Waits for the socket
    /// with poll(2), `seconds` at most in all; past them the connection is
    /// abandoned and this throws a connection failure (SQLSTATE 08006).
    private func answer(sent: Int32, within seconds: Double?) throws -> OpaquePointer? {
        guard sent == 1 else { return nil }
        let deadline = seconds.map { Monotonic.now() &+ Monotonic.nanos($0) }
        func wait(_ events: Int16) throws {
            var p = pollfd(fd: PQsocket(conn), events: events, revents: 0)
            while true {
                var ms: Int32 = -1
                if let deadline {
                    let now = Monotonic.now()
                    guard now < deadline else {
                        abandoned = true
                        throw PGError(message: "PostgreSQL did not answer within \(PGSession.seconds(seconds ?? 0))", sqlState: "08006")
                    }
                    ms = Int32(min(Double(Int32.max), (Double(deadline - now) / 1e6).rounded(.up)))
                }
                let r = poll(&p, 1, ms)
                if r > 0 { return }
                if r < 0 && errno != EINTR {
                    abandoned = true
                    throw PGError(message: "cannot wait for PostgreSQL's answer: \(String(cString: strerror(errno)))", sqlState: "08006")
                }
            }
        }
        // what the send left in libpq's buffer (a large batch of parameters)
        while true {
            let f = PQflush(conn)
            if f == 0 { break }
            if f < 0 { return nil }
            try wait(Int16(POLLIN | POLLOUT))
            guard PQconsumeInput(conn) == 1 else { return nil }
        }
        var kept: OpaquePointer?
        while true {
            while PQisBusy(conn) == 1 {
                try wait(Int16(POLLIN))
                guard PQconsumeInput(conn) == 1 else {
                    if let k = kept { PQclear(k) }
                    return nil
                }
            }
            guard let r = PQgetResult(conn) else { return kept }
            if let k = kept, PQresultStatus(k) != PGRES_COMMAND_OK && PQresultStatus(k) != PGRES_TUPLES_OK {
                PQclear(r)  // the first error stays the answer
            } else {
                if let k = kept { PQclear(k) }
                kept = r
            }
        }
    }

    /// Reads what arrived on the socket and returns the notifications in it
    /// (channel, payload).
    func notifications() throws -> [(channel: String, payload: String)] {
        guard PQconsumeInput(conn) == 1 else {
            throw PGError(message: Self.trimmed(String(cString: PQerrorMessage(conn))), sqlState: nil)
        }
        var out: [(String, String)] = []
        while let n = PQnotifies(conn) {
            out.append((String(cString: n.pointee.relname), String(cString: n.pointee.extra)))
            PQfreemem(n)
        }
        return out
    }

    /// A string as a quoted SQL identifier (LISTEN takes no parameters).
    func quotedIdentifier(_ s: String) -> String {
        guard let p = PQescapeIdentifier(conn, s, s.utf8.count) else { return "\"\"" }
        defer { PQfreemem(p) }
        return String(cString: p)
    }

    private static func trimmed(_ s: String) -> String {
        var s = s
        while s.last == "\n" || s.last == " " { s.removeLast() }
        if s.hasPrefix("ERROR:  ") { s.removeFirst(8) }
        return s
    }
}

/// A result's rows as text, copied out of libpq's result; read them with
/// `PGRow`'s typed getters.
struct PGRows {
    let names: [String]
    let rows: [PGRow]
    /// Rows a command touched (UPDATE … without RETURNING).
    let affected: Int

    init(_ r: OpaquePointer) {
        let cells = PGResultCells(r)
        names = cells.names
        rows = (0..<Int(PQntuples(r))).map { PGRow(result: cells, row: $0) }
        affected = Int(String(cString: PQcmdTuples(r))) ?? 0
    }

    var count: Int { rows.count }
    var first: PGRow? { rows.first }

    /// The first column of every row, NULLs left out (a list of ids, names…).
    var firstColumn: [String] { rows.compactMap { $0.optionalText(0) } }
}

extension PGError {
    /// Any error as a PGError (what libpq calls raise already is one).
    init(_ error: any Error) {
        self = error as? PGError ?? PGError(message: "\(error)", sqlState: nil)
    }
}

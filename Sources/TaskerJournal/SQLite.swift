import CSQLite
#if canImport(Glibc)
import Glibc
#endif

/// A SQLite error with the library's message.
public struct SQLiteError: Error, CustomStringConvertible {
    public let code: Int32
    public let message: String
    public var description: String { message }

    /// Another connection holds the lock (waiting may help).
    public var isLock: Bool { code & 0xff == SQLITE_BUSY || code & 0xff == SQLITE_LOCKED }
}

/// One connection: a thin typed layer over the C API (open, run, prepare).
/// A connection is used by one thread at a time (its owner).
final class SQLiteDatabase {
    let handle: OpaquePointer

    /// Opens (creating if needed) the file at `path`, waiting up to
    /// `busyTimeout` ms for a lock another process holds.
    /// `uri`: `path` is a `file:` URI (SQLite's query parameters apply).
    init(path: String, busyTimeout: Int32 = 5000, readOnly: Bool = false, uri: Bool = false) throws(SQLiteError) {
        var db: OpaquePointer?
        let flags = (readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) | (uri ? SQLITE_OPEN_URI : 0)
        let rc = sqlite3_open_v2(path, &db, flags | SQLITE_OPEN_NOMUTEX, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close(db)
            throw SQLiteError(code: rc, message: "cannot open \(path): \(message)")
        }
        handle = db
        sqlite3_busy_timeout(db, busyTimeout)
    }

    deinit { sqlite3_close_v2(handle) }

    /// Runs one or more statements without results.
    func execute(_ sql: String) throws(SQLiteError) {
        var err: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &err)
        if rc != SQLITE_OK {
            let message = err.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
            sqlite3_free(err)
            throw SQLiteError(code: rc, message: withSystemReason(rc, message))
        }
    }

    /// Runs `body` in a write transaction (taken at once), rolled back
    /// when it throws. Every transaction of the journal goes through here.
    func transaction(_ body: () throws(SQLiteError) -> Void) throws(SQLiteError) {
        try execute("BEGIN IMMEDIATE")
        do {
            try body()
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    func prepare(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw error(rc) }
        return SQLiteStatement(stmt, db: self)
    }

    func error(_ rc: Int32) -> SQLiteError {
        SQLiteError(code: rc, message: withSystemReason(rc, String(cString: sqlite3_errmsg(handle))))
    }

    /// SQLite's words, with the system's when an I/O error has them: a
    /// full disk under a missing `-shm` file read "disk I/O error" (SQLite
    /// reports the failure to grow it as I/O).
    private func withSystemReason(_ rc: Int32, _ message: String) -> String {
        let primary = rc & 0xff
        guard primary == SQLITE_IOERR || primary == SQLITE_CANTOPEN || primary == SQLITE_FULL else { return message }
        let e = sqlite3_system_errno(handle)
        guard e != 0 else { return message }
        let reason = String(cString: strerror(e))
        return message.contains(reason) ? message : "\(message) (\(reason))"
    }

    var changes: Int { Int(sqlite3_changes(handle)) }
}

/// A prepared statement: bind by position (1-based), step, read columns
/// (0-based), reset to run again.
final class SQLiteStatement {
    private let stmt: OpaquePointer
    private unowned let db: SQLiteDatabase

    init(_ stmt: OpaquePointer, db: SQLiteDatabase) {
        self.stmt = stmt
        self.db = db
    }

    deinit { sqlite3_finalize(stmt) }

    func bind(_ i: Int32, _ value: Int?) {
        if let value { sqlite3_bind_int64(stmt, i, sqlite3_int64(value)) } else { sqlite3_bind_null(stmt, i) }
    }

    func bind(_ i: Int32, _ value: Double?) {
        if let value { sqlite3_bind_double(stmt, i, value) } else { sqlite3_bind_null(stmt, i) }
    }

    func bind(_ i: Int32, _ value: String?) {
        guard let value else { sqlite3_bind_null(stmt, i); return }
        var v = value
        v.withUTF8 { b in
            _ = sqlite3_bind_text(stmt, i, UnsafeRawPointer(b.baseAddress!).assumingMemoryBound(to: CChar.self),
                                  Int32(b.count), tasker_sqlite_transient())
        }
    }

    /// The bytes of a blob column, read in place.
    func withBlob<T>(_ c: Int32, _ body: (UnsafeRawBufferPointer) -> T) -> T {
        let p = sqlite3_column_blob(stmt, c)
        let n = Int(sqlite3_column_bytes(stmt, c))
        return body(UnsafeRawBufferPointer(start: p, count: p == nil ? 0 : n))
    }

    /// Binds `values` to positions 1…n.
    func bindAll(_ values: [SQLiteValue]) {
        for (k, v) in values.enumerated() {
            let i = Int32(k + 1)
            switch v {
            case .int(let x): bind(i, x)
            case .double(let x): bind(i, x)
            case .text(let x): bind(i, x)
            case .null: sqlite3_bind_null(stmt, i)
            }
        }
    }

    /// Runs a statement that returns no rows, then resets it.
    func run() throws(SQLiteError) {
        let rc = sqlite3_step(stmt)
        sqlite3_reset(stmt)
        guard rc == SQLITE_DONE || rc == SQLITE_ROW else { throw db.error(rc) }
    }

    /// Runs a statement that returns no rows with `blob` bound at `i` in
    /// place (SQLite keeps the pointer instead of a copy: a run's log rows
    /// are megabytes), then resets it and unbinds the blob, so the pointer
    /// is never used after the array's buffer is gone.
    func run(bindingInPlace blob: [UInt8], at i: Int32) throws(SQLiteError) {
        let failure: SQLiteError? = blob.withUnsafeBytes { b in
            sqlite3_bind_blob(stmt, i, b.baseAddress, Int32(b.count), nil)  // nil: SQLITE_STATIC
            let rc = sqlite3_step(stmt)
            sqlite3_reset(stmt)
            // read before the unbinding: a bind sets the connection's
            // message back to "not an error"
            let failure = rc == SQLITE_DONE || rc == SQLITE_ROW ? nil : db.error(rc)
            sqlite3_bind_null(stmt, i)
            return failure
        }
        if let failure { throw failure }
    }

    /// Steps to the next row; false when there are no more (then resets).
    func next() throws(SQLiteError) -> Bool {
        let rc = sqlite3_step(stmt)
        if rc == SQLITE_ROW { return true }
        sqlite3_reset(stmt)
        guard rc == SQLITE_DONE else { throw db.error(rc) }
        return false
    }

    func reset() {
        sqlite3_reset(stmt)
        sqlite3_clear_bindings(stmt)
    }

    func isNull(_ c: Int32) -> Bool { sqlite3_column_type(stmt, c) == SQLITE_NULL }
    func int(_ c: Int32) -> Int { Int(sqlite3_column_int64(stmt, c)) }
    func double(_ c: Int32) -> Double { sqlite3_column_double(stmt, c) }
    func optionalInt(_ c: Int32) -> Int? { isNull(c) ? nil : int(c) }
    func optionalDouble(_ c: Int32) -> Double? { isNull(c) ? nil : double(c) }

    func text(_ c: Int32) -> String? {
        guard let p = sqlite3_column_text(stmt, c) else { return nil }
        let n = Int(sqlite3_column_bytes(stmt, c))
        return String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)
    }
}

/// A value to bind.
enum SQLiteValue {
    case int(Int?)
    case double(Double?)
    case text(String?)
    case null
}

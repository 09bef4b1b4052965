import CSQLite

/// The journal's tables as ordered migrations: `migrations[i]` takes a
/// file from schema version i to i + 1 (SQLite's `user_version`). A change
/// to the tables is a new migration at the end; one that has shipped is
/// never edited, so every journal written before upgrades in place.
enum JournalSchema {
    static let migrations: [String] = [
        // 1: the tables as the first releases made them. IF NOT EXISTS:
        // journals from before versions were kept (version 0) have them.
        """
        CREATE TABLE IF NOT EXISTS runs(
            id TEXT PRIMARY KEY, pipeline TEXT NOT NULL, args TEXT NOT NULL, vars TEXT NOT NULL,
            started REAL NOT NULL, ended REAL, exit_code INTEGER, counts TEXT, pid INTEGER,
            resumed_from TEXT);
        CREATE INDEX IF NOT EXISTS runs_by_pipeline ON runs(pipeline, id);
        CREATE TABLE IF NOT EXISTS task_log(
            run TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL,
            PRIMARY KEY(run, seq)) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS requests(
            run TEXT NOT NULL, host TEXT NOT NULL, requests INTEGER NOT NULL, retries INTEGER NOT NULL,
            failures INTEGER NOT NULL, PRIMARY KEY(run, host)) WITHOUT ROWID;
        """,
        // 2: log rows may hold runs of quick finishes (blob version 3),
        // which builds that know version 1 cannot read: they refuse the
        // file as newer instead of misreading it. No table changes.
        "",
    ]

    /// The version from which a writer may put runs of quick finishes in
    /// the log (a file left at an older one, which could not be upgraded
    /// as it opened, gets plain entries).
    static let quickRunsFrom = 2

    /// The version this build writes.
    static var version: Int { migrations.count }

    static func storedVersion(_ db: SQLiteDatabase) throws(SQLiteError) -> Int {
        let s = try db.prepare("PRAGMA user_version")
        defer { s.reset() }
        return try s.next() ? s.int(0) : 0
    }

    /// The oldest version whose tables this build reads and writes as they
    /// are: a file at it that cannot be upgraded now (read-only, or another
    /// process holds a lock) is used as it is. Raise it with a migration
    /// that changes what is read or written.
    static let usableFrom = 0

    /// The three tables every version has: a file stamped current whose
    /// tables were dropped gets them again.
    static func hasTables(_ db: SQLiteDatabase) throws(SQLiteError) -> Bool {
        let s = try db.prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('runs', 'task_log', 'requests')")
        defer { s.reset() }
        return try s.next() && s.int(0) == 3
    }

    /// The file's version if this build knows it; an error when a newer
    /// tasker wrote it (its tables may not be what this one reads), or the
    /// number is not a version at all.
    static func checkedVersion(_ db: SQLiteDatabase, path: String) throws(SQLiteError) -> Int {
        let found = try storedVersion(db)
        if found > version { throw newer(found, path) }
        if found < 0 {
            throw SQLiteError(code: SQLITE_ERROR, message: "the journal \(path) has schema version \(found), which no tasker "
                              + "writes: it was changed by hand; use another --state directory")
        }
        return found
    }

    /// Whether the file is at this build's version with its tables.
    static func isCurrent(_ db: SQLiteDatabase, path: String) throws(SQLiteError) -> Bool {
        guard try checkedVersion(db, path: path) == version else { return false }
        return try hasTables(db)
    }

    /// The first version with every table (a reader that must make them
    /// makes this one).
    static let tablesFrom = 1

    /// Applies the migrations the file lacks up to `target` (in the
    /// caller's transaction); at it already, recreates missing tables.
    static func upgrade(_ db: SQLiteDatabase, path: String, to target: Int = version) throws(SQLiteError) {
        let found = try checkedVersion(db, path: path)
        guard found < target else {
            if try !hasTables(db) { try db.execute(migrations[0]) }
            return
        }
        for m in migrations[found..<target] { try db.execute(m) }
        try db.execute("PRAGMA user_version = \(target)")
    }

    private static func newer(_ found: Int, _ path: String) -> SQLiteError {
        SQLiteError(code: SQLITE_ERROR, message: "the journal \(path) was written by a newer tasker "
                    + "(schema version \(found); this one knows \(version)): upgrade tasker, or use another --state directory")
    }
}

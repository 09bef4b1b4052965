import CSQLite
import TaskerCore
#if canImport(Glibc)
import Glibc
#endif

/// Where the journal lives and how it is opened: one SQLite file in WAL
/// mode (readers never block the writer; a killed process leaves it
/// consistent), mode 0600 in a 0700 directory.
public enum Journal {
    public static let fileName = "journal.db"

    /// `--state DIR`, else `$TASKER_STATE_DIR`, else `$XDG_STATE_HOME/tasker`,
    /// else `~/.local/state/tasker`; without HOME (cron, a bare container)
    /// the account's home from the password database, else
    /// `/tmp/tasker-UID` (`homeless` says when; the CLI says where).
    public static func directory(override: String?, environment: [String: String]) -> String {
        if let override, !override.isEmpty { return override }
        if let d = environment["TASKER_STATE_DIR"], !d.isEmpty { return d }
        if let d = environment["XDG_STATE_HOME"], !d.isEmpty { return d + "/tasker" }
        if let home = environment["HOME"], !home.isEmpty { return home + "/.local/state/tasker" }
        if let pw = getpwuid(getuid()), let dir = pw.pointee.pw_dir, dir.pointee != 0 {
            let home = String(cString: dir)
            var st = stat()
            if home != "/", stat(home, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR, access(home, W_OK) == 0 {
                return home + "/.local/state/tasker"
            }
        }
        return "/tmp/tasker-\(getuid())"
    }

    /// Whether `directory` had no HOME (nor anything else) to go by.
    public static func homeless(override: String?, environment: [String: String]) -> Bool {
        (override ?? "").isEmpty && (environment["TASKER_STATE_DIR"] ?? "").isEmpty
            && (environment["XDG_STATE_HOME"] ?? "").isEmpty && (environment["HOME"] ?? "").isEmpty
    }

    /// Creates `directory` (0700) if needed and checks that it can be written.
    static func prepare(directory: String) throws(SQLiteError) {
        try makeDirectories(directory)
        var st = stat()
        if stat(directory, &st) == 0, st.st_mode & S_IFMT != S_IFDIR {
            throw SQLiteError(code: SQLITE_CANTOPEN, message: "cannot write in \(directory): \(String(cString: strerror(ENOTDIR)))")
        }
        guard access(directory, W_OK | X_OK) == 0 else {
            throw SQLiteError(code: SQLITE_CANTOPEN, message: "cannot write in \(directory): \(String(cString: strerror(errno)))")
        }
    }

    /// Opens the journal in `directory`, creating the directory (0700) and
    /// the file (0600) and the tables when missing. `busyTimeout` (ms) is
    /// how long one statement waits for a lock another process holds;
    /// `attempts`, how often setting up is tried when a lock refuses it.
    static func open(directory: String, create: Bool = true, busyTimeout: Int32 = 5000,
                     attempts: Int = 20) throws(SQLiteError) -> SQLiteDatabase {
        let path = directory + "/" + fileName
        if create {
            try makeDirectories(directory)
            // Create the file ourselves so it is 0600 from its first byte
            // (through a dangling symlink too: no O_EXCL, which would not
            // follow it). Only when it is missing: closing a descriptor of a
            // file that SQLite has open in this process would drop SQLite's
            // locks on it.
            if access(path, F_OK) != 0 {
                let fd = Glibc.open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
                if fd < 0 {
                    throw SQLiteError(code: SQLITE_CANTOPEN, message: "cannot create \(path): \(String(cString: strerror(errno)))")
                }
                close(fd)
            }
        } else if access(path, F_OK) != 0 {
            throw SQLiteError(code: SQLITE_CANTOPEN, message: "no journal at \(path) (no run has been recorded there)")
        }
        var st = stat()
        if stat(path, &st) == 0 && (st.st_mode & S_IFMT) != S_IFREG {
            throw SQLiteError(code: SQLITE_CANTOPEN, message: "cannot open \(path): not a regular file")
        }
        // On read-only media (a mounted copy, an archive) a WAL journal cannot
        // be opened for reading the usual way (its shared-memory file cannot
        // be made there): it is read as it is, unchanged by anyone.
        if !create && access(directory, W_OK) != 0 && errno == EROFS { return try openImmutable(path) }
        let db = try SQLiteDatabase(path: path, busyTimeout: busyTimeout)
        // Another run may be setting the file up at this moment: some of
        // these locks are refused at once rather than waited for, so retry
        // (briefly: a lock held for longer is the caller's to wait out).
        var attempt = 0
        let start = Monotonic.now()
        while true {
            do {
                try setUp(db, path: path, upgrades: create)
                // No checkpoint when the connection closes: a run's process
                // exits right after its last commit, and the exit waited for
                // that checkpoint's sync (2-3 ms of a 200,000-task run's
                // 250), which it often cut anyway. The WAL stays; a run's
                // writer folds it in while the run goes on
                // (`SQLiteJournalStore.maintain`).
                _ = tasker_sqlite_no_checkpoint_on_close(db.handle)
                return db
            } catch where error.isLock {
                attempt += 1
                // A lock that outlasted the busy timeout is held, not being
                // set up: trying again would wait that long each time (a
                // reader waited 20 × 5 s on a journal locked for good).
                let waited = Double(Monotonic.now() &- start) / 1e6
                if attempt >= attempts || waited >= Double(busyTimeout) { throw named(error, path) }
                usleep(useconds_t(1000 * attempt))
            } catch {
                throw named(error, path)
            }
        }
    }

    /// The journal at `path` for reading only, as an unchanging file
    /// (SQLite's `immutable`): no lock, no WAL index.
    private static func openImmutable(_ path: String) throws(SQLiteError) -> SQLiteDatabase {
        // '?', '#' and '%' mean something in a URI
        var escaped = ""
        for c in path.unicodeScalars {
            switch c {
            case "%": escaped += "%25"
            case "?": escaped += "%3F"
            case "#": escaped += "%23"
            default: escaped.unicodeScalars.append(c)
            }
        }
        // What a run left in its WAL (its process ended before the last
        // connection closed) is read through the WAL's index, read-only;
        // with neither file there, the database is all there is.
        let walLeft = access(path + "-wal", F_OK) == 0 && access(path + "-shm", F_OK) == 0
        let db = walLeft ? try SQLiteDatabase(path: path, readOnly: true)
            : try SQLiteDatabase(path: "file:" + escaped + "?immutable=1", readOnly: true, uri: true)
        do throws(SQLiteError) {
            guard try JournalSchema.checkedVersion(db, path: path) >= JournalSchema.usableFrom, try JournalSchema.hasTables(db) else {
                throw SQLiteError(code: SQLITE_CANTOPEN, message: "\(path) on a read-only file system is not a journal this tasker reads")
            }
        } catch {
            throw named(error, path)
        }
        return db
    }

    /// SQLite's own words (`file is not a database`, `database is locked`)
    /// with the file they are about, when they do not name it already.
    private static func named(_ error: SQLiteError, _ path: String) -> SQLiteError {
        if error.isLock, !error.message.contains("another process") {
            return SQLiteError(code: error.code, message: "\(path) is locked by another process (\(error.message))")
        }
        return error.message.contains(path) ? error : SQLiteError(code: error.code, message: "\(path): \(error.message)")
    }

    /// WAL mode (kept in the file once set) and the tables, at the schema
    /// version this build knows. A journal already at it is only read
    /// here: a lock another process holds does not stop a reader. Only a
    /// writer (`upgrades`) raises the version of a file it can use as it
    /// is: `tasker runs` once made a file an older tasker then refused.
    private static func setUp(_ db: SQLiteDatabase, path: String, upgrades: Bool) throws(SQLiteError) {
        let mode = try db.prepare("PRAGMA journal_mode")
        let isWAL = try mode.next() && mode.text(0) == "wal"
        mode.reset()
        if !isWAL { try db.execute("PRAGMA journal_mode=WAL") }
        try db.execute("PRAGMA synchronous=NORMAL")
        if try JournalSchema.isCurrent(db, path: path) { return }
        if !upgrades, try JournalSchema.checkedVersion(db, path: path) >= JournalSchema.usableFrom, try JournalSchema.hasTables(db) {
            return
        }
        // A reader that finds no tables (an empty file) makes them at the
        // first version that has them, which every tasker reads.
        let target = upgrades ? JournalSchema.version : JournalSchema.tablesFrom
        do {
            // Read again inside: another process may have upgraded it meanwhile.
            try db.transaction { () throws(SQLiteError) in try JournalSchema.upgrade(db, path: path, to: target) }
        } catch where error.isLock || error.code & 0xff == SQLITE_READONLY {
            // Not now (a lock, a read-only file): a file this build uses as
            // it is still opens; the next writer upgrades it.
            let found = try JournalSchema.checkedVersion(db, path: path)
            guard found >= JournalSchema.usableFrom, try JournalSchema.hasTables(db) else {
                throw SQLiteError(code: error.code, message: "cannot upgrade the journal \(path) to this tasker's schema: \(error.message)")
            }
        }
    }

    private static func makeDirectories(_ path: String) throws(SQLiteError) {
        // There already, as at every run but the first: one call, not a
        // mkdir of each component
        var st = stat()
        if stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR { return }
        var prefix = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            prefix += "/" + part
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                throw SQLiteError(code: SQLITE_CANTOPEN, message: "cannot create \(prefix): \(String(cString: strerror(errno)))")
            }
        }
    }
}

/// How long finished job rows stay in `tasker_jobs` after their run ended
/// (`tasker worker --retain`). A run's coordinator records every result
/// in the run's journal as it reads it (what `show`, `report`, `runs` and
/// `--resume` read), so once the run has ended its rows are a copy: they
/// are kept only for looking at with SQL (which worker ran what).
public enum Retention {
    /// The default: delete once the run has ended.
    public static let defaultSeconds: Double = 0

    /// Rows deleted per statement: short transactions, and the work is
    /// shared with other workers sweeping at the same time (SKIP LOCKED).
    static let batch = 5000

    /// `0`, `90` or `90s`, `30m`, `12h`, `7d` (a decimal number and a unit)
    /// in seconds; nil when it is not one of those.
    public static func seconds(_ text: String) -> Double? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        var number = Substring(text)
        var unit = 1.0
        if let last = number.last, let u = units[last] {
            unit = u
            number = number.dropLast()
        }
        guard !number.isEmpty, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              let n = Double(number), n.isFinite, n >= 0 else { return nil }
        return n * unit
    }
}

extension QueueStore {
    /// Deletes up to `limit` finished rows (not queued, not running) of
    /// runs whose coordinator stopped more than `retain` seconds ago (the
    /// run ended, or its coordinator died and its jobs were cancelled);
    /// returns how many. A run still going keeps its rows: its coordinator
    /// reads them. Rows another sweeper holds are skipped, not waited for.
    /// No join: the jobs by the list of ended runs (the runs' index), the
    /// deletes by the list of ids; a join's plan followed the row estimate
    /// and, made for an empty table, walked all the jobs for each batch.
    static func sweep(retain: Double, limit: Int = Retention.batch, _ c: PGConnection) throws -> Int {
        try c.query("""
            WITH d AS (SELECT j.id FROM tasker_jobs j
                       WHERE j.run = ANY(ARRAY(SELECT run FROM tasker_coordinators WHERE stopped < now() - make_interval(secs => $1::float8)))
                         AND j.state NOT IN ('queued', 'running') LIMIT (SELECT $2::int) FOR UPDATE OF j SKIP LOCKED)
            DELETE FROM tasker_jobs j WHERE j.id = ANY(ARRAY(SELECT id FROM d))
            """, [String(retain), String(limit)]).affected
    }

    /// Forgets the leases of ended runs that have no rows left (so the
    /// next sweep does not look at them again).
    static func forgetSweptRuns(retain: Double, _ c: PGConnection) throws {
        try c.query("""
            DELETE FROM tasker_coordinators k WHERE stopped < now() - make_interval(secs => $1::float8)
              AND NOT EXISTS (SELECT 1 FROM tasker_jobs j WHERE j.run = k.run)
            """, [String(retain)])
    }
}

extension QueueStore {
    /// Seconds between looks at the queue's list as a whole (`tidyList`).
    static let listTidyInterval: Double = 30

    /// Keeps `tasker_queue` in step with the jobs, whatever wrote them:
    /// lists queued jobs it lacks (queued by a coordinator or worker of a
    /// release before the list, still running across the upgrade) and
    /// drops rows whose job is no longer queued (a hand-back that landed
    /// beside a cancel, a duplicate; a claim would drop them too, but rows
    /// of a name no worker has would stay). Scans both tables: every
    /// `listTidyInterval`, on the sweeper's connection. Returns how many it
    /// listed (they need a wake-up).
    @discardableResult
    static func tidyList(_ c: PGConnection) throws -> Int {
        try c.query("""
            WITH s AS (SELECT q.ctid FROM tasker_queue q
                       WHERE NOT EXISTS (SELECT 1 FROM tasker_jobs j WHERE j.id = q.id AND j.state = 'queued' AND j.worker IS NULL)
                       FOR UPDATE SKIP LOCKED)
            DELETE FROM tasker_queue WHERE ctid = ANY(ARRAY(SELECT ctid FROM s))
            """)
        let listed = try c.query("""
            INSERT INTO tasker_queue (id, priority, name, run) SELECT id, priority, name, run FROM tasker_jobs j
            WHERE j.state = 'queued' AND j.worker IS NULL
              AND NOT EXISTS (SELECT 1 FROM tasker_queue q WHERE q.priority = j.priority AND q.id = j.id)
            """).affected
        if listed > 0 { try c.query("SELECT pg_notify('\(jobsChannel)', '')") }
        return listed
    }

    /// Dead row versions past which a sweeper vacuums the table itself: a
    /// job leaves three (claim, completion, deletion) and autovacuum looks
    /// at a table about once a minute, so a steady stream would pile up
    /// hundreds of thousands meanwhile.
    static let deadRowsToVacuum = 20000

    /// The tables a sweeper keeps small: the jobs, and the queue's list
    /// (a claim deletes from it: 10,000 jobs leave as many dead rows), each
    /// with an order its live rows are counted in through an index.
    struct Kept: Sendable {
        var table: String
        var order: String
        /// Bytes past which it is shrunk when it holds few live rows.
        var bigBytes: Int
        static let jobs = Kept(table: "tasker_jobs", order: "id", bigBytes: QueueStore.bigBytes)
        /// Its rows are small: 50,000 jobs left 2.3 MiB of index pages.
        static let queue = Kept(table: "tasker_queue", order: "priority DESC, id", bigBytes: 256 << 10)
        static let all = [jobs, queue]
        /// How REINDEX CONCURRENTLY names the copies of its indexes.
        var cutRebuildIndexName: String { "^\(table).*_cc(new|old)[0-9]*$" }
        /// Whether it holds fewer than `fewLiveRows` rows, counted through
        /// an index, at most that many.
        var fewLiveRowsCounted: String {
            "(SELECT count(*) FROM (SELECT 1 FROM \(table) ORDER BY \(order) LIMIT \(QueueStore.fewLiveRows)) s) < \(QueueStore.fewLiveRows)"
        }
    }

    /// Vacuums a kept table (`tasker_jobs`, `tasker_queue`) when its dead rows outnumber both the bound
    /// and its live rows, or when a big table holds few live rows (counted,
    /// as for `reindexIfBloated`) and either some dead ones (rows deleted
    /// while the last vacuum ran keep its trailing pages from being given
    /// back) or no vacuum for 30 s (one that could not take the lock to
    /// give them back, as autovacuum gives up to a claim), unless another
    /// process vacuums it now (one sweeper at a time, by an advisory lock;
    /// autovacuum's lock is skipped, not waited for). A role that does not
    /// own the table does not try (the server would only warn, every
    /// second): autovacuum stays the only one. Not `shrinking`: only for
    /// the dead rows, and no page is given back. `pagesKept`: a vacuum
    /// that was not shrinking ran since the last that was, so the big
    /// table of few live rows is shrunk now, dead rows or not. Returns
    /// whether it ran.
    ///
    /// The checks (every second, on each worker) take no parameters: the
    /// statistics views they read are slow to plan (1-4 ms a statement
    /// here), and a prepared statement without parameters is planned once,
    /// where one with them was planned at every run. Each variant is a
    /// statement of its own.
    @discardableResult
    static func vacuumIfDead(_ kept: Kept, shrinking: Bool = true, pagesKept: Bool = false,
                             _ c: PGConnection) throws -> Bool {
        let rows = try c.query("""
            SELECT (n_dead_tup > greatest(\(deadRowsToVacuum), n_live_tup)
                    OR CASE WHEN \(shrinking) AND pg_relation_size(relid) > \(kept.bigBytes)
                            AND (\(pagesKept) OR n_dead_tup > 0
                                 OR coalesce(greatest(last_vacuum, last_autovacuum), 'epoch') < now() - interval '30 seconds')
                       THEN \(kept.fewLiveRowsCounted) ELSE false END)
                   AND pg_has_role((SELECT relowner FROM pg_class WHERE oid = relid), 'USAGE')
                   AND pg_try_advisory_lock(7165422)
            FROM pg_stat_user_tables WHERE relid = '\(kept.table)'::regclass
            """)
        guard try rows.first?.bool(0) == true else { return false }
        defer { _ = try? c.query("SELECT pg_advisory_unlock(7165422)") }
        // INDEX_CLEANUP ON: by default a vacuum that finds few pages with
        // dead rows skips the indexes and leaves those rows' slots in the
        // pages, which are then not empty and never given back
        try c.execute("VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON\(shrinking ? "" : ", TRUNCATE false")) \(kept.table)",
                      waitingForEver: true)
        return true
    }

    /// Bytes past which a table of few live rows is shrunk: its heap
    /// vacuumed (VACUUM gives empty trailing pages back), its indexes
    /// rebuilt (an index keeps every page it ever had: 50,000 jobs leave
    /// 3.5 MiB, all of it kept at a bound of 4 MiB; fewer than
    /// `fewLiveRows` rows need well under one).
    static let bigBytes = 1 << 20
    /// Live rows under which shrinking is cheap and worth it (their fresh
    /// indexes take well under a MiB).
    static let fewLiveRows = 1000

    /// Rebuilds a kept table's indexes (REINDEX CONCURRENTLY: claims and
    /// completions go on meanwhile) when they are over the bound while the
    /// table holds few live rows, as after a big run is swept; one sweeper
    /// at a time (the vacuum's advisory lock), and only by a role that owns
    /// the table. Returns whether it ran.
    ///
    /// A rebuild cut short (its worker killed, the server restarted) leaves
    /// its new indexes behind, invalid: never used, yet kept up to date by
    /// every write, and a later rebuild would leave more. They are dropped
    /// first: only those named as a rebuild of the queue's own indexes
    /// names them (`tasker_jobs…_ccnew`, `tasker_queue…_ccold`), so an index someone is
    /// building beside (CREATE INDEX CONCURRENTLY, invalid until done) is
    /// left alone.
    ///
    /// The live rows are counted (at most `fewLiveRows` of them, through
    /// the primary key, and only once the indexes are big): the server's
    /// estimate is what the last vacuum extrapolated from the pages it
    /// read, thousands of rows off for a minute after a big sweep.
    /// `waits`: seconds the rebuild waits for a lock (see below).
    @discardableResult
    static func reindexIfBloated(_ kept: Kept, waits: Double = 10, _ c: PGConnection) throws -> Bool {
        // `relid` is the kept table, and no run going on: a rebuild beside
        // a stream of jobs doubles their index work (and was seen beside a
        // stall); on a table of no run it takes milliseconds. No parameters
        // (see `vacuumIfDead`); the pattern is this build's own text.
        let bigAndFew = """
            CASE WHEN pg_indexes_size(relid) > \(kept.bigBytes)
                      AND NOT EXISTS (SELECT 1 FROM tasker_coordinators WHERE stopped IS NULL)
                 THEN \(kept.fewLiveRowsCounted) ELSE false END
            """
        let rows = try c.query("""
            SELECT (\(bigAndFew)
                    OR EXISTS (SELECT 1 FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
                               WHERE x.indrelid = relid AND NOT x.indisvalid AND i.relname ~ '\(kept.cutRebuildIndexName)'))
                   AND pg_has_role((SELECT relowner FROM pg_class WHERE oid = relid), 'USAGE')
                   AND pg_try_advisory_lock(7165422)
            FROM pg_stat_user_tables WHERE relid = '\(kept.table)'::regclass
            """)
        guard try rows.first?.bool(0) == true else { return false }
        defer { _ = try? c.query("SELECT pg_advisory_unlock(7165422)") }
        let invalid = try c.query("""
            SELECT quote_ident(n.nspname) || '.' || quote_ident(i.relname) FROM pg_index x
            JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_namespace n ON n.oid = i.relnamespace
            WHERE x.indrelid = '\(kept.table)'::regclass AND NOT x.indisvalid AND i.relname ~ $1
            """, [kept.cutRebuildIndexName])
        // Both wait for every transaction older than each of their steps,
        // with the sweepers' lock held: one that began meanwhile (a
        // `pg_dump`) stops them after `waits` instead of holding every
        // sweeper's vacuum until it ends. A cut rebuild's copies go next time.
        try c.execute("SET lock_timeout = '\(Int(waits * 1000))ms'")
        defer { _ = try? c.execute("SET lock_timeout TO DEFAULT") }
        for row in invalid.rows {
            try c.execute("DROP INDEX CONCURRENTLY IF EXISTS \(try row.text(0))", waitingForEver: true)
        }
        let bloated = try c.query("""
            SELECT \(bigAndFew) FROM pg_stat_user_tables WHERE relid = '\(kept.table)'::regclass
            """)
        guard try bloated.first?.bool(0) == true else { return !invalid.rows.isEmpty }
        // Index by index, not the table: REINDEX TABLE rebuilds its TOAST
        // index too, and a rebuild cut short leaves that one's copy in
        // pg_toast, which only a superuser may drop.
        let indexes = try c.query("""
            SELECT quote_ident(n.nspname) || '.' || quote_ident(i.relname) FROM pg_index x
            JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_namespace n ON n.oid = i.relnamespace
            WHERE x.indrelid = '\(kept.table)'::regclass AND x.indisvalid
            """)
        for row in indexes.rows {
            try c.execute("REINDEX INDEX CONCURRENTLY \(try row.text(0))", waitingForEver: true)
        }
        return true
    }

    /// The oldest transaction id other sessions of this database hold (a
    /// snapshot's xmin, a writing transaction's own id), and the oldest held
    /// at all: by those sessions, prepared transactions or replication
    /// slots (nil: none). Not autovacuum's (a vacuum's own snapshot holds
    /// no other back). Every session's ids are shown to every role, unlike
    /// its times.
    static func oldestHeld(_ c: PGConnection) throws -> (any: String?, bySessions: String?) {
        let row = try c.query("""
            WITH held(x, session) AS (
              SELECT backend_xmin, true FROM pg_stat_activity
              WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type <> 'autovacuum worker'
                AND backend_xmin IS NOT NULL
              UNION ALL SELECT backend_xid, true FROM pg_stat_activity
              WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type <> 'autovacuum worker'
                AND backend_xid IS NOT NULL
              UNION ALL SELECT transaction, false FROM pg_prepared_xacts WHERE database = current_database()
              UNION ALL SELECT xmin, false FROM pg_replication_slots WHERE xmin IS NOT NULL)
            SELECT (SELECT x::text FROM held ORDER BY age(x) DESC LIMIT 1),
                   (SELECT x::text FROM held WHERE session ORDER BY age(x) DESC LIMIT 1)
            """).first
        return (row?.optionalText(0), row?.optionalText(1))
    }
}

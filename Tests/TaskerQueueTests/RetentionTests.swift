import Foundation
import PostgresTestServer
import TaskerCore
import Testing
@testable import TaskerQueue

/// Finished rows go once their run has ended (or ended long enough ago);
/// a run still going keeps them, and so does any job not finished.
@Suite struct RetentionTests {
    let url: String
    let db: PGThread
    static let work: [String: String?] = ["work": "v1"]

    init() async throws {
        (db, url) = try await FreshQueue.make()
    }

    /// Registers `run`'s coordinator and queues `n` jobs of it; `finish`
    /// of them are claimed and completed.
    func run(_ run: String, jobs n: Int, finish: Int) throws {
        try db.sync { c in
            try QueueStore.register(run: run, host: "h", pid: 1, lease: 60, c)
            try QueueStore.enqueue(run: run, (1...n).map {
                RemoteAttempt(task: $0, attempt: 1, name: "work", args: "{}", priority: 0, timeout: nil)
            }, c)
            let claimed = try c.query("""
                UPDATE tasker_jobs SET state = 'running', worker = 'w', claim = id WHERE id IN (
                  SELECT id FROM tasker_jobs WHERE run = $1 ORDER BY task LIMIT $2::int) RETURNING id
                """, [run, String(finish)]).rows.map { r throws(PGError) in try r.int64(0) }
            let refused = try QueueStore.complete(claimed.map { JobCompletion(id: $0, claim: $0, state: .succeeded, result: "[]") }, c)
            #expect(refused.isEmpty)
        }
    }

    func count(_ run: String) throws -> Int {
        try db.sync { c in try c.query("SELECT count(*) FROM tasker_jobs WHERE run = $1", [run]).first?.int(0) ?? -1 }
    }

    @Test func anEndedRunsFinishedRowsGoAndARunningRunsStay() throws {
        try run("ended", jobs: 10, finish: 8)
        try run("going", jobs: 10, finish: 10)
        // stopped as a coordinator of an earlier release stopped (its end
        // cancels nothing; `coordinatorStopped` now cancels what is left)
        _ = try db.sync { c in try c.query("UPDATE tasker_coordinators SET stopped = now() WHERE run = 'ended'") }
        #expect(try db.sync { c in try QueueStore.sweep(retain: 0, c) } == 8)
        // the two jobs the ended run left unfinished stay (queued): nobody
        // deletes what may still be claimed; the running run keeps all
        #expect(try count("ended") == 2)
        #expect(try count("going") == 10)
        // the lease of a run with rows left is kept, then forgotten with them
        try db.sync { c in try QueueStore.forgetSweptRuns(retain: 0, c) }
        #expect(try db.sync { c in try c.query("SELECT count(*) FROM tasker_coordinators").first?.int(0) } == 2)
        try db.sync { c in try QueueStore.coordinatorStopped(run: "ended", c) }
        #expect(try db.sync { c in try QueueStore.sweep(retain: 0, c) } == 2)
        try db.sync { c in try QueueStore.forgetSweptRuns(retain: 0, c) }
        #expect(try db.sync { c in try c.query("SELECT run FROM tasker_coordinators").firstColumn } == ["going"])
    }

    @Test func rowsStayForTheRetentionAfterTheirRunEnded() throws {
        try run("r", jobs: 4, finish: 4)
        try db.sync { c in try QueueStore.coordinatorStopped(run: "r", c) }
        #expect(try db.sync { c in try QueueStore.sweep(retain: 3600, c) } == 0)
        #expect(try count("r") == 4)
        _ = try db.sync { c in try c.query("UPDATE tasker_coordinators SET stopped = now() - interval '61 minutes'") }
        #expect(try db.sync { c in try QueueStore.sweep(retain: 3600, c) } == 4)
        #expect(try count("r") == 0)
    }

    @Test func aSweepDeletesInBatches() throws {
        try run("r", jobs: 10, finish: 10)
        try db.sync { c in try QueueStore.coordinatorStopped(run: "r", c) }
        #expect(try db.sync { c in try QueueStore.sweep(retain: 0, limit: 4, c) } == 4)
        #expect(try db.sync { c in try QueueStore.sweep(retain: 0, limit: 4, c) } == 4)
        #expect(try db.sync { c in try QueueStore.sweep(retain: 0, limit: 4, c) } == 2)
    }

    /// A worker still running a job whose row went (its run was pruned)
    /// hears at its heartbeat that it must stop it.
    @Test func aJobWhoseRowIsGoneIsStoppedAtTheHeartbeat() throws {
        try db.sync { c in
            try QueueStore.register(worker: "w", host: "h", pid: 1, lease: 60, versions: Self.work, c)
            try QueueStore.enqueue(run: "r", [RemoteAttempt(task: 1, attempt: 1, name: "work", args: "{}", priority: 0, timeout: nil)], c)
        }
        let j = try #require(try db.sync { c in try QueueStore.claim(worker: "w", limit: 1, versions: Self.work, c) }.first)
        #expect(try db.sync { c in try QueueStore.heartbeat(worker: "w", running: [j.id], c) }.stop.isEmpty)
        _ = try db.sync { c in try c.query("DELETE FROM tasker_jobs") }
        #expect(try db.sync { c in try QueueStore.heartbeat(worker: "w", running: [j.id], c) }.stop == [j.id])
    }

    @Test func durationsAreReadWithTheirUnit() {
        #expect(Retention.seconds("0") == 0)
        #expect(Retention.seconds("90") == 90)
        #expect(Retention.seconds("90s") == 90)
        #expect(Retention.seconds("1.5h") == 5400)
        #expect(Retention.seconds("7d") == 604_800)
        #expect(Retention.seconds("30m") == 1800)
        for bad in ["", "d", "-1h", "7w", "1e3", "nan", "1 h"] { #expect(Retention.seconds(bad) == nil, "\(bad)") }
    }
}

/// Dead rows past the bound are vacuumed by a sweeper, not left for
/// autovacuum's next round.
@Suite struct QueueVacuumTests {
    /// A connection to a fresh database holding the queue's tables.
    static func queue() async throws -> PGThread { try await FreshQueue.make().db }

    /// Past the bound the dead rows are vacuumed, in a burst of jobs too
    /// (not `shrinking`), where the table keeps its pages: giving them
    /// back takes a lock every claim would wait behind.
    @Test(arguments: [true, false]) func deadRowsPastTheBoundAreVacuumed(shrinking: Bool) async throws {
        let db = try await Self.queue()
        defer { db.stop() }
        #expect(try db.sync { c in try QueueStore.vacuumIfDead(.jobs, shrinking: shrinking, c) } == false)
        let n = QueueStore.deadRowsToVacuum + 5000
        try db.sync { c in
            // the sweeper's vacuum is what is tested: on a loaded machine
            // autovacuum got to the dead rows first (the check then never
            // saw them, and it truncated the table a burst keeps)
            try c.query("ALTER TABLE tasker_jobs SET (autovacuum_enabled = false)")
            try c.query("""
                INSERT INTO tasker_jobs (run, task, attempt, name, args) SELECT 'r', g, 1, 'work', '{}' FROM generate_series(1, $1::int) g
                """, [String(n)])
            try c.query("DELETE FROM tasker_jobs")
        }
        // the server's statistics lag by up to a second or so
        var vacuumed = false
        let deadline = Date(timeIntervalSinceNow: 120)
        while !vacuumed && Date() < deadline {
            vacuumed = try db.sync { c in try QueueStore.vacuumIfDead(.jobs, shrinking: shrinking, c) }
            if !vacuumed { try await Task.sleep(nanoseconds: 100_000_000) }
        }
        #expect(vacuumed)
        let bytes = try db.sync { c in try c.query("SELECT pg_relation_size('tasker_jobs')").first?.int(0) } ?? 0
        if shrinking {
            #expect(bytes == 0, "the emptied table's pages were not given back")
        } else {
            #expect(bytes > 1 << 20, "a vacuum in a burst gave the pages back")
        }
        // its statistics too may lag on a loaded machine (a wait of its
        // own: the vacuum's may have used most of the first)
        let statsDeadline = Date(timeIntervalSinceNow: 60)
        var dead = n
        repeat {  // looked at once at least
            dead = try db.sync { c in
                try c.query("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'tasker_jobs'").first?.int(0)
            } ?? n
            if dead >= QueueStore.deadRowsToVacuum { try await Task.sleep(nanoseconds: 100_000_000) }
        } while dead >= QueueStore.deadRowsToVacuum && Date() < statsDeadline
        #expect(dead < QueueStore.deadRowsToVacuum)
    }

    /// A big run swept leaves a table of many MiB: the last rows deleted
    /// (fewer dead rows than a steady stream's bound) keep its trailing
    /// pages until a vacuum, and its indexes keep every page. Once it holds
    /// few live rows it is vacuumed and its indexes rebuilt; over many live
    /// rows its indexes are what they need and stay.
    @Test func aBigTableOfFewLiveRowsIsShrunk() async throws {
        let db = try await Self.queue()
        defer { db.stop() }
        func indexBytes() throws -> Int {
            try db.sync { c in try c.query("SELECT pg_indexes_size('tasker_jobs')").first?.int(0) } ?? 0
        }
        func tableBytes() throws -> Int {
            try db.sync { c in try c.query("SELECT pg_relation_size('tasker_jobs')").first?.int(0) } ?? 0
        }
        try db.sync { c in
            try c.query("""
                INSERT INTO tasker_jobs (run, task, attempt, name, args) SELECT 'r', g, 1, 'work', '{}' FROM generate_series(1, 90000) g
                """)
            try c.execute("ANALYZE tasker_jobs")
        }
        #expect(try indexBytes() > QueueStore.bigBytes)
        // many live rows: their indexes are what they need
        #expect(try db.sync { c in try QueueStore.reindexIfBloated(.jobs, c) } == false)
        // most rows go and are vacuumed; the last ones (at the end of the
        // table) go after: fewer dead rows than the bound
        try db.sync { c in
            try c.query("DELETE FROM tasker_jobs WHERE task <= 80000")
            try c.execute("VACUUM tasker_jobs")
            try c.query("DELETE FROM tasker_jobs")
            // this session's counts reach the server's statistics now, not
            // when it has been idle for a while (a sweeper's session is)
            try c.query("SELECT pg_stat_force_next_flush()")
        }
        #expect(try tableBytes() > QueueStore.bigBytes)
        // the server's statistics lag by up to a second or so
        var vacuumed = false, rebuilt = false, keptPages = false
        let deadline = Date(timeIntervalSinceNow: 120)
        while !(vacuumed && rebuilt) && Date() < deadline {
            if !vacuumed {
                // In a burst the table keeps its pages (it is vacuumed only
                // if the statistics count more dead rows than the bound:
                // they may, counting the first delete's after the vacuum).
                let inBurst = try db.sync { c in try QueueStore.vacuumIfDead(.jobs, shrinking: false, c) }
                #expect(try tableBytes() > QueueStore.bigBytes)
                keptPages = keptPages || inBurst
                // the quiet sweep after shrinks it then, dead rows or not
                vacuumed = try db.sync { c in try QueueStore.vacuumIfDead(.jobs, pagesKept: keptPages, c) }
            }
            if !rebuilt { rebuilt = try db.sync { c in try QueueStore.reindexIfBloated(.jobs, c) } }
            if !(vacuumed && rebuilt) { try await Task.sleep(nanoseconds: 100_000_000) }
        }
        #expect(vacuumed && rebuilt)
        #expect(try tableBytes() < 1 << 20)
        #expect(try indexBytes() < 1 << 20)
    }

    /// The indexes 50,000 jobs leave once their claims and completions are
    /// all HOT updates (3.5 MiB: only the inserts add entries) are rebuilt
    /// too: a bound of 4 MiB kept them for good, past the 2 MiB a swept
    /// queue may keep.
    @Test func theIndexesOfAFiftyThousandJobRunAreRebuiltOnceSwept() async throws {
        let db = try await Self.queue()
        defer { db.stop() }
        func indexBytes() throws -> Int {
            try db.sync { c in try c.query("SELECT pg_indexes_size('tasker_jobs')").first?.int(0) } ?? 0
        }
        try db.sync { c in
            try c.query("""
                INSERT INTO tasker_jobs (run, task, attempt, name, args)
                SELECT 'run-20261129-0a1b2c', g, 1, 'work', '{}' FROM generate_series(1, 50000) g
                """)
            try c.query("DELETE FROM tasker_jobs")
        }
        let before = try indexBytes()
        #expect(before > 2 << 20 && before < 4 << 20, "\(before) bytes of indexes")
        #expect(try db.sync { c in try QueueStore.reindexIfBloated(.jobs, c) })
        #expect(try indexBytes() < 256 << 10)
    }

    /// No rebuild while a run goes on (it would double a stream's index
    /// work): only once its coordinator has stopped.
    @Test func indexesAreNotRebuiltWhileARunGoesOn() async throws {
        let db = try await Self.queue()
        defer { db.stop() }
        try db.sync { c in
            try c.query("""
                INSERT INTO tasker_jobs (run, task, attempt, name, args) SELECT 'r', g, 1, 'work', '{}' FROM generate_series(1, 90000) g
                """)
            try c.query("DELETE FROM tasker_jobs")
            try c.query("INSERT INTO tasker_coordinators (run, host, pid, lease) VALUES ('going', 'h', 1, 30)")
        }
        #expect(try db.sync { c in try QueueStore.reindexIfBloated(.jobs, c) } == false)
        _ = try db.sync { c in try c.query("UPDATE tasker_coordinators SET stopped = now()") }
        #expect(try db.sync { c in try QueueStore.reindexIfBloated(.jobs, c) })
    }

    /// A rebuild cut short (its worker killed) leaves an invalid index that
    /// every write keeps up to date: the next look drops it. An invalid
    /// index of someone else's (one being built beside) stays.
    @Test func anInvalidIndexLeftByACutRebuildIsDropped() async throws {
        let db = try await Self.queue()
        defer { db.stop() }
        func invalidIndexes() throws -> Int {
            try db.sync { c in
                try c.query("SELECT count(*) FROM pg_index WHERE indrelid = 'tasker_jobs'::regclass AND NOT indisvalid").first?.int(0)
            } ?? -1
        }
        // what REINDEX CONCURRENTLY leaves when it dies half-way (the test's
        // role is a superuser: it may mark the index so)
        try db.sync { c in
            try c.execute("CREATE INDEX tasker_jobs_queued_ccnew ON tasker_jobs (priority DESC, id) WHERE worker IS NULL")
            try c.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'tasker_jobs_queued_ccnew'::regclass")
            try c.execute("CREATE INDEX dba_idx ON tasker_jobs (name)")
            try c.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'dba_idx'::regclass")
        }
        #expect(try invalidIndexes() == 2)
        #expect(try db.sync { c in try QueueStore.reindexIfBloated(.jobs, c) })
        #expect(try invalidIndexes() == 1)
        // the table's own indexes are all there, and nothing more is done
        let names = try db.sync { c in
            try c.query("SELECT string_agg(indexrelid::regclass::text, ',' ORDER BY indexrelid::regclass::text) FROM pg_index WHERE indrelid = 'tasker_jobs'::regclass").first?.text(0)
        }
        #expect(names?.contains("tasker_jobs_pkey") == true && names?.contains("ccnew") == false && names?.contains("dba_idx") == true)
        #expect(try db.sync { c in try QueueStore.reindexIfBloated(.jobs, c) } == false)
    }
}

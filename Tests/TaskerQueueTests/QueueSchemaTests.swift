import Foundation
import PostgresTestServer
import Synchronization
import Testing
@testable import TaskerQueue

/// The store's schema version and its migrations, against a real PostgreSQL.
@Suite struct QueueSchemaTests {
    /// The tables exactly as releases before schema versions made them.
    static let unversioned = """
            CREATE TABLE IF NOT EXISTS tasker_jobs (
              id bigserial PRIMARY KEY,
              run text NOT NULL,
              task bigint NOT NULL,
              attempt int NOT NULL,
              name text NOT NULL,
              args text NOT NULL,
              priority int NOT NULL DEFAULT 0,
              timeout double precision,
              state text NOT NULL DEFAULT 'queued',
              worker text,
              claim bigint,
              claimed_at timestamptz,
              result text,
              error text,
              error_kind text,
              done_seq bigint,
              added_at timestamptz NOT NULL DEFAULT now(),
              finished_at timestamptz,
              UNIQUE (run, task, attempt)
            );
            CREATE SEQUENCE IF NOT EXISTS tasker_claim_seq;
            CREATE SEQUENCE IF NOT EXISTS tasker_done_seq;
            CREATE INDEX IF NOT EXISTS tasker_jobs_queued ON tasker_jobs (priority DESC, id) WHERE state = 'queued';
            CREATE TABLE IF NOT EXISTS tasker_workers (
              id text PRIMARY KEY,
              host text NOT NULL,
              pid int NOT NULL,
              lease double precision NOT NULL,
              heartbeat timestamptz NOT NULL DEFAULT now(),
              started timestamptz NOT NULL DEFAULT now(),
              stopped timestamptz
            );
            CREATE TABLE IF NOT EXISTS tasker_coordinators (
              run text PRIMARY KEY,
              host text NOT NULL,
              pid int NOT NULL,
              lease double precision NOT NULL,
              heartbeat timestamptz NOT NULL DEFAULT now(),
              stopped timestamptz
            );
            CREATE TABLE IF NOT EXISTS tasker_runs (
              id text PRIMARY KEY,
              pipeline text NOT NULL,
              args text NOT NULL,
              vars text NOT NULL,
              started double precision NOT NULL,
              ended double precision,
              exit_code int,
              counts text,
              pid int NOT NULL,
              host text NOT NULL,
              resumed_from text
            );
            CREATE INDEX IF NOT EXISTS tasker_runs_by_pipeline ON tasker_runs (pipeline, id);
            CREATE TABLE IF NOT EXISTS tasker_task_log (
              run text NOT NULL,
              seq int NOT NULL,
              data bytea NOT NULL,
              PRIMARY KEY (run, seq)
            );
            CREATE TABLE IF NOT EXISTS tasker_requests (
              run text NOT NULL,
              host text NOT NULL,
              requests int NOT NULL,
              retries int NOT NULL,
              failures int NOT NULL,
              PRIMARY KEY (run, host)
            );
        
            DO $$ BEGIN
              -- ALTER takes the table's strongest lock even when nothing is missing: look first.
              IF NOT EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
                             AND table_name = 'tasker_workers' AND column_name = 'versions') THEN
                ALTER TABLE tasker_jobs ADD COLUMN IF NOT EXISTS idempotency_key text,
                  ADD COLUMN IF NOT EXISTS version text, ADD COLUMN IF NOT EXISTS ran_version text,
                  ADD COLUMN IF NOT EXISTS error_value text, ADD COLUMN IF NOT EXISTS error_where text;
                ALTER TABLE tasker_workers ADD COLUMN IF NOT EXISTS defines text[] NOT NULL DEFAULT '{}',
                  ADD COLUMN IF NOT EXISTS versions text[] NOT NULL DEFAULT '{}';
              END IF;
            END $$;
        
        """

    @Test func aStoreFromBeforeSchemaVersionsIsUpgradedInPlace() async throws {
        let url = try await PostgresTestServer.freshDatabase().url
        let db = PGThread(url: url, name: "schema")
        defer { db.stop() }
        try db.sync { c in
            try c.execute(Self.unversioned)
            try c.execute("""
                INSERT INTO tasker_jobs (run, task, attempt, name, args) VALUES ('old-run', 1, 1, 'work', '{"n":1}');
                INSERT INTO tasker_jobs (run, task, attempt, name, args, state) VALUES ('old-run', 2, 1, 'work', '{"n":2}', 'cancelled');
                INSERT INTO tasker_runs (id, pipeline, args, vars, started, pid, host) VALUES ('old-run', '/p.lua', '[]', '{}', 1, 1, 'h');
                """)
            #expect(throws: (any Error).self) { try QueueSchema.storedVersion(c) }
        }
        try db.sync { c in try QueueSchema.ensure(c) }
        #expect(try db.sync { c in try QueueSchema.storedVersion(c) } == QueueSchema.version)
        // the queue is its own list (version 3): what the old release
        // queued is in it, a job it cancelled while queued is not (and
        // never claimed), and no index of the jobs depends on their state
        #expect(try db.sync { c in try c.query("SELECT string_agg(id::text, ',') FROM tasker_queue").first?.optionalText(0) } == "1")
        // and names its run (version 6)
        #expect(try db.sync { c in try c.query("SELECT string_agg(run, ',') FROM tasker_queue").first?.optionalText(0) } == "old-run")
        #expect(try db.sync { c in try c.query("SELECT to_regclass('tasker_jobs_queued') IS NULL").first?.bool(0) } == true)
        #expect(try db.sync { c in try c.query("SELECT worker FROM tasker_jobs WHERE task = 2").first?.optionalText(0) } == "")
        // what the old release queued is still claimed and completed
        let claimed = try db.sync { c in try QueueStore.claim(worker: "w", limit: 5, versions: ["work": "v1"], c) }
        #expect(claimed.map(\.run) == ["old-run"] && claimed.first?.args == "{\"n\":1}")
        let job = try #require(claimed.first)
        let done = JobCompletion(id: job.id, claim: job.claim, state: .succeeded, result: "[1]")
        #expect(try db.sync { c in try QueueStore.complete([done], c) } == [])
        // a second process finds it current and changes nothing
        try db.sync { c in try QueueSchema.ensure(c) }
        #expect(try db.sync { c in try c.query("SELECT count(*) FROM tasker_schema").first?.int(0) } == 1)
    }

    /// An upgrade waits behind a lock on the jobs (a VACUUM holds one that
    /// version 5's ALTER waits for), and another connection's upgrade waits
    /// behind it, however long past an answer's wait: a coordinator's two
    /// connections do this, and the second giving up failed the run as if
    /// the server were away.
    @Test func upgradesBehindALockWaitItOut() async throws {
        let url = try await PostgresTestServer.freshDatabase().url
        let setup = PGThread(url: url, name: "schema")
        defer { setup.stop() }
        try setup.sync { c in
            try QueueSchema.ensure(c)
            // from version 4: version 5's ALTER waits for the lock below
            try c.execute("UPDATE tasker_schema SET version = 4")
            try c.execute("BEGIN; LOCK TABLE tasker_jobs IN SHARE UPDATE EXCLUSIVE MODE")
        }
        // short, yet long enough for a loaded machine's other statements
        let answerWait = 1.0, outageLimit = 1.0
        let first = PGThread(url: url, name: "first", outageLimit: outageLimit, answerWait: answerWait)
        let second = PGThread(url: url, name: "second", outageLimit: outageLimit, answerWait: answerWait)
        defer { first.stop(); second.stop() }
        // on threads of their own, started now: each blocks until the lock
        // goes (the suite's shared threads may all be busy)
        let ended = DispatchSemaphore(value: 0)
        let failures = Mutex<[String]>([])
        for db in [first, second] {
            Thread {
                do { try db.sync { c in try QueueSchema.ensure(c) } } catch { failures.withLock { $0.append("\(error)") } }
                ended.signal()
            }.start()
        }
        // both wait: one for the table, the other for the first (seen from
        // outside the lock's transaction, whose view of the server's
        // activity stays as it first read it)
        let watcher = PGThread(url: url, name: "watcher")
        defer { watcher.stop() }
        // (a loaded suite's first minute: 30 s was seen to be too short)
        let deadline = Date(timeIntervalSinceNow: 90)
        var waiting = 0
        while waiting < 2 && Date() < deadline && failures.withLock({ $0.isEmpty }) {
            waiting = try watcher.sync { c in
                try c.query("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()")
                    .first?.int(0) ?? 0
            }
            if waiting < 2 { try await Task.sleep(nanoseconds: 20_000_000) }
        }
        #expect(waiting == 2, "\(failures.withLock { $0 })")
        // twice past an answer's wait and the outage limit after it
        try await Task.sleep(nanoseconds: UInt64(2 * (answerWait + outageLimit) * 1e9))
        try setup.sync { c in try c.execute("COMMIT") }
        for _ in 0..<2 { #expect(ended.wait(timeout: .now() + 60) == .success) }
        #expect(failures.withLock { $0 } == [])
        #expect(try setup.sync { c in try QueueSchema.storedVersion(c) } == QueueSchema.version)
    }

    /// Version 6 names each queued job's run in the queue's list, a list
    /// row whose job is gone included (left over until the tidying drops
    /// it: it must not stop the upgrade).
    @Test func version6NamesTheRunOfEveryQueuedJob() async throws {
        let url = try await PostgresTestServer.freshDatabase().url
        let db = PGThread(url: url, name: "schema")
        defer { db.stop() }
        try db.sync { c in
            try QueueSchema.ensure(c)
            // the store as version 5 left it
            try c.execute("""
                DROP INDEX tasker_coordinators_unheard;
                ALTER TABLE tasker_coordinators DROP COLUMN server_start;
                ALTER TABLE tasker_queue DROP COLUMN run;
                UPDATE tasker_schema SET version = 5;
                INSERT INTO tasker_jobs (run, task, attempt, name, args) VALUES ('a', 1, 1, 'work', '{}'), ('b', 1, 1, 'work', '{}');
                INSERT INTO tasker_queue SELECT id, priority, name FROM tasker_jobs;
                INSERT INTO tasker_queue VALUES (999999, 0, 'work');
                """)
            try QueueSchema.ensure(c)
        }
        let runs = try db.sync { c in try c.query("SELECT string_agg(run, ',' ORDER BY id) FROM tasker_queue").first?.optionalText(0) }
        #expect(runs == "a,b,")
        #expect(try db.sync { c in try QueueSchema.storedVersion(c) } == QueueSchema.version)
    }

    @Test func aStoreFromANewerTaskerIsRefusedWithTheReason() async throws {
        let url = try await PostgresTestServer.freshDatabase().url
        let db = PGThread(url: url, name: "schema")
        defer { db.stop() }
        try db.sync { c in try QueueSchema.ensure(c) }
        try db.sync { c in try c.execute("UPDATE tasker_schema SET version = version + 1") }
        #expect {
            try db.sync { c in try QueueSchema.ensure(c) }
        } throws: { error in
            "\(error)".contains("set up by a newer tasker (schema version \(QueueSchema.version + 1)")
        }
    }
}

/// The queue's tables, and the run journal's (`PGJournalStore`). One row per attempt of a defined task: the
/// coordinator inserts it, a worker claims it (`claim` is the fence: a
/// completion counts only with the claim it was given, and whatever ends a
/// claim clears it). The coordinator
/// reads finished rows by the ids their NOTIFY names, and every second by
/// the attempts it still waits for: never by a high-water mark on
/// `done_seq`, which would skip rows (two workers' commits land out of order).
/// Workers and coordinators hold leases (`tasker_workers`,
/// `tasker_coordinators`): silent past theirs, their claims are given up,
/// or their run's jobs cancelled.
enum QueueSchema {
    static let sql = """
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
        """

    /// What a job carries so that a worker runs it as one process would
    /// (the attempt number is `attempt`; the key and the definition's
    /// version as the coordinator computed them), which version ran it
    /// (`ran_version`, set by the claim), and the raised value when it was
    /// not an engine error (`error_value`, a JSON array of one value). A
    /// worker lists the definitions its FILE has (`defines`, `versions`:
    /// claims take only those). Added to tables of older versions too.
    static let definitionColumns = """
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

    /// The schema as ordered migrations: `migrations[i]` takes a store from
    /// version i to i + 1 (the row of `tasker_schema`). A change is a new
    /// migration at the end; one that has shipped is never edited.
    static let migrations = [
        // 1: the tables as the first releases made them (IF NOT EXISTS:
        // stores from before versions were kept have them already).
        sql + definitionColumns,
        hotCompletions,
        queueTable,
        workerProblem,
        roomForThreeVersions,
        queuedRuns,
        jobSecrets,
    ]

    /// 7: the coordinator's secrets that occur in a job's args (a JSON
    /// array; NULL: none), so the worker masks them in its logs, names and
    /// errors as the coordinator does. The args hold them anyway.
    static let jobSecrets = """
        ALTER TABLE tasker_jobs ADD COLUMN IF NOT EXISTS secrets text;
        """

    /// 6: the queue's list names each job's run, and a coordinator's
    /// heartbeat the server's start it was written under (`server_start`),
    /// so a claim can pass over the runs whose coordinator has not been
    /// heard from since the server (re)started (`QueueStore.claim`),
    /// whatever the clock does; their live coordinators are found through
    /// an index (the stopped ones stay for `--retain`). The run is last and
    /// defaults to '' so that a process of the release before, still
    /// running across the upgrade, lists its jobs as it did; its
    /// coordinators write no `server_start`: neither is ever passed over.
    /// Each queued row finds its run by the jobs' key: a join was planned
    /// as a walk of the list for every job (queue connections turn
    /// sequential scans off), 18 s for 20,000 queued.
    static let queuedRuns = """
        ALTER TABLE tasker_queue ADD COLUMN IF NOT EXISTS run text NOT NULL DEFAULT '';
        UPDATE tasker_queue q SET run = coalesce((SELECT j.run FROM tasker_jobs j WHERE j.id = q.id), '') WHERE q.run = '';
        ALTER TABLE tasker_coordinators ADD COLUMN IF NOT EXISTS server_start timestamptz;
        CREATE INDEX IF NOT EXISTS tasker_coordinators_unheard ON tasker_coordinators (server_start) WHERE stopped IS NULL;
        """

    /// 5: a job's row has three versions (queued, claimed, finished). At
    /// fillfactor 50 only two fit on its page while another session's
    /// snapshot keeps the first from being pruned: in two-worker runs one
    /// update in five was not HOT (two new index entries, and the row moved
    /// to another page). At 25 all three fit, small rows whose later
    /// versions grow the most included (30 was not enough for those): all
    /// updates HOT, and 12% less WAL a run (12.4 → 11.0 MB for 10,000
    /// jobs, measured). Pages already written keep their fill; new ones
    /// get the room.
    static let roomForThreeVersions = """
        ALTER TABLE tasker_jobs SET (fillfactor = 25);
        """

    /// 4: a worker whose claims fail says why in its row (`problem`, set
    /// by its heartbeat; NULL once a claim works again), so the run whose
    /// jobs wait can name it instead of waiting in silence.
    static let workerProblem = """
        ALTER TABLE tasker_workers ADD COLUMN IF NOT EXISTS problem text;
        """

    /// 2: a claim takes a job out of the queued index by `worker`, which
    /// its completion keeps, so a completion changes no indexed column and,
    /// with room left on its page (fillfactor), is a HOT update: no new
    /// index entries (half its cost, measured). A job cancelled while
    /// queued gets the worker '' (none) to leave the index too.
    static let hotCompletions = """
        UPDATE tasker_jobs SET worker = '' WHERE worker IS NULL AND state <> 'queued';
        DROP INDEX IF EXISTS tasker_jobs_queued;
        CREATE INDEX tasker_jobs_queued ON tasker_jobs (priority DESC, id) WHERE worker IS NULL;
        ALTER TABLE tasker_jobs SET (fillfactor = 70);
        """

    /// 3: what is queued is listed in `tasker_queue` (id, priority, name),
    /// which a claim deletes from, and no index of `tasker_jobs` depends on
    /// its state: a claim's update of the job, like its completion, changes
    /// no indexed column and, with room on the page (a job's row has three
    /// versions: version 5 gives them room), is a HOT update: no new index
    /// entries. Two clients claiming and completing 250 at a time: 57-62k
    /// jobs/s with the queued index of version 2, 88-90k with this
    /// (measured).
    static let queueTable = """
        CREATE TABLE IF NOT EXISTS tasker_queue (id bigint NOT NULL, priority int NOT NULL, name text NOT NULL);
        CREATE INDEX IF NOT EXISTS tasker_queue_order ON tasker_queue (priority DESC, id);
        INSERT INTO tasker_queue SELECT id, priority, name FROM tasker_jobs WHERE state = 'queued' AND worker IS NULL;
        DROP INDEX IF EXISTS tasker_jobs_queued;
        ALTER TABLE tasker_jobs SET (fillfactor = 50);
        """

    /// The version this build writes.
    static var version: Int { migrations.count }

    /// The store's version (0: none recorded); throws when there is no
    /// version table yet.
    static func storedVersion(_ c: PGConnection) throws -> Int {
        try c.query("SELECT max(version) FROM tasker_schema", once: true).first?.optionalInt(0) ?? 0
    }

    /// Brings the store to this build's version. A store already there is
    /// only read (no DDL, no lock); otherwise processes starting together
    /// take turns (CREATE … IF NOT EXISTS alone races on the catalog).
    static func ensure(_ c: PGConnection) throws {
        if let found = try? storedVersion(c) {
            if found > version { throw newer(found) }
            if found == version { return }
        }
        try c.transaction {
            // Waited for as long as the upgrade it waits behind: that one
            // may itself wait for a lock (a VACUUM of the jobs), and this
            // process's other connection may be the one upgrading (given
            // up, the run failed as if the server were away).
            try c.execute("SELECT pg_advisory_xact_lock(7165421)", waitingForEver: true)
            try c.execute("CREATE TABLE IF NOT EXISTS tasker_schema (version int NOT NULL)")
            let found = try storedVersion(c)
            if found > version { throw newer(found) }
            guard found < version else { return }
            for m in migrations[found...] { try c.execute(m, waitingForEver: true) }
            try c.execute("DELETE FROM tasker_schema; INSERT INTO tasker_schema VALUES (\(version))")
        }
    }

    private static func newer(_ found: Int) -> PGError {
        PGError(message: "the store was set up by a newer tasker (schema version \(found); this one knows \(version)): "
                + "upgrade tasker", sqlState: nil)
    }
}

import Foundation
import TaskerCore

/// A job a worker claimed; `claim` goes back with its completion.
public struct ClaimedJob: Sendable {
    public var id: Int64
    public var claim: Int64
    public var run: String
    public var name: String
    public var args: String
    public var timeout: Double?
    /// The coordinator's attempt number (counted across claims and workers).
    public var attempt: Int
    /// The task's idempotency key on the coordinator.
    public var key: String?
    /// The coordinator's version of the definition.
    public var version: String?
    /// The coordinator's secrets that occur in `args` (masked here too).
    public var secrets: [String] = []
}

/// How a claimed job ended on the worker.
public struct JobCompletion: Sendable {
    public enum State: String, Sendable { case succeeded, failed, cancelled }
    public var id: Int64
    public var claim: Int64
    public var state: State
    /// The values as a JSON array (succeeded).
    public var result: String?
    public var error: String?
    public var errorKind: String?
    /// The script position the error names ("file:line").
    public var errorWhere: String?
    /// The raised value as a JSON array of one, when it was not an engine
    /// error table (the coordinator raises the same value).
    public var errorValue: String?

    public init(id: Int64, claim: Int64, state: State, result: String? = nil, error: String? = nil, errorKind: String? = nil,
                errorWhere: String? = nil, errorValue: String? = nil) {
        self.id = id
        self.claim = claim
        self.state = state
        self.result = result
        self.error = error
        self.errorKind = errorKind
        self.errorWhere = errorWhere
        self.errorValue = errorValue
    }
}

/// A finished attempt, as the coordinator reads it back.
public struct FinishedJob: Sendable {
    public var task: Int
    public var attempt: Int
    public var state: String
    public var result: String?
    public var error: String?
    public var errorKind: String?
    public var errorWhere: String?
    public var errorValue: String?
    public var name: String
    /// The coordinator's version of the definition, and the one that ran.
    public var version: String?
    public var ranVersion: String?
    public var worker: String?
    public var seq: Int64
}

/// The queue's statements, run on a connection by its owning thread.
enum QueueStore {
    static let jobsChannel = "tasker_jobs"
    static let doneChannel = "tasker_done"
    static let cancelChannel = "tasker_cancel"

    /// Inserts attempts of `run` (an attempt already there is left alone: a
    /// resumed coordinator, or a batch sent again after a lost connection,
    /// may hand one over again) and wakes the workers.
    static func enqueue(run: String, _ attempts: [RemoteAttempt], _ c: PGConnection) throws {
        guard !attempts.isEmpty else { return }
        let params = [run, PGArray.integers(attempts.map(\.task)), PGArray.integers(attempts.map(\.attempt)),
                      PGArray.text(attempts.map(\.name)), PGArray.text(attempts.map(\.args)),
                      PGArray.integers(attempts.map(\.priority)),
                      PGArray.text(attempts.map { a in a.timeout.map { String($0) } }),
                      PGArray.text(attempts.map(\.key)), PGArray.text(attempts.map(\.version)),
                      PGArray.text(attempts.map(\.secrets))]
        // A plain insert first: ON CONFLICT inserts each row speculatively
        // and confirms it (measured: 10,000 rows in 66-94 ms against 46).
        // The statement is all or nothing, so when one attempt is there
        // already it inserts none, and the batch goes again skipping those.
        do {
            try c.query(enqueuePlain, params)
        } catch let e as PGError where e.sqlState == "23505" {
            try c.query(enqueueSkipping, params)
        }
    }

    /// Prepares `enqueue`'s statement ahead of the first insert.
    static func prepareEnqueue(_ c: PGConnection) throws {
        try c.prepare(enqueuePlain, parameters: 10)
    }

    private static let enqueuePlain = enqueueStatementText(skippingPresent: false)
    private static let enqueueSkipping = enqueueStatementText(skippingPresent: true)

    private static func enqueueStatementText(skippingPresent: Bool) -> String {
        """
        WITH ins AS (INSERT INTO tasker_jobs(run, task, attempt, name, args, priority, timeout, idempotency_key, version, secrets)
          SELECT $1, * FROM unnest($2::bigint[], $3::int[], $4::text[], $5::text[], $6::int[], $7::float8[], $8::text[], $9::text[],
                                   $10::text[])
          \(skippingPresent ? "ON CONFLICT (run, task, attempt) DO NOTHING" : "") RETURNING id, priority, name),
             q AS (INSERT INTO tasker_queue (id, priority, name, run) SELECT id, priority, name, $1::text FROM ins)
        SELECT pg_notify('\(jobsChannel)', count(*)::text) FROM ins
        """
    }

    /// Claims up to `limit` queued jobs for `worker` among the definitions
    /// it has (`versions` by name: the version that runs each claim is
    /// recorded with it): highest priority first, then in the order they
    /// were added; rows other workers hold are skipped, not waited for, and
    /// jobs of other definitions stay queued for a worker that has them.
    /// The claimed jobs leave `tasker_queue` (by their row's address: the
    /// rows just locked); the job's own update is fenced by its state, so
    /// a queue row left over by anything else is dropped, never run. They
    /// come back in claim order (the worker starts them in it): deleted by
    /// address, they came in the order of their rows on disk.
    ///
    /// The jobs are found by their ids as one list (an index lookup each),
    /// not joined to the deleted rows: planned while the statistics said
    /// the jobs table was empty (just swept), the join walked the whole
    /// primary key at every claim, each claim then took ~250 ms and a
    /// 10,000-job run 10-28 s with both cores busy.
    ///
    /// The limit is read through a subquery so that the prepared statement
    /// keeps one generic plan: given as `LIMIT $2`, a custom plan priced
    /// for the known limit always looked cheaper, and the server planned
    /// this statement again at every claim (measured: a 10-job claim took
    /// 0.79 ms, 0.40-0.62 ms with the subquery). The plan is the same walk
    /// of the queue's index either way.
    ///
    /// Jobs of a run whose coordinator has not heartbeat since the server
    /// started are passed over (`unheard`). A coordinator stopped by a
    /// signal while the server was away could not say so: after a restart
    /// its lease counts from the server's start, and until it lapses
    /// nothing tells it from a live one still reconnecting, so its jobs
    /// would run though the user stopped the run. A live coordinator
    /// heartbeats as soon as it reconnects; a dead one's jobs are cancelled
    /// once its lease lapses (`rescue`). Outside such a window the check
    /// finds nothing in an index of the live coordinators (a claim of 10
    /// with 10,000 queued: the same 0.3-0.6 ms with and without it).
    static func claim(worker: String, limit: Int, versions: [String: String?], _ c: PGConnection) throws -> [ClaimedJob] {
        let names = versions.keys.sorted()
        let rows = try c.query("""
            WITH c AS (SELECT ctid FROM tasker_queue WHERE name = ANY($3::text[]) AND NOT \(unheard("tasker_queue.run"))
                       ORDER BY priority DESC, id LIMIT (SELECT $2::int) FOR UPDATE SKIP LOCKED),
                 q AS (DELETE FROM tasker_queue WHERE ctid = ANY(ARRAY(SELECT ctid FROM c)) RETURNING id),
                 k AS (SELECT nextval('tasker_claim_seq') AS claim),
                 u AS (UPDATE tasker_jobs j SET state = 'running', worker = $1, claim = (SELECT claim FROM k), claimed_at = now(),
                         ran_version = ($4::text[])[array_position($3::text[], j.name)]
                       WHERE j.id = ANY(ARRAY(SELECT id FROM q)) AND j.state = 'queued' AND j.worker IS NULL
                       RETURNING j.id, j.claim, j.run, j.name, j.args, j.timeout, j.attempt, j.idempotency_key, j.version,
                         j.priority, j.secrets)
            SELECT id, claim, run, name, args, timeout, attempt, idempotency_key, version, secrets FROM u
            ORDER BY priority DESC, id
            """, [worker, String(limit), PGArray.text(names), PGArray.text(names.map { versions[$0] ?? nil })])
        return try rows.rows.map { r throws(PGError) in
            ClaimedJob(id: try r.int64(0), claim: try r.int64(1), run: try r.text(2), name: try r.text(3), args: try r.text(4),
                       timeout: try r.optionalDouble(5), attempt: try r.optionalInt(6) ?? 1, key: r.optionalText(7),
                       version: r.optionalText(8), secrets: secrets(r.optionalText(9)))
        }
    }

    /// A job's `secrets` column (a JSON array of strings).
    private static func secrets(_ text: String?) -> [String] {
        guard let text, let list = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String] else { return [] }
        return list
    }

    /// Whether `run`'s live coordinator has not heartbeat since the server
    /// started: its last heartbeat was written under an earlier start (by
    /// the start, not by the clock: a clock stepped back made every
    /// heartbeat look older than the start). An anti-join through the
    /// index of live coordinators: a list of such runs filtered with
    /// `<> ALL` was priced as keeping almost no row, and the claim was
    /// planned as a scan and sort of the whole queue (7 ms a claim against
    /// 0.4, with 10,000 queued).
    static func unheard(_ run: String) -> String {
        "EXISTS (SELECT 1 FROM tasker_coordinators k WHERE k.run = \(run) AND \(unheardCoordinator))"
    }

    /// A coordinator `k` alive by its row but not heard from since the server started.
    static let unheardCoordinator = "k.stopped IS NULL AND k.server_start < pg_postmaster_start_time()"

    /// Whether some run's jobs are passed over now (see `unheard`).
    static func anyUnheard(_ c: PGConnection) throws -> Bool {
        try c.query("SELECT EXISTS (SELECT 1 FROM tasker_coordinators k WHERE \(unheardCoordinator))").first?.bool(0) ?? false
    }

    /// Names of queued jobs that none of `names` matches (at most a few:
    /// for a worker to say once which jobs it leaves to others). The list
    /// alone: it has no index by id, and a join to the jobs was planned
    /// as a scan of the list per job (0.9 s with 10,000 queued, at every
    /// worker's start); rows left over are tidied within 30 s.
    static func queuedNames(notIn names: [String], _ c: PGConnection) throws -> [String] {
        try c.query("""
            SELECT DISTINCT name FROM (SELECT name FROM tasker_queue WHERE name <> ALL($1::text[]) LIMIT 1000) q
            """, [PGArray.text(names.sorted())]).firstColumn
    }

    /// Those of `names` that no live worker (heartbeating within its
    /// lease) defines.
    /// Whether worker `w` is alive: its lease has not lapsed (see `lapsed`:
    /// the server's start counts as a heartbeat, so just after an outage
    /// the workers that could not heartbeat through it are not taken for
    /// dead and no job is said to lack one).
    static func live(_ w: String) -> String {
        "greatest(\(w).heartbeat, pg_postmaster_start_time() + make_interval(secs => \(restartGrace))) >= now() - make_interval(secs => \(w).lease)"
    }

    static func undefined(_ names: [String], _ c: PGConnection) throws -> [String] {
        try c.query("""
            SELECT n FROM unnest($1::text[]) AS n WHERE NOT EXISTS (
              SELECT 1 FROM tasker_workers w WHERE w.stopped IS NULL
                AND \(live("w")) AND n = ANY(w.defines))
            """, [PGArray.text(names.sorted())]).firstColumn
    }

    /// Records why the worker's claims fail (nil: they work).
    static func record(worker: String, problem: String?, _ c: PGConnection) throws {
        try c.query("UPDATE tasker_workers SET problem = $2 WHERE id = $1", [worker, problem])
    }

    /// Names among `names` that live workers define but none of them can
    /// claim (each has a problem; a healthy one may just be busy): the
    /// name, each such worker and why, by name then worker.
    static func troubled(_ names: [String], _ c: PGConnection) throws -> [(name: String, worker: String, problem: String)] {
        let rows = try c.query("""
            SELECT n, w.id, w.problem FROM unnest($1::text[]) AS n JOIN tasker_workers w ON n = ANY(w.defines)
            WHERE w.stopped IS NULL AND \(live("w")) AND w.problem IS NOT NULL
              AND NOT EXISTS (SELECT 1 FROM tasker_workers h
                              WHERE h.stopped IS NULL AND \(live("h"))
                                AND n = ANY(h.defines) AND h.problem IS NULL)
            ORDER BY n, w.id
            """, [PGArray.text(names.sorted())])
        return try rows.rows.map { r throws(PGError) in (try r.text(0), try r.text(1), try r.text(2)) }
    }

    /// Records completions that still hold their claim, tells the
    /// coordinators, and returns the ids that were refused (the claim was
    /// lost: the job was rescued, cancelled or handed back meanwhile).
    static func complete(_ done: [JobCompletion], _ c: PGConnection) throws -> [Int64] {
        guard !done.isEmpty else { return [] }
        // One statement, one round trip: the UPDATE and, per run, a NOTIFY
        // (`DoneNotice`) that gives the short results of attempts that
        // succeeded on the coordinator's version of their definition (it
        // need not read their rows: a read was ~8 µs a job of the
        // server's time) and names the other finished ids; past a
        // payload's size it names them all, and past 500 jobs none (the
        // coordinator then looks by what it waits for).
        // The claim alone is the fence: whatever ends a claim (this, a
        // cancel, a rescue, a hand-back) clears it. (A state test here let
        // the planner walk the partial index of running rows, dead entries
        // and all, once per completion.)
        //
        // No join: the rows are found by their ids as a list (an index
        // lookup each), and each row's values by its place in that sorted
        // list (`width_bucket`, a binary search) in a JSON array. Joined to
        // the lists, the plan followed the server's row estimate, and an
        // estimate of none (a vacuum that could not shrink the emptied
        // table leaves one) walked the whole table for each completion, or
        // read the batch again for each row: a 10,000-job run took 7-56 s.
        var accepted = Set<Int64>()
        // A jsonb value holds at most 256 MiB: big results go in several
        // statements (`completionParts`).
        for part in completionParts(byPlace(done, \.id)) {
            let values = PGJSON.rows(part.map { d in [d.state.rawValue, d.result, d.error, d.errorKind, d.errorWhere, d.errorValue] })
            let rows = try c.query("""
                WITH u AS (UPDATE tasker_jobs j SET
                             state = $3::jsonb -> (width_bucket(j.id, $1::bigint[]) - 1) ->> 0,
                             result = $3::jsonb -> (width_bucket(j.id, $1::bigint[]) - 1) ->> 1,
                             error = $3::jsonb -> (width_bucket(j.id, $1::bigint[]) - 1) ->> 2,
                             error_kind = $3::jsonb -> (width_bucket(j.id, $1::bigint[]) - 1) ->> 3,
                             error_where = $3::jsonb -> (width_bucket(j.id, $1::bigint[]) - 1) ->> 4,
                             error_value = $3::jsonb -> (width_bucket(j.id, $1::bigint[]) - 1) ->> 5,
                             claim = NULL, done_seq = nextval('tasker_done_seq'), finished_at = now()
                           WHERE j.id = ANY($1::bigint[]) AND j.claim = ($2::bigint[])[width_bucket(j.id, $1::bigint[])]
                           RETURNING j.id, j.run, j.task, j.attempt, j.result, j.done_seq,
                             j.state = 'succeeded' AND j.version IS NOT DISTINCT FROM j.ran_version
                               AND coalesce(octet_length(j.result), 0) <= \(DoneNotice.givenResultBytes) AS given),
                     r AS (SELECT run, count(*) AS n, string_agg(id::text, ',') AS ids,
                             coalesce(string_agg(id::text, ',') FILTER (WHERE NOT given), '') AS unread,
                             coalesce(json_agg(json_build_array(task, attempt, result) ORDER BY done_seq) FILTER (WHERE given)::text,
                                      '[]') AS results
                           FROM u GROUP BY run),
                     n AS (SELECT pg_notify('\(doneChannel)', CASE
                             WHEN n > 500 THEN run
                             WHEN octet_length(run) + octet_length(unread) + octet_length(results) < \(DoneNotice.payloadBytes)
                               THEN run || ' ' || unread || ' ' || results
                             ELSE run || ' ' || ids END) FROM r)
                SELECT id FROM u, (SELECT count(*) FROM n) notified
                """, [PGArray.integers(part.map(\.id)), PGArray.integers(part.map(\.claim)), values])
            for r in rows.rows { accepted.insert(try r.int64(0)) }
        }
        return done.map(\.id).filter { !accepted.contains($0) }
    }

    /// `items` one per id (the last given) in the order of their ids: the
    /// sorted list whose places `width_bucket` finds, so a statement reads
    /// each row's values by place instead of joining a list.
    static func byPlace<T>(_ items: [T], _ id: (T) -> Int64) -> [T] {
        // sorted by id, then by place: the last of each id is the one kept
        let order = items.indices.sorted { a, b in
            let (x, y) = (id(items[a]), id(items[b]))
            return x != y ? x < y : a < b
        }
        var out: [T] = []
        out.reserveCapacity(order.count)
        for (n, i) in order.enumerated() where n + 1 == order.count || id(items[order[n + 1]]) != id(items[i]) {
            out.append(items[i])
        }
        return out
    }

    /// Bytes of values one completion statement carries at most: escaped
    /// in JSON a byte takes up to six (`\u0001`), and 6 × 32 MiB stays
    /// under jsonb's 256 MiB.
    static let completionBytes = 32 << 20

    /// `sorted` cut into runs whose values stay under `completionBytes`
    /// (a row bigger than that alone goes alone).
    static func completionParts(_ sorted: [JobCompletion]) -> [ArraySlice<JobCompletion>] {
        var parts: [ArraySlice<JobCompletion>] = []
        var start = 0, bytes = 0
        for (i, d) in sorted.enumerated() {
            let size = 64 + (d.result?.utf8.count ?? 0) + (d.error?.utf8.count ?? 0) + (d.errorKind?.utf8.count ?? 0)
                + (d.errorWhere?.utf8.count ?? 0) + (d.errorValue?.utf8.count ?? 0)
            if i > start && bytes + size > completionBytes {
                parts.append(sorted[start..<i])
                start = i
                bytes = 0
            }
            bytes += size
        }
        if start < sorted.count { parts.append(sorted[start...]) }
        return parts
    }

    static func notifyDone(runs: Set<String>, _ c: PGConnection) throws {
        for run in runs { try c.query("SELECT pg_notify('\(doneChannel)', $1)", [run]) }
    }

    /// The finished attempts among `ids` (named by a NOTIFY).
    static func finished(ids: [Int64], _ c: PGConnection) throws -> [FinishedJob] {
        guard !ids.isEmpty else { return [] }
        return try finishedRows(c.query("""
            SELECT \(finishedColumns) FROM tasker_jobs
            WHERE id = ANY($1::bigint[]) AND done_seq IS NOT NULL
            """, [PGArray.integers(ids)]))
    }

    /// The finished attempts of `run` among `tasks` (the backstop: what a
    /// lost notification would have named).
    static func finished(run: String, tasks: [Int], _ c: PGConnection) throws -> [FinishedJob] {
        guard !tasks.isEmpty else { return [] }
        return try finishedRows(c.query("""
            SELECT \(finishedColumns) FROM tasker_jobs
            WHERE run = $1 AND task = ANY($2::bigint[]) AND done_seq IS NOT NULL
            """, [run, PGArray.integers(tasks)]))
    }

    private static let finishedColumns =
        "task, attempt, state, result, error, error_kind, error_where, error_value, name, version, ran_version, worker, done_seq"

    private static func finishedRows(_ rows: PGRows) throws(PGError) -> [FinishedJob] {
        try rows.rows.map { r throws(PGError) in
            FinishedJob(task: try r.int(0), attempt: try r.int(1), state: try r.text(2), result: r.optionalText(3),
                        error: r.optionalText(4), errorKind: r.optionalText(5), errorWhere: r.optionalText(6),
                        errorValue: r.optionalText(7), name: try r.text(8), version: r.optionalText(9),
                        ranVersion: r.optionalText(10), worker: r.optionalText(11), seq: try r.int64(12))
        }.sorted { $0.seq < $1.seq }
    }

    /// The attempts of `run` among `tasks` whose rows are queued, running
    /// or finished (a result to read): those of a lapsed run that are
    /// neither were cancelled, or deleted once cancelled.
    static func liveOrFinished(run: String, tasks: [Int], _ c: PGConnection) throws -> [(task: Int, attempt: Int)] {
        guard !tasks.isEmpty else { return [] }
        return try c.query("""
            SELECT task, attempt FROM tasker_jobs
            WHERE run = $1 AND task = ANY($2::bigint[]) AND (state IN ('queued', 'running') OR done_seq IS NOT NULL)
            """, [run, PGArray.integers(tasks.map(Int64.init))]).rows.map { r throws(PGError) in (try r.int(0), try r.int(1)) }
    }

    /// Cancels attempts of `run` that are queued or running, in one
    /// statement however many (a run stopped with thousands waiting); a
    /// worker running one hears of it at once (NOTIFY) or at its next
    /// heartbeat. Locks in (task, attempt) order, as every cancel does.
    static func cancel(run: String, attempts: [(task: Int, attempt: Int)], _ c: PGConnection) throws {
        guard !attempts.isEmpty else { return }
        // One statement per set of distinct tasks: the jobs are found by
        // the list of tasks (the run's index) and each one's attempt by its
        // task's place in that sorted list (`width_bucket`); their list
        // rows by the queue's index, from the lists of their priorities and
        // ids. No join, whose plan would follow the row estimate (see
        // `complete`: joined to the list rows, the jobs' lookup ran again
        // for each row). Two attempts of one task in one list are rare: the
        // later goes next.
        var rest = attempts.sorted { ($0.task, $0.attempt) < ($1.task, $1.attempt) }
        while !rest.isEmpty {
            var set: [(task: Int, attempt: Int)] = [], later: [(task: Int, attempt: Int)] = []
            for a in rest {
                if set.last?.task == a.task { later.append(a) } else { set.append(a) }
            }
            let rows = try c.query("""
                WITH \(unlisting(listedAttempt)),
                     u AS (UPDATE tasker_jobs j SET state = 'cancelled', error = 'cancelled by the coordinator', error_kind = 'cancelled',
                             claim = NULL, worker = coalesce(worker, ''), finished_at = now()
                           WHERE \(afterUnlisting) AND \(listedAttempt) AND j.state IN ('queued', 'running')
                           RETURNING j.id, j.worker)
                SELECT id, worker FROM u
                """, [run, PGArray.integers(set.map { Int64($0.task) }), PGArray.integers(set.map { Int64($0.attempt) })])
            try notifyCancelled(rows, c)
            rest = later
        }
    }

    /// Job `j` is of run $1, its task in the sorted list $2 and its attempt
    /// the one at that task's place in $3.
    private static let listedAttempt =
        "j.run = $1 AND j.task = ANY($2::bigint[]) AND j.attempt = ($3::int[])[width_bucket(j.task, $2::bigint[])]"

    /// A cancel unlists the queued jobs it ends (`d`: the list rows of the
    /// queued jobs `j` that `jobs` picks), then updates the jobs: in that
    /// order, as a claim locks them (list rows, then jobs). Updating the
    /// jobs first, a cancel and a claim each held what the other waited
    /// for: a deadlock, whose victim (the cancel, often) was rolled back,
    /// and its job then ran. The list rows are found through the queue's
    /// index by the jobs' priorities and ids, not joined to the jobs.
    private static func unlisting(_ jobs: String) -> String {
        """
        s AS MATERIALIZED (SELECT j.id, j.priority FROM tasker_jobs j WHERE \(jobs) AND j.state = 'queued' AND j.worker IS NULL),
        d AS (DELETE FROM tasker_queue q
              WHERE q.priority = ANY(ARRAY(SELECT DISTINCT priority FROM s)) AND q.id = ANY(ARRAY(SELECT id FROM s))
              RETURNING q.id)
        """
    }
    /// Makes the update wait for `d`: a one-time filter reading it.
    private static let afterUnlisting = "(SELECT count(*) FROM d) >= 0"

    /// The statement that sends the jobs `fromWhere` picks (`j`) back to
    /// the queue and lists them again; it returns their ids.
    private static func requeue(_ fromWhere: String) -> String {
        """
        WITH b AS (UPDATE tasker_jobs j SET state = 'queued', worker = NULL, claim = NULL \(fromWhere)
                   RETURNING j.id, j.priority, j.name, j.run),
             q AS (INSERT INTO tasker_queue (id, priority, name, run) SELECT id, priority, name, run FROM b)
        SELECT id FROM b
        """
    }

    /// Tells the workers running the jobs in `rows` (`id, worker`) that
    /// they were cancelled (a job cancelled while queued has the worker '').
    private static func notifyCancelled(_ rows: PGRows, _ c: PGConnection) throws {
        let ids = try rows.rows.filter { !($0.optionalText(1) ?? "").isEmpty }.map { r throws(PGError) in try r.text(0) }
        guard !ids.isEmpty else { return }
        // one notification per job (a worker reads one id from each), sent in one statement
        try c.query("SELECT pg_notify('\(cancelChannel)', id) FROM unnest($1::text[]) AS id", [PGArray.text(ids)])
    }

    /// Registers (or re-registers) a worker with the definitions it has.
    static func register(worker: String, host: String, pid: Int32, lease: Double, versions: [String: String?],
                         _ c: PGConnection) throws {
        let names = versions.keys.sorted()
        try c.query("""
            INSERT INTO tasker_workers(id, host, pid, lease, defines, versions) VALUES ($1, $2, $3::int, $4::float8, $5::text[], $6::text[])
            ON CONFLICT (id) DO UPDATE SET heartbeat = now(), stopped = NULL, lease = EXCLUDED.lease,
              defines = EXCLUDED.defines, versions = EXCLUDED.versions
            """, [worker, host, String(pid), String(lease), PGArray.text(names), PGArray.text(names.map { versions[$0] ?? nil })],
            once: true)
    }

    /// The worker is alive, and why its claims fail if they do (`problem`,
    /// nil when they work). Returns whether it had been declared dead (its
    /// claims are gone) and which of `running` it must stop (cancelled, or
    /// no longer its own).
    static func heartbeat(worker: String, running: [Int64], problem: String? = nil,
                          _ c: PGConnection) throws -> (wasDead: Bool, stop: [Int64]) {
        let rows = try c.query("""
            UPDATE tasker_workers SET heartbeat = now(), problem = $2 WHERE id = $1 RETURNING stopped IS NOT NULL
            """, [worker, problem])
        let wasDead = try rows.first?.bool(0) ?? true
        var stop: [Int64] = []
        if !running.isEmpty {
            let list = PGArray.integers(running)
            // A row that is gone (its run ended and was swept, or pruned)
            // is no longer this worker's either.
            let r = try c.query("""
                SELECT id FROM unnest($1::bigint[]) AS id
                EXCEPT SELECT id FROM tasker_jobs WHERE id = ANY($1::bigint[]) AND state = 'running' AND worker = $2
                """, [list, worker])
            stop = try r.rows.map { r throws(PGError) in try r.int64(0) }
        }
        return (wasDead, stop)
    }

    /// Seconds a process gets, after the server (re)started, to reconnect
    /// and heartbeat before its lease counts again: it may be in its
    /// longest reconnect backoff (5 s) when the server comes back.
    static let restartGrace = StoreOutage.maxBackoff

    /// Whether a lease has lapsed: no heartbeat for `lease` seconds, the
    /// server's own start counting as one (a restart or stop silenced
    /// everyone: an outage, not a death).
    private static let lapsed = """
        greatest(heartbeat, pg_postmaster_start_time() + make_interval(secs => \(restartGrace)))
          < now() - make_interval(secs => lease)
        """

    /// Workers silent past their lease lose their claims: each running job
    /// of theirs becomes a failed attempt of kind `lost`. Runs whose
    /// coordinator is silent past its lease have their queued and running
    /// jobs cancelled (nobody waits for their results).
    static func rescue(_ c: PGConnection) throws {
        try c.transaction {
            // Usually nobody is dead: then the jobs table is not touched
            // (there is no index by worker; a dead worker is rare enough
            // for a scan, and an index of running rows slowed every claim).
            let dead = try c.query("""
                UPDATE tasker_workers SET stopped = now()
                WHERE stopped IS NULL AND \(lapsed) RETURNING id
                """).firstColumn
            if !dead.isEmpty {
                let rows = try c.query("""
                    UPDATE tasker_jobs j SET state = 'failed', error_kind = 'lost', claim = NULL,
                      error = 'worker ' || j.worker || ' stopped heartbeating: its claim was given up',
                      done_seq = nextval('tasker_done_seq'), finished_at = now()
                    WHERE j.state = 'running' AND j.worker = ANY($1::text[])
                    RETURNING j.run
                    """, [PGArray.text(dead)])
                try notifyDone(runs: Set(rows.firstColumn), c)
            }
            let orphaned = try c.query("""
                UPDATE tasker_coordinators SET stopped = now()
                WHERE stopped IS NULL AND \(lapsed) RETURNING run
                """).firstColumn
            if !orphaned.isEmpty {
                try cancel(runs: orphaned, why: "its coordinator stopped heartbeating", c)
            }
        }
    }

    /// Cancels the queued and running jobs of `runs`; the workers running
    /// them hear of it at once (NOTIFY) or at their next heartbeat.
    static func cancel(runs: [String], why: String, _ c: PGConnection) throws {
        let rows = try c.query("""
            WITH \(unlisting("j.run = ANY($1::text[])")),
                 u AS (UPDATE tasker_jobs SET state = 'cancelled', error = 'cancelled: ' || $2, error_kind = 'cancelled',
                         claim = NULL, worker = coalesce(worker, ''), finished_at = now()
                       WHERE \(afterUnlisting) AND run = ANY($1::text[]) AND state IN ('queued', 'running')
                       RETURNING id, worker)
            SELECT id, worker FROM u
            """, [PGArray.text(runs), why])
        try notifyCancelled(rows, c)
    }

    // MARK: the coordinator's lease

    /// Registers the coordinator of `run`: it heartbeats, and once it is
    /// silent past `lease` the workers cancel the run's jobs.
    static func register(run: String, host: String, pid: Int32, lease: Double, _ c: PGConnection) throws {
        try c.query("""
            INSERT INTO tasker_coordinators(run, host, pid, lease, server_start)
              VALUES ($1, $2, $3::int, $4::float8, pg_postmaster_start_time())
            ON CONFLICT (run) DO UPDATE SET host = $2, pid = $3::int, lease = $4::float8, heartbeat = now(), stopped = NULL,
              server_start = pg_postmaster_start_time()
            """, [run, host, String(pid), String(lease)], once: true)
    }

    /// The coordinator is alive; false when it had been declared dead (the
    /// run's jobs were cancelled).
    @discardableResult
    /// Renews a coordinator's lease: true, or false when its row says it
    /// stopped (the workers' rescue found its lease lapsed), nil when the
    /// row is gone (a crash lost its commit, or a lapsed run was swept).
    static func heartbeat(run: String, _ c: PGConnection) throws -> Bool? {
        let rows = try c.query("""
            UPDATE tasker_coordinators SET heartbeat = now(), server_start = pg_postmaster_start_time() WHERE run = $1
            RETURNING stopped IS NULL
            """, [run])
        return try rows.first?.bool(0)
    }

    /// The run has ended: its lease is given up, and any of its jobs still
    /// queued or running is cancelled (the run cancels each task it stops,
    /// but a cancel lost to a crash or a restart at that moment would leave
    /// the workers running them; this statement is the one that counts).
    /// Not `leftovers`: the coordinator accounts for every job of the run
    /// (each read back ended, or cancelled by a statement that worked, and
    /// no connection lost meanwhile), and only the lease is given up.
    static func coordinatorStopped(run: String, leftovers: Bool = true, _ c: PGConnection) throws {
        guard leftovers else {
            // One round trip instead of four at every run's end: the
            // statement is its own transaction, and set_config's local
            // setting holds for that transaction's commit.
            try c.query("""
                UPDATE tasker_coordinators SET stopped = now()
                WHERE run = $1 AND set_config('synchronous_commit', 'on', true) IS NOT NULL
                """, [run], once: true)
            return
        }
        try c.transaction {
            // one flush a run: this commit survives a crash that follows
            try c.execute("SET LOCAL synchronous_commit TO on")
            if leftovers { try cancel(runs: [run], why: "its run ended", c) }
            try markStopped(run: run, c)
        }
    }

    /// Cancels what is left of `run` and marks its lease given up (inside
    /// the caller's transaction).
    private static func stop(run: String, why: String, _ c: PGConnection) throws {
        try cancel(runs: [run], why: why, c)
        try markStopped(run: run, c)
    }

    private static func markStopped(run: String, _ c: PGConnection) throws {
        try c.query("UPDATE tasker_coordinators SET stopped = now() WHERE run = $1", [run])
    }

    /// A resumed run takes over the run it resumes: when that run's
    /// coordinator is gone (stopped, silent past its lease, or a process of
    /// this machine that no longer exists) its jobs are cancelled now rather
    /// than when its lease lapses. Returns whether it was taken over.
    @discardableResult
    static func takeOver(run: String, host: String, _ c: PGConnection) throws -> Bool {
        let rows = try c.query("""
            SELECT host, pid, stopped IS NOT NULL OR \(lapsed) FROM tasker_coordinators WHERE run = $1
            """, [run])
        if let r = rows.first {
            let gone = try r.bool(2) || (r.optionalText(0) == host && !processExists(Int32(try r.int(1))))
            guard gone else { return false }
        }
        try c.transaction { try stop(run: run, why: "its run was resumed by another coordinator", c) }
        return true
    }

    /// Whether process `pid` of this machine is alive: a zombie (killed,
    /// not yet reaped by its parent: a container whose first process does
    /// not reap) is not.
    static func processExists(_ pid: Int32) -> Bool {
        guard pid > 0, kill(pid, 0) == 0 || errno == EPERM else { return false }
        // /proc/PID/stat: "pid (comm) S …"; comm may hold spaces and parentheses
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return true }
        let state = stat[stat.index(after: close)...].drop { $0 == " " }.first
        return state != "Z" && state != "X"
    }

    /// After a claim whose answer was lost with the connection (it may have
    /// been committed): the worker's running jobs it does not know of
    /// (`known`: those it runs or has results of) go back to the queue.
    static func handBackUnknown(worker: String, known: [Int64], _ c: PGConnection) throws {
        let rows = try c.query(requeue("WHERE j.worker = $1 AND j.state = 'running' AND NOT j.id = ANY($2::bigint[])"),
                               [worker, PGArray.integers(known)])
        if rows.count > 0 { try c.query("SELECT pg_notify('\(jobsChannel)', '')") }
    }

    /// Jobs this worker stopped without finishing them (it could not
    /// heartbeat for a whole lease) go back to the queue, unless their
    /// claim ended meanwhile (rescued, cancelled).
    static func handBack(_ jobs: [(id: Int64, claim: Int64)], _ c: PGConnection) throws {
        guard !jobs.isEmpty else { return }
        // by place in the sorted ids, as a completion (no join: see `complete`)
        let sorted = byPlace(jobs, \.id)
        let rows = try c.query(requeue("WHERE j.id = ANY($1::bigint[]) AND j.claim = ($2::bigint[])[width_bucket(j.id, $1::bigint[])]"),
                               [PGArray.integers(sorted.map(\.id)), PGArray.integers(sorted.map(\.claim))])
        if rows.count > 0 { try c.query("SELECT pg_notify('\(jobsChannel)', '')") }
    }

    /// A worker that stops hands back what it still holds.
    static func handBack(worker: String, _ c: PGConnection) throws {
        try c.query(requeue("WHERE j.worker = $1 AND j.state = 'running'"), [worker])
        try markStopped(worker: worker, c)
        try c.query("SELECT pg_notify('\(jobsChannel)', '')")
    }

    /// A worker that stopped (it holds nothing any more).
    static func markStopped(worker: String, _ c: PGConnection) throws {
        try c.query("UPDATE tasker_workers SET stopped = now() WHERE id = $1", [worker])
    }
}

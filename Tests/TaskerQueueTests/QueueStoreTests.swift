import Foundation
import PostgresTestServer
import TaskerCore
import Testing
@testable import TaskerQueue

/// The queue's statements against a real PostgreSQL.
@Suite struct QueueStoreTests {
    let url: String
    let db: PGThread
    /// The definitions the test's workers have.
    static let work: [String: String?] = ["work": "v1"]

    init() async throws {
        (db, url) = try await FreshQueue.make()
    }

    func job(_ task: Int, priority: Int = 0) -> RemoteAttempt {
        RemoteAttempt(task: task, attempt: 1, name: "work", args: "{\"n\":\(task)}", priority: priority, timeout: nil)
    }

    /// A worker silent past its lease is gone, unless the server has just
    /// started: then it could not heartbeat through the outage, and no
    /// job is said to lack a worker (a coordinator warned a second after
    /// the server came back, before the workers had reconnected).
    @Test func workersSilentThroughARestartAreNotTakenForGone() async throws {
        let server = try await PostgresTestServer.isolated()
        defer { server.destroy() }
        let db = PGThread(url: server.url(), name: "restart")
        defer { db.stop() }
        try db.sync { c in
            try QueueSchema.ensure(c)
            try QueueStore.register(worker: "w1", host: "h", pid: 1, lease: 30, versions: ["work": nil], c)
            try c.execute("UPDATE tasker_workers SET heartbeat = now() - interval '40 seconds'")
        }
        #expect(server.restart())
        let afterRestart: [String] = try db.sync { c in try QueueStore.undefined(["work"], c) }
        #expect(afterRestart == [], "taken for gone just after a restart")
    }

    @Test func claimsByPriorityThenAddOrder() throws {
        try db.sync { c in try QueueStore.enqueue(run: "r1", [job(1), job(2, priority: 5), job(3), job(4, priority: 5)], c) }
        let first = try db.sync { c in try QueueStore.claim(worker: "w1", limit: 2, versions: QueueStoreTests.work, c) }
        #expect(Set(first.map(\.args)) == ["{\"n\":2}", "{\"n\":4}"])
        let next = try db.sync { c in try QueueStore.claim(worker: "w2", limit: 10, versions: QueueStoreTests.work, c) }
        #expect(next.map(\.args).sorted() == ["{\"n\":1}", "{\"n\":3}"])
        #expect(try db.sync { c in try QueueStore.claim(worker: "w2", limit: 10, versions: QueueStoreTests.work, c) }.isEmpty)
        // the same attempt handed over again (a resumed coordinator) is not queued twice
        try db.sync { c in try QueueStore.enqueue(run: "r1", [job(1)], c) }
        #expect(try db.sync { c in try QueueStore.claim(worker: "w2", limit: 10, versions: QueueStoreTests.work, c) }.isEmpty)
        // a batch with one attempt there already and new ones: the new ones
        // are queued (once), the present one is left alone
        try db.sync { c in try QueueStore.enqueue(run: "r1", [job(5), job(3), job(6)], c) }
        let again = try db.sync { c in try QueueStore.claim(worker: "w2", limit: 10, versions: QueueStoreTests.work, c) }
        #expect(again.map(\.args).sorted() == ["{\"n\":5}", "{\"n\":6}"])
        let rows = try db.sync { c in try c.query("SELECT count(*), count(DISTINCT task) FROM tasker_jobs WHERE run = 'r1'") }
        #expect(rows.first?.optionalText(0) == "6" && rows.first?.optionalText(1) == "6")
    }

    /// A claimed batch comes back in claim order, whatever the order of
    /// its rows on disk (the worker starts its jobs in it).
    @Test func aClaimedBatchIsInPriorityThenAddOrder() throws {
        try db.sync { c in
            try QueueStore.enqueue(run: "r1", (1...5).map { job($0) }, c)
            try QueueStore.enqueue(run: "r1", (6...10).map { job($0, priority: 1) }, c)
        }
        let got = try db.sync { c in try QueueStore.claim(worker: "w", limit: 8, versions: QueueStoreTests.work, c) }
        #expect(got.map(\.args) == [6, 7, 8, 9, 10, 1, 2, 3].map { "{\"n\":\($0)}" })
    }

    @Test func twoConnectionsNeverClaimTheSameJob() async throws {
        try db.sync { c in try QueueStore.enqueue(run: "r1", (1...200).map { job($0) }, c) }
        let other = PGThread(url: url, name: "test2")
        defer { other.stop() }
        async let a: [ClaimedJob] = Self.drain(db, "a")
        async let b: [ClaimedJob] = Self.drain(other, "b")
        let (ja, jb) = try await (a, b)
        #expect(ja.count + jb.count == 200)
        #expect(Set(ja.map(\.id)).isDisjoint(with: jb.map(\.id)))
    }

    static func drain(_ t: PGThread, _ worker: String) async throws -> [ClaimedJob] {
        var all: [ClaimedJob] = []
        while true {
            let got = try t.sync { c in try QueueStore.claim(worker: worker, limit: 7, versions: QueueStoreTests.work, c) }
            if got.isEmpty { return all }
            all += got
        }
    }

    @Test func aCompletionCountsOnlyForTheClaimThatMadeIt() throws {
        try db.sync { c in try QueueStore.enqueue(run: "r1", [job(1)], c) }
        let j = try #require(try db.sync { c in try QueueStore.claim(worker: "w1", limit: 1, versions: QueueStoreTests.work, c) }.first)
        let wrongClaim = JobCompletion(id: j.id, claim: j.claim + 1, state: .succeeded, result: "[1]")
        #expect(try db.sync { c in try QueueStore.complete([wrongClaim], c) } == [j.id])
        let right = JobCompletion(id: j.id, claim: j.claim, state: .succeeded, result: "[2]")
        #expect(try db.sync { c in try QueueStore.complete([right], c) } == [])
        // a second completion of the same claim is refused: recorded once
        #expect(try db.sync { c in try QueueStore.complete([right], c) } == [j.id])
        let done = try db.sync { c in try QueueStore.finished(run: "r1", tasks: [1], c) }
        #expect(done.count == 1)
        #expect(done.first?.result == "[2]")
        #expect(try db.sync { c in try QueueStore.finished(ids: [j.id], c) }.map(\.result) == ["[2]"])
    }

    /// Neither a claim nor a completion changes an indexed column, and a
    /// job's row has room for its three versions (queued, claimed,
    /// finished) on its page even while another session's snapshot keeps
    /// the first from being pruned: both are HOT updates (no new index
    /// entries; the row stays on its page). A cancelled queued job leaves
    /// the queue's list.
    @Test func claimsAndCompletionsAreHOTUpdates() throws {
        try db.sync { c in try QueueStore.enqueue(run: "r1", (1...200).map { job($0) }, c) }
        let pages = "SELECT string_agg(((ctid::text)::point)[0]::text, ',' ORDER BY id) FROM tasker_jobs"
        let pagesBefore = try db.sync { c in try c.query(pages).first?.optionalText(0) }
        let reader = PGThread(url: url, name: "old snapshot")
        defer { reader.stop() }
        try reader.sync { c in try c.execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM tasker_jobs") }
        var hotBefore = try hotUpdates()
        let js = try db.sync { c in try QueueStore.claim(worker: "w", limit: 200, versions: QueueStoreTests.work, c) }
        #expect(js.count == 200)
        let hotClaims = try hotUpdates() - hotBefore
        #expect(hotClaims == 200, "\(hotClaims) of 200 claims were HOT")
        hotBefore = try hotUpdates()
        #expect(try db.sync { c in
            try QueueStore.complete(js.map { JobCompletion(id: $0.id, claim: $0.claim, state: .succeeded, result: "[]") }, c)
        }.isEmpty)
        let hot = try hotUpdates() - hotBefore
        #expect(hot == 200, "\(hot) of 200 completions were HOT")
        #expect(try db.sync { c in try c.query(pages).first?.optionalText(0) } == pagesBefore)
        try db.sync { c in
            try QueueStore.enqueue(run: "r2", [job(1)], c)
            try QueueStore.cancel(run: "r2", attempts: [(1, 1)], c)
        }
        #expect(try db.sync { c in try c.query("SELECT worker FROM tasker_jobs WHERE run = 'r2'").first?.optionalText(0) } == "")
        #expect(try queueList() == [])
        #expect(try db.sync { c in try QueueStore.claim(worker: "w", limit: 5, versions: QueueStoreTests.work, c) }.isEmpty)
    }

    /// A worker keeps its statements' plans: one that started beside an
    /// empty (just swept) queue plans its claims and completions while the
    /// jobs table has no rows. Those plans must still read only the rows
    /// they touch once it holds thousands: a claim joined to its rows
    /// through the whole primary key read every job, each time (a 10,000-job
    /// run took 10-28 s).
    @Test func plansMadeWhileTheTableWasEmptyReadOnlyTheirOwnRows() throws {
        // Emptied as a sweep leaves them, vacuumed without giving pages
        // back (a vacuum that could not take the lock to): the statistics
        // then say pages but no rows, and every plan, kept or made at each
        // run, takes the table for empty whatever it holds. After five runs
        // the server may also keep a generic plan made for it.
        try db.sync { c in try QueueStore.enqueue(run: "r0", (1...3000).map { job($0) }, c) }
        try db.sync { c in
            try c.query("DELETE FROM tasker_queue")
            try c.query("DELETE FROM tasker_jobs")
            try c.execute("VACUUM (TRUNCATE false) tasker_jobs", waitingForEver: true)
            try c.execute("VACUUM (TRUNCATE false) tasker_queue", waitingForEver: true)
        }
        let stats = try db.sync { c in try c.query("SELECT relpages, reltuples FROM pg_class WHERE relname = 'tasker_jobs'") }
        #expect(try stats.first?.int(0) ?? 0 > 0 && stats.first?.optionalText(1) == "0", "the state this test is about")
        for n in 1...8 {
            #expect(try db.sync { c in try QueueStore.claim(worker: "w", limit: 10, versions: QueueStoreTests.work, c) }.isEmpty)
            let none = (1...n).map { JobCompletion(id: Int64($0), claim: 1, state: .succeeded, result: "[]") }
            #expect(try db.sync { c in try QueueStore.complete(none, c) }.count == n)
        }
        try db.sync { c in try QueueStore.enqueue(run: "r1", (1...3000).map { job($0) }, c) }
        let before = try jobIndexReads()
        var done = 0
        for _ in 0..<20 {
            let js = try db.sync { c in try QueueStore.claim(worker: "w", limit: 10, versions: QueueStoreTests.work, c) }
            let finished = js.map { JobCompletion(id: $0.id, claim: $0.claim, state: .succeeded, result: "[]") }
            #expect(try db.sync { c in try QueueStore.complete(finished, c) }.isEmpty)
            done += js.count
        }
        #expect(done == 200)
        // 20 claims and 20 completions of 10 rows each: ~400 index entries
        // (one plan that walks the table reads 3,000 at each statement)
        let read = try jobIndexReads() - before
        #expect(read < 3000, "\(read) index entries of tasker_jobs read for 200 jobs")
        // a heartbeat's check of 10 claimed and a hand-back of them
        let held = try db.sync { c in try QueueStore.claim(worker: "w", limit: 10, versions: QueueStoreTests.work, c) }
        let beforeBack = try jobIndexReads()
        let beat = try db.sync { c in try QueueStore.heartbeat(worker: "w", running: held.map(\.id) + [999_999], c) }
        #expect(beat.stop == [999_999])
        try db.sync { c in try QueueStore.handBack(held.map { ($0.id, $0.claim) }, c) }
        let backRead = try jobIndexReads() - beforeBack
        #expect(backRead < 3000, "\(backRead) index entries read to check and hand back 10 jobs")
        // a cancel of the 2,800 left, in one statement: about one entry each
        let left = try jobIndexReads()
        try db.sync { c in try QueueStore.cancel(run: "r1", attempts: (201...3000).map { ($0, 1) }, c) }
        let cancelRead = try jobIndexReads() - left
        #expect(cancelRead < 20_000, "\(cancelRead) index entries read to cancel 2,800 jobs")
        let states = try db.sync { c in try c.query("SELECT state, count(*) FROM tasker_jobs WHERE run = 'r1' GROUP BY state ORDER BY state") }
        #expect(states.rows.map { "\($0.optionalText(0) ?? ""):\($0.optionalText(1) ?? "")" } == ["cancelled:2800", "succeeded:200"])
        #expect(try queueList() == [])
    }

    /// Two attempts of one task in one cancel list: both end.
    @Test func aCancelListWithTwoAttemptsOfATaskEndsBoth() throws {
        var second = job(1)
        second.attempt = 2
        try db.sync { c in try QueueStore.enqueue(run: "r1", [job(1), second, job(2)], c) }
        try db.sync { c in try QueueStore.cancel(run: "r1", attempts: [(1, 2), (2, 1), (1, 1)], c) }
        let rows = try db.sync { c in try c.query("SELECT task, attempt, state FROM tasker_jobs ORDER BY task, attempt") }
        #expect(rows.rows.map { "\($0.optionalText(0) ?? "")/\($0.optionalText(1) ?? ""):\($0.optionalText(2) ?? "")" }
                == ["1/1:cancelled", "1/2:cancelled", "2/1:cancelled"])
        #expect(try queueList() == [])
    }

    /// A completion's values reach the row as they were sent, each on its
    /// own row, however they are written (a batch is found by the place of
    /// each id in a sorted list, the values by that place in JSON).
    @Test func completionsKeepEveryValueOnItsOwnRow() throws {
        try db.sync { c in try QueueStore.enqueue(run: "r1", (1...6).map { job($0) }, c) }
        let js = try db.sync { c in try QueueStore.claim(worker: "w", limit: 6, versions: QueueStoreTests.work, c) }
        #expect(js.count == 6)
        let texts = ["[\"with \\\"quotes\\\" and \\\\ back\"]", "[\"ünïcödé ✓ 🚀\\ttab\"]", "[]", "[null]", "[\"a\u{1}b\"]"]
        var done: [JobCompletion] = []
        for (k, j) in js.reversed().enumerated() {  // not in id order
            if k < texts.count {
                done.append(JobCompletion(id: j.id, claim: j.claim, state: .succeeded, result: texts[k]))
            } else {
                done.append(JobCompletion(id: j.id, claim: j.claim, state: .failed, error: "line 1\nline \"2\"\0end", errorKind: "error",
                                          errorWhere: "defs.lua:3", errorValue: nil))
            }
        }
        let stale = JobCompletion(id: js[0].id, claim: js[0].claim + 99, state: .succeeded, result: "[1]")
        #expect(try db.sync { c in try QueueStore.complete(done, c) }.isEmpty)
        #expect(try db.sync { c in try QueueStore.complete([stale], c) } == [js[0].id])
        let rows = try db.sync { c in
            try c.query("SELECT id, state, result, error, error_kind, error_where, error_value, claim FROM tasker_jobs ORDER BY id").rows
        }
        for r in rows {
            let sent = try #require(done.first { $0.id == (try? r.int64(0)) })
            #expect(r.optionalText(1) == sent.state.rawValue)
            #expect(r.optionalText(2) == sent.result)
            #expect(r.optionalText(3) == sent.error?.replacingOccurrences(of: "\0", with: "\u{FFFD}"))
            #expect(r.optionalText(4) == sent.errorKind && r.optionalText(5) == sent.errorWhere && r.optionalText(6) == nil)
            #expect(r.optionalText(7) == nil)
        }
        #expect(rows.count == 6)
    }

    /// Index entries of `tasker_jobs` read by scans so far (flushed first).
    func jobIndexReads() throws -> Int {
        try db.sync { c in
            try c.query("SELECT pg_stat_force_next_flush()")
            try c.query("SELECT 1")
            return try c.query("SELECT sum(idx_tup_read)::bigint FROM pg_stat_user_indexes WHERE relname = 'tasker_jobs'").first?.int(0) ?? -1
        }
    }

    /// The tasks of `tasker_queue`, in claim order.
    func queueList() throws -> [Int] {
        try db.sync { c in
            try c.query("SELECT j.task FROM tasker_queue q JOIN tasker_jobs j ON j.id = q.id ORDER BY q.priority DESC, q.id")
                .rows.map { r throws(PGError) in try r.int(0) }
        }
    }

    /// Every way a job becomes queued or stops being so keeps the queue's
    /// list in step: enqueue, claim, cancel (one, or a run's), each
    /// hand-back; a job is never listed twice nor lost from the list.
    @Test func theQueueListFollowsEveryWayAJobComesAndGoes() throws {
        try db.sync { c in
            try QueueStore.enqueue(run: "r1", (1...6).map { job($0) }, c)
            try QueueStore.enqueue(run: "r2", [job(7), job(8)], c)
            try QueueStore.enqueue(run: "r1", [job(1)], c)  // again: listed once
        }
        #expect(try queueList() == [1, 2, 3, 4, 5, 6, 7, 8])
        try db.sync { c in
            try QueueStore.cancel(run: "r1", attempts: [(6, 1)], c)
            try QueueStore.cancel(runs: ["r2"], why: "test", c)
        }
        #expect(try queueList() == [1, 2, 3, 4, 5])
        let a = try db.sync { c in try QueueStore.claim(worker: "wa", limit: 2, versions: QueueStoreTests.work, c) }
        let b = try db.sync { c in try QueueStore.claim(worker: "wb", limit: 2, versions: QueueStoreTests.work, c) }
        #expect(a.count == 2 && b.count == 2)
        #expect(try queueList() == [5])
        // back to the queue: by claim, a stopping worker's, and what a worker does not know of
        try db.sync { c in try QueueStore.handBack([(a[0].id, a[0].claim)], c) }
        #expect(try queueList().sorted() == [1, 5])
        try db.sync { c in try QueueStore.handBack(worker: "wa", c) }
        #expect(try queueList().sorted() == [1, 2, 5])
        try db.sync { c in try QueueStore.handBackUnknown(worker: "wb", known: [b[0].id], c) }
        #expect(try queueList().sorted() == [1, 2, 4, 5])
        // a running job cancelled is not listed again; the rest run once each
        try db.sync { c in try QueueStore.cancel(run: "r1", attempts: [(3, 1)], c) }
        let rest = try db.sync { c in try QueueStore.claim(worker: "wc", limit: 10, versions: QueueStoreTests.work, c) }
        #expect(rest.map(\.args).sorted() == ["{\"n\":1}", "{\"n\":2}", "{\"n\":4}", "{\"n\":5}"])
        #expect(try queueList() == [])
        // a job queued without its list row (by a release before the
        // list) is listed by the sweeper's tidy, once, and then claimed;
        // a list row whose job is not queued (of a name nobody claims) goes
        _ = try db.sync { c in
            try c.query("INSERT INTO tasker_jobs (run, task, attempt, name, args) VALUES ('old', 9, 1, 'work', '{\"n\":9}')")
            try c.query("INSERT INTO tasker_queue SELECT id, priority, 'nobody' FROM tasker_jobs WHERE task = 2")
        }
        #expect(try db.sync { c in try QueueStore.claim(worker: "wd", limit: 10, versions: QueueStoreTests.work, c) }.isEmpty)
        #expect(try db.sync { c in try QueueStore.tidyList(c) } == 1)
        #expect(try db.sync { c in try QueueStore.tidyList(c) } == 0)
        #expect(try db.sync { c in try c.query("SELECT count(*) FROM tasker_queue").first?.int(0) } == 1)
        #expect(try db.sync { c in try QueueStore.claim(worker: "wd", limit: 10, versions: QueueStoreTests.work, c) }.map(\.args) == ["{\"n\":9}"])
        // a list row whose job is no longer queued is dropped, never run
        _ = try db.sync { c in try c.query("INSERT INTO tasker_queue SELECT id, priority, name FROM tasker_jobs WHERE task = 1") }
        #expect(try db.sync { c in try QueueStore.claim(worker: "wd", limit: 10, versions: QueueStoreTests.work, c) }.isEmpty)
        #expect(try queueList() == [])
    }

    /// A cancel and claims beside it never deadlock (they lock list rows,
    /// then jobs, in that order): the cancel ends every job of its run that
    /// no claim took, and none of them is listed or claimed after.
    @Test func aCancelBesideClaimsEndsEveryJobItDidNotLoseToAClaim() async throws {
        for round in 1...3 {
            let run = "big\(round)"
            try db.sync { c in try QueueStore.enqueue(run: run, (1...4000).map { job($0) }, c) }
            let other = PGThread(url: url, name: "claimer")
            defer { other.stop() }
            async let claimed: [ClaimedJob] = {
                var all: [ClaimedJob] = []
                for _ in 0..<40 {
                    all += try other.sync { c in try QueueStore.claim(worker: "w", limit: 50, versions: QueueStoreTests.work, c) }
                }
                return all
            }()
            try db.sync { c in try QueueStore.cancel(runs: [run], why: "test", c) }
            let got = try await claimed
            let states = try db.sync { c in
                try c.query("SELECT state, count(*) FROM tasker_jobs WHERE run = $1 GROUP BY state ORDER BY state", [run])
                    .rows.map { r throws(PGError) in "\(try r.text(0))=\(try r.int(1))" }
            }
            // claimed before the cancel: cancelled while running (their workers hear of it); the rest cancelled queued
            #expect(states == ["cancelled=4000"], "\(states), \(got.count) claimed")
            #expect(try queueList() == [])
        }
    }

    /// HOT updates of `tasker_jobs` so far (this connection's flushed first).
    /// The payloads of `tasker_done`, as a coordinator hears them.
    func doneNotices() -> (PayloadBox, PGListener) {
        let payloads = PayloadBox()
        let listener = PGListener(url: url, channels: [QueueStore.doneChannel], tick: 30,
                                  onNotify: { _, p in payloads.add(p) }, onTick: {})
        return (payloads, listener)
    }

    func hotUpdates() throws -> Int {
        try db.sync { c in
            try c.query("SELECT pg_stat_force_next_flush()")
            try c.query("SELECT 1")
            return try c.query("SELECT n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'tasker_jobs'").first?.int(0) ?? -1
        }
    }

    @Test func arrayParametersKeepQuotesAndBackslashes() throws {
        let values = ["plain", "with \"quotes\"", "back\\slash", "comma, {brace}", "", "NULL", "ünïcödé ✓ 🚀",
                      "\\\"\\", "tab\tand\nnewline", " spaced "]
        let rows = try db.sync { c in
            try c.query("SELECT unnest($1::text[])", [PGArray.text(values)]).rows.map { $0.optionalText(0) }
        }
        #expect(rows == values)
        // NULLs stay NULL (the string "NULL" stays a string); a NUL becomes U+FFFD
        let optional: [String?] = [nil, "NULL", "a\0b", nil]
        let back = try db.sync { c in
            try c.query("SELECT unnest($1::text[])", [PGArray.text(optional)]).rows.map { $0.optionalText(0) }
        }
        #expect(back == [nil, "NULL", "a\u{FFFD}b", nil])
        let none = try db.sync { c in try c.query("SELECT cardinality($1::text[])", [PGArray.text([String]())]) }
        #expect(none.first?.optionalText(0) == "0")
        let ints = try db.sync { c in try c.query("SELECT sum(x) FROM unnest($1::bigint[]) x", [PGArray.integers([1, 2, 40, -5, Int64.max - 100])]) }
        #expect(ints.first?.optionalText(0) == String(Int64(38) + (Int64.max - 100)))
    }

    /// Rows are read by type: a NULL where a value must be, or text of
    /// another type, is an error naming the column, not a crash.
    @Test func rowsAreReadByTypeAndABadValueNamesItsColumn() throws {
        let rows = try db.sync { c in
            try c.query("SELECT 7::bigint AS n, NULL::text AS missing, 'x' AS word, true AS yes, 2.5::float8 AS d")
        }
        let r = try #require(rows.first)
        #expect(rows.names == ["n", "missing", "word", "yes", "d"])
        #expect(try r.int64(0) == 7 && r.optionalText(1) == nil && (try r.text(2)) == "x")
        #expect(try r.bool(3) && (try r.double(4)) == 2.5 && (try r.optionalInt(1)) == nil)
        func failure(_ read: () throws -> Any) -> String? {
            do { _ = try read() } catch { return (error as? PGError)?.message ?? "\(error)" }
            return nil
        }
        #expect(failure { try r.text(1) } == "column missing is NULL")
        #expect(failure { try r.int64(2) } == "column word: 'x' is not an integer")
        #expect(failure { try r.bool(0) } == "column n: '7' is not a boolean")
        #expect(failure { try r.double(2) } == "column word: 'x' is not a number")
        // integers of every width, read from the bytes or (19 digits) as text
        let ints = try db.sync { c in
            try c.query("SELECT -5::bigint, 9223372036854775807::bigint, (-9223372036854775807 - 1)::bigint, 0::bigint, ''")
        }
        let i = try #require(ints.first)
        #expect(try i.int64(0) == -5 && i.int64(1) == .max && i.int64(2) == .min && i.int64(3) == 0)
        #expect(failure { try i.int64(4) } != nil)
    }

    @Test func aSilentWorkerLosesItsClaims() throws {
        try db.sync { c in
            try QueueSchema.ensure(c)
            try QueueStore.register(worker: "dead", host: "h", pid: 1, lease: 0.2, versions: QueueStoreTests.work, c)
            try QueueStore.register(worker: "alive", host: "h", pid: 2, lease: 60, versions: QueueStoreTests.work, c)
            try QueueStore.enqueue(run: "r1", [job(1), job(2)], c)
        }
        let a = try db.sync { c in try QueueStore.claim(worker: "dead", limit: 1, versions: QueueStoreTests.work, c) }
        let b = try db.sync { c in try QueueStore.claim(worker: "alive", limit: 1, versions: QueueStoreTests.work, c) }
        // rescue looks at heartbeats against the database clock: wait past
        // the lease, and past the grace a freshly (re)started server gives
        // everyone to reconnect (the test server may have just started)
        _ = try db.sync { c in
            try c.query("SELECT pg_sleep(greatest(0.3, extract(epoch FROM pg_postmaster_start_time() + interval '5.3 s' - now())::float8))")
        }
        try db.sync { c in try QueueStore.rescue(c) }
        let done = try db.sync { c in try QueueStore.finished(run: "r1", tasks: [1, 2], c) }
        #expect(done.map(\.task) == [1])
        #expect(done.first?.errorKind == "lost")
        // the dead worker's late completion is refused; it hears it was declared dead
        let late = JobCompletion(id: a[0].id, claim: a[0].claim, state: .succeeded, result: "[]")
        #expect(try db.sync { c in try QueueStore.complete([late], c) } == [a[0].id])
        let beat = try db.sync { c in try QueueStore.heartbeat(worker: "dead", running: [a[0].id], c) }
        #expect(beat.wasDead)
        #expect(beat.stop == [a[0].id])
        let alive = try db.sync { c in try QueueStore.heartbeat(worker: "alive", running: [b[0].id], c) }
        #expect(!alive.wasDead && alive.stop.isEmpty)
    }

    @Test func cancelReachesTheRunningWorkerAtItsHeartbeat() throws {
        try db.sync { c in
            try QueueStore.register(worker: "w", host: "h", pid: 1, lease: 60, versions: QueueStoreTests.work, c)
            try QueueStore.enqueue(run: "r1", [job(1)], c)
        }
        let j = try db.sync { c in try QueueStore.claim(worker: "w", limit: 1, versions: QueueStoreTests.work, c) }
        try db.sync { c in try QueueStore.cancel(run: "r1", attempts: [(1, 1)], c) }
        #expect(try db.sync { c in try QueueStore.heartbeat(worker: "w", running: [j[0].id], c) }.stop == [j[0].id])
    }

    /// Many attempts cancel in one statement: the queued ones leave the
    /// list, the running ones' workers each hear of their own job, and an
    /// attempt that is not there (or is done already) is left alone.
    @Test func aRunsManyCancelsEndEveryJobInOneStatement() throws {
        let payloads = PayloadBox()
        let listener = PGListener(url: url, channels: [QueueStore.cancelChannel], tick: 30,
                                  onNotify: { _, p in payloads.add(p) }, onTick: {})
        defer { listener.stop() }
        try db.sync { c in
            try QueueStore.enqueue(run: "r1", (1...300).map { job($0) }, c)
            try QueueStore.enqueue(run: "r2", [job(1)], c)
        }
        let running = try db.sync { c in try QueueStore.claim(worker: "w", limit: 20, versions: QueueStoreTests.work, c) }
        #expect(running.count == 20)
        let done = running[0]
        _ = try db.sync { c in try QueueStore.complete([JobCompletion(id: done.id, claim: done.claim, state: .succeeded, result: "[]")], c) }
        let attempts = (1...300).reversed().map { (task: $0, attempt: 1) } + [(task: 999, attempt: 1), (task: 5, attempt: 2)]
        try db.sync { c in try QueueStore.cancel(run: "r1", attempts: attempts, c) }
        let states = try db.sync { c in
            try c.query("SELECT run, state, worker, count(*) FROM tasker_jobs GROUP BY 1, 2, 3 ORDER BY 1, 2, 3")
                .rows.map { r throws(PGError) in "\(try r.text(0)) \(try r.text(1)) \(r.optionalText(2) ?? "-") \(try r.int(3))" }
        }
        #expect(states == ["r1 cancelled  280", "r1 cancelled w 19", "r1 succeeded w 1", "r2 queued - 1"])
        #expect(try queueList() == [1])  // r2's
        var heard: Set<Int64> = []
        while heard.count < 19, let p = payloads.wait(), let id = Int64(p) { heard.insert(id) }
        #expect(heard == Set(running.dropFirst().map(\.id)))
    }

    /// A run whose coordinator has not heartbeat since the server started
    /// (stopped by a signal while the server was away, it could not say
    /// so) has its jobs passed over, however they came to the queue (its
    /// enqueue, a hand-back, the list's tidying), until it heartbeats;
    /// other runs' jobs are claimed meanwhile.
    @Test func jobsOfARunUnheardSinceTheServerStartedArePassedOver() throws {
        try db.sync { c in
            try QueueStore.register(run: "unheard", host: "h", pid: 1, lease: 60, c)
            try QueueStore.register(run: "live", host: "h", pid: 1, lease: 60, c)
            try QueueStore.enqueue(run: "unheard", [job(1, priority: 9), job(2, priority: 9)], c)
            try QueueStore.enqueue(run: "live", [job(3), job(4)], c)
        }
        // a claim before the server "restarted": the unheard run's first job, by priority
        let early = try db.sync { c in try QueueStore.claim(worker: "w", limit: 1, versions: QueueStoreTests.work, c) }
        #expect(early.map(\.run) == ["unheard"])
        try db.sync { c in
            try c.execute("UPDATE tasker_coordinators SET server_start = pg_postmaster_start_time() - interval '1 second' WHERE run = 'unheard'")
            // its job comes back to the queue; another of its jobs is relisted by the tidying
            try QueueStore.handBack(early.map { (id: $0.id, claim: $0.claim) }, c)
            try c.execute("DELETE FROM tasker_queue WHERE id = (SELECT id FROM tasker_jobs WHERE run = 'unheard' AND task = 2)")
            #expect(try QueueStore.tidyList(c) == 1)
        }
        let meanwhile = try db.sync { c in try QueueStore.claim(worker: "w", limit: 10, versions: QueueStoreTests.work, c) }
        #expect(meanwhile.map(\.args) == ["{\"n\":3}", "{\"n\":4}"])
        #expect(try db.sync { c in try QueueStore.anyUnheard(c) })
        #expect(try db.sync { c in try QueueStore.heartbeat(run: "unheard", c) } == true)
        #expect(try db.sync { c in try QueueStore.anyUnheard(c) } == false)
        let heard = try db.sync { c in try QueueStore.claim(worker: "w", limit: 10, versions: QueueStoreTests.work, c) }
        #expect(heard.map(\.args) == ["{\"n\":1}", "{\"n\":2}"])
    }

    /// A run's end gives up its lease and cancels whatever of it is still
    /// queued or running (a cancel lost at that moment included); other
    /// runs' jobs are left alone.
    @Test func aRunsEndCancelsWhatIsLeftOfItAndGivesUpItsLease() throws {
        try db.sync { c in
            try QueueStore.register(run: "r1", host: "h", pid: 1, lease: 60, c)
            try QueueStore.enqueue(run: "r1", (1...5).map { job($0) }, c)
            try QueueStore.enqueue(run: "r2", [job(1)], c)
        }
        let running = try db.sync { c in try QueueStore.claim(worker: "w", limit: 2, versions: QueueStoreTests.work, c) }
        #expect(running.map(\.args) == ["{\"n\":1}", "{\"n\":2}"])
        try db.sync { c in try QueueStore.coordinatorStopped(run: "r1", c) }
        let states = try db.sync { c in
            try c.query("SELECT run, state, count(*) FROM tasker_jobs GROUP BY 1, 2 ORDER BY 1, 2")
                .rows.map { r throws(PGError) in "\(try r.text(0)) \(try r.text(1)) \(try r.int(2))" }
        }
        #expect(states == ["r1 cancelled 5", "r2 queued 1"])
        #expect(try queueList() == [1])  // r2's
        #expect(try db.sync { c in try c.query("SELECT stopped IS NOT NULL FROM tasker_coordinators WHERE run = 'r1'").first?.bool(0) } == true)
        #expect(try db.sync { c in try QueueStore.heartbeat(worker: "w", running: running.map(\.id), c) }.stop.sorted() == running.map(\.id).sorted())
    }

    /// A coordinator killed and not yet reaped (a zombie: a container whose
    /// first process does not reap) is gone: its run may be taken over.
    @Test func aZombieProcessDoesNotCountAsAlive() throws {
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
        defer { argv.forEach { free($0) } }
        #expect(posix_spawn(&pid, "/bin/true", nil, nil, argv, environ) == 0)
        // it exits at once; not reaped until waitid says so (WNOWAIT leaves it a zombie)
        var info = siginfo_t()
        #expect(waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == 0)
        #expect(QueueStore.processExists(pid) == false)
        #expect(QueueStore.processExists(getpid()))
        var status: Int32 = 0
        #expect(waitpid(pid, &status, 0) == pid)
        #expect(QueueStore.processExists(pid) == false)
    }

    @Test func aNotificationArrivesWhenJobsAreQueued() throws {
        let heard = DispatchSemaphore(value: 0)
        let listener = PGListener(url: url, channels: [QueueStore.jobsChannel], tick: 30,
                                  onNotify: { _, _ in heard.signal() }, onTick: {})
        defer { listener.stop() }
        try db.sync { c in try QueueStore.enqueue(run: "r1", [job(9)], c) }
        #expect(heard.wait(timeout: .now() + 10) == .success)
    }

    @Test func aCompletionNotifiesItsRunWithTheFinishedIDs() throws {
        let (payloads, listener) = doneNotices()
        defer { listener.stop() }
        try db.sync { c in try QueueStore.enqueue(run: "r1", [job(1), job(2)], c) }
        let js = try db.sync { c in try QueueStore.claim(worker: "w", limit: 2, versions: QueueStoreTests.work, c) }
        _ = try db.sync { c in try QueueStore.complete(js.map { JobCompletion(id: $0.id, claim: $0.claim, state: .succeeded, result: "[]") }, c) }
        let got = try #require(payloads.wait())
        // (no version given here: the rows are named, not their results)
        let notice = try #require(DoneNotice.parse(got, run: "r1"))
        #expect(Set(notice.ids ?? []) == Set(js.map(\.id)) && notice.given.isEmpty)
    }

    /// A completion's notice gives the short results of attempts that
    /// succeeded on the coordinator's version of their definition, so the
    /// coordinator need not read their rows, and names every other job it
    /// finished: failed, a long result, another version, no version.
    @Test func aCompletionGivesShortResultsOfItsOwnVersionAndNamesTheRest() throws {
        let (payloads, listener) = doneNotices()
        defer { listener.stop() }
        func versioned(_ task: Int, _ version: String?) -> RemoteAttempt {
            RemoteAttempt(task: task, attempt: 1, name: "work", args: "{}", priority: 0, timeout: nil, version: version)
        }
        let long = "[\"" + String(repeating: "x", count: 300) + "\"]"
        try db.sync { c in
            try QueueStore.enqueue(run: "r1", [versioned(1, "v1"), versioned(2, "v1"), versioned(3, "v1"), versioned(4, "v1"),
                                               versioned(5, "v0"), versioned(6, nil)], c)
        }
        let js = try db.sync { c in try QueueStore.claim(worker: "w", limit: 6, versions: QueueStoreTests.work, c) }
        #expect(js.count == 6)
        let task: [Int64: Int] = try db.sync { c in
            Dictionary(uniqueKeysWithValues: try c.query("SELECT id, task FROM tasker_jobs").rows.map { r in (try r.int64(0), try r.int(1)) })
        }
        let done = js.map { j -> JobCompletion in
            switch task[j.id] {
            case 1: return JobCompletion(id: j.id, claim: j.claim, state: .succeeded, result: "[1,\"a b\\\"c\"]")
            case 2: return JobCompletion(id: j.id, claim: j.claim, state: .succeeded, result: nil)
            case 3: return JobCompletion(id: j.id, claim: j.claim, state: .failed, error: "boom", errorKind: "error")
            case 4: return JobCompletion(id: j.id, claim: j.claim, state: .succeeded, result: long)
            default: return JobCompletion(id: j.id, claim: j.claim, state: .succeeded, result: "[5]")
            }
        }
        #expect(try db.sync { c in try QueueStore.complete(done, c) } == [])
        let payload = try #require(payloads.wait())
        let notice = try #require(DoneNotice.parse(payload, run: "r1"))
        #expect(notice.given == [DoneNotice.Given(task: 1, attempt: 1, result: "[1,\"a b\\\"c\"]"),
                                 DoneNotice.Given(task: 2, attempt: 1, result: "[]")])
        #expect(Set((notice.ids ?? []).compactMap { task[$0] }) == [3, 4, 5, 6])
    }

    /// Results too long together for one payload: every job is named.
    @Test func aNoticeTooLongForAPayloadNamesEveryJob() throws {
        let (payloads, listener) = doneNotices()
        defer { listener.stop() }
        let jobs = (1...40).map { RemoteAttempt(task: $0, attempt: 1, name: "work", args: "{}", priority: 0, timeout: nil, version: "v1") }
        try db.sync { c in try QueueStore.enqueue(run: "r1", jobs, c) }
        let js = try db.sync { c in try QueueStore.claim(worker: "w", limit: 40, versions: QueueStoreTests.work, c) }
        let result = "[\"" + String(repeating: "y", count: 240) + "\"]"
        _ = try db.sync { c in try QueueStore.complete(js.map { JobCompletion(id: $0.id, claim: $0.claim, state: .succeeded, result: result) }, c) }
        let got = try #require(payloads.wait())
        #expect(got.utf8.count < 8000)
        let notice = try #require(DoneNotice.parse(got, run: "r1"))
        #expect(Set(notice.ids ?? []) == Set(js.map(\.id)) && notice.given.isEmpty)
    }

    @Test func queueConnectionsPlanWithoutJIT() throws {
        #expect(try db.sync { c in try c.query("SHOW jit").first?.optionalText(0) } == "off")
        // the rescue's statement, as a heartbeat runs it: no JIT in its plan
        let plan = try db.sync { c in
            try c.query("""
                EXPLAIN (ANALYZE, FORMAT TEXT) UPDATE tasker_workers SET stopped = now()
                WHERE stopped IS NULL AND heartbeat < now() - make_interval(secs => lease) RETURNING id
                """).firstColumn.joined(separator: "\n")
        }
        #expect(!plan.contains("JIT"), "\(plan)")
    }
}

/// Notification payloads a listener thread hands to a test.
final class PayloadBox: @unchecked Sendable {
    // Safety: `items` is only touched with `condition` locked.
    private let condition = NSCondition()
    private var items: [String] = []
    func add(_ p: String) {
        condition.lock()
        items.append(p)
        condition.signal()
        condition.unlock()
    }
    var count: Int {
        condition.lock()
        defer { condition.unlock() }
        return items.count
    }
    func wait(seconds: Double = 10) -> String? {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date(timeIntervalSinceNow: seconds)
        while items.isEmpty { if !condition.wait(until: deadline) { return nil } }
        return items.removeFirst()
    }
}

/// Big results go in several completion statements (a jsonb value holds at
/// most 256 MiB).
@Suite struct CompletionPartsTests {
    @Test func bigResultsAreCutIntoStatementsUnderTheLimit() {
        let big = String(repeating: "x", count: 20 << 20)
        func done(_ id: Int64, _ result: String) -> JobCompletion { JobCompletion(id: id, claim: 1, state: .succeeded, result: result) }
        let small = (1...1000).map { done(Int64($0), "[\($0)]") }
        #expect(QueueStore.completionParts(small).map(\.count) == [1000])
        let mixed = [done(1, big), done(2, "[]"), done(3, big), done(4, big + big), done(5, "[]")]
        // 20 MiB and a small one; 20 MiB; 40 MiB alone (over the limit, but one row); the last small one after it
        #expect(QueueStore.completionParts(mixed).map { $0.map(\.id) } == [[1, 2], [3], [4], [5]])
        #expect(QueueStore.completionParts([]).isEmpty)
    }

    /// A batch in the order of its ids, the last result given for an id kept.
    @Test func completionsGoInIdOrderTheLastOfAnIdKept() {
        func done(_ id: Int64, _ result: String) -> JobCompletion { JobCompletion(id: id, claim: 1, state: .succeeded, result: result) }
        let batch = [done(5, "a"), done(2, "b"), done(5, "c"), done(9, "d"), done(2, "e"), done(1, "f")]
        #expect(QueueStore.byPlace(batch, \.id).map { "\($0.id)\($0.result ?? "")" } == ["1f", "2e", "5c", "9d"])
        #expect(QueueStore.byPlace([JobCompletion](), \.id).isEmpty)
    }
}

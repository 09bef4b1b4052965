import Foundation
import PostgresTestServer
import TaskerCore
import TaskerJournal
import Testing
@testable import TaskerQueue

/// The connections' side of an outage: work waits for the server and is
/// done once it is back; messages hide the password.
@Suite struct StoreOutageTests {
    @Test func passwordsInStoreURLsAreHidden() {
        #expect(StoreOutage.redacted("postgres://app:s3cret@db:5432/x") == "postgres://app:***@db:5432/x")
        #expect(StoreOutage.redacted("postgresql://app:p@ss:w@rd@db/x?sslmode=require") == "postgresql://app:***@db/x?sslmode=require")
        #expect(StoreOutage.redacted("postgres://app@db/x?password=s3cret&sslmode=disable") == "postgres://app@db/x?password=***&sslmode=disable")
        #expect(StoreOutage.redacted("host=db password = s3cret user=app") == "host=db password = *** user=app")
        #expect(StoreOutage.redacted("postgres://db/x") == "postgres://db/x")
    }

    @Test func workWaitsForARestartedServerAndIsDoneOnceItIsBack() async throws {
        let server = try await PostgresTestServer.isolated()
        defer { server.destroy() }
        let db = PGThread(url: server.url(), name: "test")
        defer { db.stop() }
        try db.sync { c in try c.execute("CREATE TABLE t (n int)") }
        #expect(server.stop())
        let done = DispatchSemaphore(value: 0)
        db.submit({ c, _ in
            try c.query("INSERT INTO t VALUES (1)")
            done.signal()
        }, failed: { _ in done.signal() })
        #expect(server.start())
        #expect(done.wait(timeout: .now() + 20) == .success)
        #expect(server.psql(server.url(), "SELECT count(*) FROM t").trimmingCharacters(in: .whitespacesAndNewlines) == "1")
    }

    /// A server reached at the start that drops the connection during the
    /// set-up (a restart just then) is an outage to wait out, not a wrong
    /// URL: the start goes on once the set-up succeeds.
    @Test func aConnectionLostDuringTheSetUpIsWaitedOutAtTheStart() async throws {
        let (_, url) = try await PostgresTestServer.freshDatabase()
        final class Count { var n = 0 }
        let setUps = Count()
        let session = PGSession(url: url, limit: 20, setUp: { c in
            setUps.n += 1
            if setUps.n == 1 { try c.query("SELECT pg_terminate_backend(pg_backend_pid())") }
        })
        let one = try session.run(patient: false, pause: { _ in true }) { c, _ in try c.query("SELECT 1").first?.int(0) }
        #expect(one == 1)
        #expect(setUps.n == 2)
    }

    /// A connection lost under a statement whose error its caller set
    /// aside (a best-effort look) is an outage all the same: the owner
    /// hears it lost and back (a worker hands back what a restart may have
    /// lost at `back`), not a quiet reconnect.
    @Test func aLossUnderAnErrorSetAsideIsSaidLostAndBack() async throws {
        let (_, url) = try await PostgresTestServer.freshDatabase()
        final class Events { var said: [String] = [] }
        let events = Events()
        let session = PGSession(url: url, limit: 20, onEvent: { e in
            switch e {
            case .lost: events.said.append("lost")
            case .back: events.said.append("back")
            case .gaveUp: events.said.append("gave up")
            }
        })
        try session.run(pause: { _ in true }) { c, _ in
            _ = try? c.query("SELECT pg_terminate_backend(pg_backend_pid())")
        }
        #expect(events.said == [])
        let one = try session.run(pause: { _ in true }) { c, _ in try c.query("SELECT 1").first?.int(0) }
        #expect(one == 1)
        #expect(events.said == ["lost", "back"])
    }

    /// Past the outage limit a session fails at once from then on; one that
    /// tries after giving up (a journal's) goes on once the server is back.
    @Test func aSessionThatTriesAfterGivingUpGoesOnOnceTheServerIsBack() async throws {
        let server = try await PostgresTestServer.isolated()
        defer { server.destroy() }
        let journal = PGSession(url: server.url(), limit: 0.3)
        journal.triesAfterGivingUp = true
        let coordinator = PGSession(url: server.url(), limit: 0.3)
        func select(_ s: PGSession) throws -> Int? {
            try s.run(pause: { d in Thread.sleep(forTimeInterval: d); return true }) { c, _ in try c.query("SELECT 1").first?.int(0) }
        }
        #expect(try select(journal) == 1 && select(coordinator) == 1)
        #expect(server.stop())
        #expect(throws: PGError.self) { try select(journal) }
        #expect(throws: PGError.self) { try select(coordinator) }
        #expect(journal.gaveUp != nil && coordinator.gaveUp != nil)
        #expect(server.start())
        #expect(try select(journal) == 1)
        #expect(journal.gaveUp == nil)
        #expect(throws: PGError.self) { try select(coordinator) }
    }

    /// A crash loses the commits not flushed yet (`synchronous_commit` is
    /// off): the coordinator, once reconnected, queues again what it still
    /// waits for, so a job whose row was lost is run, not waited for for
    /// ever. Whether a crash loses a given commit depends on the WAL
    /// writer's timing (a loaded machine flushed it in every try), so the
    /// loss is made sure of: after the crash the server comes back first
    /// on its Unix socket only, where the row is deleted if it survived,
    /// before the coordinator can reconnect over TCP.
    @Test func anEnqueueLostInACrashIsQueuedAgainOnceTheServerIsBack() async throws {
        let server = try await PostgresTestServer.isolated()
        defer { server.destroy() }
        let url = server.url()
        func value(_ sql: String) -> String { server.psql(url, sql).trimmingCharacters(in: .whitespacesAndNewlines) }
        func count() -> String { value("SELECT count(*) FROM tasker_jobs WHERE run = 'lost'") }
        let q = try QueueCoordinator(url: url, run: "lost")
        defer { q.stop() }
        let outcome = PayloadBox()
        q.submit(RemoteAttempt(task: 1, attempt: 1, name: "work", args: "{}", priority: 0, timeout: nil)) { o in
            if case .succeeded(let json) = o { outcome.add(json) } else { outcome.add("failed: \(o)") }
        }
        let deadline = Date(timeIntervalSinceNow: 60)
        while count() != "1", Date() < deadline { usleep(20_000) }
        #expect(count() == "1")
        #expect(server.crash())
        #expect(server.startOnSocketOnly())
        // the coordinator's own row may be lost too (registered just before):
        // that is no lapse, nothing was cancelled, and the job is sent again
        _ = server.psqlOnSocket("DELETE FROM tasker_queue; DELETE FROM tasker_jobs WHERE run = 'lost'; "
                                + "DELETE FROM tasker_coordinators WHERE run = 'lost'")
        #expect(server.psqlOnSocket("SELECT count(*) FROM tasker_jobs").trimmingCharacters(in: .whitespacesAndNewlines) == "0")
        #expect(server.stop())
        #expect(server.start())
        // the row is gone: the coordinator sends it again (on its next statement: the 1 s poll)
        while count() != "1", Date() < deadline { usleep(20_000) }
        #expect(count() == "1")
        let db = PGThread(url: url, name: "worker")
        defer { db.stop() }
        let claimed = try db.sync { c in try QueueStore.claim(worker: "w", limit: 5, versions: ["work": nil], c) }
        #expect(claimed.map(\.args) == ["{}"])
        _ = try db.sync { c in
            try QueueStore.complete(claimed.map { JobCompletion(id: $0.id, claim: $0.claim, state: .succeeded, result: "[7]") }, c)
        }
        #expect(outcome.wait() == "[7]")
    }

    /// Work handed over before `stop` still waits, within the grace, for a
    /// server that is away: a run that ends during a restart still records
    /// its end (and cancels what is left).
    @Test func workHandedOverBeforeStopWaitsOutAShortOutageWithinItsGrace() async throws {
        let server = try await PostgresTestServer.isolated()
        defer { server.destroy() }
        let db = PGThread(url: server.url(), name: "test")
        try db.sync { c in try c.execute("CREATE TABLE t (n int)") }
        #expect(server.stop())
        let failure = PayloadBox()
        db.submit({ c, _ in try c.query("INSERT INTO t VALUES (1)") }, failed: { e in failure.add(e.message) })
        let stopped = DispatchSemaphore(value: 0)
        Thread {
            db.stop(grace: 30)
            stopped.signal()
        }.start()
        #expect(server.start())
        #expect(stopped.wait(timeout: .now() + 30) == .success)
        #expect(server.psql(server.url(), "SELECT count(*) FROM t").trimmingCharacters(in: .whitespacesAndNewlines) == "1")
        #expect(failure.count == 0)
    }

    /// A server that accepts the connection and never answers (hung, or a
    /// pooler whose server is down) fails the attempt after the connect
    /// timeout: it cannot hold a run (or its end) for ever.
    @Test func aServerThatNeverAnswersFailsTheConnectionAttemptInSeconds() throws {
        let listener = try SilentListener()
        defer { listener.close() }
        let started = Date()
        #expect(throws: PGError.self) { try PGConnection(url: "postgres://tasker@127.0.0.1:\(listener.port)/postgres") }
        let took = Date().timeIntervalSince(started)
        #expect(took >= 4 && took < 15, "\(took) s")
    }

    /// An attempt queued again after a reconnect was inserted before: a
    /// cancel of it still goes to the database (it was taken for one never
    /// inserted, and its worker ran on).
    @Test func aCancelRightAfterAReconnectReachesTheDatabase() async throws {
        let (server, url) = try await PostgresTestServer.freshDatabase()
        let q = try QueueCoordinator(url: url, run: "resent")
        defer { q.stop() }
        let n = 2000
        for t in 1...n {
            q.submit(RemoteAttempt(task: t, attempt: 1, name: "work", args: "{}", priority: 0, timeout: nil)) { _ in }
        }
        func queued() -> String {
            server.psql(url, "SELECT count(*) FROM tasker_jobs WHERE run = 'resent' AND state = 'queued'")
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let deadline = Date(timeIntervalSinceNow: 30)
        while queued() != "\(n)", Date() < deadline { usleep(20_000) }
        q.resendWaiting()  // as after a reconnect
        q.cancel(task: n, attempt: 1)
        while queued() != "\(n - 1)", Date() < deadline { usleep(20_000) }
        #expect(queued() == "\(n - 1)")
        #expect(server.psql(url, "SELECT state FROM tasker_jobs WHERE run = 'resent' AND task = \(n)")
            .trimmingCharacters(in: .whitespacesAndNewlines) == "cancelled")
    }

    /// A run that ends while the server is away stops within its grace
    /// (and the connection attempts that fail meanwhile), not at the outage
    /// limit: nothing it gave up on is tried again and again.
    @Test func aRunEndingWhileTheServerIsAwayStopsWithinItsGrace() async throws {
        let server = try await PostgresTestServer.isolated()
        defer { server.destroy() }
        let q = try QueueCoordinator(url: server.url(), run: "away")
        for t in 1...3 {
            q.submit(RemoteAttempt(task: t, attempt: 1, name: "work", args: "{}", priority: 0, timeout: nil)) { _ in }
        }
        let deadline = Date(timeIntervalSinceNow: 30)
        while server.psql(server.url(), "SELECT count(*) FROM tasker_jobs").trimmingCharacters(in: .whitespacesAndNewlines) != "3",
              Date() < deadline { usleep(20_000) }
        let lost = DispatchSemaphore(value: 0)
        q.notice = { message in if message.contains("lost the connection") { lost.signal() } }
        #expect(server.stop())
        // the first cancel's statement takes it and waits for the server;
        // the second gathers behind it, its statement never to run
        q.cancel(task: 1, attempt: 1)
        #expect(lost.wait(timeout: .now() + 20) == .success)
        q.cancel(task: 2, attempt: 1)
        let started = Date()
        q.stop()
        let took = Date().timeIntervalSince(started)
        #expect(took < QueueCoordinator.stopGrace + 10, "\(took) s")
    }

    /// A server that stops answering in the middle of a statement (its
    /// processes stopped; a proxy that holds the connection and forwards
    /// nothing) is an outage like any other: the answer is waited for
    /// `answerWait`, then the session reconnects and, past its limit, gives
    /// up instead of waiting for ever.
    @Test func aServerThatStopsAnsweringIsAnOutageWithALimit() async throws {
        let server = try await PostgresTestServer.isolated()
        defer { server.destroy() }
        let session = PGSession(url: server.url(), limit: 3, answerWait: 1)
        let pause: (Double) -> Bool = { d in Thread.sleep(forTimeInterval: d); return true }
        #expect(try session.run(pause: pause) { c, _ in try c.query("SELECT 1").first?.int(0) } == 1)
        server.freeze(true)
        // should the wait not end, the server goes on after 30 s and the test fails
        let done = DispatchSemaphore(value: 0)
        Thread {
            if done.wait(timeout: .now() + 30) == .timedOut { server.freeze(false) }
        }.start()
        let started = Date()
        var got = "answered"
        do {
            _ = try session.run(pause: pause) { c, _ in try c.query("SELECT 2") }
        } catch {
            got = "\(error)"
        }
        done.signal()
        server.freeze(false)
        #expect(got.contains("unreachable for 3 s"), "\(got)")
        #expect(Date().timeIntervalSince(started) < 20)
    }

    /// A statement blocked past its answer wait (a table another session
    /// keeps locked) is an outage that lasts: reconnecting does not reset
    /// it, the limit applies, and the statements given up on do not stay
    /// in the server holding a backend each (it checks the connection).
    @Test func aStatementBlockedPastItsWaitFailsAtTheLimitAndLeavesNoBackend() async throws {
        let (server, url) = try await PostgresTestServer.freshDatabase()
        let locker = try PGConnection(url: url)
        try locker.execute("CREATE TABLE t (n int)")
        try locker.execute("BEGIN; LOCK TABLE t IN ACCESS EXCLUSIVE MODE")
        let session = PGSession(url: url, limit: 3, answerWait: 1, setUp: PGThread.setUp)
        let started = Date()
        var failure = "answered"
        do {
            _ = try session.run(pause: { d in Thread.sleep(forTimeInterval: d); return true }) { c, _ in
                try c.query("SELECT count(*) FROM t")
            }
        } catch {
            failure = "\(error)"
        }
        let took = Date().timeIntervalSince(started)
        #expect(failure.contains("unreachable for 3 s") && failure.contains("did not answer within 1 s"), "\(failure)")
        #expect(took >= 3 && took < 15, "\(took) s")
        func waiting() -> String {
            server.psql(url, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()")
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let deadline = Date(timeIntervalSinceNow: 20)
        while waiting() != "0", Date() < deadline { usleep(100_000) }
        #expect(waiting() == "0")
        try locker.execute("ROLLBACK")
    }
}

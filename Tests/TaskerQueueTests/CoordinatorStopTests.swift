import Foundation
import PostgresTestServer
import TaskerCore
import Testing
@testable import TaskerQueue

/// The end of a run on the queue: the lease is given up, and the run's
/// jobs are looked through for leftovers to cancel only when the
/// coordinator cannot account for every one of them.
@Suite struct CoordinatorStopTests {
    /// Submits `n` attempts, runs them as a worker would, and waits until
    /// the coordinator has read every result back.
    static func runAll(_ q: QueueCoordinator, _ n: Int, url: String, from first: Int = 1) throws {
        let done = DispatchSemaphore(value: 0)
        for t in first..<(first + n) {
            q.submit(RemoteAttempt(task: t, attempt: 1, name: "work", args: "{}", priority: 0, timeout: nil)) { _ in done.signal() }
        }
        let worker = PGThread(url: url, name: "worker")
        defer { worker.stop() }
        var left = n
        let deadline = Date(timeIntervalSinceNow: 30)
        while left > 0, Date() < deadline {
            let got = try worker.sync { c in try QueueStore.claim(worker: "w", limit: n, versions: ["work": nil], c) }
            if got.isEmpty { usleep(10_000); continue }
            _ = try worker.sync { c in
                try QueueStore.complete(got.map { JobCompletion(id: $0.id, claim: $0.claim, state: .succeeded, result: "[]") }, c)
            }
            left -= got.count
        }
        for _ in 1...n { #expect(done.wait(timeout: .now() + 30) == .success) }
    }

    /// A job of the run that the coordinator never queued: it stands for
    /// one that a lost cancel or a server that lost commits left behind.
    static func stray(_ server: PostgresTestServer, _ url: String, run: String) {
        _ = server.psql(url, """
            WITH j AS (INSERT INTO tasker_jobs (run, task, attempt, name, args) VALUES ('\(run)', 999, 1, 'work', '{}') RETURNING id, priority, name)
            INSERT INTO tasker_queue SELECT * FROM j
            """)
    }

    static func state(_ server: PostgresTestServer, _ url: String, run: String, task: Int) -> String {
        server.psql(url, "SELECT state FROM tasker_jobs WHERE run = '\(run)' AND task = \(task)")
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Every result read back: the end gives up the lease and does not
    /// look through the run's jobs (a run of 10,000 took 16 ms more at its
    /// end); so a job it never queued is not seen.
    @Test func aRunWhoseResultsWereAllReadBackDoesNotLookThroughItsJobs() async throws {
        let (server, url) = try await PostgresTestServer.freshDatabase()
        let q = try QueueCoordinator(url: url, run: "settled")
        try Self.runAll(q, 5, url: url)
        Self.stray(server, url, run: "settled")
        q.stop()
        #expect(server.psql(url, "SELECT stopped IS NOT NULL FROM tasker_coordinators WHERE run = 'settled'")
            .trimmingCharacters(in: .whitespacesAndNewlines) == "t")
        #expect(Self.state(server, url, run: "settled", task: 999) == "queued")
    }

    /// A connection lost during the run (the server may have lost commits
    /// with it, a cancel among them): the end looks through the run's jobs
    /// and cancels what is left, though every result was read back.
    @Test func aRunThatLostItsConnectionCancelsWhatIsLeftAtItsEnd() async throws {
        let (server, url) = try await PostgresTestServer.freshDatabase()
        let q = try QueueCoordinator(url: url, run: "lost")
        let back = DispatchSemaphore(value: 0)
        q.notice = { message in if message.contains("reconnected") { back.signal() } }
        try Self.runAll(q, 3, url: url)
        _ = server.psql(url, """
            SELECT pg_terminate_backend(pid) FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid()
            """)
        // the coordinator hears of it at its next statement (an insert)
        try Self.runAll(q, 2, url: url, from: 4)
        #expect(back.wait(timeout: .now() + 30) == .success)
        Self.stray(server, url, run: "lost")
        q.stop()
        #expect(Self.state(server, url, run: "lost", task: 999) == "cancelled")
        #expect(Self.state(server, url, run: "lost", task: 4) == "succeeded")
    }

    /// Awaited results at the end (a run stopped early): what is left is
    /// cancelled, whatever the coordinator knows.
    @Test func aRunEndingWithResultsAwaitedCancelsItsJobs() async throws {
        let (server, url) = try await PostgresTestServer.freshDatabase()
        let q = try QueueCoordinator(url: url, run: "early")
        q.submit(RemoteAttempt(task: 1, attempt: 1, name: "work", args: "{}", priority: 0, timeout: nil)) { _ in }
        let deadline = Date(timeIntervalSinceNow: 30)
        while Self.state(server, url, run: "early", task: 1) != "queued", Date() < deadline { usleep(10_000) }
        Self.stray(server, url, run: "early")
        q.stop()
        #expect(Self.state(server, url, run: "early", task: 1) == "cancelled")
        #expect(Self.state(server, url, run: "early", task: 999) == "cancelled")
    }
}

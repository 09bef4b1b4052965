import Foundation
import PostgresTestServer
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
}

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

}

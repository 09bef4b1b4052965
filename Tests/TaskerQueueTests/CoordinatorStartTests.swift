import Foundation
import PostgresTestServer
import Testing
@testable import TaskerQueue

/// A run's start on the queue: what is ready before its first task.
@Suite struct CoordinatorStartTests {
    /// The insert's statement is prepared while the runtime starts, so the
    /// first task's insert is not parsed and planned on its way.
    @Test func theInsertIsPreparedBeforeTheFirstTask() async throws {
        let (_, url) = try await PostgresTestServer.freshDatabase()
        let q = try QueueCoordinator(url: url, run: "ready")
        defer { q.stop() }
        // runs after what the coordinator gave its connection thread first
        let prepared = try q.db.sync { c in
            try c.query("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%INSERT INTO tasker_jobs%'", once: true)
                .first?.int(0)
        }
        #expect(prepared == 1)
    }
}

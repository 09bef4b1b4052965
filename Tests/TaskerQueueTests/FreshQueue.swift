import PostgresTestServer
@testable import TaskerQueue

/// A fresh database of the test server holding the queue's tables, and a
/// connection thread to it: where most queue tests start.
enum FreshQueue {
    static func make() async throws -> (db: PGThread, url: String) {
        let url = try await PostgresTestServer.freshDatabase().url
        let db = PGThread(url: url, name: "test")
        try db.sync { c in try QueueSchema.ensure(c) }
        return (db, url)
    }
}

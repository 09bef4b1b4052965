import Foundation
import PostgresTestServer
import Synchronization
import Testing
@testable import TaskerQueue

/// The sweepers' upkeep beside a long transaction (a `pg_dump`): what it
/// sees of the snapshot, and a rebuild that would wait for it gives up.
@Suite struct UpkeepBehindSnapshotTests {
    /// A session holding a snapshot: its xmin is the oldest held while
    /// other sessions write, and no longer once it ends.
    @Test func theOldestHeldIsAnotherSessionsSnapshotUntilItEnds() async throws {
        let (db, url) = try await FreshQueue.make()
        defer { db.stop() }
        let holder = try PGConnection(url: url)
        try holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        try holder.query("SELECT count(*) FROM tasker_jobs")
        let held = try db.sync { c in try QueueStore.oldestHeld(c) }
        #expect(held.any != nil && held.bySessions == held.any)
        let writer = try PGConnection(url: url)
        for i in 1...3 {
            try writer.query("INSERT INTO tasker_coordinators (run, host, pid, lease) VALUES ($1, 'h', 1, 30)", ["r\(i)"])
        }
        #expect(try db.sync { c in try QueueStore.oldestHeld(c) } == held)
        try holder.execute("COMMIT")
        #expect(try db.sync { c in try QueueStore.oldestHeld(c) } != held)
    }

    /// A rebuild that must wait for a transaction begun before it stops
    /// after its lock wait (it held every sweeper's vacuum until the
    /// transaction ended); the next, once it has, drops what a cut rebuild
    /// left and rebuilds.
    @Test func aRebuildBehindAnOldSnapshotGivesUpAndIsDoneLater() async throws {
        let (db, url) = try await FreshQueue.make()
        defer { db.stop() }
        func read(_ sql: String) throws -> Int { try db.sync { c in try c.query(sql).first?.int(0) } ?? -1 }
        try db.sync { c in
            try c.query("""
                INSERT INTO tasker_jobs (run, task, attempt, name, args)
                SELECT 'run-20261129-0a1b2c', g, 1, 'work', '{}' FROM generate_series(1, 50000) g
                """)
            try c.query("DELETE FROM tasker_jobs")
        }
        let holder = try PGConnection(url: url)
        try holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        try holder.query("SELECT count(*) FROM tasker_coordinators")
        // on a thread: without the lock wait the rebuild waits for ever
        let outcome = Mutex<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            let what: String
            do {
                what = "rebuilt: \(try db.sync { c in try QueueStore.reindexIfBloated(.jobs, waits: 0.5, c) })"
            } catch {
                what = "failed: \(PGError(error).sqlState ?? "-") \(PGError(error).message)"
            }
            outcome.withLock { $0 = what }
            done.signal()
        }.start()
        let gaveUp = done.wait(timeout: .now() + 30) == .success
        #expect(gaveUp, "the rebuild still waits for the old snapshot")
        try holder.execute("COMMIT")
        if !gaveUp { done.wait() }
        #expect(outcome.withLock { $0 } == "failed: 55P03 canceling statement due to lock timeout")
        #expect(try db.sync { c in try QueueStore.reindexIfBloated(.jobs, c) })
        // none left behind, the TOAST table's included (a role that is not
        // a superuser could not drop that one)
        #expect(try read("SELECT count(*) FROM pg_index WHERE NOT indisvalid") == 0)
        #expect(try read("SELECT pg_indexes_size('tasker_jobs')") < 256 << 10)
    }
}

import Testing
@testable import TaskerQueue

/// The upkeep behind an old snapshot: a vacuum that could remove nothing
/// new is not run again until the snapshot moves (or 30 s), and no index
/// rebuild starts while one is held.
@Suite struct HeldSnapshotsTests {
    static let second: UInt64 = 1_000_000_000

    @Test func aVacuumBehindTheSameSnapshotWaits() {
        var h = HeldSnapshots()
        h.look("700", bySessions: "700")
        #expect(h.mayVacuum("tasker_jobs", now: 0))
        h.vacuumed("tasker_jobs", at: 0)
        h.look("700", bySessions: "700")
        #expect(!h.mayVacuum("tasker_jobs", now: 1 * Self.second))
        // another table's upkeep is its own
        #expect(h.mayVacuum("tasker_queue", now: 1 * Self.second))
        // a while later it tries again (pages it could not give back)
        #expect(h.mayVacuum("tasker_jobs", now: HeldSnapshots.stuckVacuumEvery))
        // the snapshot moved: there may be rows to remove
        h.look("705", bySessions: "705")
        #expect(h.mayVacuum("tasker_jobs", now: 2 * Self.second))
    }

    @Test func nothingHeldNeverHoldsAVacuumBack() {
        var h = HeldSnapshots()
        h.look(nil, bySessions: nil)
        h.vacuumed("tasker_jobs", at: 0)
        h.look(nil, bySessions: nil)
        #expect(h.mayVacuum("tasker_jobs", now: 1))
    }

    @Test func aRebuildWaitsWhileASessionHoldsTheSameSnapshotAcrossLooks() {
        var h = HeldSnapshots()
        // the first look cannot tell a claim's snapshot from a pg_dump's
        h.look("700", bySessions: "700")
        #expect(!h.mayRebuild)
        h.look("700", bySessions: "700")
        #expect(!h.mayRebuild)
        h.look("712", bySessions: "712")
        #expect(h.mayRebuild)
        h.look(nil, bySessions: nil)
        #expect(h.mayRebuild)
        h.look(nil, bySessions: nil)
        #expect(h.mayRebuild)
    }

    /// Nothing held at the first look: a rebuild may start at once.
    @Test func nothingHeldAtTheFirstLookAllowsARebuild() {
        var h = HeldSnapshots()
        h.look(nil, bySessions: nil)
        #expect(h.mayRebuild)
    }

    /// A prepared transaction (or a replication slot) holds vacuums back,
    /// not rebuilds: REINDEX CONCURRENTLY does not wait for it.
    @Test func aPreparedTransactionHoldsVacuumsBackNotRebuilds() {
        var h = HeldSnapshots()
        h.look("650", bySessions: nil)
        h.vacuumed("tasker_jobs", at: 0)
        h.look("650", bySessions: nil)
        #expect(!h.mayVacuum("tasker_jobs", now: 1 * Self.second))
        #expect(h.mayRebuild)
    }
}

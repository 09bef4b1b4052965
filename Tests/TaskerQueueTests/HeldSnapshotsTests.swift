import Testing
@testable import TaskerQueue

/// The upkeep behind an old snapshot: a vacuum that could remove nothing
/// new is not run again until the snapshot moves (or 30 s), and no index
/// rebuild starts while one is held.
@Suite struct HeldSnapshotsTests {
    static let second: UInt64 = 1_000_000_000

    @Test func aVacuumBehindTheSameSnapshotWaits() {
        var h = HeldSnapshots()
        h.look("700")
        #expect(h.mayVacuum("tasker_jobs", now: 0))
        h.vacuumed("tasker_jobs", at: 0)
        h.look("700")
        #expect(!h.mayVacuum("tasker_jobs", now: 1 * Self.second))
        // another table's upkeep is its own
        #expect(h.mayVacuum("tasker_queue", now: 1 * Self.second))
        // a while later it tries again (pages it could not give back)
        #expect(h.mayVacuum("tasker_jobs", now: HeldSnapshots.stuckVacuumEvery))
        // the snapshot moved: there may be rows to remove
        h.look("705")
        #expect(h.mayVacuum("tasker_jobs", now: 2 * Self.second))
    }

    @Test func nothingHeldNeverHoldsAVacuumBack() {
        var h = HeldSnapshots()
        h.look(nil)
        h.vacuumed("tasker_jobs", at: 0)
        h.look(nil)
        #expect(h.mayVacuum("tasker_jobs", now: 1))
    }

    @Test func aRebuildWaitsWhileTheSameSnapshotIsHeldAcrossLooks() {
        var h = HeldSnapshots()
        h.look("700")
        #expect(!h.heldSinceLastLook)  // a snapshot seen once may be a claim's
        h.look("700")
        #expect(h.heldSinceLastLook)
        h.look("712")
        #expect(!h.heldSinceLastLook)
        h.look(nil)
        h.look(nil)
        #expect(!h.heldSinceLastLook)
    }
}

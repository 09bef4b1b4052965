import Testing
@testable import TaskerQueue
import TaskerCore

/// A worker claims its free slots only until claims come back full; then
/// it holds a short while of its own pace ahead, and lets go at once when
/// the queue runs short.
@Suite struct ClaimPaceTests {
    @Test func idleClaimsOnlyTheFreeSlots() {
        var p = ClaimPace()
        #expect(p.toClaim(free: 16, held: 0) == 16)
        #expect(p.toClaim(free: 3, held: 0) == 3)
        #expect(p.toClaim(free: 0, held: 0) == 0)
        p.claimed(full: false)
        #expect(p.ahead == 0 && p.toClaim(free: 1, held: 0) == 1)
    }

    @Test func aBacklogIsClaimedAheadUpToTheCapAndLetGoWhenShort() {
        var p = ClaimPace()
        // full, but nothing finished yet (slow jobs): nothing ahead
        p.claimed(full: true)
        #expect(p.ahead == 0 && p.toClaim(free: 0, held: 0) == 0)
        // a pace of a million jobs a second is capped
        for _ in 0..<1_000_000 { p.didFinish() }
        p.claimed(full: true)
        #expect(p.ahead == ClaimPace.most)
        #expect(p.toClaim(free: 0, held: 0) == p.ahead)
        // refilled once half of what is held has started, not job by job
        #expect(p.toClaim(free: 0, held: p.ahead) == 0)
        #expect(p.toClaim(free: 2, held: p.ahead / 2) == 2 + p.ahead - p.ahead / 2)
        p.claimed(full: false)
        #expect(p.ahead == 0 && p.toClaim(free: 0, held: 0) == 0)
    }

    @Test func aWakeUpWithNoRoomMakesTheNextFinishedJobClaim() {
        var p = ClaimPace()
        // a short claim: new jobs will come with a wake-up, finishing jobs do not claim
        p.claimed(full: false)
        #expect(!p.claimOnFinish)
        #expect(p.toClaim(free: 2, held: 0) == 2)
        #expect(!p.claimOnFinish)
        // a wake-up while every slot is busy is kept for the next finished job
        #expect(p.toClaim(free: 0, held: 0) == 0)
        #expect(p.claimOnFinish)
        // and so is one while more than half of a backlog is still held
        for _ in 0..<1_000_000 { p.didFinish() }
        p.claimed(full: true)
        p.claimed(full: false)
        #expect(!p.claimOnFinish)
        #expect(p.toClaim(free: 4, held: 10) == 0)
        #expect(p.claimOnFinish)
        // a full claim: finishing jobs claim (there may be more)
        p.claimed(full: true)
        #expect(p.claimOnFinish)
    }

    @Test func theNextClaimGoesOutWhileWhatIsHeldCoversItsRoundTrip() {
        var p = ClaimPace()
        // a fast pace and claims that take a while: the reserve is what
        // runs during one round trip, never more than what is held ahead
        for _ in 0..<1_000_000 { p.didFinish() }
        p.claimSent()
        var spin = 0
        let start = Monotonic.now()
        while Monotonic.now() &- start < 2_000_000 { spin += 1 }  // a round trip of at least 2 ms
        p.claimed(full: true)
        #expect(p.ahead == ClaimPace.most)
        #expect(p.reserve > 0 && p.reserve <= p.ahead)
        // past half of what is held, it claims while the reserve is still held
        #expect(p.toClaim(free: 0, held: p.reserve) == p.ahead)
        #expect(p.toClaim(free: 0, held: max(p.ahead / 2, p.reserve) + 1) == 0)
        // a short claim lets go of the backlog and the reserve
        p.claimed(full: false)
        #expect(p.ahead == 0 && p.reserve == 0)
        #expect(p.toClaim(free: 3, held: 0) == 3)
    }
}

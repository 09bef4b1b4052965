import Testing
@testable import TaskerQueue

/// A worker keeps results a short while to write more in one statement:
/// at most half a job's run time and 5 ms, and only while another running
/// job is near its end; never for a full batch or jobs of under a
/// millisecond.
@Suite struct CompletionHoldTests {
    static let ms: UInt64 = 1_000_000

    @Test func resultsOfTenMillisecondJobsWaitUpToFiveMilliseconds() throws {
        var h = CompletionHold()
        h.finished(ranFor: 0.010, at: 100 * Self.ms)
        // another job started 8 ms ago: it should end within the wait
        let peer = [92 * Self.ms]
        let wait = try #require(h.wait(at: 100 * Self.ms, pending: 1, running: peer))
        #expect(abs(wait - 0.005) < 1e-9)
        // the wait counts from the oldest result, not the latest
        h.finished(ranFor: 0.010, at: 103 * Self.ms)
        let rest = try #require(h.wait(at: 103 * Self.ms, pending: 2, running: peer))
        #expect(abs(rest - 0.002) < 1e-9)
        #expect(h.wait(at: 105 * Self.ms, pending: 2, running: peer) == nil)
        // written: the next result starts a new wait
        h.written()
        #expect(h.wait(at: 106 * Self.ms, pending: 0, running: peer) == nil)
        h.finished(ranFor: 0.010, at: 106 * Self.ms)
        #expect(h.wait(at: 106 * Self.ms, pending: 1, running: [99 * Self.ms]) != nil)
    }

    @Test func longJobsWaitAtMostFiveMilliseconds() throws {
        var h = CompletionHold()
        h.finished(ranFor: 2.0, at: 3000 * Self.ms)
        let wait = try #require(h.wait(at: 3000 * Self.ms, pending: 1, running: [1000 * Self.ms]))
        #expect(wait == CompletionHold.most)
    }

    /// A chain (the next task waits for this result) writes at once when
    /// nothing else runs, when what runs beside it has just started, and
    /// beside a job long overdue: nothing would join the result.
    @Test func nothingWaitsWithoutAJobNearItsEnd() {
        var h = CompletionHold()
        h.finished(ranFor: 0.010, at: 100 * Self.ms)
        #expect(h.wait(at: 100 * Self.ms, pending: 1, running: []) == nil)
        #expect(h.wait(at: 100 * Self.ms, pending: 1, running: [99 * Self.ms]) == nil)
        #expect(h.wait(at: 100 * Self.ms, pending: 1, running: [50 * Self.ms]) == nil)
        #expect(h.wait(at: 100 * Self.ms, pending: CompletionHold.batch, running: [92 * Self.ms]) == nil)
    }

    @Test func resultsOfShortJobsAreWrittenAtOnce() {
        var h = CompletionHold()
        for i in 0..<20 { h.finished(ranFor: 0.0002, at: UInt64(i + 1) * 1000) }
        #expect(h.wait(at: 20_000, pending: 20, running: [19_900]) == nil)
        // the run time is smoothed: one slow job among fast ones holds nothing yet
        h.finished(ranFor: 0.004, at: 21_000)
        #expect(h.wait(at: 21_000, pending: 21, running: [17_000]) == nil)
    }
}

import Testing
@testable import TaskerQueue

/// A worker keeps results a short while to write more in one statement:
/// at most half a job's run time and 5 ms, never when nothing else runs
/// or the batch is full, and never for jobs of under a millisecond.
@Suite struct CompletionHoldTests {
    static let ms: UInt64 = 1_000_000

    @Test func resultsOfTenMillisecondJobsWaitUpToFiveMilliseconds() throws {
        var h = CompletionHold()
        h.finished(ranFor: 0.010, at: 100 * Self.ms)
        let wait = try #require(h.wait(at: 100 * Self.ms, pending: 1, othersRunning: true))
        #expect(abs(wait - 0.005) < 1e-9)
        // the wait counts from the oldest result, not the latest
        h.finished(ranFor: 0.010, at: 103 * Self.ms)
        let rest = try #require(h.wait(at: 103 * Self.ms, pending: 2, othersRunning: true))
        #expect(abs(rest - 0.002) < 1e-9)
        #expect(h.wait(at: 105 * Self.ms, pending: 2, othersRunning: true) == nil)
        // written: the next result starts a new wait
        h.written()
        #expect(h.wait(at: 106 * Self.ms, pending: 0, othersRunning: true) == nil)
        h.finished(ranFor: 0.010, at: 106 * Self.ms)
        #expect(h.wait(at: 106 * Self.ms, pending: 1, othersRunning: true) != nil)
    }

    @Test func longJobsWaitAtMostFiveMilliseconds() throws {
        var h = CompletionHold()
        h.finished(ranFor: 2.0, at: Self.ms)
        #expect(try #require(h.wait(at: Self.ms, pending: 1, othersRunning: true)) == CompletionHold.most)
    }

    @Test func nothingWaitsWhenNothingElseRunsOrTheBatchIsFull() {
        var h = CompletionHold()
        h.finished(ranFor: 0.010, at: Self.ms)
        // a chain: the next task waits for this very result
        #expect(h.wait(at: Self.ms, pending: 1, othersRunning: false) == nil)
        #expect(h.wait(at: Self.ms, pending: CompletionHold.batch, othersRunning: true) == nil)
    }

    @Test func resultsOfShortJobsAreWrittenAtOnce() {
        var h = CompletionHold()
        for i in 0..<20 { h.finished(ranFor: 0.0002, at: UInt64(i + 1) * 1000) }
        #expect(h.wait(at: 20_000, pending: 20, othersRunning: true) == nil)
        // the run time is smoothed: one slow job among fast ones holds nothing yet
        h.finished(ranFor: 0.004, at: 21_000)
        #expect(h.wait(at: 21_000, pending: 21, othersRunning: true) == nil)
    }
}

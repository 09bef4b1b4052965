import Testing
@testable import TaskerCore

@Suite struct TickClockTests {
    /// A reading converts to a `Monotonic` time between the clock reads
    /// around it (slack for the conversion's own error, which is tens of
    /// nanoseconds on a quiet machine and can be microseconds on a busy one).
    private func expectBetween(_ clock: TickClock, _ t: UInt64, _ before: UInt64, _ after: UInt64) {
        let m = clock.monotonic(t)
        #expect(m + 20_000 >= before && m <= after + 20_000, "\(m) not in \(before)...\(after)")
    }

    @Test func readingsConvertToTheMonotonicClock() {
        let clock = TickClock()
        var checked = 0
        let end = Monotonic.now() + 20_000_000
        // Readings taken over 20 ms, and at least 200 of them (a loaded
        // machine may give this thread little of those 20 ms), converted at
        // once and again at the end (after later calibrations): each stays
        // where it was read.
        var readings: [(UInt64, UInt64, UInt64)] = []
        while Monotonic.now() < end || checked < 200 {
            let before = Monotonic.now()
            let t = clock.now()
            let after = Monotonic.now()
            expectBetween(clock, t, before, after)
            readings.append((t, before, after))
            checked += 1
        }
        for (t, before, after) in readings.suffix(100) { expectBetween(clock, t, before, after) }
        #expect(clock.monotonic(0) == 0)
    }

    @Test func aScaleConvertsReadingsOnAnotherThreadAndDurations() {
        let clock = TickClock()
        let origin = Monotonic.now()
        let a = clock.now()
        var b = clock.now()
        while clock.monotonic(b) < clock.monotonic(a) + 5_000_000 { b = clock.now() }
        let scale = clock.scale(origin: origin)
        #expect(scale.seconds(0) == 0)
        #expect(abs(scale.seconds(b) - Double(clock.monotonic(b) - origin) / 1e9) < 1e-6)
        // a duration in ticks converts like the two readings it lies between
        let between = scale.monotonic(b) - scale.monotonic(a)
        #expect(between >= 4_900_000)  // the scale was calibrated again since the loop's check
        #expect(abs(Int64(scale.nanos(ticks: b - a)) - Int64(between)) < 1_000, "\(scale.nanos(ticks: b - a)) vs \(between)")
    }
}

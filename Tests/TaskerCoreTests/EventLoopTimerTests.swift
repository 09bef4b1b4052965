import Testing
@testable import TaskerCore

@Suite struct EventLoopTimerTests {
    /// Thousands of cancelled timers (the heap is rebuilt without them)
    /// leave the live ones firing, in deadline order, and the loop idle
    /// once they have fired.
    @Test func liveTimersFireInOrderAmongManyCancelledOnes() async {
        let fired: [Int] = await onLoop { _, loop, done in
            var fired: [Int] = []
            var live: [LoopTimer] = []
            let base = Monotonic.now() &+ Monotonic.nanos(0.05)  // deadlines fixed up front: order is exact
            for i in 0..<5000 {
                let t = loop.schedule(after: 60) { fired.append(-i) }
                if i % 1000 == 999 {
                    live.append(loop.schedule(at: base &+ Monotonic.nanos(0.01 * Double(5 - i / 1000))) { fired.append(i) })
                }
                t.cancel()
            }
            loop.schedule(at: base &+ Monotonic.nanos(0.2)) { done(fired) }
            withExtendedLifetime(live) {}
        }
        #expect(fired == [4999, 3999, 2999, 1999, 999])
    }
}

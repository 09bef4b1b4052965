/// Where an `EventLoop` and its engine read the time (monotonic ns). The
/// system clock in production; a `ManualClock` in tests, which move time
/// forward themselves instead of sleeping (like NIO's EmbeddedEventLoop).
public protocol LoopClock: AnyObject {
    var now: UInt64 { get }
    /// A manual clock never moves by itself: the loop does not wait for it.
    var isManual: Bool { get }
}

public final class SystemClock: LoopClock {
    public init() {}
    @inline(__always) public var now: UInt64 { Monotonic.now() }
    public var isManual: Bool { false }
}

/// Time that moves only when told: `advance(by:)` on the loop thread; the
/// loop fires the timers now due in its next turn.
///
///     let clock = ManualClock()
///     let loop = EventLoop(clock: clock)
///     // on the loop: engine.add(delayed 5 s task); clock.advance(by: 5)
public final class ManualClock: LoopClock {
    public private(set) var now: UInt64
    public var isManual: Bool { true }

    public init(start: UInt64 = 1_000_000_000) { now = start }

    public func advance(by seconds: Double) {
        now &+= Monotonic.nanos(seconds)
    }
}

import CTicks

/// Timestamps only written down (each task's add, start and end times for
/// the journal), read a few times per task: the CPU's counter where the
/// kernel trusts it (a few nanoseconds a read against ~25 for the clock),
/// turned into `Monotonic` nanoseconds when recorded. Loop-confined.
///
/// The counter's rate comes from pairs of readings of both clocks (a pair
/// read while the thread was held up is dropped), taken again whenever a
/// reading lies further past the last pair than that pair lies past the
/// first (and at least every 100 ms): the error of a converted time stays
/// about that of reading the two clocks (tens of nanoseconds), and the
/// system clock's slewing cannot pile up.
public final class TickClock {
    private let counter: Int32
    private var scale: TickScale
    /// The counter at the last calibration, and how far past it a reading
    /// may lie before the next one.
    private var t1: UInt64
    private var reach: UInt64

    public init() {
        counter = tasker_ticks_are_counter()
        guard counter != 0 else {
            let m0 = Monotonic.now()
            scale = TickScale(t0: m0, m0: m0, mult: 1 << 32)
            t1 = m0
            reach = .max  // the clock itself: 1 ns a tick
            return
        }
        var pair = Self.pair(counter)
        for _ in 0..<8 where pair == nil { pair = Self.pair(counter) }
        let (t0, m0) = pair ?? (tasker_ticks(counter), Monotonic.now())
        scale = TickScale(t0: t0, m0: m0, mult: 1 << 32)
        t1 = t0
        reach = 0
    }

    /// The counter and the clock read at one moment: the clock before and
    /// after the counter, nil when the thread was held up in between (a
    /// pair that far apart would skew the rate).
    private static func pair(_ counter: Int32) -> (ticks: UInt64, nanos: UInt64)? {
        let before = Monotonic.now()
        let t = tasker_ticks(counter)
        let after = Monotonic.now()
        guard after &- before < 5_000 else { return nil }
        return (t, before &+ (after &- before) / 2)
    }

    /// A reading (0 is never one).
    @inline(__always)
    public func now() -> UInt64 { source.now() }

    /// Reads this clock without holding it (a value: no reference to
    /// count on a path taken per task).
    public var source: TickSource { TickSource(counter: counter) }

    /// A reading as `Monotonic` nanoseconds (0 stays 0).
    @inline(__always)
    public func monotonic(_ t: UInt64) -> UInt64 {
        if t > t1, t &- t1 > reach { calibrate() }
        return scale.monotonic(t)
    }

    /// The conversion for every reading taken so far (to convert them on
    /// another thread), with times counted in seconds from `origin`.
    public func scale(origin: UInt64) -> TickScale {
        if counter != 0 { calibrate() }
        var s = scale
        s.origin = origin
        return s
    }

    private func calibrate() {
        guard let (t, m) = Self.pair(counter), t > scale.t0, m > scale.m0 else { return }
        let nanosPerTick = Double(m &- scale.m0) / Double(t &- scale.t0)
        scale.mult = UInt64(nanosPerTick * 4_294_967_296)
        t1 = t
        reach = min(t &- scale.t0, UInt64(100_000_000 / nanosPerTick))
    }
}

/// Reads a `TickClock`'s counter (see `TickClock.source`).
public struct TickSource: Sendable {
    @usableFromInline let counter: Int32

    /// A reading (0 is never one). Inlinable: read per task from other
    /// modules, where a call cost about as much as the read.
    @inlinable
    public func now() -> UInt64 { tasker_ticks(counter) | 1 }
}

/// Turns `TickClock` readings into `Monotonic` nanoseconds, or seconds
/// since `origin`: a multiply and a shift.
public struct TickScale: Sendable {
    @usableFromInline let t0: UInt64
    @usableFromInline let m0: UInt64
    /// Nanoseconds per tick, times 2^32.
    @usableFromInline var mult: UInt64
    /// A `Monotonic` time that `seconds(_:)` counts from.
    public var origin: UInt64 = 0

    /// Readings that are nanoseconds already, counted from `origin`.
    public static func nanoseconds(origin: UInt64 = 0) -> TickScale {
        TickScale(t0: 0, m0: 0, mult: 1 << 32, origin: origin)
    }

    /// A reading as `Monotonic` nanoseconds (0 stays 0).
    @inlinable @inline(__always)
    public func monotonic(_ t: UInt64) -> UInt64 {
        guard t != 0 else { return 0 }
        guard t > t0 else { return m0 }  // read before the clock began
        let (hi, lo) = (t &- t0).multipliedFullWidth(by: mult)
        return m0 &+ (hi << 32 | lo >> 32)
    }

    /// A number of ticks (a difference of readings) as nanoseconds.
    @inlinable @inline(__always)
    public func nanos(ticks: UInt64) -> UInt64 {
        let (hi, lo) = ticks.multipliedFullWidth(by: mult)
        return hi << 32 | lo >> 32
    }

    /// A reading as nanoseconds since `origin` (0 stays 0: none).
    @inlinable @inline(__always)
    public func nanosSinceOrigin(_ t: UInt64) -> Int64 {
        t == 0 ? 0 : Int64(bitPattern: monotonic(t) &- origin)
    }

    /// A reading as seconds since `origin` (0 stays 0: none).
    @inlinable @inline(__always)
    public func seconds(_ t: UInt64) -> Double {
        t == 0 ? 0 : Double(Int64(bitPattern: monotonic(t) &- origin)) / 1e9
    }
}

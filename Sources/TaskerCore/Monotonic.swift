#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Monotonic time in nanoseconds; the engine's only clock.
public enum Monotonic {
    @inline(__always)
    public static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    /// Seconds (as the Lua API speaks) to nanoseconds, saturating.
    @inline(__always)
    public static func nanos(_ seconds: Double) -> UInt64 {
        guard seconds > 0 else { return 0 }
        let ns = seconds * 1e9
        return ns >= 1.8e19 ? UInt64.max / 2 : UInt64(ns)
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A run's id: short, and in start order when sorted as text — the start
/// time in milliseconds (base 36, 9 digits until the year 5188) and three
/// random digits for runs started in the same millisecond.
///
///     RunID.make()   // "miaz3k1x0q7f"
public enum RunID {
    static let digits = Array("0123456789abcdefghijklmnopqrstuvwxyz".utf8)

    public static func make() -> String {
        var tv = timeval()
        gettimeofday(&tv, nil)
        let ms = UInt64(tv.tv_sec) * 1000 + UInt64(tv.tv_usec / 1000)
        return base36(ms, width: 9) + base36(UInt64.random(in: 0..<(36 * 36 * 36)), width: 3)
    }

    static func base36(_ value: UInt64, width: Int) -> String {
        var needed = 1, rest = value / 36
        while rest > 0 { needed += 1; rest /= 36 }
        let length = max(width, needed)
        // written in place: a String from reversed bytes asks the runtime
        // about their type, a scan of every conformance at its first use
        return String(unsafeUninitializedCapacity: length) { buf in
            var v = value
            for i in stride(from: length - 1, through: 0, by: -1) {
                buf[i] = digits[Int(v % 36)]
                v /= 36
            }
            return length
        }
    }
}

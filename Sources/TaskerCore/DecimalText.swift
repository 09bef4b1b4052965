/// Integers as decimal text without a String (the journal writes one per
/// task): digits written backwards into a small buffer.
public enum DecimalText {
    /// Room for any Int64 (Int64.min has 20 characters).
    public static let maxLength = 24

    /// Writes `n`'s text so that it ends at the end of `buffer` (at least
    /// `maxLength` bytes); returns the index where it starts.
    public static func write(_ n: Int64, endingAt buffer: UnsafeMutableRawBufferPointer) -> Int {
        var i = buffer.count
        var m = n.magnitude
        repeat {
            i -= 1
            buffer[i] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: m % 10)
            m /= 10
        } while m > 0
        if n < 0 {
            i -= 1
            buffer[i] = UInt8(ascii: "-")
        }
        return i
    }

    /// Appended byte by byte: a generic append of the buffer cost more
    /// than the digits.
    public static func append(_ n: Int64, to out: inout [UInt8]) {
        if n >= 0 && n < 10 {
            out.append(UInt8(ascii: "0") + UInt8(n))
            return
        }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { buf in
            var i = write(n, endingAt: buf)
            while i < buf.count {
                out.append(buf[i])
                i += 1
            }
        }
    }
}

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

extension DecimalText {
    /// A number with `places` decimals (0 to 9), rounded as printf's `%.*f`
    /// rounds it, without Foundation's `String(format:)` or a C `va_list` (the first
    /// call of either sets up machinery: 0.3 ms of every run's start, where
    /// the summary prints a duration). Too large for that (past 9e18
    /// units of the last place) or not finite: Swift's own text.
    public static func fixed(_ x: Double, places: Int) -> String {
        let places = min(max(places, 0), 9)
        var scale: Int64 = 1
        for _ in 0..<places { scale *= 10 }
        guard x.isFinite, x.magnitude * Double(scale) < 9e18 else { return "\(x)" }
        // printf rounds the exact value: 0.015 is 0.01499999… (so "0.01"),
        // while 0.015 * 100 rounds up to 1.5. Which side of the half the
        // exact product lies on is the sign of one fused multiply-add.
        let m = x.magnitude, product = m * Double(scale)
        var whole = product.rounded(.down)
        if product < 0x1p52 {  // past it every double is a whole number
            let side = (-(whole + 0.5)).addingProduct(m, Double(scale))
            if side > 0 || (side == 0 && whole.truncatingRemainder(dividingBy: 2) == 1) { whole += 1 }
        }
        let scaled = Int64(whole)
        var text = x.sign == .minus ? "-" : ""
        text += String(scaled / scale)
        if places > 0 {
            let fraction = String(scaled % scale)
            text += "." + String(repeating: "0", count: places - fraction.count) + fraction
        }
        return text
    }
}

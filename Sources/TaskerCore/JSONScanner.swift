/// Why JSON text could not be read, and where: `expected ':' at line 1,
/// column 5 (byte 5)`.
public struct JSONReadError: Error, CustomStringConvertible, Sendable, Equatable {
    public let message: String

    public init(message: String) { self.message = message }

    public var description: String { message }
}

/// A number as written: an integer when it has no `.` or exponent and fits.
public enum JSONNumber: Sendable, Equatable {
    case integer(Int64)
    case double(Double)
}

/// The tokens of JSON text, read in place: the one lexer for `JSONReader`,
/// the `json` module's decoder (which builds Lua values as it reads) and
/// stored values. Strict RFC 8259: no comments, no trailing commas, no
/// leading zeros, no raw control characters in strings, surrogates in
/// pairs. Valid for as long as `bytes` is.
public struct JSONScanner {
    public let bytes: UnsafeBufferPointer<UInt8>
    /// The next byte to read.
    public var position = 0

    public init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// The byte at `position`, or nil at the end.
    @inline(__always)
    public func peek() -> UInt8? { position < bytes.count ? bytes[position] : nil }

    public mutating func skipSpace() {
        while position < bytes.count {
            let b = bytes[position]
            guard b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 else { return }
            position += 1
        }
    }

    /// `what` at the current position: "… at line 3, column 7 (byte 20)".
    public func fail(_ what: String) -> JSONReadError {
        var line = 1, column = 1
        for b in bytes[0..<min(position, bytes.count)] {
            if b == 0x0A { line += 1; column = 1 } else { column += 1 }
        }
        return JSONReadError(message: "\(what) at line \(line), column \(column) (byte \(position + 1))")
    }

    /// The byte at `at` for a message: `'x'`, `byte 0x0a`, `end of text`.
    public func describe(_ at: Int) -> String {
        guard at < bytes.count else { return "end of text" }
        let b = bytes[at]
        return b >= 0x20 && b < 0x7F ? "'\(Character(UnicodeScalar(b)))'" : "byte 0x" + Self.hex2(b)
    }

    /// After the one value: only space may follow.
    public mutating func end() throws(JSONReadError) {
        skipSpace()
        guard position == bytes.count else { throw fail("unexpected \(describe(position)) after the value") }
    }

    /// `true`, `false` or `null`, at its first letter.
    public mutating func literal(_ word: StaticString) throws(JSONReadError) {
        let letters = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        for b in letters {
            guard position < bytes.count, bytes[position] == b else { throw fail("invalid literal (expected '\(word)')") }
            position += 1
        }
    }

    /// A number, at its first character (`-` or a digit).
    public mutating func number() throws(JSONReadError) -> JSONNumber {
        let start = position
        var isFloat = false
        if bytes[position] == UInt8(ascii: "-") { position += 1 }
        guard position < bytes.count, Self.isDigit(bytes[position]) else { throw fail("invalid number") }
        if bytes[position] == UInt8(ascii: "0"), position + 1 < bytes.count, Self.isDigit(bytes[position + 1]) {
            throw fail("invalid number (leading zero)")
        }
        digits()
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            isFloat = true
            position += 1
            let before = position
            digits()
            guard position > before else { throw fail("invalid number (no digits after '.')") }
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E") {
            isFloat = true
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") { position += 1 }
            let before = position
            digits()
            guard position > before else { throw fail("invalid number (no digits in the exponent)") }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
        if !isFloat, let n = Int64(text) { return .integer(n) }
        if let d = Double(text) { return .double(d) }
        throw fail("invalid number")
    }

    /// A string's bytes, escapes decoded, appended to `out`; at its opening quote.
    public mutating func string(into out: inout [UInt8]) throws(JSONReadError) {
        guard peek() == UInt8(ascii: "\"") else { throw fail("expected a string") }
        position += 1
        while true {
            guard position < bytes.count else { throw fail("unterminated string") }
            // a run of plain bytes, copied whole (UTF-8: JSON text is)
            let run = position
            while position < bytes.count, bytes[position] >= 0x20, bytes[position] != UInt8(ascii: "\""),
                  bytes[position] != UInt8(ascii: "\\") {
                if bytes[position] < 0x80 {
                    position += 1
                } else {
                    guard let n = utf8Sequence(at: position) else { throw fail("invalid UTF-8 in string") }
                    position += n
                }
            }
            if position > run { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<position])) }
            guard position < bytes.count else { throw fail("unterminated string") }
            let b = bytes[position]
            if b == UInt8(ascii: "\"") {
                position += 1
                return
            }
            if b < 0x20 { throw fail("control character in string") }
            position += 1
            guard position < bytes.count else { throw fail("unterminated string") }
            let e = bytes[position]
            position += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    guard position + 1 < bytes.count, bytes[position] == UInt8(ascii: "\\"), bytes[position + 1] == UInt8(ascii: "u") else {
                        throw fail("lone surrogate in \\u escape")
                    }
                    position += 2
                    let low = try hex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw fail("invalid surrogate pair") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw fail("lone surrogate in \\u escape")
                }
                out.append(contentsOf: String(Character(UnicodeScalar(scalar)!)).utf8)
            default:
                position -= 1
                let shown = e >= 0x20 && e < 0x7F ? String(Character(UnicodeScalar(e))) : "x" + Self.hex2(e)
                throw fail("invalid escape '\\\(shown)'")
            }
        }
    }

    /// The length of the well-formed UTF-8 sequence at `i` (a lead byte of
    /// 0x80 or more), or nil: no overlong forms, surrogates or values past
    /// U+10FFFF (RFC 3629).
    private func utf8Sequence(at i: Int) -> Int? {
        let b0 = bytes[i]
        func continuation(_ k: Int, _ range: ClosedRange<UInt8> = 0x80...0xBF) -> Bool {
            i + k < bytes.count && range.contains(bytes[i + k])
        }
        switch b0 {
        case 0xC2...0xDF: return continuation(1) ? 2 : nil
        case 0xE0: return continuation(1, 0xA0...0xBF) && continuation(2) ? 3 : nil
        case 0xE1...0xEC, 0xEE...0xEF: return continuation(1) && continuation(2) ? 3 : nil
        case 0xED: return continuation(1, 0x80...0x9F) && continuation(2) ? 3 : nil
        case 0xF0: return continuation(1, 0x90...0xBF) && continuation(2) && continuation(3) ? 4 : nil
        case 0xF1...0xF3: return continuation(1) && continuation(2) && continuation(3) ? 4 : nil
        case 0xF4: return continuation(1, 0x80...0x8F) && continuation(2) && continuation(3) ? 4 : nil
        default: return nil
        }
    }

    /// Four hex digits (no sign: `UInt32(_:radix:)` would take `+fff`).
    private mutating func hex4() throws(JSONReadError) -> UInt32 {
        guard position + 4 <= bytes.count else { throw fail("invalid \\u escape") }
        var v: UInt32 = 0
        for b in bytes[position..<(position + 4)] {
            let digit: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = b - UInt8(ascii: "A") + 10
            default: throw fail("invalid \\u escape")
            }
            v = v << 4 | UInt32(digit)
        }
        position += 4
        return v
    }

    private mutating func digits() {
        while position < bytes.count, Self.isDigit(bytes[position]) { position += 1 }
    }

    @inline(__always)
    private static func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }

    /// `0a`: two lowercase hex digits.
    private static func hex2(_ b: UInt8) -> String {
        let digits = Array("0123456789abcdef")
        return String([digits[Int(b >> 4)], digits[Int(b & 0xF)]])
    }
}

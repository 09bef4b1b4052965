import TaskerCore

/// Array parameters in PostgreSQL's text form (`{1,2}`, `{"a","b"}`), for
/// `= ANY($1::bigint[])` and the like. Built as bytes: a coordinator sends
/// several per batch of thousands of tasks, and building them a Unicode
/// scalar at a time was 9% of its CPU.
enum PGArray {
    static func integers<T: BinaryInteger>(_ values: some Sequence<T>) -> String {
        var out = Bytes()
        for v in values {
            out.separate()
            DecimalText.append(Int64(v), to: &out.bytes)  // String(v) of a generic integer: ~650 instructions
        }
        return out.finish()
    }

    /// Strings quoted, `"` and `\` escaped.
    static func text(_ values: some Sequence<String>) -> String {
        text(values.lazy.map(Optional.some))
    }

    /// The same with NULLs (nil).
    static func text(_ values: some Sequence<String?>) -> String {
        var out = Bytes()
        for v in values {
            out.separate()
            if let v { out.quote(v) } else { out.bytes.append(contentsOf: "NULL".utf8) }
        }
        return out.finish()
    }

    private struct Bytes {
        var bytes: [UInt8] = [UInt8(ascii: "{")]
        var first = true

        mutating func separate() {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
        }

        /// PostgreSQL text cannot hold NUL, and a NUL would end the whole
        /// literal early (the statement then fails for every element): it
        /// becomes U+FFFD, as invalid UTF-8 does.
        mutating func quote(_ value: String) {
            let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
            bytes.append(quote)
            var value = value
            value.withUTF8 { v in
                var run = 0  // start of the bytes not copied yet
                for i in v.indices where v[i] == quote || v[i] == backslash || v[i] == 0 {
                    bytes.append(contentsOf: UnsafeBufferPointer(rebasing: v[run..<i]))
                    if v[i] == 0 {
                        bytes.append(contentsOf: [0xEF, 0xBF, 0xBD])
                    } else {
                        bytes.append(backslash)
                        bytes.append(v[i])
                    }
                    run = i + 1
                }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: v[run...]))
            }
            bytes.append(quote)
        }

        mutating func finish() -> String {
            bytes.append(UInt8(ascii: "}"))
            return String(decoding: bytes, as: UTF8.self)
        }
    }
}

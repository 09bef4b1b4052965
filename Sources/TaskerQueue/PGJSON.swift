import TaskerCore

/// A `jsonb` parameter in its text form: an array of rows, each an array of
/// strings or nulls (a completion's values, looked up by place).
enum PGJSON {
    static func rows(_ rows: [[String?]]) -> String {
        var out: [UInt8] = [UInt8(ascii: "[")]
        out.reserveCapacity(64 * rows.count + 2)
        for (i, row) in rows.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "["))
            for (k, value) in row.enumerated() {
                if k > 0 { out.append(UInt8(ascii: ",")) }
                guard let value else {
                    out.append(contentsOf: "null".utf8)
                    continue
                }
                JSONEscaping.storedValues.append(withoutNUL(value), to: &out)  // quoted
            }
            out.append(UInt8(ascii: "]"))
        }
        out.append(UInt8(ascii: "]"))
        return String(decoding: out, as: UTF8.self)
    }

    /// PostgreSQL text cannot hold NUL (`jsonb` refuses `\u0000`): it
    /// becomes U+FFFD, as in array parameters.
    private static func withoutNUL(_ s: String) -> String {
        guard s.utf8.contains(0) else { return s }
        return String(s.unicodeScalars.map { $0 == "\0" ? "\u{FFFD}" : Character($0) })
    }
}

/// Array parameters in PostgreSQL's text form (`{1,2}`, `{"a","b"}`), for
/// `= ANY($1::bigint[])` and the like.
enum PGArray {
    static func integers<T: BinaryInteger>(_ values: some Sequence<T>) -> String {
        "{" + values.map { String($0) }.joined(separator: ",") + "}"
    }

    /// Strings quoted, `"` and `\` escaped.
    static func text(_ values: some Sequence<String>) -> String {
        "{" + values.map(quoted).joined(separator: ",") + "}"
    }

    /// The same with NULLs (nil).
    static func text(_ values: some Sequence<String?>) -> String {
        "{" + values.map { $0.map(quoted) ?? "NULL" }.joined(separator: ",") + "}"
    }

    /// PostgreSQL text cannot hold NUL, and a NUL would end the whole
    /// literal early (the statement then fails for every element): it
    /// becomes U+FFFD, as invalid UTF-8 does.
    private static func quoted(_ v: String) -> String {
        var q = "\""
        for ch in v.unicodeScalars {
            if ch == "\"" || ch == "\\" { q.unicodeScalars.append("\\") }
            q.unicodeScalars.append(ch == "\0" ? "\u{FFFD}" : ch)
        }
        return q + "\""
    }
}

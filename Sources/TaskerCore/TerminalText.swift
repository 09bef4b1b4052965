/// Text from a script (task names, error messages, log messages, a child's
/// streamed lines) made safe to write where a person reads it: control
/// characters become visible escapes, so a value can neither start a fake
/// line (LF, CR) nor drive the terminal (ESC, the C1 CSI U+009B, DEL).
///
///     TerminalText.escape("ok\n2026-… ERROR fake")   // "ok\\n2026-… ERROR fake"
///     TerminalText.escape("\u{1B}[2Jgone")            // "\\u001b[2Jgone"
///
/// Tab stays (it moves the cursor right, nothing more), unless the caller
/// measures columns; LF stays only where the caller wants lines (a traceback).
public enum TerminalText {
    /// Whether `u` would be escaped by `escape` with tabs and newlines escaped too.
    @inline(__always)
    public static func isControl(_ u: Unicode.Scalar) -> Bool {
        u.value < 0x20 || (u.value >= 0x7F && u.value <= 0x9F)
    }

    public static func escape(_ s: String, keepNewlines: Bool = false, keepTabs: Bool = true) -> String {
        func kept(_ u: Unicode.Scalar) -> Bool {
            !isControl(u) || (keepTabs && u == "\t") || (keepNewlines && u == "\n")
        }
        // Almost every string has nothing to escape: no copy then.
        guard !s.unicodeScalars.allSatisfy(kept) else { return s }
        var out = String.UnicodeScalarView()
        for u in s.unicodeScalars {
            if kept(u) {
                out.append(u)
            } else {
                out.append(contentsOf: visible(u).unicodeScalars)
            }
        }
        return String(out)
    }

    /// `\n`, `\r`, `\t`, else `\u001b` style (as JSON writes them).
    static func visible(_ u: Unicode.Scalar) -> String {
        switch u {
        case "\n": return "\\n"
        case "\r": return "\\r"
        case "\t": return "\\t"
        default:
            let hex = String(u.value, radix: 16)
            return "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        }
    }

    /// JSON text (a string literal, or a whole encoded value) with DEL and
    /// C1 characters escaped too: JSON allows them raw, a terminal obeys
    /// them. They occur only inside strings, so the text stays valid JSON
    /// with the same meaning.
    public static func escapingC1(json: String) -> String {
        guard json.unicodeScalars.contains(where: { $0.value >= 0x7F && $0.value <= 0x9F }) else { return json }
        var out = String.UnicodeScalarView()
        for u in json.unicodeScalars {
            if u.value >= 0x7F && u.value <= 0x9F {
                out.append(contentsOf: visible(u).unicodeScalars)
            } else {
                out.append(u)
            }
        }
        return String(out)
    }

    /// A JSON string literal safe on a terminal: every control character
    /// (C0, DEL, C1) escaped.
    public static func jsonQuoted(_ s: String) -> String {
        escapingC1(json: JSONString.quoted(s))
    }
}

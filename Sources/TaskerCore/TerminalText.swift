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
/// The invisible characters that reorder text on a terminal with bidi
/// support (U+200E/F, U+202A…E, U+2066…9: `gpj.<U+202E>exe` shows as
/// `exe.jpg`) and the line and paragraph separators (U+2028/9) are escaped
/// too, as the HTML report shows them.
public enum TerminalText {
    /// Whether `u` would be escaped by `escape` with tabs and newlines escaped too.
    @inline(__always)
    public static func isControl(_ u: Unicode.Scalar) -> Bool {
        let v = u.value
        return v < 0x20 || (v >= 0x7F && v <= 0x9F)
            || (v >= 0x200E && v <= 0x206A && (v <= 0x200F || (v >= 0x2028 && v <= 0x202E) || v >= 0x2066 && v <= 0x2069))
    }

    public static func escape(_ s: String, keepNewlines: Bool = false, keepTabs: Bool = true) -> String {
        escaped(s, c0: true, keepNewlines: keepNewlines, keepTabs: keepTabs) ?? s
    }

    /// JSON text (a string literal, or a whole encoded value) with DEL and
    /// C1 characters escaped too: JSON allows them raw, a terminal obeys
    /// them. They occur only inside strings, so the text stays valid JSON
    /// with the same meaning.
    public static func escapingC1(json: String) -> String {
        escaped(json, c0: false, keepNewlines: true, keepTabs: true) ?? json
    }

    /// The text with its control characters escaped, or nil when it has
    /// none (almost always: no copy then). Works on the UTF-8 bytes, one
    /// pass: a C1 character is the two bytes C2 80…C2 9F.
    private static func escaped(_ text: String, c0: Bool, keepNewlines: Bool, keepTabs: Bool) -> String? {
        var text = text
        return text.withUTF8 { bytes -> String? in
            /// How many bytes of the control character at `i` (0: none to escape).
            func control(at i: Int) -> Int {
                let b = bytes[i]
                if b < 0x20 {
                    guard c0 else { return 0 }
                    if (b == 0x09 && keepTabs) || (b == 0x0A && keepNewlines) { return 0 }
                    return 1
                }
                if b == 0x7F { return 1 }
                if b == 0xC2, i + 1 < bytes.count, bytes[i + 1] <= 0x9F { return 2 }
                if b == 0xE2, i + 2 < bytes.count, Self.isReordering(bytes[i + 1], bytes[i + 2]) { return 3 }
                return 0
            }
            var i = 0
            while i < bytes.count, control(at: i) == 0 { i += 1 }
            guard i < bytes.count else { return nil }
            var out = [UInt8]()
            out.reserveCapacity(bytes.count + 16)
            out.append(contentsOf: bytes[0..<i])
            let hex = Array("0123456789abcdef".utf8)
            while i < bytes.count {
                let n = control(at: i)
                if n == 0 {
                    out.append(bytes[i])
                    i += 1
                    continue
                }
                // C2 xx is U+00xx; E2 yy zz is U+2000 + (yy & 3F) << 6 + (zz & 3F)
                let value: UInt32 = switch n {
                case 1: UInt32(bytes[i])
                case 2: UInt32(bytes[i + 1])
                default: 0x2000 | UInt32(bytes[i + 1] & 0x3F) << 6 | UInt32(bytes[i + 2] & 0x3F)
                }
                out.append(0x5C)  // a backslash, then n, r, t, or u and four hex digits
                switch value {
                case 0x0A: out.append(0x6E)
                case 0x0D: out.append(0x72)
                case 0x09: out.append(0x74)
                default:
                    out.append(0x75)
                    out.append(hex[Int(value >> 12)])
                    out.append(hex[Int((value >> 8) & 0xF)])
                    out.append(hex[Int((value >> 4) & 0xF)])
                    out.append(hex[Int(value & 0xF)])
                }
                i += n
            }
            return String(decoding: out, as: UTF8.self)
        }
    }

    /// Whether E2 `b1` `b2` is U+200E/F, U+2028…202E or U+2066…2069.
    @inline(__always)
    static func isReordering(_ b1: UInt8, _ b2: UInt8) -> Bool {
        switch b1 {
        case 0x80: return b2 == 0x8E || b2 == 0x8F || (b2 >= 0xA8 && b2 <= 0xAE)
        case 0x81: return b2 >= 0xA6 && b2 <= 0xA9
        default: return false
        }
    }

    /// A JSON string literal safe on a terminal: every control character
    /// (C0, DEL, C1) escaped.
    public static func jsonQuoted(_ s: String) -> String {
        JSONEscaping.tasker.forTerminal.quoted(s)
    }
}

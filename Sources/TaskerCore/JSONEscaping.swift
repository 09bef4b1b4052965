/// How text is written inside JSON quotes: the one routine every JSON
/// string on the Swift side goes through (`JSONWriter`, the `json` module,
/// stored values, log lines).
///
/// Always escaped: `"`, `\` and the C0 controls (U+0000…U+001F). The forms
/// differ in which of those get a short escape (`\n`) rather than `\u000a`,
/// in `/` and in DEL and the C1 controls: each output keeps the bytes it
/// has always had, and a secret is masked in each form (`SecretMask`).
/// Hex digits are lowercase. Other bytes, non-ASCII included, are copied
/// as they are: a caller with bytes that may not be UTF-8 checks them first.
public struct JSONEscaping: Sendable, Equatable {
    /// For each ASCII byte: 0 when it is written as it is, else the
    /// character after the backslash (`u`: `\u00XX`).
    private let ascii: [UInt8]
    /// The C1 controls (UTF-8 `C2 80`…`C2 9F`) as `\u0080`…`\u009f`, and
    /// the characters that reorder text on a bidi terminal or break a line
    /// (`TerminalText.isReordering`) as `\u202e`…: the forms for terminals.
    private let c1: Bool

    private init(short: String, slash: Bool, del: Bool, c1: Bool) {
        var table = [UInt8](repeating: 0, count: 128)
        for b in 0..<0x20 { table[b] = UInt8(ascii: "u") }
        let controls: [UInt8: Int] = [UInt8(ascii: "b"): 0x08, UInt8(ascii: "f"): 0x0C, UInt8(ascii: "n"): 0x0A,
                                      UInt8(ascii: "r"): 0x0D, UInt8(ascii: "t"): 0x09]
        for letter in short.utf8 { table[controls[letter]!] = letter }
        table[0x22] = UInt8(ascii: "\"")
        table[0x5C] = UInt8(ascii: "\\")
        if slash { table[0x2F] = UInt8(ascii: "/") }
        if del { table[0x7F] = UInt8(ascii: "u") }
        ascii = table
        self.c1 = c1
    }

    /// `\n`, `\r`, `\t`; DEL as `\u007f`: the journal's run columns, `tasker
    /// show --json`, log lines.
    public static let tasker = JSONEscaping(short: "nrt", slash: false, del: true, c1: false)
    /// `\b`, `\f`, `\n`, `\r`, `\t`; DEL as it is: `json.encode`.
    public static let lua = JSONEscaping(short: "bfnrt", slash: false, del: false, c1: false)
    /// No short escapes; DEL as `\u007f`: a task's stored values.
    public static let storedValues = JSONEscaping(short: "", slash: false, del: true, c1: false)
    /// As Foundation's `JSONSerialization` wrote them: `\b`, `\f`, `\n`,
    /// `\r`, `\t`, `/` as `\/`, DEL as it is: the events file, `tasker runs
    /// --json`, `tasker list --json`, the JSON summary.
    public static let foundation = JSONEscaping(short: "bfnrt", slash: true, del: false, c1: false)

    /// Every form above, and each for a terminal (what `SecretMask` masks).
    public static let all: [JSONEscaping] = [tasker, lua, storedValues, foundation].flatMap { [$0, $0.forTerminal] }

    /// The same with DEL and the C1 controls escaped as well: JSON allows
    /// them raw, a terminal obeys them (the C1 CSI, U+009B, starts an
    /// escape sequence); and U+200E/F, U+2028…202E, U+2066…2069, which a
    /// bidi terminal obeys too. Still JSON, with the same meaning.
    public var forTerminal: JSONEscaping {
        var table = ascii
        table[0x7F] = UInt8(ascii: "u")
        return JSONEscaping(ascii: table, c1: true)
    }

    private init(ascii: [UInt8], c1: Bool) {
        self.ascii = ascii
        self.c1 = c1
    }

    /// `bytes` quoted, appended to `out`; runs that need no escape are
    /// copied whole.
    public func append(_ bytes: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var copied = 0
        var i = 0
        let n = bytes.count
        while i < n {
            let b = bytes[i]
            let width: Int
            let escape: UInt8
            if b < 0x80 {
                escape = ascii[Int(b)]
                width = 1
            } else if c1, b == 0xC2, i + 1 < n, bytes[i + 1] <= 0x9F {
                escape = UInt8(ascii: "u")
                width = 2
            } else if c1, b == 0xE2, i + 2 < n, TerminalText.isReordering(bytes[i + 1], bytes[i + 2]) {
                escape = UInt8(ascii: "u")
                width = 3
            } else {
                escape = 0
                width = 1
            }
            guard escape != 0 else {
                i += 1
                continue
            }
            if copied < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[copied..<i])) }
            out.append(UInt8(ascii: "\\"))
            out.append(escape)
            if escape == UInt8(ascii: "u") {
                // C2 xx is U+00xx; E2 yy zz is U+2000 + (yy & 3F) << 6 + (zz & 3F)
                let value: Int = switch width {
                case 1: Int(b)
                case 2: Int(bytes[i + 1])
                default: 0x2000 | Int(bytes[i + 1] & 0x3F) << 6 | Int(bytes[i + 2] & 0x3F)
                }
                out.append(Self.hex[value >> 12])
                out.append(Self.hex[(value >> 8) & 0xF])
                out.append(Self.hex[(value >> 4) & 0xF])
                out.append(Self.hex[value & 0xF])
            }
            i += width
            copied = i
        }
        if copied < n { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[copied..<n])) }
        out.append(UInt8(ascii: "\""))
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// `s` quoted, appended to `out`.
    public func append(_ s: String, to out: inout [UInt8]) {
        var s = s
        s.withUTF8 { append($0, to: &out) }
    }

    /// `s` quoted, appended to `out` (no copy of `s` when nothing in it
    /// needs an escape).
    public func append(_ s: String, to out: inout String) {
        var s = s
        let plain = s.withUTF8 { bytes in !bytes.contains { needsEscape($0) } }
        if plain {
            out += "\""
            out += s
            out += "\""
            return
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(s.utf8.count + 16)
        append(s, to: &bytes)
        out += String(decoding: bytes, as: UTF8.self)
    }

    /// `s` as a JSON string literal.
    public func quoted(_ s: String) -> String {
        var out = ""
        append(s, to: &out)
        return out
    }

    /// Whether `b` may start an escape (of the non-ASCII bytes, `0xC2` and
    /// `0xE2` only may, in the forms for terminals).
    private func needsEscape(_ b: UInt8) -> Bool {
        b < 0x80 ? ascii[Int(b)] != 0 : (c1 && (b == 0xC2 || b == 0xE2))
    }
}

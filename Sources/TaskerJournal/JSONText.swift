/// The few JSON shapes the journal stores (lists of strings or numbers,
/// string maps, attempt lists), written and read without Foundation on the
/// writer's hot path.
enum JSONText {
    static func quote(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where u.value < 0x20:
                let hex = String(u.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(u)
            }
        }
        return out + "\""
    }

    static func strings(_ list: [String]) -> String { "[" + list.map(quote).joined(separator: ",") + "]" }
    static func ints(_ list: [Int]) -> String { "[" + list.map(String.init).joined(separator: ",") + "]" }

    static func map(_ m: [String: String]) -> String {
        "{" + m.sorted { $0.key < $1.key }.map { "\(quote($0.key)):\(quote($0.value))" }.joined(separator: ",") + "}"
    }

    static func counts(_ m: [String: Int]) -> String {
        "{" + m.sorted { $0.key < $1.key }.map { "\(quote($0.key)):\($0.value)" }.joined(separator: ",") + "}"
    }

    static func number(_ d: Double) -> String {
        d.isFinite ? String(format: "%.6f", d) : "null"
    }

    static func attempts(_ list: [JournalAttempt]) -> String {
        "[" + list.map { a in
            var s = "{\"start\":\(number(a.start)),\"end\":\(number(a.end))"
            if let e = a.error { s += ",\"error\":\(quote(e))" }
            if let k = a.kind { s += ",\"kind\":\(quote(k))" }
            return s + "}"
        }.joined(separator: ",") + "]"
    }
}

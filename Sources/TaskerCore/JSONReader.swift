/// Reads JSON text into a `JSONValue`: the one JSON reader on the Swift
/// side (the journal's run columns, a pipeline's description). Strict (see
/// `JSONScanner`); an error says what and where. Strings that are not
/// UTF-8 once unescaped have their bad bytes replaced (U+FFFD).
public enum JSONReader {
    public static let maxDepth = 200

    public static func read(_ text: String) throws(JSONReadError) -> JSONValue {
        var text = text
        return try text.withUTF8 { bytes in Result { () throws(JSONReadError) in try read(bytes) } }.get()
    }

    public static func read(_ bytes: UnsafeBufferPointer<UInt8>) throws(JSONReadError) -> JSONValue {
        var s = JSONScanner(bytes)
        s.skipSpace()
        let v = try value(&s, depth: 0)
        try s.end()
        return v
    }

    private static func value(_ s: inout JSONScanner, depth: Int) throws(JSONReadError) -> JSONValue {
        guard depth < maxDepth else { throw s.fail("nested deeper than \(maxDepth) levels") }
        guard let b = s.peek() else { throw s.fail("unexpected end of text") }
        switch b {
        case UInt8(ascii: "{"): return try object(&s, depth: depth)
        case UInt8(ascii: "["): return try array(&s, depth: depth)
        case UInt8(ascii: "\""): return .string(try string(&s))
        case UInt8(ascii: "t"): try s.literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try s.literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try s.literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            switch try s.number() {
            case .integer(let n): return .integer(n)
            case .double(let d): return .double(d)
            }
        default: throw s.fail("unexpected \(s.describe(s.position))")
        }
    }

    private static func string(_ s: inout JSONScanner) throws(JSONReadError) -> String {
        var bytes: [UInt8] = []
        try s.string(into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func object(_ s: inout JSONScanner, depth: Int) throws(JSONReadError) -> JSONValue {
        s.position += 1
        var members: [(key: String, value: JSONValue)] = []
        s.skipSpace()
        if s.peek() == UInt8(ascii: "}") {
            s.position += 1
            return .object(members)
        }
        while true {
            s.skipSpace()
            guard s.peek() == UInt8(ascii: "\"") else { throw s.fail("expected a string key") }
            let key = try string(&s)
            s.skipSpace()
            guard s.peek() == UInt8(ascii: ":") else { throw s.fail("expected ':'") }
            s.position += 1
            s.skipSpace()
            members.append((key, try value(&s, depth: depth + 1)))
            s.skipSpace()
            switch s.peek() {
            case UInt8(ascii: "}"):
                s.position += 1
                return .object(members)
            case UInt8(ascii: ","):
                s.position += 1
            default:
                throw s.fail("expected ',' or '}'")
            }
        }
    }

    private static func array(_ s: inout JSONScanner, depth: Int) throws(JSONReadError) -> JSONValue {
        s.position += 1
        var items: [JSONValue] = []
        s.skipSpace()
        if s.peek() == UInt8(ascii: "]") {
            s.position += 1
            return .array(items)
        }
        while true {
            s.skipSpace()
            items.append(try value(&s, depth: depth + 1))
            s.skipSpace()
            switch s.peek() {
            case UInt8(ascii: "]"):
                s.position += 1
                return .array(items)
            case UInt8(ascii: ","):
                s.position += 1
            default:
                throw s.fail("expected ',' or ']'")
            }
        }
    }
}

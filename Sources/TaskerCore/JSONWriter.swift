/// Writes JSON text into bytes, value by value: the one JSON writer on the
/// Swift side (the journal's run columns, the events file, `tasker runs`,
/// `show` and `list --json`, log lines and the JSON summary). Keys come out
/// in the order they are written (callers sort them); commas, colons and
/// (pretty) line breaks are the writer's.
///
///     var w = JSONWriter(.tasker)
///     w.beginObject()
///     w.key("id"); w.integer(3)
///     w.key("tags"); w.beginArray(); w.string("a/b"); w.endArray()
///     w.endObject()
///     w.text   // {"id":3,"tags":["a/b"]}
public struct JSONWriter {
    /// How strings, doubles and layout are written.
    public struct Format: Sendable {
        public var escaping: JSONEscaping
        public var doubles: JSONDoubles
        /// Foundation's `.prettyPrinted` layout: one value per line, two
        /// spaces per level, `"key" : value`, and an empty array or object
        /// as an opening line, an empty line and a closing line.
        public var pretty: Bool

        public init(escaping: JSONEscaping, doubles: JSONDoubles, pretty: Bool = false) {
            self.escaping = escaping
            self.doubles = doubles
            self.pretty = pretty
        }

        /// tasker's own form: the journal's run columns, `show --json`, log lines.
        public static let tasker = Format(escaping: .tasker, doubles: .swift)
        /// What Foundation's `JSONSerialization` wrote (see `JSONEscaping.foundation`).
        public static let foundation = Format(escaping: .foundation, doubles: .foundation)

        public var prettyPrinted: Format {
            var f = self
            f.pretty = true
            return f
        }

        /// DEL and C1 controls escaped too (see `JSONEscaping.forTerminal`).
        public var forTerminal: Format {
            var f = self
            f.escaping = f.escaping.forTerminal
            return f
        }
    }

    public private(set) var bytes: [UInt8] = []
    public let format: Format
    /// A value was written at this level: the next one needs a comma.
    private var comma = false
    /// A key was written: its value follows, with no comma.
    private var afterKey = false
    private var depth = 0

    public init(_ format: Format, capacity: Int = 0) {
        self.format = format
        if capacity > 0 { bytes.reserveCapacity(capacity) }
    }

    /// The text written so far.
    public var text: String { String(decoding: bytes, as: UTF8.self) }

    // MARK: structure

    public mutating func beginObject() { open(UInt8(ascii: "{")) }
    public mutating func endObject() { close(UInt8(ascii: "}")) }
    public mutating func beginArray() { open(UInt8(ascii: "[")) }
    public mutating func endArray() { close(UInt8(ascii: "]")) }

    /// An object's key; its value is the next thing written.
    public mutating func key(_ k: String) {
        prefix()
        format.escaping.append(k, to: &bytes)
        colon()
    }

    /// A key known when compiled (no String made).
    public mutating func key(_ k: StaticString) {
        prefix()
        format.escaping.append(UnsafeBufferPointer(start: k.utf8Start, count: k.utf8CodeUnitCount), to: &bytes)
        colon()
    }

    // MARK: values

    public mutating func string(_ s: String) {
        prefix()
        format.escaping.append(s, to: &bytes)
        comma = true
    }

    /// A string or, for nil, null.
    public mutating func string(_ s: String?) {
        if let s { string(s) } else { null() }
    }

    /// A string from its UTF-8 bytes (checked by the caller: they are copied as they are).
    public mutating func string(utf8: UnsafeBufferPointer<UInt8>) {
        prefix()
        format.escaping.append(utf8, to: &bytes)
        comma = true
    }

    public mutating func integer(_ n: Int) { integer(Int64(n)) }

    public mutating func integer(_ n: Int64) {
        prefix()
        DecimalText.append(n, to: &bytes)
        comma = true
    }

    /// A double (see `JSONDoubles`); null for NaN and the infinities, which JSON has not.
    public mutating func double(_ d: Double) {
        prefix()
        format.doubles.append(d, to: &bytes)
        comma = true
    }

    public mutating func bool(_ b: Bool) { word(b ? "true" : "false") }

    public mutating func null() { word("null") }

    /// JSON text encoded already (a `json.encode` result), as it is.
    public mutating func raw(_ json: String) {
        prefix()
        bytes.append(contentsOf: json.utf8)
        comma = true
    }

    /// A whole value; objects keep their keys' order.
    public mutating func value(_ v: JSONValue) {
        switch v {
        case .null: null()
        case .bool(let b): bool(b)
        case .integer(let n): integer(n)
        case .double(let d): double(d)
        case .string(let s): string(s)
        case .array(let items):
            beginArray()
            for item in items { value(item) }
            endArray()
        case .object(let members):
            beginObject()
            for (k, item) in members {
                key(k)
                value(item)
            }
            endObject()
        }
    }

    /// `[s1,s2,…]`.
    public mutating func strings(_ list: [String]) {
        beginArray()
        for s in list { string(s) }
        endArray()
    }

    // MARK: layout

    private mutating func colon() {
        if format.pretty {
            bytes.append(contentsOf: [0x20, UInt8(ascii: ":"), 0x20])
        } else {
            bytes.append(UInt8(ascii: ":"))
        }
        afterKey = true
    }

    private mutating func word(_ w: StaticString) {
        prefix()
        bytes.append(contentsOf: UnsafeBufferPointer(start: w.utf8Start, count: w.utf8CodeUnitCount))
        comma = true
    }

    /// Before a value or a key: the comma and, pretty, the line's indent.
    private mutating func prefix() {
        if afterKey {
            afterKey = false
            return
        }
        if comma {
            bytes.append(UInt8(ascii: ","))
            if format.pretty { bytes.append(0x0A) }
        }
        if format.pretty && depth > 0 { indent() }
    }

    private mutating func open(_ bracket: UInt8) {
        prefix()
        bytes.append(bracket)
        if format.pretty { bytes.append(0x0A) }
        depth += 1
        comma = false
    }

    private mutating func close(_ bracket: UInt8) {
        depth -= 1
        if format.pretty {
            bytes.append(0x0A)
            indent()
        }
        bytes.append(bracket)
        comma = true
    }

    private mutating func indent() {
        bytes.append(contentsOf: repeatElement(0x20, count: 2 * depth))
    }
}

/// How doubles are written. Either way NaN and the infinities are `null`
/// (JSON has neither).
public enum JSONDoubles: Sendable {
    /// Swift's shortest text that reads back as the same double, always
    /// with a `.` or an exponent: `1.0`, `0.1`, `1e-07`, `1e+20`.
    case swift
    /// The same without a trailing `.0` (`1`, `-0`, `1e+20`): as
    /// Foundation's `JSONSerialization` wrote them.
    case foundation

    public func append(_ d: Double, to out: inout [UInt8]) {
        guard d.isFinite else {
            out.append(contentsOf: "null".utf8)
            return
        }
        var text = d.description
        text.withUTF8 { u in
            var n = u.count
            if self == .foundation, n > 2, u[n - 2] == UInt8(ascii: "."), u[n - 1] == UInt8(ascii: "0") { n -= 2 }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: u[..<n]))
        }
    }
}

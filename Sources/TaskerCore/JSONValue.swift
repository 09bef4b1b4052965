import Foundation

/// A JSON value as `JSONReader` reads it and `JSONWriter.value` writes it.
/// Numbers written without `.` or exponent that fit stay integers; an
/// object keeps its keys in order.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([(key: String, value: JSONValue)])

    public static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): true
        case (.bool(let x), .bool(let y)): x == y
        case (.integer(let x), .integer(let y)): x == y
        case (.double(let x), .double(let y)): x == y
        case (.string(let x), .string(let y)): x == y
        case (.array(let x), .array(let y)): x == y
        case (.object(let x), .object(let y)): x.count == y.count && zip(x, y).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: false
        }
    }

    /// An object of `members`, its keys in `order`.
    public static func object(_ members: [String: JSONValue], order: JSONKeyOrder) -> JSONValue {
        .object(order.sorted(members))
    }

    /// An array of strings.
    public static func strings(_ list: [String]) -> JSONValue { .array(list.map(JSONValue.string)) }

    // MARK: reading

    /// An object's value for `key` (the last, if the key repeats).
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.last { $0.key == key }?.value
    }

    public var isNull: Bool { self == .null }
    public var string: String? { if case .string(let s) = self { s } else { nil } }
    public var bool: Bool? { if case .bool(let b) = self { b } else { nil } }
    /// An integer as written (`3`, not `3.0`).
    public var integer: Int64? { if case .integer(let n) = self { n } else { nil } }
    /// Any number, as a double.
    public var number: Double? {
        switch self {
        case .integer(let n): Double(n)
        case .double(let d): d
        default: nil
        }
    }
    public var array: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    public var members: [(key: String, value: JSONValue)]? { if case .object(let m) = self { m } else { nil } }

    /// `[String]`, when every element is a string.
    public var stringArray: [String]? {
        guard let a = array else { return nil }
        var out: [String] = []
        out.reserveCapacity(a.count)
        for v in a {
            guard let s = v.string else { return nil }
            out.append(s)
        }
        return out
    }

    /// `[String: T]`, when every value converts (`transform` returns nil
    /// for one that does not).
    public func dictionary<T>(_ transform: (JSONValue) -> T?) -> [String: T]? {
        guard let m = members else { return nil }
        var out: [String: T] = [:]
        for (k, v) in m {
            guard let t = transform(v) else { return nil }
            out[k] = t
        }
        return out
    }
}

/// The order of an object's keys.
public enum JSONKeyOrder: Sendable {
    /// Swift's `<` on strings: tasker's own JSON (the journal's run
    /// columns, `show --json`, log fields).
    case string
    /// As Foundation's `JSONSerialization` sorted them (`.sortedKeys`):
    /// numeric, case-insensitive, in the system locale's collation
    /// (`_` `9` `10` `a` `A` `B` `é` `Z`). The outputs it wrote keep it.
    case foundation

    public func sorted<V>(_ d: [String: V]) -> [(key: String, value: V)] {
        switch self {
        case .string:
            return d.sorted { $0.key < $1.key }
        case .foundation:
            // the very call JSONSerialization made
            return d.sorted { a, b in
                a.key.compare(b.key, options: [.numeric, .caseInsensitive, .forcedOrdering],
                              range: a.key.startIndex..<a.key.endIndex, locale: NSLocale.system) == .orderedAscending
            }
        }
    }
}

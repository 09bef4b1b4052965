import TaskerCore

/// The runs table's JSON columns (args, vars, counts), for every store:
/// written with `JSONWriter` in tasker's form (keys sorted), read with
/// `JSONReader`.
public enum RunColumns {
    /// `["a","b"]`.
    public static func args(_ list: [String]) -> String {
        var w = JSONWriter(.tasker)
        w.strings(list)
        return w.text
    }

    /// `{"k":"v",…}`.
    public static func vars(_ m: [String: String]) -> String {
        var w = JSONWriter(.tasker)
        w.beginObject()
        for (k, v) in JSONKeyOrder.string.sorted(m) {
            w.key(k)
            w.string(v)
        }
        w.endObject()
        return w.text
    }

    /// `{"failed":1,…}`.
    public static func counts(_ m: [String: Int]) -> String {
        var w = JSONWriter(.tasker)
        w.beginObject()
        for (k, n) in JSONKeyOrder.string.sorted(m) {
            w.key(k)
            w.integer(n)
        }
        w.endObject()
        return w.text
    }

    /// The args back; nil when the text is not an array of strings.
    public static func args(from text: String?) -> [String]? { read(text)?.stringArray }

    /// The vars back; nil when the text is not an object of strings.
    public static func vars(from text: String?) -> [String: String]? { read(text)?.dictionary(\.string) }

    /// The counts back; nil when the text is not an object of integers.
    public static func counts(from text: String?) -> [String: Int]? {
        read(text)?.dictionary { $0.integer.flatMap { Int(exactly: $0) } }
    }

    private static func read(_ text: String?) -> JSONValue? {
        guard let text else { return nil }
        return try? JSONReader.read(text)
    }
}

import Foundation
import TaskerCore

/// The few JSON shapes the runs table stores (args, vars, counts), for
/// every store.
public enum JSONText {
    static func quote(_ s: String) -> String { JSONString.quoted(s) }

    public static func strings(_ list: [String]) -> String { "[" + list.map(quote).joined(separator: ",") + "]" }
    public static func map(_ m: [String: String]) -> String {
        "{" + m.sorted { $0.key < $1.key }.map { "\(quote($0.key)):\(quote($0.value))" }.joined(separator: ",") + "}"
    }

    public static func counts(_ m: [String: Int]) -> String {
        "{" + m.sorted { $0.key < $1.key }.map { "\(quote($0.key)):\($0.value)" }.joined(separator: ",") + "}"
    }

    /// One of those shapes back (nil when it is not one).
    public static func decode<T>(_ text: String?) -> T? {
        guard let text, let data = text.data(using: .utf8) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? T
    }
}

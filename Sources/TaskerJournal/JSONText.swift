import TaskerCore

/// The few JSON shapes the runs table stores (args, vars, counts).
enum JSONText {
    static func quote(_ s: String) -> String { JSONString.quoted(s) }

    static func strings(_ list: [String]) -> String { "[" + list.map(quote).joined(separator: ",") + "]" }
    static func map(_ m: [String: String]) -> String {
        "{" + m.sorted { $0.key < $1.key }.map { "\(quote($0.key)):\(quote($0.value))" }.joined(separator: ",") + "}"
    }

    static func counts(_ m: [String: Int]) -> String {
        "{" + m.sorted { $0.key < $1.key }.map { "\(quote($0.key)):\($0.value)" }.joined(separator: ",") + "}"
    }
}

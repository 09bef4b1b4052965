import TaskerCore

/// The failure kinds of the Lua runtime's modules (the engine's own live in
/// TaskerCore).
extension TaskFailure.Kind {
    public static let http = Self(rawValue: "http")
    public static let exec = Self(rawValue: "exec")
    public static let json = Self(rawValue: "json")
    public static let fs = Self(rawValue: "fs")
}

import CLua
import CLuaShim
import TaskerCore

/// What the journal keeps of a task's values: its return values as text
/// (`StoredValueCodec`: they come back exactly), when they can be stored
/// and fit in 1 MiB; otherwise why not (the task is then not resumable).
public enum StoredValues: Sendable, Equatable {
    case json(String)
    case notStorable(String)
}

/// A task's identity: `spec.id`, or a hash with its occurrence number;
/// else why the task has none.
public struct IdentityParts: Sendable {
    public var explicit: String?
    public var hash: UInt64?
    public var occurrence = 1
    public var notResumable: String?

    init(explicit: String? = nil, hash: UInt64? = nil, occurrence: Int = 1, notResumable: String? = nil) {
        self.explicit = explicit
        self.hash = hash
        self.occurrence = occurrence
        self.notResumable = notResumable
    }
}

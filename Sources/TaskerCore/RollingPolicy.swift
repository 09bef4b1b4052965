/// How a rolling group goes through its hosts (`tasker.rolling`): batches
/// of `batch` members, one after another with `pause` seconds between;
/// once more than `maxFailures` members failed, no further batch starts.
/// `perHost` caps the members of one host running at once, across every
/// rolling group of the run.
public struct RollingPolicy: Sendable {
    public var batch: Int
    public var maxFailures: Int
    public var pause: Double
    public var perHost: Int

    public init(batch: Int, maxFailures: Int, pause: Double, perHost: Int) {
        self.batch = max(1, batch)
        self.maxFailures = max(0, maxFailures)
        self.pause = max(0, pause)
        self.perHost = max(1, perHost)
    }
}

/// A rolling group's progress (in its `GroupState`).
final class RollingState {
    let policy: RollingPolicy
    /// Each member's host (same order as the members).
    let hosts: [String]
    /// Members of the current batch not started yet (their host was busy).
    var pending: [Int] = []
    var failures = 0
    var stopped = false
    /// Inside `startPending`'s loop.
    var starting = false
    /// Why it stopped, as its cancelled members and the group say.
    var stopMessage: String?

    init(policy: RollingPolicy, hosts: [String]) {
        self.policy = policy
        self.hosts = hosts
    }
}

/// Rolling members running per host, and the groups waiting for a host.
final class HostSlots {
    private var busy: [String: Int] = [:]
    /// Groups with members waiting for a host, in the order they waited.
    var waiting: [TaskID] = []

    func take(_ host: String, limit: Int) -> Bool {
        let n = busy[host, default: 0]
        guard n < limit else { return false }
        busy[host] = n + 1
        return true
    }

    func release(_ host: String) {
        let n = busy[host, default: 0] - 1
        busy[host] = n > 0 ? n : nil
    }
}

/// What other sessions' snapshots allow the sweeper's upkeep, from the
/// oldest transaction id they hold (`QueueStore.oldestHeld`: a snapshot's
/// xmin, a transaction's own id), looked at every sweep (on its thread).
///
/// A vacuum removes only the dead rows that no snapshot can see any more:
/// while the oldest held id is where it was at this sweeper's last vacuum
/// of a table (a long transaction, a `pg_dump`), another removes nothing
/// new and only reads the table again (seen: every worker vacuumed every
/// second behind one). Then it waits `stuckVacuumEvery`, which also lets a
/// vacuum that could not give pages back (its lock taken) try again.
///
/// An index rebuild (REINDEX CONCURRENTLY) waits for every transaction
/// older than each of its steps, holding the sweepers' advisory lock
/// meanwhile (no other sweeper vacuums): none starts while a session has
/// held the same id since the last look (a second ago, or more), nor at
/// the first look, which cannot tell. Prepared transactions and
/// replication slots hold a vacuum back but no rebuild (it does not wait
/// for them), so the rebuild looks at sessions' ids alone.
struct HeldSnapshots {
    static let stuckVacuumEvery: UInt64 = 30_000_000_000

    /// The oldest id held at the last look (nil: none).
    private(set) var current: String?
    /// The oldest id sessions held at the last look and the one before,
    /// and how many looks there were.
    private var sessions: String?
    private var sessionsBefore: String?
    private var looks = 0
    /// Per table: the oldest id held at its last vacuum, and when that was.
    private var atVacuum: [String: (held: String?, at: UInt64)] = [:]

    mutating func look(_ oldest: String?, bySessions: String?) {
        current = oldest
        sessionsBefore = sessions
        sessions = bySessions
        looks += 1
    }

    /// A rebuild may start: no session holds an id, or none has held the
    /// same one since the last look.
    var mayRebuild: Bool {
        guard let sessions else { return true }
        return looks > 1 && sessions != sessionsBefore
    }

    func mayVacuum(_ table: String, now: UInt64) -> Bool {
        guard let current, let last = atVacuum[table], last.held == current else { return true }
        return now &- last.at >= Self.stuckVacuumEvery
    }

    mutating func vacuumed(_ table: String, at now: UInt64) {
        atVacuum[table] = (current, now)
    }
}

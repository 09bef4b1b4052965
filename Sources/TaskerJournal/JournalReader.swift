import CSQLite
import Foundation

/// Reads the journal for history (`tasker runs`, `show`, `report`) and
/// resume. Opening it also settles runs whose process died: their
/// unfinished tasks become failed attempts of kind `lost`.
public final class JournalReader {
    let store: JournalStore
    /// Runs that died but could not be settled now (see `settleDeadRuns`):
    /// read as died all the same.
    private var unsettled: Set<String> = []
    /// Told once per run of the log rows of it that could not be read (a
    /// damaged file): their tasks are missing from what is read.
    private let onUnreadableRows: ((_ run: String, _ rows: Int) -> Void)?
    private var toldUnreadable: Set<String> = []

    /// The journal file in `directory`.
    public convenience init(directory: String, create: Bool = false,
                            onUnreadableRows: ((_ run: String, _ rows: Int) -> Void)? = nil) throws {
        try self.init(store: SQLiteJournalStore(directory: directory, create: create), onUnreadableRows: onUnreadableRows)
    }

    public init(store: JournalStore, onUnreadableRows: ((_ run: String, _ rows: Int) -> Void)? = nil) throws {
        self.store = store
        self.onUnreadableRows = onUnreadableRows
        try settleDeadRuns()
    }

    /// Runs newest first; of one pipeline when given.
    public func runs(pipeline: String? = nil, limit: Int? = nil) throws -> [JournalRun] {
        try store.runs(id: nil, pipeline: pipeline, limit: limit).map(asRead)
    }

    /// `r` as a reader shows it: one that died is `died` even if it could
    /// not be settled (exit code -1, as settling records).
    private func asRead(_ r: JournalRun) -> JournalRun {
        guard !unsettled.isEmpty, unsettled.contains(r.id) else { return r }
        var r = r
        r.exitCode = -1
        return r
    }

    /// The run `id`, or for `last` the newest run (of `pipeline` when
    /// given). An id may be shortened to any start of it that only one
    /// run has (4 characters or more).
    public func run(_ id: String, pipeline: String? = nil) throws -> JournalRun? {
        if id == "last" { return try runs(pipeline: pipeline, limit: 1).first }
        if let r = try store.runs(id: id, pipeline: nil, limit: 1).first { return asRead(r) }
        guard id.count >= 4 else { return nil }
        let matches = try store.runIDs(skippingNewest: 0).filter { $0.hasPrefix(id) }
        guard matches.count <= 1 else { throw AmbiguousRunID(prefix: id, matches: matches) }
        return try matches.first.flatMap { try store.runs(id: $0, pipeline: nil, limit: 1).first }.map(asRead)
    }

    /// The run's tasks in add order, each as last recorded.
    public func tasks(of run: String) throws -> [JournalTask] {
        try entries(of: run).map(\.task)
    }

    /// Calls `each` with the run's tasks in add order, each as last
    /// recorded, made one at a time: a run of any size costs its compact
    /// entries, never an array of tasks (history and the report of runs of
    /// 100,000s of tasks). An error `each` throws stops it.
    /// `onMark` is handed the run's marks (pauses, the interrupt) first,
    /// in the order they were recorded.
    public func forEachTask(of run: String, onMark: ((JournalMark) -> Void)? = nil,
                            _ each: (JournalTask) throws -> Void) throws {
        for e in try entries(of: run, onMark: onMark) { try each(e.task) }
    }

    /// The latest entry of each task of the run, in id order.
    func entries(of run: String, onMark: ((JournalMark) -> Void)? = nil) throws -> [JournalEntry] {
        // One slot per task, found through a small index: a dictionary of
        // whole entries would take twice the memory at 100,000s of tasks.
        var latest: [JournalEntry] = []
        var slot: [Int: Int] = [:]
        var unreadable = 0
        defer {
            if unreadable > 0, toldUnreadable.insert(run).inserted { onUnreadableRows?(run, unreadable) }
        }
        try store.logRows(run: run) { row in
            guard let list = JournalCodec.decode(row, onMark: onMark) else {
                unreadable += 1
                return
            }
            // The latest entry wins, except that a task seen running never
            // undoes a final state (the two may share a batch in any order).
            for e in list {
                if let i = slot[e.id] {
                    if e.state != .running || latest[i].state == .running { latest[i] = e }
                } else {
                    slot[e.id] = latest.count
                    latest.append(e)
                }
            }
        }
        slot = [:]
        // Usually in order already (tasks finish roughly as they were added).
        if zip(latest, latest.dropFirst()).contains(where: { $0.id > $1.id }) { latest.sort { $0.id < $1.id } }
        return latest
    }

    /// The run's marks (pauses, the interrupt) in the order they happened.
    public func marks(of run: String) throws -> [JournalMark] {
        var marks: [JournalMark] = []
        _ = try entries(of: run) { marks.append($0) }
        return marks
    }

    /// What task `task`'s processes wrote, as recorded (nil: nothing).
    public func output(of run: String, task: Int) throws -> String? {
        try marks(of: run).last { ($0.kind == .output || $0.kind == .failedOutput) && $0.task == task }?.detail
    }

    public func requests(of run: String) throws -> [JournalHostRequests] {
        try store.requests(run: run)
    }

    /// What a resume of `run` may reuse: identity → stored values (JSON).
    public func reusable(from run: String) throws -> [String: String] {
        var out: [String: String] = [:]
        for e in try entries(of: run) where e.state == .succeeded && e.notResumable == nil {
            if let identity = e.identity.text { out[identity] = e.value ?? "[]" }
        }
        return out
    }

    /// Deletes all but the newest `keep` runs, never one that may still be
    /// going on (its process alive, or on another machine and not ended);
    /// returns how many went.
    @discardableResult
    public func prune(keep: Int) throws -> Int {
        let live = Set(try store.unendedRuns().filter(Self.mayBeLive).map(\.id))
        let ids = try store.runIDs(skippingNewest: keep).filter { !live.contains($0) }
        try store.delete(runs: ids)
        return ids.count
    }

    /// Whether an unended run may still be running: its process is a live
    /// tasker here, or it ran on another machine (whose processes cannot
    /// be checked from here; that machine settles it when it dies).
    static func mayBeLive(_ run: UnendedRun) -> Bool {
        if let host = run.host, host != hostName { return true }
        return isTasker(pid: run.pid)
    }

    // MARK: runs whose process died

    /// A run without an end whose process is gone died (killed, power
    /// lost): its tasks still `running` become failed attempts of kind
    /// `lost`, and the run gets an end (its last recorded moment).
    func settleDeadRuns() throws {
        // Only runs of this machine can be checked (a shared store holds
        // other machines' runs too).
        let dead = try store.unendedRuns().filter { !Self.mayBeLive($0) }
        for (k, run) in dead.enumerated() {
            do {
                try settle(run)
            } catch where (error as? SQLiteError).map(Self.settlingWaits) == true {
                // Another process holds the journal, it is on read-only
                // media, or its disk is full: settling waits for a later
                // read; reading does not (and shows them died).
                unsettled = Set(dead[k...].map(\.id))
                return
            }
        }
    }

    /// Errors that leave a dead run unsettled for now (the journal is read
    /// as it is).
    static func settlingWaits(_ error: SQLiteError) -> Bool {
        [SQLITE_READONLY, SQLITE_FULL, SQLITE_IOERR, SQLITE_CANTOPEN].contains(error.code & 0xff) || error.isLock
    }

    private func settle(_ run: UnendedRun) throws {
        var entries = try self.entries(of: run.id)
        // The run's last recorded moment (a running task recorded again
        // while it ran says how long the run lived): its lost tasks ran
        // until then.
        let alive = entries.map { $0.ended ?? $0.started ?? $0.added }.max() ?? 0
        var lost: [JournalEntry] = []
        for i in entries.indices where entries[i].state == .running {
            entries[i].state = .failed
            entries[i].errorKind = "lost"
            entries[i].error = "lost: the run ended while the task was running"
            entries[i].ended = max(alive, entries[i].ended ?? entries[i].started ?? alive)
            lost.append(entries[i])
        }
        var counts: [String: Int] = [:]
        for e in entries where e.kind == .task {
            counts[e.state.name, default: 0] += 1
            if e.reused { counts["reused", default: 0] += 1 }
        }
        let last = entries.map { $0.ended ?? $0.started ?? $0.added }.max() ?? 0
        var blob: [UInt8]?
        if !lost.isEmpty {
            var row: [UInt8] = []
            JournalCodec.encode(lost, into: &row)
            blob = store.takesQuickRuns ? JournalCodec.checked(row) : row
        }
        try store.settle(run: run.id, lost: blob, ended: run.started + last, counts: counts)
    }

    /// This machine's name, as a shared store records where a run ran.
    public static let hostName: String = {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count) == 0 else { return "localhost" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }()

    /// Whether `pid` is a live tasker process (a recycled pid is not).
    static func isTasker(pid: Int) -> Bool {
        guard pid > 0, kill(pid_t(pid), 0) == 0 || errno == EPERM else { return false }
        guard let cmd = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8) else { return true }
        return cmd.hasPrefix("tasker")
    }
}

/// A shortened run id that more than one run starts with.
public struct AmbiguousRunID: Error, CustomStringConvertible {
    public let prefix: String
    public let matches: [String]

    public var description: String {
        let shown = matches.prefix(5).joined(separator: ", ") + (matches.count > 5 ? ", …" : "")
        return "'\(prefix)' starts \(matches.count) run ids (\(shown)): give more of it"
    }
}

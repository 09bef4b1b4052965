/// Where the journal's rows live: a SQLite file (`SQLiteJournalStore`, the
/// default) or the PostgreSQL database a run shares with its workers
/// (TaskerQueue's). One connection, used by one thread at a time. A run's
/// tasks are log rows of what `JournalCodec` packs: the stores know nothing
/// of tasks.
public protocol JournalStore: AnyObject {
    /// Seconds the writer may wait, at the run's end, for rows it could
    /// not write yet (a locked file: a few; a database server that is
    /// away: its outage limit).
    var endWait: Double { get }

    /// Records a run's start (replacing an earlier row with its id).
    func insert(_ run: JournalRun) throws
    /// The run's highest log sequence number (0: none yet).
    func lastLogSeq(run: String) throws -> Int
    func appendLog(run: String, seq: Int, data: [UInt8]) throws
    /// Appends `rows` from `seq` on, all or none.
    func appendLogs(run: String, seq: Int, rows: [[UInt8]]) throws
    /// The run's args and vars again (with secrets registered since its
    /// start masked).
    func update(run: String, args: [String], vars: [String: String]) throws
    /// The run's end and its HTTP requests per host, in one transaction.
    func end(run: String, ended: Double, exitCode: Int, counts: [String: Int], requests: [JournalHostRequests]) throws
    /// Runs newest first: the one with `id`, or those of `pipeline`, or
    /// all; at most `limit`.
    func runs(id: String?, pipeline: String?, limit: Int?) throws -> [JournalRun]
    /// The run's log rows in order.
    func logRows(run: String, _ each: (UnsafeRawBufferPointer) -> Void) throws
    func requests(run: String) throws -> [JournalHostRequests]
    /// The ids of all runs but the newest `keep`.
    func runIDs(skippingNewest keep: Int) throws -> [String]
    /// Deletes the runs and everything recorded of them.
    func delete(runs: [String]) throws
    /// Runs without an end: their process, and the host it ran on (nil:
    /// this machine, the only one a file journal knows).
    func unendedRuns() throws -> [UnendedRun]
    /// Ends a run that died, unless it has an end by now: appends `lost`
    /// (a log row) and records the end, in one transaction.
    func settle(run: String, lost: [UInt8]?, ended: Double, counts: [String: Int]) throws
    /// Called by a run's writer between writes while the run goes on
    /// (nobody waits for it then): the store may tidy up.
    func maintain()
    /// Whether log rows may hold runs of quick finishes (`JournalCodec`'s
    /// `quickRunsVersion`): every reader of the store knows them.
    var takesQuickRuns: Bool { get }
}

public struct UnendedRun: Sendable {
    public var id: String
    public var pid: Int
    public var host: String?
    public var started: Double

    public init(id: String, pid: Int, host: String?, started: Double) {
        self.id = id
        self.pid = pid
        self.host = host
        self.started = started
    }
}

extension JournalStore {
    public var endWait: Double { JournalWriter.lockWait }
    public func maintain() {}
    public var takesQuickRuns: Bool { false }

    public func appendLogs(run: String, seq: Int, rows: [[UInt8]]) throws {
        for (k, row) in rows.enumerated() { try appendLog(run: run, seq: seq + k, data: row) }
    }
}

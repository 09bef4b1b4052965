import Foundation
import TaskerCore

/// Writes one run's journal on its own thread. The run's thread encodes
/// entries into a buffer of its own and hands it over (`submit`) every
/// 50 ms; the thread commits what arrived as one row, in arrival order
/// (completion order, so a task never lands before its dependencies). A
/// `kill -9` loses at most the last 100 ms.
///
/// The journal never holds up the run: a lock another process holds (or a
/// full disk) keeps the rows in memory and the thread tries again; at the
/// end it waits at most `lockWait` for them, then gives up and says how
/// many entries could not be recorded.
public final class JournalWriter {
    private let queue = WriteQueue()
    static let interval = 0.05
    /// How long the end waits for a journal another process keeps locked.
    public static let lockWait = 5.0
    /// What `close` waits beyond the store's end wait, at most, for a write
    /// under way (a connection attempt gives up after 5 s).
    public static let closeSlack = 10.0
    private let closeBound: Double

    /// Starts the thread, which opens the journal in `directory`, records
    /// `run` and keeps the connection; errors come back from `close`.
    public convenience init(directory: String, run: JournalRun) throws {
        // Only the directory here (a read-only home shows at once); SQLite
        // opens on the writer's thread, so a run does not wait for it.
        try Journal.prepare(directory: directory)
        self.init(run: run) { try SQLiteJournalStore(directory: directory, busyTimeout: 100, checkpointsItself: true) }
    }

    /// Starts the thread, which opens the store with `open`, records `run`
    /// and keeps the connection; errors come back from `close`.
    /// `endWait`: how long the store's end may wait (its `endWait`), which
    /// bounds `close` from the caller's side too: a write blocked in the
    /// store (a connection attempt) is not waited for past it and
    /// `closeSlack`.
    public init(run: JournalRun, endWait: Double = JournalWriter.lockWait, closeSlack: Double = JournalWriter.closeSlack,
                open: @escaping @Sendable () throws -> JournalStore) {
        closeBound = endWait + closeSlack
        let queue = self.queue
        let thread = Thread {
            Thread.current.name = "tasker-journal"  // set from the thread itself: Linux shows it
            var rows = PendingRows(run: run, open: open)
            var batch = Batch()
            let occurrences = OccurrenceTable()
            var closedAt: Double?
            rows.write()  // the run's row at once: a run killed early is still listed
            while true {
                let (closing, end, flushed) = queue.take(into: &batch, waitingUpTo: JournalWriter.interval)
                occurrences.count(batch.identities)
                if !batch.isEmpty { rows.add(batch, occurrences) }
                queue.recycle(&batch.plain)
                queue.recycle(&batch.quick)
                batch.encoded.removeAll(keepingCapacity: true)
                batch.entries.removeAll(keepingCapacity: true)
                batch.identities.removeAll()
                if let end { rows.end = end }
                rows.write()
                if !closing { rows.maintain() }
                if !rows.rows.isEmpty || rows.dropped > 0 { queue.publish(unrecorded: rows.unrecorded()) }
                for f in flushed { f.signal() }
                guard closing else { continue }
                let now = Date().timeIntervalSinceReferenceDate
                closedAt = closedAt ?? now
                if rows.isDone { break }
                // Still waiting for the journal: give up after the store's
                // `endWait` (at once when it can never be written).
                if rows.hopeless || now - closedAt! >= rows.store?.endWait ?? JournalWriter.lockWait {
                    if !rows.hopeless { rows.waitedAtEnd = now - closedAt! }
                    rows.giveUp()
                    break
                }
                usleep(20_000)
            }
            queue.finish(rows.shortfall())
        }
        thread.start()
    }

    /// Hands over entries encoded with `JournalCodec.encode(_:into:)`;
    /// empties `encoded` (keeping its storage).
    public func submit(_ encoded: inout [UInt8]) {
        guard !encoded.isEmpty else { return }
        queue.append(&encoded)
    }

    /// Hands over plain entries, whose times `scale` converts, and the
    /// buffer their values are in; both come back empty, with the storage
    /// of a batch the thread has written when there is one.
    public func submit(plain: inout [PlainEntry], values: inout [UInt8], scale: TickScale) {
        guard !plain.isEmpty else { return }
        queue.append(plain: &plain, values: &values, scale: scale)
    }

    /// Hands over quick finishes (see `QuickFinish`), whose times `scale`
    /// converts and whose identities this thread finds by task id; they
    /// come back empty, with the storage of a batch written before when
    /// there is one.
    public func submit(quick: inout [QuickFinish], scale: TickScale) {
        guard !quick.isEmpty else { return }
        queue.append(quick: &quick, scale: scale)
    }

    /// Hands over entries this thread encodes; empties `entries`. An entry
    /// whose derived identity has occurrence 0 gets the one counted here
    /// (see `submit(identities:)`).
    public func submit(entries: inout [JournalEntry]) {
        guard !entries.isEmpty else { return }
        queue.append(entries: &entries)
    }

    /// Hands over derived identities as tasks were added, in add order,
    /// before any entry that needs its occurrence counted here (a plain
    /// entry with occurrence -1, an entry with occurrence 0); empties
    /// `identities`. Counting on this thread keeps the cache misses of a
    /// table of 200,000 random keys off the run's thread.
    public func submit(identities: inout AddedIdentities) {
        guard !identities.isEmpty else { return }
        queue.append(identities: &identities)
    }

    /// Encodes and hands over one entry (tests, rare writes).
    public func submit(_ entry: JournalEntry) {
        var bytes: [UInt8] = []
        JournalCodec.encode(entry, into: &bytes)
        submit(&bytes)
    }

    /// Waits until what was submitted so far has been tried (tests).
    func flush() {
        let s = DispatchSemaphore(value: 0)
        queue.requestFlush(s)
        s.wait()
    }

    /// Records the run's end, writes what is left and stops the thread
    /// (waiting at most `lockWait` for a locked journal, `seconds` when
    /// given, or until `abandon`); returns what could not be recorded, if
    /// anything.
    @discardableResult
    public func close(ended: Double, exitCode: Int, counts: [String: Int], requests: [JournalHostRequests],
                      waitingAtMost seconds: Double? = nil) -> String? {
        queue.close(RunEnd(ended: ended, exitCode: exitCode, counts: counts, requests: requests))
        // Told how long (a signal ends the run): interrupted. Else past the
        // bound the store did not answer.
        return queue.waitFinished(until: Date(timeIntervalSinceNow: seconds ?? closeBound),
                                  unanswered: seconds == nil ? closeBound : nil)?.description
    }

    /// Stops `close` waiting (a signal ends the run): it returns at once,
    /// counting what the thread has not written yet as unrecorded.
    public func abandon() { queue.abandon() }

    /// `abandon`, for another thread (a signal handler).
    public var abandoner: @Sendable () -> Void {
        let queue = self.queue
        return { queue.abandon() }
    }
}

/// What could not be recorded, and why.
struct Shortfall: CustomStringConvertible {
    var unrecorded: Int
    var endRecorded: Bool
    var reason: String
    /// How long the end waited for the journal before giving up.
    var waited: Double?
    /// Whether the run's own row was written (the journal opened at all).
    var runRecorded = true

    var description: String {
        var parts: [String] = []
        if unrecorded > 0 { parts.append("\(unrecorded) journal entr\(unrecorded == 1 ? "y" : "ies") could not be recorded") }
        if !runRecorded {
            // not its end alone: the journal never took the run
            parts.append(parts.isEmpty ? "the run could not be recorded at all" : "nor its end, nor the run itself")
        } else if !endRecorded {
            parts.append(parts.isEmpty ? "its end could not be recorded" : "nor its end")
        }
        let waitedText = waited.map { String(format: "; waited %.1f s", $0) } ?? ""
        return (parts.isEmpty ? "the journal could not be written" : parts.joined(separator: ", ")) + " (\(reason)\(waitedText))"
    }
}

/// The writer thread's rows not yet committed, oldest first, and the
/// store they go to (opened, and the run recorded, on first success).
private struct PendingRows {
    var run: JournalRun
    /// `SecretMask.generation` when the run's args and vars were last
    /// masked: a secret the script registers later (`tasker.secret`, a
    /// secret parameter) is masked in the run's row too, within a write.
    var maskedAt = 0
    let open: () throws -> JournalStore
    var store: JournalStore?
    var log: TaskLog?
    /// Each a row (version byte, then entries) and how many entries it
    /// holds (counted only when it waits: counting decodes).
    var rows: [(blob: [UInt8], entries: Int?)] = []
    var bytes = 0
    var end: RunEnd?
    var endRecorded = false
    /// Entries dropped for good (the journal cannot be written at all).
    var dropped = 0
    var reason: String?
    /// The journal cannot be written (it cannot be opened, or too much
    /// waits): waiting is pointless.
    var hopeless = false
    /// After a failure that is not a lock (a full disk), the next try
    /// waits a little: each try rewrites everything that waits.
    var nextTry = 0.0
    static let retryDelay = 1.0
    /// How long the end waited before giving up (nil: it did not wait).
    var waitedAtEnd: Double?
    /// Beyond this much waiting in memory for `patience` seconds (at once
    /// beyond `hardMaxBytes`), recording stops for good (a gap would break
    /// the dependency order of the log). Not at once past `maxBytes`: a
    /// run whose tasks return large values (100 MB a second) has that much
    /// in one batch, and one lock another run's writer held for 100 ms
    /// made it drop every entry; three such runs at once kept one waiting
    /// past 64 MiB for over 2 s.
    static let maxBytes = 256 << 20
    static let transactionBytes = 8 << 20
    static let hardMaxBytes = 1 << 30
    static let patience = 5.0
    /// When the rows that wait first failed to be written.
    var waitingSince: Double?

    init(run: JournalRun, open: @escaping () throws -> JournalStore) {
        self.run = run
        self.open = open
    }

    /// Entries not recorded so far (counts the rows that wait, once).
    mutating func unrecorded() -> Int {
        for i in rows.indices where rows[i].entries == nil { rows[i].entries = Self.count(rows[i].blob) }
        return dropped + rows.reduce(0) { $0 + ($1.entries ?? 0) }
    }

    private static func count(_ blob: [UInt8]) -> Int { blob.withUnsafeBytes { JournalCodec.decode($0)?.count ?? 0 } }
    var isDone: Bool { rows.isEmpty && endRecorded }

    /// A row of `batch`'s entries, with occurrences left to this thread
    /// filled in from `occurrences`.
    mutating func add(_ batch: Batch, _ occurrences: OccurrenceTable) {
        // About the row's size: it grows at most once or twice.
        var size = 1 + batch.encoded.count + batch.entries.count * 64
        for part in batch.plain { size += part.entries.count * 32 + part.values.count }
        for part in batch.quick { size += part.entries.count * 24 }
        var row = RowBuilder(capacity: size)
        let masking = !SecretMask.shared.isEmpty
        let quickRuns = store?.takesQuickRuns == true
        row.reserve(1)
        row.write { $0.byte(quickRuns ? JournalCodec.quickRunsVersion : JournalCodec.version) }
        var previous: (UInt64, Int)?
        for part in batch.quick {
            if quickRuns {
                JournalCodec.encode(quick: part.entries, scale: part.scale, identities: occurrences, previous: &previous,
                                    masking: masking, into: &row)
            } else {
                for q in part.entries {
                    JournalCodec.encodeAsPlain(q, scale: part.scale, identities: occurrences, previous: &previous, masking: masking,
                                               into: &row)
                }
            }
        }
        for part in batch.plain {
            part.values.withUnsafeBytes { values in
                for var p in part.entries {
                    if p.occurrence < 0 { (p.identityHash, p.occurrence) = occurrences.identity(of: p.id) }
                    JournalCodec.encode(plain: p, scale: part.scale, values: values, previous: &previous, masking: masking,
                                        into: &row)
                }
            }
        }
        row.append(batch.encoded)
        var scratch: [UInt8] = []
        for var e in batch.entries {
            if case .derived(let h, occurrence: 0) = e.identity { e.identity = .derived(h, occurrence: occurrences[e.id]) }
            scratch.removeAll(keepingCapacity: true)
            JournalCodec.encode(e, into: &scratch)
            row.append(scratch)
        }
        if quickRuns { JournalCodec.seal(&row) }
        let blob = row.array
        if hopeless {
            dropped += Self.count(blob)
            return
        }
        rows.append((blob, nil))
        bytes += blob.count
        if bytes > Self.hardMaxBytes { tooMuchWaits(Self.hardMaxBytes) }
    }

    private mutating func tooMuchWaits(_ limit: Int) {
        reason = "over \(limit >> 20) MiB waited to be written: \(reason ?? "the journal is slow")"
        giveUp()
    }

    /// After a try: what still waits past `maxBytes` for `patience` is
    /// given up.
    private mutating func checkWaiting(_ now: Double) {
        guard !rows.isEmpty else {
            waitingSince = nil
            return
        }
        let since = waitingSince ?? now
        waitingSince = since
        if bytes > Self.maxBytes && now - since >= Self.patience { tooMuchWaits(Self.maxBytes) }
    }

    /// Writes what it can, in order; a failure leaves the rest for the
    /// next try.
    mutating func write() {
        let now = Date().timeIntervalSinceReferenceDate
        guard !hopeless else { return }
        defer { if !hopeless { checkWaiting(now) } }
        guard now >= nextTry else { return }
        do {
            if log == nil {
                let store: JournalStore
                do {
                    store = try self.store ?? open()
                } catch where !Self.isLock(error) {
                    // Not there, not a journal, not writable: never will be.
                    reason = "\(error)"
                    giveUp()
                    return
                }
                self.store = store
                try store.insert(run)
                log = try TaskLog(store, run: run.id)
            }
            try maskCommandLine()
            // In transactions of at most `transactionBytes` (one row at
            // least): one row after another, a writer that was behind held
            // the lock for commit after commit, and one transaction for all
            // of a large backlog held it for that long; either way another
            // run's writer, which SQLite's busy handler lets look again only
            // now and then, hardly ever found it free.
            // rows built before the store was open are checked as they go
            let checked = store?.takesQuickRuns == true
            while !rows.isEmpty {
                var n = 0, size = 0
                while n < rows.count, n == 0 || size + rows[n].blob.count <= Self.transactionBytes {
                    size += rows[n].blob.count
                    n += 1
                }
                try log!.append(encoded: rows[..<n].map { checked ? JournalCodec.checked($0.blob) : $0.blob })
                rows.removeFirst(n)
                bytes -= size
            }
            if let end, !endRecorded {
                try log!.end(end)
                endRecorded = true
            }
        } catch {
            if Self.isLock(error) {
                // said once (an error from opening the journal says it already)
                reason = "\(error)".contains("locked by another process") ? "\(error)" : "the journal is locked by another process: \(error)"
            } else {
                reason = "\(error)"
                nextTry = now + Self.retryDelay
            }
        }
    }

    /// Between writes while the run goes on: the store may tidy up.
    func maintain() {
        guard !hopeless, rows.isEmpty, log != nil else { return }
        store?.maintain()
    }

    /// The run's args and vars with the secrets registered so far masked,
    /// rewritten when that changes them.
    private mutating func maskCommandLine() throws {
        let generation = SecretMask.shared.generation
        guard generation != maskedAt, let store else { return }
        let args = run.args.map { SecretMask.shared.mask($0) }
        let vars = run.vars.mapValues { SecretMask.shared.mask($0) }
        if args != run.args || vars != run.vars { try store.update(run: run.id, args: args, vars: vars) }
        run.args = args
        run.vars = vars
        maskedAt = generation
    }

    /// Stops trying: what waits is counted as unrecorded. The end is still
    /// tried alone (small, it may fit where a batch did not), saying how
    /// many entries are missing, so the history shows the journal is
    /// incomplete rather than a run that died.
    mutating func giveUp() {
        dropped = unrecorded()
        rows.removeAll()
        bytes = 0
        hopeless = true
        if let log, var end, !endRecorded {
            end.counts["unrecorded"] = dropped
            endRecorded = (try? log.end(end)) != nil
        }
    }

    mutating func shortfall() -> Shortfall? {
        guard dropped > 0 || !rows.isEmpty || (end != nil && !endRecorded) else { return nil }
        return Shortfall(unrecorded: unrecorded(), endRecorded: endRecorded, reason: reason ?? "unknown",
                         waited: waitedAtEnd, runRecorded: log != nil)
    }

    static func isLock(_ error: Error) -> Bool { (error as? SQLiteError)?.isLock ?? false }
}

/// What the writer takes at once: plain entries (in the arrays they came
/// in), encoded ones, entries to encode, and the identities added (which
/// alone make no row).
struct Batch {
    var quick: [QuickPart] = []
    var plain: [PlainPart] = []
    var encoded: [UInt8] = []
    var entries: [JournalEntry] = []
    var identities = AddedIdentities()
    var isEmpty: Bool { quick.isEmpty && plain.isEmpty && encoded.isEmpty && entries.isEmpty }
}

struct QuickPart {
    var entries: [QuickFinish]
    var scale: TickScale
}

struct PlainPart {
    var entries: [PlainEntry]
    var values: [UInt8]
    var scale: TickScale
}

struct RunEnd: Sendable {
    var ended: Double
    var exitCode: Int
    var counts: [String: Int]
    var requests: [JournalHostRequests]
}

/// The entries waiting for the thread. Two arrays go back and forth, so a
/// long run does not allocate a batch's worth of memory every 50 ms.
private final class WriteQueue: @unchecked Sendable {
    // Safety: `state` is only touched with `condition` locked.
    private struct State {
        var pending = Batch()
        var end: RunEnd?
        var closing = false
        var finished = false
        var abandoned = false
        var shortfall: Shortfall?
        /// Entries the thread holds but has not written (its last word).
        var unrecorded = 0
        var flushes: [DispatchSemaphore] = []
        /// Emptied arrays of plain entries and of their values, for the
        /// run's thread to reuse.
        var spare: [[PlainEntry]] = []
        var spareValues: [[UInt8]] = []
        var spareQuick: [[QuickFinish]] = []
    }
    private let condition = NSCondition()
    private var state = State()
    static let batchCapacity = 1 << 20

    init() { state.pending.encoded.reserveCapacity(Self.batchCapacity) }

    /// Takes `bytes` and leaves it empty. When the writer has taken what
    /// was pending (the usual case) the arrays trade places instead of
    /// copying: each side keeps reusing storage it has already touched, so
    /// a long run neither copies its entries nor faults in fresh pages.
    func append(_ bytes: inout [UInt8]) {
        condition.lock()
        Self.move(&bytes, into: &state.pending.encoded)
        condition.unlock()
    }

    func append(entries: inout [JournalEntry]) {
        condition.lock()
        Self.move(&entries, into: &state.pending.entries)
        condition.unlock()
    }

    func append(identities: inout AddedIdentities) {
        condition.lock()
        if state.pending.identities.isEmpty {
            swap(&identities, &state.pending.identities)
        } else {
            state.pending.identities.append(contentsOf: identities)
        }
        identities.removeAll()
        condition.unlock()
    }

    /// Plain entries come in batches: the writer starts on one at once.
    /// The array itself is queued (no copy) and a spare one comes back.
    func append(plain: inout [PlainEntry], values: inout [UInt8], scale: TickScale) {
        condition.lock()
        state.pending.plain.append(PlainPart(entries: plain, values: values, scale: scale))
        plain = state.spare.popLast() ?? []
        values = state.spareValues.popLast() ?? []
        condition.signal()
        condition.unlock()
    }

    /// Quick finishes come in batches too, queued as they are.
    func append(quick: inout [QuickFinish], scale: TickScale) {
        condition.lock()
        state.pending.quick.append(QuickPart(entries: quick, scale: scale))
        quick = state.spareQuick.popLast() ?? []
        condition.signal()
        condition.unlock()
    }

    func recycle(_ parts: inout [QuickPart]) {
        while var part = parts.popLast() {  // popped: unique, emptied in place
            part.entries.removeAll(keepingCapacity: true)
            condition.lock()
            let kept = state.spareQuick.count < Self.spareKept
            if kept { state.spareQuick.append(part.entries) }
            condition.unlock()
            if !kept { break }
        }
        parts.removeAll(keepingCapacity: true)
    }

    /// Arrays of plain entries (and values) the writer is done with; a few
    /// are kept.
    func recycle(_ parts: inout [PlainPart]) {
        while var part = parts.popLast() {  // popped: unique, emptied in place
            part.entries.removeAll(keepingCapacity: true)
            part.values.removeAll(keepingCapacity: true)
            condition.lock()
            let kept = state.spare.count < Self.spareKept
            if kept {
                state.spare.append(part.entries)
                state.spareValues.append(part.values)
            }
            condition.unlock()
            if !kept { break }
        }
        parts.removeAll(keepingCapacity: true)
    }
    static let spareKept = 4

    private static func move<T>(_ items: inout [T], into pending: inout [T]) {
        if pending.isEmpty {
            swap(&items, &pending)
        } else {
            pending.append(contentsOf: items)
        }
        items.removeAll(keepingCapacity: true)
    }

    func close(_ end: RunEnd) {
        condition.lock()
        state.end = end
        state.closing = true
        condition.signal()
        condition.unlock()
    }

    func requestFlush(_ s: DispatchSemaphore) {
        condition.lock()
        state.flushes.append(s)
        condition.signal()
        condition.unlock()
    }

    /// Swaps the pending bytes into `batch` (empty, its storage kept);
    /// returns whether the writer is closing (and the run's end then), and
    /// who waits for this batch to be committed.
    func take(into batch: inout Batch, waitingUpTo seconds: Double) -> (Bool, RunEnd?, [DispatchSemaphore]) {
        condition.lock()
        defer { condition.unlock() }
        if !state.closing && state.flushes.isEmpty { _ = condition.wait(until: Date(timeIntervalSinceNow: seconds)) }
        swap(&batch, &state.pending)
        let flushes = state.flushes
        state.flushes = []
        return (state.closing, state.closing ? state.end : nil, flushes)
    }

    func publish(unrecorded n: Int) {
        condition.lock()
        state.unrecorded = n
        condition.unlock()
    }

    func finish(_ shortfall: Shortfall?) {
        condition.lock()
        state.shortfall = shortfall
        state.finished = true
        condition.broadcast()
        condition.unlock()
    }

    func abandon() {
        condition.lock()
        state.abandoned = true
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until the thread is done, or `abandon`, or `deadline`: then
    /// what it holds and what it has not taken yet are unrecorded (because
    /// the store did not answer in `unanswered` seconds, when given).
    func waitFinished(until deadline: Date? = nil, unanswered: Double? = nil) -> Shortfall? {
        condition.lock()
        defer { condition.unlock() }
        while !state.finished && !state.abandoned {
            if let deadline {
                if !condition.wait(until: deadline) { break }
            } else {
                condition.wait()
            }
        }
        if state.finished { return state.shortfall }
        var n = state.unrecorded + state.pending.plain.reduce(0) { $0 + $1.entries.count } + state.pending.entries.count
            + state.pending.quick.reduce(0) { $0 + $1.entries.count }
        if !state.pending.encoded.isEmpty {
            n += ([JournalCodec.version] + state.pending.encoded).withUnsafeBytes { JournalCodec.decode($0)?.count ?? 0 }
        }
        if let unanswered, !state.abandoned {
            return Shortfall(unrecorded: n, endRecorded: false, reason: "the journal did not answer", waited: unanswered)
        }
        return Shortfall(unrecorded: n, endRecorded: false, reason: "interrupted while waiting for the journal")
    }
}

/// One run's task log: a row per batch of packed entries.
final class TaskLog {
    let store: JournalStore
    let run: String
    private var seq: Int

    init(_ store: JournalStore, run: String) throws {
        self.store = store
        self.run = run
        seq = try store.lastLogSeq(run: run)
    }

    /// Appends blobs (each the version byte, then encoded entries), all
    /// or none.
    func append(encoded blobs: [[UInt8]]) throws {
        try store.appendLogs(run: run, seq: seq + 1, rows: blobs)
        seq += blobs.count
    }

    func end(_ e: RunEnd) throws {
        try store.end(run: run, ended: e.ended, exitCode: e.exitCode, counts: e.counts, requests: e.requests)
    }
}

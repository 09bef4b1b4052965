import Foundation
import TaskerCore

/// Writes one run's journal on its own thread. The run's thread encodes
/// entries into a buffer of its own and hands it over (`submit`) every
/// 50 ms; the thread commits what arrived as one row, in arrival order
/// (completion order, so a task never lands before its dependencies). A
/// `kill -9` loses at most the last 100 ms.
public final class JournalWriter {
    private let queue = WriteQueue()
    private let done = DispatchSemaphore(value: 0)
    static let interval = 0.05

    /// Starts the thread, which opens the journal in `directory`, records
    /// `run` and keeps the connection; errors come back from `close`.
    public convenience init(directory: String, run: JournalRun) throws {
        // Only the directory here (a read-only home shows at once); SQLite
        // opens on the writer's thread, so a run does not wait for it.
        try Journal.prepare(directory: directory)
        self.init(run: run) { try SQLiteJournalStore(directory: directory) }
    }

    /// Starts the thread, which opens the store with `open`, records `run`
    /// and keeps the connection; errors come back from `close`.
    public init(run: JournalRun, open: @escaping @Sendable () throws -> JournalStore) {
        let queue = self.queue, done = self.done
        let thread = Thread {
            var failure: String?
            var log: TaskLog?
            do {
                let store = try open()
                try store.insert(run)
                log = try TaskLog(store, run: run.id)
            } catch {
                failure = "\(error)"
            }
            var batch = Batch()
            var blob: [UInt8] = []
            while true {
                let (closing, end, flushed) = queue.take(into: &batch, waitingUpTo: JournalWriter.interval)
                if failure == nil, let log {
                    do {
                        if !batch.isEmpty {
                            blob.removeAll(keepingCapacity: true)
                            blob.append(JournalCodec.version)
                            var previous: (UInt64, Int)?
                            for part in batch.plain {
                                for p in part.entries {
                                    JournalCodec.encode(plain: p, scale: part.scale, previous: &previous, into: &blob)
                                }
                            }
                            blob.append(contentsOf: batch.encoded)
                            try log.append(encoded: blob)
                        }
                        if let end { try log.end(end) }
                    } catch {
                        failure = "\(error)"
                    }
                }
                queue.recycle(&batch.plain)
                batch.encoded.removeAll(keepingCapacity: true)
                for f in flushed { f.signal() }
                if closing { break }
            }
            queue.finish(failure)
            done.signal()
        }
        thread.name = "tasker.journal"
        thread.start()
    }

    /// Hands over entries encoded with `JournalCodec.encode(_:into:)`;
    /// empties `encoded` (keeping its storage).
    public func submit(_ encoded: inout [UInt8]) {
        guard !encoded.isEmpty else { return }
        queue.append(&encoded)
    }

    /// Hands over plain entries, whose times `scale` converts; `plain`
    /// comes back empty, with the storage of a batch the thread has written
    /// when there is one.
    public func submit(plain: inout [PlainEntry], scale: TickScale) {
        guard !plain.isEmpty else { return }
        queue.append(plain: &plain, scale: scale)
    }

    /// Encodes and hands over one entry (tests, rare writes).
    public func submit(_ entry: JournalEntry) {
        var bytes: [UInt8] = []
        JournalCodec.encode(entry, into: &bytes)
        submit(&bytes)
    }

    /// Waits until what was submitted so far is committed (tests).
    func flush() {
        let s = DispatchSemaphore(value: 0)
        queue.requestFlush(s)
        s.wait()
    }

    /// Records the run's end, writes what is left and stops the thread;
    /// returns the first write error, if any.
    @discardableResult
    public func close(ended: Double, exitCode: Int, counts: [String: Int], requests: [JournalHostRequests]) -> String? {
        queue.close(RunEnd(ended: ended, exitCode: exitCode, counts: counts, requests: requests))
        done.wait()
        return queue.failure
    }
}

/// What the writer takes at once: plain entries (in the arrays they came
/// in) and encoded ones.
struct Batch {
    var plain: [PlainPart] = []
    var encoded: [UInt8] = []
    var isEmpty: Bool { plain.isEmpty && encoded.isEmpty }
}

struct PlainPart {
    var entries: [PlainEntry]
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
        var failure: String?
        var flushes: [DispatchSemaphore] = []
        /// Emptied arrays of plain entries, for the run's thread to reuse.
        var spare: [[PlainEntry]] = []
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

    /// Plain entries come in batches: the writer starts on one at once.
    /// The array itself is queued (no copy) and a spare one comes back.
    func append(plain: inout [PlainEntry], scale: TickScale) {
        condition.lock()
        state.pending.plain.append(PlainPart(entries: plain, scale: scale))
        plain = state.spare.popLast() ?? []
        condition.signal()
        condition.unlock()
    }

    /// Arrays of plain entries the writer is done with; a few are kept.
    func recycle(_ parts: inout [PlainPart]) {
        while var part = parts.popLast()?.entries {  // popped: unique, emptied in place
            part.removeAll(keepingCapacity: true)
            condition.lock()
            let kept = state.spare.count < Self.spareKept
            if kept { state.spare.append(part) }
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

    func finish(_ failure: String?) {
        condition.lock()
        state.failure = failure
        condition.unlock()
    }

    var failure: String? {
        condition.lock()
        defer { condition.unlock() }
        return state.failure
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

    /// Appends a blob: the version byte, then encoded entries.
    func append(encoded blob: [UInt8]) throws {
        seq += 1
        try store.appendLog(run: run, seq: seq, data: blob)
    }

    func end(_ e: RunEnd) throws {
        try store.end(run: run, ended: e.ended, exitCode: e.exitCode, counts: e.counts, requests: e.requests)
    }
}

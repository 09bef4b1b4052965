/// A finish a recorder needs no more of than its times and its one integer:
/// a task that did work of its own (no group, schedule, `every` run,
/// follower or reuse), had no dependencies and no explicit name, whose
/// identity was handed over (`TaskSpec.identityHandedOver`), that its
/// recorder did not ask to see (`Engine.finishThroughSink`), and that
/// succeeded with no values or one integer (none while a secret is
/// registered: the sink checks that it holds none).
public struct QuickFinish: Sendable {
    public var id: TaskID
    /// `Engine.stamps` readings.
    public var added: UInt64
    public var started: UInt64
    public var ended: UInt64
    /// The task's one value when `hasInteger`.
    public var integer: Int64
    public var attempts: Int32
    public var hasInteger: Bool

    public init(id: TaskID, added: UInt64, started: UInt64, ended: UInt64, integer: Int64 = 0, attempts: Int32 = 1,
                hasInteger: Bool = false) {
        self.id = id
        self.added = added
        self.started = started
        self.ended = ended
        self.integer = integer
        self.attempts = attempts
        self.hasInteger = hasInteger
    }
}

/// Quick finishes kept by the engine for its finish sink's owner instead
/// of a call to the sink each: for a run of no-op tasks the call, the
/// facts it was handed and the entry the journal built from them were
/// half of what the journal cost the run's thread; appending here is a
/// few stores, and the arrays go to the journal's writer thread as they
/// are.
struct QuickFinishLog {
    var entries: [QuickFinish] = []
    /// `full` is called when the log holds this many.
    let batch: Int
    /// Called at the first finish after a take (the owner schedules its
    /// next take then).
    let wake: () -> Void
    let full: () -> Void
    /// Read per integer result (a stored reference: the global's lazy
    /// check is not free).
    let secrets = SecretMask.shared
    private var woken = false

    init(batch: Int, wake: @escaping () -> Void, full: @escaping () -> Void) {
        self.batch = batch
        self.wake = wake
        self.full = full
        entries.reserveCapacity(batch)
    }

    /// Returns whether the owner is to be called (`wake` or `full`).
    @inline(__always)
    mutating func append(_ q: QuickFinish) -> Bool {
        entries.append(q)
        return !woken || entries.count >= batch
    }

    mutating func take(into out: inout [QuickFinish]) {
        out.removeAll(keepingCapacity: true)
        swap(&entries, &out)
        if entries.capacity < batch { entries.reserveCapacity(batch) }
        woken = false
    }

    /// What `append` asked for, to be called once the log is left alone
    /// (the owner takes from it).
    mutating func due() -> (wake: (() -> Void)?, full: (() -> Void)?) {
        var calls: (wake: (() -> Void)?, full: (() -> Void)?) = (nil, nil)
        if !woken {
            woken = true
            calls.wake = wake
        }
        if entries.count >= batch { calls.full = full }
        return calls
    }
}

extension TaskRecord {
    /// The record's finish can be quick, its outcome allowing.
    var finishesQuickly: Bool {
        guard identityHandedOver, !finishesThroughSink, explicitName == nil, !reused, !ephemeral, after.isEmpty,
              case .work = role else { return false }
        return true
    }
}

extension Engine {
    /// From now on quick finishes (see `QuickFinish`) are kept for
    /// `takeQuickFinishes` instead of told to the finish sink: `wake` is
    /// called at the first one after each take, `full` when `batch` wait.
    /// Needs the engine to keep times (`keepTimes`).
    public func keepQuickFinishes(batch: Int, wake: @escaping () -> Void, full: @escaping () -> Void) {
        precondition(stamps != nil, "quick finishes carry times: keepTimes first")
        quickFinishes = QuickFinishLog(batch: batch, wake: wake, full: full)
    }

    /// Task `id`'s finish goes to the finish sink even if it is quick (its
    /// recorder keeps more of it: a held time, earlier attempts).
    public func finishThroughSink(_ id: TaskID) {
        record(id)?.finishesThroughSink = true
    }

    /// The quick finishes since the last call, in finish order, into `out`
    /// (whose storage, emptied, the log keeps using).
    public func takeQuickFinishes(into out: inout [QuickFinish]) {
        guard quickFinishes != nil else { return out.removeAll() }
        quickFinishes!.take(into: &out)
    }

    /// Keeps `r`'s finish in the log when it is quick; false when the sink
    /// is to be told.
    @inline(__always)
    func keptQuickly(_ r: TaskRecord, _ outcome: TaskOutcome) -> Bool {
        guard quickFinishes != nil, r.finishesQuickly, let stamps else { return false }
        // matched in place: binding the value copied the outcome twice
        let integer: Int64?
        switch outcome {
        case .succeeded(.none): integer = nil
        case .succeeded(.integer(let n)) where quickFinishes!.secrets.isEmpty: integer = n
        default: return false
        }
        let q = QuickFinish(id: r.id, added: r.addedAt, started: r.startedAt, ended: stamps.now(), integer: integer ?? 0,
                            attempts: Int32(truncatingIfNeeded: r.lifecycle.attempts), hasInteger: integer != nil)
        if quickFinishes!.append(q) {
            let calls = quickFinishes!.due()
            calls.wake?()
            calls.full?()
        }
        return true
    }
}

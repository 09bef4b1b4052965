import TaskerCore

/// Derived identities by task id, as runs of consecutive ids with one hash.
/// A loop adding one function 200,000 times is one run, not 200,000 slots
/// written at the add and read back at the finish (by then out of the
/// cache: a miss per task). A loop of closures (a new hash per task,
/// counted elsewhere) is a dense run: its hashes alone, 8 bytes a task in
/// `denseHashes`, where a run per task took 24 and a search at the finish.
/// Occurrences within a run follow each other (counted here) or are all
/// `uncounted` (counted elsewhere); 0 is none.
struct DerivedRuns: ~Copyable {
    struct Run {
        var first: Int
        var count: Int32
        /// `dense`: the run's hashes are in `denseHashes` from index `hash`
        /// on, each uncounted.
        var occurrence: Int32
        var hash: UInt64

        func contains(_ id: Int) -> Bool { id >= first && id - first < Int(count) }
        var isDense: Bool { occurrence == DerivedRuns.dense }
    }

    static let dense = Int32.min
    /// The hashes of dense runs, in id order.
    private var denseHashes = PagedArray<UInt64>()

    /// In id order; the last one is `tail`, apart (it grows).
    private var runs = PagedArray<Run>()
    /// The last run (`count` 0: none yet).
    private var tail = Run(first: 0, count: 0, occurrence: 0, hash: 0)
    /// Ids stored below the end of the runs (an identity derived later
    /// than its task was added): rare, kept apart.
    private var late: [Int: (hash: UInt64, occurrence: Int32)] = [:]
    /// The run found last: finishes come in about the order of the adds.
    private var cursor = 0

    static let uncounted: Int32 = -1

    init() {}

    var isEmpty: Bool { tail.count == 0 && late.isEmpty }

    /// One past the highest id in a run.
    private var end: Int { tail.first + Int(tail.count) }

    @inline(__always)
    mutating func store(_ id: Int, hash: UInt64, occurrence: Int32) {
        if id == end, tail.hash == hash, tail.count > 0, tail.count < Int32.max, !tail.isDense,
           occurrence == Self.uncounted ? tail.occurrence == Self.uncounted
               : occurrence > 0 && tail.occurrence > 0 && occurrence == tail.occurrence &+ tail.count {
            tail.count += 1
            return
        }
        if id == end, occurrence == Self.uncounted, tail.count > 0, tail.count < Int32.max, storeDense(hash) { return }
        guard id >= end else {
            late[id] = (hash, occurrence)
            return
        }
        if tail.count > 0 { runs.append(tail) }
        tail = Run(first: id, count: 1, occurrence: occurrence, hash: hash)
    }

    /// `store` of an uncounted identity, whose commonest case (a loop
    /// adding one body: the tail grows by one) is checked first, inline.
    /// An uncounted tail is not a dense one (`dense` is another value).
    @inline(__always)
    mutating func storeUncounted(_ id: Int, hash: UInt64) {
        if tail.occurrence == Self.uncounted, tail.hash == hash, tail.count > 0, tail.count < Int32.max,
           id == tail.first &+ Int(tail.count) {
            tail.count += 1
            return
        }
        // A loop of closures: the dense tail takes one more hash (its
        // hashes end `denseHashes`); the same hash again starts a run.
        if tail.isDense, tail.count < Int32.max, id == tail.first &+ Int(tail.count), denseHashes[denseHashes.count - 1] != hash {
            denseHashes.append(hash)
            tail.count += 1
            return
        }
        store(id, hash: hash, occurrence: Self.uncounted)
    }

    /// `hash` for the id after the tail's, uncounted, when the tail is a
    /// dense run (or a lone uncounted task that becomes one) and `hash` is
    /// not the tail's last (one body again: a run of its own).
    private mutating func storeDense(_ hash: UInt64) -> Bool {
        if tail.isDense {
            guard denseHashes[Int(tail.hash) + Int(tail.count) - 1] != hash else { return false }
        } else {
            guard tail.count == 1, tail.occurrence == Self.uncounted, tail.hash != hash else { return false }
            let start = denseHashes.count
            denseHashes.append(tail.hash)
            tail.occurrence = Self.dense
            tail.hash = UInt64(start)
        }
        denseHashes.append(hash)
        tail.count += 1
        return true
    }

    /// Task `id`'s hash and occurrence ((0, 0): none).
    @inline(__always)
    mutating func find(_ id: Int) -> (hash: UInt64, occurrence: Int32) {
        if !late.isEmpty, let d = late[id] { return d }
        let r: Run
        if tail.contains(id) {
            r = tail
        } else {
            guard let i = runIndex(id) else { return (0, 0) }
            r = runs[i]
        }
        if r.isDense { return (denseHashes[Int(r.hash) + id - r.first], Self.uncounted) }
        return (r.hash, r.occurrence > 0 ? r.occurrence + Int32(id - r.first) : r.occurrence)
    }

    /// Sets the occurrence of task `id`, alone in its run (stored with
    /// occurrence 0, which joins no run, dense ones included).
    mutating func setOccurrence(_ id: Int, _ occurrence: Int32) {
        if !late.isEmpty, late[id] != nil {
            late[id]!.occurrence = occurrence
        } else if tail.contains(id), tail.count == 1 {
            tail.occurrence = occurrence
        } else if let i = runIndex(id), runs[i].count == 1 {
            runs[i].occurrence = occurrence
        }
    }

    /// Counts every uncounted identity in `counts`, in id order. Dense
    /// runs become a run per task first (each its own occurrence).
    mutating func countUncounted(_ counts: IdentityCounts) {
        spreadDenseRuns()
        let lateIDs = late.keys.sorted()
        var l = 0
        func countLate(below id: Int) {
            while l < lateIDs.count, lateIDs[l] < id {
                if late[lateIDs[l]]!.occurrence == Self.uncounted {
                    late[lateIDs[l]]!.occurrence = Int32(truncatingIfNeeded: counts.increment(late[lateIDs[l]]!.hash))
                }
                l += 1
            }
        }
        func count(_ r: inout Run) {
            countLate(below: r.first)
            guard r.occurrence == Self.uncounted else { return }
            r.occurrence = Int32(truncatingIfNeeded: counts.increment(r.hash))
            for _ in 1..<max(1, Int(r.count)) { _ = counts.increment(r.hash) }
        }
        for i in runs.indices {
            var r = runs[i]
            count(&r)
            runs[i] = r
        }
        if tail.count > 0 {
            var r = tail
            count(&r)
            tail = r
        }
        countLate(below: Int.max)
    }

    /// Every dense run as a run per task (rare: a run that counted
    /// occurrences elsewhere starts counting them here).
    private mutating func spreadDenseRuns() {
        guard !denseHashes.isEmpty else { return }
        var spread = PagedArray<Run>()
        let all = runs.count + (tail.count > 0 ? 1 : 0)
        for i in 0..<all {
            let r = i < runs.count ? runs[i] : tail
            guard r.isDense else {
                spread.append(r)
                continue
            }
            for k in 0..<Int(r.count) {
                spread.append(Run(first: r.first + k, count: 1, occurrence: Self.uncounted, hash: denseHashes[Int(r.hash) + k]))
            }
        }
        // the last run is the tail again, kept apart
        var rest = PagedArray<Run>()
        if tail.count > 0 {
            tail = spread[spread.count - 1]
            for i in 0..<(spread.count - 1) { rest.append(spread[i]) }
        } else {
            for i in spread.indices { rest.append(spread[i]) }
        }
        runs = rest
        denseHashes = PagedArray<UInt64>()
        cursor = 0
    }

    private mutating func runIndex(_ id: Int) -> Int? {
        let n = runs.count
        guard n > 0 else { return nil }
        if cursor < n, runs[cursor].contains(id) { return cursor }
        if cursor + 1 < n, runs[cursor + 1].contains(id) {
            cursor += 1
            return cursor
        }
        // the last run with first <= id
        var lo = 0, hi = n
        while lo < hi {
            let mid = (lo + hi) / 2
            if runs[mid].first <= id { lo = mid + 1 } else { hi = mid }
        }
        guard lo > 0, runs[lo - 1].contains(id) else { return nil }
        cursor = lo - 1
        return cursor
    }
}

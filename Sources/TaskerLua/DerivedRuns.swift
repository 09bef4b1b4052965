import TaskerCore

/// Derived identities by task id, as runs of consecutive ids with one hash.
/// A loop adding one function 200,000 times is one run, not 200,000 slots
/// written at the add and read back at the finish (by then out of the
/// cache: a miss per task). A loop of closures is a run per task, as
/// before. Occurrences within a run follow each other (counted here) or
/// are all `uncounted` (counted elsewhere); 0 is none.
struct DerivedRuns: ~Copyable {
    struct Run {
        var first: Int
        var count: Int32
        var occurrence: Int32
        var hash: UInt64

        func contains(_ id: Int) -> Bool { id >= first && id - first < Int(count) }
    }

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
        if id == end, tail.hash == hash, tail.count > 0, tail.count < Int32.max,
           occurrence == Self.uncounted ? tail.occurrence == Self.uncounted
               : occurrence > 0 && tail.occurrence > 0 && occurrence == tail.occurrence &+ tail.count {
            tail.count += 1
            return
        }
        guard id >= end else {
            late[id] = (hash, occurrence)
            return
        }
        if tail.count > 0 { runs.append(tail) }
        tail = Run(first: id, count: 1, occurrence: occurrence, hash: hash)
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
        return (r.hash, r.occurrence > 0 ? r.occurrence + Int32(id - r.first) : r.occurrence)
    }

    /// Sets the occurrence of task `id`, alone in its run (stored with
    /// occurrence 0, which joins no run).
    mutating func setOccurrence(_ id: Int, _ occurrence: Int32) {
        if !late.isEmpty, late[id] != nil {
            late[id]!.occurrence = occurrence
        } else if tail.contains(id), tail.count == 1 {
            tail.occurrence = occurrence
        } else if let i = runIndex(id), runs[i].count == 1 {
            runs[i].occurrence = occurrence
        }
    }

    /// Counts every uncounted identity in `counts`, in id order.
    mutating func countUncounted(_ counts: IdentityCounts) {
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

import CTicks
#if canImport(Glibc)
import Glibc
#endif

/// How many tasks had each derived identity so far. A loop of closures
/// gives every task a new identity, so this is mostly inserts of random
/// keys into a table that outgrows the cache: each insert is a cache miss,
/// and they were the largest cost of recording such a run. So the table
/// holds keys only (8 bytes a slot, filled to three quarters: a quarter of
/// the memory of key-and-count slots at half), an identity seen once has no
/// count stored anywhere, and the counts of identities seen again live in a
/// small dictionary. The last identity counted is cached: a loop adding one
/// body again and again touches neither.
public final class IdentityCounts {
    /// Open addressing, linear probing; 0 marks an empty slot.
    private var keys: UnsafeMutablePointer<UInt64>
    private var capacity: Int
    private var used = 0
    /// Counts of identities seen more than once (the cached one's may be
    /// behind: `lastCount` is current).
    private var repeated: [UInt64: Int] = [:]
    private var lastKey: UInt64 = 0
    private var lastCount = 0
    /// Hash 0 is the empty slot's marker: its count lives here.
    private var zeroCount = 0

    public init() {
        capacity = 1024
        keys = Self.zeroed(capacity)
    }

    deinit { free(keys) }

    /// Zeroed slots, written, not from calloc: calloc's fresh pages map
    /// the kernel's shared zero page at the first read (a probe), and the
    /// write that follows is a copy-on-write fault that flushes the TLB of
    /// every core the process runs on: an interrupt to the run's thread
    /// for each 4 KiB of the table while another thread counts.
    private static func zeroed(_ n: Int) -> UnsafeMutablePointer<UInt64> {
        let bytes = n * MemoryLayout<UInt64>.stride
        guard let raw = malloc(bytes) else { fatalError("tasker: out of memory (identity counts)") }
        explicit_bzero(raw, bytes)  // not memset: the compiler turns malloc + memset into calloc
        return raw.bindMemory(to: UInt64.self, capacity: n)
    }

    /// One more task with identity `h`; returns its count with this one.
    public func increment(_ h: UInt64) -> Int {
        guard h != 0 else {
            zeroCount += 1
            return zeroCount
        }
        if h == lastKey {
            lastCount += 1
            return lastCount
        }
        if lastCount > 1 { repeated[lastKey] = lastCount }
        let count = insert(h) ? 1 : (repeated[h] ?? 1) + 1
        lastKey = h
        lastCount = count
        return count
    }

    /// `n` more tasks with identity `h` (a loop adding one body again and
    /// again); returns the count with them.
    public func increment(_ h: UInt64, by n: Int) -> Int {
        let first = increment(h)
        guard n > 1 else { return first }
        // `h` is the cached one now (or the zero hash's own count)
        if h == 0 {
            zeroCount += n - 1
            return zeroCount
        }
        lastCount += n - 1
        return lastCount
    }

    /// Fetches the slot where `h` is looked for into the cache, ahead of
    /// its `increment`.
    public func prefetch(_ h: UInt64) {
        tasker_prefetch(keys + (Int(truncatingIfNeeded: h) & (capacity - 1)))
    }

    /// Adds `h`; false if it was there already.
    private func insert(_ h: UInt64) -> Bool {
        let mask = capacity - 1
        var i = Int(truncatingIfNeeded: h) & mask
        while true {
            let k = keys[i]
            if k == h { return false }
            if k == 0 { break }
            i = (i + 1) & mask
        }
        keys[i] = h
        used += 1
        if used * 4 > capacity * 3 { grow() }
        return true
    }

    private func grow() {
        let old = keys, oldCapacity = capacity
        capacity *= 2
        keys = Self.zeroed(capacity)
        let mask = capacity - 1
        for j in 0..<oldCapacity where old[j] != 0 {
            var i = Int(truncatingIfNeeded: old[j]) & mask
            while keys[i] != 0 { i = (i + 1) & mask }
            keys[i] = old[j]
        }
        free(old)
    }
}

/// A derived identity as added, for whoever counts occurrences apart from
/// the run's thread (the journal's writer): task ids in add order. `count`
/// tasks in a row, from `id` on, have it (a loop adding one body again and
/// again is one of these, not one per task).
public struct AddedIdentity: Sendable {
    public var id: Int
    public var hash: UInt64
    public var count: Int

    public init(id: Int, hash: UInt64, count: Int = 1) {
        self.id = id
        self.hash = hash
        self.count = count
    }
}

/// Derived identities as added, in add order, in arrays of at most
/// `chunk`: a loop of closures adds one a task, and one array grown to
/// 100,000s was copied at each doubling on the run's thread, and again
/// when it was handed over while the last was still queued (~60
/// instructions a task). Chunks move by reference.
public struct AddedIdentities: Sendable {
    public static let chunk = 4096
    /// Full chunks, then the one being filled: appending to it is one
    /// array's checks, inline (through the array of chunks it was two
    /// arrays' and a call, ~55 instructions a closure task).
    @usableFromInline var full: [[AddedIdentity]] = []
    @usableFromInline var current: [AddedIdentity] = []

    public init() {}

    public var chunks: [[AddedIdentity]] { current.isEmpty ? full : full + [current] }

    public var isEmpty: Bool { full.isEmpty && current.isEmpty }

    @inlinable
    public mutating func append(_ a: AddedIdentity) {
        if current.count == Self.chunk {
            startChunk()
        } else if current.isEmpty {
            current.reserveCapacity(Self.chunk)  // once a chunk, not grown from 1
        }
        current.append(a)
    }

    @usableFromInline
    mutating func startChunk() {
        full.append(current)
        current = []
        current.reserveCapacity(Self.chunk)
    }

    /// `other`'s chunks after these (no element copied).
    public mutating func append(contentsOf other: AddedIdentities) {
        if !current.isEmpty {
            full.append(current)
            current = []
        }
        full.append(contentsOf: other.chunks)
    }

    public mutating func removeAll() {
        full.removeAll(keepingCapacity: true)
        current = []
    }
}

/// Occurrences counted from identities in add order (`AddedIdentity`): the
/// n-th task with an identity is occurrence n, as the run's thread would
/// have counted it. Each task's identity is kept by id too: the run's
/// thread need not look it up again at the finish.
public final class OccurrenceTable {
    private let counts = IdentityCounts()
    /// By task id (0: not added yet, or no derived identity).
    @usableFromInline var byID: [Int32] = []
    @usableFromInline var hashes: [UInt64] = []

    public init() {}

    public func count(_ added: AddedIdentities) {
        for chunk in added.chunks { count(chunk) }
    }

    public func count(_ added: [AddedIdentity]) {
        // Each new key is a miss in a table larger than the cache: ask for
        // the slots a few keys ahead while counting this one.
        let ahead = 8
        for k in 0..<min(ahead, added.count) { counts.prefetch(added[k].hash) }
        let last = added.reduce(-1) { max($0, $1.id + $1.count - 1) }
        guard last >= 0 else { return }
        if byID.count <= last {
            // Ahead by doubling: a loop of closures adds one id at a
            // time, and growing by one cost ~75 instructions a task.
            // Zeros past the last id read as "not counted", as before.
            let size = max(last + 1, 2 * byID.count, 4096)
            byID.append(contentsOf: repeatElement(0, count: size - byID.count))
            hashes.append(contentsOf: repeatElement(0, count: size - hashes.count))
        }
        // The storage taken once for the whole array: each subscript write
        // checked that it was not shared (~25 instructions a task).
        byID.withUnsafeMutableBufferPointer { ids in
            hashes.withUnsafeMutableBufferPointer { hs in
                for (k, a) in added.enumerated() where a.id >= 0 && a.count > 0 {
                    if k + ahead < added.count { counts.prefetch(added[k + ahead].hash) }
                    // a run of one body: counted at once, then numbered
                    let first = counts.increment(a.hash, by: a.count) - a.count + 1
                    for j in 0..<a.count {
                        ids[a.id + j] = Int32(truncatingIfNeeded: first + j)
                        hs[a.id + j] = a.hash
                    }
                }
            }
        }
    }

    /// Task `id`'s occurrence (0: it was not counted).
    public subscript(id: Int) -> Int { id >= 0 && id < byID.count ? Int(byID[id]) : 0 }

    /// Task `id`'s identity and its occurrence (0: it was not counted).
    /// Inlinable: the journal's writer asks for each task's.
    @inlinable
    public func identity(of id: Int) -> (hash: UInt64, occurrence: Int) {
        id >= 0 && id < byID.count ? (hashes[id], Int(byID[id])) : (0, 0)
    }
}

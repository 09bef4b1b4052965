#if canImport(Glibc)
import Glibc
#endif

/// How many tasks had each derived identity so far: an open-addressing
/// table keyed by the identity hash itself (already well mixed, so it is
/// its own bucket index). A loop of closures gives every task a new
/// identity: a Dictionary rehashed each key with SipHash and moved its
/// entries at every growth; this probes one array, key and count side by
/// side (one cache line per probe: the table outgrows the cache).
final class IdentityCounts {
    private struct Slot {
        var key: UInt64
        var count: UInt64
    }

    private var slots: UnsafeMutablePointer<Slot>
    private var capacity: Int
    private var used = 0
    /// Hash 0 is the empty slot's marker: its count lives here.
    private var zeroCount = 0

    init() {
        capacity = 1024
        slots = Self.zeroed(capacity)
    }

    deinit { free(slots) }

    /// All-zero slots (key 0: empty) from calloc: a large table comes as
    /// fresh pages the kernel already zeroed, not a memset on the Lua
    /// thread (a run of 200,000 closures grows it nine times).
    private static func zeroed(_ n: Int) -> UnsafeMutablePointer<Slot> {
        guard let raw = calloc(n, MemoryLayout<Slot>.stride) else { fatalError("tasker: out of memory (identity counts)") }
        return raw.bindMemory(to: Slot.self, capacity: n)
    }

    /// One more task with identity `h`; returns its count with this one.
    func increment(_ h: UInt64) -> Int {
        guard h != 0 else {
            zeroCount += 1
            return zeroCount
        }
        let mask = capacity - 1
        var i = Int(truncatingIfNeeded: h) & mask
        while true {
            let k = slots[i].key
            if k == h {
                slots[i].count &+= 1
                return Int(truncatingIfNeeded: slots[i].count)
            }
            if k == 0 { break }
            i = (i + 1) & mask
        }
        slots[i] = Slot(key: h, count: 1)
        used += 1
        if used * 2 > capacity { grow() }
        return 1
    }

    private func grow() {
        let old = slots, oldCapacity = capacity
        capacity *= 2
        slots = Self.zeroed(capacity)
        let mask = capacity - 1
        for j in 0..<oldCapacity where old[j].key != 0 {
            var i = Int(truncatingIfNeeded: old[j].key) & mask
            while slots[i].key != 0 { i = (i + 1) & mask }
            slots[i] = old[j]
        }
        free(old)
    }
}

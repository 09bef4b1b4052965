/// How many tasks had each derived identity so far: an open-addressing
/// table keyed by the identity hash itself (already well mixed, so it is
/// its own bucket index). A loop of closures gives every task a new
/// identity: a Dictionary rehashed each key with SipHash and moved its
/// entries at every growth; this probes one array.
struct IdentityCounts {
    private var keys: [UInt64]
    private var counts: [Int32]
    private var mask: Int
    private var used = 0
    /// Hash 0 is the empty slot's marker: its count lives here.
    private var zeroCount: Int32 = 0

    init() {
        keys = Array(repeating: 0, count: 1024)
        counts = Array(repeating: 0, count: 1024)
        mask = 1023
    }

    /// One more task with identity `h`; returns its count with this one.
    mutating func increment(_ h: UInt64) -> Int {
        guard h != 0 else {
            zeroCount &+= 1
            return Int(zeroCount)
        }
        var i = Int(truncatingIfNeeded: h) & mask
        while true {
            let k = keys[i]
            if k == h {
                counts[i] &+= 1
                return Int(counts[i])
            }
            if k == 0 { break }
            i = (i + 1) & mask
        }
        keys[i] = h
        counts[i] = 1
        used += 1
        if used * 2 > keys.count { grow() }
        return 1
    }

    private mutating func grow() {
        let oldKeys = keys, oldCounts = counts
        keys = Array(repeating: 0, count: oldKeys.count * 2)
        counts = Array(repeating: 0, count: oldKeys.count * 2)
        mask = keys.count - 1
        for (k, n) in zip(oldKeys, oldCounts) where k != 0 {
            var i = Int(truncatingIfNeeded: k) & mask
            while keys[i] != 0 { i = (i + 1) & mask }
            keys[i] = k
            counts[i] = n
        }
    }
}

/// Bytecode hashes by function prototype address, with which upvalue of the
/// prototype's closures is _ENV: an open-addressing table (a Dictionary
/// hashed each pointer with SipHash, once per task). Addresses are never
/// reused while listed: the caller anchors one closure of each.
struct PrototypeHashes {
    struct Entry {
        var hash: UInt64
        /// The identity hasher's state for a closure body, before its
        /// captures (see `TaskIdentities.closurePrefix`).
        var prefix: UInt64
        /// 1-based; 0: the closures capture no _ENV.
        var env: Int32
    }

    private var keys: [UInt] = Array(repeating: 0, count: 64)
    private var entries: [Entry] = Array(repeating: Entry(hash: 0, prefix: 0, env: 0), count: 64)
    private(set) var count = 0

    private func slot(_ key: UInt, _ mask: Int) -> Int {
        // Fibonacci hashing: objects are aligned, the low bits say little.
        Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) >> 40) & mask
    }

    subscript(_ p: UnsafeRawPointer) -> Entry? {
        let key = UInt(bitPattern: p)
        let mask = keys.count - 1
        var i = slot(key, mask)
        while true {
            let k = keys[i]
            if k == key { return entries[i] }
            if k == 0 { return nil }
            i = (i + 1) & mask
        }
    }

    mutating func insert(_ p: UnsafeRawPointer, _ entry: Entry) {
        if (count + 1) * 2 > keys.count { grow() }
        put(UInt(bitPattern: p), entry)
        count += 1
    }

    private mutating func put(_ key: UInt, _ entry: Entry) {
        let mask = keys.count - 1
        var i = slot(key, mask)
        while keys[i] != 0 && keys[i] != key { i = (i + 1) & mask }
        keys[i] = key
        entries[i] = entry
    }

    private mutating func grow() {
        let oldKeys = keys, oldEntries = entries
        keys = Array(repeating: 0, count: oldKeys.count * 2)
        entries = Array(repeating: Entry(hash: 0, prefix: 0, env: 0), count: oldKeys.count * 2)
        for (k, e) in zip(oldKeys, oldEntries) where k != 0 { put(k, e) }
    }
}

/// Bytecode hashes by function prototype address: an open-addressing table
/// (a Dictionary hashed each pointer with SipHash, once per task). Addresses
/// are never reused while listed: the caller anchors one closure of each.
struct PrototypeHashes {
    private var keys: [UInt] = Array(repeating: 0, count: 64)
    private var hashes: [UInt64] = Array(repeating: 0, count: 64)
    private(set) var count = 0

    private func slot(_ key: UInt, _ mask: Int) -> Int {
        // Fibonacci hashing: objects are aligned, the low bits say little.
        Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) >> 40) & mask
    }

    subscript(_ p: UnsafeRawPointer) -> UInt64? {
        let key = UInt(bitPattern: p)
        let mask = keys.count - 1
        var i = slot(key, mask)
        while true {
            let k = keys[i]
            if k == key { return hashes[i] }
            if k == 0 { return nil }
            i = (i + 1) & mask
        }
    }

    mutating func insert(_ p: UnsafeRawPointer, _ hash: UInt64) {
        if (count + 1) * 2 > keys.count { grow() }
        put(UInt(bitPattern: p), hash)
        count += 1
    }

    private mutating func put(_ key: UInt, _ hash: UInt64) {
        let mask = keys.count - 1
        var i = slot(key, mask)
        while keys[i] != 0 && keys[i] != key { i = (i + 1) & mask }
        keys[i] = key
        hashes[i] = hash
    }

    private mutating func grow() {
        let oldKeys = keys, oldHashes = hashes
        keys = Array(repeating: 0, count: oldKeys.count * 2)
        hashes = Array(repeating: 0, count: oldKeys.count * 2)
        for (k, h) in zip(oldKeys, oldHashes) where k != 0 { put(k, h) }
    }
}

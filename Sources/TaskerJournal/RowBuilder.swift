
/// A journal row's bytes while the writer thread encodes them, in storage
/// of its own. A plain entry reserves room once and writes its parts in
/// place: appended to an array, each part checked the array's storage, and
/// the row was copied at every doubling (a row holds thousands of entries).
struct RowBuilder: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private(set) var count = 0

    init(capacity: Int) {
        self.capacity = max(capacity, 64)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    /// Room for `n` more bytes: the unchecked writes below need it first.
    @inline(__always)
    mutating func reserve(_ n: Int) {
        if count + n > capacity { grow(to: count + n) }
    }

    private mutating func grow(to needed: Int) {
        var c = capacity
        while c < needed { c *= 2 }
        let b = UnsafeMutablePointer<UInt8>.allocate(capacity: c)
        b.update(from: base, count: count)
        base.deallocate()
        base = b
        capacity = c
    }

    /// Writes through a cursor kept in a register, in room reserved first
    /// (the count in memory, read and written at each byte, cost more than
    /// the bytes).
    @inline(__always)
    mutating func write(_ body: (inout Cursor) -> Void) {
        var c = Cursor(p: base + count)
        body(&c)
        count = c.p - base
    }

    struct Cursor {
        var p: UnsafeMutablePointer<UInt8>

        @inline(__always)
        mutating func byte(_ b: UInt8) {
            p.pointee = b
            p += 1
        }

        @inline(__always)
        mutating func varint(_ v: UInt64) {
            var v = v
            while v >= 0x80 {
                byte(UInt8(v & 0x7f) | 0x80)
                v >>= 7
            }
            byte(UInt8(v))
        }

        @inline(__always)
        mutating func word(_ h: UInt64) {
            UnsafeMutableRawPointer(p).storeBytes(of: h.littleEndian, as: UInt64.self)
            p += 8
        }

        @inline(__always)
        mutating func nanos(_ ns: Int64) { varint(ns > 0 ? UInt64(ns) / 1000 : 0) }

        @inline(__always)
        mutating func bytes(_ b: UnsafeRawBufferPointer) {
            guard let src = b.baseAddress, b.count > 0 else { return }
            if b.count <= 16 {
                for i in 0..<b.count { p[i] = src.load(fromByteOffset: i, as: UInt8.self) }
            } else {
                UnsafeMutableRawPointer(p).copyMemory(from: src, byteCount: b.count)
            }
            p += b.count
        }
    }

    /// Checked: reserves room itself.
    mutating func append(_ a: [UInt8]) {
        reserve(a.count)
        a.withUnsafeBytes { b in write { $0.bytes(b) } }
    }

    /// The bytes written so far, read in place.
    func withBytes<T>(_ body: (UnsafeRawBufferPointer) -> T) -> T {
        body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// The bytes as an array (one copy, once a row).
    var array: [UInt8] {
        [UInt8](UnsafeBufferPointer(start: base, count: count))
    }
}

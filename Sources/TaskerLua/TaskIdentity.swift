/// What names a task across runs, so a resumed run can tell which tasks
/// already succeeded: `spec.id`, or a hash of what the task is (its
/// explicit name, its args, its body's bytecode and the values the body
/// captures). Equal identities in one run are numbered in add order.
public enum TaskIdentity: Sendable, Equatable {
    case explicit(String)
    case derived(UInt64)
    /// Cannot be identified: the task is not resumable, for this reason.
    case unidentifiable(String)

    /// The text stored in the journal (`#n` added by the caller for the
    /// n-th equal identity).
    public var text: String? {
        switch self {
        case .explicit(let s): s
        case .derived(let h): Self.hex(h)
        case .unidentifiable: nil
        }
    }

    /// 16 lower-case hex digits (one per remote task's key: written
    /// directly, not through `String(_:radix:)` and a padding string).
    static func hex(_ h: UInt64) -> String {
        String(unsafeUninitializedCapacity: 16) { buffer in
            let digits: StaticString = "0123456789abcdef"
            digits.withUTF8Buffer { d in
                for i in 0..<16 { buffer[i] = d[Int((h >> UInt64(60 - 4 * i)) & 0xf)] }
            }
            return 16
        }
    }
}

/// A 64-bit hash fed field by field (FNV-1a over the bytes, each field
/// tagged and length-prefixed so that fields cannot run into each other,
/// finished with a strong mix). Stable across runs and machines.
struct IdentityHasher {
    /// The running FNV state (C code may feed it the same way: see
    /// `tasker_hash_scalar_closure`).
    var h: UInt64 = 0xcbf2_9ce4_8422_2325

    mutating func byte(_ b: UInt8) {
        h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01b3
    }

    mutating func word(_ w: UInt64) {
        var w = w
        for _ in 0..<8 {
            byte(UInt8(truncatingIfNeeded: w))
            w >>= 8
        }
    }

    mutating func bytes(_ p: UnsafeRawBufferPointer) {
        word(UInt64(p.count))
        for b in p { byte(b) }
    }

    mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { bytes(UnsafeRawBufferPointer($0)) }
    }

    /// The hash, mixed (MurmurHash3's finaliser).
    func finish() -> UInt64 {
        var x = h
        x ^= x >> 33
        x &*= 0xff51_afd7_ed55_8ccd
        x ^= x >> 33
        x &*= 0xc4ce_b9fe_1a85_ec53
        x ^= x >> 33
        return x
    }
}

/// Lua 5.4's stripped dump still carries each function's first and last
/// line; moving code must not change a task's identity, so those fields
/// are dropped. Walks the binary chunk format (header, then each function:
/// source, lines, sizes, code, constants, upvalues, nested functions, debug).
struct BytecodeNormalizer {
    private let input: UnsafeRawBufferPointer
    private var i = 0
    private var out: [UInt8] = []

    /// The dump without line fields, or nil if it is not in the expected format.
    static func normalize(_ dump: UnsafeRawBufferPointer) -> [UInt8]? {
        var n = BytecodeNormalizer(input: dump)
        return n.run() ? n.out : nil
    }

    private init(input: UnsafeRawBufferPointer) {
        self.input = input
        out.reserveCapacity(input.count)
    }

    private mutating func run() -> Bool {
        // signature(4) version(1) format(1) data(6) sizes(3) int(8) num(8), upvalue count(1)
        let header = 4 + 1 + 1 + 6 + 3 + 8 + 8 + 1
        guard input.count > header, input[0] == 0x1b, input[4] == 0x54 else { return false }
        guard copy(header) else { return false }
        return function() && i == input.count
    }

    private mutating func copy(_ n: Int) -> Bool {
        guard n >= 0, i + n <= input.count else { return false }
        out.append(contentsOf: input[i..<(i + n)])
        i += n
        return true
    }

    /// A size: 7-bit groups, most significant first, the last marked 0x80.
    private mutating func size(copying: Bool = true) -> Int? {
        var x = 0
        let start = i
        while i < input.count {
            let b = input[i]
            i += 1
            guard x < (Int.max >> 8) else { return nil }
            x = (x << 7) | Int(b & 0x7f)
            if b & 0x80 != 0 {
                if copying { out.append(contentsOf: input[start..<i]) }
                return x
            }
        }
        return nil
    }

    private mutating func string() -> Bool {
        guard let n = size() else { return false }
        return n == 0 || copy(n - 1)
    }

    private mutating func function() -> Bool {
        guard string(),                                  // source (absent when stripped)
              size(copying: false) != nil,               // linedefined: dropped
              size(copying: false) != nil,               // lastlinedefined: dropped
              copy(3),                                   // numparams, is_vararg, maxstacksize
              let code = size(), copy(code * 4),
              let constants = size() else { return false }
        for _ in 0..<constants {
            guard i < input.count else { return false }
            let tag = input[i]
            guard copy(1) else { return false }
            switch tag {
            case 3, 19: guard copy(8) else { return false }      // integer, float
            case 4, 20: guard string() else { return false }     // short, long string
            case 0, 1, 17: break                                 // nil, false, true
            default: return false
            }
        }
        guard let upvalues = size(), copy(upvalues * 3), let protos = size() else { return false }
        for _ in 0..<protos { guard function() else { return false } }
        // debug: line info, absolute line info, locals, upvalue names (empty when stripped)
        for _ in 0..<4 { guard size() == 0 else { return false } }
        return true
    }
}

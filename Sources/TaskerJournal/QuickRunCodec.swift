import TaskerCore

/// Runs of quick finishes (`QuickFinish`) in a log row. Nearly every task a
/// loop adds is one: consecutive ids, succeeded at the first attempt under
/// the default name, no hold, no values or one integer. One record holds a
/// run, so what those tasks share is written once: no id, state, attempts,
/// held time or value length per task, and an integer as a varint, not
/// JSON text. As plain entries they cost the writer thread ~280
/// instructions and ~15-32 bytes each (the bytes cost again in SQLite).
///
/// The record (in rows of blob version 3): varint first id, the tag byte,
/// varint count, then per task
/// - a byte: identity `0` none, `1` the one before it one occurrence
///   later, `2` a hash and an occurrence follow; `+ 4` an integer follows
///   (the values `[n]`), else the values are `[]`;
/// - the hash (8 bytes) and varint occurrence, with `2`;
/// - zigzag varint: added, in µs, minus the task before it's;
/// - varint started − added and ended − started, in µs;
/// - zigzag varint integer, with `+ 4`.
/// Times round as a plain entry's do: a task reads back the same either way.
/// A version-3 row ends with 8 bytes that check it (`seal`).
extension JournalCodec {
    /// Rows that may hold quick runs. Older builds do not read them: a
    /// writer uses this version only in a file at `JournalSchema`'s
    /// `quickRunsFrom`, which those builds refuse as newer.
    static let quickRunsVersion: UInt8 = 3
    /// A quick run's flags byte: the state-and-kind nibble of a mark (15)
    /// with every flag set, which no entry or mark has.
    static let quickRunTag: UInt8 = 0xFF

    private enum QuickByte {
        static let repeated: UInt8 = 1
        static let hashed: UInt8 = 2
        static let integer: UInt8 = 4
    }

    /// Appends `quick` to a row of version `quickRunsVersion`: runs of
    /// consecutive ids as records, any other finish (a second attempt, a
    /// time missing) as a plain entry. `previous` is the row's last derived
    /// identity, as for plain entries. `masking`: a secret is registered,
    /// so an integer goes the plain entries' way, where the mask sees it (a
    /// secret may be digits); no values (`[]`) hold none.
    static func encode(quick: [QuickFinish], scale: TickScale, identities: OccurrenceTable, previous: inout (UInt64, Int)?,
                       masking: Bool, into row: inout RowBuilder) {
        var i = 0
        while i < quick.count {
            guard fitsARun(quick[i], masking) else {
                encodeAsPlain(quick[i], scale: scale, identities: identities, previous: &previous, masking: masking, into: &row)
                i += 1
                continue
            }
            var end = i + 1
            while end < quick.count, quick[end].id == quick[end - 1].id + 1, fitsARun(quick[end], masking) { end += 1 }
            encodeRun(quick[i..<end], scale: scale, identities: identities, previous: &previous, into: &row)
            i = end
        }
    }

    @inline(__always)
    private static func fitsARun(_ q: QuickFinish, _ masking: Bool) -> Bool {
        q.attempts == 1 && q.started > 0 && q.ended > 0 && q.id >= 0 && !(masking && q.hasInteger)
    }

    /// One quick finish as a plain entry (rows of version 2 hold only these).
    static func encodeAsPlain(_ q: QuickFinish, scale: TickScale, identities: OccurrenceTable, previous: inout (UInt64, Int)?,
                              masking: Bool, into row: inout RowBuilder) {
        let identity = identities.identity(of: q.id)
        var p = PlainEntry(id: q.id, state: .succeeded, attempts: Int(q.attempts), identityHash: identity.hash,
                           occurrence: identity.occurrence, added: q.added, started: q.started, ended: q.ended,
                           valueLength: q.hasInteger ? PlainEntry.loneInteger : PlainEntry.noValues)
        p.integer = q.integer
        encode(plain: p, scale: scale, values: UnsafeRawBufferPointer(start: nil, count: 0), previous: &previous, masking: masking,
               into: &row)
    }

    /// Room for one task of a run: the byte, the hash, five varints.
    private static let quickScratch = 1 + 8 + 5 * 10

    private static func encodeRun(_ run: ArraySlice<QuickFinish>, scale: TickScale, identities: OccurrenceTable,
                                  previous: inout (UInt64, Int)?, into row: inout RowBuilder) {
        row.reserve(3 * 10 + run.count * quickScratch)
        var lastAdded: Int64 = 0
        row.write { w in
            w.varint(UInt64(run[run.startIndex].id))
            w.byte(quickRunTag)
            w.varint(UInt64(run.count))
            for q in run {
                let identity = identities.identity(of: q.id)
                var code: UInt8 = 0
                if identity.occurrence > 0 {
                    if let (h, n) = previous, h == identity.hash, n + 1 == identity.occurrence {
                        code = QuickByte.repeated
                    } else {
                        code = QuickByte.hashed
                    }
                    previous = identity
                }
                if q.hasInteger { code |= QuickByte.integer }
                w.byte(code)
                if code & QuickByte.hashed != 0 {
                    w.word(identity.hash)
                    w.varint(UInt64(identity.occurrence))
                }
                // as `nanos` rounds a plain entry's added time
                let addedNanos = scale.nanosSinceOrigin(q.added), started = scale.nanosSinceOrigin(q.started)
                let added = addedNanos > 0 ? addedNanos / 1000 : 0
                w.varint(zigzag(added &- lastAdded))
                lastAdded = added
                w.nanos(started &- addedNanos)
                w.nanos(scale.nanosSinceOrigin(q.ended) &- started)
                if q.hasInteger { w.varint(zigzag(q.integer)) }
            }
        }
    }

    /// A version-3 row ends with 8 bytes that check the bytes before
    /// them. A row of varints read back from damaged bytes mostly still
    /// decodes (a flipped bit was another value, which a resume reused);
    /// checked, the row is refused and its tasks run again. Each 8 bytes
    /// go through a bijection of the state, so a change inside one word
    /// always changes the check. ~1 ms for a 200,000-task run's rows.
    static func seal(_ row: inout RowBuilder) {
        let c = row.withBytes(check)
        row.reserve(8)
        row.write { $0.word(c) }
    }

    /// A row as a store that takes quick runs keeps it: one of version 2
    /// (built before the store was open, or a settled run's lost tasks)
    /// is one of version 3 without quick runs, so it gets that version
    /// byte and its check; version 3 is checked already.
    static func checked(_ row: [UInt8]) -> [UInt8] {
        guard row.first == version else { return row }
        var r = RowBuilder(capacity: row.count + 8)
        r.reserve(row.count)
        row.withUnsafeBytes { b in
            r.write {
                $0.byte(quickRunsVersion)
                $0.bytes(UnsafeRawBufferPointer(rebasing: b[1...]))
            }
        }
        seal(&r)
        return r.array
    }

    /// The row without its check; nil if the check fails.
    static func unsealed(_ b: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard b.count > 8 else { return nil }
        let body = UnsafeRawBufferPointer(rebasing: b[..<(b.count - 8)])
        let stored = UInt64(littleEndian: b.loadUnaligned(fromByteOffset: b.count - 8, as: UInt64.self))
        return stored == check(body) ? body : nil
    }

    static func check(_ b: UnsafeRawBufferPointer) -> UInt64 {
        @inline(__always) func mix(_ x: UInt64) -> UInt64 {
            let z = x &* 0xBF58_476D_1CE4_E5B9
            return z ^ (z >> 31)
        }
        var h = 0x9E37_79B9_7F4A_7C15 &* UInt64(b.count &+ 1)
        var i = 0
        while i + 8 <= b.count {
            h = mix(h ^ UInt64(littleEndian: b.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
            i += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while i < b.count {
            tail |= UInt64(b[i]) << shift
            shift += 8
            i += 1
        }
        return mix(mix(h ^ tail) ^ 0xFF51_AFD7_ED55_8CCD)
    }

    @inline(__always)
    static func zigzag(_ v: Int64) -> UInt64 { UInt64(bitPattern: (v << 1) ^ (v >> 63)) }

    @inline(__always)
    static func unzigzag(_ v: UInt64) -> Int64 { Int64(bitPattern: v >> 1) ^ -Int64(bitPattern: v & 1) }

    /// The tasks of a quick run whose first id and tag `r` has read; nil
    /// if the bytes are not one.
    static func decodeQuickRun(firstID: Int, _ r: inout Reader, previous: inout (UInt64, Int)?,
                               into out: inout [JournalEntry]) -> Bool {
        // every task takes at least four bytes: a count past that is damage
        guard let count = r.int(), count <= r.remaining / 4 else { return false }
        var added: Int64 = 0
        for k in 0..<count {
            guard let code = r.byte(), code & ~7 == 0, code & 3 != 3 else { return false }
            var e = JournalEntry(id: firstID + k, state: .succeeded)
            e.attempts = 1
            switch code & 3 {
            case QuickByte.repeated:
                guard let (h, n) = previous, n < Int.max else { return false }
                e.identity = .derived(h, occurrence: n + 1)
                previous = (h, n + 1)
            case QuickByte.hashed:
                guard let h = r.word(), let n = r.int() else { return false }
                e.identity = .derived(h, occurrence: n)
                previous = (h, n)
            default: break
            }
            guard let delta = r.varint(), let started = r.varint(), let ended = r.varint() else { return false }
            added &+= unzigzag(delta)
            guard added >= 0 else { return false }
            e.added = Double(added) / 1e6
            let s = e.added + Double(started) / 1e6
            e.started = s
            e.ended = s + Double(ended) / 1e6
            if code & QuickByte.integer != 0 {
                guard let n = r.varint() else { return false }
                e.value = "[\(unzigzag(n))]"
            } else {
                e.value = "[]"
            }
            out.append(e)
        }
        return true
    }
}

import TaskerCore

/// A task as the run writes it: compact, so that recording costs the run
/// little (no names or identities formatted on the run's thread). The
/// reader turns entries back into `JournalTask`s.
public struct JournalEntry: Sendable {
    public enum Identity: Sendable, Equatable {
        case none
        /// A derived identity: its hash, and which of the equal ones (1, 2…).
        case derived(UInt64, occurrence: Int)
        case explicit(String)

        /// `spec.id`, or the hash in hex with `#n` from the second on.
        public var text: String? {
            switch self {
            case .none: return nil
            case .explicit(let s): return s
            case .derived(let h, let n):
                let hex = String(h, radix: 16)
                let padded = String(repeating: "0", count: 16 - hex.count) + hex
                return n > 1 ? "\(padded)#\(n)" : padded
            }
        }
    }

    public enum State: UInt8, Sendable {
        case running = 0, succeeded, failed, cancelled, skipped

        public var name: String {
            switch self {
            case .running: "running"
            case .succeeded: "succeeded"
            case .failed: "failed"
            case .cancelled: "cancelled"
            case .skipped: "skipped"
            }
        }
    }

    public enum Kind: UInt8, Sendable {
        case task = 0, group, schedule

        public var name: String {
            switch self {
            case .task: "task"
            case .group: "group"
            case .schedule: "schedule"
            }
        }
    }

    public var id: Int
    public var state: State
    public var kind: Kind = .task
    public var reused = false
    public var identity: Identity = .none
    /// nil: the default name, `task-<id>`.
    public var name: String?
    public var attempts = 0
    /// Seconds since the run started.
    public var added: Double = 0
    public var started: Double?
    public var ended: Double?
    public var held: Double = 0
    /// The values as a JSON array, when stored.
    public var value: String?
    /// What most tasks lack, boxed so that an entry stays small to copy.
    private var rare: RareBox?

    /// Why the task cannot be resumed, if it cannot.
    public var notResumable: String? {
        get { rare?.fields.notResumable }
        set { update { $0.notResumable = newValue } }
    }
    public var tags: [String] {
        get { rare?.fields.tags ?? [] }
        set { if !newValue.isEmpty || rare != nil { update { $0.tags = newValue } } }
    }
    public var after: [Int] {
        get { rare?.fields.after ?? [] }
        set { if !newValue.isEmpty || rare != nil { update { $0.after = newValue } } }
    }
    public var error: String? {
        get { rare?.fields.error }
        set { update { $0.error = newValue } }
    }
    public var errorKind: String? {
        get { rare?.fields.errorKind }
        set { update { $0.errorKind = newValue } }
    }
    /// Every attempt, when there was more than one.
    public var attemptLog: [JournalAttempt] {
        get { rare?.fields.attemptLog ?? [] }
        set { if !newValue.isEmpty || rare != nil { update { $0.attemptLog = newValue } } }
    }

    private mutating func update(_ change: (inout RareFields) -> Void) {
        var f = rare?.fields ?? RareFields()
        change(&f)
        rare = RareBox(f)
    }

    public init(id: Int, state: State) {
        self.id = id
        self.state = state
    }

    /// The task as readers see it.
    public var task: JournalTask {
        var t = JournalTask(id: id, name: name ?? "task-\(id)", state: state.name)
        t.identity = identity.text
        t.notResumable = notResumable
        t.kind = kind.name
        t.tags = tags
        t.after = after
        t.attempts = attempts
        t.added = added
        t.started = started
        t.ended = ended
        t.held = held
        t.reused = reused
        t.error = error
        t.errorKind = errorKind
        t.value = value
        t.attemptLog = attemptLog
        return t
    }
}

/// The common entry, with nothing that needs memory management: a task that
/// ran (or is running) under its default name with a derived identity (or
/// none), and its stored values (if any) as JSON bytes in a buffer that
/// goes to the writer with the entries. The run's thread appends these to a
/// plain array; the writer thread encodes them. Times are raw `TickClock`
/// readings (0: none), converted by the writer.
public struct PlainEntry: Sendable {
    public var id: Int
    public var state: JournalEntry.State
    public var attempts: Int
    public var identityHash: UInt64
    /// 0 when the task has no identity; -1 when the writer thread counts it
    /// (`JournalWriter.submit(identities:)`) and finds it by id (the
    /// hash here is then not read).
    public var occurrence: Int
    public var added: UInt64
    public var started: UInt64
    public var ended: UInt64
    /// Where the stored values (a JSON array) are in the values buffer
    /// handed over with the entries; or `valueLength` is one of the forms
    /// below, which the writer thread turns into text.
    public var valueStart: Int32
    public var valueLength: Int32
    /// The task's one value, when `valueLength` is `loneInteger`.
    public var integer: Int64 = 0
    /// Where the task's name (UTF-8, given by its spec) is in the values
    /// buffer; `nameLength` -1: no name given.
    public var nameStart: Int32 = 0
    public var nameLength: Int32 = -1
    /// No value stored.
    public static let notStored: Int32 = -1
    /// The values are `[integer]`.
    public static let loneInteger: Int32 = -2
    /// The task returned nothing: `[]`.
    public static let noValues: Int32 = -3

    public init(id: Int, state: JournalEntry.State, attempts: Int, identityHash: UInt64, occurrence: Int,
                added: UInt64, started: UInt64, ended: UInt64, valueStart: Int32 = 0, valueLength: Int32 = notStored) {
        self.id = id
        self.state = state
        self.attempts = attempts
        self.identityHash = identityHash
        self.occurrence = occurrence
        self.added = added
        self.started = started
        self.ended = ended
        self.valueStart = valueStart
        self.valueLength = valueLength
    }
}

struct RareFields: Sendable {
    var notResumable: String?
    var tags: [String] = []
    var after: [Int] = []
    var error: String?
    var errorKind: String?
    var attemptLog: [JournalAttempt] = []
}

final class RareBox: Sendable {
    let fields: RareFields
    init(_ fields: RareFields) { self.fields = fields }
}

/// Entries packed into one blob per batch: a version byte, then per entry
/// a varint id, a byte of state, kind and flags, a byte saying which
/// optional fields follow, and those fields (varints, microsecond times,
/// length-prefixed UTF-8).
///
/// Version 2 packs state and kind into the low four bits as
/// `state * 3 + kind` (five states, three kinds); version 1 had two bits
/// each, room for four states only, and is still read. Version 3 rows may
/// also hold runs of quick finishes (`QuickRunCodec.swift`).
public enum JournalCodec {
    static let version: UInt8 = 2

    static func stateAndKind(_ state: JournalEntry.State, _ kind: JournalEntry.Kind) -> UInt8 {
        state.rawValue * 3 + kind.rawValue
    }

    static func stateAndKind(_ flags: UInt8, version: UInt8) -> (JournalEntry.State, JournalEntry.Kind)? {
        let packed = version == 1 ? (flags & 3) * 3 + ((flags >> 2) & 3) : flags & 15
        guard let state = JournalEntry.State(rawValue: packed / 3),
              let kind = JournalEntry.Kind(rawValue: packed % 3) else { return nil }
        return (state, kind)
    }

    private enum Flag {
        static let reused: UInt8 = 1 << 4
        static let derived: UInt8 = 1 << 5
        static let explicit: UInt8 = 1 << 6
        static let name: UInt8 = 1 << 7
    }

    private enum Field {
        static let notResumable: UInt8 = 1 << 0
        static let tags: UInt8 = 1 << 1
        static let after: UInt8 = 1 << 2
        static let error: UInt8 = 1 << 3
        static let value: UInt8 = 1 << 4
        static let log: UInt8 = 1 << 5
        static let started: UInt8 = 1 << 6
        static let ended: UInt8 = 1 << 7
    }

    /// A whole log row: the version byte, then the entries.
    public static func encode(_ entries: [JournalEntry], into out: inout [UInt8]) {
        out.append(version)
        for e in entries { encode(e, into: &out) }
    }

    /// A mark's state-and-kind nibble: the one value `state * 3 + kind`
    /// never takes. Then the mark's kind where an entry has its fields
    /// byte, its time and its detail.
    static let markTag: UInt8 = 15

    /// One run mark, appended among the entries.
    public static func encode(_ m: JournalMark, into out: inout [UInt8]) {
        varint(UInt64(m.task), &out)
        out.append(markTag)
        out.append(m.kind.rawValue)
        time(max(0, m.at), &out)
        string(m.detail ?? "", &out)
    }

    /// Why a value is not stored when the mask changes it: a secret was
    /// registered after the task ended (before, it is refused at the
    /// finish). Stored as `***` it would come back as that on resume.
    static let heldASecret = "its values hold a secret registered after it ended"

    /// One entry, appended (a blob is the version byte, then entries).
    public static func encode(_ e: JournalEntry, into out: inout [UInt8]) {
        var e = e
        if let v = e.value, !SecretMask.shared.isEmpty, SecretMask.shared.maskJSON(v) != v {
            e.value = nil
            e.notResumable = e.notResumable ?? heldASecret
        }
        do {
            varint(UInt64(e.id), &out)
            var flags = stateAndKind(e.state, e.kind)
            if e.reused { flags |= Flag.reused }
            switch e.identity {
            case .none: break
            case .derived: flags |= Flag.derived
            case .explicit: flags |= Flag.explicit
            }
            if e.name != nil { flags |= Flag.name }
            out.append(flags)
            var fields: UInt8 = 0
            if e.notResumable != nil { fields |= Field.notResumable }
            if !e.tags.isEmpty { fields |= Field.tags }
            if !e.after.isEmpty { fields |= Field.after }
            if e.error != nil || e.errorKind != nil { fields |= Field.error }
            if e.value != nil { fields |= Field.value }
            if !e.attemptLog.isEmpty { fields |= Field.log }
            if e.started != nil { fields |= Field.started }
            if e.ended != nil { fields |= Field.ended }
            out.append(fields)
            switch e.identity {
            case .none: break
            case .derived(let h, let n):
                for k in 0..<8 { out.append(UInt8(truncatingIfNeeded: h >> (8 * UInt64(k)))) }
                varint(UInt64(n), &out)
            case .explicit(let s): string(s, &out)
            }
            if let name = e.name { string(name, &out) }
            varint(UInt64(e.attempts), &out)
            time(e.added, &out)
            time(e.held, &out)
            // started after added, ended after started: small deltas
            if let s = e.started { time(s - e.added, &out) }
            if let t = e.ended { time(t - (e.started ?? e.added), &out) }
            if let s = e.notResumable { string(s, &out) }
            if !e.tags.isEmpty {
                varint(UInt64(e.tags.count), &out)
                for t in e.tags { string(t, &out) }
            }
            if !e.after.isEmpty {
                varint(UInt64(e.after.count), &out)
                for a in e.after { varint(UInt64(a), &out) }
            }
            if e.error != nil || e.errorKind != nil {
                string(e.error ?? "", &out)
                string(e.errorKind ?? "", &out)
            }
            if let v = e.value { string(v, &out) }
            if !e.attemptLog.isEmpty {
                varint(UInt64(e.attemptLog.count), &out)
                for a in e.attemptLog {
                    time(a.start, &out)
                    time(a.end, &out)
                    string(a.error ?? "", &out)
                    string(a.kind ?? "", &out)
                }
            }
        }
    }

    /// A plain entry, appended. `previous` is the derived identity of the
    /// plain entry before it in the same blob: tasks added in a loop repeat
    /// it one occurrence later, and then it takes no bytes.
    static func encode(plain p: PlainEntry, scale: TickScale, values: UnsafeRawBufferPointer, previous: inout (UInt64, Int)?,
                       into out: inout [UInt8]) {
        var row = RowBuilder(capacity: Self.plainScratch)
        encode(plain: p, scale: scale, values: values, previous: &previous, masking: !SecretMask.shared.isEmpty, into: &row)
        out.append(contentsOf: row.array)
    }

    /// The same, into the row the writer thread builds. `masking`: a secret
    /// is registered (looked at once a row: a secret registered later is
    /// masked from the next row on).
    static func encode(plain p: PlainEntry, scale: TickScale, values: UnsafeRawBufferPointer, previous: inout (UInt64, Int)?,
                       masking: Bool, into row: inout RowBuilder) {
        switch p.valueLength {
        case PlainEntry.noValues:
            var text: (UInt8, UInt8) = (UInt8(ascii: "["), UInt8(ascii: "]"))
            withUnsafeBytes(of: &text) {
                encode(plain: p, value: $0, scale: scale, previous: &previous, values: values, masking: masking, into: &row)
            }
        case PlainEntry.loneInteger:
            // `[digits]`, written backwards from the end of a buffer on the stack
            var text: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            withUnsafeMutableBytes(of: &text) { buf in
                assert(buf.count >= DecimalText.maxLength + 2, "room for the digits and the brackets")
                buf[buf.count - 1] = UInt8(ascii: "]")
                let digits = DecimalText.write(p.integer, endingAt: UnsafeMutableRawBufferPointer(rebasing: buf[..<(buf.count - 1)]))
                buf[digits - 1] = UInt8(ascii: "[")
                encode(plain: p, value: UnsafeRawBufferPointer(rebasing: buf[(digits - 1)...]), scale: scale,
                       previous: &previous, values: values, masking: masking, into: &row)
            }
        default:
            let inside = p.valueLength >= 0 && Int(p.valueStart) + Int(p.valueLength) <= values.count
            encode(plain: p, value: inside ? UnsafeRawBufferPointer(rebasing: values[Int(p.valueStart)..<Int(p.valueStart + p.valueLength)]) : nil,
                   scale: scale, previous: &previous, values: values, masking: masking, into: &row)
        }
    }

    private static func encode(plain p: PlainEntry, value: UnsafeRawBufferPointer?, scale: TickScale, previous: inout (UInt64, Int)?,
                               values: UnsafeRawBufferPointer, masking: Bool, into row: inout RowBuilder) {
        if !masking, p.nameLength < 0, p.started > 0, p.ended > 0, let value, value.count < 0x80 {
            encodeCommon(plain: p, value: value, scale: scale, previous: &previous, into: &row)
        } else {
            encodeAny(plain: p, value: value, scale: scale, previous: &previous, values: values, masking: masking, into: &row)
        }
    }

    /// The commonest plain entry (no name, nothing to mask, started and
    /// ended, a value of under 128 bytes) in the bytes `encodeAny` writes,
    /// without its branches for the rest: the writer thread spent ~300
    /// instructions an entry there.
    @inline(__always)
    static func encodeCommon(plain p: PlainEntry, value: UnsafeRawBufferPointer, scale: TickScale, previous: inout (UInt64, Int)?,
                             into row: inout RowBuilder) {
        var (flags, identity) = identityFlags(p, previous: &previous)
        flags |= stateAndKind(p.state, .task)
        let added = scale.nanosSinceOrigin(p.added), started = scale.nanosSinceOrigin(p.started)
        let ended = scale.nanosSinceOrigin(p.ended)
        row.reserve(Self.plainScratch + value.count)
        row.write { w in
            w.varint(UInt64(p.id))
            w.byte(flags)
            w.byte(Field.value | Field.started | Field.ended)
            if identity {
                w.word(p.identityHash)
                w.varint(UInt64(p.occurrence))
            }
            w.varint(UInt64(p.attempts))
            w.nanos(added)
            w.byte(0)  // held
            w.nanos(started &- added)
            w.nanos(ended &- started)
            w.byte(UInt8(truncatingIfNeeded: value.count))
            w.bytes(value)
        }
    }

    /// A plain entry's identity flags, and whether its identity is written:
    /// not when it is the one before it one occurrence later.
    @inline(__always)
    private static func identityFlags(_ p: PlainEntry, previous: inout (UInt64, Int)?) -> (UInt8, Bool) {
        guard p.occurrence > 0 else { return (0, false) }
        defer { previous = (p.identityHash, p.occurrence) }
        if let (h, n) = previous, h == p.identityHash, n + 1 == p.occurrence { return (Flag.derived | Flag.explicit, false) }
        return (Flag.derived, true)
    }

    /// Any plain entry.
    static func encodeAny(plain p: PlainEntry, value: UnsafeRawBufferPointer?, scale: TickScale, previous: inout (UInt64, Int)?,
                          values: UnsafeRawBufferPointer, masking: Bool, into row: inout RowBuilder) {
        var (flags, writesIdentity) = identityFlags(p, previous: &previous)
        flags |= stateAndKind(p.state, .task)
        let name: UnsafeRawBufferPointer? = p.nameLength >= 0 && Int(p.nameStart) + Int(p.nameLength) <= values.count
            ? UnsafeRawBufferPointer(rebasing: values[Int(p.nameStart)..<Int(p.nameStart + p.nameLength)]) : nil
        if name != nil { flags |= Flag.name }
        // In integer nanoseconds: the Double seconds and their rounding were
        // a quarter of the writer's work on each plain entry.
        let added = scale.nanosSinceOrigin(p.added), started = scale.nanosSinceOrigin(p.started)
        let ended = scale.nanosSinceOrigin(p.ended)
        // A name holding a registered secret is kept with it as *** (rare:
        // the common case checks one atomic); values holding one are not
        // kept at all (as *** they would come back wrong on resume).
        var value = value
        var maskedName: [UInt8]?
        if masking {
            if let v = value, SecretMask.shared.maskJSON(Array(v)) != nil { value = nil }
            if let name { maskedName = Array(SecretMask.shared.mask(String(decoding: name, as: UTF8.self)).utf8) }
        }
        let refused = masking && value == nil && p.valueLength != PlainEntry.notStored
        var fields: UInt8 = 0
        if value != nil { fields |= Field.value }
        if refused { fields |= Field.notResumable }
        if p.started > 0 { fields |= Field.started }
        if p.ended > 0 { fields |= Field.ended }
        let valueCount = value?.count ?? 0
        let nameCount = maskedName?.count ?? name?.count ?? 0
        // One check of the row's room; every part below is written in place.
        row.reserve(Self.plainScratch + nameCount + valueCount + (refused ? Self.heldASecret.utf8.count + 10 : 0))
        row.write { w in
            w.varint(UInt64(p.id))
            w.byte(flags)
            w.byte(fields)
            if writesIdentity {
                w.word(p.identityHash)
                w.varint(UInt64(p.occurrence))
            }
            if let name {
                w.varint(UInt64(nameCount))
                if let maskedName { maskedName.withUnsafeBytes { w.bytes($0) } } else { w.bytes(name) }
            }
            w.varint(UInt64(p.attempts))
            w.nanos(added)
            w.byte(0)  // held
            if p.started > 0 { w.nanos(started &- added) }
            if p.ended > 0 { w.nanos(ended &- (p.started > 0 ? started : added)) }
            if refused {
                var reason = Self.heldASecret
                reason.withUTF8 { r in
                    w.varint(UInt64(r.count))
                    w.bytes(UnsafeRawBufferPointer(r))
                }
            }
            if let value {
                w.varint(UInt64(valueCount))
                w.bytes(value)
            }
        }
    }

    /// Room for a plain entry's fixed part: 8 varints of at most 10 bytes,
    /// the hash's 8 and 3 single bytes.
    static let plainScratch = 96

    /// The entries of one blob; nil if it is not one this version reads.
    /// `onMark` is handed the run's marks among them (pauses, an interrupt).
    static func decode(_ bytes: UnsafeRawBufferPointer, onMark: ((JournalMark) -> Void)? = nil) -> [JournalEntry]? {
        guard let blobVersion = bytes.first, (1...quickRunsVersion).contains(blobVersion),
              let body = blobVersion >= quickRunsVersion ? unsealed(bytes) : bytes else { return nil }
        var r = Reader(bytes: body, i: 1)
        var out: [JournalEntry] = []
        var previous: (UInt64, Int)?
        while !r.atEnd {
            // ids, occurrences, attempts as `int()`: a damaged row may hold
            // any varint, and one past Int's range trapped the reader
            guard let id = r.int(), let flags = r.byte() else { return nil }
            if blobVersion >= 3 && flags == quickRunTag {
                guard decodeQuickRun(firstID: id, &r, previous: &previous, into: &out) else { return nil }
                continue
            }
            guard let fields = r.byte() else { return nil }
            if blobVersion >= 2 && flags == markTag {
                guard let kind = JournalMark.Kind(rawValue: fields), let at = r.time(), let detail = r.string() else { return nil }
                onMark?(JournalMark(kind, at: at, task: id, detail: detail.isEmpty ? nil : detail))
                continue
            }
            guard let (state, kind) = stateAndKind(flags, version: blobVersion) else { return nil }
            var e = JournalEntry(id: id, state: state)
            e.kind = kind
            e.reused = flags & Flag.reused != 0
            if flags & Flag.derived != 0 && flags & Flag.explicit != 0 {
                // the previous derived identity, one occurrence later
                guard let (h, n) = previous, n < Int.max else { return nil }
                e.identity = .derived(h, occurrence: n + 1)
                previous = (h, n + 1)
            } else if flags & Flag.derived != 0 {
                guard let h = r.word(), let n = r.int() else { return nil }
                e.identity = .derived(h, occurrence: n)
                previous = (h, n)
            } else if flags & Flag.explicit != 0 {
                guard let s = r.string() else { return nil }
                e.identity = .explicit(s)
            }
            if flags & Flag.name != 0 {
                guard let s = r.string() else { return nil }
                e.name = s
            }
            guard let attempts = r.int(), let added = r.time(), let held = r.time() else { return nil }
            e.attempts = attempts
            e.added = added
            e.held = held
            if fields & Field.started != 0 { guard let t = r.time() else { return nil }; e.started = added + t }
            if fields & Field.ended != 0 { guard let t = r.time() else { return nil }; e.ended = (e.started ?? added) + t }
            if fields & Field.notResumable != 0 { guard let s = r.string() else { return nil }; e.notResumable = s }
            // Lists are read into locals and set once: appended through
            // the entry's boxed properties, each element copied the list
            // (a task after 200,000 others took seconds to read).
            if fields & Field.tags != 0 {
                guard let n = r.varint(), n < 1 << 20 else { return nil }
                var tags: [String] = []
                for _ in 0..<n { guard let s = r.string() else { return nil }; tags.append(s) }
                e.tags = tags
            }
            if fields & Field.after != 0 {
                guard let n = r.varint(), n < 1 << 24, n <= UInt64(r.remaining) else { return nil }
                var after: [Int] = []
                after.reserveCapacity(Int(n))
                for _ in 0..<n { guard let a = r.int() else { return nil }; after.append(a) }
                e.after = after
            }
            if fields & Field.error != 0 {
                guard let m = r.string(), let k = r.string() else { return nil }
                e.error = m
                e.errorKind = k.isEmpty ? nil : k
            }
            if fields & Field.value != 0 { guard let s = r.string() else { return nil }; e.value = s }
            if fields & Field.log != 0 {
                guard let n = r.varint(), n < 1 << 20 else { return nil }
                var log: [JournalAttempt] = []
                for _ in 0..<n {
                    guard let a = r.time(), let b = r.time(), let m = r.string(), let k = r.string() else { return nil }
                    log.append(JournalAttempt(start: a, end: b, error: m.isEmpty ? nil : m, kind: k.isEmpty ? nil : k))
                }
                e.attemptLog = log
            }
            out.append(e)
        }
        return out
    }

    private static func varint(_ v: UInt64, _ out: inout [UInt8]) {
        var v = v
        while v >= 0x80 {
            out.append(UInt8(v & 0x7f) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    /// Seconds as whole microseconds (times are never negative).
    private static func time(_ t: Double, _ out: inout [UInt8]) {
        varint(micros(t), &out)
    }

    static func micros(_ t: Double) -> UInt64 { t.isFinite && t > 0 ? UInt64(min(t * 1e6, 1.8e19)) : 0 }

    /// Every string the journal keeps (names, errors, values, tags) goes
    /// through here: registered secrets are `***` in the file.
    private static func string(_ s: String, _ out: inout [UInt8]) {
        let s = SecretMask.shared.mask(s)
        varint(UInt64(s.utf8.count), &out)
        out.append(contentsOf: s.utf8)
    }

    struct Reader {
        let bytes: UnsafeRawBufferPointer
        var i = 0

        var atEnd: Bool { i >= bytes.count }
        var remaining: Int { bytes.count - i }

        mutating func byte() -> UInt8? {
            guard i < bytes.count else { return nil }
            defer { i += 1 }
            return bytes[i]
        }

        mutating func varint() -> UInt64? {
            var v: UInt64 = 0, shift: UInt64 = 0
            while let b = byte() {
                guard shift < 64 else { return nil }
                v |= UInt64(b & 0x7f) << shift
                if b & 0x80 == 0 { return v }
                shift += 7
            }
            return nil
        }

        mutating func time() -> Double? { varint().map { Double($0) / 1e6 } }

        /// A varint that is a count or an id: nil past 2^62 (damage).
        mutating func int() -> Int? {
            guard let v = varint(), v < 1 << 62 else { return nil }
            return Int(v)
        }

        /// Eight bytes, little-endian (an identity's hash).
        mutating func word() -> UInt64? {
            guard remaining >= 8 else { return nil }
            var h: UInt64 = 0
            for k in 0..<8 { h |= UInt64(bytes[i + k]) << (8 * UInt64(k)) }
            i += 8
            return h
        }

        mutating func string() -> String? {
            guard let n = varint(), n <= UInt64(bytes.count - i) else { return nil }
            let s = String(decoding: bytes[i..<(i + Int(n))], as: UTF8.self)
            i += Int(n)
            return s
        }
    }
}

import Foundation
import Testing
import TaskerCore
@testable import TaskerJournal

/// Runs of quick finishes: a row of them reads back exactly as the plain
/// entries they replace, in fewer bytes; damaged ones are refused; a file
/// whose readers may not know them never gets them.
@Suite struct QuickRunTests {
    func tempDir() -> String { NSTemporaryDirectory() + "journal-quick-\(UUID().uuidString)" }

    /// Quick finishes of every shape the writer sees: runs of consecutive
    /// ids, gaps, a second attempt, identities repeated one occurrence
    /// later or not or none, integers at both ends, added times that go
    /// back (another thread's clock reading), times across varint lengths.
    func mixedFinishes() -> (quick: [QuickFinish], identities: OccurrenceTable) {
        var quick: [QuickFinish] = []
        var added: [AddedIdentity] = []
        let integers: [Int64] = [0, 1, -1, 63, -64, 64, 1_234_567, .max, .min]
        var id = 1
        for i in 0..<4_000 {
            id += i % 97 == 0 ? 5 : 1  // a gap now and then
            let t = UInt64(1_000 + i * 1_733) &* UInt64(1 + i % 7) &+ (i % 13 == 0 ? 0 : 999_999_937)
            var q = QuickFinish(id: id, added: i % 41 == 0 ? t / 2 : t, started: t + UInt64(i % 5) * 65_537 + 1,
                                ended: t + UInt64(i % 11) * 9_000_001 + 2)
            if i % 3 == 0 {
                q.hasInteger = true
                q.integer = integers[i % integers.count]
            }
            if i % 59 == 0 { q.attempts = 2 }
            quick.append(q)
            // identities: runs of one hash (a shared body), one each (closures), none
            switch i % 10 {
            case 0..<5: added.append(AddedIdentity(id: id, hash: 0xfeed))
            case 5..<9: added.append(AddedIdentity(id: id, hash: UInt64(0x1_0000 + i)))
            default: break
            }
        }
        let identities = OccurrenceTable()
        identities.count(added)
        return (quick, identities)
    }

    /// The bytes the writer wrote before quick runs: each a plain entry.
    func asPlainEntries(_ quick: [QuickFinish], _ identities: OccurrenceTable, scale: TickScale) -> [UInt8] {
        var blob: [UInt8] = [JournalCodec.version]
        var previous: (UInt64, Int)?
        for q in quick {
            let identity = identities.identity(of: q.id)
            var p = PlainEntry(id: q.id, state: .succeeded, attempts: Int(q.attempts), identityHash: identity.hash,
                               occurrence: identity.occurrence, added: q.added, started: q.started, ended: q.ended,
                               valueLength: q.hasInteger ? PlainEntry.loneInteger : PlainEntry.noValues)
            p.integer = q.integer
            JournalCodec.encode(plain: p, scale: scale, values: UnsafeRawBufferPointer(start: nil, count: 0), previous: &previous,
                                into: &blob)
        }
        return blob
    }

    func asQuickRuns(_ quick: [QuickFinish], _ identities: OccurrenceTable, scale: TickScale, masking: Bool = false) -> [UInt8] {
        var row = RowBuilder(capacity: 1)
        row.reserve(1)
        row.write { $0.byte(JournalCodec.quickRunsVersion) }
        var previous: (UInt64, Int)?
        JournalCodec.encode(quick: quick, scale: scale, identities: identities, previous: &previous, masking: masking, into: &row)
        return row.array
    }

    @Test func quickRunsReadBackAsThePlainEntriesTheyReplace() throws {
        let (quick, identities) = mixedFinishes()
        let scale = TickScale.nanoseconds()
        let plain = asPlainEntries(quick, identities, scale: scale)
        let runs = asQuickRuns(quick, identities, scale: scale)
        let fromPlain = try #require(plain.withUnsafeBytes { JournalCodec.decode($0) })
        let fromRuns = try #require(runs.withUnsafeBytes { JournalCodec.decode($0) })
        #expect(fromRuns.count == quick.count)
        let differ = fromRuns.indices.first { "\(fromRuns[$0].task)" != "\(fromPlain[$0].task)" }
        #expect(differ == nil, "first different task: \(differ.map { "\(fromRuns[$0].task) read as \(fromPlain[$0].task)" } ?? "")")
        // spot checks, so the comparison cannot pass on two equal mistakes
        #expect(fromRuns[3].value == "[63]" && fromRuns[1].value == "[]")
        #expect(fromRuns[0].identity == .derived(0xfeed, occurrence: 1) && fromRuns[10].identity == .derived(0xfeed, occurrence: 6))
        #expect(fromRuns[9].identity == JournalEntry.Identity.none && fromRuns[59].attempts == 2)
        #expect(fromRuns.allSatisfy { $0.state == .succeeded && $0.name == nil && $0.started != nil && $0.ended != nil })
        #expect(runs.count * 10 < plain.count * 7, "\(runs.count) bytes as quick runs, \(plain.count) as plain entries")
        // While a secret is registered, integers go as plain entries (the
        // mask sees their text) and the rest still as runs.
        let masked = asQuickRuns(quick, identities, scale: scale, masking: true)
        let fromMasked = try #require(masked.withUnsafeBytes { JournalCodec.decode($0) })
        #expect(fromMasked.count == fromPlain.count)
        #expect(fromMasked.indices.allSatisfy { "\(fromMasked[$0].task)" == "\(fromPlain[$0].task)" })
        #expect(masked.count > runs.count && masked.count < plain.count, "\(masked.count) bytes")
    }

    /// A run of a loop's tasks (one body, nothing returned) is a few bytes
    /// a task: three small time deltas and the byte.
    @Test func aLoopsTasksTakeAFewBytesEach() throws {
        let quick = (1...10_000).map { i in
            QuickFinish(id: i, added: UInt64(i) * 1_200, started: UInt64(i) * 1_200 + 300_000, ended: UInt64(i) * 1_200 + 301_000)
        }
        let identities = OccurrenceTable()
        identities.count([AddedIdentity(id: 1, hash: 0xabc, count: 10_000)])
        let runs = asQuickRuns(quick, identities, scale: .nanoseconds())
        #expect(runs.count < 10_000 * 6, "\(runs.count) bytes")
        let d = try #require(runs.withUnsafeBytes { JournalCodec.decode($0) })
        #expect(d.count == 10_000 && d.last?.identity == .derived(0xabc, occurrence: 10_000) && d.last?.id == 10_000)
        #expect(abs((d.last?.ended ?? 0) - 0.012301) < 1e-9)
    }

    /// Cut anywhere inside, a row of quick runs is refused, not misread
    /// (the reader skips a row it cannot read); a count larger than the
    /// bytes could hold is refused before anything is made for it.
    @Test func aDamagedQuickRunIsRefused() {
        let (quick, identities) = mixedFinishes()
        let runs = asQuickRuns(Array(quick.prefix(40)), identities, scale: .nanoseconds())
        let whole = (runs.withUnsafeBytes { JournalCodec.decode($0) } ?? []).map { "\($0.task)" }
        #expect(whole.count == 40)
        // a cut between records reads as the records before it; any other is refused
        var read = 0, misread = 0
        for cut in 1..<runs.count {
            guard let d = Array(runs[..<cut]).withUnsafeBytes({ JournalCodec.decode($0) }) else { continue }
            read += 1
            if d.count >= 40 || d.map({ "\($0.task)" }) != Array(whole.prefix(d.count)) { misread += 1 }
        }
        #expect(misread == 0)
        #expect(read < 10, "\(read) of \(runs.count) cuts read")
        var huge: [UInt8] = [JournalCodec.quickRunsVersion, 1, JournalCodec.quickRunTag]
        huge += [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]
        #expect(huge.withUnsafeBytes { JournalCodec.decode($0) } == nil)
        // a version-2 row never holds one
        var old = runs
        old[0] = JournalCodec.version
        #expect(old.withUnsafeBytes { JournalCodec.decode($0) } == nil)
    }

    /// A fresh journal takes quick runs; one left at version 1 because
    /// another process held it locked as this one opened does not (an older
    /// tasker reading it would not know them), until it is upgraded.
    @Test func onlyAJournalAtItsNewVersionTakesQuickRuns() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try SQLiteJournalStore(directory: dir).takesQuickRuns)
        let other = try SQLiteDatabase(path: dir + "/" + Journal.fileName)
        try other.execute("PRAGMA user_version = 1")
        try other.execute("BEGIN IMMEDIATE")
        #expect(try SQLiteJournalStore(directory: dir, busyTimeout: 50).takesQuickRuns == false)
        try other.execute("ROLLBACK")
        #expect(try SQLiteJournalStore(directory: dir).takesQuickRuns)
        #expect(try JournalSchema.storedVersion(other) == JournalSchema.version)
    }
}

import CSQLite
import Foundation
import Synchronization
import Testing
import TaskerCore
@testable import TaskerJournal

/// Runs of quick finishes: a row of them reads back exactly as the plain
/// entries they replace, in fewer bytes; damaged rows are refused; a file
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
        JournalCodec.seal(&row)
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

    /// A row of quick runs damaged anywhere (a byte changed, cut short) is
    /// refused, not misread: its check fails. Varints read from damaged
    /// bytes mostly decode, as another value a resume would reuse.
    @Test func aDamagedRowOfQuickRunsIsRefused() throws {
        let (quick, identities) = mixedFinishes()
        let runs = asQuickRuns(Array(quick.prefix(40)), identities, scale: .nanoseconds())
        #expect(runs.withUnsafeBytes { JournalCodec.decode($0) }?.count == 40)
        var misread = 0
        for i in runs.indices {
            for bit in 0..<8 {
                var damaged = runs
                damaged[i] ^= 1 << bit
                if damaged.withUnsafeBytes({ JournalCodec.decode($0) }) != nil { misread += 1 }
            }
        }
        for cut in 1..<runs.count where Array(runs[..<cut]).withUnsafeBytes({ JournalCodec.decode($0) }) != nil { misread += 1 }
        #expect(misread == 0)
    }

    /// Rows whose check holds but whose numbers cannot be (as another
    /// tasker, or damage that kept the check, could leave them) are
    /// refused: a count past what the bytes hold, ids, occurrences and
    /// attempts past Int's range (which trapped the reader: `tasker runs`
    /// died on a damaged run it settled), a repeat with nothing before it.
    @Test func aRowOfImpossibleNumbersIsRefusedNotTrappedOn() {
        func sealed(_ bytes: [UInt8]) -> [UInt8] {
            var row = RowBuilder(capacity: 1)
            row.append(bytes)
            JournalCodec.seal(&row)
            return row.array
        }
        let huge: [UInt8] = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        let tag = JournalCodec.quickRunTag, v3 = JournalCodec.quickRunsVersion, v2 = JournalCodec.version
        let hash: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
        let rows: [(String, [UInt8])] = [
            ("a count past the bytes", sealed([v3, 1, tag] + huge)),
            ("a first id past Int", sealed([v3] + huge + [tag, 1, 0, 0, 0, 0])),
            ("an occurrence past Int", sealed([v3, 1, tag, 1, 2] + hash + huge + [0, 0, 0])),
            ("a repeat with nothing before it", sealed([v3, 1, tag, 1, 1, 0, 0, 0])),
            ("attempts past Int, version 2", [v2, 1, 3, 0] + huge + [0, 0]),
            ("an id past Int, version 2", [v2] + huge + [3, 0, 1, 0, 0]),
            ("an occurrence past Int, version 2", [v2, 1, 3 | 1 << 5, 0] + hash + huge + [1, 0, 0]),
            ("a dependency past Int, version 2", [v2, 1, 3, 1 << 2, 1, 0, 0, 1] + huge),
            ("no check", [v3, 1, tag, 1, 0, 0, 0, 0]),
        ]
        for (what, row) in rows {
            #expect(row.withUnsafeBytes { JournalCodec.decode($0) } == nil, "\(what)")
        }
        // the same shapes with possible numbers read
        #expect(sealed([v3, 1, tag, 1, 2] + hash + [1, 0, 0, 0]).withUnsafeBytes { JournalCodec.decode($0) }?.count == 1)
        #expect(([v2, 1, 3, 1 << 2, 1, 0, 0, 1, 5] as [UInt8]).withUnsafeBytes { JournalCodec.decode($0) }?.first?.after == [5])
    }

    /// The first byte of each of the run's log rows, in order.
    func rowVersions(_ dir: String) throws -> [UInt8] {
        let db = try SQLiteDatabase(path: dir + "/" + Journal.fileName, readOnly: true)
        let s = try db.prepare("SELECT data FROM task_log ORDER BY run, seq")
        var out: [UInt8] = []
        while try s.next() { out.append(s.withBlob(0) { $0.first ?? 0 }) }
        return out
    }

    /// Rows built while the store would not open yet (another process
    /// held it as the run began) were version 2, unchecked, in a file that
    /// takes checked rows: damage to them was reused. They get the check
    /// as they are written; so does a settled run's row of lost tasks.
    @Test func everyRowOfAFileThatTakesQuickRunsIsChecked() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let opens = Mutex(false)
        let w = JournalWriter(run: JournalRun(id: "r", pipeline: "/p.lua", args: [], vars: [:], started: 1, pid: 1)) {
            guard opens.withLock({ $0 }) else { throw SQLiteError(code: SQLITE_BUSY, message: "database is locked") }
            return try SQLiteJournalStore(directory: dir, busyTimeout: 100, checkpointsItself: true)
        }
        var added = AddedIdentities()
        added.append(AddedIdentity(id: 1, hash: 5, count: 10))
        w.submit(identities: &added)
        var quick = (1...10).map { QuickFinish(id: $0, added: 1, started: 2, ended: 3) }
        w.submit(quick: &quick, scale: .nanoseconds())
        w.flush()  // tried: the store did not open, the row waits as it was built
        opens.withLock { $0 = true }
        #expect(w.close(ended: 2, exitCode: 0, counts: [:], requests: []) == nil)
        #expect(try rowVersions(dir) == [JournalCodec.quickRunsVersion])
        let tasks = try JournalReader(directory: dir).tasks(of: "r")
        #expect(tasks.count == 10 && tasks.last?.identity == "0000000000000005#10")

        // a run that died with a task running: settling it writes a row
        let store = try SQLiteJournalStore(directory: dir)
        try store.insert(JournalRun(id: "s", pipeline: "/p.lua", args: [], vars: [:], started: 1, pid: 999_999_999))
        var running = JournalEntry(id: 1, state: .running)
        running.started = 0.5
        var row: [UInt8] = [JournalCodec.version]
        JournalCodec.encode(running, into: &row)
        try store.appendLog(run: "s", seq: 1, data: row)
        let settled = try JournalReader(directory: dir).tasks(of: "s")
        #expect(settled.first?.errorKind == "lost")
        #expect(try rowVersions(dir) == [JournalCodec.quickRunsVersion, JournalCodec.version, JournalCodec.quickRunsVersion])
    }

    /// An empty journal file (left by a process that died as it made it)
    /// read by `tasker runs`: its tables are made at the first version
    /// with tables, which an older tasker reads too.
    @Test func aReaderMakesAnEmptyFilesTablesAtTheOldestVersion() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: dir + "/" + Journal.fileName, contents: nil)
        #expect(try JournalReader(directory: dir).runs().isEmpty)
        let db = try SQLiteDatabase(path: dir + "/" + Journal.fileName)
        #expect(try JournalSchema.storedVersion(db) == JournalSchema.tablesFrom && JournalSchema.hasTables(db))
        #expect(try SQLiteJournalStore(directory: dir).takesQuickRuns)  // a writer upgrades it
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
        // reading (`tasker runs`, `show`) leaves the version as it is: an
        // older tasker still reads the file
        _ = try JournalReader(directory: dir).runs()
        #expect(try JournalSchema.storedVersion(other) == 1)
        try other.execute("BEGIN IMMEDIATE")
        #expect(try SQLiteJournalStore(directory: dir, busyTimeout: 50).takesQuickRuns == false)
        try other.execute("ROLLBACK")
        #expect(try SQLiteJournalStore(directory: dir).takesQuickRuns)
        #expect(try JournalSchema.storedVersion(other) == JournalSchema.version)
    }
}

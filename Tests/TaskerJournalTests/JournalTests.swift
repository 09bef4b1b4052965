import Foundation
import TaskerCore
import Testing
@testable import TaskerJournal

@Suite struct JournalTests {
    func tempDir() -> String { NSTemporaryDirectory() + "journal-\(UUID().uuidString)" }

    func run(_ id: String, pid: Int = Int(getpid()), started: Double = 1000) -> JournalRun {
        JournalRun(id: id, pipeline: "/p.lua", args: ["a"], vars: ["k": "v"], started: started, pid: pid)
    }

    /// A store that never answers (a connection attempt that hangs) holds
    /// the run's end no longer than its end wait and the slack: the end
    /// says what went unrecorded and why.
    @Test func theEndWaitsForAStoreThatNeverAnswersNoLongerThanItsBound() {
        let never = DispatchSemaphore(value: 0)
        let w = JournalWriter(run: run("hung"), endWait: 0.2, closeSlack: 0.3) {
            never.wait()
            throw SQLiteError(code: 1, message: "unreachable")
        }
        w.submit(JournalEntry(id: 1, state: .succeeded))
        let started = Date()
        let shortfall = w.close(ended: 2000, exitCode: 0, counts: [:], requests: [])
        let took = Date().timeIntervalSince(started)
        never.signal()
        #expect(took >= 0.4 && took < 5, "\(took) s")
        #expect(shortfall?.contains("the journal did not answer") == true, "\(shortfall ?? "nil")")
        #expect(shortfall?.contains("1 journal entry could not be recorded") == true, "\(shortfall ?? "nil")")
    }

    /// A run's writer folds the WAL into the file between writes
    /// (`maintain`), never in a commit: the commit that passed 1,000 pages
    /// was often the run's last, and the run's end waited for its syncs.
    /// No connection folds it in as it closes; a run's end empties a WAL
    /// past 1,000 pages.
    @Test func theWritersConnectionFoldsTheWALInWhenMaintainingAndEmptiesItAtALargeEnd() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/journal.db"
        func size(_ file: String) -> Int { ((try? FileManager.default.attributesOfItem(atPath: file))?[.size] as? Int) ?? 0 }
        let row = [UInt8](repeating: 7, count: 64 << 10)
        do {
            let store = try SQLiteJournalStore(directory: dir, checkpointsItself: true)
            try store.insert(run("r1"))
            for seq in 1...80 { try store.appendLog(run: "r1", seq: seq, data: row) }  // ~1,300 pages
            #expect(size(path) < 1 << 20, "no checkpoint in a commit: \(size(path)) bytes in the file")
            #expect(size(path + "-wal") > 5 << 20)
            store.maintain()
            #expect(size(path) > 5 << 20, "maintain folded the WAL in: \(size(path)) bytes")
            // a few more rows (the WAL written from its start again), then
            // the end: under 1,000 pages, nothing folded; the close neither
            let before = size(path)
            for seq in 81...90 { try store.appendLog(run: "r1", seq: seq, data: row) }
            try store.end(run: "r1", ended: 2, exitCode: 0, counts: [:], requests: [])
            #expect(size(path) == before)
        }
        #expect(size(path + "-wal") > 0, "the last connection's close left the WAL as it was")
        // a WAL past 1,000 pages at a run's end: folded in and emptied
        let store = try SQLiteJournalStore(directory: dir, checkpointsItself: true)
        try store.insert(run("r2"))
        for seq in 1...70 { try store.appendLog(run: "r2", seq: seq, data: row) }
        try store.end(run: "r2", ended: 3, exitCode: 0, counts: [:], requests: [])
        #expect(size(path + "-wal") == 0)
        let rows = try JournalReader(store: SQLiteJournalStore(directory: dir, create: false))
        #expect(try rows.runs().count == 2)
    }

    /// Runs too short to maintain the WAL, one process after another: the
    /// next process takes every frame a folded-in WAL holds for new, so
    /// only an end that empties it keeps it bounded (3,000 short runs grew
    /// it to 109 MB).
    @Test func aSeriesOfShortRunsKeepsTheWALBounded() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let row = [UInt8](repeating: 3, count: 30 << 10)
        var largest = 0
        for k in 1...400 {
            let store = try SQLiteJournalStore(directory: dir, checkpointsItself: true)
            try store.insert(run("s\(k)"))
            try store.appendLog(run: "s\(k)", seq: 1, data: row)
            try store.end(run: "s\(k)", ended: 2, exitCode: 0, counts: [:], requests: [])
            let wal = ((try? FileManager.default.attributesOfItem(atPath: dir + "/journal.db-wal"))?[.size] as? Int) ?? 0
            largest = max(largest, wal)
        }
        // ~12 pages a run: past 1,000 pages (4 MB and the frame headers) an end empties it
        #expect(largest < 6 << 20, "\(largest) bytes")
        #expect(try JournalReader(store: SQLiteJournalStore(directory: dir, create: false)).runs().count == 400)
    }

    /// A batch over 64 MiB (tasks returning large values faster than the
    /// writer commits them) is written, not given up: only what keeps
    /// waiting past that for two seconds is.
    @Test func aBatchOverTheWaitingLimitIsWrittenWhole() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let w = try JournalWriter(directory: dir, run: run("big"))
        let value = "[\"" + String(repeating: "v", count: 1 << 20) + "\"]"
        var entries = (1...70).map { i in
            var e = JournalEntry(id: i, state: .succeeded)
            e.value = value
            return e
        }
        w.submit(entries: &entries)
        #expect(w.close(ended: 2, exitCode: 0, counts: [:], requests: []) == nil)
        let tasks = try JournalReader(store: SQLiteJournalStore(directory: dir, create: false)).tasks(of: "big")
        #expect(tasks.count == 70)
    }

    /// A plain entry whose identity was handed over (occurrence -1) takes
    /// it from the writer's table by task id, hash and occurrence both,
    /// whatever hash it carries: the run's thread does not look it up.
    @Test func plainEntriesHandedOverTakeTheirIdentityByIDOnTheWriter() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (a, b): (UInt64, UInt64) = (0xaaaa, 0xbbbb)
        let w = try JournalWriter(directory: dir, run: run("ids"))
        var added = AddedIdentities()
        for x in [AddedIdentity(id: 1, hash: a, count: 3), AddedIdentity(id: 4, hash: b), AddedIdentity(id: 5, hash: a)] {
            added.append(x)
        }
        w.submit(identities: &added)
        // finished out of add order; task 6 was never handed over
        var plain = [5, 2, 1, 4, 3, 6].map {
            PlainEntry(id: $0, state: .succeeded, attempts: 1, identityHash: 0xbad, occurrence: -1, added: 1, started: 2, ended: 3)
        }
        var values: [UInt8] = []
        w.submit(plain: &plain, values: &values, scale: .nanoseconds())
        #expect(w.close(ended: 2, exitCode: 0, counts: [:], requests: []) == nil)
        let tasks = try JournalReader(store: SQLiteJournalStore(directory: dir, create: false)).tasks(of: "ids")
        let hex = { (h: UInt64) in String(repeating: "0", count: 12) + String(h, radix: 16) }
        #expect(tasks.map(\.identity) == [hex(a), hex(a) + "#2", hex(a) + "#3", hex(b), hex(a) + "#4", nil])
    }

    /// A task after 200,000 others (a sum over a whole run) reads back
    /// whole. Its list was appended to through the entry's boxed fields,
    /// each append copying it: 3 s to show such a run, and a resume of
    /// one gave up as if the journal were locked.
    @Test func aTaskAfterHundredsOfThousandsReadsBackWhole() throws {
        var e = JournalEntry(id: 200_001, state: .succeeded)
        e.after = Array(1...200_000)
        e.tags = (1...1_000).map { "t\($0)" }
        var blob: [UInt8] = [JournalCodec.version]
        JournalCodec.encode(e, into: &blob)
        let d = try #require(blob.withUnsafeBytes { JournalCodec.decode($0) })
        #expect(d.first?.after == e.after && d.first?.tags == e.tags)
    }

    @Test func entriesRoundTripThroughTheCodec() {
        var e = JournalEntry(id: 300, state: .failed)
        e.identity = .derived(0xdead_beef_0000_0001, occurrence: 3)
        e.name = "déploy"
        e.attempts = 2
        e.added = 0.5
        e.started = 1.25
        e.ended = 2.000001
        e.held = 0.1
        e.tags = ["a", "b"]
        e.after = [1, 299]
        e.error = "boom"
        e.errorKind = "timeout"
        e.attemptLog = [JournalAttempt(start: 1.25, end: 1.5, error: "x", kind: "error"), JournalAttempt(start: 1.7, end: 2)]
        var plain = JournalEntry(id: 1, state: .succeeded)
        plain.identity = .explicit("step-1")
        plain.value = "[1,\"two\"]"
        plain.reused = true
        var bytes: [UInt8] = []
        JournalCodec.encode([e, plain], into: &bytes)
        let back = bytes.withUnsafeBytes { JournalCodec.decode($0) }
        let d = try! #require(back)
        #expect(d.count == 2)
        #expect(d[0].identity == e.identity && d[0].name == "déploy" && d[0].state == .failed)
        #expect(d[0].tags == e.tags && d[0].after == e.after && d[0].error == "boom" && d[0].errorKind == "timeout")
        #expect(d[0].attemptLog == e.attemptLog && d[0].held == 0.1 && d[0].ended == 2.000001)
        #expect(d[1].identity.text == "step-1" && d[1].value == plain.value && d[1].reused && d[1].name == nil)
        #expect(d[0].identity.text == "deadbeef00000001#3")
        // a cut blob is refused, not misread
        #expect(bytes.dropLast(3).withUnsafeBytes { JournalCodec.decode(UnsafeRawBufferPointer(rebasing: $0[...])) } == nil)
    }

    @Test func everyStateAndKindRoundTripsAndVersionOneBlobsStillRead() throws {
        let states: [JournalEntry.State] = [.running, .succeeded, .failed, .cancelled, .skipped]
        let kinds: [JournalEntry.Kind] = [.task, .group, .schedule]
        for state in states {
            for kind in kinds {
                var e = JournalEntry(id: 5, state: state)
                e.kind = kind
                e.name = "n"
                var bytes: [UInt8] = []
                JournalCodec.encode([e], into: &bytes)
                let d = try #require(bytes.withUnsafeBytes { JournalCodec.decode($0) })
                #expect(d.first?.state == state && d.first?.kind == kind && d.first?.name == "n")
                // The same entry as version 1 wrote it: two bits of state, two of kind.
                guard state != .skipped else { continue }
                bytes[0] = 1
                bytes[2] = (bytes[2] & 0xF0) | state.rawValue | (kind.rawValue << 2)
                let old = try #require(bytes.withUnsafeBytes { JournalCodec.decode($0) })
                #expect(old.first?.state == state && old.first?.kind == kind && old.first?.name == "n")
            }
        }
    }

    @Test func plainEntriesRepeatingAnIdentityTakeFewBytes() {
        var blob: [UInt8] = [JournalCodec.version]
        var previous: (UInt64, Int)?
        let values = Array("[][42]".utf8)
        for i in 1...100 {
            let p = PlainEntry(id: i, state: .succeeded, attempts: 1, identityHash: 0xabcdef, occurrence: i,
                               added: UInt64(1_000_000 * i), started: UInt64(500_000_000 + 1_000_000 * i),
                               ended: UInt64(600_000_000 + 1_000_000 * i), valueStart: i == 7 ? 2 : 0, valueLength: i == 7 ? 4 : 2)
            values.withUnsafeBytes { JournalCodec.encode(plain: p, scale: .nanoseconds(), values: $0, previous: &previous, into: &blob) }
        }
        var other = JournalEntry(id: 101, state: .failed)
        other.error = "boom"
        JournalCodec.encode(other, into: &blob)
        #expect(blob.count < 100 * 20)  // a full identity alone would be 9 bytes more each
        let d = try! #require(blob.withUnsafeBytes { JournalCodec.decode($0) })
        #expect(d.count == 101)
        #expect(d[41].identity == .derived(0xabcdef, occurrence: 42) && d[41].value == "[]")
        #expect(d[6].value == "[42]")
        #expect(abs((d[41].started ?? 0) - 0.542) < 1e-6 && abs((d[41].ended ?? 0) - 0.642) < 3e-6)
        #expect(d[100].error == "boom" && d[100].identity == .none)
    }

    /// The writer builds a row of thousands of entries in one buffer that
    /// grows as it goes: the bytes are those of each entry encoded alone,
    /// values short and long (past the inline copy's 16 bytes), names too.
    @Test func aRowOfManyPlainEntriesGrowsAndReadsBack() throws {
        var text = ""
        var spans: [(Int32, Int32)] = []
        for k in 0..<40 {
            let v = "[\"" + String(repeating: "v", count: k) + "\"]"
            spans.append((Int32(text.utf8.count), Int32(v.utf8.count)))
            text += v
        }
        let values = Array(text.utf8)
        var row = RowBuilder(capacity: 1)
        var alone: [UInt8] = []
        var previousInRow: (UInt64, Int)?
        var previousAlone: (UInt64, Int)?
        for i in 1...5_000 {
            var p = PlainEntry(id: i, state: .succeeded, attempts: 1 + i % 3, identityHash: UInt64(i / 7), occurrence: i % 7 + 1,
                               added: UInt64(i) * 1_000, started: UInt64(i) * 2_000, ended: UInt64(i) * 3_000 + 17)
            (p.valueStart, p.valueLength) = spans[i % spans.count]
            if i % 5 == 0 { (p.nameStart, p.nameLength) = spans[(i / 5) % spans.count] }
            values.withUnsafeBytes { v in
                JournalCodec.encode(plain: p, scale: .nanoseconds(), values: v, previous: &previousInRow, masking: false, into: &row)
                JournalCodec.encode(plain: p, scale: .nanoseconds(), values: v, previous: &previousAlone, into: &alone)
            }
        }
        let built = row.array
        #expect(built == alone)
        let d = try #require(([JournalCodec.version] + built).withUnsafeBytes { JournalCodec.decode($0) })
        #expect(d.count == 5_000)
        #expect(d[38].value == "[\"" + String(repeating: "v", count: 39) + "\"]" && d[38].name == nil)
        #expect(d[4].name == "[\"v\"]" && d[4].attempts == 3)
    }

    /// The commonest entry's short path writes the bytes the general one
    /// does: identities repeated or not, times across varint lengths,
    /// values from empty to 127 bytes, several attempts.
    @Test func theCommonPlainEntryIsWrittenAsTheGeneralPathWritesIt() {
        let values = Array(String(repeating: "x", count: 127).utf8)
        var common = RowBuilder(capacity: 1)
        var general = RowBuilder(capacity: 1)
        var previousCommon: (UInt64, Int)?
        var previousGeneral: (UInt64, Int)?
        let scale = TickScale.nanoseconds()
        for i in 1...3_000 {
            let added = UInt64(i) * 977 &* UInt64(1 + i % 5) &* 1_000_003
            let p = PlainEntry(id: i * (i % 3 == 0 ? 9_973 : 1), state: i % 11 == 0 ? .failed : .succeeded, attempts: 1 + i % 4,
                               identityHash: UInt64(i / 4), occurrence: i % 9 == 0 ? 0 : i % 4 + 1,
                               added: added, started: added + UInt64(i % 17) * 131_071, ended: added + UInt64(i) * 7_919_000 + 1)
            values.withUnsafeBytes { all in
                let value = UnsafeRawBufferPointer(rebasing: all[0..<(i % 128)])
                JournalCodec.encodeCommon(plain: p, value: value, scale: scale, previous: &previousCommon, into: &common)
                JournalCodec.encodeAny(plain: p, value: value, scale: scale, previous: &previousGeneral, values: all,
                                       masking: false, into: &general)
            }
        }
        #expect(common.array == general.array)
        #expect(common.count > 3_000 * 8)
    }

    /// A task named by its spec is a plain entry too: its name (in the
    /// values buffer) reads back, whether its identity is written or is the
    /// one before it one occurrence later.
    @Test func namedPlainEntriesKeepTheirNames() throws {
        var blob: [UInt8] = [JournalCodec.version]
        var previous: (UInt64, Int)?
        let values = Array("deploy web-1[\"ok\"]ünï".utf8)
        for i in 1...3 {
            var p = PlainEntry(id: i, state: .succeeded, attempts: 1, identityHash: 5, occurrence: i, added: 1, started: 2, ended: 3)
            if i != 2 {
                p.nameStart = i == 1 ? 0 : 18
                p.nameLength = i == 1 ? 12 : Int32(values.count - 18)
            }
            p.valueStart = 12
            p.valueLength = 6
            values.withUnsafeBytes { JournalCodec.encode(plain: p, scale: .nanoseconds(), values: $0, previous: &previous, into: &blob) }
        }
        let d = try #require(blob.withUnsafeBytes { JournalCodec.decode($0) })
        #expect(d.map(\.name) == ["deploy web-1", nil, "ünï"])
        #expect(d.map(\.value) == ["[\"ok\"]", "[\"ok\"]", "[\"ok\"]"])
        #expect(d.map(\.identity) == [.derived(5, occurrence: 1), .derived(5, occurrence: 2), .derived(5, occurrence: 3)])
    }

    /// No values and a lone integer reach the writer as forms, not bytes:
    /// it writes them as the JSON the values buffer would have held.
    @Test func plainEntriesWithoutValueBytesAreWrittenAsTheirJSON() throws {
        let integers: [Int64] = [0, 9, 10, -1, -10, 1_234_567, .max, .min]
        func blob(storing: Bool) -> [UInt8] {
            var blob: [UInt8] = [JournalCodec.version]
            var previous: (UInt64, Int)?
            for (i, n) in (integers.map { Optional($0) } + [nil]).enumerated() {
                var p = PlainEntry(id: i + 1, state: .succeeded, attempts: 1, identityHash: 7, occurrence: i + 1,
                                   added: 1, started: 2, ended: 3)
                if storing {
                    p.valueLength = n == nil ? PlainEntry.noValues : PlainEntry.loneInteger
                    p.integer = n ?? 0
                }
                JournalCodec.encode(plain: p, scale: .nanoseconds(), values: UnsafeRawBufferPointer(start: nil, count: 0),
                                    previous: &previous, into: &blob)
            }
            return blob
        }
        let stored = blob(storing: true)
        let d = try #require(stored.withUnsafeBytes { JournalCodec.decode($0) })
        let texts = integers.map { "[\($0)]" } + ["[]"]
        #expect(d.map(\.value) == texts)
        #expect(d.last?.identity == .derived(7, occurrence: 9))
        // Only the values (and their lengths) take bytes beyond the bare
        // entries: the repeated identity is still written once.
        #expect(stored.count - blob(storing: false).count == texts.reduce(0) { $0 + $1.utf8.count + 1 })
    }

    /// The tables exactly as releases before schema versions made them
    /// (`user_version` 0): a journal they wrote must open, read and record.
    static let unversionedSchema = """
        CREATE TABLE runs(
            id TEXT PRIMARY KEY, pipeline TEXT NOT NULL, args TEXT NOT NULL, vars TEXT NOT NULL,
            started REAL NOT NULL, ended REAL, exit_code INTEGER, counts TEXT, pid INTEGER,
            resumed_from TEXT);
        CREATE INDEX runs_by_pipeline ON runs(pipeline, id);
        CREATE TABLE task_log(
            run TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL,
            PRIMARY KEY(run, seq)) WITHOUT ROWID;
        CREATE TABLE requests(
            run TEXT NOT NULL, host TEXT NOT NULL, requests INTEGER NOT NULL, retries INTEGER NOT NULL,
            failures INTEGER NOT NULL, PRIMARY KEY(run, host)) WITHOUT ROWID;
        """

    @Test func aJournalFromBeforeSchemaVersionsIsUpgradedInPlace() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        do {
            let old = try SQLiteDatabase(path: dir + "/" + Journal.fileName)
            try old.execute("PRAGMA journal_mode=WAL")
            try old.execute(Self.unversionedSchema)
            try old.execute("""
                INSERT INTO runs VALUES('old1', '/p.lua', '["a"]', '{"k":"v"}', 1000, 1002, 0, '{"succeeded":1}', 1, NULL)
                """)
            var e = JournalEntry(id: 1, state: .succeeded)
            e.identity = .explicit("step")
            e.value = "[42]"
            e.ended = 1
            var blob: [UInt8] = []
            JournalCodec.encode(e, into: &blob)
            let insert = try old.prepare("INSERT INTO task_log(run, seq, data) VALUES('old1', 1, ?)")
            try insert.run(bindingInPlace: [JournalCodec.version] + blob, at: 1)
            #expect(try JournalSchema.storedVersion(old) == 0)
        }
        // A new run is recorded beside the old one; the old one reads back.
        let w = try JournalWriter(directory: dir, run: run("new1", started: 2000))
        #expect(w.close(ended: 2001, exitCode: 0, counts: [:], requests: []) == nil)
        let r = try JournalReader(directory: dir)
        #expect(try r.runs().map(\.id) == ["old1", "new1"].sorted(by: >))
        let tasks = try r.tasks(of: "old1")
        #expect(tasks.map(\.name) == ["task-1"] && tasks.first?.value == "[42]", "\(tasks)")
        let check = try SQLiteDatabase(path: dir + "/" + Journal.fileName, readOnly: true)
        #expect(try JournalSchema.storedVersion(check) == JournalSchema.version)
    }

    /// A version-0 journal another process keeps locked is read as it is
    /// (its tables are this build's), not waited for; a version number no
    /// tasker writes is refused; a current journal whose tables were
    /// dropped gets them back.
    @Test func oddJournalsOpenOrAreRefusedWithTheReason() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let w = try JournalWriter(directory: dir, run: run("r1"))
        #expect(w.close(ended: 1001, exitCode: 0, counts: [:], requests: []) == nil)
        let path = dir + "/" + Journal.fileName
        let other = try SQLiteDatabase(path: path)
        try other.execute("PRAGMA user_version = 0")
        try other.execute("BEGIN IMMEDIATE")
        let locked = try JournalReader(store: SQLiteJournalStore(directory: dir, create: false, busyTimeout: 50))
        #expect(try locked.runs().map(\.id) == ["r1"])
        try other.execute("ROLLBACK")

        try other.execute("PRAGMA user_version = -1")
        #expect {
            _ = try JournalReader(directory: dir)
        } throws: { error in
            "\(error)".contains("schema version -1, which no tasker writes")
        }

        try other.execute("PRAGMA user_version = \(JournalSchema.version)")
        try other.execute("DROP TABLE requests")
        _ = try JournalReader(directory: dir)
        #expect(try JournalSchema.hasTables(other))
    }

    /// A journal another process keeps locked for good (SQLite's exclusive
    /// locking mode) is given up on after the busy timeout, with the reason:
    /// `runs`, `show` and a resume's read tried again 20 times, each waiting
    /// out the timeout (100 s with its default 5 s).
    @Test func aJournalLockedForGoodIsGivenUpOnAfterTheBusyTimeout() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = try JournalReader(directory: dir, create: true)
        let other = try SQLiteDatabase(path: dir + "/" + Journal.fileName)
        try other.execute("PRAGMA locking_mode = EXCLUSIVE")
        try other.execute("BEGIN EXCLUSIVE")
        defer { try? other.execute("ROLLBACK") }
        let start = Date()
        #expect {
            _ = try JournalReader(store: SQLiteJournalStore(directory: dir, create: false, busyTimeout: 1000))
        } throws: { error in
            "\(error)".contains("is locked by another process")
        }
        #expect(Date().timeIntervalSince(start) < 6, "gave up after \(Date().timeIntervalSince(start)) s")
    }

    @Test func aJournalFromANewerTaskerIsRefusedWithTheReason() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = try JournalReader(directory: dir, create: true)
        let db = try SQLiteDatabase(path: dir + "/" + Journal.fileName)
        try db.execute("PRAGMA user_version = \(JournalSchema.version + 1)")
        #expect {
            _ = try JournalReader(directory: dir)
        } throws: { error in
            "\(error)".contains("written by a newer tasker (schema version \(JournalSchema.version + 1)")
        }
        // A run still runs; its writer says at the end why nothing was recorded.
        let w = try JournalWriter(directory: dir, run: run("r"))
        let failure = w.close(ended: 1001, exitCode: 0, counts: [:], requests: [])
        #expect(failure?.contains("written by a newer tasker") == true, "\(failure ?? "nil")")
    }

    @Test func writesARunAndItsTasksAndReadsThemBack() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let w = try JournalWriter(directory: dir, run: run("r1"))
        var one = JournalEntry(id: 1, state: .running)
        one.identity = .explicit("x")
        w.submit(one)
        one.state = .succeeded
        one.value = "[1]"
        w.submit(one)
        var two = JournalEntry(id: 2, state: .running)
        two.started = 0.2
        w.submit(two)
        #expect(w.close(ended: 1001, exitCode: 1, counts: ["succeeded": 1],
                        requests: [JournalHostRequests(host: "h:1", requests: 3, retries: 1)]) == nil)

        let r = try JournalReader(directory: dir)
        let runs = try r.runs()
        #expect(runs.map(\.id) == ["r1"])
        #expect(runs[0].args == ["a"] && runs[0].vars == ["k": "v"] && runs[0].exitCode == 1 && runs[0].duration == 1)
        let tasks = try r.tasks(of: "r1")
        #expect(tasks.map(\.name) == ["task-1", "task-2"])
        #expect(tasks[0].state == "succeeded" && tasks[1].state == "running")
        #expect(try r.reusable(from: "r1") == ["x": "[1]"])
        #expect(try r.requests(of: "r1").first?.retries == 1)
        var st = stat()
        #expect(stat(dir + "/journal.db", &st) == 0 && st.st_mode & 0o777 == 0o600)
    }

    @Test func aRunWhoseProcessDiedHasItsRunningTasksLost() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // pid 0 is never a live tasker: this run died (it never closed).
        let w = try JournalWriter(directory: dir, run: run("dead", pid: 0, started: 5))
        var a = JournalEntry(id: 1, state: .running)
        a.identity = .explicit("a")
        a.started = 1
        w.submit(a)
        var b = JournalEntry(id: 2, state: .succeeded)
        b.identity = .explicit("b")
        w.submit(b)
        w.flush()  // committed, but never closed: the process "died"
        let r = try JournalReader(directory: dir)
        let t = try r.tasks(of: "dead")
        #expect(t.count == 2)
        #expect(t[0].state == "failed" && t[0].errorKind == "lost")
        #expect(try r.run("dead")?.exitCode == -1)
        #expect(try r.reusable(from: "dead") == ["b": "[]"])
    }

    @Test func pruneKeepsTheNewestRuns() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for i in 1...5 {
            let w = try JournalWriter(directory: dir, run: run("r\(i)", started: Double(i)))
            w.submit(JournalEntry(id: 1, state: .succeeded))
            w.close(ended: Double(i) + 1, exitCode: 0, counts: [:], requests: [])
        }
        let r = try JournalReader(directory: dir)
        #expect(try r.prune(keep: 2) == 3)
        #expect(try r.runs().map(\.id) == ["r5", "r4"])
        #expect(try r.tasks(of: "r1").isEmpty)
    }

    @Test func stateDirectoryFollowsTheOverrideThenTheEnvironment() {
        #expect(Journal.directory(override: "/x", environment: ["TASKER_STATE_DIR": "/y"]) == "/x")
        #expect(Journal.directory(override: nil, environment: ["TASKER_STATE_DIR": "/y", "XDG_STATE_HOME": "/z"]) == "/y")
        #expect(Journal.directory(override: nil, environment: ["XDG_STATE_HOME": "/z", "HOME": "/h"]) == "/z/tasker")
        #expect(Journal.directory(override: nil, environment: ["HOME": "/h"]) == "/h/.local/state/tasker")
    }
}

import Foundation
import Testing

/// A journal whose rows were damaged on disk, through the built CLI: what
/// cannot be read is said, never misread or crashed on.
@Suite struct JournalDamageCLITests {
    /// Runs python3 on the state's journal file (`sys.argv[1]`).
    func python(_ code: String, on s: Scratch) async throws -> CLIResult {
        try await shell("python3 -c '\(code)' .tasker-state/journal.db", in: s.dir)
    }

    /// A byte changed inside a row of a run's tasks: `show` and a resume
    /// say that rows could not be read; the resume runs those tasks again
    /// and every value is right (a changed varint read as another value
    /// was reused before rows were checked).
    @Test func aDamagedRowIsSaidAndItsTasksRunAgain() async throws {
        let s = try Scratch(["p.lua": """
            local hs = {}
            for i = 1, 3000 do hs[i] = tasker.add(function() return i * 7 end) end
            local sum = 0
            for _, h in ipairs(hs) do sum = sum + h:await() end
            print("sum", sum)
            """])
        defer { s.cleanup() }
        let first = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        #expect(first.status == 0 && first.stdout.contains("sum\t31510500"), "\(first.stdout)\(first.stderr)")
        let damaged = try await python("""
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1])
            seq, data = c.execute("SELECT seq, data FROM task_log ORDER BY length(data) DESC LIMIT 1").fetchone()
            b = bytearray(data); b[len(b) // 2] ^= 0x10
            c.execute("UPDATE task_log SET data = ? WHERE seq = ?", (bytes(b), seq)); c.commit()
            print("damaged", seq)
            """, on: s)
        #expect(damaged.stdout.contains("damaged"), "\(damaged.stderr)")
        let show = try await tasker(["show", "last"], in: s.dir)
        #expect(show.status == 0)
        #expect(show.stderr.contains("1 of its journal rows could not be read (the file is damaged)"), "\(show.stderr)")
        let resumed = try await tasker(["run", "--no-progress", "--resume", "p.lua"], in: s.dir)
        #expect(resumed.status == 0 && resumed.stdout.contains("sum\t31510500"), "\(resumed.stdout)\(resumed.stderr)")
        #expect(resumed.stderr.contains("could not be read"), "\(resumed.stderr)")
        #expect(!resumed.stderr.contains("(3000 reused)"), "\(resumed.stderr)")
    }

    /// Numbers no tasker writes in a row of a run that died (ids and
    /// attempts past Int's range): `runs` settles the run and lists it,
    /// `show` lists what it can (the reader trapped on them, and `runs`
    /// with it, since it reads a dead run to settle it).
    @Test func impossibleNumbersInADeadRunAreNotCrashedOn() async throws {
        let s = try Scratch(["p.lua": "tasker.add(function() return 1 end)"])
        defer { s.cleanup() }
        _ = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        let damaged = try await python("""
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1])
            run = c.execute("SELECT id FROM runs").fetchone()[0]
            huge = bytes([0xff] * 9 + [0x01])
            c.execute("INSERT INTO task_log VALUES(?, 99, ?)", (run, bytes([2, 1, 3, 0]) + huge + bytes([0, 0])))
            c.execute("INSERT INTO task_log VALUES(?, 100, ?)", (run, bytes([2]) + huge + bytes([3, 0, 1, 0, 0])))
            c.execute("UPDATE runs SET ended = NULL, exit_code = NULL, pid = 999999"); c.commit()
            print("damaged")
            """, on: s)
        #expect(damaged.stdout.contains("damaged"), "\(damaged.stderr)")
        let runs = try await tasker(["runs"], in: s.dir)
        #expect(runs.status == 0, "\(runs.stderr)")
        #expect(runs.stdout.contains("died"), "\(runs.stdout)")
        let show = try await tasker(["show", "last"], in: s.dir)
        #expect(show.status == 0 && show.stdout.contains("task-1"), "\(show.stdout)\(show.stderr)")
        #expect(show.stderr.contains("2 of its journal rows could not be read"), "\(show.stderr)")
    }
}

import Foundation
import Testing

/// A failed command's real error survives: its stderr's last lines are in
/// the error, and what each task's processes wrote is in the journal, for
/// `tasker show RUN --task NAME --output` and the report.
@Suite struct TaskOutputCLITests {
    static let pipeline = """
        tasker.add{name = "tests", run = function()
          tasker.sh([[echo "collected 120 items" >&2
        for i in $(seq 1 30); do echo "progress $i" >&2; done
        echo "FAILED test_api.py::test_login - AssertionError: 401 != 200" >&2
        echo "stdout of the tests"
        exit 1]])
        end}
        tasker.add{name = "build", run = function() tasker.exec{"echo", "built ok"} end}
        tasker.add{name = "quiet", run = function() end}
        """

    @Test func theEndOfAFailedCommandsStderrIsInItsErrorAndItsOutputIsRecorded() async throws {
        let s = try Scratch(["p.lua": Self.pipeline])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--report", "r.html", "p.lua"], in: s.dir)
        #expect(r.status == 1)
        let lines = r.stderr.split(separator: "\n").map(String.init)
        let failed = try #require(lines.firstIndex { $0.hasPrefix("  failed tests: ") })
        // the telling line first, then the last 20 lines of stderr, indented
        #expect(lines[failed].hasPrefix("  failed tests: p.lua:2: exec: '/bin/sh -c echo \"collected 120 items\" >&2 …' exited"))
        #expect(lines[failed].hasSuffix("exited with code 1: FAILED test_api.py::test_login - AssertionError: 401 != 200 (check = false returns the code instead)"),
                "\(r.stderr)")
        #expect(lines[failed + 1] == "      stderr, its last 20 lines:")
        #expect(lines[failed + 2] == "      progress 12")
        #expect(lines[failed + 21] == "      FAILED test_api.py::test_login - AssertionError: 401 != 200")

        let task = try await tasker(["show", "last", "--task", "tests"], in: s.dir)
        #expect(task.status == 0)
        #expect(task.stdout.contains("  state     failed\n"), "\(task.stdout)")
        #expect(task.stdout.contains("\n            progress 30\n"), "\(task.stdout)")

        let output = try await tasker(["show", "last", "--output"], in: s.dir)  // every failed task's
        #expect(output.stdout.hasPrefix("== task 1 tests (failed)\n$ /bin/sh -c echo \"collected 120 items\""), "\(output.stdout)")
        for expected in ["stdout of the tests\n", "collected 120 items\nprogress 1\n", "progress 30\nFAILED", "(exit code 1)\n"] {
            #expect(output.stdout.contains(expected), "no '\(expected)' in \(output.stdout)")
        }
        #expect(!output.stdout.contains("built ok"))
        let build = try await tasker(["show", "last", "--task", "build", "--output"], in: s.dir)
        #expect(build.stdout == "== task 2 build (succeeded)\n$ echo built ok\nbuilt ok\n")
        let quiet = try await tasker(["show", "last", "--task", "3", "--output"], in: s.dir)
        #expect(quiet.stdout.contains("(no output recorded"))
        let missing = try await tasker(["show", "last", "--task", "nope"], in: s.dir)
        #expect(missing.status == 1 && missing.stderr.contains("has no task named 'nope'"))

        let html = try String(contentsOf: s.dir.appendingPathComponent("r.html"), encoding: .utf8)
        #expect(html.contains("<details><summary>output"))
        #expect(html.contains("AssertionError: 401 != 200\n(exit code 1)\n</pre></details>"))
    }

    @Test func aTasksOutputIsKeptUpToItsLastMiB() async throws {
        let s = try Scratch(["p.lua": """
            tasker.add{name = "chatty", run = function()
              tasker.sh("i=0; while [ $i -lt 40000 ]; do echo \\"line $i of a long and chatty build log...\\"; i=$((i+1)); done; echo the-end")
            end}
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        #expect(r.status == 0)
        let output = try await tasker(["show", "last", "--task", "chatty", "--output"], in: s.dir)
        #expect(output.stdout.utf8.count <= (1 << 20) + 200 && output.stdout.utf8.count > (1 << 20) - 200, "\(output.stdout.utf8.count)")
        #expect(output.stdout.hasSuffix("line 39999 of a long and chatty build log...\nthe-end\n"))
    }
}

import Foundation
import Testing
@testable import TaskerJournal

@Suite struct JournalTests {
    func tempDir() -> String {
        let d = NSTemporaryDirectory() + "journal-\(UUID().uuidString)"
        return d
    }

    @Test func writesRunsAndTasksInOrderAndReadsThemBack() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let w = try JournalWriter(directory: dir)
        var run = JournalRun(id: "r1", pipeline: "/p.lua", args: ["a"], vars: ["k": "v"], started: 1000, pid: Int(getpid()))
        w.submit(.runStarted(run))
        w.submit(.taskStarted(run: "r1", id: 1, identity: "x", name: "one", added: 0, started: 0.1))
        var t = JournalTask(id: 1, name: "one", state: "succeeded")
        t.identity = "x"
        t.value = "[1,\"two\"]"
        t.started = 0.1
        t.ended = 0.3
        t.attempts = 2
        t.attemptLog = [JournalAttempt(start: 0.1, end: 0.2, error: "boom", kind: "error"), JournalAttempt(start: 0.25, end: 0.3)]
        w.submit(.taskFinished(run: "r1", t))
        w.submit(.taskStarted(run: "r1", id: 2, identity: "y", name: "two", added: 0, started: 0.2))
        run.ended = 1001
        w.submit(.runEnded(id: "r1", ended: 1001, exitCode: 1, counts: ["succeeded": 1],
                           requests: [JournalHostRequests(host: "h:1", requests: 3, retries: 1, failures: 0)]))
        #expect(w.close() == nil)

        let r = try JournalReader(directory: dir)
        let runs = try r.runs()
        #expect(runs.map(\.id) == ["r1"])
        #expect(runs[0].args == ["a"] && runs[0].vars == ["k": "v"] && runs[0].exitCode == 1)
        let tasks = try r.tasks(of: "r1")
        #expect(tasks.map(\.name) == ["one", "two"])
        #expect(tasks[0].attemptLog.count == 2 && tasks[0].attemptLog[0].error == "boom")
        #expect(tasks[1].state == "running")  // started, never finished, but its run is alive (this process)
        #expect(try r.reusable(from: "r1") == ["x": "[1,\"two\"]"])
        #expect(try r.requests(of: "r1").first?.retries == 1)
        var st = stat()
        #expect(stat(dir + "/journal.db", &st) == 0 && st.st_mode & 0o777 == 0o600)
    }

    @Test func aRunWhoseProcessDiedHasItsRunningTasksLost() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let w = try JournalWriter(directory: dir)
        // pid 0 is never a live tasker: this run died.
        w.submit(.runStarted(JournalRun(id: "dead", pipeline: "/p.lua", args: [], vars: [:], started: 5, pid: 0)))
        w.submit(.taskStarted(run: "dead", id: 1, identity: "a", name: "a", added: 0, started: 1))
        #expect(w.close() == nil)
        let r = try JournalReader(directory: dir)
        let t = try r.tasks(of: "dead")
        #expect(t[0].state == "failed" && t[0].errorKind == "lost")
        #expect(try r.run("dead")?.ended != nil)
        #expect(try r.reusable(from: "dead").isEmpty)
    }

    @Test func pruneKeepsTheNewestRuns() throws {
        let dir = tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let w = try JournalWriter(directory: dir)
        for i in 1...5 {
            w.submit(.runStarted(JournalRun(id: "r\(i)", pipeline: "/p", args: [], vars: [:], started: Double(i), pid: Int(getpid()))))
            w.submit(.taskFinished(run: "r\(i)", JournalTask(id: 1, name: "t", state: "succeeded")))
            w.submit(.runEnded(id: "r\(i)", ended: Double(i) + 1, exitCode: 0, counts: [:], requests: []))
        }
        w.close()
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

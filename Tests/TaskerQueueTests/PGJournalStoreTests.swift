import Foundation
import PostgresTestServer
import TaskerJournal
import Testing
@testable import TaskerQueue

/// The run journal in PostgreSQL: what the file journal keeps, read back.
@Suite struct PGJournalStoreTests {
    let url: String

    init() async throws {
        url = try await PostgresTestServer.freshDatabase().url
    }

    func run(_ id: String, pid: Int = Int(getpid())) -> JournalRun {
        JournalRun(id: id, pipeline: "/p.lua", args: ["a", "b \"c\""], vars: ["k": "v"], started: 1000, pid: pid)
    }

    /// A whole run through the writer, as `tasker run --store` records it.
    func record(_ id: String, _ entries: [JournalEntry]) {
        let url = self.url
        let w = JournalWriter(run: run(id)) { try PGJournalStore(url: url) }
        for e in entries { w.submit(e) }
        #expect(w.close(ended: 1002, exitCode: 0, counts: ["succeeded": entries.count],
                        requests: [JournalHostRequests(host: "h:1", requests: 2, retries: 1)]) == nil)
    }

    @Test func aRunAndItsTasksComeBackAndPruneRemovesThem() throws {
        var one = JournalEntry(id: 1, state: .succeeded)
        one.identity = .explicit("x")
        one.value = "[1, \"two\"]"
        var two = JournalEntry(id: 2, state: .failed)
        two.error = "boom"
        record("r1", [one, two])
        record("r2", [one])

        let reader = try JournalReader(store: PGJournalStore(url: url))
        let runs = try reader.runs()
        #expect(runs.map(\.id) == ["r2", "r1"])
        #expect(runs[1].args == ["a", "b \"c\""] && runs[1].vars == ["k": "v"] && runs[1].duration == 2)
        #expect(try reader.run("last")?.id == "r2")
        let tasks = try reader.tasks(of: "r1")
        #expect(tasks.map(\.state) == ["succeeded", "failed"] && tasks[1].error == "boom")
        #expect(try reader.reusable(from: "r1") == ["x": "[1, \"two\"]"])
        #expect(try reader.requests(of: "r1").first?.retries == 1)

        #expect(try reader.prune(keep: 1) == 1)
        #expect(try reader.runs().map(\.id) == ["r2"])
        #expect(try reader.tasks(of: "r1").isEmpty)
    }

    @Test func aDeadRunOfThisHostIsSettledItsRunningTasksLostAnotherHostsIsNot() throws {
        var running = JournalEntry(id: 1, state: .running)
        running.started = 0.5
        // a run that never ended, of a process that is not tasker (pid 1): it died
        let store = try PGJournalStore(url: url)
        try store.insert(run("dead", pid: 1))
        var blob: [UInt8] = []
        JournalCodec.encode([running], into: &blob)
        try store.appendLog(run: "dead", seq: 1, data: blob)
        // the same, recorded by another machine: not this reader's to judge
        try store.insert(run("elsewhere", pid: 1))
        try PGConnection(url: url).query("UPDATE tasker_runs SET host = 'another-machine' WHERE id = 'elsewhere'")
        let reader = try JournalReader(store: PGJournalStore(url: url))
        #expect(try reader.run("elsewhere").map { $0.exitCode == nil && $0.ended == nil } == true)
        let run = try #require(try reader.run("dead"))
        #expect(run.exitCode == -1)
        let task = try #require(try reader.tasks(of: "dead").first)
        #expect(task.state == "failed" && task.errorKind == "lost")
    }

    @Test func theStoreJournalRidesOutARestart() async throws {
        let server = try await PostgresTestServer.isolated()
        defer { server.destroy() }
        let url = server.url()
        let w = JournalWriter(run: JournalRun(id: "r1", pipeline: "/p.lua", args: [], vars: [:], started: 1000, pid: 1)) {
            try PGJournalStore(url: url)
        }
        for i in 1...50 { w.submit(JournalEntry(id: i, state: .succeeded)) }
        // written, before the restart
        let deadline = Date(timeIntervalSinceNow: 20)
        // (psql prints an error, not a count, until the writer has made the table)
        while (Int(server.psql(url, "SELECT count(*) FROM tasker_task_log").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) == 0,
              Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(server.restart())
        for i in 51...100 { w.submit(JournalEntry(id: i, state: .succeeded)) }
        #expect(w.close(ended: 1002, exitCode: 0, counts: ["succeeded": 100], requests: []) == nil)
        let reader = try JournalReader(store: PGJournalStore(url: url))
        let run = try #require(try reader.run("r1"))
        #expect(run.exitCode == 0 && run.counts["succeeded"] == 100)
        #expect(try reader.tasks(of: "r1").count == 100)
    }

    /// A restart while the writer connects and sets up the schema (the
    /// server says it is shutting down, or drops the new connection) is an
    /// outage, not a server that is not there.
    @Test func theStoreJournalRidesOutARestartAtItsStart() async throws {
        let server = try await PostgresTestServer.isolated()
        defer { server.destroy() }
        let url = server.url()
        let restarted = DispatchSemaphore(value: 0)
        Thread {
            server.restart()
            restarted.signal()
        }.start()
        let w = JournalWriter(run: JournalRun(id: "r1", pipeline: "/p.lua", args: [], vars: [:], started: 1000, pid: 1)) {
            try PGJournalStore(url: url)
        }
        for i in 1...100 { w.submit(JournalEntry(id: i, state: .succeeded)) }
        restarted.wait()
        #expect(w.close(ended: 1002, exitCode: 0, counts: ["succeeded": 100], requests: []) == nil)
        let reader = try JournalReader(store: PGJournalStore(url: url))
        #expect(try reader.run("r1")?.exitCode == 0)
        #expect(try reader.tasks(of: "r1").count == 100)
    }
}

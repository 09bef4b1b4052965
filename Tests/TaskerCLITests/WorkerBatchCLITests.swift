import Foundation
import PostgresTestServer
import Testing

/// A worker facing a backlog claims ahead of its free slots; what it holds
/// ahead is still its claim: handed back when it stops, each result once.
@Suite struct WorkerBatchCLITests {
    let server: PostgresTestServer
    let url: String

    init() async throws {
        (server, url) = try await PostgresTestServer.freshDatabase()
    }

    static let defs = """
        slow = tasker.define("slow", function(ctx, args)
          io.stdout:write("start " .. args.n .. "\\n"); io.stdout:flush()
          tasker.sleep(0.2)
          return args.n
        end)
        """

    func sql(_ q: String) -> String { server.psql(url, q).trimmingCharacters(in: .whitespacesAndNewlines) }

    /// Keeps finished jobs an hour: the test reads them after the run.
    func worker(_ s: Scratch, concurrency: Int) throws -> Background {
        try Background(["worker", "--store", url, "--retain", "1h", "--lease", "5", "--concurrency", "\(concurrency)", "defs.lua"],
                       in: s.dir)
    }

    @Test func aStoppingWorkerHandsBackWhatItClaimedAhead() async throws {
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": """
            dofile("defs.lua")
            local hs = {}
            for i = 1, 40 do hs[i] = slow{args = {n = i}} end
            local sum = 0
            for _, h in ipairs(hs) do sum = sum + h:await() end
            print("sum " .. sum)
            """])
        defer { s.cleanup() }
        let a = try worker(s, concurrency: 2)
        async let run = tasker(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        // a holds more claims than its two slots
        let deadline = Date(timeIntervalSinceNow: 60)
        while Int(sql("SELECT count(*) FROM tasker_jobs WHERE state = 'running'")) ?? 0 <= 2 && Date() < deadline {
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        #expect(Int(sql("SELECT count(*) FROM tasker_jobs WHERE state = 'running'")) ?? 0 > 2)
        a.signal(SIGTERM)
        let stopped = await a.finish()
        #expect(stopped.status == 0, "\(stopped.stderr)")
        let ranOnA = stopped.stdout.components(separatedBy: "start ").count - 1
        // what a held ahead went back to the queue as the same attempt
        #expect(sql("SELECT count(*) FROM tasker_jobs WHERE state = 'running'") == "0")
        let b = try worker(s, concurrency: 8)
        let result = try await run
        b.signal(SIGTERM)
        let other = await b.finish()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("sum 820"))
        #expect(ranOnA < 40 && ranOnA + (other.stdout.components(separatedBy: "start ").count - 1) == 40)
        #expect(sql("SELECT count(*), count(DISTINCT task), max(attempt) FROM tasker_jobs WHERE state = 'succeeded'") == "40|40|1")
        #expect(sql("SELECT count(*) FROM tasker_jobs") == "40")
    }
}

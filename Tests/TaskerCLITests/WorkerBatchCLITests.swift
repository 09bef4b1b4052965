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
          -- the first hundred go at once (a backlog: claims come back
          -- full); the rest are held until the test opens the gate
          if args.n > 100 then while not io.open(args.gate) do tasker.sleep(0.01) end end
          return args.n
        end)
        """

    func sql(_ q: String) -> String { server.psql(url, q).trimmingCharacters(in: .whitespacesAndNewlines) }

    /// Keeps finished jobs an hour: the test reads them after the run. It
    /// holds 8 ahead in a backlog whatever its pace (a loaded machine's
    /// pace may be too slow to hold any).
    func worker(_ s: Scratch, concurrency: Int) throws -> Background {
        try Background(["worker", "--store", url, "--retain", "1h", "--lease", "5", "--concurrency", "\(concurrency)", "defs.lua"],
                       in: s.dir, environment: ["TASKER_TEST_CLAIM_AHEAD": "8"])
    }

    @Test func aStoppingWorkerHandsBackWhatItClaimedAhead() async throws {
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": """
            dofile("defs.lua")
            local hs = {}
            for i = 1, 120 do hs[i] = slow{args = {n = i, gate = tasker.args[1]}} end
            local sum = 0
            for _, h in ipairs(hs) do sum = sum + h:await() end
            print("sum " .. sum)
            """])
        defer { s.cleanup() }
        let a = try worker(s, concurrency: 4)
        let gate = s.dir.appendingPathComponent("gate").path
        async let run = tasker(["run", "--no-progress", "--store", url, "p.lua", gate], in: s.dir)
        // a holds more claims than its four slots, which wait at the gate
        let server = server, url = url
        #expect(await poll {
            Int(server.psql(url, "SELECT count(*) FROM tasker_jobs WHERE state = 'running' AND (args::json->>'n')::int > 100")
                .trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 > 4
        })
        a.signal(SIGTERM)
        #expect(await a.waitFor("stopping", onStderr: true))
        #expect(FileManager.default.createFile(atPath: gate, contents: Data()))
        let stopped = await a.finish()
        #expect(stopped.status == 0, "\(stopped.stderr)")
        let ranOnA = stopped.stdout.components(separatedBy: "start ").count - 1
        #expect(ranOnA == 104, "\(stopped.stdout)")
        // what a held ahead went back to the queue as the same attempt
        #expect(sql("SELECT count(*) FROM tasker_jobs WHERE state = 'running'") == "0")
        let b = try worker(s, concurrency: 8)
        let result = try await run
        b.signal(SIGTERM)
        let other = await b.finish()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("sum 7260"))
        #expect(ranOnA + (other.stdout.components(separatedBy: "start ").count - 1) == 120)
        #expect(sql("SELECT count(*), count(DISTINCT task), max(attempt) FROM tasker_jobs WHERE state = 'succeeded'") == "120|120|1")
        #expect(sql("SELECT count(*) FROM tasker_jobs") == "120")
    }

    /// Results of jobs that take milliseconds wait a little (at most half a
    /// job's run time, 5 ms) for others to go in the same statement; rows
    /// written by one statement share their `finished_at` (its
    /// transaction's time). A chain, one job at a time, writes each at once.
    @Test func resultsOfStaggeredJobsShareStatements() async throws {
        let s = try Scratch(["defs.lua": """
            nap = tasker.define("nap", function(ctx, args) tasker.sleep(args.s) return args.n end)
            """, "p.lua": """
            dofile("defs.lua")
            local hs = {}
            -- eight at a time, each ending 2 ms after the one before
            for i = 1, 64 do hs[i] = nap{args = {n = i, s = 0.02 + (i % 8) * 0.002}} end
            local sum = 0
            for _, h in ipairs(hs) do sum = sum + h:await() end
            print("sum " .. sum)
            local last
            for i = 1, 5 do last = nap{args = {n = i, s = 0.02}, after = last} end
            print("chain " .. last:await())
            """])
        defer { s.cleanup() }
        let a = try worker(s, concurrency: 8)
        defer { a.signal(SIGKILL) }
        let r = try await tasker(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "sum 2080\nchain 5\n")
        let statements = Int(sql("SELECT count(DISTINCT finished_at) FROM tasker_jobs WHERE (args::json->>'s')::float8 > 0.02")) ?? 0
        #expect(statements > 0 && statements <= 36, "56 staggered results went in \(statements) statements")
    }
}

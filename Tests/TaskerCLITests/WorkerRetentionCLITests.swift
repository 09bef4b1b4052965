import Foundation
import PostgresTestServer
import Testing

/// Finished jobs leave `tasker_jobs` once their run has ended; what a user
/// reads of the run (show, report, a resume's plan) comes from its journal
/// and is all still there.
@Suite struct WorkerRetentionCLITests {
    let server: PostgresTestServer
    let url: String

    init() async throws {
        (server, url) = try await PostgresTestServer.freshDatabase()
    }

    static let defs = """
        double = tasker.define("double", function(ctx, args)
          if args.gate then while not io.open(args.gate) do tasker.sleep(0.01) end end
          return args.n * 2
        end)
        """

    func sql(_ q: String) -> String { server.psql(url, q).trimmingCharacters(in: .whitespacesAndNewlines) }

    /// Polls `q` until it gives `want` (a sweep runs at each heartbeat).
    func waitFor(_ q: String, _ want: String) async -> Bool {
        let server = server, url = url
        return await poll { server.psql(url, q).trimmingCharacters(in: .whitespacesAndNewlines) == want }
    }

    @Test func anEndedRunsJobsGoAndItStillReadsWhole() async throws {
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": """
            dofile("defs.lua")
            local hs = {}
            -- with a gate, five finish and fifteen wait for it
            for i = 1, 20 do hs[i] = double{args = {n = i, gate = i > 5 and tasker.args[1] or nil}} end
            local sum = 0
            for _, h in ipairs(hs) do sum = sum + h:await() end
            print("sum " .. sum)
            """, "gate": ""])
        defer { s.cleanup() }
        let w = try Background(["worker", "--store", url, "--lease", "1", "--concurrency", "40", "defs.lua"], in: s.dir)
        defer { w.signal(SIGKILL) }
        // A run that waits at a gate keeps its finished rows meanwhile,
        // while an ended run's rows go (at the worker's next heartbeat).
        let gate = s.dir.appendingPathComponent("gate2").path
        let waiting = try Background(["run", "--no-progress", "--store", url, "p.lua", gate], in: s.dir)
        defer { waiting.signal(SIGKILL) }
        let ended = try await tasker(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        #expect(ended.status == 0 && ended.stdout.contains("sum 420"), "\(ended.stderr)")
        let first = sql("SELECT id FROM tasker_runs WHERE ended IS NOT NULL")
        #expect(await waitFor("SELECT count(*) FROM tasker_jobs WHERE run = '\(first)'", "0"))
        #expect(await waitFor("SELECT string_agg(DISTINCT state, ',') || count(*) FROM tasker_jobs", "running,succeeded20"))
        #expect(sql("SELECT count(*) FROM tasker_jobs WHERE state = 'succeeded'") == "5")
        #expect(FileManager.default.createFile(atPath: gate, contents: Data()))
        let other = await waiting.finish()
        #expect(other.status == 0 && other.stdout.contains("sum 420"), "\(other.stderr)")
        #expect(await waitFor("SELECT count(*) FROM tasker_jobs", "0"))
        #expect(await waitFor("SELECT count(*) FROM tasker_coordinators", "0"))

        // what the run recorded is what a user reads
        let shown = try await tasker(["show", first, "--store", url, "--json"], in: s.dir)
        #expect(shown.status == 0, "\(shown.stderr)")
        let tasks = (try? JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: Any])?["tasks"] as? [[String: Any]]
        #expect(tasks?.count == 20 && tasks?.allSatisfy { $0["state"] as? String == "succeeded" } == true, "\(shown.stdout)")
        let report = try await tasker(["report", first, "--store", url, "-o", "r.html"], in: s.dir)
        #expect(report.status == 0, "\(report.stderr)")
        let plan = try await tasker(["run", "--resume", "--plan", "--store", url, first, "p.lua"], in: s.dir)
        #expect(plan.stdout.contains("plan: 20 to reuse, 0 to run again"), "\(plan.stdout)\(plan.stderr)")
        let resumed = try await tasker(["run", "--no-progress", "--resume", "--store", url, first, "p.lua"], in: s.dir)
        #expect(resumed.stdout.contains("sum 420") && resumed.stderr.contains("20 reused"), "\(resumed.stderr)")
    }

    @Test func withARetentionAnEndedRunsJobsStay() async throws {
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": """
            dofile("defs.lua")
            print("got " .. double{args = {n = 4}}:await())
            """])
        defer { s.cleanup() }
        // this worker keeps them for an hour
        let keeps = try Background(["worker", "--store", url, "--lease", "1", "--retain", "1h", "defs.lua"], in: s.dir)
        defer { keeps.signal(SIGKILL) }
        let run = try await tasker(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        #expect(run.status == 0 && run.stdout.contains("got 8"), "\(run.stderr)")
        // a second past the run's end the worker has heartbeaten (and
        // swept) about six times: the row is still there
        #expect(await waitFor("""
            SELECT count(*) FROM tasker_workers WHERE heartbeat > (SELECT stopped FROM tasker_coordinators) + interval '1 s'
            """, "1"))
        #expect(sql("SELECT count(*) FROM tasker_jobs WHERE state = 'succeeded'") == "1")
        // backdate the end past the hour: the next sweep takes it
        _ = sql("UPDATE tasker_coordinators SET stopped = stopped - interval '61 minutes'")
        #expect(await waitFor("SELECT count(*) FROM tasker_jobs", "0"))
    }

    @Test func aRetentionThatIsNotADurationIsAUsageError() async throws {
        let r = try await tasker(["worker", "--store", url, "--retain", "a week", "defs.lua"])
        #expect(r.status == 64 || r.status == 2, "\(r.status)")
        #expect(r.stderr.contains("--retain takes a duration"), "\(r.stderr)")
    }
}

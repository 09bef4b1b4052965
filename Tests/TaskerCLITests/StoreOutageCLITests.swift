import Foundation
import PostgresTestServer
import Testing

/// PostgreSQL going away under a coordinator and its workers (a restart, a
/// stop, a server that never comes back), and a coordinator that dies. Each
/// test that stops the server has a server of its own.
@Suite struct StoreOutageCLITests {
    static let defs = """
        local function flush() io.stdout:flush() end
        double = tasker.define("double", function(ctx, args)
          io.stdout:write("start " .. args.n .. "\\n"); flush()
          if args.t then tasker.sleep(args.t) end
          return args.n * 2
        end)
        """

    static let pipeline = """
        dofile("defs.lua")
        local n, t = tonumber(tasker.args[1]), tonumber(tasker.args[2])
        local hs = {}
        for i = 1, n do hs[i] = double{args = {n = i, t = t}} end
        local sum = 0
        for _, h in ipairs(hs) do sum = sum + h:await() end
        print("sum " .. sum)
        """

    func sql(_ server: PostgresTestServer, _ url: String, _ q: String) -> String {
        server.psql(url, q).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Every job recorded once, none left running, the run's journal in the
    /// store ended with the run's code and counts.
    func expectEveryResultOnce(_ server: PostgresTestServer, _ url: String, jobs n: Int, in s: Scratch) async throws {
        #expect(sql(server, url, "SELECT count(*), count(DISTINCT task) FROM tasker_jobs WHERE state = 'succeeded'") == "\(n)|\(n)")
        #expect(sql(server, url, "SELECT count(*) FROM tasker_jobs WHERE state IN ('queued', 'running')") == "0")
        let runs = try await tasker(["runs", "--store", url, "--json"], in: s.dir)
        let list = try #require(try JSONSerialization.jsonObject(with: Data(runs.stdout.utf8)) as? [[String: Any]], "\(runs.stderr)")
        #expect(list.count == 1)
        #expect(list.first?["exit_code"] as? Int == 0, "\(list)")
        #expect((list.first?["counts"] as? [String: Any])?["succeeded"] as? Int == n, "\(list)")
    }

    @Test func aRestartMidRunLosesNoResultAndHangsNothing() async throws {
        let server = try await PostgresTestServer.isolated()
        defer { server.destroy() }
        let url = server.url()
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": Self.pipeline])
        defer { s.cleanup() }
        // 200 jobs of 0.2 s on 2 x 4 slots: about 5 s, the restart 1 s in
        let w1 = try Background(["worker", "--store", url, "--retain", "1h", "--concurrency", "4", "--lease", "5", "defs.lua"], in: s.dir)
        let w2 = try Background(["worker", "--store", url, "--retain", "1h", "--concurrency", "4", "--lease", "5", "defs.lua"], in: s.dir)
        // A long lease (a heartbeat every 100 s): the coordinator heartbeats
        // as it reconnects, else the workers would pass over its jobs (not
        // heard from since the restart) until its next one.
        let run = try Background(["run", "--no-progress", "--store", url, "--lease", "600", "p.lua", "200", "0.2"], in: s.dir)
        // Jobs flow (on either worker: which one claims job 9 is a race).
        let flowing = Date().addingTimeInterval(60)
        while !(w1.output + w2.output).contains("start 9") && Date() < flowing {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect((w1.output + w2.output).contains("start 9"))
        #expect(server.restart())
        let result = await run.finish(within: 40)
        // Each worker reconnects (under a loaded suite the restart can land
        // near the run's end, and the workers' backoff outlast it: they are
        // stopped once back, not before).
        let back = await (w1.waitFor("reconnected to PostgreSQL", onStderr: true, seconds: 30),
                          w2.waitFor("reconnected to PostgreSQL", onStderr: true, seconds: 30))
        w1.signal(SIGTERM)
        w2.signal(SIGTERM)
        let (r1, r2) = await (w1.finish(within: 20), w2.finish(within: 20))
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("sum 40200"))
        #expect(r1.status == 0 && r2.status == 0, "\(r1.stderr)\(r2.stderr)")
        #expect(back.0 && back.1, "\(r1.stderr)\(r2.stderr)")
        try await expectEveryResultOnce(server, url, jobs: 200, in: s)
    }

    @Test func aStopOfSecondsThenAStartIsRiddenOut() async throws {
        let server = try await PostgresTestServer.isolated()
        defer { server.destroy() }
        let url = server.url()
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": Self.pipeline])
        defer { s.cleanup() }
        let w1 = try Background(["worker", "--store", url, "--retain", "1h", "--concurrency", "4", "--lease", "5", "defs.lua"], in: s.dir)
        let w2 = try Background(["worker", "--store", url, "--retain", "1h", "--concurrency", "4", "--lease", "5", "defs.lua"], in: s.dir)
        let run = try Background(["run", "--no-progress", "--store", url, "p.lua", "40", "0.2"], in: s.dir)
        #expect(await w1.waitFor("start "))
        #expect(server.stop())
        // Jobs finish while the server is away: their results wait in memory.
        try await Task.sleep(for: .seconds(3))
        #expect(server.start())
        let result = await run.finish(within: 40)
        w1.signal(SIGTERM)
        w2.signal(SIGTERM)
        let (r1, r2) = await (w1.finish(within: 20), w2.finish(within: 20))
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("sum 1640"))
        #expect(r1.status == 0 && r2.status == 0, "\(r1.stderr)\(r2.stderr)")
        try await expectEveryResultOnce(server, url, jobs: 40, in: s)
    }

    @Test func aServerThatNeverComesBackFailsTheRunWithKindStoreAndNoPassword() async throws {
        let server = try await PostgresTestServer.isolated()
        defer { server.destroy() }
        // trust authentication: the password is only there to be hidden
        let url = "postgres://tasker:sekret-pw@127.0.0.1:\(server.port)/postgres"
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": Self.pipeline])
        defer { s.cleanup() }
        var env = ProcessInfo.processInfo.environment
        env["TASKER_STORE_OUTAGE_LIMIT"] = "6"
        env["TASKER_STATE_DIR"] = s.dir.appendingPathComponent(".tasker-state").path
        let w = try Background(["worker", "--store", url, "--retain", "1h", "defs.lua"], in: s.dir, environment: env)
        // jobs of 300 s: the stop comes while they run, however loaded the
        // machine (at 30 s the stop came after them twice this month: the
        // test's task resumed half a minute late in a loaded full suite)
        let run = try Background(["run", "--no-progress", "--store", url, "p.lua", "4", "300"], in: s.dir, environment: env)
        #expect(await w.waitFor("start "))
        let stopping = Date()
        #expect(server.stop())
        let stopTook = Date().timeIntervalSince(stopping)
        let result = await run.finish(within: 60)
        w.signal(SIGKILL)  // a worker waits for the server for ever
        let worker = await w.finish()
        // (seen twice in full-suite runs: the run outlived the stop; the
        // stop's time and the server's log say why, next time)
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)\nstop took \(stopTook) s\nworker: \(worker.stdout)\(worker.stderr)\nserver log: \(server.logTail())")
        #expect(result.stderr.contains("store") && result.stderr.contains("unreachable for 6 s"), "\(result.stderr)")
        // the run ends with the limit, its journal in the store (away as
        // long) not waited for a second limit: the end says how long it
        // waited (the process's own clock: the test's may be starved)
        let waited = result.stderr.firstMatch(of: /could not be recorded.*; waited ([0-9.]+) s/).flatMap { Double($0.1) }
        #expect(waited.map { $0 < 3 } == true, "\(result.stderr)")
        #expect(result.stderr.contains("postgres://tasker:***@127.0.0.1"), "\(result.stderr)")
        for text in [result.stdout, result.stderr, worker.stdout, worker.stderr] { #expect(!text.contains("sekret")) }
    }

    @Test func aServerDownBeforeTheRunStartsIsAClearErrorAtOnce() async throws {
        let server = try await PostgresTestServer.isolated()
        defer { server.destroy() }
        #expect(server.stop())
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": Self.pipeline])
        defer { s.cleanup() }
        let run = try Background(["run", "--no-progress", "--store", server.url(), "p.lua", "1", "0"], in: s.dir)
        let result = await run.finish(within: 20)
        #expect(result.status == 2, "\(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains("cannot connect to PostgreSQL"), "\(result.stderr)")
    }

    @Test func aKilledCoordinatorsJobsAreCancelledOnceItsLeaseLapsesAndItsRunResumes() async throws {
        let (server, url) = try await PostgresTestServer.freshDatabase()
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": Self.pipeline])
        defer { s.cleanup() }
        let w = try Background(["worker", "--store", url, "--retain", "1h", "--concurrency", "1", "--lease", "1", "defs.lua"], in: s.dir)
        let coordinator = try Background(["run", "--no-progress", "--store", url, "--lease", "1", "p.lua", "3", "60"], in: s.dir)
        #expect(await w.waitFor("start "))
        coordinator.signal(SIGKILL)
        _ = await coordinator.finish()
        // the running job is stopped and the queued ones never start
        let deadline = Date(timeIntervalSinceNow: 15)
        while sql(server, url, "SELECT count(*) FROM tasker_jobs WHERE state IN ('queued', 'running')") != "0" && Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(sql(server, url, "SELECT string_agg(state, ',') FROM tasker_jobs") == "cancelled,cancelled,cancelled")
        // its slot is free again: the resumed run's jobs run on it
        let resumed = try await tasker(["run", "--no-progress", "--store", url, "--resume", "p.lua", "3", "0"], in: s.dir)
        w.signal(SIGTERM)
        let worker = await w.finish(within: 20)
        #expect(resumed.status == 0, "\(resumed.stdout)\(resumed.stderr)")
        #expect(resumed.stdout.contains("sum 12"))
        #expect(worker.status == 0, "\(worker.stderr)")
        #expect(worker.stdout.components(separatedBy: "start ").count - 1 == 4, "\(worker.stdout)")
    }

    /// A worker that starts after a coordinator died (nobody was there to
    /// see its lease lapse) cancels that run's jobs before it claims: it
    /// never runs work nobody waits for.
    @Test func aWorkerStartedAfterACoordinatorDiedDoesNotRunItsJobs() async throws {
        let (server, url) = try await PostgresTestServer.freshDatabase()
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": Self.pipeline])
        defer { s.cleanup() }
        let coordinator = try Background(["run", "--no-progress", "--store", url, "--lease", "1", "p.lua", "3", "0"], in: s.dir)
        var deadline = Date(timeIntervalSinceNow: 20)
        while sql(server, url, "SELECT count(*) FROM tasker_jobs WHERE state = 'queued'") != "3" && Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        coordinator.signal(SIGKILL)
        _ = await coordinator.finish()
        // past its lease, with no worker alive to notice (the server's
        // start counts as a heartbeat, 5 s on: a fresh server's restart grace)
        deadline = Date(timeIntervalSinceNow: 20)
        while sql(server, url, """
            SELECT count(*) FROM tasker_coordinators
            WHERE greatest(heartbeat, pg_postmaster_start_time() + interval '5 seconds') < now() - interval '1.5 seconds'
            """) != "1"
                && Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        let w = try Background(["worker", "--store", url, "--retain", "1h", "defs.lua"], in: s.dir)
        deadline = Date(timeIntervalSinceNow: 15)
        while sql(server, url, "SELECT count(*) FROM tasker_jobs WHERE state IN ('queued', 'running')") != "0" && Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        w.signal(SIGTERM)
        let worker = await w.finish(within: 20)
        #expect(sql(server, url, "SELECT string_agg(state, ',') FROM tasker_jobs") == "cancelled,cancelled,cancelled")
        #expect(!worker.stdout.contains("start "), "\(worker.stdout)")
    }

    /// A run stopped by Ctrl-C while the server is away. Back within the
    /// stop's grace, the server records the stop: the lease stays given up
    /// (a heartbeat at the reconnect took it again) and the jobs are
    /// cancelled. Back later, nothing records it: its coordinator's lease
    /// counts from the server's start, and until it lapses a worker passes
    /// over the run's jobs (not heard from since the restart), then they
    /// are cancelled: none runs though the user stopped the run.
    @Test func aRunInterruptedWhileTheServerIsAwayHasNoJobRunAfterTheRestart() async throws {
        let server = try await PostgresTestServer.isolated()
        defer { server.destroy() }
        let url = server.url()
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": Self.pipeline])
        defer { s.cleanup() }
        func interrupted(restartingBeforeItsEnd: Bool) async throws -> String {
            let events = s.dir.appendingPathComponent("events-\(restartingBeforeItsEnd).jsonl")
            // Restarting: the stop's grace long enough for a loaded machine's restart (5 s by default).
            let coordinator = try Background(["run", "--no-progress", "--store", url, "--lease", "3", "--events", events.path,
                                              "p.lua", "3", "0"], in: s.dir,
                                             environment: restartingBeforeItsEnd ? ["TASKER_TEST_STOP_GRACE": "30"] : [:])
            var deadline = Date(timeIntervalSinceNow: 30)
            while sql(server, url, "SELECT count(*) FROM tasker_jobs WHERE state = 'queued'") != "3" && Date() < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            let run = sql(server, url, "SELECT run FROM tasker_jobs LIMIT 1")
            #expect(server.stop())
            coordinator.signal(SIGINT)
            if restartingBeforeItsEnd {
                // its tasks cancelled: the run is ending, waiting for the server to record it
                deadline = Date(timeIntervalSinceNow: 30)
                func cancelled() -> Int {
                    ((try? String(contentsOf: events, encoding: .utf8)) ?? "").components(separatedBy: "\"cancelled\"").count - 1
                }
                while cancelled() < 3 && Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
                #expect(cancelled() >= 3)
                // away a while longer (its statements back off meanwhile), yet back within the stop's grace
                try await Task.sleep(for: .seconds(1.5))
                #expect(server.start())
            }
            let stopped = await coordinator.finish(within: 30)
            #expect(stopped.status == 130, "\(stopped.stderr)")
            #expect(!stopped.stderr.contains("lease had lapsed"), "\(stopped.stderr)")
            if !restartingBeforeItsEnd { #expect(server.start()) }
            return run
        }
        let recorded = try await interrupted(restartingBeforeItsEnd: true)
        #expect(sql(server, url, "SELECT stopped IS NOT NULL FROM tasker_coordinators WHERE run = '\(recorded)'") == "t")
        #expect(sql(server, url, "SELECT string_agg(state, ',') FROM tasker_jobs WHERE run = '\(recorded)'")
                == "cancelled,cancelled,cancelled")
        let unrecorded = try await interrupted(restartingBeforeItsEnd: false)
        let w = try Background(["worker", "--store", url, "--retain", "1h", "--lease", "3", "defs.lua"], in: s.dir)
        let deadline = Date(timeIntervalSinceNow: 40)
        while sql(server, url, "SELECT count(*) FROM tasker_jobs WHERE state IN ('queued', 'running')") != "0" && Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        w.signal(SIGTERM)
        let worker = await w.finish(within: 20)
        #expect(sql(server, url, "SELECT string_agg(state, ',') FROM tasker_jobs WHERE run = '\(unrecorded)'")
                == "cancelled,cancelled,cancelled")
        #expect(!worker.stdout.contains("start "), "\(worker.stdout)")
        #expect(worker.status == 0, "\(worker.stderr)")
    }

    @Test func aResumedRunTakesOverTheJobsOfItsDeadCoordinatorAtOnce() async throws {
        let (server, url) = try await PostgresTestServer.freshDatabase()
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": Self.pipeline])
        defer { s.cleanup() }
        let w = try Background(["worker", "--store", url, "--retain", "1h", "--concurrency", "1", "defs.lua"], in: s.dir)
        // the default lease (60 s): only the take-over can free the worker in time
        let coordinator = try Background(["run", "--no-progress", "--store", url, "p.lua", "2", "60"], in: s.dir)
        #expect(await w.waitFor("start "))
        coordinator.signal(SIGKILL)
        _ = await coordinator.finish()
        let resumed = try Background(["run", "--no-progress", "--store", url, "--resume", "p.lua", "2", "0"], in: s.dir)
        let result = await resumed.finish(within: 20)
        w.signal(SIGTERM)
        _ = await w.finish(within: 20)
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("sum 6"))
        #expect(sql(server, url, "SELECT count(*) FROM tasker_jobs WHERE state = 'cancelled'") == "2")
    }
}

import Foundation
import PostgresTestServer
import Testing

/// Coordinator and workers as real processes on a real PostgreSQL.
@Suite struct WorkerCLITests {
    let server: PostgresTestServer
    let url: String

    init() async throws {
        (server, url) = try await PostgresTestServer.freshDatabase()
    }

    static let defs = """
        local function flush() io.stdout:flush() end
        double = tasker.define("double", function(ctx, args)
          io.stdout:write("start " .. args.n .. "\\n"); flush()
          -- worker a waits for the gate file (it is stopped meanwhile);
          -- any other worker runs the job at once
          if args.gate then
            while tasker.vars.name == "a" and not io.open(args.gate) do tasker.sleep(0.01) end
          -- a worker given --var hold=1 keeps it running until it is stopped
          elseif args.t then tasker.sleep(tasker.vars.hold and 60 or args.t) end
          return args.n * 2, tasker.vars.name
        end)
        long = tasker.define("long", function(ctx, args)
          io.stdout:write("long started\\n"); flush()
          tasker.sleep(60)
          io.stdout:write("long finished\\n"); flush()
        end)
        order = 0
        seq = tasker.define("seq", function(ctx, args)
          order = order + 1
          return order
        end)
        """

    /// `n` doubles that worker a holds until the file `gate` is there;
    /// prints their sum.
    static func gatedSum(_ n: Int) -> String {
        """
        dofile("defs.lua")
        local hs = {}
        for i = 1, \(n) do hs[i] = double{args = {n = i, gate = "gate"}} end
        local sum = 0
        for _, h in ipairs(hs) do sum = sum + h:await() end
        print("sum " .. sum)
        """
    }

    /// Keeps finished jobs an hour: the tests read them after the run.
    func worker(_ s: Scratch, _ extra: [String] = []) throws -> Background {
        try Background(["worker", "--store", url, "--retain", "1h", "--lease", "1"] + extra + ["defs.lua"], in: s.dir)
    }

    func sql(_ q: String) -> String { server.psql(url, q).trimmingCharacters(in: .whitespacesAndNewlines) }

    @Test func twoWorkersRunTwoHundredDefinedTasks() async throws {
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": """
            dofile("defs.lua")
            local hs = {}
            for i = 1, 200 do hs[i] = double{args = {n = i}} end
            local sum = 0
            for _, h in ipairs(hs) do sum = sum + h:await() end
            print("sum " .. sum)
            """])
        defer { s.cleanup() }
        let w1 = try worker(s, ["--var", "name=a"]), w2 = try worker(s, ["--var", "name=b"])
        let run = try await tasker(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        w1.signal(SIGTERM)
        w2.signal(SIGTERM)
        let (r1, r2) = await (w1.finish(), w2.finish())
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("sum 40200"))
        #expect(sql("SELECT count(*), count(DISTINCT task) FROM tasker_jobs WHERE state = 'succeeded'") == "200|200")
        #expect(r1.status == 0 && r2.status == 0, "\(r1.stderr)\(r2.stderr)")
    }

    /// `--lease` promises six heartbeats a lease: a coordinator's lease
    /// under a second (heartbeats came only at its listener's one-second
    /// tick) lapsed mid-run, the workers cancelled its jobs, and the run
    /// waited for ever.
    @Test func aCoordinatorsLeaseUnderASecondHoldsThroughItsRun() async throws {
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": """
            dofile("defs.lua")
            local hs = {}
            for i = 1, 12 do hs[i] = double{args = {n = i, t = 0.5}} end
            local sum = 0
            for _, h in ipairs(hs) do sum = sum + h:await() end
            print("sum " .. sum)
            """])
        defer { s.cleanup() }
        // Past the server's first 5 s, when leases count from its start.
        let deadline = Date(timeIntervalSinceNow: 30)
        while sql("SELECT now() > pg_postmaster_start_time() + interval '6 seconds'") != "t" && Date() < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        let w = try worker(s, ["--concurrency", "2"])
        let run = try Background(["run", "--no-progress", "--store", url, "--lease", "0.6", "p.lua"], in: s.dir)
        let result = await run.finish(within: 60)
        w.signal(SIGTERM)
        _ = await w.finish()
        // (a lapse is still possible on a starved machine, its attempts tried
        // again as lost; with the one-second tick 28 were cancelled and the run failed)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("sum 156"))
    }

    /// A coordinator paused past its lease (SIGSTOP; a VM paused) comes
    /// back to find its jobs cancelled by the workers: it takes its lease
    /// again and tries the cancelled attempts again as lost, instead of
    /// waiting for them for ever.
    @Test func aCoordinatorPausedPastItsLeaseTriesItsCancelledJobsAgain() async throws {
        // Worker a holds each job until the gate file is there: the run
        // cannot end before the test has paused and resumed it.
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": Self.gatedSum(6)])
        defer { s.cleanup() }
        // The default retention (0): once the lease lapses the run looks
        // ended, and its cancelled rows are deleted before it comes back.
        let w = try Background(["worker", "--store", url, "--lease", "1", "--concurrency", "1", "--var", "name=a", "defs.lua"],
                               in: s.dir)
        let run = try Background(["run", "--no-progress", "--store", url, "--lease", "1", "p.lua"], in: s.dir)
        #expect(await w.waitFor("start 1"))
        run.signal(SIGSTOP)
        let deadline = Date(timeIntervalSinceNow: 30)
        while sql("SELECT count(*) FROM tasker_coordinators WHERE stopped IS NOT NULL") != "1" && Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        while sql("SELECT count(*) FROM tasker_jobs") != "0" && Date() < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(sql("SELECT count(*) FROM tasker_jobs") == "0")
        try Data().write(to: s.dir.appendingPathComponent("gate"))
        run.signal(SIGCONT)
        let result = await run.finish(within: 60)
        w.signal(SIGTERM)
        _ = await w.finish()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("sum 42"))
        #expect(result.stderr.contains("lease had lapsed"), "\(result.stderr)")
    }

    /// The run's lease row and its jobs gone while the run heartbeats (a
    /// worker swept them, having seen the lease lapse while one of the
    /// run's heartbeats was in flight as it was paused; or by hand): the
    /// run queues what it waits for again. It registered again and waited
    /// for the deleted jobs for ever (a clean-clone CI run hung here).
    @Test func aRunWhoseRowAndJobsAreSweptWhileItLivesQueuesThemAgain() async throws {
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": Self.gatedSum(3)])
        defer { s.cleanup() }
        let w = try Background(["worker", "--store", url, "--lease", "5", "--concurrency", "1", "--var", "name=a", "defs.lua"],
                               in: s.dir)
        let run = try Background(["run", "--no-progress", "--store", url, "--lease", "5", "p.lua"], in: s.dir)
        #expect(await w.waitFor("start 1"))
        // what a sweep does to a run it took for ended
        _ = sql("DELETE FROM tasker_queue; DELETE FROM tasker_jobs; DELETE FROM tasker_coordinators")
        try Data().write(to: s.dir.appendingPathComponent("gate"))
        let result = await run.finish(within: 60)
        w.signal(SIGTERM)
        _ = await w.finish()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("sum 12"), "\(result.stdout)")
    }

    @Test func aKilledWorkersClaimsComeBackAndEveryResultArrivesOnce() async throws {
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": """
            dofile("defs.lua")
            local hs = {}
            -- the doomed worker holds what it claims until it is killed
            -- (however late a loaded machine lets the test see it start)
            for i = 1, 40 do hs[i] = double{args = {n = i, t = 0.5}} end
            local sum = 0
            for _, h in ipairs(hs) do sum = sum + h:await() end
            print("sum " .. sum)
            """])
        defer { s.cleanup() }
        let doomed = try worker(s, ["--concurrency", "4", "--var", "hold=1"])
        async let run = tasker(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        #expect(await doomed.waitFor("start "))
        doomed.signal(SIGKILL)
        let survivor = try worker(s, ["--concurrency", "4"])
        let result = try await run
        survivor.signal(SIGTERM)
        let (dead, _) = await (doomed.finish(), survivor.finish())
        // what the doomed worker did, should it have finished everything
        let doomedRan = "the doomed worker started \(dead.stdout.components(separatedBy: "start ").count - 1) jobs"
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("sum 1640"))
        #expect(sql("SELECT count(*), count(DISTINCT task) FROM tasker_jobs WHERE state = 'succeeded'") == "40|40")
        #expect(Int(sql("SELECT count(*) FROM tasker_jobs WHERE error_kind = 'lost'")) ?? 0 >= 1, "\(doomedRan)")
    }

    @Test func aWorkerStoppedPastItsLeaseHasItsLateResultRefused() async throws {
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": """
            dofile("defs.lua")
            -- a stays inside the job until the test opens the gate
            local v, who = double{args = {n = 1, gate = tasker.args[1]}}:await()
            print("result " .. v .. " from " .. who)
            """])
        defer { s.cleanup() }
        let gate = s.dir.appendingPathComponent("gate").path
        let a = try worker(s, ["--var", "name=a"])
        async let run = tasker(["run", "--no-progress", "--store", url, "p.lua", gate], in: s.dir)
        #expect(await a.waitFor("start 1"))
        a.signal(SIGSTOP)
        let b = try worker(s, ["--var", "name=b"])
        let result = try await run
        a.signal(SIGCONT)
        #expect(sql("SELECT state || ':' || coalesce(error_kind, '') FROM tasker_jobs ORDER BY attempt") == "failed:lost\nsucceeded:")
        // a, running again, learns it was declared dead; its job may end
        // now (the gate opens) and its result is refused
        #expect(FileManager.default.createFile(atPath: gate, contents: Data()))
        #expect(await a.waitFor("silent past its lease", onStderr: true))
        a.signal(SIGTERM)
        b.signal(SIGTERM)
        let (ra, _) = await (a.finish(), b.finish())
        #expect(result.stdout.contains("result 2 from b"), "\(result.stdout)\(result.stderr)")
        #expect(ra.stderr.contains("refused") || ra.stderr.contains("silent past its lease"), "\(ra.stderr)")
        #expect(sql("SELECT state || ':' || coalesce(error_kind, '') FROM tasker_jobs ORDER BY attempt") == "failed:lost\nsucceeded:")
    }

    @Test func aTimeoutStopsTheRemoteTaskOnItsWorker() async throws {
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": """
            dofile("defs.lua")
            local ok, err = pcall(function() return long{timeout = 1}:await() end)
            print("long: " .. err.kind)
            -- the worker has one slot: this runs only if the long task let it go
            print("then " .. double{args = {n = 4}, timeout = 20}:await())
            """])
        defer { s.cleanup() }
        let w = try worker(s, ["--concurrency", "1"])
        let result = try await tasker(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        w.signal(SIGTERM)
        _ = await w.finish()
        #expect(result.stdout.contains("long: timeout"), "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("then 8"), "\(result.stdout)\(result.stderr)")
        // the worker times the attempt (from its claim)
        #expect(sql("SELECT state || ':' || error_kind FROM tasker_jobs WHERE name = 'long'") == "failed:timeout")
    }

    /// A timeout is seconds per attempt, as in one process: the time a job
    /// waits in the queue for a free worker is not part of it.
    @Test func timeQueuedIsNotPartOfTheTimeout() async throws {
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": """
            dofile("defs.lua")
            -- one worker slot: the third waits about 1.2 s, past its 1 s timeout
            local hs = {}
            for i = 1, 3 do hs[i] = double{args = {n = i, t = 0.6}, timeout = 1} end
            for i, h in ipairs(hs) do print(i, h:await()) end
            """])
        defer { s.cleanup() }
        let w = try worker(s, ["--concurrency", "1"])
        let result = try await tasker(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        w.signal(SIGTERM)
        _ = await w.finish()
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout == "1\t2\tnil\n2\t4\tnil\n3\t6\tnil\n", "\(result.stdout)\(result.stderr)")
    }

    @Test func aCancelInTheCoordinatorReachesTheRunningRemoteTask() async throws {
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": """
            dofile("defs.lua")
            local h = long{}
            -- the test creates "go" once the worker shows the task running
            while not fs.exists("go") do tasker.sleep(0.02) end
            h:cancel()
            local ok, err = pcall(function() return h:await() end)
            print("long: " .. h:state() .. " " .. err.kind)
            -- the worker has one slot: this runs only if the cancel freed it
            print("then " .. double{args = {n = 4}, timeout = 20}:await())
            """])
        defer { s.cleanup() }
        let w = try worker(s, ["--concurrency", "1"])
        async let run = tasker(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        #expect(await w.waitFor("long started"))
        try Data().write(to: s.dir.appendingPathComponent("go"))
        let result = try await run
        w.signal(SIGTERM)
        let worker = await w.finish()
        #expect(result.stdout.contains("long: cancelled cancelled"), "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("then 8"), "\(result.stdout)\(result.stderr)")
        #expect(sql("SELECT state FROM tasker_jobs WHERE name = 'long'") == "cancelled")
        // the body was stopped where it waited, not left to finish its minute
        #expect(worker.status == 0 && !worker.stdout.contains("long finished"), "\(worker.stdout)\(worker.stderr)")
    }

    @Test func prioritiesOrderClaimsAndAKeyRunsOnce() async throws {
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": """
            dofile("defs.lua")
            local low, high = {}, {}
            for i = 1, 3 do low[i] = seq{args = {i = i}} end
            for i = 1, 3 do high[i] = seq{args = {i = i + 3}, priority = 10} end
            local a, b = double{args = {n = 5}, key = "k"}, double{args = {n = 5}, key = "k"}
            local lo, hi = {}, {}
            for i = 1, 3 do lo[i] = low[i]:await(); hi[i] = high[i]:await() end
            table.sort(lo); table.sort(hi)
            print("high " .. table.concat(hi, ",") .. " low " .. table.concat(lo, ","))
            print("keyed " .. a:await() .. " " .. b:await())
            """])
        defer { s.cleanup() }
        async let run = tasker(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        // the worker starts once everything is queued, so it sees all priorities at once
        let deadline = Date(timeIntervalSinceNow: 30)
        while Int(sql("SELECT count(*) FROM tasker_jobs")) ?? 0 < 7 && Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let w = try worker(s, ["--concurrency", "1"])
        let result = try await run
        w.signal(SIGTERM)
        _ = await w.finish()
        #expect(result.stdout.contains("high 1,2,3 low 4,5,6"), "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("keyed 10 10"))
        #expect(sql("SELECT count(*) FROM tasker_jobs WHERE name = 'double'") == "1")
    }

    @Test func aKilledCoordinatorResumedWithTheStoreReusesFinishedWork() async throws {
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": """
            dofile("defs.lua")
            local quick = {}
            for i = 1, 10 do quick[i] = double{args = {n = i}} end
            local slow = double{args = {n = 100, t = tonumber(tasker.args[1] or "0")}}
            local sum = 0
            for _, h in ipairs(quick) do sum = sum + h:await() end
            tasker.sleep(0.3)  -- past the journal's 100 ms promise
            io.write("ready\\n"); io.stdout:flush()
            print("sum " .. sum + slow:await())
            """])
        defer { s.cleanup() }
        let w = try worker(s, ["--concurrency", "4"])
        let killed = try await taskerInterrupted(["run", "--no-progress", "--store", url, "p.lua", "60"], in: s.dir,
                                                 markers: ["ready"], signal: SIGKILL)
        #expect(killed.status == SIGKILL)
        let resumed = try await tasker(["run", "--no-progress", "--store", url, "--resume", "p.lua", "0"], in: s.dir)
        w.signal(SIGKILL)  // it still runs the dead run's slow attempt
        _ = await w.finish()
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stdout.contains("sum 310"), "\(resumed.stdout)")
        #expect(resumed.stderr.contains("10 reused"), "\(resumed.stderr)")
        // the quick ones ran once in all
        #expect(sql("SELECT count(*) FROM tasker_jobs WHERE state = 'succeeded' AND args NOT LIKE '%100%'") == "10")
        // Both runs are journaled in the store, none in a file here; the
        // dead one was settled (its slow task lost) and reads like any run.
        #expect(!FileManager.default.fileExists(atPath: s.dir.appendingPathComponent(".tasker-state/journal.db").path))
        #expect(sql("SELECT count(*) FROM tasker_runs") == "2")
        let dead = sql("SELECT id FROM tasker_runs ORDER BY id LIMIT 1")
        let shown = try await tasker(["show", dead, "--store", url, "--json"], in: s.dir)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: Any])
        #expect(object["exit_code"] as? Int == -1, "\(shown.stdout)\(shown.stderr)")
        let states = (object["tasks"] as? [[String: Any]] ?? []).compactMap { $0["state"] as? String }
        #expect(states.filter { $0 == "succeeded" }.count == 10 && states.filter { $0 == "failed" }.count == 1, "\(states)")
        let runs = try await tasker(["runs", "--store", url, "--json"], in: s.dir)
        #expect((try JSONSerialization.jsonObject(with: Data(runs.stdout.utf8)) as? [Any])?.count == 2)
        let report = try await tasker(["report", "last", "--store", url, "-o", "r.html"], in: s.dir)
        #expect(report.status == 0, "\(report.stderr)")
        let html = try String(contentsOf: s.dir.appendingPathComponent("r.html"), encoding: .utf8)
        #expect(html.contains(sql("SELECT id FROM tasker_runs ORDER BY id DESC LIMIT 1")), "the report of the resumed run")
    }

    @Test func sigtermLetsTheRunningTaskFinishAndASecondHandsItBack() async throws {
        let s = try Scratch(["defs.lua": Self.defs, "p.lua": """
            dofile("defs.lua")
            print("got " .. double{args = {n = 21, t = 1}}:await())
            """])
        defer { s.cleanup() }
        let calm = try worker(s, ["--var", "name=calm"])
        async let run = tasker(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        #expect(await calm.waitFor("start 21"))
        calm.signal(SIGTERM)  // finishes the task, then exits
        let result = try await run
        let stopped = await calm.finish()
        #expect(result.stdout.contains("got 42"), "\(result.stdout)\(result.stderr)")
        #expect(stopped.status == 0, "\(stopped.stderr)")

        // twice: the running job goes back to the queue, where another worker finds it
        let s2 = try Scratch(["defs.lua": Self.defs, "p.lua": """
            dofile("defs.lua")
            print("got " .. double{args = {n = 5, t = 1}}:await())
            """])
        defer { s2.cleanup() }
        // holds the job until stopped: still running when the test, however
        // slowed by a loaded machine, sends the second SIGTERM
        let hasty = try worker(s2, ["--var", "hold=1"])
        async let run2 = tasker(["run", "--no-progress", "--store", url, "p.lua"], in: s2.dir)
        #expect(await hasty.waitFor("start 5"))
        hasty.signal(SIGTERM)
        #expect(await hasty.waitFor("stopping: no new jobs", onStderr: true))
        hasty.signal(SIGTERM)
        let gone = await hasty.finish()
        #expect(gone.status == 128 + SIGTERM)
        #expect(sql("SELECT state FROM tasker_jobs WHERE args LIKE '%\"n\":5%'") == "queued")
        let other = try worker(s2)
        let result2 = try await run2
        other.signal(SIGTERM)
        _ = await other.finish()
        #expect(result2.stdout.contains("got 10"), "\(result2.stdout)\(result2.stderr)")
    }
}

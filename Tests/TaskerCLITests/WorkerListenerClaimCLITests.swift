import Foundation
import PostgresTestServer
import Testing

/// An idle worker claims new jobs on the connection that heard of them
/// (one thread hop fewer from the queue to a job's start); a busy one on
/// its own, and every job still runs once.
@Suite struct WorkerListenerClaimCLITests {
    let server: PostgresTestServer
    let url: String

    init() async throws {
        (server, url) = try await PostgresTestServer.freshDatabase()
    }

    func sql(_ q: String) -> String { server.psql(url, q).trimmingCharacters(in: .whitespacesAndNewlines) }

    /// Holds the claims' sequence (a claim takes a number of it) until
    /// `release`: claims wait behind it. The holding psql blocks, so it
    /// runs on a thread of its own (not the suite's shared threads).
    final class Holder: Sendable {
        let done = DispatchSemaphore(value: 0)
    }

    func holdClaims() async -> Holder {
        let server = server, url = url, holder = Holder()
        Thread {
            _ = server.psql(url, "BEGIN; ALTER SEQUENCE tasker_claim_seq INCREMENT BY 1; SELECT pg_sleep(120); COMMIT;")
            holder.done.signal()
        }.start()
        #expect(await poll { server.psql(url, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'BEGIN; ALTER SEQUENCE%'")
            .trimmingCharacters(in: .whitespacesAndNewlines) == "1" })
        return holder
    }

    func release(_ holder: Holder) async {
        _ = sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'BEGIN; ALTER SEQUENCE%' AND pid <> pg_backend_pid()")
        #expect(await poll { holder.done.wait(timeout: .now()) == .success })
    }

    /// A job that says it started and returns its number.
    static let echo = """
        echo = tasker.define("echo", function(ctx, args)
          io.stdout:write("start " .. args.n .. "\\n"); io.stdout:flush()
          return args.n
        end)
        """

    static let threeJobs = """
        dofile("defs.lua")
        local hs = {}
        for i = 1, 3 do hs[i] = echo{args = {n = i}} end
        local sum = 0
        for _, h in ipairs(hs) do sum = sum + h:await() end
        print("sum " .. sum)
        """

    /// The worker's listener idle: the last statement its connection ran is
    /// its second LISTEN (the coordinator's listens on "tasker_done").
    static let listenerIdle = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN \"tasker_cancel\"'"

    func listenerIsIdle() async -> Bool {
        let server = server, url = url
        return await poll { server.psql(url, Self.listenerIdle).trimmingCharacters(in: .whitespacesAndNewlines) == "1" }
    }

    /// A worker of four slots, listening and idle.
    func idleWorker(_ s: Scratch, environment: [String: String]? = nil) async throws -> Background {
        let w = try Background(["worker", "--store", url, "--retain", "1h", "--concurrency", "4", "defs.lua"], in: s.dir,
                               environment: environment)
        #expect(await w.waitFor("waiting for jobs", onStderr: true))
        #expect(await listenerIsIdle())
        return w
    }

    /// Each of `jobs` started once in `output`, and none is left claimed.
    func expectEachStartedOnce(_ jobs: ClosedRange<Int>, in output: String) {
        for n in jobs {
            #expect(output.components(separatedBy: "start \(n)\n").count == 2, "once: \(output)")
        }
        #expect(sql("SELECT count(*) FROM tasker_jobs WHERE state = 'running'") == "0")
    }

    @Test func anIdleWorkerClaimsOnItsListenersConnection() async throws {
        let s = try Scratch(["defs.lua": Self.echo, "p.lua": """
            dofile("defs.lua")
            local sum = 0
            -- one at a time (each finds the worker idle: a tick may claim
            -- one first, not all five), then a burst past its four slots
            for i = 1, 5 do sum = sum + echo{args = {n = i}}:await() end
            local hs = {}
            for i = 6, 40 do hs[#hs + 1] = echo{args = {n = i}} end
            for _, h in ipairs(hs) do sum = sum + h:await() end
            print("sum " .. sum)
            """])
        defer { s.cleanup() }
        let w = try await idleWorker(s)
        let run = try await tasker(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        #expect(run.status == 0 && run.stdout.contains("sum 820"), "\(run.stderr)")
        // jobs were claimed there, the worker being idle
        #expect(sql(Self.listenerIdle) == "0")
        #expect(sql("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%FOR UPDATE SKIP LOCKED%'") != "0")
        w.signal(SIGTERM)
        let stopped = await w.finish()
        #expect(stopped.status == 0, "\(stopped.stderr)")
        // each job once, all recorded, none left claimed
        let starts = stopped.stdout.split(separator: "\n").filter { $0.hasPrefix("start ") }
        #expect(starts.count == 40 && Set(starts).count == 40, "\(stopped.stdout)")
        #expect(sql("SELECT count(*) FROM tasker_jobs WHERE state = 'succeeded'") == "40")
        #expect(sql("SELECT count(*) FROM tasker_jobs WHERE state = 'running'") == "0")
    }

    /// The listener's claims refused by the server (only theirs: the
    /// session that listens): each falls back to the worker's own
    /// connection, and every job runs once.
    @Test func aRefusedListenersClaimFallsBackAndTheJobRunsOnce() async throws {
        let s = try Scratch(["defs.lua": """
            echo = tasker.define("echo", function(ctx, args)
              io.stdout:write("start " .. args.n .. "\\n"); io.stdout:flush()
              return args.n * 2
            end)
            """, "p.lua": """
            dofile("defs.lua")
            local sum = 0
            -- one at a time: each finds the worker idle
            for i = 1, 5 do sum = sum + echo{args = {n = i}}:await() end
            print("sum " .. sum)
            """])
        defer { s.cleanup() }
        let w = try Background(["worker", "--store", url, "--retain", "1h", "defs.lua"], in: s.dir)
        #expect(await w.waitFor("waiting for jobs", onStderr: true))
        _ = sql("""
            CREATE SEQUENCE refusals;
            CREATE FUNCTION refuse_listeners() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              IF EXISTS (SELECT 1 FROM pg_listening_channels()) THEN
                PERFORM nextval('refusals');  -- not rolled back: counts them
                RAISE EXCEPTION 'claims refused by the test';
              END IF;
              RETURN OLD;
            END $$;
            CREATE TRIGGER refuse_listeners BEFORE DELETE ON tasker_queue FOR EACH ROW EXECUTE FUNCTION refuse_listeners();
            """)
        let run = try await tasker(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        #expect(run.status == 0 && run.stdout.contains("sum 30"), "\(run.stdout)\(run.stderr)")
        // the listener tried (a tick may take a job first, not all five)
        #expect(Int(sql("SELECT last_value FROM refusals WHERE is_called")) ?? 0 >= 1)
        w.signal(SIGTERM)
        let stopped = await w.finish()
        #expect(stopped.status == 0, "\(stopped.stderr)")
        expectEachStartedOnce(1...5, in: stopped.stdout)
        #expect(sql("SELECT count(*) FROM tasker_jobs WHERE state = 'succeeded'") == "5")
    }

    /// A worker stopping while the listener's claim waits behind a lock,
    /// and that claim given up on (its answer's wait): the worker still
    /// stops (it hung), and what the claim took once the lock went (the
    /// server finished it) goes back to the queue with its stop, for
    /// another worker.
    @Test func aStopWhileTheListenersClaimWaitsEndsAndLosesNoJob() async throws {
        let s = try Scratch(["defs.lua": Self.echo, "p.lua": Self.threeJobs])
        defer { s.cleanup() }
        let w1 = try await idleWorker(s, environment: ["TASKER_STORE_ANSWER_WAIT": "2"])
        let server = server, url = url
        let holding = await holdClaims()
        let run = try Background(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        let waiting = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%SKIP LOCKED%'"
        #expect(await poll { server.psql(url, waiting).trimmingCharacters(in: .whitespacesAndNewlines) == "1" })
        w1.signal(SIGTERM)
        // The claim is given up on (the listener connects again); it goes
        // on in the server, and commits once the lock goes, while the
        // stopping worker waits for just that before its last hand-back.
        #expect(await listenerIsIdle())
        await release(holding)
        let stopped = await w1.finish(within: 40)
        #expect(stopped.status == 0, "stops, not hangs: \(stopped.stderr)")
        #expect(sql("SELECT count(*) FROM tasker_jobs WHERE state = 'running'") == "0")
        let w2 = try Background(["worker", "--store", url, "--retain", "1h", "defs.lua"], in: s.dir)
        #expect(await w2.waitFor("waiting for jobs", onStderr: true))
        let result = await run.finish(within: 60)
        #expect(result.status == 0 && result.stdout.contains("sum 6"), "\(result.stdout)\(result.stderr)")
        w2.signal(SIGTERM)
        let other = await w2.finish(within: 30)
        #expect(other.status == 0, "\(other.stderr)")
        expectEachStartedOnce(1...3, in: stopped.stdout + other.stdout)
    }

    /// The same claim given up on while the worker goes on: what the server
    /// then commits under it is handed back by its next claims, and the
    /// run ends (the jobs sat `running` under a live worker before).
    @Test func aClaimGivenUpOnThatCommitsLaterIsHandedBack() async throws {
        let s = try Scratch(["defs.lua": Self.echo, "p.lua": Self.threeJobs])
        defer { s.cleanup() }
        let w = try await idleWorker(s, environment: ["TASKER_STORE_ANSWER_WAIT": "2"])
        let holding = await holdClaims()
        let run = try Background(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        // the listener's claim is given up on, then the one on the worker's
        // connection after it (said as a lost connection)
        #expect(await w.waitFor("lost the connection to PostgreSQL", onStderr: true))
        await release(holding)
        let result = await run.finish(within: 60)
        #expect(result.status == 0 && result.stdout.contains("sum 6"), "\(result.stdout)\(result.stderr)")
        w.signal(SIGTERM)
        let stopped = await w.finish(within: 30)
        #expect(stopped.status == 0, "\(stopped.stderr)")
        expectEachStartedOnce(1...3, in: stopped.stdout)
    }
}

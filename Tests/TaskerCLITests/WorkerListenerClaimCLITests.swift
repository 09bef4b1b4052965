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

    @Test func anIdleWorkerClaimsOnItsListenersConnection() async throws {
        let s = try Scratch(["defs.lua": """
            echo = tasker.define("echo", function(ctx, args)
              io.stdout:write("start " .. args.n .. "\\n"); io.stdout:flush()
              return args.n
            end)
            """, "p.lua": """
            dofile("defs.lua")
            local hs = {}
            for i = 1, 40 do hs[i] = echo{args = {n = i}} end
            local sum = 0
            for _, h in ipairs(hs) do sum = sum + h:await() end
            print("sum " .. sum)
            """])
        defer { s.cleanup() }
        let w = try Background(["worker", "--store", url, "--retain", "1h", "--concurrency", "4", "defs.lua"], in: s.dir)
        #expect(await w.waitFor("waiting for jobs", onStderr: true))
        // The worker's listener: the last statement its connection ran is
        // its second LISTEN (the coordinator's listens on "tasker_done").
        let server = server, url = url
        let listenerIdle = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN \"tasker_cancel\"'"
        #expect(await poll { server.psql(url, listenerIdle).trimmingCharacters(in: .whitespacesAndNewlines) == "1" })
        let run = try await tasker(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        #expect(run.status == 0 && run.stdout.contains("sum 820"), "\(run.stderr)")
        // the first jobs were claimed there, the worker being idle
        #expect(sql(listenerIdle) == "0")
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

    /// The listener's claim refused by the server: the worker's own
    /// connection claims instead (and says why it cannot), the job stays
    /// queued, and it runs once when claims work again.
    @Test func aRefusedListenersClaimFallsBackAndTheJobRunsOnce() async throws {
        let s = try Scratch(["defs.lua": """
            echo = tasker.define("echo", function(ctx, args)
              io.stdout:write("start " .. args.n .. "\\n"); io.stdout:flush()
              return args.n * 2
            end)
            """, "p.lua": """
            dofile("defs.lua")
            print("got " .. echo{args = {n = 21}}:await())
            """])
        defer { s.cleanup() }
        let w = try Background(["worker", "--store", url, "--retain", "1h", "defs.lua"], in: s.dir)
        #expect(await w.waitFor("waiting for jobs", onStderr: true))
        let server = server, url = url
        let listenerIdle = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN \"tasker_cancel\"'"
        #expect(await poll { server.psql(url, listenerIdle).trimmingCharacters(in: .whitespacesAndNewlines) == "1" })
        _ = sql("""
            CREATE FUNCTION refuse_claims() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'claims refused by the test'; END $$;
            CREATE TRIGGER refuse_claims BEFORE DELETE ON tasker_queue FOR EACH STATEMENT EXECUTE FUNCTION refuse_claims();
            """)
        let run = try Background(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        #expect(await w.waitFor("cannot claim jobs: claims refused by the test", onStderr: true))
        // the listener tried first
        #expect(sql(listenerIdle) == "0")
        #expect(sql("SELECT state FROM tasker_jobs") == "queued")
        _ = sql("DROP TRIGGER refuse_claims ON tasker_queue")
        let result = await run.finish()
        #expect(result.status == 0 && result.stdout.contains("got 42"), "\(result.stdout)\(result.stderr)")
        w.signal(SIGTERM)
        let stopped = await w.finish()
        #expect(stopped.status == 0, "\(stopped.stderr)")
        #expect(stopped.stdout.components(separatedBy: "start 21").count == 2, "once: \(stopped.stdout)")
        #expect(sql("SELECT count(*) FROM tasker_jobs WHERE state = 'running'") == "0")
    }
}

import Foundation
import PostgresTestServer
import Testing

/// A coordinator's secrets that a defined task's args carry are masked by
/// the worker that runs it too: its log lines, the task's name, its errors.
@Suite struct WorkerSecretsCLITests {
    @Test func aWorkerMasksTheCoordinatorsSecretsThatComeInArgs() async throws {
        let (server, url) = try await PostgresTestServer.freshDatabase()
        let s = try Scratch(["defs.lua": """
            work = tasker.define("work", function(ctx, args)
              log.info("worker sees " .. args.tok .. " pin " .. args.pin)
              if args.fail then error("worker fail " .. args.tok) end
              return args.tok
            end)
            """, "p.lua": """
            dofile("defs.lua")
            local tok = tasker.param{name = "tok", secret = true}
            local pin = tasker.param{name = "pin", type = "integer", secret = true}
            local a = work{args = {tok = tok, pin = pin}}
            local b = work{args = {tok = tok, pin = pin, fail = true}}
            print("same " .. tostring(a:await() == tok))
            print("failed " .. tostring(not pcall(function() return b:await() end)))
            """])
        defer { s.cleanup() }
        let w = try Background(["worker", "--store", url, "--retain", "1h", "defs.lua"], in: s.dir)
        #expect(await w.waitFor("waiting for jobs", onStderr: true))
        let run = try Background(["run", "--no-progress", "--store", url, "p.lua", "--tok", "Zq9Kp2LmXw7Rt4Vb",
                                  "--pin", "48291377"], in: s.dir)
        let r = await run.finish(within: 60)
        w.signal(SIGTERM)
        let worker = await w.finish(within: 20)
        #expect(r.status == 1, "one task failed: \(r.stdout)\(r.stderr)")
        // the value itself travels: the coordinator gets it back as it was
        #expect(r.stdout.contains("same true") && r.stdout.contains("failed true"), "\(r.stdout)")
        #expect(worker.stderr.contains("worker sees *** pin ***"), "\(worker.stderr)")
        for secret in ["Zq9Kp2LmXw7Rt4Vb", "48291377"] {
            #expect(!worker.stderr.contains(secret) && !worker.stdout.contains(secret), "\(secret) in the worker's output: \(worker.stderr)")
            #expect(!r.stderr.contains(secret), "\(secret) in the coordinator's output: \(r.stderr)")
        }
        #expect(server.psql(url, "SELECT count(*) FROM tasker_jobs WHERE secrets IS NOT NULL")
            .trimmingCharacters(in: .whitespacesAndNewlines) == "2")
    }
}

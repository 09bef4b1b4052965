import Foundation
import PostgresTestServer
import Testing

/// What a task sees and says is the same on a worker as in one process:
/// its attempt number and idempotency key, its errors, its values (or why
/// they cannot go back); and a worker runs only what its FILE defines.
@Suite struct WorkerPromisesCLITests {
    let server: PostgresTestServer
    let url: String

    init() async throws {
        (server, url) = try await PostgresTestServer.freshDatabase()
    }

    func worker(_ s: Scratch, _ file: String = "defs.lua", _ extra: [String] = [], lease: String = "1") throws -> Background {
        try Background(["worker", "--store", url, "--retain", "1h", "--lease", lease] + extra + [file], in: s.dir)
    }

    /// `p.lua` run in one process, then with a store and one worker running `defs.lua`.
    func inProcessAndOnAWorker(_ s: Scratch) async throws -> (local: CLIResult, remote: CLIResult) {
        let local = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        let w = try worker(s)
        let remote = try await tasker(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        w.signal(SIGTERM)
        _ = await w.finish()
        return (local, remote)
    }

    func sql(_ q: String) -> String { server.psql(url, q).trimmingCharacters(in: .whitespacesAndNewlines) }

    static let flaky = """
        flaky = tasker.define("flaky", function(ctx, args)
          local f = assert(io.open(args.out, "a"))
          f:write(ctx.attempt, " ", ctx.name, " ", ctx.idempotency_key, "\\n")
          f:close()
          if ctx.attempt < 3 then error("not yet") end
          return ctx.attempt
        end)
        """

    @Test func ctxAttemptAndKeyAreTheSameOnWorkersAsInOneProcess() async throws {
        let s = try Scratch(["defs.lua": Self.flaky, "p.lua": """
            dofile("defs.lua")
            print("got " .. flaky{args = {out = "keys.txt"}, retry = {attempts = 3, delay = 0}}:await())
            """])
        defer { s.cleanup() }
        let keys = s.dir.appendingPathComponent("keys.txt")
        func lines() throws -> [String] {
            defer { try? FileManager.default.removeItem(at: keys) }
            return try String(contentsOf: keys, encoding: .utf8).split(separator: "\n").map(String.init)
        }
        let local = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        #expect(local.stdout.contains("got 3"), "\(local.stdout)\(local.stderr)")
        let inProcess = try lines()
        #expect(inProcess.count == 3)
        let key = String(inProcess.first?.split(separator: " ").last ?? "")
        // ctx.name: the name the add gave (from the args), here and on a worker
        #expect(inProcess == ["1 flaky(out=keys.txt) \(key)", "2 flaky(out=keys.txt) \(key)", "3 flaky(out=keys.txt) \(key)"])
        // Two workers of one slot each: the attempts land on either.
        let w1 = try worker(s, "defs.lua", ["--concurrency", "1"]), w2 = try worker(s, "defs.lua", ["--concurrency", "1"])
        for journal in [[], ["--no-journal"]] {
            let run = try await tasker(["run", "--no-progress", "--store", url] + journal + ["p.lua"], in: s.dir)
            #expect(run.stdout.contains("got 3"), "\(journal) \(run.stdout)\(run.stderr)")
            let got = try lines()
            #expect(got == inProcess, "\(journal): \(got) in one process: \(inProcess)")
        }
        w1.signal(SIGTERM)
        w2.signal(SIGTERM)
        _ = await (w1.finish(), w2.finish())
        #expect(sql("SELECT string_agg(attempt::text, ',' ORDER BY attempt) FROM tasker_jobs GROUP BY run") == "1,2,3\n1,2,3")
    }

    /// A worker's own args are the run's secrets as a coordinator's are: a
    /// URL's password among them is `***` in its logs.
    @Test func aWorkersArgsWithAPasswordAreMaskedInItsLogs() async throws {
        let s = try Scratch(["defs.lua": """
            log.info("worker args: " .. tasker.args[1])
            x = tasker.define("x", function() end)
            """])
        defer { s.cleanup() }
        let w = try Background(["worker", "--store", url, "defs.lua", "https://bob:hunter22@h/"], in: s.dir)
        #expect(await w.waitFor("worker args: ", onStderr: true))
        w.signal(SIGTERM)
        let r = await w.finish()
        #expect(r.stderr.contains("worker args: https://***@h/"), "\(r.stderr)")
        #expect(!r.stderr.contains("hunter22"), "\(r.stderr)")
    }

    /// A SIGTERM that arrives while the worker starts (blocked by the mask
    /// it inherited, so pending) still stops it: it used to be discarded
    /// when the worker set up its handlers, and the worker ran on.
    @Test func aSigtermDuringStartupStopsTheWorker() async throws {
        let s = try Scratch(["defs.lua": Self.flaky])
        defer { s.cleanup() }
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var mask = sigset_t()
        sigemptyset(&mask)
        sigaddset(&mask, SIGTERM)
        posix_spawnattr_setsigmask(&attr, &mask)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK))
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let args = [taskerBinary().path, "worker", "--store", url, "--retain", "1h", "--lease", "1", s.dir.appendingPathComponent("defs.lua").path]
        var argv: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
        defer { for a in argv { free(a) } }
        var pid: pid_t = 0
        #expect(posix_spawn(&pid, args[0], &actions, &attr, &argv, environ) == 0)
        kill(pid, SIGTERM)  // pending until the worker sets its handlers up
        let deadline = Date(timeIntervalSinceNow: 120)
        var status: Int32 = 0
        var exited = false
        while !exited && Date() < deadline {
            exited = waitpid(pid, &status, WNOHANG) == pid
            if !exited { try await Task.sleep(for: .milliseconds(20)) }
        }
        if !exited {
            kill(pid, SIGKILL)
            _ = waitpid(pid, &status, 0)
        }
        #expect(exited, "the worker ignored a SIGTERM that came while it started")
    }

    static let thumbs = """
        double = tasker.define("double", function(ctx, args) return args.n * 2 end)
        thumb = tasker.define("thumb", function(ctx, args) return "thumb " .. args.n end)
        """

    @Test func aWorkerLeavesJobsItCannotRunForOneThatCan() async throws {
        let s = try Scratch(["old.lua": """
            double = tasker.define("double", function(ctx, args) return args.n * 2 end)
            """, "defs.lua": Self.thumbs, "p.lua": """
            dofile("defs.lua")
            local hs = {}
            for i = 1, 10 do hs[#hs + 1] = thumb{args = {n = i}}; hs[#hs + 1] = double{args = {n = i}} end
            local n = 0
            for _, h in ipairs(hs) do h:await(); n = n + 1 end
            print("done " .. n)
            """])
        defer { s.cleanup() }
        // a lease long enough that a loaded machine does not make it look dead
        let old = try worker(s, "old.lua", ["--concurrency", "2"], lease: "10")
        // registered before the jobs come: a worker still starting on a
        // loaded machine would make 'double' look undefined too
        #expect(await old.waitFor("waiting for jobs", onStderr: true))
        let run = try Background(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir,
                                 environment: ["TASKER_TEST_UNDEFINED_AFTER": "0.5"])
        // the old worker says once that it leaves them; the coordinator
        // that no live worker defines them; nothing fails meanwhile
        #expect(await old.waitFor("does not define it", onStderr: true))
        #expect(await run.waitFor("no live worker defines 'thumb'", onStderr: true))
        #expect(sql("SELECT count(*) FROM tasker_jobs WHERE name = 'thumb' AND state = 'queued'") == "10")
        let new = try worker(s, "defs.lua", lease: "10")
        let result = await run.finish()
        old.signal(SIGTERM)
        new.signal(SIGTERM)
        let (o, n) = await (old.finish(), new.finish())
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("done 20"))
        #expect(sql("SELECT count(*) FROM tasker_jobs WHERE state <> 'succeeded'") == "0")
        #expect(sql("SELECT DISTINCT split_part(worker, ':', 2) FROM tasker_jobs WHERE name = 'thumb'") == "\(new.pid)")
        #expect(o.stderr.components(separatedBy: "'thumb'").count == 2, "logged once: \(o.stderr)")
        #expect(!o.stderr.contains("'double'") && !result.stderr.contains("'double'"), "\(o.stderr)\(result.stderr)")
        // the same definitions on both sides: no word of versions
        #expect(!result.stderr.contains("version") && !n.stderr.contains("version"), "\(result.stderr)\(n.stderr)")
        #expect(sql("SELECT count(*) FROM tasker_jobs WHERE version IS NULL OR ran_version IS DISTINCT FROM version") == "0")
    }

    /// Live workers that define the task but whose claims fail: the run
    /// that waits names them and why (it used to wait in silence), also
    /// after it said no worker defined it; each worker says it once though
    /// the server's text differs every time, and nothing says claims work
    /// until they do; then the run finishes.
    @Test func workersWhoseClaimsFailAreNamedByTheRunThatWaits() async throws {
        let s = try Scratch(["defs.lua": Self.thumbs, "p.lua": """
            dofile("defs.lua")
            print("got " .. double{args = {n = 21}}:await())
            """])
        defer { s.cleanup() }
        let run = try Background(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir,
                                 environment: ["TASKER_TEST_UNDEFINED_AFTER": "0.5"])
        #expect(await run.waitFor("no live worker defines 'double'", onStderr: true))
        // claims delete from the queue's list: refused there, with a text
        // that differs each time (as a pid or a DETAIL line does)
        _ = sql("""
            CREATE FUNCTION refuse_claims() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN PERFORM nextval('refusals');  -- not rolled back: counts the refused claims
              RAISE EXCEPTION 'claims refused by the test' USING DETAIL = clock_timestamp()::text; END $$;
            CREATE SEQUENCE refusals;
            CREATE TRIGGER refuse_claims BEFORE DELETE ON tasker_queue FOR EACH STATEMENT EXECUTE FUNCTION refuse_claims();
            """)
        let w1 = try worker(s, lease: "10"), w2 = try worker(s, lease: "10")
        #expect(await run.waitFor("the live workers that define 'double' cannot claim jobs: 1 task of it wait in the queue",
                                  onStderr: true))
        #expect(sql("""
            SELECT count(*) FROM tasker_workers WHERE problem LIKE '%claims refused by the test' AND problem NOT LIKE '%DETAIL%'
            """) == "2")
        // claims are tried again each second: several refused before the trigger goes
        let deadline = Date(timeIntervalSinceNow: 60)
        while Int(sql("SELECT last_value FROM refusals")) ?? 0 < 5, Date() < deadline { try await Task.sleep(nanoseconds: 50_000_000) }
        #expect(Int(sql("SELECT last_value FROM refusals")) ?? 0 >= 5)
        #expect(sql("SELECT count(*) FROM tasker_jobs WHERE state = 'queued'") == "1")
        #expect(!w1.errors.contains("claims work again") && !w2.errors.contains("claims work again"), "\(w1.errors)\(w2.errors)")
        _ = sql("DROP TRIGGER refuse_claims ON tasker_queue")
        let result = await run.finish()
        w1.signal(SIGTERM)
        w2.signal(SIGTERM)
        let (o1, o2) = await (w1.finish(), w2.finish())
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("got 42"), "\(result.stdout)")
        #expect(result.stderr.contains("claims refused by the test") && result.stderr.contains("worker "), "\(result.stderr)")
        #expect(result.stderr.components(separatedBy: "cannot claim jobs").count == 2, "said once: \(result.stderr)")
        for o in [o1, o2] {
            let said = o.stderr.components(separatedBy: "cannot claim jobs").count - 1
            #expect(said <= 1, "said once a minute at most: \(o.stderr)")
            // 'claims work again' only after the failure, and only once
            if let again = o.stderr.range(of: "claims work again") {
                #expect(o.stderr.range(of: "cannot claim jobs").map { $0.lowerBound < again.lowerBound } ?? false, "\(o.stderr)")
                #expect(o.stderr.components(separatedBy: "claims work again").count == 2, "\(o.stderr)")
            }
        }
        #expect((o1.stderr + o2.stderr).contains("claims work again"), "the worker that ran it: \(o1.stderr)\(o2.stderr)")
    }

    @Test func anotherVersionOfADefinitionOnAWorkerIsRecordedAndNamed() async throws {
        let s = try Scratch(["defs.lua": """
            double = tasker.define("double", function(ctx, args) return args.n * 2 end)
            """, "p.lua": """
            double = tasker.define("double", function(ctx, args) return args.n * 3 end)
            for i = 1, 3 do print("got " .. double{args = {n = i}}:await()) end
            """])
        defer { s.cleanup() }
        let w = try worker(s)
        let result = try await tasker(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        w.signal(SIGTERM)
        let ws = await w.finish()
        #expect(result.stdout.contains("got 6"), "the worker's code ran: \(result.stdout)\(result.stderr)")
        #expect(result.stderr.components(separatedBy: "another version of its definition").count == 2, "\(result.stderr)")
        #expect(ws.stderr.components(separatedBy: "differs here from the coordinator's").count == 2, "\(ws.stderr)")
        #expect(sql("SELECT count(*) FROM tasker_jobs WHERE version IS NOT NULL AND ran_version IS NOT NULL AND version <> ran_version") == "3")
    }

    /// A value the journal cannot keep (over 1 MiB) still goes back to the
    /// coordinator, as it would reach the awaiter in one process; the
    /// journal says it is not recorded.
    @Test func aResultOverTheJournalsLimitStillReachesTheAwaiter() async throws {
        let s = try Scratch(["defs.lua": """
            big = tasker.define("big", function(ctx, args) return string.rep("x", args.n) end)
            """, "p.lua": """
            dofile("defs.lua")
            print("small " .. #big{args = {n = 1000}}:await())
            print("big " .. #big{args = {n = 2 * 1024 * 1024}}:await())
            """])
        defer { s.cleanup() }
        let w = try worker(s)
        let result = try await tasker(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        w.signal(SIGTERM)
        _ = await w.finish()
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout == "small 1000\nbig 2097152\n", "\(result.stdout)\(result.stderr)")
        #expect(result.stderr.contains("not recorded, it runs again on resume"), "\(result.stderr)")
    }

    /// Args and results keep what plain JSON would change (integer keys of
    /// a sparse table, keys of mixed kinds, holes of a `json.array`), both
    /// ways, and args that look like the stored-values form stay args.
    @Test func argsWithIntegerKeysArriveAsTheyWereGiven() async throws {
        let s = try Scratch(["defs.lua": """
            probe = tasker.define("probe", function(ctx, args)
              local keys = {}
              for k in pairs(args.t) do keys[#keys + 1] = (math.type(k) or type(k)) .. ":" .. tostring(k) end
              table.sort(keys)
              return table.concat(keys, ","), args.t
            end)
            """, "p.lua": """
            dofile("defs.lua")
            for _, t in ipairs{{[1] = "a", [3] = "c"}, {[1] = "a", x = "b"}, {"a", "b"}, {x = 1},
                               {["$v"] = 2, values = {"x"}}, json.array{1, nil, 3}} do
              local keys, back = probe{args = {t = t}}:await()
              print(keys, math.type(next(back)) or type(next(back)))
            end
            """])
        defer { s.cleanup() }
        let (local, remote) = try await inProcessAndOnAWorker(s)
        #expect(local.stdout.hasPrefix("integer:1,integer:3\tinteger\n"), "\(local.stdout)\(local.stderr)")
        #expect(remote.stdout == local.stdout, "remote:\n\(remote.stdout)\(remote.stderr)\nlocal:\n\(local.stdout)")
    }

    @Test func errorsReachTheAwaiterAsInOneProcess() async throws {
        let s = try Scratch(["defs.lua": """
            fail = tasker.define("fail", function(ctx, args)
              if args.how == "string" then error("boom") end
              if args.how == "table" then error({code = 42, list = {1, 2}}) end
              if args.how == "tostring" then error(setmetatable({}, {__tostring = function() return "custom" end})) end
              if args.how == "cycle" then local t = {}; t.self = t; error(t) end
              if args.how == "engine" then local ok, e = pcall(json.decode, "{"); error(e) end
              if args.how == "level0" then error("bare", 0) end
              if args.how == "nul" then error("a\\0b", 0) end
              if args.how == "sparse" then error({code = 42, [3] = "x"}) end
              if args.how == "exec" then tasker.exec{"sh", "-c", "echo oops >&2; exit 3"} end
            end)
            """, "p.lua": """
            dofile("defs.lua")
            for _, how in ipairs{"string", "table", "tostring", "cycle", "engine", "level0", "nul", "sparse", "exec"} do
              local ok, e = fail{args = {how = how}}:result()
              local t = type(e)
              if how == "table" then print(how, t, e.code, e.list[2])
              -- what JSON cannot hold comes as its tostring
              elseif how == "tostring" then print(how, tostring(e))
              elseif how == "cycle" then print(how, (tostring(e):match("^table: ")))
              elseif how == "engine" then print(how, t, e.kind, e.message)
              elseif how == "sparse" then print(how, t, e.code, e[3], e["3"])
              elseif how == "exec" then print(how, t, e.kind, e.code, ("%q"):format(e.stderr), tostring(e):match("exited with code 3") ~= nil)
              else print(how, t, ("%q"):format(e)) end
            end
            """])
        defer { s.cleanup() }
        let (local, remote) = try await inProcessAndOnAWorker(s)
        #expect(local.stdout.contains("string\tstring\t\"defs.lua:2: boom\""), "\(local.stdout)\(local.stderr)")
        #expect(local.stdout.contains("nul\tstring\t\"a\\0b\""), "\(local.stdout)")
        #expect(local.stdout.contains("engine\ttable\tjson"), "\(local.stdout)")
        #expect(local.stdout.contains("sparse\ttable\t42\tx\tnil\n"), "\(local.stdout)")
        #expect(local.stdout.contains("exec\ttable\texec\t3\t\"oops\\\n\"\ttrue"), "\(local.stdout)")
        #expect(remote.stdout == local.stdout, "remote:\n\(remote.stdout)\(remote.stderr)\nlocal:\n\(local.stdout)")
    }
}

/// A malformed `--store` is a usage error that never shows its password.
@Suite struct StoreURLCLITests {
    static let password = "s3cretPW"

    @Test func malformedStoreURLsAreUsageErrorsWithoutThePassword() async throws {
        let s = try Scratch(["p.lua": "print(1)", "defs.lua": "x = tasker.define('x', function() end)"])
        defer { s.cleanup() }
        let pw = Self.password
        let bad = [" postgres://u:\(pw)@localhost/db", "postgres:/u:\(pw)@localhost/db", "mysql://u:\(pw)@localhost/db",
                   "postgres://u:\(pw) x@localhost/db", "postgres://u:\(pw)@local host/db", "postgres://u:\(pw)@h/db\n",
                   "host=localhost password=\(pw)", "postgres:u:\(pw)@h/db", "postgres://u:\(pw)/x@h/db ",
                   "POSTGRES://u:\(pw)@h/db", "postgres://u:" + String(repeating: "p", count: 9000) + "\(pw)@h/db"]
        for url in bad {
            for args in [["run", "--store", url, "p.lua"], ["worker", "--store", url, "defs.lua"], ["runs", "--store", url],
                         ["show", "last", "--store", url]] {
                let r = try await tasker(args, in: s.dir)
                #expect(r.status == 2, "\(args): \(r.stderr)")
                #expect(!(r.stdout + r.stderr).contains(pw), "\(args): \(r.stdout)\(r.stderr)")
                #expect(r.stderr.contains("--store"), "\(args): \(r.stderr)")
            }
        }
    }

    /// Well-formed URLs that cannot connect: libpq's message, never the password.
    @Test func connectionErrorsNeverShowThePassword() async throws {
        let s = try Scratch(["p.lua": "print(1)", "defs.lua": "x = tasker.define('x', function() end)"])
        defer { s.cleanup() }
        let pw = Self.password
        for url in ["postgresql://u:\(pw)@/db?host=/nonexistent", "postgres://ü:\(pw)@héllo.invalid/dé",
                    "postgres://u:\(pw)@localhost:1/db?sslmode=bogus", "postgres://u:\(pw)@localhost:1/db?password=\(pw)2",
                    "postgres://u:\(pw)@localhost:1/db?bogus=\(pw)", "postgres://u:\(pw)/x@localhost:1/db"] {
            for args in [["run", "--no-progress", "--store", url, "p.lua"], ["worker", "--store", url, "defs.lua"],
                         ["runs", "--store", url]] {
                let r = try await tasker(args, in: s.dir)
                #expect(r.status == 2, "\(args): \(r.stderr)")
                #expect(!(r.stdout + r.stderr).contains(pw), "\(args): \(r.stdout)\(r.stderr)")
            }
        }
    }
}

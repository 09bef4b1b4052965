import Foundation
import PostgresTestServer
import Testing

/// What tasker records and prints cannot leak a secret given on the command
/// line, and a script's text cannot forge a line or drive the terminal.
@Suite struct OutputSafetyCLITests {
    /// Every secret below ends in a marker no output may hold.
    static let secretArgs = [
        "postgres://app:S3CR1T-a@db:5432/app",            // a URL's password
        "--api-token=S3CR1T-b",                           // --name=VALUE
        "--password=S3CR1T-c",
        "--token", "S3CR1T-d",                            // a bare flag, then its value
        "https://h.example/x?token=S3CR1T-e&page=2",      // a secret query value
        "http://u:S3CR1T-f@[::1]:8080/p",                 // IPv6
        "postgres://u:pa/S3CR1T-g@db/app",                // a '/' inside the password
        "host=db user=app password=S3CR1T-h",             // a libpq DSN as one word
        "plain",
    ]
    static let secretVars = [
        "GITHUB_PAT=S3CR1T-i", "bearer=S3CR1T-j", "Api_Key=S3CR1T-k", "dsn=S3CR1T-l", "DB_PASSWORD=S3CR1T-m",
        "db=postgres://app:S3CR1T-n@db/app", "empty_token=", "path=/usr/bin",
    ]

    @Test func secretsInArgsAndVarsNeverReachTheJournalEventsReportOrShowButTheScriptSeesThem() async throws {
        let s = try Scratch(["p.lua": """
            -- the script gets the real values
            assert(tasker.args[1] == "postgres://app:S3CR1T-a@db:5432/app", tasker.args[1])
            assert(tasker.args[5] == "S3CR1T-d")
            assert(tasker.vars.GITHUB_PAT == "S3CR1T-i" and tasker.vars.db:find("S3CR1T-n", 1, true))
            tasker.add{name = "t", run = function() return 1 end}
            """])
        defer { s.cleanup() }
        let vars = Self.secretVars.flatMap { ["--var", $0] }
        let r = try await tasker(["run", "--no-progress", "--events", "events.jsonl", "--report", "report.html"] + vars
                                 + ["p.lua"] + Self.secretArgs, in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        let show = try await tasker(["show", "last", "--json"], in: s.dir)
        let showText = try await tasker(["show", "last"], in: s.dir)
        let runs = try await tasker(["runs", "--json"], in: s.dir)
        var outputs = ["stderr": r.stderr + r.stdout, "show --json": show.stdout, "show": showText.stdout, "runs": runs.stdout]
        for file in ["events.jsonl", "report.html", ".tasker-state/journal.db", ".tasker-state/journal.db-wal"] {
            // The raw bytes: the secret must not be in a free page or the WAL either.
            if let data = FileManager.default.contents(atPath: s.dir.appendingPathComponent(file).path) {
                outputs[file] = String(decoding: data, as: UTF8.self)
            }
        }
        #expect(outputs["events.jsonl"] != nil && outputs["report.html"] != nil && outputs[".tasker-state/journal.db"] != nil)
        for (name, text) in outputs {
            #expect(!text.contains("S3CR1T"), "a secret in \(name)")
        }
        // What is recorded still says what was given, secrets as ***.
        let run = try #require(JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])
        #expect(run["args"] as? [String] == [
            "postgres://***@db:5432/app", "--api-token=***", "--password=***", "--token", "***",
            "https://h.example/x?token=***&page=2", "http://***@[::1]:8080/p", "postgres://***@db/app",
            "host=db user=app password=***", "plain",
        ])
        let events = try #require(outputs["events.jsonl"])
        #expect(events.contains(#""args":["postgres:\/\/***@db:5432\/app","--api-token=***""#), "\(events.prefix(400))")
        // Keys that only look alike are not hidden (recorded in the file or
        // its WAL: a connection's close does not checkpoint).
        let journal = (outputs[".tasker-state/journal.db"] ?? "") + (outputs[".tasker-state/journal.db-wal"] ?? "")
        #expect(journal.contains("/usr/bin"))
    }

    /// A task name with a newline cannot add a fake `reuse` line to the plan
    /// or a fake task to the summary or `show`; ESC and the C1 CSI reach no
    /// terminal.
    @Test func taskNamesAndErrorsAreEscapedInTheSummaryPlanShowAndRuns() async throws {
        let s = try Scratch(["p.lua": #"""
            tasker.add{name = "a\nreuse  deploy\r\27[2J", run = function() error("bad\n  failed deploy: forged\27[31m\u{9b}2J") end}
            tasker.add{name = "ok", run = function() end}
            """#, "m.lua": #"""
            error("main\27[2J\u{9b}")
            """#])
        defer { s.cleanup() }
        let first = try await tasker(["run", "--no-progress", "--events", "-", "p.lua"], in: s.dir)
        #expect(first.status == 1)
        let plan = try await tasker(["run", "--resume", "--plan", "p.lua"], in: s.dir)
        let show = try await tasker(["show", "last"], in: s.dir)
        let runs = try await tasker(["runs"], in: s.dir)
        for (name, text) in ["summary": first.stderr, "events": first.stdout, "plan": plan.stdout, "show": show.stdout, "runs": runs.stdout] {
            #expect(!text.unicodeScalars.contains { ($0.value < 0x20 && $0 != "\n" && $0 != "\t") || (0x7F...0x9F).contains($0.value) },
                    "a control character in \(name): \(text.debugDescription)")
        }
        #expect(plan.stdout.split(separator: "\n").filter { $0.hasPrefix("reuse") } == ["reuse  ok"], "\(plan.stdout)")
        #expect(plan.stdout.contains(#"run    a\nreuse  deploy\r\u001b[2J  (failed)"#), "\(plan.stdout)")
        // an error's next lines are indented under its first: never a line of the summary's own
        #expect(first.stderr.contains(#"  failed a\nreuse  deploy\r\u001b[2J: p.lua:1: bad"# + "\n" +
                                      #"        failed deploy: forged\u001b[31m\u009b2J"#), "\(first.stderr)")
        #expect(!first.stderr.contains("\n  failed deploy"))
        // the main chunk's error keeps its traceback's lines, escapes the rest
        let main = try await tasker(["run", "--no-progress", "m.lua"], in: s.dir)
        #expect(main.stderr.contains("tasker: error: m.lua:1: main\\u001b[2J\\u009b\nstack traceback:\n"), "\(main.stderr)")
        #expect(show.stdout.contains(#"a\nreuse  deploy\r\u001b[2J"#))
    }

    /// The main chunk's error is one message and a traceback: its own line
    /// breaks cannot print a line of their own (a forged summary), and a
    /// NUL in it (or in a handler's error) does not cut what follows.
    @Test func theMainChunksErrorCannotForgeALineAndKeepsEveryByte() async throws {
        let s = try Scratch(["forge.lua": "error('disk ok\\ntasker: 0 tasks: 0 succeeded, 0 failed in 0.00s\\rX', 0)\n",
                             "nul.lua": """
                                local h = tasker.add(function() return 1 end)
                                h:on("finish", function() error("handler a\\0SEEN-1") end)
                                error("main a\\0SEEN-2")
                                """])
        defer { s.cleanup() }
        let forged = try await tasker(["run", "--no-progress", "--no-journal", "forge.lua"], in: s.dir)
        #expect(forged.status == 2)
        let lines = forged.stderr.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.filter { $0.hasPrefix("tasker: ") }.count == 2, "\(forged.stderr)")
        #expect(lines[0] == "tasker: error: disk ok\\ntasker: 0 tasks: 0 succeeded, 0 failed in 0.00s\\rX", "\(forged.stderr)")
        #expect(!forged.stderr.contains("\r"))
        let nul = try await tasker(["run", "--no-progress", "--no-journal", "nul.lua"], in: s.dir)
        #expect(nul.status == 2)
        #expect(nul.stderr.contains("main a\\u0000SEEN-2"), "\(nul.stderr)")
        #expect(nul.stderr.contains("handler a\\u0000SEEN-1"), "\(nul.stderr)")
    }

    @Test func theSummaryListsTwentyFailedAndTwentySkippedTasksThenSaysHowManyMore() async throws {
        let s = try Scratch(["p.lua": """
            for i = 1, 45 do tasker.add{name = "f" .. i, run = function() error("boom") end} end
            local gate = tasker.add{name = "gate", run = function() error("closed") end}
            for i = 1, 22 do tasker.add{name = "c" .. i, after = gate, run = function() end} end
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        #expect(r.status == 1)
        let lines = r.stderr.split(separator: "\n").map(String.init)
        #expect(lines.filter { $0.hasPrefix("  failed ") }.count == 20, "\(r.stderr)")
        #expect(lines.filter { $0.hasPrefix("  c") }.count == 20)
        let runs = try await tasker(["runs", "--json"], in: s.dir)
        let id = try #require((JSONSerialization.jsonObject(with: Data(runs.stdout.utf8)) as? [[String: Any]])?.first?["id"] as? String)
        #expect(lines.contains("  … and 26 more failed tasks: tasker show \(id)"), "\(r.stderr)")
        #expect(lines.contains("  … and 2 more skipped tasks: tasker show \(id)"), "\(r.stderr)")
        let unrecorded = try await tasker(["run", "--no-progress", "--no-journal", "p.lua"], in: s.dir)
        #expect(unrecorded.stderr.contains("  … and 26 more failed tasks\n"), "\(unrecorded.stderr)")
    }
}

/// A defined task's error reads the same from a worker as in one process:
/// the kind is said once (it was `usage: defs.lua:3: usage: …`, and
/// `usage: usage: …` when the failure had no position).
@Suite struct WorkerErrorTextCLITests {
    @Test func aWorkersFailureReadsAsItDoesInOneProcess() async throws {
        let (server, url) = try await PostgresTestServer.freshDatabase()
        _ = server
        let s = try Scratch(["defs.lua": """
            bad = tasker.define("bad", function(ctx, args)
              tasker.sleep("x")
            end)
            slow = tasker.define("slow", {timeout = 0.2}, function(ctx, args)
              tasker.sleep(10)
            end)
            """, "p.lua": """
            dofile("defs.lua")
            for _, f in ipairs{bad, slow} do
              local ok, e = pcall(function() return f{}:await() end)
              print(tostring(e))
            end
            """])
        defer { s.cleanup() }
        let inProcess = try await tasker(["run", "--no-progress", "--no-journal", "p.lua"], in: s.dir)
        let worker = try Background(["worker", "--store", url, "--lease", "1", "defs.lua"], in: s.dir)
        let remote = try await tasker(["run", "--no-progress", "--store", url, "p.lua"], in: s.dir)
        worker.signal(SIGTERM)
        _ = await worker.finish()
        #expect(inProcess.stdout.contains("defs.lua:2: usage: bad argument #1 to 'tasker.sleep'"), "\(inProcess.stdout)")
        #expect(remote.stdout == inProcess.stdout, "\(remote.stdout)\(remote.stderr)")
        #expect(!remote.stderr.contains("usage: usage") && !remote.stderr.contains("timeout: timeout"), "\(remote.stderr)")
    }
}

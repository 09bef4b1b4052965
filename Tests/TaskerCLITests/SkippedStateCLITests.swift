import Foundation
import Testing

/// A task whose `after`/`when` condition is not met ends `skipped`: not a
/// failure, not a cancellation. A good night with a `when = "failure"` alert
/// says so everywhere: summary, exit code, events, journal, plan, report.
@Suite struct SkippedStateCLITests {
    static let pipeline = """
        local steps = {}
        for i = 1, 6 do steps[i] = tasker.add{name = "step" .. i, run = function() return i end} end
        local deploy = tasker.add{name = "deploy", after = steps, run = function() return "v2" end}
        local alert = tasker.add{name = "alert", after = deploy, when = "failure", run = function()
          print("paged!")
        end}
        alert:on("finish", function(h, state, err) print("finish", state, err.kind) end)
        local ok, err = alert:result()
        print("result", ok, err.kind, alert:state())
        local g = tasker.parallel{
          {name = "member", run = function() return 1 end},
          {name = "member-alert", after = deploy, when = "failure", run = function() end},
        }
        g:await()
        print("group", g:state())
        """

    @Test func aConditionNotMetIsSkippedInEveryOutput() async throws {
        let s = try Scratch(["p.lua": Self.pipeline])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--events", "ev.jsonl", "--report", "r.html", "p.lua"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stdout.contains("paged!"))
        #expect(r.stdout.contains("finish\tskipped\tdependency\n"), "\(r.stdout)")
        #expect(r.stdout.contains("result\tfalse\tdependency\tskipped\n"), "\(r.stdout)")
        // a skipped member is not a failure of its group
        #expect(r.stdout.contains("group\tsucceeded\n"), "\(r.stdout)")
        let head = try #require(r.stderr.split(separator: "\n").first { $0.hasPrefix("tasker: ") })
        #expect(head.hasPrefix("tasker: 10 tasks: 8 succeeded, 0 failed, 2 skipped in "), "\(r.stderr)")
        #expect(!r.stderr.contains("cancelled"), "\(r.stderr)")
        #expect(r.stderr.contains("  alert: skipped: dependency 'deploy' succeeded\n"), "\(r.stderr)")

        let events = try String(contentsOf: s.dir.appendingPathComponent("ev.jsonl"), encoding: .utf8)
            .split(separator: "\n").compactMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let finished = events.filter { $0["event"] as? String == "finished" && $0["name"] as? String == "alert" }
        #expect(finished.map { $0["state"] as? String } == ["skipped"])
        let end = try #require(events.last)
        #expect((end["counts"] as? [String: Int])?["skipped"] == 2, "\(end)")
        #expect((end["counts"] as? [String: Int])?["cancelled"] == nil, "\(end)")

        let show = try await tasker(["show", "last", "--json"], in: s.dir)
        let tasks = try #require(try JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])["tasks"]
            as? [[String: Any]]
        #expect(tasks?.first { $0["name"] as? String == "alert" }?["state"] as? String == "skipped", "\(show.stdout)")
        let plain = try await tasker(["show", "last"], in: s.dir)
        #expect(plain.stdout.contains("2 skipped"), "\(plain.stdout)")
        let runs = try await tasker(["runs"], in: s.dir)
        #expect(runs.stdout.contains("2 skipped"), "\(runs.stdout)")

        // resume: a skipped task is run again (its condition is judged anew)
        let plan = try await tasker(["run", "--resume", "--plan", "p.lua"], in: s.dir)
        #expect(plan.stdout.contains("run    alert  (skipped)"), "\(plan.stdout)")

        let html = try String(contentsOf: s.dir.appendingPathComponent("r.html"), encoding: .utf8)
        #expect(html.contains("<div class=\"value\">2</div><div class=\"label\">skipped</div>"))
        #expect(html.contains("did not run (skipped)"))
        #expect(!html.contains("label\">cancelled<"))
    }

    /// The rollback recipe: `after = {deploy, smoke}, when = "failure"`
    /// rolls back when either failed, and is skipped when both succeeded.
    @Test func aRollbackAfterSeveralStepsRunsWhenAnyFailed() async throws {
        let s = try Scratch(["p.lua": """
            local smoke_fails = tasker.vars.smoke == "fail"
            local deploy = tasker.add{name = "deploy", run = function() print("deployed") end}
            local smoke = tasker.add{name = "smoke", after = deploy, run = function()
              if smoke_fails then error("health check: 503") end
            end}
            tasker.add{name = "rollback", after = {deploy, smoke}, when = "failure", run = function() print("rolled back") end}
            """])
        defer { s.cleanup() }
        let bad = try await tasker(["run", "--no-progress", "--var", "smoke=fail", "p.lua"], in: s.dir)
        #expect(bad.status == 1)
        #expect(bad.stdout == "deployed\nrolled back\n", "\(bad.stdout)\(bad.stderr)")
        let good = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        #expect(good.status == 0)
        #expect(good.stdout == "deployed\n")
        #expect(good.stderr.contains("tasker: 3 tasks: 2 succeeded, 0 failed, 1 skipped in "), "\(good.stderr)")
        #expect(good.stderr.contains("  rollback: skipped: all 2 dependencies succeeded\n"), "\(good.stderr)")
    }

    /// An interrupt cancels what waits on a dependency for the interrupt's
    /// reason: the dependency being cancelled first does not make them skipped.
    @Test func anInterruptCancelsDependentsInsteadOfSkippingThem() async throws {
        let s = try Scratch(["p.lua": """
            local gate = tasker.add{name = "gate", run = function() print("gate open"); io.stdout:flush(); tasker.sleep(30) end}
            local dependent = tasker.add{name = "dependent", after = gate, run = function() end}
            tasker.add{name = "onfail", after = gate, when = "failure", run = function() end}
            tasker.add{name = "chain", after = dependent, run = function() end}
            """])
        defer { s.cleanup() }
        let r = try await taskerInterrupted(["run", "--no-progress", "p.lua"], in: s.dir, markers: ["gate open"])
        #expect(r.status == 130)
        #expect(r.stderr.contains("tasker: 4 tasks: 0 succeeded, 0 failed, 4 cancelled in "), "\(r.stderr)")
        #expect(!r.stderr.contains("skipped"), "\(r.stderr)")
    }

    /// A group's options are checked: `after`/`when` belong on its members.
    @Test func aGroupRefusesOptionsItDoesNotHave() async throws {
        let s = try Scratch(["p.lua": """
            local ok = tasker.add{name = "ok", run = function() end}
            tasker.parallel({{name = "x", run = function() print("x ran") end}}, {after = ok, when = "failure"})
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        #expect(r.status == 2)
        #expect(r.stderr.contains("p.lua:2: usage: unknown option 'after' to 'tasker.parallel'") ||
                r.stderr.contains("p.lua:2: usage: unknown option 'when' to 'tasker.parallel'"), "\(r.stderr)")
        #expect(!r.stdout.contains("x ran"))
    }

    @Test func aDependencyThatFailedSkipsItsDependentsAndTheRunFails() async throws {
        let s = try Scratch(["p.lua": """
            local build = tasker.add{name = "build", run = function() error("compiler crashed") end}
            local ship = tasker.add{name = "ship", after = build, run = function() end}
            tasker.add{name = "announce", after = ship, run = function() end}
            tasker.add{name = "rollback", after = build, when = "failure", run = function() print("rolled back") end}
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        #expect(r.status == 1)
        #expect(r.stdout == "rolled back\n")
        #expect(r.stderr.contains("tasker: 4 tasks: 1 succeeded, 1 failed, 2 skipped in "), "\(r.stderr)")
        #expect(r.stderr.contains("  ship: skipped: dependency 'build' failed\n"), "\(r.stderr)")
        #expect(r.stderr.contains("  announce: skipped: dependency 'ship' was skipped\n"), "\(r.stderr)")
    }
}

import Foundation
import Testing

/// What a run tells about itself beyond its tasks' states: retries, the
/// HTTP cap under the task slots, the summary in JSON, the `--var`s in `show`.
@Suite struct RunReportingCLITests {
    static let flaky = """
        tasker.add{name = "shard-3", retry = {attempts = 3, delay = 0.01}, run = function(ctx)
          if ctx.attempt < 2 then error("connection reset\\nsecond line") end
        end}
        tasker.add{name = "steady", run = function() end}
        """

    @Test func aRetryIsALogLineAndTheSummaryCountsRetriedTasks() async throws {
        let s = try Scratch(["p.lua": Self.flaky])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        #expect(r.status == 0)
        let retry = r.stderr.split(separator: "\n").filter { $0.contains("retrying") }
        #expect(retry.count == 1, "\(r.stderr)")
        #expect(retry.first?.contains("INFO [shard-3] attempt 1 failed, retrying in 0.01s: p.lua:2: connection reset") == true,
                "\(r.stderr)")
        #expect(r.stderr.contains(" succeeded, 0 failed in ") && r.stderr.contains("; 1 task retried\n"), "\(r.stderr)")
        // below --log-level info it is quiet
        let quiet = try await tasker(["run", "--no-progress", "--log-level", "warn", "p.lua"], in: s.dir)
        #expect(!quiet.stderr.contains("retrying"))
    }

    @Test func withJSONLogsTheSummaryIsAJSONLine() async throws {
        let s = try Scratch(["p.lua": Self.flaky + "\ntasker.add{name = \"bad\", run = function() error(\"boom\") end}\n"])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--log-format", "json", "p.lua"], in: s.dir)
        #expect(r.status == 1)
        let lines = r.stderr.split(separator: "\n")
        let objects = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(objects.count == lines.count, "a line that is not JSON: \(r.stderr)")
        let summary = try #require(objects.last)
        #expect(summary["msg"] as? String == "summary" && summary["level"] as? String == "error")
        #expect((summary["counts"] as? [String: Int]) == ["succeeded": 2, "failed": 1])
        #expect(summary["retried"] as? Int == 1)
        let failed = summary["failed"] as? [[String: String]]
        #expect(failed?.first?["name"] == "bad" && failed?.first?["error"]?.hasSuffix(": boom") == true, "\(summary)")
        // the text's rule: only tasks of a tenth of a second or more are worth a mention
        let slowest = summary["slowest"] as? [[String: Any]] ?? []
        #expect(slowest.allSatisfy { ($0["seconds"] as? Double ?? 0) >= 0.1 }, "\(summary)")
        #expect(summary["tasks"] as? Int == 3, "\(summary)")
    }

    @Test func anHTTPConcurrencyAboveTheTaskSlotsIsSaidOnce() async throws {
        let s = try Scratch(["p.lua": """
            http.configure{timeout = 5}
            http.configure{concurrency = 25}
            http.configure{concurrency = 30}
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        #expect(r.status == 0)
        let warnings = r.stderr.split(separator: "\n").filter { $0.contains("task slots") }
        #expect(warnings.count == 1, "\(r.stderr)")
        #expect(warnings.first?.contains("WARN p.lua:2: http.configure{concurrency = 25} is above the run's 16 task slots") == true)
        let roomy = try await tasker(["run", "--no-progress", "--concurrency", "32", "p.lua"], in: s.dir)
        #expect(!roomy.stderr.contains("task slots"), "\(roomy.stderr)")
        let help = try await tasker(["run", "--help"], in: s.dir)
        #expect(help.stdout.contains("also caps HTTP"))
    }

    @Test func showPrintsTheRunsArgsAndVarsAsRecorded() async throws {
        let s = try Scratch(["p.lua": "tasker.add(function() end)\n"])
        defer { s.cleanup() }
        _ = try await tasker(["run", "--no-progress", "--var", "env=prod", "--var", "api_token=hunter2", "p.lua", "eu-1"],
                             in: s.dir)
        let show = try await tasker(["show", "last"], in: s.dir)
        #expect(show.stdout.contains("\nargs eu-1\n"), "\(show.stdout)")
        #expect(show.stdout.contains("\nvars api_token=*** env=prod\n"), "\(show.stdout)")
        let json = try await tasker(["show", "last", "--json"], in: s.dir)
        let run = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(run["vars"] as? [String: String] == ["env": "prod", "api_token": "***"])
        #expect(!json.stdout.contains("hunter2") && !show.stdout.contains("hunter2"))
    }
}

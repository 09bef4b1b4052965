import Foundation
import Testing

/// The HTML report, opened in a real browser (Debian's headless Chromium,
/// installed by scripts/install-deps).
@Suite struct ReportCLITests {
    static func chromium() -> String? {
        ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"]
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    @Test func theReportShowsTheRunInABrowser() async throws {
        let browser = try #require(Self.chromium(), "chromium is missing: run scripts/install-deps")
        let s = try Scratch(["r.lua": """
            local fetch = tasker.add{name = "fetch-config", run = function() return 1 end}
            tasker.add{name = "flaky-api", retry = {attempts = 3, delay = 0.01}, run = function(ctx)
              if ctx.attempt < 3 then error("503 from upstream") end
            end}
            local build = tasker.add{name = "build-linux", after = fetch, run = function() end}
            local test = tasker.add{name = "unit-tests", after = build, run = function() error("2 tests failed: test_login") end}
            tasker.add{name = "deploy-prod", after = test, run = function() end}
            """])
        defer { s.cleanup() }
        let run = try await tasker(["run", "--no-progress", "--report", "run.html", "r.lua"], in: s.dir)
        #expect(run.status == 1)
        let again = try await tasker(["report", "last", "-o", "last.html"], in: s.dir)
        #expect(again.status == 0 && again.stdout == "last.html\n")

        let html = try String(contentsOf: s.dir.appendingPathComponent("run.html"), encoding: .utf8)
        // self-contained: nothing to fetch
        #expect(!html.contains("src=") && !html.contains("href=") && !html.contains("@import") && !html.contains("url(http"))

        let page = s.dir.appendingPathComponent("run.html").path
        let dom = try await shell("""
            '\(browser)' --headless --no-sandbox --disable-gpu --user-data-dir="$PWD/.chromium" \
              --dump-dom 'file://\(page)' 2>/dev/null
            """, in: s.dir)
        #expect(dom.status == 0)
        let text = Self.visibleText(dom.stdout)
        for expected in ["r.lua", "Timeline", "Dependencies", "Tasks with errors", "fetch-config", "flaky-api",
                         "build-linux", "unit-tests", "deploy-prod", "2 tests failed: test_login", "did not run (cancelled)"] {
            #expect(text.contains(expected), "the page does not show '\(expected)'")
        }
        // the retried task's failed attempts are drawn, joined by retry gaps
        #expect(dom.stdout.components(separatedBy: "class=\"fail\"").count - 1 >= 3)
        #expect(dom.stdout.contains("class=\"gap\""))
        // the exit code card says 1
        #expect(dom.stdout.contains("<div class=\"value\">1</div><div class=\"label\">exit code</div>"))
    }

    /// The text of the DOM with tags removed.
    static func visibleText(_ dom: String) -> String {
        var out = "", inTag = false
        for c in dom {
            if c == "<" { inTag = true } else if c == ">" { inTag = false; out.append(" ") } else if !inTag { out.append(c) }
        }
        return out
    }
}

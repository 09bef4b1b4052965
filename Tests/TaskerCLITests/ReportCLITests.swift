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
                         "build-linux", "unit-tests", "deploy-prod", "2 tests failed: test_login", "did not run (skipped)"] {
            #expect(text.contains(expected), "the page does not show '\(expected)'")
        }
        // the retried task's failed attempts are drawn, joined by retry gaps
        #expect(dom.stdout.components(separatedBy: "class=\"fail\"").count - 1 >= 3)
        #expect(dom.stdout.contains("class=\"gap\""))
        // the exit code card says 1
        #expect(dom.stdout.contains("<div class=\"value\">1</div><div class=\"label\">exit code</div>"))
    }

    /// Past `timelineRows` tasks the timeline draws a choice and says so;
    /// every failed task is still a row of the errors table; the page
    /// stays small and opens in the browser.
    @Test func aLargeRunsReportShowsAChoiceAndSaysSo() async throws {
        let browser = try #require(Self.chromium(), "chromium is missing: run scripts/install-deps")
        let s = try Scratch(["big.lua": """
            for i = 1, 3000 do
              tasker.add{name = "t" .. i, run = function() if i % 150 == 0 then error("boom " .. i) end end}
            end
            """])
        defer { s.cleanup() }
        let run = try await tasker(["run", "--no-progress", "--report", "big.html", "big.lua"], in: s.dir)
        #expect(run.status == 1, "\(run.stderr)")
        let html = try String(contentsOf: s.dir.appendingPathComponent("big.html"), encoding: .utf8)
        #expect(html.contains("3000 tasks: showing 250 (failed, retried, held and unfinished first, then the slowest)"))
        #expect(html.utf8.count < 300_000, "the page grows with the run: \(html.utf8.count) bytes")
        let errors = try #require(html.range(of: "<h2>Tasks with errors</h2>")).upperBound
        let table = html[errors..<(html[errors...].range(of: "</table>")?.lowerBound ?? html.endIndex)]
        for i in stride(from: 150, through: 3000, by: 150) {
            #expect(table.contains("<td>t\(i)</td>") && table.contains("boom \(i)"), "failed task t\(i) is not listed")
        }
        let dom = try await shell("""
            '\(browser)' --headless --no-sandbox --disable-gpu --user-data-dir="$PWD/.chromium" \
              --dump-dom 'file://\(s.dir.appendingPathComponent("big.html").path)' 2>/dev/null
            """, in: s.dir)
        #expect(dom.status == 0)
        #expect(Self.visibleText(dom.stdout).contains("showing 250"))
        #expect(dom.stdout.contains("<td>t3000</td>"))
    }

    /// Past a thousand tasks with errors the table stops and every one of
    /// them is counted by its error.
    @Test func pastAThousandFailuresTheReportCountsThemByError() async throws {
        let s = try Scratch(["fail.lua": """
            local why = {"disk full", "timeout talking to db", "bad input"}
            for i = 1, 1200 do
              tasker.add{name = "t" .. i, run = function() error(why[i % 3 + 1] .. "\\nat item " .. i, 0) end}
            end
            """])
        defer { s.cleanup() }
        let run = try await tasker(["run", "--no-progress", "--report", "f.html", "fail.lua"], in: s.dir)
        #expect(run.status == 1, "\(run.stderr)")
        let html = try String(contentsOf: s.dir.appendingPathComponent("f.html"), encoding: .utf8)
        #expect(html.contains("… and 200 more tasks with errors (1200 in all)"))
        for error in ["disk full", "timeout talking to db", "bad input"] {
            #expect(html.contains("<tr><td>400</td><td><span class=\"pill failed\">failed</span></td><td class=\"error\">\(error)</td>"),
                    "'\(error)' is not counted 400 times")
        }
    }

    /// Names and errors are text on the page, never markup; control
    /// characters are shown, not passed on; a huge error is cut.
    @Test func namesAndErrorsCannotInjectMarkup() async throws {
        let s = try Scratch(["x.lua": """
            tasker.add{name = "</script><img src=x onerror=alert(1)>", run = function() error("<b>bold</b>\\27[31mred", 0) end}
            tasker.add{name = "huge", run = function() error(string.rep("e", 1 << 20), 0) end}
            tasker.add{name = "gpj.\u{202E}exe", run = function() end}
            """])
        defer { s.cleanup() }
        let run = try await tasker(["run", "--no-progress", "--report", "x.html", "x.lua"], in: s.dir)
        #expect(run.status == 1, "\(run.stderr)")
        let html = try String(contentsOf: s.dir.appendingPathComponent("x.html"), encoding: .utf8)
        #expect(!html.contains("<img") && !html.contains("<b>") && !html.contains("</script>"))
        #expect(html.contains("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"))
        #expect(html.contains("&lt;b&gt;bold&lt;/b&gt;\u{241B}[31mred"))
        #expect(!html.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" })
        #expect(html.utf8.count < 100_000, "a 1 MiB error made a \(html.utf8.count)-byte page")
        // a direction override is shown, not obeyed (it would read 'exe.jpg')
        #expect(html.contains("gpj.[U+202E]exe") && !html.unicodeScalars.contains("\u{202E}"))
    }

    /// A script pausing in a loop: the page stays small, says how many
    /// pauses there were and how long they lasted in all, truthfully.
    @Test func aPauseStormIsCountedNotDrawn() async throws {
        let s = try Scratch(["p.lua": """
            local h = tasker.add{name = "victim", run = function() tasker.sleep(0.3) end}
            for i = 1, 20000 do h:pause(); h:resume() end
            for i = 1, 150 do tasker.pause(); tasker.resume() end
            """])
        defer { s.cleanup() }
        let run = try await tasker(["run", "--no-progress", "--report", "r.html", "p.lua"], in: s.dir)
        #expect(run.status == 0, "\(run.stderr)")
        let html = try String(contentsOf: s.dir.appendingPathComponent("r.html"), encoding: .utf8)
        #expect(html.utf8.count < 100_000)
        let header = try #require(html.range(of: " · paused ").map { html[$0.upperBound...].prefix(80) })
        #expect(header.contains("(150 times, the first 100 drawn)"), "\(header)")
        // each pause lasted next to nothing (a loaded machine stretches them a little)
        let total = header.prefix { $0 != " " }
        #expect(total.hasSuffix("ms") && (Double(total.dropLast(2)) ?? 1000) < 1000, "\(header)")
    }

    @Test func aRunWithoutTasksHasAReport() async throws {
        let s = try Scratch(["empty.lua": "-- nothing to do\n"])
        defer { s.cleanup() }
        let run = try await tasker(["run", "--no-progress", "--report", "e.html", "empty.lua"], in: s.dir)
        #expect(run.status == 0, "\(run.stderr)")
        let html = try String(contentsOf: s.dir.appendingPathComponent("e.html"), encoding: .utf8)
        #expect(html.contains("<p class=\"note\">No tasks.</p>") && html.contains("No task ran."))
        #expect(html.hasSuffix("</html>\n"))
    }

    /// The chart counts what held a slot: many short tasks at concurrency
    /// 4 (several in each slice of the chart; it said 12) and retries
    /// (whose waits hold no slot) never show more than 4 at once.
    @Test func theChartNeverShowsMoreAtOnceThanTheConcurrency() async throws {
        let s = try Scratch(["p.lua": """
            for i = 1, 400 do tasker.add(function() tasker.sleep(0.001) end) end
            for i = 1, 4 do
              tasker.add{retry = {attempts = 3, delay = 0.05}, run = function(ctx)
                tasker.sleep(0.01)
                if ctx.attempt < 3 then error("again") end
              end}
            end
            """])
        defer { s.cleanup() }
        let run = try await tasker(["run", "--no-progress", "--concurrency", "4", "--report", "r.html", "p.lua"], in: s.dir)
        #expect(run.status == 0, "\(run.stderr)")
        let html = try String(contentsOf: s.dir.appendingPathComponent("r.html"), encoding: .utf8)
        let peak = html.range(of: "running at once, average per slice (peak ").flatMap { r in
            Double(html[r.upperBound...].prefix { $0.isNumber || $0 == "." })
        }
        #expect(peak.map { $0 >= 1.5 && $0 <= 4.0 } ?? false, "peak \(String(describing: peak))")
    }

    /// The report of a run still going: its running task drawn up to now.
    @Test func aRunStillGoingHasAReport() async throws {
        let s = try Scratch(["live.lua": """
            tasker.add{name = "done", run = function() end}
            tasker.add{name = "long", run = function() print("started"); tasker.sleep(600) end}  -- killed by the test
            """])
        defer { s.cleanup() }
        let live = try Background(["run", "--no-progress", "live.lua"], in: s.dir)
        defer { live.signal(SIGKILL) }
        #expect(await live.waitFor("started"))
        // The journal records a running task within 50 ms: wait for it.
        var state = ""
        for _ in 0..<200 where state != "running" {
            let show = try await tasker(["show", "last", "--json"], in: s.dir)
            let run = try? JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any]
            state = ((run?["tasks"] as? [[String: Any]])?.first { $0["name"] as? String == "long" }?["state"] as? String) ?? ""
        }
        #expect(state == "running")
        let report = try await tasker(["report", "last", "-o", "live.html"], in: s.dir)
        #expect(report.status == 0, "\(report.stderr)")
        let html = try String(contentsOf: s.dir.appendingPathComponent("live.html"), encoding: .utf8)
        #expect(html.contains("<div class=\"value\">running</div><div class=\"label\">exit code</div>"))
        #expect(html.contains("class=\"running\"><title>long: attempt 1,"))
        #expect(html.contains("None: every task that finished succeeded."))
    }

    // MARK: where the report goes

    /// A symlink stays a link (its target gets the page) and a FIFO's
    /// reader gets the page: the path is written in place, not replaced.
    @Test func theReportIsWrittenIntoASymlinkOrAFIFO() async throws {
        let s = try Scratch(["p.lua": "tasker.add{name = 'only', run = function() end}\n"])
        defer { s.cleanup() }
        let fm = FileManager.default
        try fm.createSymbolicLink(atPath: s.dir.appendingPathComponent("link.html").path, withDestinationPath: "target.html")
        try fm.createSymbolicLink(atPath: s.dir.appendingPathComponent("runlink.html").path, withDestinationPath: "runtarget.html")
        let run = try await tasker(["run", "--no-progress", "--report", "runlink.html", "p.lua"], in: s.dir)
        #expect(run.status == 0, "\(run.stderr)")
        let report = try await tasker(["report", "last", "-o", "link.html"], in: s.dir)
        #expect(report.status == 0 && report.stdout == "link.html\n", "\(report.stderr)")
        for (link, target) in [("link.html", "target.html"), ("runlink.html", "runtarget.html")] {
            let type = try fm.attributesOfItem(atPath: s.dir.appendingPathComponent(link).path)[.type] as? FileAttributeType
            #expect(type == .typeSymbolicLink, "\(link) was replaced")
            let page = try String(contentsOf: s.dir.appendingPathComponent(target), encoding: .utf8)
            #expect(page.hasPrefix("<!DOCTYPE html>") && page.contains("only"))
        }
        let fifo = try await shell("""
            mkfifo pipe.html
            timeout 20 cat pipe.html > got.html & reader=$!
            "$TASKER" report last -o pipe.html || echo "report failed: $?"
            wait $reader || echo "reader failed: $?"
            test -p pipe.html || echo "pipe.html is no longer a FIFO"
            """, in: s.dir)
        #expect(fifo.status == 0 && fifo.stdout == "pipe.html\n", "\(fifo.stdout) \(fifo.stderr)")
        let got = try String(contentsOf: s.dir.appendingPathComponent("got.html"), encoding: .utf8)
        #expect(got.hasPrefix("<!DOCTYPE html>") && got.hasSuffix("</html>\n"))
    }

    /// A path that cannot be written: one line naming it and why (no
    /// Foundation error dump); `report` exits 1, a run keeps its own code.
    @Test func aReportThatCannotBeWrittenSaysWhyInOneLine() async throws {
        let s = try Scratch(["p.lua": "tasker.add{name = 'only', run = function() end}\n"])
        defer { s.cleanup() }
        try FileManager.default.createDirectory(at: s.dir.appendingPathComponent("adir"), withIntermediateDirectories: true)
        let run = try await tasker(["run", "--no-progress", "--report", "adir", "p.lua"], in: s.dir)
        #expect(run.status == 0)
        #expect(run.stderr.contains("tasker: error: cannot write report 'adir': Is a directory\n"), "\(run.stderr)")
        let missing = try await tasker(["report", "last", "-o", "nodir/r.html"], in: s.dir)
        #expect(missing.status == 1)
        #expect(missing.stderr == "tasker: error: cannot write report 'nodir/r.html': No such file or directory\n")
        #expect(missing.stdout.isEmpty)
        let dir = try await tasker(["report", "last", "-o", "adir"], in: s.dir)
        #expect(dir.status == 1)
        #expect(dir.stderr == "tasker: error: cannot write report 'adir': Is a directory\n")
        for r in [run, missing, dir] { #expect(!r.stderr.contains("Domain") && !r.stderr.contains("Cocoa")) }
    }

    /// Pauses (the run's and a task's) and the interrupt are recorded as
    /// they happen and drawn on a timeline that takes the page's width.
    @Test func theTimelineMarksPausesAndTheInterruptAcrossThePage() async throws {
        let browser = try #require(Self.chromium(), "chromium is missing: run scripts/install-deps")
        let s = try Scratch(["p.lua": """
            local b = tasker.add{name = "held-back", run = function() return 1 end}
            b:pause()
            tasker.pause()
            tasker.sleep(0.2)
            tasker.resume()
            b:resume()
            b:await()
            tasker.add{name = "long", run = function() print("long started"); io.stdout:flush(); tasker.sleep(30) end}
            """])
        defer { s.cleanup() }
        let r = try await taskerInterrupted(["run", "--no-progress", "--report", "r.html", "p.lua"], in: s.dir,
                                            markers: ["long started"])
        #expect(r.status == 130, "\(r.stderr)")
        // from the journal again, as any later `tasker report` reads it
        let again = try await tasker(["report", "last", "-o", "again.html"], in: s.dir)
        #expect(again.status == 0)
        for file in ["r.html", "again.html"] {
            let html = try String(contentsOf: s.dir.appendingPathComponent(file), encoding: .utf8)
            let bands = html.components(separatedBy: "class=\"paused\"><title>paused ").dropFirst()
            // the run's pause on the chart and the timeline, and the task's on its row
            #expect(bands.count == 3, "\(file): \(bands.count) pause bands")
            #expect(bands.allSatisfy { band in
                // each lasted about the 0.2 s the script slept, or from the start to then
                let title = band.components(separatedBy: "</title>")[0]
                let seconds = title.split(separator: "(").last.flatMap { part -> Double? in
                    let v = part.prefix { $0.isNumber || $0 == "." }
                    return part.dropFirst(v.count).hasPrefix("ms") ? Double(v).map { $0 / 1000 } : Double(v)
                }
                return seconds.map { $0 >= 0.15 && $0 < 5 } ?? false
            }, "\(file)")
            #expect(html.contains("class=\"stop\"><title>SIGINT at "), "\(file)")
            #expect(html.contains("stopped by SIGINT at "), "\(file)")
            // drawn to the page's width, not a fixed one
            #expect(html.contains("<svg class=\"timeline\" width=\"100%\""))
            #expect(html.contains("<svg class=\"chart\" width=\"100%\""))
        }
        let dom = try await shell("""
            '\(browser)' --headless --no-sandbox --disable-gpu --user-data-dir="$PWD/.chromium" \
              --dump-dom 'file://\(s.dir.appendingPathComponent("again.html").path)' 2>/dev/null
            """, in: s.dir)
        let text = Self.visibleText(dom.stdout)
        for expected in ["SIGINT at ", "paused", "interrupted", "held-back", "long"] {
            #expect(text.contains(expected), "the page does not show '\(expected)'")
        }
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

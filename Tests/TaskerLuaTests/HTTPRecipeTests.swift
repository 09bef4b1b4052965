import Foundation
import Testing
import TaskerLua

/// The repository's examples/ folder.
let examplesDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("examples")

/// Runs an example file as it is, against the test HTTP server.
func runExample(_ name: String, args: [String] = [], vars: [String: String] = [:],
                concurrency: Int = 16) async -> (lines: [String], diagnostics: String, result: RunResult) {
    let r = await runFile(examplesDirectory.appendingPathComponent(name).path, args: args, vars: vars,
                          concurrency: concurrency)
    return (r.output.split(separator: "\n").map(String.init), r.diagnostics, r.result)
}

/// The HTTP recipes in examples/, run for real against the test server.
/// (They share the server's default realm, so they run one at a time.)
@Suite(.serialized) struct HTTPRecipeTests {
    @Test func tokenRefreshFetchesEveryItemWithOneRefreshPerStorm() async throws {
        let server = TestHTTPServer.shared
        let before = server.refreshes("")
        let ids = (1...30).map(String.init)
        let r = await runExample("token_refresh.lua", args: ids, vars: ["api": server.base], concurrency: 30)
        #expect(r.result.exitCode == 0, "\(r.diagnostics)")
        #expect(r.lines == ["fetched 30 items (\(ids.joined(separator: ","))) after 1 token refresh(es)"])
        #expect(server.refreshes("") == before + 1)
        #expect(r.diagnostics.contains("token refreshed"))
    }

    @Test func healthcheckPrintsATableAlertsOnceAndFails() async throws {
        let server = TestHTTPServer.shared, base = server.base, hook = uniqueKey()
        let urls = ["\(base)/status/200", "\(base)/status/503", "\(base)/delay?s=5", "http://127.0.0.1:1/"]
        let r = await runExample("healthcheck.lua", args: urls,
                                 vars: ["webhook": "\(base)/collect?key=\(hook)", "timeout": "1"])
        #expect(r.result.exitCode == 1)
        #expect(r.lines.count == 5)
        let expected = [("UP   200", urls[0]), ("DOWN 503", urls[1]), ("DOWN timeout", urls[2]), ("DOWN connect", urls[3])]
        for (line, (prefix, url)) in zip(r.lines, expected) {
            #expect(line.hasPrefix(prefix) && line.hasSuffix(url), "\(r.lines)")
        }
        #expect(r.lines.last == "1 of 4 up")
        #expect(server.count(hook) == 1)
    }

    @Test func batchEventsShipsBatchesOfNAndTheRestAtTheEnd() async throws {
        let server = TestHTTPServer.shared, key = uniqueKey()
        let r = await runExample("batch_events.lua", args: ["12"], vars: ["collector": "\(server.base)/collect?key=\(key)"])
        #expect(r.result.exitCode == 0, "\(r.diagnostics)")
        #expect(r.lines == ["shipped 12 events in 3 batches"])
        #expect(server.count(key) == 3)
        #expect(server.count(key + ".items") == 12)
    }

    @Test func rateLimitedCrawlFollowsEveryPageWithinTheRate() async throws {
        let server = TestHTTPServer.shared, a = uniqueKey(), b = uniqueKey()
        let urls = ["\(server.base)/page?key=\(a)&p=1&of=4", "\(server.base)/page?key=\(b)&p=1&of=3"]
        let r = await runExample("rate_limited_crawl.lua", args: urls, vars: ["rate": "20"])
        #expect(r.result.exitCode == 0, "\(r.diagnostics)")
        #expect(r.lines.prefix(2) == ["\(urls[0]): 12 items over 4 pages", "\(urls[1]): 9 items over 3 pages"])
        #expect(r.lines.count == 3 && r.lines[2].hasPrefix("21 items, 7 requests, "))
        // 7 requests 1/20 s apart take at least 0.3 s: at most ~23/s measured
        let rate = Double(r.lines[2].split(separator: " ")[4]) ?? 999
        #expect(rate <= 23.5, "\(r.lines[2])")
        #expect(server.count(a) == 4 && server.count(b) == 3)
    }

    @Test func reportGathersMergesAndWritesJSONAndMarkdown() async throws {
        let server = TestHTTPServer.shared
        let out = "/tmp/tk-report-\(uniqueKey())"
        defer { try? FileManager.default.removeItem(atPath: out) }
        let urls = ["gamma", "alpha", "be"].map { "\(server.base)/metrics/\($0)" }
        let r = await runExample("report.lua", args: urls, vars: ["out": out])
        #expect(r.result.exitCode == 0, "\(r.diagnostics)")
        #expect(r.lines == ["wrote \(out)/report.json and \(out)/report.md (3 services)"])
        let md = try String(contentsOfFile: out + "/report.md", encoding: .utf8)
        #expect(md == """
            # Service report

            | service | requests | errors | error rate |
            |---|---|---|---|
            | alpha | 500 | 2 | 0.4% |
            | be | 200 | 2 | 1.0% |
            | gamma | 500 | 2 | 0.4% |
            | **total** | 1200 | 6 | 0.5% |

            """)
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: out + "/report.json"))) as? [String: Any]
        #expect((json?["total"] as? [String: Int]) == ["requests": 1200, "errors": 6])
        #expect((json?["services"] as? [[String: Any]])?.compactMap { $0["service"] as? String } == ["alpha", "be", "gamma"])
    }
}

import Foundation
import Testing
import TaskerLua

/// The repository's examples/ folder.
let examplesDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("examples")

/// Runs an example file as it is, against the test HTTP server.
func runExample(_ name: String, args: [String] = [], vars: [String: String] = [:],
                concurrency: Int = 16) async -> (lines: [String], diagnostics: String, result: RunResult) {
    let out = TextSink(), diag = TextSink()
    var options = LuaRuntime.Options()
    options.output = { out.append($0) }
    options.diagnostics = { diag.append($0 + "\n") }
    options.args = args
    options.vars = vars
    options.concurrency = concurrency
    let result = await PipelineRunner.run(path: examplesDirectory.appendingPathComponent(name).path, options: options)
    return (out.value.split(separator: "\n").map(String.init), diag.value, result)
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
}

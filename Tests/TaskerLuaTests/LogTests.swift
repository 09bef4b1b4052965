import Logging
import Testing

/// README, Processes: log.debug/info/warn/error(message [, fields]).
@Suite struct LogTests {
    @Test func linesAreLogfmtWithDateLevelTaskQuotingJSONTablesAndSecretsHidden() async throws {
        let r = try await runLua("""
            log.info("starting", {count = 3, url = "https://x", Authorization = "Bearer abc", ["x-api-key"] = "k"})
            tasker.add{name = "fetch", run = function() log.warn("slow response", {ms = 1200}) end}:await()
            log.error(42)
            log.info("fields", {note = 'has space', q = 'say "hi"', list = {"a", "b"}, map = {k = 1.5}, ok = true, empty = ""})
            log.info("odd", {f = print})
            """)
        let lines = r.diagnostics.split(separator: "\n").map(String.init)
        #expect(lines.count == 5)
        #expect(lines[0].range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d\d\dZ INFO starting Authorization=\*\*\* count=3 url=https://x x-api-key=\*\*\*$"#,
                               options: .regularExpression) != nil, "\(lines[0])")
        #expect(lines[1].hasSuffix("Z WARN [fetch] slow response ms=1200"))
        #expect(lines[2].hasSuffix("Z ERROR 42"))
        #expect(lines[3].hasSuffix(#"Z INFO fields empty="" list=["a","b"] map={"k":1.5} note="has space" ok=true q="say \"hi\"""#), "\(lines[3])")
        #expect(lines[4].contains("f=\"function: "), "\(lines[4])")
        #expect(!r.diagnostics.contains("Bearer"))
    }

    @Test func theLevelFiltersAndDebugIsOffByDefault() async throws {
        let script = """
            log.debug("d"); log.info("i"); log.warn("w"); log.error("e")
            """
        func levels(_ r: LuaRun) -> [String] { r.diagnostics.split(separator: "\n").map { String($0.dropFirst(25)) } }
        let info = try await runLua(script)
        #expect(levels(info) == ["INFO i", "WARN w", "ERROR e"])
        let debug = try await runLua(script, logLevel: .debug)
        #expect(levels(debug).count == 4)
        let errorOnly = try await runLua(script, logLevel: .error)
        #expect(levels(errorOnly) == ["ERROR e"])
    }

    @Test func badArgumentsAreUsageErrors() async throws {
        let r = try await runLua("""
            print(select(2, pcall(log.info)).message)
            print(select(2, pcall(log.warn, "x", "y")).message)
            """)
        #expect(r.lines == ["bad argument #1 to 'log.info' (string expected, got no value)",
                            "bad argument #2 to 'log.warn' (table expected, got string)"])
    }
}

import Logging
import Testing

/// README, Processes: log.debug/info/warn/error(message [, fields]).
@Suite struct LogTests {
    @Test func linesCarryTimeLevelTaskNameAndSortedFieldsWithSecretsHidden() async throws {
        let r = try await runLua("""
            log.info("starting", {count = 3, url = "https://x", Authorization = "Bearer abc", ["x-api-key"] = "k"})
            tasker.add{name = "fetch", run = function() log.warn("slow response", {ms = 1200}) end}:await()
            log.error(42)
            """)
        let lines = r.diagnostics.split(separator: "\n").map(String.init)
        #expect(lines.count == 3)
        #expect(lines[0].range(of: #"^\d\d:\d\d:\d\d\.\d\d\d INFO  starting Authorization=\*\*\* count=3 url=https://x x-api-key=\*\*\*$"#,
                               options: .regularExpression) != nil, "\(lines[0])")
        #expect(lines[1].hasSuffix("WARN  [fetch] slow response ms=1200"))
        #expect(lines[2].hasSuffix("ERROR 42"))
        #expect(!r.diagnostics.contains("Bearer"))
    }

    @Test func theLevelFiltersAndDebugIsOffByDefault() async throws {
        let script = """
            log.debug("d"); log.info("i"); log.warn("w"); log.error("e")
            """
        let info = try await runLua(script)
        #expect(info.diagnostics.split(separator: "\n").map { String($0.dropFirst(13)) } == ["INFO  i", "WARN  w", "ERROR e"])
        let debug = try await runLua(script, logLevel: .debug)
        #expect(debug.diagnostics.split(separator: "\n").count == 4)
        let errorOnly = try await runLua(script, logLevel: .error)
        #expect(errorOnly.diagnostics.split(separator: "\n").map { String($0.dropFirst(13)) } == ["ERROR e"])
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

import Logging
import TaskerLua
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

    /// Fields named for a credential are hidden too, at the top and inside
    /// tables; a key that only contains `key` (an object's key) is not.
    @Test func fieldsNamedForACredentialAreHidden() async throws {
        let r = try await runLua("""
            log.info("login", {password = "pw-1", ["X-Auth-Token"] = "tok-2", nested = {client_secret = "cs-3", api_key = "ak-4"},
                               cache_key = "a/b"})
            log.info("more", {private_key = "pk-5", privateKey = "pk-6", ssh_key = "sk-7", passphrase = "pp-8", pwd = "pw-9",
                              jwt = "jw-10", dsn = "ds-11", sessionid = "si-12", sort_key = "name"})
            """)
        #expect(r.diagnostics.contains(#"X-Auth-Token=*** cache_key=a/b nested={"api_key":"***","client_secret":"***"} password=***"#),
                "\(r.diagnostics)")
        for value in ["pw-1", "tok-2", "cs-3", "ak-4", "pk-5", "pk-6", "sk-7", "pp-8", "pw-9", "jw-10", "ds-11", "si-12"] {
            #expect(!r.diagnostics.contains(value), "\(value) in \(r.diagnostics)")
        }
        #expect(r.diagnostics.contains("sort_key=name"), "\(r.diagnostics)")
    }

    /// A hook's lines name the task it runs for: an interceptor's, a
    /// reactor's `when` and its reaction; an HTTP interceptor's, the task
    /// that made the request (none for the main chunk's).
    @Test func hooksLogUnderTheTaskTheyRunFor() async throws {
        let r = try await runLua("""
            tasker.intercept{name = "i", fn = function(t) log.info("interceptor") end}
            tasker.intercept{name = "h", on = "http", fn = function(t) log.info("http interceptor") end}
            tasker.react{name = "r", when = function(t, res) log.info("when"); return t.name == "job" end,
                         fn = function(t) log.info("reaction") end}
            tasker.add{name = "job", run = function() end}:await()
            tasker.add{name = "fetcher", run = function() pcall(http.get, "http://127.0.0.1:9/", {retry = false}) end}:await()
            pcall(http.get, "http://127.0.0.1:9/", {retry = false})
            """)
        let lines = r.diagnostics.split(separator: "\n").map { String($0.drop { $0 != " " }.dropFirst()) }
        #expect(lines == ["INFO [job] interceptor", "INFO [job] when", "INFO [job] reaction",
                          "INFO [fetcher] interceptor", "INFO [fetcher] http interceptor", "INFO [fetcher] when",
                          "INFO http interceptor"], "\(r.diagnostics)")
    }

    /// Header-like keys are secret inside a table field too (a request's
    /// or a response's headers logged whole), at any depth (the JSON format writes the same text).
    @Test func secretKeysInsideTableFieldsAreHidden() async throws {
        let script = """
            local headers = {Authorization = "Bearer tok-zzz-999", accept = "*/*"}
            log.info("outgoing", {headers = headers, deep = {a = {{cookie = "c=zzz-888", ["X-Api-Key"] = 7}}}})
            log.info("response", {headers = {["set-cookie"] = "sid=zzz-777; Path=/", ["content-type"] = "text/plain"}})
            local many = {}
            for i = 1, 20 do many["h" .. i] = i end
            many["Proxy-Authorization"] = "Basic zzz-666"
            log.info("big", {headers = many})
            """
        let r = try await runLua(script)
        #expect(!r.diagnostics.contains("zzz-"), "\(r.diagnostics)")
        #expect(r.diagnostics.contains("*/*") && r.diagnostics.contains("text/plain") && r.diagnostics.contains("\"h20\":20"),
                "\(r.diagnostics)")
        #expect(r.diagnostics.contains(#""Authorization":"***""#) && r.diagnostics.contains(#""X-Api-Key":"***""#),
                "\(r.diagnostics)")
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

    /// A field JSON cannot hold (a cycle, a function inside) is shown as
    /// Lua describes it, and the fields after it are still read.
    @Test func aFieldJSONRefusesIsDescribedAndTheRestStillLogged() async throws {
        let r = try await runLua("""
            local c = {}; c.self = c
            tasker.add(function()
              log.info("m", {a = 1, c = c, f = {g = print}, u = {list = {"\\xff"}}, n = {0/0, 1/0}, z = "last"})
            end):await()
            print("ok")
            """)
        #expect(r.lines == ["ok"], "\(r.output) \(r.result.mainError ?? "")")
        let line = r.diagnostics
        #expect(line.contains("a=1") && line.contains("z=last"), "\(line)")
        // a cycle has no JSON: described
        #expect(line.contains("c=\"table: "), "\(line)")
        // what JSON has no form for is shown as Lua shows it; the table stays JSON
        #expect(line.contains("f={\"g\":\"function: "), "\(line)")
        #expect(line.contains("u={\"list\":[\"\u{FFFD}\"]}"), "\(line)")
        #expect(line.contains("n=[\"") && line.contains("nan\",\"inf\"]"), "\(line)")
    }

    @Test func badArgumentsAreUsageErrors() async throws {
        let r = try await runLua("""
            print(select(2, pcall(log.info)).message)
            print(select(2, pcall(log.warn, "x", "y")).message)
            """)
        #expect(r.lines == ["bad argument #1 to 'log.info' (string expected, got no value)",
                            "bad argument #2 to 'log.warn' (table expected, got string)"])
    }

    /// What a script writes (a message, a field, a task name) can hold a
    /// newline, ESC, the C1 CSI, NUL: each log call is still one line, with
    /// those written as escapes, so no fake line and no terminal control.
    @Test func controlCharactersInMessagesFieldsAndNamesAreEscapedOneCallOneLine() async throws {
        let r = try await runLua(#"""
            log.info("ok\n2026-11-24T00:00:00.000Z ERROR [deploy] rollback failed")
            log.warn("cr\rover", {v = "a\nb", t = {x = "\27[2J"}, ["k\n"] = 1})
            log.info("tab\tkept")
            log.error("nul \0 esc \27[2J c1 \u{9b}31m del \127")
            tasker.add{name = "evil\n2026 ERROR [x]\r\27[2J", run = function() log.info("in task") end}:await()
            """#)
        let lines = r.diagnostics.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).dropLast()
        #expect(lines.count == 5, "\(r.diagnostics)")
        #expect(lines[0].hasSuffix(#"Z INFO "ok\n2026-11-24T00:00:00.000Z ERROR [deploy] rollback failed""#), "\(lines[0])")
        #expect(lines[1].hasSuffix(#"Z WARN "cr\rover" "k\n"=1 t={"x":"\u001b[2J"} v="a\nb""#), "\(lines[1])")
        #expect(lines[2].hasSuffix("Z INFO tab\tkept"))
        #expect(lines[3].hasSuffix(#"Z ERROR "nul \u0000 esc \u001b[2J c1 \u009b31m del \u007f""#), "\(lines[3])")
        #expect(lines[4].hasSuffix(#"Z INFO [evil\n2026 ERROR [x]\r\u001b[2J] in task"#), "\(lines[4])")
        #expect(!r.diagnostics.unicodeScalars.contains { ($0.value < 0x20 && $0 != "\n" && $0 != "\t") || (0x7F...0x9F).contains($0.value) })
    }

    @Test func jsonLinesEscapeEveryControlCharacter() {
        let sink = TextSink()
        var logger = Logger(label: "test") { _ in LineLogHandler(level: .info, format: .json) { sink.append($0 + "\n") } }
        logger.logLevel = .info
        logger.info("ok\n{\"level\":\"error\"}\u{1B}[2J\u{9B}", metadata: ["task": "a\rb", "f": "x\u{7F}\n"])
        let lines = sink.value.split(separator: "\n").map(String.init)
        #expect(lines.count == 1)
        #expect(lines[0].hasPrefix(#"{"level":"info","msg":"ok\n{\"level\":\"error\"}\u001b[2J\u009b","task":"a\rb","ts":"#), "\(lines[0])")
        #expect(lines[0].hasSuffix(#","fields":{"f":"x\u007f\n"}}"#), "\(lines[0])")
    }

    /// The characters that reorder a bidi terminal and the Unicode line
    /// breaks, in both formats: a message, a key, a value.
    @Test func logLinesEscapeReorderingCharacters() {
        for format in [LineLogHandler.Format.logfmt, .json] {
            let sink = TextSink()
            var logger = Logger(label: "test") { _ in LineLogHandler(level: .info, format: format) { sink.append($0 + "\n") } }
            logger.logLevel = .info
            logger.info("gpj.\u{202E}exe\u{2028}x", metadata: ["k\u{2066}": "v\u{200F}"])
            let line = sink.value
            #expect(line.contains(#"gpj.\u202eexe\u2028x"#) && line.contains(#"k\u2066"#) && line.contains(#"v\u200f"#), "\(line)")
            #expect(!line.unicodeScalars.contains { (0x200E...0x2069).contains($0.value) }, "\(line)")
        }
    }

    /// `stream=true`: a child's `\r` (a progress meter) and ESC are escaped,
    /// lines still split at `\n`, a CRLF line end dropped, tabs kept.
    @Test func streamedLinesCannotRewriteTheStatusLineOrDriveTheTerminal() async throws {
        let r = try await runLua(#"""
            tasker.add{name = "dl\27[2J", run = function()
              tasker.sh([[printf ' 10%%\r 50%%\r100%%\n\033[2Jcleared\n\tindented\r\n\302\233c1\n']], {stream = true})
            end}:await()
            """#)
        #expect(r.diagnostics == #"""
            [dl\u001b[2J]  10%\r 50%\r100%
            [dl\u001b[2J] \u001b[2Jcleared
            [dl\u001b[2J] \#tindented
            [dl\u001b[2J] \u009bc1

            """#, "\(r.diagnostics)")
    }
}

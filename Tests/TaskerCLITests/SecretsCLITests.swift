import Foundation
import Testing

/// Registered secrets (`tasker.secret`, a `secret = true` parameter) are
/// `***` in every byte tasker writes: stderr (logs, stream lines, errors,
/// the summary), the events file, the journal's files, `show`, the report.
@Suite struct SecretsCLITests {
    static let pipeline = """
        local token = tasker.param{name = "token", secret = true, required = true}
        local api = tasker.secret("API_KEY")
        local db = tasker.secret("db", {file = "db.pass"})
        local pin = tasker.secret("PIN")
        log.info("using " .. token .. " and " .. api .. " and " .. db .. " pin " .. pin)
        tasker.add{name = "call-" .. api, run = function()
          tasker.sh("echo streamed " .. db .. " >&2; exit 1", {stream = true})
        end}
        tasker.add{name = "value", run = function() return {token = token} end}
        tasker.add{name = "boom", run = function() error("auth failed with " .. token) end}
        -- a lone integer result (the journal's writer formats it) holding a secret
        local code = math.tointeger(tonumber(tasker.secret("CODE")))
        tasker.add(function() return code end)
        -- a named task that succeeds (the journal's plain entries) named with a secret
        tasker.add{name = "ok-" .. api, run = function() end}
        """
    static let secrets = ["tok-SECRET-1", "key-12345", "db-pa55word", "73519264"]

    /// Text cut to a length (the summary's 2,000 bytes, a command shown in
    /// 200 characters, a stderr line in 500, the last 4 KiB of stderr) is
    /// masked before it is cut: no piece of a secret is left.
    /// A plain parameter that a secret is taken from (`tasker.secret(name,
    /// {param = ...})`) is recorded as `***` in the run's args too.
    @Test func aParameterASecretIsTakenFromIsMaskedInTheRecordedArgs() async throws {
        let secret = "Pq7Lm3Xw9Tt2Rs"
        let s = try Scratch(["p.lua": """
            local plain = tasker.param{name = "plain"}
            local v = tasker.secret("ALT", {param = "plain"})
            local named = tasker.param{name = "rename"}
            local tok = tasker.param {
              secret=true, help = "an API token",
              name = 'api-tok',
            }
            tasker.add{name = "use", run = function() log.info("got", {v = v}) end}
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--events", "ev.jsonl", "--state", "state", "p.lua", "--plain", secret,
                                  "--api-tok", secret + "2", "--rename", "shown"],
                                 in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        var texts = [("stderr", r.stderr)]
        texts.append(("events", (try? String(contentsOf: s.dir.appendingPathComponent("ev.jsonl"), encoding: .utf8)) ?? ""))
        texts.append(("runs", try await tasker(["runs", "--json", "--state", "state"], in: s.dir).stdout))
        texts.append(("show", try await tasker(["show", "last", "--state", "state"], in: s.dir).stdout))
        let state = s.dir.appendingPathComponent("state")
        for f in try FileManager.default.contentsOfDirectory(atPath: state.path) {
            texts.append((f, String(decoding: try Data(contentsOf: state.appendingPathComponent(f)), as: UTF8.self)))
        }
        for (what, text) in texts { #expect(!text.contains(secret), "the secret in \(what)") }
        #expect(texts[1].1.contains("\"--plain\",\"***\""), "\(texts[1].1)")
        // a secret parameter declared over lines, `secret` first, in single quotes
        #expect(texts[1].1.contains("\"--api-tok\",\"***\""), "\(texts[1].1)")
        #expect(texts[1].1.contains("\"--rename\",\"shown\""), "\(texts[1].1)")
    }

    /// Parameters are found in the pipeline's text before it runs: text
    /// that looks like a declaration (in a help string, in a comment of a
    /// call never closed) does not hide the declaration itself.
    @Test func secretParametersAreMaskedWhateverTextSurroundsTheirDeclarations() async throws {
        let s = try Scratch(["p.lua": """
            -- e.g. tasker.secret(NAME, {param = "example"
            local a = tasker.param{help = "caféname = 'x'", name = "pin", secret = true}
            tasker.param{name = "pw"}
            local b = tasker.secret("PW", {param = "pw"})
            tasker.add{name = "t", run = function() end}
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--state", "state", "p.lua", "--pin", "hunter2a", "--pw", "hunter2b"],
                                 in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        let runs = try await tasker(["runs", "--json", "--state", "state"], in: s.dir).stdout
        let show = try await tasker(["show", "last", "--state", "state"], in: s.dir).stdout
        for text in [runs, show, r.stderr] { #expect(!text.contains("hunter2"), "\(text)") }
        let recorded = try JSONSerialization.jsonObject(with: Data(runs.utf8)) as? [[String: Any]]
        #expect(recorded?.first?["args"] as? [String] == ["--pin", "***", "--pw", "***"], "\(runs)")
    }

    /// Declarations are read as Lua reads them: a `}` in a help text, a
    /// nested `choices = {…}` or a comment does not end one before its
    /// `secret = true`; `tasker.param({…})` and a long-bracket secret name
    /// count too. A commented-out declaration declares nothing.
    @Test func secretParametersAreFoundPastNestedTablesStringsAndComments() async throws {
        let s = try Scratch(["p.lua": """
            local c = tasker.param{name="env", choices={"alpha-key-1","beta-key-2"}, secret=true}
            local d = tasker.param{name="tok", help="the {token}", secret=true}
            local f = tasker.param({name="tok3", secret=true})
            local g = tasker.param {
              name = "tok4",  -- a comment }
              secret = true,
            }
            local k = tasker.secret([[TOKD]])
            -- tasker.param{name="plain", secret=true}
            local l = tasker.param{name="plain"}
            tasker.add{name = "t", run = function() end}
            """])
        defer { s.cleanup() }
        var env = ProcessInfo.processInfo.environment
        env["TOKD"] = "dddd-4444"
        let r = try await collect(launch(["run", "--no-progress", "--state", "state", "--events", "ev.jsonl", "p.lua", "--env", "beta-key-2",
                                          "--tok", "hunter3a", "--tok3", "hunter3b", "--tok4", "hunter3c", "--plain", "shown", "dddd-4444"],
                                         in: s.dir, environment: env))
        #expect(r.status == 0, "\(r.stderr)")
        let events = try String(contentsOfFile: s.dir.appendingPathComponent("ev.jsonl").path, encoding: .utf8)
        let runLine = events.split(separator: "\n").first.map(String.init) ?? ""
        #expect(runLine.contains(#""args":["--env","***","--tok","***","--tok3","***","--tok4","***","--plain","shown","***"]"#),
                "\(runLine)")
        // the value of a secret parameter is masked wherever else it is
        let again = try await tasker(["run", "--no-progress", "--state", "state", "--events", "ev2.jsonl", "p.lua", "--env", "alpha-key-1",
                                      "--tok", "hunter3d", "also=hunter3d", "dddd-4444"], in: s.dir)
        let line = try String(contentsOfFile: s.dir.appendingPathComponent("ev2.jsonl").path, encoding: .utf8)
            .split(separator: "\n").first.map(String.init) ?? ""
        #expect(again.status == 2 || again.status == 0, "\(again.stderr)")
        #expect(!line.contains("hunter3d") && line.contains("also=***"), "\(line)")
    }

    /// A value refused for a secret parameter (not a number, not one of its
    /// choices) is masked all the same: the run's record keeps `***`, even
    /// when the declaration's name is computed (not found before the run).
    @Test func aValueRefusedForASecretParameterIsNotRecorded() async throws {
        let s = try Scratch(["p.lua": """
            local n = "p" .. "in"
            tasker.param{name = n, type = "number", secret = true}
            tasker.add{name = "t", run = function() end}
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--state", "state", "p.lua", "--pin", "notanumber-hunter4"], in: s.dir)
        #expect(r.status == 2, "\(r.stderr)")
        #expect(r.stderr.contains("bad value for parameter --pin: '***'"), "\(r.stderr)")
        let show = try await tasker(["show", "last", "--json", "--state", "state"], in: s.dir).stdout
        #expect(show.contains(#""args" : ["--pin","***"]"#), "\(show)")
        #expect(!show.contains("hunter4"), "\(show)")
    }

    /// A file of declarations never closed is read in one pass: 60,000
    /// calls each searched to the end of the file took minutes.
    @Test func unclosedDeclarationsByTheThousandDoNotHoldUpTheRun() async throws {
        let s = try Scratch(["p.lua": "-- " + String(repeating: "tasker.secret( x ", count: 60000) + "\n"
                                 + "-- " + String(repeating: "tasker.param{ ", count: 60000) + "\n"
                                 + "tasker.param{name = \"pw\", secret = true}\n",
                             // nested declarations outside comments (Lua refuses the file: it
                             // nests too deep): each read to the end of the file took minutes
                             "nested.lua": String(repeating: "tasker.param{", count: 30000) + String(repeating: "}", count: 30000) + "\n"])
        defer { s.cleanup() }
        let started = Date()
        let r = try await tasker(["run", "--no-progress", "--state", "state", "p.lua", "--pw", "hunter2c"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        let nested = try await tasker(["run", "--no-progress", "--state", "state", "nested.lua"], in: s.dir)
        #expect(nested.status == 2, "\(nested.stderr)")
        #expect(Date().timeIntervalSince(started) < 120, "a generous bound: one pass takes about 2 s in a debug build (65 s seen under a full suite and two builds beside it)")
    }

    /// A secret with quotes, backslashes or a tab that the script turns
    /// into JSON (`json.encode`) and tasker then writes as JSON again (the
    /// events, JSON logs, the journal) is escaped twice: still masked.
    @Test func aSecretJSONEncodedByTheScriptIsMaskedWhenEscapedAgain() async throws {
        let s = try Scratch(["p.lua": """
            local S = tasker.secret("SEKRET")
            local J = json.encode({token = S})
            log.info(J, {body = J})
            tasker.add{name = "value", run = function() return J end}
            tasker.add{name = "boom", run = function() error(J, 0) end}
            """])
        defer { s.cleanup() }
        for secret in [#"pa"ss\word99"#, "tab\tword99x"] {
            let r = try await shell("""
                SEKRET=$(printf '%b' '\(secret)') $TASKER run --no-progress --events ev.jsonl --log-format json --state state p.lua
                """, in: s.dir)
            #expect(r.status == 1, "\(r.stderr)")
            var texts = [("stderr", r.stderr), ("stdout", r.stdout)]
            texts.append(("events", (try? String(contentsOf: s.dir.appendingPathComponent("ev.jsonl"), encoding: .utf8)) ?? ""))
            let state = s.dir.appendingPathComponent("state")
            for f in try FileManager.default.contentsOfDirectory(atPath: state.path) {
                texts.append((f, String(decoding: try Data(contentsOf: state.appendingPathComponent(f)), as: UTF8.self)))
            }
            let logfmt = try await shell("SEKRET=$(printf '%b' '\(secret)') $TASKER run --no-progress --no-journal p.lua", in: s.dir)
            texts.append(("logfmt", logfmt.stderr))
            for (what, text) in texts { #expect(!text.contains("word99"), "the secret in \(what): \(text.prefix(2000))") }
        }
    }

    @Test func cutTextKeepsNoPieceOfASecret() async throws {
        let secret = "Zq9Kp2LmXw7Rt4VbNs8Hd"
        let s = try Scratch(["p.lua": """
            local S = tasker.secret("SEKRET")
            tasker.add{name = "long", run = function() error(string.rep("x", 1980) .. S, 0) end}
            tasker.add{name = "cmd", run = function() tasker.sh("true " .. string.rep("d", 175) .. S .. "; exit 5") end}
            tasker.add{name = "line", run = function()
              tasker.sh("printf '%s' " .. string.rep("e", 490) .. S .. " >&2; exit 3")
            end}
            tasker.add{name = "tail", run = function()
              tasker.sh("printf '%s' " .. S .. " >&2; head -c 4090 /dev/zero | tr '\\\\0' f >&2; exit 4")
            end}
            -- a defined task's name (60 characters), an error table (300
            -- bytes), a retry's log line (300), a usage error's quote (80)
            -- and the output the journal keeps (the last MiB)
            local d = tasker.define("dd", function() return 1 end)
            d{args = {a = string.rep("a", 50) .. S}}
            tasker.add{name = "table", run = function() error({a = string.rep("t", 285) .. S}) end}
            tasker.add{name = "retried", retry = {attempts = 2, delay = 0.01}, run = function()
              error(string.rep("r", 275) .. S)
            end}
            tasker.add{name = "quote", run = function() tasker.exec("echo " .. string.rep("q", 65) .. S) end}
            tasker.add{name = "kept", run = function()
              tasker.sh([[printf '%s' "$S"; head -c 1048570 /dev/zero | tr '\\0' k; exit 1]], {env = {S = S}})
            end}
            """])
        defer { s.cleanup() }
        let r = try await shell("SEKRET=\(secret) $TASKER run --no-progress --events ev.jsonl --state state p.lua", in: s.dir)
        #expect(r.status == 1, "\(r.stderr)")
        var texts = [("stderr", r.stderr)]
        texts.append(("events", (try? String(contentsOf: s.dir.appendingPathComponent("ev.jsonl"), encoding: .utf8)) ?? ""))
        texts.append(("show", try await tasker(["show", "last", "--json", "--state", "state"], in: s.dir).stdout))
        texts.append(("output", try await tasker(["show", "last", "--task", "kept", "--output", "--state", "state"], in: s.dir).stdout))
        let state = s.dir.appendingPathComponent("state")
        for f in try FileManager.default.contentsOfDirectory(atPath: state.path) {
            texts.append((f, String(decoding: try Data(contentsOf: state.appendingPathComponent(f)), as: UTF8.self)))
        }
        // every piece of 6 characters
        let pieces = (0...(secret.count - 6)).map { String(Array(secret)[$0..<($0 + 6)]) }
        for (what, text) in texts {
            for piece in pieces { #expect(!text.contains(piece), "\(piece) in \(what)") }
        }
        #expect(r.stderr.contains("***"), "\(r.stderr)")
    }

    /// A value holding a secret is not recorded (masked, it would come back
    /// on resume as `***`): the task says so and runs again on resume,
    /// whatever form the secret takes in it (a string, a table's, a number,
    /// bytes that are not UTF-8, stored as base64).
    @Test func valuesHoldingASecretAreNotRecordedAndRunAgainOnResume() async throws {
        let s = try Scratch(["p.lua": """
            local S = tasker.secret("SEKRET")
            local pin = tasker.param{name = "pin", type = "integer", secret = true}
            local hs = {
              tasker.add{name = "string", run = function() return S end},
              tasker.add{name = "table", run = function() return {tok = S} end},
              tasker.add{name = "number", run = function() return pin end},
              tasker.add{name = "bytes", run = function() return "\\xff" .. S end},
              tasker.add{name = "plain", run = function() return "no secret" end},
            }
            -- an explicit id holding one: recorded as ***, it could never match again
            tasker.add{id = "deploy-" .. S, run = function() end}
            -- a secret that is not UTF-8 itself (stored as base64, it was kept)
            local B = tasker.secret("BIN", {file = "bin.txt"})
            tasker.add{name = "binary", run = function() return B end}
            local got = {}
            for i, h in ipairs(hs) do
              local v = h:await()
              got[i] = type(v) == "table" and v.tok or v
            end
            print("same " .. tostring(got[1] == S and got[2] == S and got[3] == pin and got[4] == "\\xff" .. S))
            """])
        defer { s.cleanup() }
        try Data([0x61, 0x62, 0xC3, 0x28, 0xFF, 0x63, 0x64, 0x65]).write(to: s.dir.appendingPathComponent("bin.txt"))
        let env = "SEKRET=Zq9Kp2LmXw7Rt4Vb"
        let first = try await shell("\(env) $TASKER run --no-progress --state state p.lua --pin 48291377", in: s.dir)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("same true"), "\(first.stdout)")
        for name in ["string", "table", "number", "bytes", "binary"] {
            #expect(first.stderr.contains("task '\(name)': its values cannot be stored: they hold a secret"), "\(first.stderr)")
        }
        #expect(!first.stderr.contains("task 'plain'"), "\(first.stderr)")
        let resumed = try await shell("\(env) $TASKER run --no-progress --state state --resume p.lua --pin 48291377", in: s.dir)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        // the secret came back as itself, not as ***: the four ran again
        #expect(resumed.stdout.contains("same true"), "\(resumed.stdout)")
        #expect(resumed.stderr.contains("7 succeeded (1 reused)"), "\(resumed.stderr)")
        let plan = try await shell("\(env) $TASKER run --no-progress --state state --resume --plan p.lua --pin 48291377", in: s.dir)
        #expect(plan.stdout.contains("not resumable: its id holds a secret"), "\(plan.stdout)")
        let state = s.dir.appendingPathComponent("state")
        for f in try FileManager.default.contentsOfDirectory(atPath: state.path) {
            let text = String(decoding: try Data(contentsOf: state.appendingPathComponent(f)), as: UTF8.self)
            for piece in ["Zq9Kp2LmXw7Rt4Vb", "48291377", String((Data([0xff]) + Data("Zq9Kp2LmXw7Rt4Vb".utf8)).base64EncodedString().prefix(12))] {
                #expect(!text.contains(piece), "\(piece) in \(f)")
            }
        }
    }

    /// A value recorded before a secret it holds is registered is not
    /// kept as `***` (a resume gave that back, a string for an integer):
    /// it is not kept, and the task runs again. Plain and full entries.
    @Test func aValueHoldingASecretRegisteredAfterItsTaskEndedRunsAgainOnResume() async throws {
        let s = try Scratch(["p.lua": """
            local v = math.tointeger(os.getenv("MYSEC"))
            local a = tasker.add(function() return v end)
            local b = tasker.add{name = "named", run = function() return "s" .. v end}
            print("got", a:await(), math.type(a:await()), b:await())
            tasker.secret("MY" .. "SEC")
            tasker.sleep(0.2)
            """])
        defer { s.cleanup() }
        let env = "MYSEC=31415926535"
        let first = try await shell("\(env) $TASKER run --no-progress --state st p.lua", in: s.dir)
        #expect(first.status == 0 && first.stdout.contains("got\t31415926535\tinteger\ts31415926535"), "\(first.stdout)\(first.stderr)")
        let resumed = try await shell("\(env) $TASKER run --no-progress --state st --resume p.lua", in: s.dir)
        #expect(resumed.stdout.contains("got\t31415926535\tinteger\ts31415926535"), "\(resumed.stdout)\(resumed.stderr)")
        #expect(!resumed.stderr.contains("reused"), "\(resumed.stderr)")
        let plan = try await shell("\(env) $TASKER run --state st --resume --plan p.lua", in: s.dir)
        #expect(plan.stdout.contains("named  (succeeded, but its values were not stored)"), "\(plan.stdout)")
    }

    @Test func secretsAreMaskedInEveryOutput() async throws {
        let s = try Scratch(["p.lua": Self.pipeline, "db.pass": "db-pa55word\n"])
        defer { s.cleanup() }
        let r = try await shell("""
            API_KEY=key-12345 PIN=42 CODE=73519264 $TASKER run --no-progress --events - --report r.html p.lua --token tok-SECRET-1
            """, in: s.dir)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("INFO using *** and *** and *** pin 42"), "\(r.stderr)")
        #expect(r.stderr.contains("[call-***] streamed ***"), "\(r.stderr)")
        #expect(r.stderr.contains("failed boom: p.lua:10: auth failed with ***"), "\(r.stderr)")
        #expect(r.stdout.contains("\"name\":\"call-***\""), "events: \(r.stdout)")
        let show = try await tasker(["show", "last", "--json"], in: s.dir)
        let runs = try await tasker(["runs", "--json"], in: s.dir)
        let output = try await tasker(["show", "last", "--output"], in: s.dir)
        let report = try String(contentsOf: s.dir.appendingPathComponent("r.html"), encoding: .utf8)
        var journal = Data()
        let state = s.dir.appendingPathComponent(".tasker-state")
        for f in try FileManager.default.contentsOfDirectory(atPath: state.path) {
            journal += try Data(contentsOf: state.appendingPathComponent(f))
        }
        #expect(journal.count > 0)
        for secret in Self.secrets {
            for (what, text) in [("stderr", r.stderr), ("events", r.stdout), ("show", show.stdout), ("runs", runs.stdout),
                                 ("output", output.stdout), ("report", report)] {
                #expect(!text.contains(secret), "\(secret) in \(what)")
            }
            #expect(journal.range(of: Data(secret.utf8)) == nil, "\(secret) in the journal's files")
        }
        // the args as recorded, and a value
        #expect(runs.stdout.contains("\"--token\",\"***\"") || runs.stdout.contains("\"***\""), "\(runs.stdout)")
        #expect(show.stdout.contains("***"), "\(show.stdout)")
    }

    /// A method is sent upper-cased; shown, it is masked first (the
    /// upper-case spelling of a secret is not the one registered).
    @Test func aSecretUsedAsAnHTTPMethodIsMaskedBeforeItIsUpperCased() async throws {
        let s = try Scratch(["p.lua": """
            local S = tasker.secret("VERB")
            tasker.add{name = "call", run = function() http.request{method = S, url = "http://127.0.0.1:1/x", retry = false} end}
            """])
        defer { s.cleanup() }
        let r = try await shell("VERB=purgeverb $TASKER run --no-progress --events - --no-journal p.lua", in: s.dir)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("*** http://127.0.0.1:1/x"), "\(r.stderr)")
        for (what, text) in [("stderr", r.stderr), ("events", r.stdout)] {
            #expect(!text.lowercased().contains("purgeverb"), "the method in \(what): \(text)")
        }
    }

    /// A URL's password and secret query values given as an arg or a
    /// `--var` are `***` in every output, not only in the recorded command
    /// line: in the script's own errors, logs, names, values and events.
    @Test func urlCredentialsInArgsAndVarsAreMaskedEverywhere() async throws {
        let s = try Scratch(["p.lua": """
            local url = tasker.args[1]
            log.info("fetching " .. url, {url = url})
            tasker.add{name = "fetch " .. url, run = function() error("cannot fetch " .. url, 0) end}
            tasker.add{name = "var", run = function() error("bad endpoint " .. tasker.vars.endpoint, 0) end}
            tasker.add{name = "value", run = function() return {url, tasker.args[2]} end}
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--events", "ev.json", "--report", "r.html", "--var",
                                  "endpoint=https://bob:vArPaSs@h/x", "p.lua",
                                  "https://bob:uRlPa%2Fss@example.com/x?api_key=qUeRyKeY&q=1", "--token", "tOkEnWoRd"], in: s.dir)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("cannot fetch https://***@example.com/x?api_key=***&q=1"), "\(r.stderr)")
        let show = try await tasker(["show", "last", "--json"], in: s.dir)
        let events = try String(contentsOf: s.dir.appendingPathComponent("ev.json"), encoding: .utf8)
        let report = try String(contentsOf: s.dir.appendingPathComponent("r.html"), encoding: .utf8)
        var journal = Data()
        let state = s.dir.appendingPathComponent(".tasker-state")
        for f in try FileManager.default.contentsOfDirectory(atPath: state.path) {
            journal += try Data(contentsOf: state.appendingPathComponent(f))
        }
        for secret in ["uRlPa%2Fss", "uRlPa/ss", "qUeRyKeY", "vArPaSs", "tOkEnWoRd"] {
            for (what, text) in [("stderr", r.stderr), ("events", events), ("show", show.stdout), ("report", report)] {
                #expect(!text.contains(secret), "\(secret) in \(what)")
            }
            #expect(journal.range(of: Data(secret.utf8)) == nil, "\(secret) in the journal's files")
        }
    }

    /// Only what is surely a secret becomes one: a flag whose name looks
    /// secret (`--max-tokens 1000`), `NAME=VALUE` with such a name, a URL's
    /// user without a password are hidden in the record only, so the output
    /// and stored values (and their reuse on resume) keep them.
    @Test func wordsHiddenForTheirNameAloneAreNotSecretsOfTheRun() async throws {
        let s = try Scratch(["p.lua": """
            log.info("connecting to postgres as " .. tasker.args[2] .. " with " .. tasker.args[3])
            tasker.add{id = "count", name = "deploy", run = function() return {items = 1000, ok = true} end}
            """])
        defer { s.cleanup() }
        let first = try await tasker(["run", "--no-progress", "--var", "db=postgres://postgres@db/app", "p.lua",
                                      "--max-tokens", "1000", "sort_key=true"], in: s.dir)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stderr.contains("connecting to postgres as 1000 with sort_key=true"), "\(first.stderr)")
        let runs = try await tasker(["runs", "--json"], in: s.dir)
        // the record still hides them
        let compact = runs.stdout.filter { !$0.isWhitespace }
        #expect(compact.contains("\"--max-tokens\",\"***\",\"sort_key=***\""), "\(runs.stdout)")
        let resumed = try await tasker(["run", "--no-progress", "--resume", "--var", "db=postgres://postgres@db/app", "p.lua",
                                        "--max-tokens", "1000", "sort_key=true"], in: s.dir)
        #expect(resumed.stderr.contains("1 succeeded (1 reused)"), "\(resumed.stderr)")
        let show = try await tasker(["show", "last", "--json"], in: s.dir)
        #expect(show.stdout.contains("\"name\":\"deploy\""), "\(show.stdout)")
    }

    /// A secret (`tasker.secret`) is `***` in the run's recorded args and
    /// vars too: one named in the text from the first byte (events file
    /// and journal), one under a computed name in the journal's row once
    /// registered; and a numeric secret leaves every JSON line JSON.
    @Test func aSecretRegisteredByTheScriptIsMaskedInTheRecordedArgsAndVars() async throws {
        let s = try Scratch(["p.lua": """
            local key = tasker.secret("MYKEY")
            local pin = tasker.secret("MYPIN")
            local dyn = tasker.secret("MY" .. "DYN")
            local k2, k3 = tasker.secret "MYKEY2", tasker.secret[[MYKEY3]]
            tasker.add{name = "t", delay = 0.0101, run = function() return 0.0101 end}
            """])
        defer { s.cleanup() }
        let r = try await shell("""
            MYKEY=abcdef123456 MYPIN=0.0101 MYDYN=dyn-55555 MYKEY2=kk-222222 MYKEY3=kk-333333 $TASKER run --no-progress \
              --events ev.jsonl --var x=abcdef123456 --var y=dyn-55555 p.lua abcdef123456 --flag=abcdef123456 kk-222222 kk-333333
            """, in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        let events = try String(contentsOf: s.dir.appendingPathComponent("ev.jsonl"), encoding: .utf8)
        let lines = events.split(separator: "\n").map(String.init)
        #expect(lines.first?.contains(#""event":"run""#) == true, "\(events)")
        #expect(lines.first?.contains(#""args":["***","--flag=***","***","***"]"#) == true, "\(events)")
        for line in lines {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "not JSON: \(line)")
        }
        let show = try await tasker(["show", "last", "--json"], in: s.dir)
        let runs = try await tasker(["runs", "--json"], in: s.dir)
        let text = try await tasker(["show", "last"], in: s.dir)
        for (what, out) in [("events", events), ("show", show.stdout), ("runs", runs.stdout), ("show text", text.stdout)] {
            #expect(!out.contains("abcdef123456") && !out.contains("0.0101"), "a secret in \(what): \(out)")
            if what != "events" { #expect(!out.contains("dyn-55555"), "the computed one in \(what): \(out)") }
        }
        let json = try #require(try JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])
        #expect((json["vars"] as? [String: String])?["x"] == "***", "\(show.stdout)")
        #expect((json["vars"] as? [String: String])?["y"] == "***", "\(show.stdout)")
        #expect(json["args"] as? [String] == ["***", "--flag=***", "***", "***"], "\(show.stdout)")
        // nor is a copy of the row as first written left in the journal's files
        let state = s.dir.appendingPathComponent(".tasker-state")
        for f in try FileManager.default.contentsOfDirectory(atPath: state.path) {
            let bytes = try Data(contentsOf: state.appendingPathComponent(f))
            #expect(bytes.range(of: Data("dyn-55555".utf8)) == nil, "the computed one in \(f)")
        }
    }

    /// `--log-format json`: a numeric secret in a field or in the summary
    /// leaves every line JSON.
    @Test func jsonLogLinesStayJSONWithANumericSecret() async throws {
        let s = try Scratch(["p.lua": """
            local pin = tasker.secret("MYPIN")
            log.info("x", {f = 12.7319, n = 7319, port = 73193, ok = true})
            tasker.add{name = "t", run = function() error("pin " .. pin) end}
            """])
        defer { s.cleanup() }
        let r = try await shell("MYPIN=7319 $TASKER run --no-progress --log-format json p.lua", in: s.dir)
        #expect(r.status == 1, "\(r.stderr)")
        let lines = r.stderr.split(separator: "\n").filter { $0.hasPrefix("{") }
        #expect(lines.count >= 2, "\(r.stderr)")
        for line in lines {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "not JSON: \(line)")
        }
        #expect(!r.stderr.contains("7319"), "\(r.stderr)")
    }

    /// A secret that matches JSON's own punctuation (a quote and what is
    /// around it) was masked again by the plain mask on its way to stderr,
    /// across the line's quotes: `{"level":"er***,…`. Log lines and the
    /// summary stay JSON.
    @Test func jsonLinesStayJSONWhenASecretMatchesTheirPunctuation() async throws {
        let s = try Scratch(["p.lua": """
            local s = tasker.secret("MYTOK")
            log.error("boom", {k = "v"})
            tasker.add{name = "na", run = function() end}
            """])
        defer { s.cleanup() }
        for secret in [#"ror""#, #""k":"#, #"","na"#] {
            var env = ProcessInfo.processInfo.environment
            env["MYTOK"] = secret
            let r = try await collect(launch(["run", "--no-progress", "--no-journal", "--log-format", "json", "p.lua"], in: s.dir,
                                             environment: env))
            #expect(r.status == 0, "\(r.stderr)")
            let lines = r.stderr.split(separator: "\n")
            #expect(lines.count >= 2, "\(r.stderr)")
            for line in lines {
                #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "not JSON with \(secret): \(line)")
            }
        }
    }

    @Test func aMissingSecretSaysWhereItWasLookedFor() async throws {
        let s = try Scratch(["p.lua": """
            local t = tasker.secret("deploy", {env = "DEPLOY_TOKEN", file = "missing.token"})
            tasker.add(function() fs.write("ran", "x") end)
            """])
        defer { s.cleanup() }
        let r = try await shell("env -u DEPLOY_TOKEN $TASKER run --no-progress --no-journal p.lua", in: s.dir)
        #expect(r.status == 2)
        #expect(r.stderr == "tasker: error: p.lua:1: usage: missing secret 'deploy': looked in the environment variable DEPLOY_TOKEN, then the file missing.token\n",
                "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: s.dir.appendingPathComponent("ran").path))
    }

    @Test func helpShowsASecretParameterWithoutItsDefault() async throws {
        let s = try Scratch(["p.lua": """
            local t = tasker.param{name = "token", secret = true, default = "dflt-token-value", help = "API token"}
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "p.lua", "--help"], in: s.dir)
        #expect(r.stdout.contains("--token TOKEN  API token (string; secret)"), "\(r.stdout)")
        #expect(!r.stdout.contains("dflt-token-value"))
    }
}

/// Secrets as outputs write them (JSON-escaped, on separate lines, in URLs)
/// are masked too; a secret parameter's bad value and allowed values are
/// never echoed; `--help` and completion stop a main chunk that never ends.
@Suite struct SecretFormsCLITests {
    @Test func escapedSplitAndEncodedFormsAreMasked() async throws {
        let s = try Scratch(["p.lua": """
            local a = tasker.secret("S1")
            local b = tasker.secret("S2")
            local c = tasker.secret("S3")
            log.info("m " .. a, {f = a, g = b})
            tasker.add{name = "x", run = function() return {v = a} end}
            tasker.add{name = "boom", run = function() error("failed with " .. b .. " and " .. c) end}
            tasker.add{name = "url", run = function()
              local ok, err = pcall(http.get, "http://127.0.0.1:1/c/" .. c, {query = {q = c}, retry = false})
              error(err)
            end}
            """])
        defer { s.cleanup() }
        let r = try await shell(#"""
            S1='q"uo\te\b-SEC1' S2="$(printf 'line1-SEC2\nline2-SEC2')" S3='my secret/1+x' \
              $TASKER run --no-progress --events ev.jsonl --log-format json p.lua
            """#, in: s.dir)
        #expect(r.status == 1, "\(r.stderr)")
        var texts = [("stderr", r.stderr), ("events", try String(contentsOf: s.dir.appendingPathComponent("ev.jsonl"), encoding: .utf8))]
        texts.append(("show", try await tasker(["show", "last", "--json"], in: s.dir).stdout))
        let state = s.dir.appendingPathComponent(".tasker-state")
        var journal = Data()
        for f in try FileManager.default.contentsOfDirectory(atPath: state.path) {
            journal += try Data(contentsOf: state.appendingPathComponent(f))
        }
        texts.append(("journal", String(decoding: journal, as: UTF8.self)))
        for (what, text) in texts {
            for leak in ["SEC1", "SEC2", "my secret", "my%20secret", "secret%2F1"] {
                #expect(!text.contains(leak), "\(leak) in \(what)")
            }
        }
    }

    @Test func aSecretParametersValuesAreNeverEchoed() async throws {
        let s = try Scratch(["p.lua": """
            tasker.param{name = "pin", secret = true, type = "integer"}
            tasker.param{name = "pw", secret = true, choices = {"alpha123", "beta4567"}}
            """])
        defer { s.cleanup() }
        let pin = try await tasker(["run", "--no-progress", "--no-journal", "p.lua", "--pin", "SECRETPIN999"], in: s.dir)
        #expect(pin.status == 2)
        #expect(pin.stderr == "tasker: error: p.lua:1: usage: bad value for parameter --pin: '***' from the command line (an integer expected)\n",
                "\(pin.stderr)")
        let pw = try await tasker(["run", "--no-progress", "--no-journal", "p.lua", "--pw", "gamma"], in: s.dir)
        #expect(!pw.stderr.contains("alpha123") && pw.stderr.contains("one of its allowed values expected"), "\(pw.stderr)")
        let help = try await tasker(["run", "p.lua", "--help"], in: s.dir)
        #expect(!help.stdout.contains("alpha123"), "\(help.stdout)")
    }

    @Test func wordsAfterTwoDashesAreNotParametersAndNamesDoNotClash() async throws {
        let s = try Scratch(["p.lua": """
            local v = tasker.param{name = "s", default = "none"}
            print(v, table.concat(tasker.args, " "))
            """, "clash.lua": """
            tasker.param{name = "x", type = "boolean"}
            tasker.param{name = "no-x", type = "boolean"}
            """, "loop.lua": """
            tasker.param{name = "env", help = "where"}
            while true do end
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--no-journal", "p.lua", "--s", "a", "--", "--s", "b"], in: s.dir)
        #expect(r.stdout == "a\t--s b\n", "\(r.stdout)")
        let clash = try await tasker(["run", "--no-progress", "--no-journal", "clash.lua"], in: s.dir)
        #expect(clash.status == 2 && clash.stderr.contains("clashes with the --no- form"), "\(clash.stderr)")
        // a main chunk that never comes to a task is stopped: completion and --help return
        let help = try await tasker(["run", "loop.lua", "--help"], in: s.dir)
        #expect(help.status == 0)
        #expect(help.stdout.contains("--env ENV"), "\(help.stdout)")
        #expect(help.stdout.contains("it was stopped"), "\(help.stdout)")
    }
}

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
        """
    static let secrets = ["tok-SECRET-1", "key-12345", "db-pa55word"]

    @Test func secretsAreMaskedInEveryOutput() async throws {
        let s = try Scratch(["p.lua": Self.pipeline, "db.pass": "db-pa55word\n"])
        defer { s.cleanup() }
        let r = try await shell("""
            API_KEY=key-12345 PIN=42 $TASKER run --no-progress --events - --report r.html p.lua --token tok-SECRET-1
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
        #expect(r.stdout.contains("--token TOKEN  API token (secret)"), "\(r.stdout)")
        #expect(!r.stdout.contains("dflt-token-value"))
    }
}

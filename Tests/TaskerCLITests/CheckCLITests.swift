import Foundation
import Testing

/// `tasker check` warns about fields tasker's modules do not have, with
/// file:line, and only about those: not in strings or comments, not on a
/// table of the script's that has a field of that name, not where the
/// name is a local or parameter, not for fields the script adds.
@Suite struct CheckCLITests {
    @Test func unknownFieldsOfTaskersModulesAreWarnings() async throws {
        let s = try Scratch(["p.lua": """
            -- tasker.bogus in a comment
            local s = "fs.nope in a string"
            local l = [[ http.nope
            in a long string ]]
            tasker.shell("ls")
            local data = fs.rea("x")
            tasker.helper = function() end
            tasker.helper()
            local t = {fs = {}}
            print(t.fs.whatever, tasker.script_dir, tasker.args, json.decode, log.info, http.get)
            local function f(http) return http.custom end
            x = tasker.nope_at_all
            """, "own.lua": "local fs = require('lfs')\nfs.attributes('x')\n"])
        defer { s.cleanup() }
        let r = try await tasker(["check", "p.lua", "own.lua"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            p.lua:5: warning: tasker.shell is not a field of tasker (did you mean tasker.sh?)
            p.lua:6: warning: fs.rea is not a field of fs (did you mean fs.read?)
            p.lua:12: warning: tasker.nope_at_all is not a field of tasker

            """, "\(r.stdout)")
    }

    @Test func aSyntaxErrorIsStillAnErrorAndExitsTwo() async throws {
        let s = try Scratch(["bad.lua": "tasker.add(\n", "good.lua": "tasker.add(function() end)\n"])
        defer { s.cleanup() }
        let r = try await tasker(["check", "bad.lua", "good.lua"], in: s.dir)
        #expect(r.status == 2)
        #expect(r.stdout.hasPrefix("bad.lua:2:"), "\(r.stdout)")
        #expect(!r.stdout.contains("good.lua"))
    }
}

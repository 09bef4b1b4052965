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

    /// A read of a global nothing sets is a warning with file:line (`after =
    /// biuld` is nil, and a nil `after` is no dependency); what Lua's
    /// scoping makes local, or the file or what it requires sets, is not.
    @Test func globalsNothingSetsAreWarnings() async throws {
        let s = try Scratch(["lib/defs.lua": "shared_helper = function() return 1 end\nfunction another_global() end\n",
                             "p.lua": """
            require("lib.defs")
            local M = {}
            function M.run(x, ...) return x end
            function M:method(y) return self, y end
            local function rec(n) if n > 0 then return rec(n - 1) end return 0 end
            local t = {alpha = 1, beta = {gamma = 2}; delta = 3}
            t.alpha = t.beta.gamma
            for i, v in ipairs({1, 2}) do print(i, v) end
            for k = 1, 3 do print(k) end
            local a <const>, b = 1, 2
            repeat local r = a until r
            while b > 0 do b = b - 1 end
            if a then local z = 1 print(z) elseif b then print(b) else print(a) end
            goto done
            ::done::
            counter = 0
            counter = counter + 1
            x1, x2 = 1, 2
            print(x1, x2, shared_helper(), another_global(), later_global)
            _G.made = 1
            print(made, tasker.args, http.get, json.encode, fs.read, log.info, string.rep, os.time)
            local build = tasker.add(function() end)
            tasker.add{after = biuld, run = function() print(undefined_thing) end}
            tasker.add{run = function(ctx) pritn(ctx.attempt) end}
            print(z, #arg)
            function later_global() end
            """])
        defer { s.cleanup() }
        let r = try await tasker(["check", "p.lua"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == """
            p.lua:23: warning: 'biuld' is read but never set (nil: a global nothing assigns; did you mean 'build'?)
            p.lua:23: warning: 'undefined_thing' is read but never set (nil: a global nothing assigns)
            p.lua:24: warning: 'pritn' is read but never set (nil: a global nothing assigns; did you mean 'print'?)
            p.lua:25: warning: 'z' is read but never set (nil: a global nothing assigns; a local 'z' is declared in another block, not seen here)
            p.lua:25: warning: 'arg' is read but never set (nil: a global nothing assigns; the script's arguments are tasker.args)

            """, "\(r.stdout)")
    }

    /// `a, b.c, t[i] = …` sets `a` (and reads `b`); a `#!` line is skipped as
    /// `lua` skips it; an error Lua gives without a position names the file.
    @Test func assignmentListsShebangsAndPositionlessErrors() async throws {
        let s = try Scratch(["m.lua": "#!/usr/bin/env -S tasker run\na, b.c, d = 1, 2, 3\nlocal t = {}\nx, t[x] = 1, 2\nprint(a, d, x)\n",
                             "deep.lua": "local x = " + String(repeating: "{", count: 100_000) + "\n"])
        defer { s.cleanup() }
        let r = try await tasker(["check", "m.lua", "deep.lua"], in: s.dir)
        #expect(r.status == 2)
        #expect(r.stdout == """
            m.lua:2: warning: 'b' is read but never set (nil: a global nothing assigns; did you mean 'a'?)
            deep.lua: C stack overflow

            """, "\(r.stdout)")
        let run = try await tasker(["run", "--no-progress", "--no-journal", "m.lua"], in: s.dir)
        #expect(run.stderr.contains("m.lua:2: attempt to index a nil value (global 'b')"), "\(run.stderr)")
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

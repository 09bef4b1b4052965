import Foundation
import Testing

/// A task that raises a table is described by its `__tostring`, its
/// `message`, or its content as JSON: never `table: 0x…` in the summary,
/// `show` or the report; the script still gets the table itself.
@Suite struct TableErrorCLITests {
    @Test func aRaisedTableIsDescribedInWords() async throws {
        let s = try Scratch(["p.lua": """
            tasker.add{name = "msg", run = function() error({message = "disk full", code = 28}) end}
            tasker.add{name = "plain", run = function() error({ztier = {1, 2}, zone = "b", port = 5432, code = 7, host = "db1"}) end}
            tasker.add{name = "nan", run = function() error({n = 0/0}) end}
            tasker.add{name = "fn", run = function() error({f = print, [true] = 1}) end}
            tasker.add{name = "ts", run = function()
              error(setmetatable({}, {__tostring = function() return "custom text" end}))
            end}
            local h = tasker.add{name = "kept", run = function() error({code = 9}) end}
            local ok, err = h:result()
            print(type(err), err.code)
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--report", "r.html", "p.lua"], in: s.dir)
        #expect(r.status == 1)
        #expect(r.stdout == "table\t9\n")
        for line in ["failed msg: disk full", "failed ts: custom text", "failed kept: {\"code\":9}"] {
            #expect(r.stderr.contains(line), "\(line): \(r.stderr)")
        }
        // keys sorted, as json.encode writes them: the same text in every
        // run (Lua's own order changes with its hash seed)
        #expect(r.stderr.contains("failed plain: {\"code\":7,\"host\":\"db1\",\"port\":5432,\"zone\":\"b\",\"ztier\":[1,2]}"),
                "\(r.stderr)")
        // what json.encode refuses (NaN, a function, a boolean key) as Lua shows it
        #expect(r.stderr.contains("failed nan: {\"n\":\"nan\"}"), "\(r.stderr)")
        #expect(r.stderr.contains("failed fn: {\"f\":\"function: "), "\(r.stderr)")
        #expect(r.stderr.contains("\",\"true\":1}"), "\(r.stderr)")
        #expect(!r.stderr.contains("table: 0x"))
        let show = try await tasker(["show", "last"], in: s.dir)
        #expect(show.stdout.contains("disk full") && !show.stdout.contains("table: 0x"), "\(show.stdout)")
        let html = try String(contentsOf: s.dir.appendingPathComponent("r.html"), encoding: .utf8)
        #expect(html.contains("disk full") && !html.contains("table: 0x"))
    }

    @Test func aMainChunkRaisingATableSaysWhatItHolds() async throws {
        let s = try Scratch(["p.lua": "error({message = \"config missing\", file = \"x.toml\"})\n"])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--no-journal", "p.lua"], in: s.dir)
        #expect(r.status == 2)
        #expect(r.stderr.hasPrefix("tasker: error: p.lua:1: config missing\n"), "\(r.stderr)")
    }
}

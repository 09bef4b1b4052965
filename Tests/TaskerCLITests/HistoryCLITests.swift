import Foundation
import Testing

/// `tasker show`: tasks written as they are read (JSON one task a line).
@Suite struct HistoryCLITests {
    @Test func showJsonKeepsEveryCharacterOfNamesAndErrors() async throws {
        let s = try Scratch(["p.lua": """
            tasker.add{name = "q\\"b\\\\s\\ttab\\27[31m é 🎉", run = function() error("line1\\nline2\\0nul\\1", 0) end}
            local a = tasker.add{name = "plain", tags = {"x", "y\\""}, run = function() end}
            tasker.add{name = "after", after = a, run = function() end}
            """])
        defer { s.cleanup() }
        _ = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        let show = try await tasker(["show", "last", "--json"], in: s.dir)
        #expect(show.status == 0, "\(show.stderr)")
        let run = try #require(JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])
        for key in ["id", "pipeline", "started", "duration", "exit_code", "counts", "args"] { #expect(run[key] != nil, "no \(key)") }
        #expect(run["exit_code"] as? Int == 1)
        let tasks = try #require(run["tasks"] as? [[String: Any]])
        #expect(tasks.count == 3)
        #expect(tasks[0]["name"] as? String == "q\"b\\s\ttab\u{1B}[31m é 🎉")
        #expect(tasks[0]["error"] as? String == "line1\nline2\u{0}nul\u{1}")
        #expect(tasks[0]["state"] as? String == "failed" && tasks[0]["attempts"] as? Int == 1)
        #expect(tasks[1]["tags"] as? [String] == ["x", "y\""] && tasks[1]["error"] is NSNull)
        #expect(tasks[2]["after"] as? [Int] == [2] && tasks[2]["reused"] as? Bool == false)
        for t in tasks {
            for key in ["id", "identity", "name", "state", "attempts", "duration", "reused", "error", "kind", "held"] {
                #expect(t[key] != nil, "task lacks \(key)")
            }
        }
        // one task per line
        #expect(show.stdout.split(separator: "\n").filter { $0.hasPrefix("    {\"") }.count == 3)
    }

    @Test func showOfARunWithoutTasksIsValid() async throws {
        let s = try Scratch(["e.lua": "-- nothing\n"])
        defer { s.cleanup() }
        _ = try await tasker(["run", "--no-progress", "e.lua"], in: s.dir)
        let show = try await tasker(["show", "last", "--json"], in: s.dir)
        let run = try #require(JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])
        #expect((run["tasks"] as? [Any])?.isEmpty == true)
        let text = try await tasker(["show", "last"], in: s.dir)
        #expect(text.status == 0 && text.stdout.contains("no tasks"))
    }

    /// Output that cannot be written is an error, not a listing lost quietly.
    @Test func showSaysWhenStdoutCannotBeWritten() async throws {
        let s = try Scratch(["p.lua": "for i = 1, 3000 do tasker.add(function() end) end\n"])
        defer { s.cleanup() }
        _ = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        for args in ["show last", "show last --json"] {
            let full = try await shell("\"$TASKER\" \(args) > /dev/full", in: s.dir)
            #expect(full.status == 1, "\(args): \(full.stderr)")
            #expect(full.stderr == "tasker: error: cannot write to stdout: No space left on device\n")
        }
        let head = try await shell("\"$TASKER\" show last | head -3", in: s.dir)
        #expect(head.stdout.split(separator: "\n").count == 3)
    }
    /// `show last FILE` and `report last FILE`: the newest run of that
    /// pipeline, not of any.
    @Test func lastWithAFileIsThatPipelinesLastRun() async throws {
        let s = try Scratch(["a.lua": "print('a')\n", "b.lua": "print('b')\n"])
        defer { s.cleanup() }
        _ = try await tasker(["run", "--no-progress", "a.lua"], in: s.dir)
        _ = try await tasker(["run", "--no-progress", "b.lua"], in: s.dir)
        let a = try await tasker(["show", "last", "a.lua"], in: s.dir)
        #expect(a.status == 0, "\(a.stderr)")
        #expect(a.stdout.hasPrefix("run ") && a.stdout.split(separator: "\n")[0].hasSuffix("/a.lua"), "\(a.stdout)")
        let any = try await tasker(["show", "last"], in: s.dir)
        #expect(any.stdout.split(separator: "\n")[0].hasSuffix("/b.lua"), "\(any.stdout)")
        let report = try await tasker(["report", "last", "a.lua", "-o", "a.html"], in: s.dir)
        #expect(report.status == 0, "\(report.stderr)")
        let html = try String(contentsOf: s.dir.appendingPathComponent("a.html"), encoding: .utf8)
        #expect(html.contains("/a.lua") && !html.contains("/b.lua"))
        let none = try await tasker(["show", "last", "c.lua"], in: s.dir)
        #expect(none.status == 2)
        #expect(none.stderr.contains("no run of ") && none.stderr.contains("/c.lua"), "\(none.stderr)")
        let id = String(a.stdout.split(separator: " ")[1])
        let both = try await tasker(["show", id, "a.lua"], in: s.dir)
        #expect(both.status == 2)
        #expect(both.stderr.contains("goes with 'last' only"))
    }

    /// Without HOME the journal's place is a guess, and tasker says where
    /// it went, once; a run without a journal says nothing.
    @Test func withoutHomeTheJournalsPlaceIsSaid() async throws {
        let s = try Scratch(["p.lua": "print('p')\n"])
        defer { s.cleanup() }
        let bare = "env -u HOME -u TASKER_STATE_DIR -u XDG_STATE_HOME \"$TASKER\""
        let quiet = try await shell("\(bare) run --no-progress --no-journal p.lua", in: s.dir)
        #expect(quiet.status == 0)
        #expect(!quiet.stderr.contains("HOME is not set"), "\(quiet.stderr)")
        let chosen = try await shell("\(bare) run --no-progress --state st p.lua", in: s.dir)
        #expect(chosen.status == 0)
        #expect(!chosen.stderr.contains("HOME is not set"), "\(chosen.stderr)")
        // reading only (a run would write into the account's home)
        let runs = try await shell("\(bare) runs --limit 1", in: s.dir)
        let notes = runs.stderr.components(separatedBy: "HOME is not set: the journal is in ").count - 1
        #expect(notes == 1, "\(runs.stderr)")
    }
    /// A run id may be shortened to a start only one run has; one that
    /// several runs share is a usage error listing them.
    @Test func aRunIDCanBeShortened() async throws {
        let s = try Scratch(["p.lua": "tasker.add{id = 'x', run = function() return 1 end}\n"])
        defer { s.cleanup() }
        _ = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        _ = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        let list = try await tasker(["runs"], in: s.dir)
        let ids = list.stdout.split(separator: "\n").dropFirst().map { String($0.split(separator: " ")[0]) }
        #expect(ids.count == 2, "\(list.stdout)")
        let (newer, older) = (ids[0], ids[1])
        // the shortest start that tells them apart (4 at least)
        var n = 4
        while newer.prefix(n) == older.prefix(n) { n += 1 }
        let show = try await tasker(["show", String(older.prefix(n))], in: s.dir)
        #expect(show.status == 0, "\(show.stderr)")
        #expect(show.stdout.hasPrefix("run \(older) "), "\(show.stdout)")
        let common = String(newer.prefix(4))
        if older.hasPrefix(common) {
            let both = try await tasker(["show", common], in: s.dir)
            #expect(both.status == 2)
            #expect(both.stderr.contains("'\(common)' starts 2 run ids") && both.stderr.contains(older), "\(both.stderr)")
        }
        let resumed = try await tasker(["run", "--no-progress", "--resume", String(older.prefix(n)), "p.lua"], in: s.dir)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stderr.contains("(1 reused)"), "\(resumed.stderr)")
    }
    /// `tasker runs FILE` matches the file's real path: from any directory,
    /// through a symlink, with `..` in the path.
    @Test func runsOfAFileAreFoundFromAnyDirectory() async throws {
        let s = try Scratch(["proj/sub/p.lua": "print(1)\n"])
        defer { s.cleanup() }
        let state = s.dir.appendingPathComponent("state").path
        _ = try await shell("cd proj && TASKER_STATE_DIR=\(state) \"$TASKER\" run --no-progress sub/p.lua", in: s.dir)
        try FileManager.default.createSymbolicLink(atPath: s.dir.appendingPathComponent("link").path,
                                                   withDestinationPath: s.dir.appendingPathComponent("proj").path)
        for (dir, path) in [("proj/sub", "p.lua"), (".", "link/sub/p.lua"), ("proj", "sub/../sub/p.lua"),
                            ("/", s.dir.appendingPathComponent("proj/sub/p.lua").path)] {
            let r = try await shell("cd \(dir) && TASKER_STATE_DIR=\(state) \"$TASKER\" runs \(path)", in: s.dir)
            #expect(r.stdout.split(separator: "\n").count == 2, "\(dir) \(path): \(r.stdout)\(r.stderr)")
        }
        let elsewhere = try await shell("TASKER_STATE_DIR=\(state) \"$TASKER\" runs p.lua", in: s.dir)
        #expect(elsewhere.stdout.contains("no runs recorded of p.lua (there is no p.lua here"), "\(elsewhere.stdout)")
    }
}

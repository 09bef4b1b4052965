import Foundation
import Testing

/// `tasker run FILE --resume --plan` once ran the whole job for real (the
/// words became tasker.args): run's own options after FILE are a usage
/// error that shows the command meant; `--` hands words to the script.
@Suite struct MisplacedOptionsCLITests {
    static let pipeline = """
        local f = assert(io.open("ran", "w")); f:write(table.concat(tasker.args, "|")); f:close()
        """

    func ran(_ s: Scratch) -> String? {
        try? String(contentsOf: s.dir.appendingPathComponent("ran"), encoding: .utf8)
    }

    @Test func anOptionAfterTheFileStopsTheRunAndShowsTheCommandMeant() async throws {
        let s = try Scratch(["etl.lua": Self.pipeline])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "etl.lua", "--resume", "--plan"], in: s.dir)
        #expect(r.status == 2)
        #expect(r.stderr.contains("--resume and --plan come after the pipeline file"), "\(r.stderr)")
        #expect(r.stderr.components(separatedBy: "come after").count == 2, "said once: \(r.stderr)")
        #expect(r.stderr.contains("tasker run --no-progress --resume --plan etl.lua\n"), "\(r.stderr)")
        #expect(r.stderr.contains("tasker run --no-progress etl.lua -- --resume --plan"), "\(r.stderr)")
        #expect(ran(s) == nil, "the script ran")

        // An option's value moves with it; other words stay; a secret stays hidden.
        let v = try await tasker(["run", "etl.lua", "x", "--concurrency", "4", "y", "--var", "token=s3cret"], in: s.dir)
        #expect(v.status == 2)
        #expect(v.stderr.contains("tasker run --concurrency 4 --var token=*** etl.lua x y\n"), "\(v.stderr)")
        // or after '--', the other words staying where they were (a
        // parameter before the '--' is still read)
        #expect(v.stderr.contains("after '--': tasker run etl.lua x y -- --concurrency 4 --var token=***\n"), "\(v.stderr)")
        #expect(!v.stderr.contains("s3cret"))
        #expect(ran(s) == nil)
    }

    @Test func wordsAfterTwoDashesGoToTheScriptAsTheyAre() async throws {
        let s = try Scratch(["etl.lua": Self.pipeline])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--no-journal", "etl.lua", "a", "--", "--plan", "--", "b"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(ran(s) == "a|--plan|--|b")
    }

    /// Every option `tasker run --help` lists is caught after FILE, so the
    /// list cannot fall behind the command.
    /// Words that begin with `---` are the argument parser's own: they were
    /// refused as invalid options even after FILE.
    @Test func wordsOfThreeDashesOrMoreAreTheScriptsToo() async throws {
        let s = try Scratch(["etl.lua": Self.pipeline])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--no-journal", "etl.lua", "a", "---", "----x", "--", "---y", "\u{1}z"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(ran(s) == "a|---|----x|---y|\u{1}z")
        // before FILE, an option's value: refused as always, never taken marked
        let value = try await tasker(["run", "--no-progress", "--no-journal", "--events", "---ev", "etl.lua"], in: s.dir)
        #expect(value.status == 2, "\(value.stderr)")
        let left = try FileManager.default.contentsOfDirectory(atPath: s.dir.path).sorted()
        #expect(left == ["etl.lua", "ran"], "\(left)")
    }

    @Test func everyOptionOfRunIsCaughtAfterTheFile() async throws {
        let s = try Scratch(["etl.lua": Self.pipeline])
        defer { s.cleanup() }
        let help = try await tasker(["run", "--help"], in: s.dir)
        let options = Set(help.stdout.split(whereSeparator: { " ,\n[]<>".contains($0) })
            .filter { $0.hasPrefix("--") && $0.count > 2 }
            .map { String($0.prefix { $0 == "-" || $0.isLetter }) })
            .subtracting(["--help", "--version"])
        #expect(options.count >= 15, "\(options.sorted())")
        for option in options.sorted() {
            let r = try await tasker(["run", "etl.lua", option, "1"], in: s.dir)
            #expect(r.status == 2, "\(option): \(r.stderr)")
            #expect(r.stderr.contains("\(option) comes after the pipeline file"), "\(option): \(r.stderr)")
        }
        #expect(ran(s) == nil)
    }
}

import Foundation
import Testing

/// A main chunk that fails because a task it awaited failed ends the run
/// with exit 1 naming that task, whether the task had failed already or
/// failed while awaited, and however the error comes back to the script
/// (`tasker.any` whose tasks all failed names the first of them).
@Suite struct AwaitedFailureCLITests {
    static let paths: [(String, String)] = [
        ("await, already failed", "tasker.sleep(0.1)\nbad:await()"),
        ("await, while waiting", "bad:await()"),
        ("tasker.all, already failed", "tasker.sleep(0.1)\ntasker.all{bad}"),
        ("tasker.all, while waiting", "tasker.all{bad}"),
        ("tasker.any, already failed", "tasker.sleep(0.1)\ntasker.any{bad}"),
        ("tasker.any, while waiting", "tasker.any{bad}"),
        ("tasker.any of two, while waiting",
         "tasker.any{bad, tasker.add{name = 'also', run = function() tasker.sleep(0.05); error('no') end}}"),
        ("error(err) of result, already failed", "tasker.sleep(0.1)\nlocal ok, err = bad:result()\nerror(err)"),
        ("error(err) of result, while waiting", "local ok, err = bad:result()\nerror(err)"),
        ("error(err, 0) of result", "local ok, err = bad:result()\nerror(err, 0)"),
    ]

    @Test(arguments: ["error('boom')", "error({code = 7})", "tasker.exec{'false'}"])
    func exitsOneNamingTheTask(body: String) async throws {
        for (path, main) in Self.paths {
            let s = try Scratch(["p.lua": "local bad = tasker.add{name = 'bad', run = function() \(body) end}\n\(main)\n"])
            defer { s.cleanup() }
            let r = try await tasker(["run", "--no-progress", "--no-journal", "p.lua"], in: s.dir)
            #expect(r.status == 1, "\(path), \(body): \(r.stderr)")
            #expect(r.stderr.contains("(from task 'bad')"), "\(path), \(body): \(r.stderr)")
        }
    }

    @Test func theScriptsOwnErrorIsStillExitTwo() async throws {
        let s = try Scratch(["p.lua": """
            local bad = tasker.add{name = 'bad', run = function() error('boom') end}
            local ok, err = bad:result()
            error('my own failure')
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--no-journal", "p.lua"], in: s.dir)
        #expect(r.status == 2, "\(r.stderr)")
        #expect(r.stderr.contains("p.lua:3: my own failure"))
        #expect(!r.stderr.contains("from task"))
    }
}

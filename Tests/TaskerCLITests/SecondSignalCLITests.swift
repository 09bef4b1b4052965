import Foundation
import Testing

/// A second signal kills every process group the run started and exits at
/// once — also groups the loop was still starting when it came.
@Suite struct SecondSignalCLITests {
    /// Processes whose command line is exactly `words`.
    static func running(_ words: [String]) -> [Int32] {
        let wanted = words.joined(separator: "\0") + "\0"
        let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return pids.compactMap { name -> Int32? in
            guard let pid = Int32(name),
                  let line = FileManager.default.contents(atPath: "/proc/\(name)/cmdline") else { return nil }
            return String(decoding: line, as: UTF8.self) == wanted ? pid : nil
        }
    }

    @Test func aFastSecondSignalLeavesNoChildBehind() async throws {
        // an argument no other test uses: its processes are this test's
        let marker = String(format: "%.4f", 40 + Double.random(in: 0..<10))
        let s = try Scratch(["p.lua": """
            for i = 1, 200 do
              tasker.add(function()
                io.open("started", "w"):close()
                tasker.exec{"sleep", "\(marker)"}
              end)
            end
            """])
        defer {
            s.cleanup()
            for pid in Self.running(["sleep", marker]) { kill(pid, SIGKILL) }
        }
        let run = try Background(["run", "--no-progress", "--no-journal", "--concurrency", "64", "p.lua"], in: s.dir)
        let started = s.dir.appendingPathComponent("started").path
        let deadline = Date(timeIntervalSinceNow: 30)
        while !FileManager.default.fileExists(atPath: started) && Date() < deadline { try await Task.sleep(for: .milliseconds(5)) }
        run.signal(SIGINT)
        usleep(1000)
        run.signal(SIGINT)
        let r = await run.finish()
        // the first may have ended the run before the second came: 130 both ways
        #expect(r.status == 130, "\(r.stderr)")
        // killed with SIGKILL before the exit: gone at once (a zombie is
        // reaped by init, which may take a moment)
        var left = Self.running(["sleep", marker])
        let settle = Date(timeIntervalSinceNow: 5)
        while !left.isEmpty && Date() < settle {
            try await Task.sleep(for: .milliseconds(50))
            left = Self.running(["sleep", marker])
        }
        #expect(left.isEmpty, "\(left.count) children outlived the run")
    }
}

/// SIGINT cancels everything: also a task a reactor is reacting to while
/// the reactor computes (it ended `failed` with the reactor's stop).
@Suite struct InterruptedReactionCLITests {
    @Test func aTaskWhoseReactionIsComputingEndsCancelled() async throws {
        let s = try Scratch(["p.lua": """
            tasker.react{name = "busy", when = function(t, res) return not res.ok end, fn = function()
              print("reacting"); io.stdout:flush()
              local x = 0
              while true do x = x + 1 end
            end}
            tasker.add{name = "victim", run = function() error("first failure") end}
            """])
        defer { s.cleanup() }
        let r = try await taskerInterrupted(["run", "--no-progress", "--no-journal", "p.lua"], in: s.dir, markers: ["reacting"])
        #expect(r.status == 130, "\(r.stderr)")
        #expect(r.stderr.contains("1 task: 0 succeeded, 0 failed, 1 cancelled"), "\(r.stderr)")
        #expect(r.stderr.contains("  victim: cancelled: reactor 'busy' was stopped: interrupted"), "\(r.stderr)")
    }
}

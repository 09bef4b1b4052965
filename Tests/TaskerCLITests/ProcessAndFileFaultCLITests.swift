import Foundation
import Synchronization
import Testing

/// Runs tasker with `args`, sends `signal` once stdout shows each marker in
/// turn, and waits for the exit; a run still there after `limit` seconds is
/// killed (status 9) so a hang fails the test instead of the suite. (Each
/// run here takes well under a second; the limit is for a loaded CI.)
func taskerBounded(_ args: [String], in cwd: URL, markers: [String] = [], signal sig: Int32 = SIGINT,
                   limit: Double = 60) async throws -> CLIResult {
    let (p, out, err) = try launch(args, in: cwd)
    let exited = ExitFlag()
    let pid = p.processIdentifier
    Thread {
        let end = Date().addingTimeInterval(limit)
        while Date() < end {
            if exited.flag.withLock({ $0 }) { return }
            usleep(50_000)
        }
        exited.flag.withLock { done in if !done { kill(pid, SIGKILL) } }
    }.start()
    return await withCheckedContinuation { continuation in
        Thread {
            var seen = ""
            var pending = markers[...]
            while let marker = pending.first {
                let chunk = out.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                seen += String(decoding: chunk, as: UTF8.self)
                if seen.contains(marker) {
                    pending = pending.dropFirst()
                    kill(p.processIdentifier, sig)
                }
            }
            waitForExit(p)
            exited.flag.withLock { $0 = true }
            continuation.resume(returning: drain(p, out: out, err: err, seen: seen))
        }.start()
    }
}

/// Whether the process has exited (then the watchdog must not kill: the
/// pid could be another process's by then).
private final class ExitFlag: Sendable {
    let flag = Mutex(false)
}

/// io.popen and os.execute on exec's spawner, and fs on FIFOs: nothing a
/// command or a file does keeps a run from ending on a timeout or a signal,
/// and running out of descriptors fails a task, not the process.
@Suite struct ProcessAndFileFaultCLITests {
    /// tasker with `words` (one shell line) under `ulimit -n limit`.
    func withDescriptorLimit(_ limit: Int, _ words: String, in dir: URL) async throws -> CLIResult {
        var env = ProcessInfo.processInfo.environment
        env["TASKER"] = taskerBinary().path
        env["TASKER_STATE_DIR"] = dir.appendingPathComponent(".tasker-state").path
        return await collect(try launch(["-c", "ulimit -n \(limit); exec \"$TASKER\" \(words)"], in: dir,
                                        executable: URL(fileURLWithPath: "/bin/sh"), environment: env))
    }

    @Test func popenReadsOutputOfAnySizeWhole() async throws {
        let s = try Scratch(["p.lua": """
            local big = io.popen("head -c 10485760 /dev/urandom"):read("a")
            local f = io.popen("printf 'a\\\\0b\\\\0'")
            local bin = f:read("a")
            print(#big, #bin, bin:byte(2), f:close())
            local n = 0
            for _ in io.popen("seq 1 5000"):lines() do n = n + 1 end
            print(n, io.popen("no-such-command-here 2>/dev/null"):close())
            """])
        defer { s.cleanup() }
        let r = try await taskerBounded(["run", "--no-journal", "p.lua"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "10485760\t4\t0\ttrue\texit\t0\n5000\tnil\texit\t127\n")
    }

    @Test func aTimeoutOrOneSIGTERMEndsARunWaitingOnALargePopenRead() async throws {
        let s = try Scratch(["p.lua": """
            local h = tasker.add{name = "slow", timeout = 0.5, run = function()
              return io.popen("head -c 2000000 /dev/zero; sleep 30"):read("a")
            end}
            print(select(2, h:result()).kind)
            tasker.add{name = "stuck", run = function()
              local f = io.popen("head -c 2000000 /dev/zero; sleep 30")
              print("ready"); io.stdout:flush()
              return f:read("a")
            end}
            """])
        defer { s.cleanup() }
        let r = try await taskerBounded(["run", "--no-journal", "p.lua"], in: s.dir,
                                                   markers: ["ready"], signal: SIGTERM)
        #expect(r.status == 143, "\(r.stderr)")
        #expect(r.stdout.hasPrefix("timeout\nready\n"))
        #expect(!r.stderr.contains("interrupted again"))
    }

    @Test func closingAPopenWithoutReadingIsFine() async throws {
        let s = try Scratch(["p.lua": """
            for _ = 1, 50 do assert(io.popen("true"):close()) end
            -- as with Lua's own pclose, the command may or may not have
            -- written before the pipe closed (then it gets SIGPIPE)
            local _, how, code = io.popen("echo unread"):close()
            print(how == "exit" and code == 0 or how == "signal" and code == 13)
            local w = io.popen("true", "w")
            print(w:close())
            """])
        defer { s.cleanup() }
        let r = try await taskerBounded(["run", "--no-journal", "p.lua"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "true\ntrue\texit\t0\n")
    }

    @Test func runningOutOfDescriptorsFailsTheTaskWithTheReason() async throws {
        let s = try Scratch(["p.lua": """
            local held = {}
            while true do
              local f = io.open("/dev/null")
              if not f then break end
              held[#held + 1] = f
            end
            local popen = tasker.add{name = "popen", run = function() return io.popen("echo hi"):read("a") end}
            local exec = tasker.add{name = "exec", run = function() return tasker.exec{"true"} end}
            local sh = tasker.add{name = "execute", run = function() return os.execute("true") end}
            -- HTTP's first request loads libcurl, which needs descriptors
            local http1 = tasker.add{name = "http", run = function() return http.get("http://127.0.0.1:9/", {retry = false}) end}
            for name, h in pairs{popen = popen, exec = exec, execute = sh, http = http1} do
              local ok, e = h:result()
              print(name, ok or e.kind)
              -- a transport failure like any other: its code and URL
              if name == "http" then print("http failure", e.code, e.url) end
            end
            for _, f in ipairs(held) do f:close() end
            print(io.popen("echo fine"):read("l"))
            -- with descriptors back, HTTP works: a refused connection, not "needs libcurl"
            local ok, e = pcall(http.get, "http://127.0.0.1:9/", {retry = false})
            print("http again", e.code)
            """])
        defer { s.cleanup() }
        let r = try await withDescriptorLimit(64, "run --no-journal p.lua", in: s.dir)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stdout.contains("popen\texec\n") && r.stdout.contains("exec\texec\n"), "\(r.stdout)")
        // os.execute needs no pipe: it may run, or fail the same way.
        #expect(r.stdout.contains("execute\ttrue\n") || r.stdout.contains("execute\texec\n"), "\(r.stdout)")
        #expect(r.stdout.contains("http\thttp\n"), "\(r.stdout)")
        #expect(r.stdout.contains("http failure\tother\thttp://127.0.0.1:9/\n"), "\(r.stdout)")
        #expect(r.stdout.hasSuffix("fine\nhttp again\tconnect\n"), "\(r.stdout)")
        #expect(!r.stderr.contains("needs libcurl"), "\(r.stderr)")
        #expect(r.stderr.contains("cannot run 'echo hi': cannot make a pipe: Too many open files"), "\(r.stderr)")
        #expect(!r.stderr.contains("crashed") && !r.stderr.contains("Fatal error"))
    }

    /// HTTP's transfer thread made with one descriptor free (libcurl loads
    /// one file at a time; its wake-up pair needs two) was never woken: the
    /// next request waited out its timeout before it started, and the run's
    /// end a minute. It now looks every second.
    @Test func runningOutOfDescriptorsDoesNotLeaveHTTPAsleep() async throws {
        let s = try Scratch(["p.lua": """
            local held = {}
            while true do
              local f = io.open("/dev/null")
              if not f then break end
              held[#held + 1] = f
            end
            table.remove(held):close()
            print("first", select(2, pcall(http.get, "http://127.0.0.1:9/", {retry = false})).kind)
            for _, f in ipairs(held) do f:close() end
            print("second", select(2, pcall(http.get, "http://127.0.0.1:9/", {retry = false})).code)
            """])
        defer { s.cleanup() }
        let started = Date()
        let r = try await withDescriptorLimit(64, "run --no-journal --no-progress p.lua", in: s.dir)
        let took = Date().timeIntervalSince(started)
        #expect(r.stdout == "first\thttp\nsecond\tconnect\n", "\(r.stdout)\(r.stderr)")
        // the run's own time, from its summary (the launch took 20 s in a loaded CI)
        let ran = r.stderr.range(of: #"in ([0-9.]+)s"#, options: .regularExpression)
            .flatMap { Double(r.stderr[$0].dropFirst(3).dropLast()) }
        #expect(ran.map { $0 < 20 } == true, "a generous bound: 60 s before, about 1 s now (\(r.stderr), \(took) s in all)")
    }

    @Test func aFIFOWithoutAPeerDoesNotHoldUpATimeout() async throws {
        // A FIFO each: two calls on one FIFO would be each other's peer.
        let s = try Scratch(["p.lua": """
            local calls = {
              read = function() return fs.read("f1") end,
              write = function() fs.write("f2", "x", {atomic = false}) end,
              append = function() fs.append("f3", "x") end,
              ["copy-from"] = function() fs.copy("f4", "out") end,
              ["copy-to"] = function() fs.copy("p.lua", "f5") end,
            }
            for name, fn in pairs(calls) do tasker.add{name = name, timeout = 0.3, run = fn} end
            """])
        defer { s.cleanup() }
        for k in 1...5 { #expect(mkfifo(s.dir.appendingPathComponent("f\(k)").path, 0o644) == 0) }
        let r = try await taskerBounded(["run", "--no-journal", "p.lua"], in: s.dir)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("5 tasks: 0 succeeded, 5 failed"), "\(r.stderr)")
    }

    @Test func callsWaitingOnFIFOsDoNotHoldUpOtherFileCalls() async throws {
        // More waiting calls than cores: a plain file is still read at once
        // (on a queue shared by all calls, libdispatch took ~5 s to add a
        // thread for it).
        let s = try Scratch(["p.lua": """
            for k = 1, 6 do tasker.add{name = "wait" .. k, run = function() return fs.read("f" .. k) end} end
            tasker.sleep(0.2)
            local t0 = tasker.now()
            local h = tasker.add{name = "plain", run = function() fs.write("plain.txt", "data"); return fs.read("plain.txt") end}
            print(h:await(), tasker.now() - t0 < 2.5)
            tasker.exit(0)
            """])
        defer { s.cleanup() }
        for k in 1...6 { #expect(mkfifo(s.dir.appendingPathComponent("f\(k)").path, 0o644) == 0) }
        let r = try await taskerBounded(["run", "--no-journal", "p.lua"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "data\ttrue\n")
    }

    @Test func oneSignalEndsARunWaitingOnAFIFO() async throws {
        for sig in [SIGINT, SIGTERM] {
            let s = try Scratch(["p.lua": """
                tasker.add{name = "reader", run = function() return fs.read("fifo") end}
                tasker.add{name = "writer", run = function() fs.write("fifo2", "x", {atomic = false}) end}
                print("ready"); io.stdout:flush()
                """])
            defer { s.cleanup() }
            #expect(mkfifo(s.dir.appendingPathComponent("fifo").path, 0o644) == 0)
            #expect(mkfifo(s.dir.appendingPathComponent("fifo2").path, 0o644) == 0)
            let r = try await taskerBounded(["run", "--no-journal", "p.lua"], in: s.dir, markers: ["ready"], signal: sig)
            #expect(r.status == 128 + sig, "\(r.stderr)")
            #expect(!r.stderr.contains("interrupted again"))
        }
    }

    @Test func anInterruptedAtomicWriteLeavesTheOldContentAndNoTempFile() async throws {
        let s = try Scratch(["p.lua": """
            local data = string.rep("x", 32 << 20)
            tasker.add{name = "w", run = function()
              print("ready"); io.stdout:flush()
              fs.write("target.txt", data)
              print("written"); io.stdout:flush()
            end}
            """])
        defer { s.cleanup() }
        try "old".write(to: s.dir.appendingPathComponent("target.txt"), atomically: false, encoding: .utf8)
        let r = try await taskerBounded(["run", "--no-journal", "p.lua"], in: s.dir, markers: ["ready"], signal: SIGINT)
        #expect(r.status == 130, "\(r.stderr)")
        let size = (try FileManager.default.attributesOfItem(atPath: s.dir.appendingPathComponent("target.txt").path)[.size] as? Int) ?? -1
        // Only a write that finished before the signal may have replaced it.
        #expect(size == 3 || (r.stdout.contains("written") && size == 32 << 20), "size \(size), \(r.stdout)")
        let left = try FileManager.default.contentsOfDirectory(atPath: s.dir.path).filter { $0.contains(".tmp-") }
        #expect(left.isEmpty, "\(left)")
    }
}

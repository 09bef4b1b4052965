import Foundation
import PostgresTestServer
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// How many threads a run has: the loop, which also waits on the process
/// reactor's epoll set (children, popen pipes and the inotify watch), the
/// journal's writer, the signal inbox and the HTTP thread; not a thread per
/// child, pipe, request or watch.
@Suite struct ThreadCountCLITests {
    /// A listener that accepts connections, marks each in `dir`
    /// ("http.started") and never answers: a request stays in flight.
    final class SilentServer: Sendable {
        let listener: SilentListener
        var port: Int { listener.port }

        init(markIn dir: URL) throws {
            let listener = try SilentListener()
            self.listener = listener
            let marker = dir.appendingPathComponent("http.started").path
            Thread {
                var held: [Int32] = []
                while true {
                    let c = accept(listener.fd, nil, nil)
                    if c < 0 { return }
                    held.append(c)
                    _ = FileManager.default.createFile(atPath: marker, contents: Data())
                }
            }.start()
        }

        func stop() { listener.close() }
    }

    @Test func aRunHasFewThreadsIdleAndWithEveryKindOfWaitInFlight() async throws {
        let s = try Scratch(["rules.lua": "tasker.intercept{name = 'pass', fn = function() end}\n"])
        defer { s.cleanup() }
        let server = try SilentServer(markIn: s.dir)
        defer { server.stop() }
        try """
            -- all threads (in-process: nothing started to count them)
            local function threads()
              local f = assert(io.open("/proc/self/status")); local s = f:read("a"); f:close()
              return tonumber(s:match("Threads:%s*(%d+)"))
            end
            -- all, with their names, listed by a child (the reactor is
            -- running by then)
            local function named()
              local names = {}
              for name in tasker.exec{"sh", "-c", "cat /proc/$PPID/task/*/comm"}.stdout:gmatch("[^\\n]+") do
                names[#names + 1] = name
              end
              return #names, table.concat(names, ",")
            end
            print("idle " .. threads())
            tasker.use("rules.lua")
            local function started(name) local f = io.open(name); if f then f:close() end; return f ~= nil end
            http.configure{retry = false}
            local hs, names = {}, {}
            for i = 1, 3 do
              hs[#hs + 1] = tasker.add(function() tasker.exec{"sh", "-c", "touch exec" .. i .. ".started; sleep 3"} end)
              hs[#hs + 1] = tasker.add(function() local f = io.popen("touch popen" .. i .. ".started; sleep 3"); f:read("a"); f:close() end)
              hs[#hs + 1] = tasker.add(function() os.execute("touch execute" .. i .. ".started; sleep 3") end)
              hs[#hs + 1] = tasker.add(function() pcall(http.get, "http://127.0.0.1:\(server.port)/" .. i, {timeout = 3}) end)
              for _, kind in ipairs{"exec", "popen", "execute"} do names[#names + 1] = kind .. i .. ".started" end
            end
            names[#names + 1] = "http.started"
            local function all() for _, n in ipairs(names) do if not started(n) then return false end end return true end
            local deadline = tasker.now() + 20
            while not all() do
              assert(tasker.now() < deadline, "they did not all start")
              tasker.sleep(0.02)
            end
            -- the most threads at any sample
            local most, mostNames = 0, ""
            for _ = 1, 20 do
              local all, names = named()
              if all > most then most, mostNames = all, names end
              tasker.sleep(0.025)
            end
            print("busy " .. most)
            print("names " .. mostNames)
            tasker.all(hs)
            """.write(to: s.dir.appendingPathComponent("p.lua"), atomically: true, encoding: .utf8)
        let r = try await tasker(["run", "--no-progress", "--watch", "p.lua"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        let counts = Dictionary(uniqueKeysWithValues: r.stdout.split(separator: "\n").compactMap { line -> (String, Int)? in
            let parts = line.split(separator: " ")
            guard parts.count == 2, let n = Int(parts[1]) else { return nil }
            return (String(parts[0]), n)
        })
        let idle = try #require(counts["idle"], "\(r.stdout)")
        let busy = try #require(counts["busy"], "\(r.stdout)")
        // The loop, the journal's writer and the signal inbox.
        #expect(idle <= 3, "idle: \(idle) threads")
        // Those (the loop waiting on the reactor's set too) and the HTTP
        // thread: nine children, three popen pipes, the watch and three
        // requests add none. 4 here; 5 leaves room for a thread libcurl
        // starts to resolve a name.
        #expect(busy <= 5, "busy: \(busy) threads: \(r.stdout)")
    }

    /// A request waiting for its answer costs no CPU (URLSession kept a
    /// write source armed on the socket meanwhile: about 3 s of CPU burnt
    /// per 4 s of waiting).
    @Test func aRequestWaitingForItsAnswerBurnsNoCPU() async throws {
        let s = try Scratch([:])
        defer { s.cleanup() }
        let server = try SilentServer(markIn: s.dir)
        defer { server.stop() }
        try """
            -- this process's CPU seconds (user + system), from /proc
            local function cpu()
              local f = assert(io.open("/proc/self/stat")); local line = f:read("a"); f:close()
              local fields = {}
              for word in line:match("%) (.*)"):gmatch("%S+") do fields[#fields + 1] = word end
              return (tonumber(fields[12]) + tonumber(fields[13])) / 100
            end
            http.configure{retry = false}
            local before, started = cpu(), tasker.now()
            local ok, err = pcall(http.get, "http://127.0.0.1:\(server.port)/", {timeout = 2})
            print(err.code, string.format("%.2f %.2f", tasker.now() - started, cpu() - before))
            """.write(to: s.dir.appendingPathComponent("p.lua"), atomically: true, encoding: .utf8)
        let r = try await tasker(["run", "--no-progress", "p.lua"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        let words = r.stdout.split(whereSeparator: \.isWhitespace)
        try #require(words.count == 3, "\(r.stdout)")
        #expect(words[0] == "timeout")
        let waited = try #require(Double(words[1])), burnt = try #require(Double(words[2]))
        #expect(waited >= 1.9, "waited \(waited) s")
        #expect(burnt < 0.3, "\(burnt) s of CPU while waiting \(waited) s for an answer")
    }
}

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// How many threads a run has: the loop, which also waits on the process
/// reactor's epoll set (children, popen pipes and the inotify watch), the
/// journal's writer, and what URLSession needs; not a thread per child,
/// pipe, request or watch.
@Suite struct ThreadCountCLITests {
    /// A TCP listener that accepts connections, marks each in `dir`
    /// ("http.started") and never answers: a request stays in flight.
    final class SilentServer: @unchecked Sendable {
        // Safety: `fd` and `port` are set in init; the accept thread only reads them.
        let fd: Int32
        let port: Int

        init(markIn dir: URL) throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_addr.s_addr = inet_addr("127.0.0.1")
            addr.sin_port = 0
            var len = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
            guard bound == 0, listen(fd, 16) == 0 else { throw POSIXError(.EADDRINUSE) }
            _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
            self.fd = fd
            port = Int(UInt16(bigEndian: addr.sin_port))
            let marker = dir.appendingPathComponent("http.started").path
            Thread {
                var held: [Int32] = []
                while true {
                    let c = accept(fd, nil, nil)
                    if c < 0 { return }
                    held.append(c)
                    _ = FileManager.default.createFile(atPath: marker, contents: Data())
                }
            }.start()
        }

        func stop() {
            shutdown(fd, Int32(SHUT_RDWR))
            close(fd)
        }
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
            -- all, and tasker's own (libdispatch names its threads "...qos..."),
            -- listed by a child (the reactor is running by then)
            local function named()
              local all, own, names = 0, 0, {}
              for name in tasker.exec{"sh", "-c", "cat /proc/$PPID/task/*/comm"}.stdout:gmatch("[^\\n]+") do
                all = all + 1
                names[#names + 1] = name
                if not name:find("qos", 1, true) then own = own + 1 end
              end
              return all, own, table.concat(names, ",")
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
            -- the most threads at any sample; tasker's own as most samples
            -- saw them (a new libdispatch worker carries the process's name
            -- for a moment, until libdispatch names it)
            local most, owns, mostNames = 0, {}, ""
            for _ = 1, 20 do
              local all, own, names = named()
              if all > most then most, mostNames = all, names end
              owns[#owns + 1] = own
              tasker.sleep(0.025)
            end
            table.sort(owns)
            print("busy " .. most)
            print("own " .. owns[#owns // 2 + 1])
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
        let own = try #require(counts["own"], "\(r.stdout)")
        // The loop, the journal's writer and the signal inbox.
        #expect(idle <= 3, "idle: \(idle) threads")
        // The loop (waiting on the reactor's set too), the journal's
        // writer and the signal inbox (blocked reading its pipe): nine
        // children, three popen pipes, the watch and three requests add
        // none of tasker's. URLSession runs on libdispatch's manager and
        // workers: 4-6 threads in all on a quiet machine, but libdispatch
        // adds workers when the CPU is busy (up to 8 under the whole
        // suite's load), so the total is reported, not bounded.
        #expect(own <= 3, "busy: \(own) threads of tasker's own (\(busy) in all): \(r.stdout)")
    }
}

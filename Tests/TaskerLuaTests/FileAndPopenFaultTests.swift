import Foundation
import Testing

/// fs and io.popen under faults: a copy onto the file itself, a write whose
/// task is gone before it finished, a symlink loop under `**`, a reader
/// that stops reading. (Faults that could hang a run are tested from the
/// CLI, where a watchdog bounds them.)
@Suite struct FileAndPopenFaultTests {
    func scratch() throws -> String { try makeScratchDirectory("fsf") }

    @Test func aCopyOntoTheSameFileIsAnErrorAndNeverATruncation() async throws {
        let d = try scratch()
        defer { try? FileManager.default.removeItem(atPath: d) }
        try "hello\n".write(toFile: d + "/data.txt", atomically: false, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: d + "/link", withDestinationPath: "data.txt")
        try FileManager.default.linkItem(atPath: d + "/data.txt", toPath: d + "/hard")
        let r = try await runLua("""
            local d = "\(d)"
            for _, to in ipairs{"data.txt", "link", "hard", "./data.txt"} do
              local ok, e = pcall(fs.copy, d .. "/data.txt", d .. "/" .. to)
              print(to, ok, e.kind, e.message:match("they are the same file") ~= nil, #fs.read(d .. "/data.txt"))
            end
            -- rename onto itself or a hard link of itself keeps the data
            fs.rename(d .. "/data.txt", d .. "/data.txt")
            fs.rename(d .. "/data.txt", d .. "/hard")
            print(fs.read(d .. "/data.txt") == "hello\\n", fs.read(d .. "/hard") == "hello\\n")
            -- onto a symlink to itself: refused (rename(2) would drop its name); fs.move is rename
            for _, mv in ipairs{fs.rename, fs.move} do
              local ok, e = pcall(mv, d .. "/data.txt", d .. "/link")
              print(ok, e.kind, e.message:match("they are the same file") ~= nil, fs.read(d .. "/data.txt") == "hello\\n")
            end
            -- the link onto the file it leads to: refused too (the data would go)
            local ok, e = pcall(fs.move, d .. "/link", d .. "/data.txt")
            print(ok, e.kind, e.message:match("they are the same file") ~= nil, fs.read(d .. "/data.txt") == "hello\\n")
            fs.copy(d .. "/data.txt", d .. "/other.txt")
            print(fs.read(d .. "/other.txt") == "hello\\n")
            """)
        #expect(r.lines == [
            "data.txt\tfalse\tfs\ttrue\t6",
            "link\tfalse\tfs\ttrue\t6",
            "hard\tfalse\tfs\ttrue\t6",
            "./data.txt\tfalse\tfs\ttrue\t6",
            "true\ttrue",
            "false\tfs\ttrue\ttrue",
            "false\tfs\ttrue\ttrue",
            "false\tfs\ttrue\ttrue",
            "true",
        ], "\(r.output)\(r.diagnostics)")
    }

    /// A copy is staged as a write is: one whose task timed out leaves the
    /// target as it was (it was left cut) and no temp file.
    @Test func aCopyWhoseTaskTimedOutLeavesTheOldTarget() async throws {
        let d = try scratch()
        defer { try? FileManager.default.removeItem(atPath: d) }
        try "old".write(toFile: d + "/target.txt", atomically: false, encoding: .utf8)
        let r = try await runLua("""
            local d = "\(d)"
            fs.write(d .. "/big", string.rep("x", 64 << 20))
            local h = tasker.add{name = "c", timeout = 0.02, run = function() fs.copy(d .. "/big", d .. "/target.txt") end}
            print(h:result())
            fs.copy(d .. "/big", d .. "/copy")
            print(fs.stat(d .. "/copy").size)
            """)
        #expect(r.lines.first?.hasPrefix("false\ttimeout") == true, "\(r.output)\(r.diagnostics)")
        #expect(r.lines.dropFirst().first == "\(64 << 20)", "\(r.output)\(r.diagnostics)")
        #expect(try String(contentsOfFile: d + "/target.txt", encoding: .utf8) == "old")
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: d)) == ["big", "copy", "target.txt"])
    }

    /// An atomic write goes where a symlink leads (the link stays a link),
    /// writes into a FIFO or a device as data comes (a rename would put a
    /// plain file in the node's place), and takes a name of 255 bytes.
    @Test func anAtomicWriteFollowsLinksAndLeavesSpecialFilesInPlace() async throws {
        let d = try scratch()
        defer { try? FileManager.default.removeItem(atPath: d) }
        try "real".write(toFile: d + "/real.txt", atomically: false, encoding: .utf8)
        let fm = FileManager.default
        try fm.createSymbolicLink(atPath: d + "/link", withDestinationPath: "real.txt")
        try fm.createSymbolicLink(atPath: d + "/link2", withDestinationPath: "link")
        try fm.createDirectory(atPath: d + "/sub", withIntermediateDirectories: false)
        try fm.createSymbolicLink(atPath: d + "/dangling", withDestinationPath: "sub/new.txt")
        try fm.createSymbolicLink(atPath: d + "/loop1", withDestinationPath: "loop2")
        try fm.createSymbolicLink(atPath: d + "/loop2", withDestinationPath: "loop1")
        #expect(mkfifo(d + "/fifo", 0o644) == 0)
        let long = String(repeating: "n", count: 255)
        let r = try await runLua("""
            local d = "\(d)"
            -- bounded: were the FIFO replaced, its reader would wait for ever
            local reader = tasker.add{timeout = 10, run = function() return fs.read(d .. "/fifo") end}
            fs.write(d .. "/fifo", "through the fifo")
            print(reader:result())
            fs.write(d .. "/link2", "via the links")
            fs.write(d .. "/dangling", "made")
            fs.write(d .. "/\(long)", "long")
            print(fs.read(d .. "/real.txt"), fs.read(d .. "/sub/new.txt"), fs.read(d .. "/\(long)"))
            print(fs.stat(d .. "/link").type, fs.stat(d .. "/link2").type, fs.stat(d .. "/dangling").type, fs.stat(d .. "/fifo").type)
            -- a loop of links leads nowhere: ELOOP, and the links stay links
            print(select(2, pcall(fs.write, d .. "/loop1", "x")).message:match("Too many levels of symbolic links") ~= nil,
                  select(2, pcall(fs.copy, d .. "/real.txt", d .. "/loop2")).message:match("Too many levels") ~= nil,
                  fs.stat(d .. "/loop1").type, fs.stat(d .. "/loop2").type)
            """)
        #expect(r.lines == ["true\tthrough the fifo", "via the links\tmade\tlong", "link\tlink\tlink\tother", "true\ttrue\tlink\tlink"], "\(r.output)\(r.diagnostics)")
        #expect(Set(try fm.contentsOfDirectory(atPath: d)) == ["real.txt", "link", "link2", "sub", "dangling", "fifo", long, "loop1", "loop2"])
    }

    @Test func anAtomicWriteWhoseTaskTimedOutLeavesTheOldContentAndNoTempFile() async throws {
        let d = try scratch()
        defer { try? FileManager.default.removeItem(atPath: d) }
        try "old".write(toFile: d + "/target.txt", atomically: false, encoding: .utf8)
        // 32 MB take far longer to write and sync than the 20 ms the task has.
        let r = try await runLua("""
            local d = "\(d)"
            local data = string.rep("x", 32 << 20)
            local h = tasker.add{name = "w", timeout = 0.02, run = function()
              fs.write(d .. "/target.txt", data)
              print("written")
            end}
            local ok, e = h:result()
            print(ok, e.kind)
            """)
        let content = try String(contentsOfFile: d + "/target.txt", encoding: .utf8)
        #expect(r.lines == ["false\ttimeout"], "\(r.output)\(r.diagnostics)")
        #expect(content == "old")
        #expect(try FileManager.default.contentsOfDirectory(atPath: d) == ["target.txt"])
    }

    @Test func globStarDoesNotFollowASymlinkLoop() async throws {
        let d = try scratch()
        defer { try? FileManager.default.removeItem(atPath: d) }
        try FileManager.default.createDirectory(atPath: d + "/g/d", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: d + "/g/d/up", withDestinationPath: "..")
        try "x".write(toFile: d + "/g/d/f", atomically: false, encoding: .utf8)
        let r = try await runLua("""
            local d = "\(d)"
            local function rel(list) for i, p in ipairs(list) do list[i] = p:sub(#d + 2) end return table.concat(list, ",") end
            print(rel(fs.glob(d .. "/g/**")))
            print(rel(fs.glob(d .. "/g/**/f")))
            """)
        #expect(r.lines == ["g/d,g/d/f,g/d/up", "g/d/f"], "\(r.output)\(r.diagnostics)")
    }

    @Test func aPopenNobodyReadsStopsAtTheBufferLimit() async throws {
        // The command writes as fast as it can; tasker reads ahead only up
        // to its buffer limit (1 MiB), so the command soon blocks on a full
        // pipe: what it wrote stays within the limit, the pipe and a chunk.
        let r = try await runLua("""
            local f = io.popen("echo $$; exec yes")
            local pid = f:read("l")
            tasker.sleep(0.3)
            local io_ = io.open("/proc/" .. pid .. "/io"):read("a")
            local written = tonumber(io_:match("wchar: (%d+)"))
            print(written > 0, written < 4 << 20, f:read("l"))
            print(f:close())  -- the command gets EPIPE
            """)
        #expect(r.lines == ["true\ttrue\ty", "nil\tsignal\t13"], "\(r.output)\(r.diagnostics)")
    }

    @Test func aTimedOutCommandDoesNotHoldTheRunForItsKillGrace() async throws {
        // SIGTERM ends `sleep` at once: the SIGKILL meant for 2 s later
        // must not keep the run going.
        let r = try await runLua("""
            local h = tasker.add{name = "exec", run = function() tasker.exec{"sleep", "10", timeout = 0.1} end}
            local h2 = tasker.add{name = "execute", timeout = 0.1, run = function() os.execute("exec sleep 10") end}
            print(select(2, h:result()).kind, select(2, h2:result()).kind)
            """)
        #expect(r.lines == ["timeout\ttimeout"], "\(r.output)\(r.diagnostics)")
        #expect(r.result.seconds < 1.5)
    }
}

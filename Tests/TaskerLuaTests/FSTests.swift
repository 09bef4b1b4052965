import Foundation
import Testing

/// README, Files: the fs module on real files.
@Suite struct FSTests {
    func scratch() throws -> String { try makeScratchDirectory("fs") }

    @Test func readWriteAppendStatListAndRemove() async throws {
        let d = try scratch()
        defer { try? FileManager.default.removeItem(atPath: d) }
        let r = try await runLua("""
            local d = "\(d)"
            fs.write(d .. "/a.txt", "hello\\0world")
            fs.append(d .. "/a.txt", "!")
            local data = fs.read(d .. "/a.txt")
            print(#data, data:sub(7), fs.exists(d .. "/a.txt"), fs.exists(d .. "/nope"))
            local st = fs.stat(d .. "/a.txt")
            print(st.type, st.size, math.type(st.mtime), st.mtime > 1.7e9, string.format("%o", st.mode))
            print(fs.stat(d .. "/nope"), fs.stat(d).type)
            fs.write(d .. "/b.txt", "x", {mode = tonumber("600", 8)})
            print(string.format("%o", fs.stat(d .. "/b.txt").mode))
            fs.write(d .. "/b.txt", "yy")  -- atomic replace keeps the mode
            print(string.format("%o", fs.stat(d .. "/b.txt").mode), fs.read(d .. "/b.txt"))
            fs.mkdir(d .. "/deep/er/dir")
            fs.write(d .. "/deep/er/dir/f.lua", "return 1")
            fs.copy(d .. "/a.txt", d .. "/deep/c.txt")
            fs.rename(d .. "/deep/c.txt", d .. "/deep/moved.txt")
            print(table.concat(fs.list(d), ","), table.concat(fs.list(d .. "/deep"), ","))
            local function rel(list) for i, p in ipairs(list) do list[i] = p:sub(#d + 2) end return table.concat(list, ",") end
            print(rel(fs.glob(d .. "/*.txt")), rel(fs.glob(d .. "/**/*.lua")), rel(fs.glob(d .. "/**")))
            fs.remove(d .. "/deep", {recursive = true})
            print(fs.exists(d .. "/deep"))
            """)
        #expect(r.lines == [
            "12\tworld!\ttrue\tfalse",
            "file\t12\tfloat\ttrue\t644",
            "nil\tdir",
            "600",
            "600\tyy",
            "a.txt,b.txt,deep\ter,moved.txt",
            "a.txt,b.txt\tdeep/er/dir/f.lua\ta.txt,b.txt,deep,deep/er,deep/er/dir,deep/er/dir/f.lua,deep/moved.txt",
            "false",
        ], "\(r.output)")
    }

    @Test func failuresRaiseKindFSWithThePathAndTheReason() async throws {
        let r = try await runLua("""
            local ok, e = pcall(fs.read, "/nonexistent/x.txt")
            print(ok, e.kind, e.path, tostring(e))
            ok, e = pcall(fs.mkdir, "/proc/tasker-no", {parents = false})
            print(ok, e.kind, e.message:match("^cannot create directory") ~= nil)
            ok, e = pcall(fs.remove, "/nonexistent")
            print(ok, e.kind)
            ok, e = pcall(fs.read, 42)
            print(ok, e.kind, e.message)
            ok, e = pcall(fs.write, "/tmp/x", "y", {atomic = "yes"})
            print(ok, e.kind, e.message)
            local h = tasker.add(function() return fs.read("/nonexistent/in-task") end)
            local ok2, e2 = h:result()
            print(ok2, e2.kind, tostring(e2):find("pipeline.lua:11: fs: cannot open", 1, true) ~= nil)
            """)
        #expect(r.lines == [
            "false\tfs\t/nonexistent/x.txt\tfs: cannot open '/nonexistent/x.txt': No such file or directory",
            "false\tfs\ttrue",
            "false\tfs",
            "false\tusage\tbad argument #1 to 'fs.read' (string (a path) expected, got number)",
            "false\tusage\tbad option 'atomic' to 'fs.write' (boolean expected, got string)",
            "false\tfs\ttrue",
        ], "\(r.output)")
    }

    @Test func aLargeReadDoesNotStallOtherTasksAndTempdirsGoAtTheEnd() async throws {
        let d = try scratch()
        defer { try? FileManager.default.removeItem(atPath: d) }
        let big = d + "/big.bin"
        #expect(FileManager.default.createFile(atPath: big, contents: Data(count: 64 << 20)))
        let r = try await runLua("""
            local reading, done, during = false, false, 0
            local reader = tasker.add(function()
              local t = fs.tempdir()
              fs.write(t .. "/copy", "x")
              reading = true
              local data = fs.read("\(big)")
              done = true
              return #data, t
            end)
            local ticker = tasker.add(function()
              while not done do
                if reading then during = during + 1 end
                tasker.sleep(0.001)
              end
            end)
            local n, t = reader:await()
            ticker:await()
            -- other tasks ran while the 64 MB were read
            print(n, during > 0, fs.exists(t))
            local kept = fs.tempdir{keep = true}
            print(kept:match("tasker%-") ~= nil)
            io.open("\(d)/dirs", "w"):write(t .. "\\n" .. kept):close()
            """)
        #expect(r.lines == ["67108864\ttrue\ttrue", "true"], "\(r.output)")
        // the run removed its temp dir, not the kept one
        let dirs = try String(contentsOfFile: d + "/dirs", encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(!FileManager.default.fileExists(atPath: dirs[0]))
        let kept = dirs[1]
        #expect(FileManager.default.fileExists(atPath: kept))
        try? FileManager.default.removeItem(atPath: kept)
    }

    /// A path that is not UTF-8 is refused (it named another file: each
    /// bad byte became U+FFFD); names on disk that are not UTF-8 come back
    /// from list and glob as they are (io.open takes them), and a recursive
    /// remove gets through them.
    @Test func pathsThatAreNotUTF8AreRefusedAndNamesOnDiskComeBackAsTheyAre() async throws {
        let d = try scratch()
        defer { try? FileManager.default.removeItem(atPath: d) }
        let r = try await runLua("""
            local d = "\(d)"
            print(select(2, pcall(fs.write, d .. "/caf\\xe9.txt", "x")).message:gsub(".*%(", "("))
            print(select(2, pcall(fs.exists, "日本\\xff")).message:match("byte.-;"))
            print(#fs.list(d))
            assert(io.open(d .. "/caf\\xe9.txt", "w")):close()
            assert(os.execute("mkdir " .. d .. "/sub\\xff && touch " .. d .. "/sub\\xff/in.txt"))
            for _, name in ipairs(fs.list(d)) do print(name == "caf\\xe9.txt" or name == "sub\\xff") end
            local found = fs.glob(d .. "/*/*.txt")
            print(#found, found[1] == d .. "/sub\\xff/in.txt")
            -- `?` is a character: é is one, \\xe9 (not UTF-8) one byte
            fs.write(d .. "/é", "")
            print((table.concat(fs.glob(d .. "/?"), ","):gsub(".*/", "")), #fs.glob(d .. "/caf?.txt"))
            fs.remove(d, {recursive = true})
            print(fs.exists(d))
            """)
        #expect(r.lines == [
            "(the path is not UTF-8: byte 0xE9 at \(d.utf8.count + 5); fs takes UTF-8 paths, io.open and os.remove any bytes)\t1",
            "byte 0xFF at 7;", "0", "true", "true", "1\ttrue", "é\t1", "false",
        ], "\(r.output)\(r.diagnostics)")
    }

    /// A tree is removed through directory descriptors: deeper than
    /// PATH_MAX is fine, a link inside is removed as a link (its target
    /// stays), and `.` or `..` is refused before anything is removed.
    @Test func aRecursiveRemoveWorksThroughDescriptorsAndRefusesDotAndDotDot() async throws {
        let d = try scratch()
        defer { try? FileManager.default.removeItem(atPath: d) }
        let r = try await runLua("""
            local d = "\(d)"
            local long = string.rep("n", 250)
            -- 20 levels of 250-byte names: 5,000 bytes, past PATH_MAX
            assert(os.execute("cd " .. d .. " && mkdir top && cd top && for i in $(seq 20); do mkdir " .. long .. " && cd -P " .. long .. " || exit 1; done && touch leaf"))
            fs.mkdir(d .. "/outside")
            fs.write(d .. "/outside/keep", "x")
            assert(os.execute("ln -s " .. d .. "/outside " .. d .. "/top/link"))
            -- and 3,000 levels more (one directory open at a time, no recursion)
            local chain = string.rep("a/", 1000)
            assert(os.execute("cd " .. d .. "/top && mkdir -p " .. chain .. " && cd -P " .. chain .. " && mkdir -p " .. chain
                              .. " && cd -P " .. chain .. " && mkdir -p " .. chain .. " && touch " .. chain .. "f"))
            fs.remove(d .. "/top", {recursive = true})
            print(fs.exists(d .. "/top"), fs.read(d .. "/outside/keep"))
            print(select(2, pcall(fs.remove, "/")).message)  -- not even tried without recursive
            fs.mkdir(d .. "/sub")
            fs.write(d .. "/sub/f", "y")
            print(select(2, pcall(fs.remove, d .. "/sub/..", {recursive = true})).message:gsub(".*: ", ""))
            print(fs.read(d .. "/sub/f"))
            """)
        #expect(r.lines == ["false\tx", "cannot remove '/': refusing to remove '/'", "refusing to remove '.' or '..'\t1", "y"],
                "\(r.output)\(r.diagnostics)")
    }

    /// A recursive remove whose task times out stops there (it went on
    /// to the end, and the run waited for it).
    @Test func aRecursiveRemoveStopsWhenItsTaskTimesOut() async throws {
        let d = try scratch()
        defer { try? FileManager.default.removeItem(atPath: d) }
        let r = try await runLua("""
            local d = "\(d)"
            assert(os.execute("cd " .. d .. " && mkdir big && cd big && for i in $(seq 10); do mkdir d$i && (cd d$i && seq 1000 | xargs touch); done"))
            local rm = tasker.add{timeout = 0.01, run = function() fs.remove(d .. "/big", {recursive = true}) end}
            print(select(2, pcall(rm.await, rm)).kind)
            """)
        #expect(r.lines == ["timeout"], "\(r.output)\(r.diagnostics)")
        // the run ends once the removal has let go: it stopped, not finished
        #expect(FileManager.default.fileExists(atPath: d + "/big"))
    }

    @Test func everyFunctionRaisesKindFSWithItsPathOnFailure() async throws {
        let d = try scratch()
        defer { try? FileManager.default.removeItem(atPath: d) }
        let r = try await runLua("""
            local d = "\(d)"
            fs.write(d .. "/file", "x")
            local calls = {
              {"read", d .. "/missing"},
              {"read", d},                                  -- a directory
              {"write", d .. "/no/such/dir/f", "x"},
              {"write", d .. "/no/such/dir/f", "x", {atomic = false}},
              {"append", d .. "/no/such/dir/f", "x"},
              {"list", d .. "/missing"},
              {"list", d .. "/file"},                       -- not a directory
              {"mkdir", d .. "/file/sub"},
              {"mkdir", d, {parents = false}},              -- exists
              {"remove", d .. "/missing"},
              {"remove", d, {recursive = false}},           -- not empty
              {"rename", d .. "/missing", d .. "/other"},
              {"copy", d .. "/missing", d .. "/other"},
              {"copy", d, d .. "/other"},                   -- a directory
            }
            for _, c in ipairs(calls) do
              local ok, e = pcall(fs[c[1]], table.unpack(c, 2))
              print(c[1], ok, e.kind, e.path and e.path:sub(#d + 1), e.message:match("^[^']+"))
            end
            print(fs.stat(d .. "/file/x"), fs.exists(d .. "/file/x"), #fs.glob(d .. "/nothing*"))
            """)
        #expect(r.lines == [
            "read\tfalse\tfs\t/missing\tcannot open ",
            "read\tfalse\tfs\t\tcannot read ",
            "write\tfalse\tfs\t/no/such/dir/f\tcannot write ",
            "write\tfalse\tfs\t/no/such/dir/f\tcannot open ",
            "append\tfalse\tfs\t/no/such/dir/f\tcannot open ",
            "list\tfalse\tfs\t/missing\tcannot list ",
            "list\tfalse\tfs\t/file\tcannot list ",
            "mkdir\tfalse\tfs\t/file\tcannot create directory ",
            "mkdir\tfalse\tfs\t\tcannot create directory ",
            "remove\tfalse\tfs\t/missing\tcannot remove ",
            "remove\tfalse\tfs\t\tcannot remove ",
            "rename\tfalse\tfs\t/missing\tcannot rename ",
            "copy\tfalse\tfs\t/missing\tcannot open ",
            "copy\tfalse\tfs\t\tcannot copy ",
            "nil\tfalse\t0",
        ], "\(r.output)")
    }
}

import Testing

/// README, Hot reload, with a real inotify watch: the pipeline rewrites its own
/// used file and waits (bounded) until a task sees the new version.
@Suite struct ReloadTests {
    static let helpers = """
        local dir = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
        local function write(name, text, atomic)
          local path = dir .. "/" .. name
          local target = atomic and (path .. ".tmp") or path
          local f = assert(io.open(target, "w")); f:write(text); f:close()
          if atomic then assert(os.rename(target, path)) end
        end
        local function waitFor(probe, want)
          local t0 = tasker.now()
          repeat
            if probe() == want then return true, tasker.now() - t0 end
            tasker.sleep(0.005)
          until tasker.now() - t0 > 10
          return false
        end
        -- How many times `text` has been logged (in runs given
        -- diagnosticsFile: "diagnostics.log"; lines are logged on the loop,
        -- in the file before the call that logs them returns).
        local function logged(text)
          local f = io.open(dir .. "/diagnostics.log")
          if not f then return 0 end
          local all, n, at = f:read("a"), 0, 1
          f:close()
          while true do
            at = all:find(text, at, true)
            if not at then return n end
            n, at = n + 1, at + #text
          end
        end
        local function version() return tasker.add(function(ctx) return ctx.args.version end):await() end

        """

    static func rule(_ v: Int) -> String {
        "tasker.intercept{name = 'tag', fn = function(t) t.args.version = \(v) end}\n"
    }

    @Test func reloadsOnAnInPlaceWriteAndOnAnAtomicRename() async throws {
        let r = try await runLua(Self.helpers + """
            tasker.use("rules.lua")
            print(version())
            write("rules.lua", [[\(Self.rule(2))]], false)
            local ok, took = waitFor(version, 2)
            print(ok, took < 1)
            write("rules.lua", [[\(Self.rule(3))]], true)
            ok, took = waitFor(version, 3)
            print(ok, took < 1)
            """, files: ["rules.lua": Self.rule(1)], watch: true)
        #expect(r.lines == ["1", "true\ttrue", "true\ttrue"])
        #expect(r.diagnostics.components(separatedBy: "INFO reloaded rules.lua").count - 1 >= 2)
    }

    @Test func aBrokenReloadKeepsTheOldVersionAndLogsFileAndLine() async throws {
        let r = try await runLua(Self.helpers + """
            tasker.use("rules.lua")
            write("rules.lua", "tasker.intercept{name = 'tag', fn = function(t) t.args.version = 2 end\\n", false)
            write("canary.lua", "x = 1", false)  -- unrelated files in the directory are ignored
            print((waitFor(function() return logged("reload of " .. dir .. "/rules.lua failed") > 0 end, true)))
            print(version())
            -- a table raised while loading: logged with where it was raised
            write("rules.lua", "error({x = 1})\\n", false)
            print((waitFor(function() return logged("reload of " .. dir .. "/rules.lua failed") > 1 end, true)))
            -- a runtime error: its message at file:line, on one line
            write("rules.lua", "local function f() error('boom at runtime') end\\nf()\\n", false)
            print((waitFor(function() return logged("reload of " .. dir .. "/rules.lua failed") > 2 end, true)))
            write("rules.lua", [[\(Self.rule(4))]], false)
            print((waitFor(version, 4)))
            """, files: ["rules.lua": Self.rule(1)], watch: true, diagnosticsFile: "diagnostics.log")
        #expect(r.lines == ["true", "1", "true", "true", "true"])
        #expect(r.diagnostics.contains("keeping the previous version: rules.lua:1: boom at runtime\n"), "\(r.diagnostics)")
        #expect(r.diagnostics.contains("rules.lua:1: {\"x\":1}"), "\(r.diagnostics)")
        // one line each, no traceback
        #expect(!r.diagnostics.contains("stack traceback"), "\(r.diagnostics)")
        #expect(r.diagnostics.contains("reload of rules.lua failed; keeping the previous version: rules.lua:2: '}' expected (to close '{' at line 1) near <eof>")
                || r.diagnostics.contains("rules.lua:1: '}' expected"))
    }

    @Test func heldTasksMoveToTheNewInterceptorOfTheSameName() async throws {
        let r = try await runLua(Self.helpers + """
            tasker.use("batch.lua")
            local hs = {}
            for i = 1, 3 do hs[i] = tasker.add(function() return i end) end
            waitFor(function() return hs[1]:state() .. hs[3]:state() end, "heldheld")
            print(hs[1]:state(), hs[3]:state())
            -- the new version releases the batch once a fourth task arrives
            write("batch.lua", "tasker.intercept{name = 'batch', fn = function(t, held) if held < 3 then return 'hold' end end}", true)
            -- (the old version would hold the fourth task too, for ever)
            assert(waitFor(function() return logged("reloaded " .. dir .. "/batch.lua") > 0 end, true), "batch.lua was not reloaded")
            print(hs[1]:state())
            hs[4] = tasker.add(function() return 4 end)
            print(table.concat(tasker.all(hs), ","))
            """, files: ["batch.lua": "tasker.intercept{name = 'batch', fn = function() return 'hold' end}"], watch: true,
            diagnosticsFile: "diagnostics.log")
        #expect(r.lines == ["held\theld", "held", "1,2,3,4"], "\(r.result.mainError ?? "")")
    }

    /// `max_hold` counts from the oldest held task, also across a reload
    /// that moves the held tasks to the new interceptor (the reload started
    /// the clock again: saving more often than max_hold held them for ever).
    @Test func aReloadDoesNotRestartMaxHold() async throws {
        let r = try await runLua(Self.helpers + """
            tasker.use("hold.lua")
            -- a run with nothing else to do releases what is held at once
            -- (and a task let through releases what is held before it)
            local busy = tasker.add{name = "busy", run = function() tasker.sleep(3.5) end}
            local t0 = tasker.now()
            local h = tasker.add(function() return tasker.now() - t0 end)
            tasker.sleep(1.2)
            write("hold.lua", "tasker.intercept{name = 'h', max_hold = 2, fn = function(t) if t.name ~= 'busy' then return 'hold' end end} -- v2", true)
            assert(waitFor(function() return logged("reloaded " .. dir .. "/hold.lua") > 0 end, true), "hold.lua was not reloaded")
            local released = h:await()
            -- 2 s from the hold, not 2 s from the reload (3.2 s)
            print(released >= 1.9, released < 2.9)
            """, files: ["hold.lua": "tasker.intercept{name = 'h', max_hold = 2, fn = function(t) if t.name ~= 'busy' then return 'hold' end end}"],
            watch: true, diagnosticsFile: "diagnostics.log")
        #expect(r.lines == ["true\ttrue"], "\(r.output)\(r.result.mainError ?? "")")
    }

    /// Two interceptors of one name in a file: a reload replaces each with
    /// its new self, in order (the first new one replaced both, and the
    /// second was lost).
    @Test func twoInterceptorsOfOneNameAreEachReplaced() async throws {
        let r = try await runLua(Self.helpers + """
            tasker.use("pair.lua")
            local function mark() return tasker.add{args = {s = ""}, run = function(ctx) return ctx.args.s end}:await() end
            print(mark())
            write("pair.lua", [[
            tasker.intercept{name = 'A', fn = function(t) t.args.s = t.args.s .. 'X' end}
            tasker.intercept{name = 'A', fn = function(t) t.args.s = t.args.s .. 'Y' end}
            ]], true)
            assert(waitFor(function() return logged("reloaded " .. dir .. "/pair.lua") > 0 end, true), "pair.lua was not reloaded")
            print(mark())
            """, files: ["pair.lua": """
            tasker.intercept{name = 'A', fn = function(t) t.args.s = t.args.s .. 'x' end}
            tasker.intercept{name = 'A', fn = function(t) t.args.s = t.args.s .. 'y' end}
            """], watch: true, diagnosticsFile: "diagnostics.log")
        #expect(r.lines == ["xy", "XY"], "\(r.output)\(r.result.mainError ?? "")")
    }

    @Test func aReloadedFileCanRegisterAReactor() async throws {
        let r = try await runLua(Self.helpers + """
            tasker.use("react.lua")
            local function failing() return select(2, tasker.add(function() error("x", 0) end):result()) end
            print(tostring(failing()))
            write("react.lua", "tasker.react{name = 'r', when = function(t, res) return not res.ok end, fn = function() error('reacted', 0) end}", false)
            local ok = waitFor(function() return tostring(failing()) end, "reactor: reactor 'r' failed: reacted")
            print(ok)
            """, files: ["react.lua": "-- no reactor yet\n"], watch: true)
        #expect(r.lines == ["x", "true"])
    }

    @Test func useWithoutWatchLoadsOnceAndBadFilesFailTheCaller() async throws {
        let r = try await runLua("""
            tasker.use("rules.lua")
            tasker.use("rules.lua")  -- a second use of the same file does nothing
            print(tasker.add(function(ctx) return ctx.args.version end):await())
            local ok, e = pcall(function() tasker.use("missing.lua") end)
            print(ok, e.kind, e.where, e.message)
            print(pcall(tasker.use, "broken.lua"))
            print(pcall(tasker.use, "raises.lua"))
            print(pcall(tasker.use, "/dev/zero"))  -- read for ever, were it not refused
            local dir = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
            assert(os.execute("mkfifo " .. dir .. "/fifo.lua"))
            print(pcall(tasker.use, "fifo.lua"))  -- a wait for a writer, were it not refused
            assert(os.execute("truncate -s 17M " .. dir .. "/big.lua"))
            print(pcall(tasker.use, "big.lua"))
            assert(os.execute("truncate -s 16M " .. dir .. "/exact.lua"))  -- at the bound: read (and not Lua)
            print((select(2, pcall(tasker.use, "exact.lua")):match("exact.lua:1: unexpected symbol")))
            print(pcall(tasker.use, "r\\xe9.lua"))
            -- `..` after a link is the link target's parent, as on disk
            assert(os.execute("mkdir -p " .. dir .. "/real/inner && ln -s real/inner " .. dir .. "/lk"))
            assert(io.open(dir .. "/real/t.lua", "w")):write("print('real/t.lua')"):close()
            assert(io.open(dir .. "/t.lua", "w")):write("print('the wrong t.lua')"):close()
            tasker.use("lk/../t.lua")
            tasker.use("real/t.lua")  -- the same file: used already
            print(rulesGlobal, type(tasker))
            """, files: ["rules.lua": Self.rule(1) + "rulesGlobal = 'set in its own environment'\n",
                         "broken.lua": "return +\n", "raises.lua": "\nerror({code = 3})\n"])
        #expect(r.lines == ["1", "false\tfs\tpipeline.lua:4\ttasker.use: cannot open 'missing.lua': No such file or directory",
                            "false\tbroken.lua:1: unexpected symbol near '+'",
                            "false\traises.lua:2: {\"code\":3}",
                            "false\tfs: tasker.use: cannot open '/dev/zero': it is a device, not a file",
                            "false\tfs: tasker.use: cannot open 'fifo.lua': it is a FIFO, not a file",
                            "false\tfs: tasker.use: cannot open 'big.lua': 17825792 bytes, more than a used file may have (16 MB)",
                            "exact.lua:1: unexpected symbol",
                            "false\tusage: bad argument #1 to 'tasker.use' (the path is not UTF-8: byte 0xE9 at 2)",
                            "real/t.lua",
                            "nil\ttable"])
    }

    /// A used file that uses itself, directly or through another, is a
    /// usage error naming the chain (it was Lua's C stack overflowing, in
    /// 2 KB of nested tracebacks).
    @Test func aUsedFileThatUsesItselfIsAUsageError() async throws {
        let r = try await runLua("""
            print(pcall(tasker.use, "a.lua"))
            """, files: ["a.lua": "tasker.use('b.lua')\n", "b.lua": "tasker.use('a.lua')\n"])
        #expect(r.lines == ["false\tb.lua:1: usage: tasker.use: a cycle of used files (a.lua -> b.lua -> a.lua)"], "\(r.output)\(r.diagnostics)")
    }

    /// The pipeline using itself (directly, or through a used file) is the
    /// same usage error, before its main chunk runs a second time; a file
    /// reached again through a link is found at once, named as written.
    @Test func thePipelineUsingItselfOrAFileThroughALinkIsACycle() async throws {
        let r = try await runLua("""
            print("main chunk")
            print(pcall(function() tasker.use("pipeline.lua") end))
            print(pcall(tasker.use, "back.lua"))
            local dir = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$")
            assert(os.execute("ln -s a.lua " .. dir .. "/alias.lua"))
            print(pcall(tasker.use, "a.lua"))
            """, files: ["back.lua": "tasker.use('pipeline.lua')\n", "a.lua": "tasker.use('b.lua')\n", "b.lua": "tasker.use('alias.lua')\n"])
        #expect(r.lines == [
            "main chunk",
            "false\tpipeline.lua:2: usage: tasker.use: a cycle of used files (pipeline.lua -> pipeline.lua): the pipeline uses itself",
            "false\tback.lua:1: usage: tasker.use: a cycle of used files (pipeline.lua -> back.lua -> pipeline.lua): the pipeline uses itself",
            "false\tb.lua:1: usage: tasker.use: a cycle of used files (a.lua -> b.lua -> alias.lua)",
        ], "\(r.output)\(r.diagnostics)")
    }

    @Test func aBurstOfWritesAndAHalfWrittenFileNeverLeaveTasksUnintercepted() async throws {
        // 200 quick in-place writes while jobs run: every job sees some
        // version of the rule; an empty (truncated) file keeps the old one.
        let r = try await runLua(Self.helpers + """
            tasker.use("rules.lua")
            local missed = 0
            local writer = tasker.add(function()
              for v = 2, 201 do write("rules.lua", [[tasker.intercept{name = 'tag', fn = function(t) t.args.version = ]] .. v .. [[ end}
            ]], false) end
              -- jobs go on until the emptied file has been reloaded (and kept
              -- out): a reload in the burst may have found it empty already
              local empty = "rules.lua is empty (half-written?)"
              local before = logged(empty)
              write("rules.lua", "", false)
              return (waitFor(function() return logged(empty) > before end, true))
            end)
            while writer:state() ~= "succeeded" do
              if version() == nil then missed = missed + 1 end
              tasker.sleep(0.001)
            end
            print(missed, version() ~= nil, writer:await())
            """, files: ["rules.lua": Self.rule(1)], watch: true, diagnosticsFile: "diagnostics.log")
        #expect(r.lines == ["0\ttrue\ttrue"])
        #expect(r.diagnostics.contains("rules.lua is empty (half-written?); keeping the previous version"))
    }

    @Test func tasksExitInAReloadedFileEndsTheRunWithoutCallingItAFailedReload() async throws {
        let r = try await runLua(Self.helpers + """
            tasker.use("rules.lua")
            write("rules.lua", "tasker.exit(7)\\n", false)
            tasker.sleep(5)
            """, files: ["rules.lua": Self.rule(1)], watch: true)
        #expect(r.exitCode == 7, "\(r.result.mainError ?? "")")
        #expect(!r.diagnostics.contains("failed"))
        #expect(r.diagnostics.contains("called tasker.exit(7) while reloading"))
    }

    /// A used file that is a link: an edit of the file it leads to, in
    /// another directory, reloads it.
    @Test func reloadsWhenTheFileALinkLeadsToChanges() async throws {
        let r = try await runLua(Self.helpers + """
            assert(os.execute("mkdir " .. dir .. "/elsewhere && ln -s " .. dir .. "/elsewhere/rules.lua " .. dir .. "/rules.lua"))
            write("elsewhere/rules.lua", [[\(Self.rule(1))]], false)
            tasker.use("rules.lua")
            print(version())
            write("elsewhere/rules.lua", [[\(Self.rule(2))]], false)
            print((waitFor(version, 2)))
            write("elsewhere/rules.lua", [[\(Self.rule(3))]], true)
            print((waitFor(version, 3)))
            """, watch: true)
        #expect(r.lines == ["1", "true", "true"], "\(r.diagnostics)")
    }

    /// A Kubernetes ConfigMap volume: `rules.lua` -> `..data/rules.lua`,
    /// `..data` -> a directory of the version, swapped by a rename of a new
    /// link over `..data` (the old directory then removed), twice.
    @Test func reloadsWhenAConfigMapSwapsItsDataLink() async throws {
        let r = try await runLua(Self.helpers + """
            local cm = dir .. "/cm"
            local function version_dir(v)
              assert(os.execute("mkdir " .. cm .. "/..v" .. v))
              write("cm/..v" .. v .. "/rules.lua", "tasker.intercept{name = 'tag', fn = function(t) t.args.version = " .. v .. " end}", false)
            end
            local function swap(from, to)
              version_dir(to)
              assert(os.execute("cd " .. cm .. " && ln -s ..v" .. to .. " ..data_tmp && mv -T ..data_tmp ..data && rm -rf ..v" .. from))
            end
            assert(os.execute("mkdir " .. cm))
            version_dir(1)
            assert(os.execute("cd " .. cm .. " && ln -s ..v1 ..data && ln -s ..data/rules.lua rules.lua"))
            tasker.use("cm/rules.lua")
            print(version())
            swap(1, 2)
            print((waitFor(version, 2)))
            swap(2, 3)
            print((waitFor(version, 3)))
            """, watch: true)
        #expect(r.lines == ["1", "true", "true"], "\(r.diagnostics)")
    }

    /// The used file's directory removed and made again (a deploy that
    /// replaces the directory): the new file is loaded; the removal alone
    /// is no reload (no "cannot open" error).
    @Test func reloadsWhenItsDirectoryIsMadeAgain() async throws {
        let r = try await runLua(Self.helpers + """
            assert(os.execute("mkdir -p " .. dir .. "/top/conf"))
            write("top/conf/rules.lua", [[\(Self.rule(1))]], false)
            tasker.use("top/conf/rules.lua")
            print(version())
            assert(os.execute("rm -rf " .. dir .. "/top/conf && mkdir " .. dir .. "/top/conf"))
            write("top/conf/rules.lua", [[\(Self.rule(2))]], false)
            print((waitFor(version, 2)))
            assert(os.execute("rm -rf " .. dir .. "/top/conf && mkdir " .. dir .. "/top/conf.new"))
            write("top/conf.new/rules.lua", [[\(Self.rule(3))]], false)
            assert(os.execute("mv " .. dir .. "/top/conf.new " .. dir .. "/top/conf"))
            print((waitFor(version, 3)))
            -- a directory above it, removed and made again
            assert(os.execute("rm -rf " .. dir .. "/top && mkdir -p " .. dir .. "/top/conf"))
            write("top/conf/rules.lua", [[\(Self.rule(4))]], false)
            print((waitFor(version, 4)))
            write("top/conf/rules.lua", [[\(Self.rule(5))]], false)
            print((waitFor(version, 5)))
            """, watch: true)
        #expect(r.lines == ["1", "true", "true", "true", "true"], "\(r.diagnostics)")
        #expect(!r.diagnostics.contains("failed"), "\(r.diagnostics)")
    }

    /// The directory renamed away and another moved into its place: the
    /// new one's file is followed, the old one's edits are not a change.
    @Test func aDirectoryRenamedAwayIsLetGoAndItsReplacementFollowed() async throws {
        let r = try await runLua(Self.helpers + """
            assert(os.execute("mkdir " .. dir .. "/conf"))
            write("conf/rules.lua", [[\(Self.rule(1))]], false)
            tasker.use("conf/rules.lua")
            assert(os.execute("mv " .. dir .. "/conf " .. dir .. "/conf.old && mkdir " .. dir .. "/conf.new"))
            write("conf.new/rules.lua", [[\(Self.rule(2))]], false)
            assert(os.execute("mv " .. dir .. "/conf.new " .. dir .. "/conf"))
            print((waitFor(version, 2)))
            write("conf.old/rules.lua", [[\(Self.rule(9))]], false)
            write("conf/rules.lua", [[\(Self.rule(3))]], false)
            print((waitFor(version, 3)))
            """, watch: true)
        #expect(r.lines == ["true", "true"], "\(r.diagnostics)")
    }

    /// The file replaced by a link through a rename (what `ln -sfn` does):
    /// the link's target is followed from then on.
    @Test func aFileReplacedByALinkIsFollowedThroughIt() async throws {
        let r = try await runLua(Self.helpers + """
            assert(os.execute("mkdir " .. dir .. "/other"))
            write("other/real.lua", [[\(Self.rule(2))]], false)
            tasker.use("rules.lua")
            assert(os.execute("ln -sfn other/real.lua " .. dir .. "/rules.lua"))
            print((waitFor(version, 2)))
            write("other/real.lua", [[\(Self.rule(3))]], false)
            print((waitFor(version, 3)))
            """, files: ["rules.lua": Self.rule(1)], watch: true)
        #expect(r.lines == ["true", "true"], "\(r.diagnostics)")
    }

    /// Written, then removed before the reload: no error, the old version
    /// stays, and the file back is loaded.
    @Test func aFileRemovedBeforeItsReloadKeepsTheOldVersion() async throws {
        let r = try await runLua(Self.helpers + """
            tasker.use("rules.lua")
            write("rules.lua", [[\(Self.rule(2))]], false)
            os.remove(dir .. "/rules.lua")
            print(version())
            write("rules.lua", [[\(Self.rule(3))]], false)
            print((waitFor(version, 3)))
            """, files: ["rules.lua": Self.rule(1)], watch: true)
        #expect(r.lines == ["1", "true"], "\(r.diagnostics)")
        #expect(!r.diagnostics.contains("failed"), "\(r.diagnostics)")
    }
}

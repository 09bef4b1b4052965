import Testing

/// The coroutine library behaves as plain Lua's, with engine calls passing
/// through user coroutines (docs/ARCHITECTURE.md).
@Suite struct CoroutineTests {
    @Test func mainChunkAndBodiesLookLikeTheMainThread() async throws {
        let r = try await runLua("""
            local co, ismain = coroutine.running()
            print(type(co), ismain, coroutine.isyieldable(), coroutine.status(co))
            print(pcall(coroutine.yield, 1))
            local h = tasker.add(function()
              local c, m = coroutine.running()
              return m, coroutine.isyieldable()
            end)
            print(h:await())
            local inner = coroutine.wrap(function() return coroutine.isyieldable(), select(2, coroutine.running()) end)
            print(inner())
            """)
        #expect(r.lines == ["thread\ttrue\tfalse\trunning", "false\tattempt to yield from outside a coroutine",
                            "true\tfalse", "true\tfalse"])
    }

    @Test func aGeneratorThatSleepsPassesEngineYieldsThrough() async throws {
        let r = try await runLua("""
            local gen = coroutine.wrap(function()
              for i = 1, 3 do tasker.sleep(0.001); coroutine.yield(i) end
              return "end"
            end)
            print(gen(), gen(), gen(), gen())
            local h = tasker.add(function()
              local co = coroutine.create(function(a)
                local b = coroutine.yield(a + 1)
                local v = tasker.add(function() return b * 10 end):await()
                return v
              end)
              local _, x = coroutine.resume(co, 1)
              local ok, y = coroutine.resume(co, x + 1)
              return x, y, ok, coroutine.status(co)
            end)
            print(h:await())
            """)
        #expect(r.lines == ["1\t2\t3\tend", "2\t30\ttrue\tdead"])
    }

    @Test func errorsInsideCoroutinesReadAsInPlainLua() async throws {
        let r = try await runLua("""
            local co = coroutine.create(function() error("inside") end)
            print(coroutine.resume(co))
            print(coroutine.resume(co))
            local w = coroutine.wrap(function() error("wrapped") end)
            print(pcall(w))
            local w2 = coroutine.wrap(function() error({code = 1}) end)
            print(select(2, pcall(w2)).code)
            print(pcall(coroutine.resume, 42))
            local c2 = coroutine.create(function() coroutine.yield() end)
            coroutine.resume(c2)
            print(coroutine.close(c2), coroutine.status(c2))
            """)
        #expect(r.lines == [
            "false\tpipeline.lua:1: inside",
            "false\tcannot resume dead coroutine",
            "false\tpipeline.lua:4: wrapped",
            "1",
            "false\tbad argument #1 to 'coroutine.resume' (thread expected, got number)",
            "true\tdead",
        ])
    }

    @Test func engineThreadsCannotBeResumedOrClosedByUserCode() async throws {
        let r = try await runLua("""
            local main = coroutine.running()
            local h = tasker.add(function()
              local ok, err = coroutine.resume(main)
              local ok2, err2 = pcall(coroutine.close, main)
              return ok, err, ok2, err2
            end)
            print(h:await())
            """)
        #expect(r.lines == ["false\tcannot resume non-suspended coroutine\tfalse\tcannot close a normal coroutine"])
    }

    @Test func yieldingInsidePcallWorksAsIn54() async throws {
        let r = try await runLua("""
            local ok, v = pcall(function() tasker.sleep(0.001); return "slept in pcall" end)
            print(ok, v)
            local co = coroutine.wrap(function() return pcall(function() coroutine.yield("y") end) end)
            print(co(), co())
            """)
        #expect(r.lines == ["true\tslept in pcall", "y\ttrue"])
    }
}

@Suite struct EnvironmentTests {
    @Test func argsVarsRequireAndPackagePath() async throws {
        let r = try await runLua("""
            print(#tasker.args, tasker.args[1], tasker.args[2], tasker.vars.env)
            print(require("tasker") == tasker)
            print(require("helper").greet())
            print(type(string.format), type(io.write), type(os.time), type(utf8.char))
            """, files: ["helper.lua": "return {greet = function() return 'hi from helper' end}"],
            args: ["one", "--two"], vars: ["env": "prod"])
        #expect(r.lines == ["2\tone\t--two\tprod", "true", "hi from helper", "function\tfunction\tfunction\tfunction"])
    }

    @Test func exitEndsTheRunWithTheCodeAfterCancellingTheRest() async throws {
        let r = try await runLua("""
            local h = tasker.add(function() tasker.sleep(10) end)
            tasker.add(function() tasker.sleep(0.01); tasker.exit(3) end)
            h:await()
            print("not reached")
            """)
        #expect(r.exitCode == 3)
        #expect(r.output.isEmpty)
        #expect(r.result.counts[.cancelled] == 2)
    }

    /// A coroutine waiting in an engine call (a sleep inside it) belongs to
    /// the task that resumed it: to another it is "normal", and resuming
    /// or closing it fails as in Lua, leaving its owner's wait whole.
    @Test func aCoroutineWaitingForItsTaskCannotBeResumedByAnother() async throws {
        let r = try await runLua("""
            local co
            local a = tasker.add{name = "a", run = function()
              co = coroutine.create(function() tasker.sleep(0.3); return "done" end)
              local ok, v = coroutine.resume(co)
              return tostring(ok) .. " " .. v .. " " .. coroutine.status(co)
            end}
            local b = tasker.add{name = "b", run = function()
              while co == nil do tasker.sleep(0.01) end
              local st = coroutine.status(co)
              local ok, err = coroutine.resume(co)
              local closed, cerr = pcall(coroutine.close, co)
              return st .. " | " .. tostring(ok) .. " " .. tostring(err) .. " | " .. tostring(closed) .. " " .. tostring(cerr)
            end}
            print(a:await())
            print(b:await())
            """)
        #expect(r.lines == ["true done dead",
                            "normal | false cannot resume non-suspended coroutine | false cannot close a normal coroutine"],
                "\(r.output)\(r.result.mainError ?? "")")
    }
}

import Testing
import TaskerCore

@Suite struct ErrorTests {
    @Test func engineErrorsAreTablesWithKindMessageAndToString() async throws {
        let r = try await runLua("""
            local h = tasker.add{name = "fetch", timeout = 0.01, run = function() tasker.sleep(1) end}
            local _, e = h:result()
            print(type(e), e.kind, e.message, tostring(e))
            local ok, u = pcall(tasker.sleep)
            print(u.kind, tostring(u))
            local ok2, u2 = pcall(function() tasker.sleep("soon") end)
            print(tostring(u2))
            """)
        #expect(r.lines == [
            "table\ttimeout\ttask 'fetch' exceeded 0.01s\ttimeout: task 'fetch' exceeded 0.01s",
            "usage\tusage: bad argument #1 to 'tasker.sleep' (non-negative number expected, got no value)",
            "pipeline.lua:6: usage: bad argument #1 to 'tasker.sleep' (non-negative number expected, got string)",
        ])
    }

    @Test func userErrorsPassThroughUnchangedWithPosition() async throws {
        let r = try await runLua("""
            local h = tasker.add(function() error("disk full") end)
            print(select(2, h:result()))
            local t = setmetatable({}, {__tostring = function() return "custom" end})
            local h2 = tasker.add(function() error(t) end)
            print(select(2, h2:result()) == t)
            """)
        #expect(r.lines == ["pipeline.lua:1: disk full", "true"])
        #expect(r.result.failed.map(\.message) == ["pipeline.lua:1: disk full", "custom"])
    }

    @Test func mainChunkErrorExitsTwoWithTracebackAndCancelsTheRest() async throws {
        let r = try await runLua("""
            local h = tasker.add(function() tasker.sleep(10) end)
            local function inner() error("main broke") end
            inner()
            """)
        #expect(r.exitCode == 2)
        let message = try #require(r.result.mainError)
        #expect(message.hasPrefix("pipeline.lua:2: main broke"))
        #expect(message.contains("stack traceback:"))
        #expect(message.contains("pipeline.lua:3: in main chunk"))
        #expect(r.result.counts[.cancelled] == 1)
    }

    @Test func syntaxErrorsExitTwoWithFileAndLine() async throws {
        let r = try await runLua("""
            local x = 1
            if x then
              print("never"
            end
            """)
        #expect(r.exitCode == 2)
        #expect(r.result.mainError == "pipeline.lua:4: ')' expected (to close '(' at line 3) near 'end'")
        #expect(r.output.isEmpty)
    }

    @Test func aFailedTaskMeansExitOneAndOthersKeepTheirResults() async throws {
        let r = try await runLua("""
            local a = tasker.add{name = "good", run = function() return "kept" end}
            local b = tasker.add{name = "bad", run = function() error("nope", 0) end}
            tasker.some({a, b})
            print(a:await())
            """)
        #expect(r.lines == ["kept"])
        #expect(r.exitCode == 1)
        #expect(r.result.failed.map(\.name) == ["bad"])
        #expect(r.result.counts[.succeeded] == 1)
    }

    @Test func aDeadlockIsBrokenInsteadOfHanging() async throws {
        let r = try await runLua("""
            local a, b
            a = tasker.add(function() tasker.sleep(0); return b:await() end)
            b = tasker.add(function() tasker.sleep(0); return a:await() end)
            local ok, err = pcall(tasker.all, {a, b})
            print(ok, err.kind)
            """)
        #expect(r.lines == ["false\tdeadlock"])
        // a broken deadlock is a failure: of b, whose await closed the
        // cycle; tasker.all then cancels a
        #expect(r.result.counts[.failed] == 1 && r.result.counts[.cancelled] == 1)
        #expect(r.exitCode == 1)
    }

    /// The await that closes a cycle of tasks awaiting each other raises at
    /// once, though other work goes on (the run is not idle); waits that a
    /// failure elsewhere could still free (`all` fail-fast, a dependency
    /// not met) are not taken for a cycle.
    @Test func aCycleOfAwaitsIsBrokenWhenItClosesBesideOtherWork() async throws {
        let r = try await runLua("""
            local busy = tasker.add{name = "busy", run = function() tasker.sleep(30) end}
            local t0 = tasker.now()
            local x, y, z
            x = tasker.add{name = "x", run = function() tasker.sleep(0.01); return y:await() end}
            y = tasker.add{name = "y", run = function() tasker.sleep(0.02); return select(2, z:result()).kind end}
            z = tasker.add{name = "z", run = function() tasker.sleep(0.03); return x:await() end}
            print(select(2, z:result()).message)
            print(x:await())  -- z's failure ended y's wait, and y's x's
            -- a fails: r (after a and p) is skipped, and p's wait ends
            local a = tasker.add{name = "a", run = function() tasker.sleep(0.05); error("a failed", 0) end}
            local p, q
            p = tasker.add{name = "p", run = function() tasker.sleep(0.01); return select(2, q:result()).kind end}
            q = tasker.add{name = "q", after = {a, p}, run = function() end}
            print(p:await())
            -- all fail-fast: a failure among its handles ends the wait
            local f = tasker.add{name = "f", run = function() tasker.sleep(0.05); error("f failed", 0) end}
            local m, n
            m = tasker.add{name = "m", run = function() return tostring(select(2, pcall(tasker.all, {f, n}))) end}
            n = tasker.add{name = "n", run = function() tasker.sleep(0.01); return m:await() end}
            print(m:await())
            print(tasker.now() - t0 < 10)
            busy:cancel()
            """)
        #expect(r.lines == [
            "'z' waits for 'x', which waits for 'y', which waits for 'z': none of them could finish",
            "deadlock",
            "dependency",
            "f failed",
            "true",
        ], "\(r.lines) \(r.diagnostics)")
        #expect(!r.diagnostics.contains("nothing could make progress"))
    }

    @Test func tableSortComparatorThatYieldsGetsAClearError() async throws {
        let r = try await runLua("""
            local h = tasker.add(function()
              table.sort({3, 1, 2}, function(a, b) tasker.sleep(0); return a < b end)
            end)
            print(select(2, h:result()))
            """)
        #expect(r.lines == ["pipeline.lua:2: usage: tasker.sleep: cannot yield inside a C function (a table.sort comparator, a metamethod called from C such as __tostring, or a __gc/__close handler)"])
    }
}

@Suite struct RunawayTests {
    @Test func aPureLuaLoopIsStoppedByItsTimeout() async throws {
        let r = try await runLua("""
            local t0 = tasker.now()
            local h = tasker.add{name = "spin", timeout = 0.05, run = function() while true do end end}
            local ok, err = h:result()
            print(ok, err.kind, tasker.now() - t0 < 2)
            local caught = tasker.add{name = "stubborn", timeout = 0.05, run = function()
              for i = 1, 3 do pcall(function() while true do end end) end
              while true do end
            end}
            print(select(2, caught:result()).kind)
            """)
        #expect(r.lines == ["false\ttimeout\ttrue", "timeout"])
    }

    @Test func aTaskThatCancelsItselfStopsItsLoop() async throws {
        let r = try await runLua("""
            local h
            h = tasker.add(function() h:cancel("self"); local n = 0; while true do n = n + 1 end end)
            print(select(2, h:result()).message)
            local other = tasker.add(function() return "still fine" end)
            print(other:await())
            """)
        #expect(r.lines == ["task 'task-1' was cancelled: self", "still fine"])
    }

    @Test func timedOutRunawayIsRetriedOnAFreshCoroutine() async throws {
        let r = try await runLua("""
            local h = tasker.add{timeout = 0.2, retry = {attempts = 3, delay = 0},
              run = function(ctx) if ctx.attempt < 3 then while true do end end; return ctx.attempt end}
            print(h:await())
            """)
        #expect(r.lines == ["3"])
    }
}

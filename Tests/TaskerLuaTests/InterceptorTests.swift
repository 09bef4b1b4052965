import Testing
import TaskerCore

/// README, Interceptors: every row of the return table, batching and its release rules.
@Suite struct InterceptorTests {
    @Test func nilAndExecuteGoOnToTheNextInterceptorInOrder() async throws {
        let r = try await runLua("""
            local seen = {}
            tasker.intercept{name = "one", fn = function(t) seen[#seen + 1] = "one:" .. t.name end}
            tasker.intercept{name = "two", fn = function(t) seen[#seen + 1] = "two:" .. t.name; return "execute" end}
            tasker.add{name = "a", run = function() end}:await()
            print(table.concat(seen, " "))
            """)
        #expect(r.lines == ["one:a two:a"])
    }

    /// An interceptor runs inside the engine's admission of a task; what it
    /// does there to other tasks (cancel one, add one, cancel the task being
    /// admitted) takes effect, and every task still ends once.
    @Test func anInterceptorCancelsAndAddsTasksDuringAdmission() async throws {
        let r = try await runLua("""
            local later, extra
            tasker.intercept{name = "meddle", fn = function(t)
              if t.name == "first" then
                later:cancel("first said so")
                extra = tasker.add{name = "extra", run = function() return "extra ran" end}
              elseif t.name == "self" then
                SELF:cancel("itself")
              end
            end}
            local first = tasker.add{name = "first", start = false, run = function() return "first ran" end}
            later = tasker.add{name = "later", start = false, run = function() return "later ran" end}
            SELF = tasker.add{name = "self", start = false, run = function() return "self ran" end}
            first:start(); later:start(); SELF:start()
            print(first:await())
            print(extra:await())
            local ok, err = later:result()
            print(later:state(), err.message)
            ok, err = SELF:result()
            print(SELF:state(), err.message)
            local n = 0
            for _, h in ipairs{first, later, SELF, extra} do
              h:on("finish", function() n = n + 1 end)
            end
            print(n)
            """)
        #expect(r.lines == ["first ran", "extra ran", "cancelled\ttask 'later' was cancelled: first said so",
                            "cancelled\ttask 'self' was cancelled: itself", "4"], "\(r.output)")
        #expect(r.exitCode == 0)
    }

    @Test func forceSkipsTheRemainingInterceptors() async throws {
        let r = try await runLua("""
            local seen = {}
            tasker.intercept{name = "first", fn = function(t) if t.name == "vip" then return "force" end end}
            tasker.intercept{name = "second", fn = function(t) seen[#seen + 1] = t.name; return "discard" end}
            print(tasker.add{name = "vip", run = function() return "ran" end}:await())
            print(tasker.add{name = "other", run = function() return "ran" end}:state())
            tasker.sleep(0)
            print(table.concat(seen, " "))
            """)
        #expect(r.lines == ["ran", "pending", "other"])
    }

    @Test func discardEndsCancelledWithKindDiscardedAndWakesAwaiters() async throws {
        let r = try await runLua("""
            tasker.intercept{name = "dedupe", fn = function(t) if t.args.dup then return "discard" end end}
            local h = tasker.add{args = {dup = true}, run = function() error("never runs") end}
            local ok, err = h:result()
            print(ok, h:state(), err.kind, err.message)
            """)
        #expect(r.lines == ["false\tcancelled\tdiscarded\ttask 'task-1' was discarded by interceptor 'dedupe'"])
        #expect(r.exitCode == 0)
    }

    @Test func holdBatchesWithHeldCountsAndALaterTaskReleasesThemFirst() async throws {
        let r = try await runLua("""
            local counts, order = {}, {}
            tasker.intercept{name = "batch", fn = function(t, held)
              counts[#counts + 1] = held
              if held < 2 then return "hold" end
            end}
            local hs = {}
            for i = 1, 3 do hs[i] = tasker.add{name = "e" .. i, run = function(ctx) order[#order + 1] = ctx.name end} end
            tasker.sleep(0)
            print(hs[1]:state(), hs[2]:state())
            tasker.all(hs)
            print(table.concat(counts, ","), table.concat(order, " "))
            """, concurrency: 1)
        #expect(r.lines == ["succeeded\tsucceeded", "0,1,2\te1 e2 e3"])
    }

    @Test func heldTasksShowHeldAndAreReleasedAfterMaxHold() async throws {
        let r = try await runLua("""
            tasker.intercept{name = "window", max_hold = 0.05, fn = function(t, held) if t.name ~= "busy" then return "hold" end end}
            -- keeps the run busy: an idle run would release the held tasks at once
            tasker.add{name = "busy", run = function() tasker.sleep(0.3) end, priority = 10}
            local t0 = tasker.now()
            local a = tasker.add(function() return tasker.now() end)
            local b = tasker.add(function() return tasker.now() end)
            tasker.sleep(0.01)
            print(a:state(), b:state())
            local ta, tb = a:await(), b:await()
            print(ta - t0 >= 0.05, ta - t0 < 5, tb >= ta)
            """)
        #expect(r.lines == ["held\theld", "true\ttrue\ttrue"])
    }

    @Test func heldTasksAreReleasedWhenTheRunWouldOtherwiseBeIdle() async throws {
        let r = try await runLua("""
            tasker.intercept{name = "forever", fn = function() return "hold" end}
            local hs = {}
            for i = 1, 3 do hs[i] = tasker.add(function() return i end) end
            print(table.concat(tasker.all(hs), ","))
            """)
        #expect(r.lines == ["1,2,3"])
        #expect(r.exitCode == 0)
    }

    @Test func cancellingAHeldTaskTakesItOutOfTheBatch() async throws {
        let r = try await runLua("""
            local counts = {}
            tasker.intercept{name = "b", fn = function(t, held) counts[#counts + 1] = held; if held < 5 then return "hold" end end}
            local a = tasker.add(function() end)
            local b = tasker.add(function() end)
            tasker.sleep(0)
            a:cancel()
            local c = tasker.add(function() end)
            tasker.sleep(0)
            print(a:state(), table.concat(counts, ","))
            """)
        #expect(r.lines == ["cancelled\t0,1,1"])
    }

    @Test func delayRateLimitsByAskingAgainLater() async throws {
        let r = try await runLua("""
            -- at most 2 starts per 50 ms window
            local t0, passed, asked = tasker.now(), {}, 0
            tasker.intercept{name = "limit", fn = function(t)
              asked = asked + 1
              local w = math.floor((tasker.now() - t0) / 0.05)
              if (passed[w] or 0) >= 2 then return "delay", (w + 1) * 0.05 - (tasker.now() - t0) + 0.001 end
              passed[w] = (passed[w] or 0) + 1
            end}
            local hs = {}
            for i = 1, 6 do hs[i] = tasker.add(function() end) end
            tasker.all(hs)
            local windows, most = 0, 0
            for _, n in pairs(passed) do windows = windows + 1; most = math.max(most, n) end
            print(most, windows >= 3, asked > 6, tasker.now() - t0 >= 0.1)
            """)
        #expect(r.lines == ["2\ttrue\ttrue\ttrue"])
    }

    @Test func interceptorsMayChangePriorityNameAndArgs() async throws {
        let r = try await runLua("""
            local seen = {}
            tasker.intercept{name = "rewrite", fn = function(t)
              if t.name == "low" then t.priority = 10; t.name = "promoted"; t.args = {token = "abc"} end
            end}
            tasker.intercept{name = "look", fn = function(t) seen[#seen + 1] = t.name .. ":" .. t.priority end}
            local b = tasker.add{name = "low", priority = -5, run = function(ctx) return ctx.name .. ":" .. ctx.args.token end}
            print(b:await(), b.name, table.concat(seen, " "))
            """)
        #expect(r.lines == ["promoted:abc\tpromoted\tpromoted:10"])
    }

    @Test func interceptorsRunRightBeforeTheStartAndSeeCurrentState() async throws {
        let r = try await runLua("""
            local token = "old"
            tasker.intercept{name = "auth", fn = function(t) t.args.token = token end}
            local hs = {}
            for i = 1, 3 do hs[i] = tasker.add(function(ctx) tasker.sleep(0.01); token = "new"; return ctx.args.token end) end
            print(table.concat(tasker.all(hs), " "))
            """, concurrency: 1)
        #expect(r.lines == ["old new new"])
    }

    @Test func everyAttemptPassesTheInterceptorsAgain() async throws {
        let r = try await runLua("""
            local attempts = {}
            tasker.intercept(function(t) attempts[#attempts + 1] = t.attempt end)
            local h = tasker.add{retry = {attempts = 3, delay = 0}, run = function(ctx) if ctx.attempt < 3 then error("x") end end}
            h:await()
            print(table.concat(attempts, ","))
            """)
        #expect(r.lines == ["1,2,3"])
    }

    @Test func anInterceptorThatRaisesOrYieldsFailsOnlyThatTask() async throws {
        let r = try await runLua("""
            tasker.intercept{name = "picky", fn = function(t)
              if t.name == "boom" then error("no boom allowed") end
              if t.name == "sleepy" then tasker.sleep(1) end
              if t.name == "weird" then return "sometimes" end
              if t.name == "coded" then error({code = 7}) end
            end}
            for _, n in ipairs({"boom", "sleepy", "weird", "coded", "fine"}) do
              local ok, err = tasker.add{name = n, run = function() return "ran" end}:result()
              print(n, ok, ok and err or err.kind .. " | " .. err.message .. (err.where and " @ " .. err.where or ""))
            end
            """)
        #expect(r.lines == [
            "boom\tfalse\tinterceptor | interceptor 'picky' failed: pipeline.lua:2: no boom allowed",
            "sleepy\tfalse\tinterceptor | interceptor 'picky' failed: pipeline.lua:3: usage: tasker.sleep: cannot yield in an interceptor ('picky')",
            // where the interceptor is defined: it answered, it raised nothing
            "weird\tfalse\tinterceptor | interceptor 'picky' returned \"sometimes\" (expected nil, \"execute\", \"force\", \"hold\", \"discard\" or \"delay\", seconds) @ pipeline.lua:1",
            // a table raised: where the interceptor is defined (its call has
            // no message handler: it runs for every task)
            "coded\tfalse\tinterceptor | interceptor 'picky' failed: pipeline.lua:1: {\"code\":7}",
            "fine\ttrue\tran",
        ])
        #expect(r.exitCode == 1)
    }

    @Test func aRunawayInterceptorIsStoppedAndTheRunGoesOn() async throws {
        let r = try await runLua("""
            tasker.intercept{name = "spin", fn = function(t) if t.name == "loop" then while true do end end end}
            local ok, err = tasker.add{name = "loop", run = function() end}:result()
            print(ok, err.kind, err.message:match("ran longer than 2s") ~= nil)
            print(tasker.add{name = "next", run = function() return "fine" end}:await())
            """)
        #expect(r.lines == ["false\tinterceptor\ttrue", "fine"])
    }

    /// An interceptor that removes itself while it decides to hold: no one
    /// could release the task (it failed as a deadlock); it goes on to the
    /// next interceptor, as held tasks do when their interceptor goes.
    @Test func anInterceptorThatRemovesItselfAndHoldsPassesTheTaskOn() async throws {
        let r = try await runLua("""
            local i
            i = tasker.intercept{name = "once", fn = function(t) i:remove(); return "hold" end}
            local seen = {}
            tasker.intercept{name = "after", fn = function(t) seen[#seen + 1] = t.name end}
            local h = tasker.add{name = "c", run = function() return "ran" end}
            print(h:result())
            print(table.concat(seen, ","), tasker.add{name = "d", run = function() return "ran too" end}:result())
            """)
        #expect(r.lines == ["true\tran", "c\ttrue\tran too"])
    }

    @Test func badInterceptorSpecsAreUsageErrors() async throws {
        let r = try await runLua("""
            print(select(2, pcall(tasker.intercept, 3)).message)
            print(select(2, pcall(tasker.intercept, {name = "x"})).message)
            print(select(2, pcall(tasker.intercept, {fn = print, max_hold = -1})).message)
            local i = tasker.intercept{name = "gone", fn = function() return "discard" end}
            print(i.name)
            i.remove()
            print(tasker.add(function() return "not discarded" end):await())
            """)
        #expect(r.lines == [
            "bad argument #1 to 'tasker.intercept' (function or table expected, got number)",
            "bad field 'fn' in 'tasker.intercept' spec (function expected, got nil)",
            "bad field 'max_hold' in 'tasker.intercept' spec (non-negative number expected, got -1)",
            "gone", "not discarded",
        ])
    }
}

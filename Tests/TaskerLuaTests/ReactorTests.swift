import Testing
import TaskerCore

/// README
@Suite struct ReactorTests {
    @Test func aStormOfFiftyFailuresCausesExactlyOneReactionAndAllSucceedAfterRequeue() async throws {
        let r = try await runLua("""
            local token, refreshes = "old", 0
            tasker.react{name = "refresh", requeue = true,
              when = function(t, result) return not result.ok and result.error.status == 401 end,
              fn = function(t, result)
                refreshes = refreshes + 1
                tasker.sleep(0.02)
                token = tasker.add(function() return "new" end):await()
              end}
            local hs = {}
            for i = 1, 50 do
              hs[i] = tasker.add(function()
                local seen = token
                tasker.sleep(0.001)
                if seen ~= "new" then error({status = 401}) end
                return i
              end)
            end
            local v = tasker.all(hs)
            print(#v, v[50], refreshes)
            """, concurrency: 64)
        #expect(r.lines == ["50\t50\t1"])
        #expect(r.exitCode == 0)
    }

    @Test func lateFailuresOfAttemptsStartedBeforeTheReactionEndedAreRequeuedWithoutReactingAgain() async throws {
        // "slow" started with version 1 before the reaction (0.05 s) ended and
        // fails only after it: it is covered. "later" starts after it and
        // fails with version 2: that one is a fresh trigger.
        let r = try await runLua("""
            local version, reactions = 1, 0
            tasker.react{name = "refresh", requeue = true,
              when = function(t, result) return not result.ok end,
              fn = function() reactions = reactions + 1; tasker.sleep(0.05); version = version + 1 end}
            local function body(wait, failWhenBelow)
              return function(ctx)
                local seen = version
                tasker.sleep(wait)
                if seen < failWhenBelow then error("stale " .. seen) end
                return ctx.attempt .. ":" .. seen
              end
            end
            local fast = tasker.add{name = "fast", run = body(0, 2)}
            local slow = tasker.add{name = "slow", run = body(0.2, 2)}
            print(fast:await(), slow:await(), reactions)
            local later = tasker.add{name = "later", run = body(0, 3)}
            print(later:await(), reactions)
            """)
        #expect(r.lines == ["2:2\t2:2\t1", "2:3\t2"])
    }

    @Test func whenSeesTheResultAndANoLeavesItUnchanged() async throws {
        let r = try await runLua("""
            local seen = {}
            tasker.react{name = "watch",
              when = function(t, result)
                seen[#seen + 1] = t.name .. ":" .. tostring(result.ok) .. ":" .. tostring(result.value or result.error)
                return false
              end,
              fn = function() error("never") end}
            print(tasker.add{name = "good", run = function() return 7 end}:await())
            print(select(2, tasker.add{name = "bad", run = function() error("broke", 0) end}:result()))
            print(table.concat(seen, " "))
            """)
        #expect(r.lines == ["7", "broke", "good:true:7 bad:false:broke"])
    }

    @Test func awaitersSeeTheResultOnlyAfterTheReactionEndedAndStateIsReacting() async throws {
        let r = try await runLua("""
            local log = {}
            tasker.react{name = "slow", fn = function(t, result)
              tasker.sleep(0.02)
              log[#log + 1] = "reaction done (" .. tostring(result.value) .. ")"
            end}
            local h = tasker.add(function() return "v" end)
            tasker.sleep(0.005)
            log[#log + 1] = h:state()
            local v = h:await()  -- (the index in log[#log + 1] = ... would be taken before the await)
            log[#log + 1] = "await got " .. v
            print(table.concat(log, " | "))
            """)
        #expect(r.lines == ["reacting | reaction done (v) | await got v"])
    }

    @Test func suspendHoldsNewStartsButNotTheReactionsOwnTasks() async throws {
        let r = try await runLua("""
            local log = {}
            tasker.react{name = "pause", suspend = true,
              when = function(t) return t.name == "trigger" end,
              fn = function()
                log[#log + 1] = "reaction start"
                tasker.add{name = "own", run = function() log[#log + 1] = "own task ran" end}:await()
                tasker.sleep(0.03)
                log[#log + 1] = "reaction end"
              end}
            local trigger = tasker.add{name = "trigger", run = function() end}
            local running = tasker.add{name = "running", run = function() tasker.sleep(0.01); log[#log + 1] = "running continued" end}
            tasker.sleep(0.005)
            local later = tasker.add{name = "later", run = function() log[#log + 1] = "later started" end}
            tasker.all({trigger, running, later})
            print(table.concat(log, " | "))
            """)
        #expect(r.lines == ["reaction start | own task ran | running continued | reaction end | later started"])
    }

    @Test func requeueRunsAgainThroughTheInterceptorsOnlyWithReintercept() async throws {
        let r = try await runLua("""
            local intercepted = {}
            tasker.intercept(function(t) intercepted[t.name] = (intercepted[t.name] or 0) + 1 end)
            for _, re in ipairs({false, true}) do
              tasker.react{name = "rq-" .. tostring(re), requeue = true, reintercept = re,
                when = function(t, result) return t.name == (re and "with" or "without") and not result.ok end,
                fn = function() end}
            end
            local function flaky(ctx) if ctx.attempt == 1 then error("first", 0) end; return ctx.attempt end
            print(tasker.add{name = "without", run = flaky}:await(), tasker.add{name = "with", run = flaky}:await())
            print(intercepted.without, intercepted.with)
            """)
        #expect(r.lines == ["2\t2", "1\t2"])
    }

    @Test func afterMaxRequeuesTheLastResultStands() async throws {
        let r = try await runLua("""
            local reactions = 0
            tasker.react{name = "again", requeue = true, max_requeues = 2,
              when = function(t, result) return not result.ok end,
              fn = function() reactions = reactions + 1 end}
            local h = tasker.add(function(ctx) error("attempt " .. ctx.attempt, 0) end)
            print(select(2, h:result()), h.attempts, reactions)
            """)
        #expect(r.lines == ["attempt 3\t3\t3"])
    }

    @Test func aFailingOrTimedOutReactionFailsEveryWaitingTaskWithKindReactor() async throws {
        let r = try await runLua("""
            tasker.react{name = "broken", when = function(t) return t.tags[1] == "a" end,
              fn = function() tasker.sleep(0.01); error("refresh failed") end}
            tasker.react{name = "stuck", timeout = 0.03, when = function(t) return t.tags[1] == "b" end,
              fn = function() tasker.sleep(10) end}
            tasker.react{name = "spinning", timeout = 0.03, when = function(t) return t.tags[1] == "c" end,
              fn = function() while true do end end}
            local hs = {}
            for i, tag in ipairs({"a", "a", "b", "c"}) do hs[i] = tasker.add{tags = {tag}, run = function() return "ok" end} end
            for i = 1, 4 do
              local ok, err = hs[i]:result()
              print(ok, err.kind, err.message)
            end
            print(tasker.add(function() return "engine carries on" end):await())
            """)
        #expect(r.lines == [
            "false\treactor\treactor 'broken' failed: pipeline.lua:2: refresh failed",
            "false\treactor\treactor 'broken' failed: pipeline.lua:2: refresh failed",
            "false\treactor\treactor 'stuck' exceeded its timeout of 0.03s",
            "false\treactor\treactor 'spinning' exceeded its timeout of 0.03s",
            "engine carries on",
        ])
    }

    @Test func aWhenThatRaisesFailsTheTaskWithKindReactor() async throws {
        let r = try await runLua("""
            tasker.react{name = "oops", when = function(t) return t.nope.field end, fn = function() end}
            local ok, err = tasker.add(function() end):result()
            print(ok, err.kind, err.message)
            """)
        #expect(r.lines.first?.hasPrefix("false\treactor\treactor 'oops' failed in 'when': pipeline.lua:1: attempt to index") == true, "\(r.lines)")
    }

    @Test func badReactorSpecsAreUsageErrors() async throws {
        let r = try await runLua("""
            print(select(2, pcall(tasker.react, {when = print})).message)
            print(select(2, pcall(tasker.react, {fn = print, requeue = "yes"})).message)
            print(select(2, pcall(tasker.react, {fn = print, retries = 2})).message:sub(1, 41))
            local re = tasker.react{name = "gone", fn = function() error("x") end}
            re.remove()
            print(re.name, tasker.add(function() return "unaffected" end):await())
            """)
        #expect(r.lines == [
            "bad field 'fn' in 'tasker.react' spec (function expected, got nil)",
            "bad field 'requeue' in 'tasker.react' spec (boolean expected, got string)",
            "unknown field 'retries' in 'tasker.react'",
            "gone\tunaffected",
        ])
    }
}

/// A reactor removed while its reaction waits, by the script or by the
/// reaction itself: the reaction finishes (it crashed the process, the
/// reaction outliving its reactor), and its task's result stands.
@Suite struct ReactorRemovalTests {
    @Test func aReactorRemovedWhileItsReactionWaitsLetsTheReactionFinish() async throws {
        let r = try await runLua("""
            local ready = tasker.add{name = "ready", start = false, run = function() end}
            local gate = tasker.add{name = "gate", start = false, run = function() end}
            local r1 = tasker.react{name = "slow", when = function(t) return t.name == "e" end,
                                    fn = function() ready:start(); gate:await() end}
            local h1 = tasker.add{name = "e", run = function() return "e" end}
            ready:await()
            r1:remove()
            gate:start()
            print(h1:result())
            local r2
            r2 = tasker.react{name = "once", requeue = true, when = function(t) return t.name == "c" end,
                              fn = function() r2:remove(); tasker.sleep(0.01) end}
            local n = 0
            local h2 = tasker.add{name = "c", run = function() n = n + 1; return "c" .. n end}
            print(h2:result())
            """)
        #expect(r.lines == ["true\te", "true\tc2"])
        #expect(r.exitCode == 0)
    }
}

/// A reaction that awaits a task it reacts to (which waits for the
/// reaction to end) is told at once, at its line; it was a deadlock found
/// only when the whole run went idle.
@Suite struct ReactionAwaitTests {
    @Test func aReactionAwaitingItsOwnTaskIsAUsageErrorAtOnce() async throws {
        let r = try await runLua("""
            local h
            tasker.react{name = "selfish", when = function(t) return t.name == "r1" end, fn = function() h:await() end}
            h = tasker.add{name = "r1", run = function() return "v1" end}
            local other = tasker.add{name = "r2", run = function() return "v2" end}
            local ok, err = h:result()
            print(ok, err.message)
            print(other:await())
            """)
        #expect(r.lines == [
            "false\treactor 'selfish' failed: pipeline.lua:2: usage: h:await: task 'r1' waits for this reaction of reactor 'selfish' to end, so the reaction cannot wait for it (it would never finish)",
            "v2",
        ])
    }
}

@Suite struct ReactorShutdownTests {
    /// `os.exit` or `tasker.exit` in a handler ends the run with its code;
    /// the unwinding is no error of the handler's (it was logged as one).
    /// A handler's real error during the exit is still said.
    @Test func anExitInAFinishHandlerIsNotLoggedAsItsError() async throws {
        let r = try await runLua("""
            local done = tasker.add{name = "done", run = function() return 1 end}
            done:await()
            tasker.add{name = "buggy", run = function() tasker.sleep(0.05) end}:on("finish", function(h, ok, err)
              error("handler bug after " .. tostring(err))  -- names the exit: still its own error
            end)
            done:on("finish", function() os.exit(9) end)
            """)
        #expect(r.exitCode == 9)
        #expect(!r.diagnostics.contains("handler of task 'done'"), "\(r.diagnostics)")
        #expect(r.diagnostics.contains("error in the 'finish' handler of task 'buggy'"), "\(r.diagnostics)")
        #expect(r.diagnostics.contains("handler bug after cancelled: task 'buggy' was cancelled: tasker.exit(9)"), "\(r.diagnostics)")
    }

    @Test func exitStopsAReactionThatIsWaiting() async throws {
        let r = try await runLua("""
            tasker.react{name = "slow", fn = function() tasker.sleep(30) end}
            tasker.add(function() end)
            tasker.sleep(0.02)
            tasker.exit(4)
            """)
        #expect(r.exitCode == 4)
        #expect(r.result.seconds < 10)  // the run's own clock: not the test's wait for its turn
        #expect(r.result.counts[.cancelled] == 1)
    }
}

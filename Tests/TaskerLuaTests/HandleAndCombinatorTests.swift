import Testing
import TaskerCore

@Suite struct HandleTests {
    @Test func handleFieldsAndStatesThroughALifecycle() async throws {
        let r = try await runLua("""
            local h = tasker.add{name = "job", start = false, run = function() tasker.sleep(0.01); return "v" end}
            print(h.id, h.name, h.attempts, h:state(), tostring(h))
            h:start()
            tasker.sleep(0)
            print(h:state(), h.attempts)
            print(h:await(), h:state())
            print(h:result())
            print(pcall(function() h.id = 3 end))
            """)
        #expect(r.lines[0] == "1\tjob\t0\twaiting\ttask 1 'job' (waiting)")
        #expect(r.lines[1...3] == ["running\t1", "v\tsucceeded", "true\tv"])
        #expect(r.lines[4].contains("usage: task handles are read-only"))
    }

    @Test func awaitRaisesTheTasksOwnErrorValueAndResultNeverRaises() async throws {
        let r = try await runLua("""
            local t = {code = 7}
            local h = tasker.add(function() error(t) end)
            local ok, err = pcall(h.await, h)
            print(ok, err == t, err.code)
            local ok2, err2 = h:result()
            print(ok2, err2 == t)
            local s = tasker.add(function() error("plain", 0) end)
            print(pcall(s.await, s))
            """)
        #expect(r.lines == ["false\ttrue\t7", "false\ttrue", "false\tplain"])
    }

    @Test func cancelReachesEveryAwaiterOnceAndIsANoOpWhenFinal() async throws {
        let r = try await runLua("""
            local h = tasker.add(function() tasker.sleep(10) end)
            local woke = 0
            local waiters = {}
            for i = 1, 3 do
              waiters[i] = tasker.add(function() local ok, e = h:result(); woke = woke + 1; return e.kind end)
            end
            tasker.sleep(0.01)
            h:cancel("no longer needed")
            print(table.concat(tasker.all(waiters), ","), woke)
            h:cancel()
            print(h:state(), select(2, h:result()).message)
            """)
        #expect(r.lines == ["cancelled,cancelled,cancelled\t3",
                            "cancelled\ttask 'task-1' was cancelled: no longer needed"])
        #expect(r.exitCode == 0)
    }

    @Test func eventsFireInOrderAndALateFinishHandlerRunsAtOnce() async throws {
        let r = try await runLua("""
            local h = tasker.add{name = "ev", retry = {attempts = 2, delay = 0},
              run = function(ctx) ctx:progress(0.25, "quarter"); if ctx.attempt == 1 then error("first", 0) end; return "done" end}
            h:on("start", function(h) print("start", h.name) end)
            h:on("progress", function(h, f, m) print("progress", f, m) end)
            h:on("retry", function(h, a, e, d) print("retry", a, e, d) end)
            h:on("finish", function(h, state, v) print("finish", state, v) end)
            h:await()
            h:on("finish", function(h, state, v) print("late", state, v) end)
            print("after")
            """)
        #expect(r.lines == ["start\tev", "progress\t0.25\tquarter", "retry\t1\tfirst\t0.0",
                            "progress\t0.25\tquarter", "finish\tsucceeded\tdone", "late\tsucceeded\tdone", "after"])
    }

    @Test func handlerErrorsAreReportedWithFileAndLineAndTheRunGoesOn() async throws {
        let r = try await runLua("""
            local h = tasker.add(function() return 1 end)
            h:on("finish", function() error("handler broke") end)
            h:on("finish", function() tasker.sleep(1) end)
            print(h:await())
            """)
        #expect(r.lines == ["1"])
        #expect(r.exitCode == 0)
        #expect(r.diagnostics.contains("pipeline.lua:2: handler broke"))
        #expect(r.diagnostics.contains("pipeline.lua:3: usage: tasker.sleep: cannot yield in the 'finish' handler of task 'task-1'"))
    }

    @Test func aTaskAwaitingItselfGetsAUsageErrorNotADeadlock() async throws {
        let r = try await runLua("""
            local h
            h = tasker.add{name = "selfish", run = function() return h:await() end}
            local ok, err = h:result()
            print(ok, err.kind, tostring(err))
            local g
            g = tasker.parallel({function() return g:await() end})
            print(select(2, g:result()).kind)
            """)
        #expect(r.lines == ["false\tusage\tpipeline.lua:2: usage: h:await: task 'selfish' cannot wait for itself (it would never finish)",
                            "usage"])
    }

    @Test func methodsCalledWithADotGiveAClearUsageError() async throws {
        let r = try await runLua("""
            local h = tasker.add(function() end)
            print(pcall(h.state))
            print(pcall(h.on, h, "finsh", print))
            """)
        #expect(r.lines[0].contains("calling 'h:state' on bad self (task handle expected, got no value); use h:state(...)"))
        #expect(r.lines[1].contains("bad argument #1 to 'h:on' (\"start\", \"progress\", \"retry\" or \"finish\" expected, got string)"))
    }
}

@Suite struct CombinatorTests {
    @Test func allReturnsFirstValuesInInputOrder() async throws {
        let r = try await runLua("""
            local hs = {}
            for i = 1, 5 do hs[i] = tasker.add(function() tasker.sleep((6 - i) / 1000); return i * 10, "extra" end) end
            print(table.concat(tasker.all(hs), ","))
            print(#tasker.all({}), #tasker.some({}))
            print(table.concat(tasker.all(hs), ","))
            """)
        #expect(r.lines == ["10,20,30,40,50", "0\t0", "10,20,30,40,50"])
    }

    @Test func allRaisesTheFirstFailureAndCancelsTheOthers() async throws {
        let r = try await runLua("""
            local slow = tasker.add(function() tasker.sleep(10) end)
            local bad = tasker.add(function() tasker.sleep(0.01); error("bad one", 0) end)
            local ok, err = pcall(tasker.all, {slow, bad})
            print(ok, err, slow:state())
            local c = tasker.add(function() tasker.sleep(10) end)
            local d = tasker.add(function() tasker.sleep(10) end)
            local waiter = tasker.add(function() return tasker.all({c, d}) end)
            tasker.sleep(0.01)
            c:cancel()
            local ok2, err2 = waiter:result()
            print(ok2, err2.kind, d:state())
            """)
        #expect(r.lines == ["false\tbad one\tcancelled", "false\tcancelled\tcancelled"])
    }

    @Test func anyReturnsTheFirstSuccessAndCancelsTheRest() async throws {
        let r = try await runLua("""
            local a = tasker.add{name = "a", run = function() tasker.sleep(10) end}
            local b = tasker.add{name = "b", run = function() tasker.sleep(0.01); return "b wins", 2 end}
            local c = tasker.add{name = "c", run = function() error("c fails", 0) end}
            print(tasker.any({a, b, c}))
            print(a:state(), c:state())
            local x = tasker.add{name = "x", run = function() error("nope", 0) end}
            local y = tasker.add{name = "y", run = function() tasker.sleep(0.01); error({kind = "custom"}) end}
            local ok, err = pcall(tasker.any, {x, y})
            print(ok, err.kind, err.message:sub(1, 41))
            print(pcall(tasker.any, {}))
            """)
        #expect(r.lines[0...1] == ["b wins\t2", "cancelled\tfailed"])
        #expect(r.lines[2] == "false\tdependency\ttasker.any: no task succeeded: 'x' (nope)")
        #expect(r.lines[3].contains("usage: tasker.any: the list of handles is empty"))
    }

    @Test func someCollectsTheSuccessesAfterAllFinishedAndNeverRaises() async throws {
        let r = try await runLua("""
            local hs = {
              tasker.add(function() return "a" end),
              tasker.add(function() error("x") end),
              tasker.add(function() tasker.sleep(0.01); return "c" end),
              tasker.add(function() tasker.sleep(10) end),
            }
            hs[4]:cancel()
            print(table.concat(tasker.some(hs), ","))
            """)
        #expect(r.lines == ["a,c"])
    }

    @Test func parallelAndSerialGroups() async throws {
        let r = try await runLua("""
            local running, peak = 0, 0
            local function work(v) return function() running = running + 1; peak = math.max(peak, running)
              tasker.sleep(0.005); running = running - 1; return v end end
            local p = tasker.parallel({work(1), work(2), work(3), work(4), {name = "five", run = work(5)}}, {concurrency = 2})
            print(table.concat(p:await(), ","), peak)
            local order = {}
            local s = tasker.serial({
              function() order[#order + 1] = "one"; return 1 end,
              function() order[#order + 1] = "two"; error("two failed", 0) end,
              function() order[#order + 1] = "three"; return 3 end,
            })
            local ok, err = s:result()
            print(ok, err, table.concat(order, ","))
            local ff = tasker.parallel({function() tasker.sleep(10) end, function() error("fast fail", 0) end})
            print(select(2, ff:result()))
            local all = tasker.parallel({function() return 1 end, function() error("late", 0) end, function() return 3 end}, {fail_fast = false})
            print(select(2, all:result()))
            print(pcall(tasker.parallel, {42}))
            """)
        #expect(r.lines[0] == "1,2,3,4,5\t2")
        #expect(r.lines[1] == "false\ttwo failed\tone,two")
        #expect(r.lines[2] == "fast fail")
        #expect(r.lines[3] == "late")
        #expect(r.lines[4].contains("bad argument #1 to 'tasker.parallel' (function or table expected, got number) (member #1)"))
    }

    @Test func everyRunsInstancesWithoutOverlapUntilCancelled() async throws {
        let r = try await runLua("""
            local names, running, overlap = {}, 0, 0
            local s = tasker.every(0.01, {name = "tick", run = function(ctx)
              running = running + 1
              if running > 1 then overlap = overlap + 1 end
              names[#names + 1] = ctx.name
              tasker.sleep(0.025)
              running = running - 1
            end})
            -- until a second instance has started (not a fixed time: a
            -- loaded machine may run only one in 0.1 s)
            while #names < 2 do tasker.sleep(0.01) end
            s:cancel()
            print(names[1], names[2], overlap, #names >= 2 and #names <= 6, s:state())
            """)
        #expect(r.lines == ["tick#1\ttick#2\t0\ttrue\tcancelled"])
    }

    @Test func aScheduleKeepsTheRunAliveUntilCancelled() async throws {
        let r = try await runLua("""
            local n = 0
            local s
            s = tasker.every(0.005, function() n = n + 1; if n == 3 then s:cancel() end end)
            """)
        #expect(r.exitCode == 0)
        #expect(r.result.counts[.succeeded] == 3)
        #expect(r.result.groups[.cancelled] == 1)
    }

    @Test func twentyThousandTasksInOneAll() async throws {
        let r = try await runLua("""
            local hs = {}
            for i = 1, 20000 do hs[i] = tasker.add(function() if i % 2 == 0 then tasker.sleep(0) end; return i end) end
            local v = tasker.all(hs)
            local sum = 0
            for i = 1, #v do sum = sum + v[i] end
            print(#v, sum)
            """)
        #expect(r.lines == ["20000\t200010000"])
        #expect(r.result.counts[.succeeded] == 20000)
    }

    @Test func sleepAndNow() async throws {
        let r = try await runLua("""
            local t0 = tasker.now()
            tasker.sleep(0.03)
            local dt = tasker.now() - t0
            print(math.type(t0), dt >= 0.03, dt < 5)
            print(pcall(tasker.sleep, -1))
            """)
        #expect(r.lines[0] == "float\ttrue\ttrue")
        #expect(r.lines[1].contains("bad argument #1 to 'tasker.sleep' (non-negative number expected, got -1)"))
    }
}

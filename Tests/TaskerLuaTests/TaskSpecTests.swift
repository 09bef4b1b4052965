import Testing
import TaskerCore

/// Every field of the tasker.add spec table (README, Tasks) and the ctx a body gets.
@Suite struct TaskSpecTests {
    @Test func functionSpecRunsWithCtxAndReturnsAllValues() async throws {
        let r = try await runLua("""
            local h = tasker.add(function(ctx)
              print(ctx.id, ctx.name, ctx.attempt, type(ctx.args), #ctx.tags)
              return 1, "two", nil, 4
            end)
            print(select("#", h:await()), h:await())
            """)
        #expect(r.lines == ["1\ttask-1\t1\ttable\t0", "4\t1\ttwo\tnil\t4"])
        #expect(r.exitCode == 0)
    }

    @Test func nameArgsAndTagsReachTheBody() async throws {
        let r = try await runLua("""
            local args = {n = 21}
            local h = tasker.add{name = "double", args = args, tags = {"a", "b"},
              run = function(ctx)
                ctx.args.seen = true
                return ctx.name, ctx.args.n * 2, table.concat(ctx.tags, ",")
              end}
            print(h.name, h:await())
            print(args.seen)
            """)
        #expect(r.lines == ["double\tdouble\t42\ta,b", "true"])
    }

    @Test func priorityOrdersStartsAndEqualPrioritiesKeepAddOrder() async throws {
        let r = try await runLua("""
            local order = {}
            local hs = {}
            for i, p in ipairs({0, 2, 0, 2, -1, 5}) do
              hs[i] = tasker.add{name = "t" .. i, priority = p, run = function(ctx) order[#order + 1] = ctx.name end}
            end
            tasker.all(hs)
            print(table.concat(order, " "))
            """, concurrency: 1)
        #expect(r.lines == ["t6 t2 t4 t1 t3 t5"])
    }

    @Test func timeoutFailsAnAttemptThatWaitsTooLong() async throws {
        let r = try await runLua("""
            local h = tasker.add{name = "fetch", timeout = 0.05, run = function() tasker.sleep(10) end}
            local ok, err = h:result()
            print(ok, err.kind, err.message, tostring(err))
            print(h:state())
            """)
        #expect(r.lines == ["false\ttimeout\ttask 'fetch' exceeded 0.05s\ttimeout: task 'fetch' exceeded 0.05s", "failed"])
        #expect(r.exitCode == 1)
        #expect(r.result.failed.map(\.name) == ["fetch"])
    }

    @Test func retryRetriesWithBackoffAndTheWhenPredicate() async throws {
        let r = try await runLua("""
            local delays = {}
            local h = tasker.add{name = "flaky", retry = {attempts = 4, delay = 0.01, backoff = "exponential", factor = 3},
              run = function(ctx) if ctx.attempt < 4 then error("try " .. ctx.attempt, 0) end; return "ok" end}
            h:on("retry", function(h, attempt, err, delay) delays[#delays + 1] = attempt .. ":" .. err .. ":" .. delay end)
            print(h:await(), h.attempts)
            print(table.concat(delays, " "))
            local fixed = tasker.add{retry = {attempts = 3, delay = 0.01, backoff = "fixed"},
              run = function() error("always") end}
            fixed:on("retry", function(_, a, _, d) print("fixed", a, d) end)
            print(fixed:result())
            local asked = {}
            local picky = tasker.add{retry = {attempts = 5, delay = 0, when = function(err, attempt)
                asked[#asked + 1] = attempt
                return err.code ~= "fatal"
              end},
              run = function(ctx) error(ctx.attempt < 2 and {code = "transient"} or {code = "fatal"}) end}
            local ok, e = picky:result()
            print(ok, e.code, picky.attempts, table.concat(asked, ","))
            """)
        #expect(r.lines == [
            "ok\t4", "1:try 1:0.01 2:try 2:0.03 3:try 3:0.09",
            "fixed\t1\t0.01", "fixed\t2\t0.01", "false\tpipeline.lua:8: always",
            "false\tfatal\t2\t1,2",
        ])
    }

    /// A retry's `when` applies alike to a task, a group's members and each
    /// instance of a schedule, each asked with its own attempts.
    @Test func retryWhenAppliesToGroupMembersAndScheduleInstances() async throws {
        let r = try await runLua("""
            local asked = {}
            local function when(tag) return function(err, attempt) asked[#asked + 1] = tag .. attempt; return attempt < 2 end end
            local function failing() error("no", 0) end
            local g = tasker.parallel({{name = "m1", retry = {attempts = 5, delay = 0, when = when("m1:")}, run = failing},
                                       {name = "m2", retry = {attempts = 5, delay = 0, when = when("m2:")}, run = failing}},
                                      {fail_fast = false})
            g:result()
            local runs = 0
            local s
            s = tasker.every(0.01, {name = "tick", retry = {attempts = 5, delay = 0, when = when("tick:")}, run = function(ctx)
              runs = runs + 1
              if runs >= 4 then s:cancel() end
              error("tick " .. ctx.attempt, 0)
            end})
            s:result()
            table.sort(asked)
            print(table.concat(asked, " "))
            """)
        // each member and each schedule instance: asked after attempt 1 (yes)
        // and 2 (no), with its own attempts (never a 3)
        let asked = (r.lines.first ?? "").split(separator: " ").map(String.init)
        #expect(Array(asked.prefix(4)) == ["m1:1", "m1:2", "m2:1", "m2:2"], "\(r.output) \(r.diagnostics)")
        let ticks = asked.dropFirst(4)
        #expect(ticks.contains("tick:1") && ticks.contains("tick:2") && ticks.allSatisfy { $0 == "tick:1" || $0 == "tick:2" },
                "\(r.output)")
    }

    @Test func timedOutAttemptsAreRetriedButCancellationIsNot() async throws {
        let r = try await runLua("""
            local h = tasker.add{timeout = 0.2, retry = {attempts = 3, delay = 0},
              run = function(ctx) if ctx.attempt < 3 then tasker.sleep(5) end; return ctx.attempt end}
            print(h:await())
            local c = tasker.add{retry = {attempts = 5, delay = 0}, run = function() tasker.sleep(5) end}
            tasker.sleep(0.01)
            c:cancel("stop")
            local ok, err = c:result()
            print(ok, err.kind, err.message, c.attempts)
            """)
        #expect(r.lines == ["3", "false\tcancelled\ttask 'task-2' was cancelled: stop\t1"])
    }

    /// A table the script raises with `permanent = true` is not retried
    /// unless `when` says so, as an engine error that has it (README,
    /// Tasks); `permanent = "yes"` is no boolean and changes nothing.
    @Test func aRaisedTableThatSaysPermanentIsNotRetried() async throws {
        let r = try await runLua("""
            local function task(err, when)
              return tasker.add{retry = {attempts = 3, delay = 0, when = when}, run = function() error(err) end}
            end
            local p = task({permanent = true, message = "gone"})
            local q = task({permanent = true, message = "gone"}, function(e) return e.permanent end)
            local n = task({permanent = "yes", message = "odd"})
            for _, h in ipairs({p, q, n}) do h:result(); print(h.attempts) end
            """)
        #expect(r.lines == ["1", "3", "3"])
    }

    @Test func afterAndWhenRunDependentsOrSkipThemWithDependencyErrors() async throws {
        let r = try await runLua("""
            local ok = tasker.add{name = "ok", run = function() return 1 end}
            local bad = tasker.add{name = "bad", run = function() error("x") end}
            local s = tasker.add{name = "s", after = ok, run = function() return "s ran" end}
            local f = tasker.add{name = "f", after = {bad}, when = "failure", run = function() return "f ran" end}
            local a = tasker.add{name = "a", after = {ok, bad}, when = "always", run = function() return "a ran" end}
            local skipped = tasker.add{name = "skipped", after = {bad}, run = function() return "never" end}
            print(s:await(), f:await(), a:await())
            local okr, err = skipped:result()
            print(skipped:state(), err.kind, err.message)
            """)
        #expect(r.lines == [
            "s ran\tf ran\ta ran",
            "skipped\tdependency\ttask 'skipped' did not run: dependency 'bad' failed (when = \"success\")",
        ])
        #expect(r.exitCode == 1)  // 'bad' failed
    }

    @Test func startFalseWaitsForStartAndDelayWaitsBeforeReady() async throws {
        let r = try await runLua("""
            local w = tasker.add{start = false, run = function() return "started" end}
            tasker.sleep(0.01)
            print(w:state())
            w:start()
            print(w:await())
            local t0 = tasker.now()
            local d = tasker.add{delay = 0.05, run = function() return tasker.now() end}
            print(d:state())
            print(d:await() - t0 >= 0.05)
            local never = tasker.add{start = false, run = function() end}
            local ok, err = never:result()
            print(ok, err.kind, err.message)
            """)
        #expect(r.lines == ["waiting", "started", "waiting", "true", "false\tcancelled\ttask 'task-3' was never started"])
        #expect(r.exitCode == 0)
    }

    @Test func keyedTasksShareOneRunUntilEveryHandleIsCancelled() async throws {
        let r = try await runLua("""
            local runs = 0
            local function fetch() runs = runs + 1; tasker.sleep(0.02); return "token" end
            local a = tasker.add{key = "auth", run = fetch}
            local b = tasker.add{key = "auth", run = fetch}
            local c = tasker.add{key = "auth", run = fetch}
            print(a.id, b.id, c.id)
            a:cancel()
            print(a:state(), b:state())
            print(b:await(), c:await(), runs)
            local d = tasker.add{key = "auth", run = fetch}
            local e = tasker.add{key = "auth", run = fetch}
            d:cancel(); e:cancel()
            print(d:state(), e:state(), runs)
            local f = tasker.add{key = "auth", run = fetch}
            print(f:await(), runs)
            """)
        #expect(r.lines == ["1\t2\t3", "cancelled\tpending", "token\ttoken\t1", "cancelled\tcancelled\t1", "token\t2"])
    }

    @Test func badSpecFieldsAreUsageErrorsAtTheCallersLine() async throws {
        let r = try await runLua("""
            local function try(spec)
              local ok, err = pcall(tasker.add, spec)
              print(err.kind, err.message)
            end
            try({run = function() end, timout = 3})
            try({name = "x"})
            try({run = function() end, timeout = "soon"})
            try({run = function() end, retry = {attempts = 0}})
            try({run = function() end, when = "sometimes"})
            try({run = function() end, after = {1, 2}})
            try(42)
            try({run = function() end, retry = {attempts = 2, tries = 3}})
            try({function() end})
            try({run = function() end, ["a_field_name_longer_than_forty_bytes_is_no_field"] = 1})
            local ok, err = pcall(function() tasker.add({run = print, priority = 1.5}) end)
            print(tostring(err))
            print(select(2, pcall(tasker.add, function() end, {timeout = 1})).message)
            print(pcall(tasker.add, function() end, nil, nil))
            -- the same mistake with every, a defined task function, define
            print(select(2, pcall(tasker.every, 60, function() end, {timeout = 1})).message)
            local f = tasker.define("f", function() end)
            local ok2, e2 = pcall(function() local h = f({}, {timeout = 1}) end)
            print(e2.message)
            print(select(2, pcall(function() tasker.define("g", {}, function() end, "x") end)))
            """)
        #expect(r.lines == [
            "usage\tunknown field 'timout' in 'tasker.add' spec (known: after, args, delay, id, key, name, priority, retry, run, start, tags, timeout, when)",
            "usage\tbad field 'run' in 'tasker.add' spec (function expected, got nil)",
            "usage\tbad field 'timeout' in 'tasker.add' spec (positive number expected, got string)",
            "usage\tbad field 'retry.attempts' in 'tasker.add' spec (integer >= 1 expected, got 0)",
            "usage\tbad field 'when' in 'tasker.add' spec (\"success\", \"failure\" or \"always\" expected, got \"sometimes\")",
            "usage\tbad field 'after' in 'tasker.add' spec (handle or list of handles expected, got table)",
            "usage\tbad argument #1 to 'tasker.add' (function or table expected, got number)",
            "usage\tunknown field 'tries' in 'tasker.add' retry table (known: attempts, backoff, delay, factor, jitter, max_delay, when)",
            "usage\tunknown field of type number in 'tasker.add' spec (known: after, args, delay, id, key, name, priority, retry, run, start, tags, timeout, when)",
            "usage\tunknown field 'a_field_name_longer_than_forty_bytes_is_no_field' in 'tasker.add' spec (known: after, args, delay, id, key, name, priority, retry, run, start, tags, timeout, when)",
            "pipeline.lua:15: usage: bad field 'priority' in 'tasker.add' spec (integer expected, got 1.5)",
            "tasker.add takes one argument, the body or a spec table, and got table as argument #2; options go in the spec: tasker.add{run = fn, timeout = 5}",
            "true\ttask 1 'task-1' (pending)",
            "tasker.every takes an interval and a body or spec table, and got table as argument #3; options go in the spec: tasker.every(60, {run = fn, timeout = 5})",
            "'f' takes one argument, the spec table, and got table as argument #2; options go in the spec: f{args = {...}, timeout = 5}",
            "pipeline.lua:24: usage: tasker.define takes a name, options and a function, and got string as argument #4",
        ])
    }

    @Test func ctxReportsProgressAndCancellation() async throws {
        let r = try await runLua("""
            local h = tasker.add(function(ctx)
              ctx:progress(0.5, "half")
              tasker.sleep(0.01)
              ctx:progress(2)
              return ctx:cancelled()
            end)
            h:on("progress", function(h, f, m) print("progress", f, m) end)
            print(h:await())
            local me
            me = tasker.add(function(ctx) me:cancel(); print("cancelled?", ctx:cancelled()) end)
            print(me:result())
            print(pcall(function() local ctx; tasker.add(function(c) ctx = c end):await(); ctx.x = 1 end))
            """)
        #expect(r.lines.prefix(5) == ["progress\t0.5\thalf", "progress\t1.0\tnil", "false", "cancelled?\ttrue",
                                     "false\tcancelled: task 'task-2' was cancelled"])
        #expect(r.lines.last?.contains("ctx is read-only") == true)
    }
}

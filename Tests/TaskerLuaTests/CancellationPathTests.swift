import Testing
import TaskerCore

/// The cancellation path of each combinator and group (README, Tasks): every
/// task ends in one final state and every awaiter wakes once.
@Suite struct CancellationPathTests {
    @Test func cancellingAParallelGroupCancelsItsUnfinishedMembers() async throws {
        let r = try await runLua("""
            local g = tasker.parallel({
              {name = "quick", run = function() return 1 end},
              {name = "slow", run = function() tasker.sleep(10) end},
              {name = "queued", run = function() tasker.sleep(10) end},
            }, {concurrency = 2, name = "grp"})
            tasker.sleep(0.01)
            g:cancel("stop the group")
            local ok, err = g:result()
            print(ok, g:state(), err.message)
            """)
        #expect(r.lines[0] == "false\tcancelled\ttask 'grp' was cancelled: stop the group")
        #expect(r.result.counts[.succeeded] == 1)
        #expect(r.result.counts[.cancelled] == 2)
        #expect(r.result.groups[.cancelled] == 1)  // the group is counted apart
        #expect(r.exitCode == 0)
    }

    @Test func cancellingATaskThatWaitsInACombinatorLeavesTheOthersRunning() async throws {
        let r = try await runLua("""
            local target = tasker.add{name = "target", run = function() tasker.sleep(0.05); return "done" end}
            local waiters = {
              tasker.add{name = "in-all", run = function() return tasker.all({target}) end},
              tasker.add{name = "in-any", run = function() return tasker.any({target}) end},
              tasker.add{name = "in-some", run = function() return tasker.some({target}) end},
              tasker.add{name = "in-await", run = function() return target:await() end},
            }
            tasker.sleep(0.01)
            for _, w in ipairs(waiters) do w:cancel() end
            print(target:await(), target:state())
            local states = {}
            for i, w in ipairs(waiters) do states[i] = w:state() end
            print(table.concat(states, " "))
            """)
        #expect(r.lines == ["done\tsucceeded", "cancelled cancelled cancelled cancelled"])
    }

    @Test func aCancelledMemberFailsAnAllAndStopsASerialGroup() async throws {
        let r = try await runLua("""
            local a = tasker.add(function() tasker.sleep(10) end)
            local b = tasker.add(function() tasker.sleep(10) end)
            local all = tasker.add(function() return tasker.all({a, b}) end)
            tasker.sleep(0.01)
            a:cancel("not needed")
            local ok, err = all:result()
            print(ok, err.kind, b:state())
            local s = tasker.serial({function() tasker.sleep(10) end, function() return "never" end})
            tasker.sleep(0.01)
            s:cancel()
            print(s:state(), select(2, s:result()).kind)
            """)
        #expect(r.lines == ["false\tcancelled\tcancelled", "cancelled\tcancelled"])
        #expect(r.result.counts[.failed] == nil)
    }

    @Test func cancellingAScheduleLetsItsRunningInstanceFinish() async throws {
        let r = try await runLua("""
            local finished = 0
            local s = tasker.every(10, {name = "job", run = function() tasker.sleep(0.03); finished = finished + 1 end})
            tasker.sleep(0.01)
            s:cancel()
            print(s:state())
            """)
        #expect(r.lines == ["cancelled"])
        #expect(r.result.counts[.succeeded] == 1)  // job#1 finished after the schedule stopped
        #expect(r.result.groups[.cancelled] == 1)  // the schedule, counted apart from tasks
    }
}

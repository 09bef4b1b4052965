import Foundation
import Testing

/// README, Tasks: h:pause()/h:resume(), tasker.pause()/tasker.resume().
@Suite struct PauseTests {
    @Test func aPausedTaskDoesNotStartUntilResumed() async throws {
        let r = try await runLua("""
            local h = tasker.add{name = "later", start = false, run = function() return "ran" end}
            h:pause()
            h:start()
            tasker.sleep(0.05)
            print(h:state())
            h:resume()
            print(h:await(), h:state())
            local done = tasker.add(function() end)
            done:await()
            done:pause()
            print(done:state())  -- no effect on a final task
            """)
        #expect(r.lines == ["paused", "ran\tsucceeded", "succeeded"], "\(r.output)")
    }

    @Test func aRunningTaskIsHeldAtItsNextWaitAndItsTimeoutClockStandsStill() async throws {
        let r = try await runLua("""
            local count = 0
            -- a timeout a loaded machine's 20 short sleeps stay well within
            local h = tasker.add{name = "ticker", timeout = 2, run = function()
              for i = 1, 20 do count = count + 1; tasker.sleep(0.01) end
              return count
            end}
            tasker.sleep(0.05)
            h:pause()
            local at = count
            tasker.sleep(2.1)  -- longer than its whole timeout
            print(h:state(), count == at)
            h:resume()
            print(h:await(), h:state())
            """)
        #expect(r.lines == ["paused\ttrue", "20\tsucceeded"], "\(r.output)")
    }

    @Test func pausingStopsTheTaskProcessesAndResumingContinuesThem() async throws {
        let dir = try makeScratchDirectory("pause")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let r = try await runLua("""
            local f = "\(dir)/ticks"
            local function lines() local n = 0; for _ in io.lines(f) do n = n + 1 end; return n end
            local h = tasker.add(function()
              return tasker.sh("for i in 1 2 3 4 5 6 7 8 9 10; do echo $i >> " .. f .. "; sleep 0.03; done").code
            end)
            while not fs.exists(f) do tasker.sleep(0.01) end
            h:pause()
            tasker.sleep(0.05)
            local before = lines()
            tasker.sleep(0.3)
            print(lines() == before, before < 10)
            h:resume()
            print(h:await(), lines())
            """)
        #expect(r.lines == ["true\ttrue", "0\t10"], "\(r.output)")
    }

    @Test func taskerPauseHoldsNewStartsAndRunningTasksGoOn() async throws {
        let r = try await runLua("""
            local log = {}
            local first = tasker.add(function() tasker.sleep(0.1); log[#log + 1] = "first done" end)
            tasker.sleep(0.01)
            tasker.pause()
            local second = tasker.add(function() log[#log + 1] = "second ran" end)
            first:await()
            tasker.sleep(0.05)
            print(second:state(), table.concat(log, ","))
            tasker.resume()
            second:await()
            print(table.concat(log, ","))
            """)
        #expect(r.lines == ["pending\tfirst done", "first done,second ran"], "\(r.output)")
    }

    @Test func pausingAGroupHoldsItsMembersAndResumingFinishesIt() async throws {
        let r = try await runLua("""
            local steps = {0, 0, 0}
            local function member(k)
              return function()
                for i = 1, 10 do steps[k] = i; tasker.sleep(0.01) end
                return k
              end
            end
            -- two run at once, the third waits for a free place in the group
            local g = tasker.parallel({member(1), member(2), member(3)}, {concurrency = 2})
            local second = false
            local s = tasker.serial({function() tasker.sleep(0.1) end, function() second = true end})
            tasker.sleep(0.03)
            g:pause(); s:pause()
            local before = table.concat(steps, ",")
            tasker.sleep(0.3)
            print(g:state(), s:state(), table.concat(steps, ",") == before, steps[3] == 0, second)
            g:resume(); s:resume()
            print(table.concat(g:await(), ","), g:state(), s:state() ~= "paused")
            s:await()
            print(second)
            """)
        #expect(r.lines == ["paused\tpaused\ttrue\ttrue\tfalse", "1,2,3\tsucceeded\ttrue", "true"], "\(r.output)\(r.diagnostics)")
        #expect(r.exitCode == 0)
    }

    @Test func aTaskLeftPausedIsCancelledAtTheEndNotADeadlock() async throws {
        let r = try await runLua("""
            local h = tasker.add{name = "forgotten", run = function() tasker.sleep(0.01); return 1 end}
            h:pause()
            local w = tasker.add{name = "waits", start = false, run = function() return 2 end}
            w:pause()
            w:start()
            tasker.add(function() h:result() end)
            """)
        #expect(!r.diagnostics.contains("deadlock"), "\(r.diagnostics)")
        #expect(r.result.cancelled.contains { $0.name == "forgotten" && $0.message.contains("paused, and never resumed") },
                "\(r.result.cancelled)")
        #expect(r.result.failed.isEmpty, "\(r.result.failed)")
        #expect(r.exitCode == 0)
    }
}

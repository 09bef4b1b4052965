import Foundation
import Testing

/// `tasker.rolling`'s batches, failure budget, pause and per-host limit,
/// with local bodies (the hosts are only names here; RollingSSHTests runs
/// it over ssh).
@Suite struct RollingTests {
    @Test func batchesInOrderStopAfterTooManyFailuresAndNameTheCancelledHosts() async throws {
        let r = try await runLua("""
            local log, running, most, starts, ends = {}, 0, 0, {}, {}
            local hosts = {}
            for i = 1, 10 do hosts[i] = "h" .. i end
            local bad = {h2 = true, h4 = true, h5 = true}
            local g = tasker.rolling{hosts = hosts, batch = "30%", max_failures = 1, pause = 0.2, name = "roll",
              run = function(ctx, host)
                running = running + 1
                most = math.max(most, running)
                log[#log + 1] = host
                starts[host] = tasker.now()
                tasker.sleep(0.05)
                running = running - 1
                ends[host] = tasker.now()
                if bad[host] then error("down: " .. host) end
                return host
              end}
            local ok, e = g:result()
            print(ok, e.kind, e.message, g:state())
            print(table.concat(log, " "))
            print(most)
            -- the second batch starts after the whole first one ended, plus the pause
            print(math.min(starts.h4, starts.h5, starts.h6) - math.max(ends.h1, ends.h2, ends.h3) >= 0.2,
                  math.max(starts.h1, starts.h2, starts.h3) < math.min(ends.h1, ends.h2, ends.h3))
            """)
        #expect(r.lines.count == 4, "\(r.lines) \(r.diagnostics)")
        let lines = r.lines + ["", "", "", ""]
        // failed, as a group whose member failed is
        #expect(lines[0] == "false\tdependency\trolling: too many failures (2 > 1)\tfailed")
        #expect(r.result.groups[.failed] == 1 && r.result.groups[.cancelled] == nil, "\(r.result.groups)")
        // two batches of 3, the second after the pause
        #expect(lines[1] == "h1 h2 h3 h4 h5 h6")
        #expect(lines[2] == "3")
        #expect(lines[3] == "true\ttrue")
        #expect(r.result.cancelled.map(\.name) == ["h7", "h8", "h9", "h10"], "\(r.result.cancelled)")
        #expect(r.result.cancelled.allSatisfy { $0.message == "cancelled: rolling: too many failures (2 > 1)" }, "\(r.result.cancelled)")
        #expect(Set(r.result.failed.map(\.name)).isSuperset(of: ["h2", "h4", "h5"]), "\(r.result.failed)")
    }

    @Test func withinTheBudgetEveryHostRunsAndPerHostLimitsAcrossGroups() async throws {
        let r = try await runLua("""
            local busy, overlap = {}, 0
            local function run(ctx, host)
              busy[host] = (busy[host] or 0) + 1
              if busy[host] > 1 then overlap = overlap + 1 end
              tasker.sleep(0.03)
              busy[host] = busy[host] - 1
              if host == "b" then error("b fails") end
              return host
            end
            -- the same hosts in two groups at once, and twice in one: one task per host at a time
            local g1 = tasker.rolling{hosts = {"a", "b", "c", "a"}, batch = 4, max_failures = "50%", run = run}
            local g2 = tasker.rolling{hosts = {"a", "c"}, batch = 2, run = run}
            local ok1, v1 = g1:result()
            local ok2, v2 = g2:result()
            print(ok1, #v1, ok2, table.concat(v2, ","), overlap)
            local empty = tasker.rolling{hosts = {}, run = run}
            print(empty:result())
            for _, bad in ipairs{
              function() tasker.rolling{hosts = {"a"}} end,
              function() tasker.rolling{hosts = "a", run = run} end,
              function() tasker.rolling{hosts = {"a"}, run = run, batch = 0} end,
              function() tasker.rolling{hosts = {"a"}, run = run, batch = "0%"} end,
              function() tasker.rolling{hosts = {"a"}, run = run, max_failures = "150%"} end,
              function() tasker.rolling{hosts = {"a"}, run = run, pause = -1} end,
              function() tasker.rolling{hosts = {"a"}, run = run, per_host = 0} end,
              function() tasker.rolling{hosts = {"a", 3}, run = run} end,
              function() tasker.rolling{hosts = {"-oProxyCommand=x"}, run = run} end,
              function() tasker.rolling{hosts = {"a"}, run = run, batchh = 1} end,
            } do
              local ok, e = pcall(bad)
              print(ok, e.kind, e.where)
            end
            print(select(2, pcall(tasker.rolling, {hosts = {"a", 3}, run = run})).message)
            print(select(2, pcall(tasker.rolling, {hosts = {"a", "b c"}, run = run})).message)
            """)
        #expect(r.lines.first == "true\t4\ttrue\ta,c\t0", "\(r.lines) \(r.diagnostics)")
        #expect(r.lines.dropFirst().first?.hasPrefix("true\ttable") == true, "\(r.lines)")
        #expect(Array(r.lines.dropFirst(2).prefix(10)) == (19...28).map { "false\tusage\tpipeline.lua:\($0)" }, "\(r.lines)")
        #expect(Array(r.lines.suffix(2)) == [
            "bad element #2 in 'tasker.rolling' hosts (address string or host object expected, got number)",
            "bad element #2 in 'tasker.rolling' hosts: bad host 'b c' (blanks or control characters; expected [user@]host[:port])",
        ], "\(r.lines)")
    }
}

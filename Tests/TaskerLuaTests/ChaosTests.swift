import Testing

/// Everything at once: an interceptor that discards, holds, delays and
/// forces at random, a reactor that requeues, retries, timeouts,
/// dependencies, tasks awaiting children, and pauses, resumes and cancels
/// from another task while all that runs. Every task ends in exactly one
/// final state, its `finish` handler runs once, and the run ends.
@Suite struct ChaosTests {
    static let pipeline = """
        math.randomseed(tonumber(tasker.args[1]))
        local n = 150
        local finished = {}
        tasker.intercept{name = "mix", max_hold = 0.05, fn = function(t, held)
          local r = math.random()
          if r < 0.05 then return "discard"
          elseif r < 0.15 then return "hold"
          elseif r < 0.2 then return {delay = 0.002}
          elseif r < 0.22 then return "force" end
          return "execute"
        end}
        tasker.react{name = "again", requeue = true, max_requeues = 2,
          when = function(t, res) return not res.ok and math.random() < 0.3 end,
          fn = function() tasker.sleep(0.001) end}
        local hs = {}
        for i = 1, n do
          local mode = math.random(1, 6)
          hs[i] = tasker.add{name = "t" .. i, timeout = (mode == 3) and 0.01 or nil,
            retry = (mode == 2) and {attempts = 3, delay = 0.001} or nil,
            after = (i > 5 and math.random() < 0.2) and {hs[math.random(1, i - 1)]} or nil,
            run = function(ctx)
              if mode == 1 then tasker.sleep(math.random() * 0.01) end
              if mode == 2 and ctx.attempt < 3 then error("flaky") end
              if mode == 3 then tasker.sleep(0.05) end
              if mode == 4 then error("bad") end
              if mode == 5 then tasker.add(function() return 1 end):await() end
              return i
            end}
          hs[i]:on("finish", function() finished[i] = (finished[i] or 0) + 1 end)
        end
        tasker.add{name = "chaos", run = function()
          for _ = 1, 40 do
            local h = hs[math.random(1, n)]
            local r = math.random()
            if r < 0.3 then h:pause() elseif r < 0.6 then h:resume() else h:cancel("chaos") end
            tasker.sleep(0.001)
          end
          for i = 1, n do hs[i]:resume() end
        end}
        for i = 1, n do pcall(function() return hs[i]:await() end) end
        tasker.sleep(0.02)  -- finish handlers run from the drain loop
        local open, twice = 0, 0
        for i = 1, n do
          local s = hs[i]:state()
          if s ~= "succeeded" and s ~= "failed" and s ~= "cancelled" and s ~= "skipped" then open = open + 1 end
          if finished[i] ~= 1 then twice = twice + 1 end
        end
        print(open, twice)
        """

    @Test(.timeLimit(.minutes(2)), arguments: [1, 2, 3])
    func everyTaskEndsOnceWhateverHappensAroundIt(seed: Int) async throws {
        let r = try await runLua(Self.pipeline, args: [String(seed)])
        #expect(r.lines == ["0\t0"], "\(r.output)")
    }
}

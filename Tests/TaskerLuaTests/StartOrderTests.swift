import Foundation
import Testing
import TaskerCore

/// Ready tasks start by priority, then in add order: a dependent released
/// by its dependency goes before tasks added after it, so a pipeline makes
/// depth-first progress (an interrupted run leaves whole chains done).
@Suite struct StartOrderTests {
    @Test func aReleasedDependentStartsBeforeTasksAddedAfterIt() async throws {
        let r = try await runLua("""
            local order = {}
            local function step(name) return function() order[#order + 1] = name end end
            local a = tasker.add{name = "a", run = step("a")}
            tasker.add{name = "b", after = a, run = step("b")}
            tasker.add{name = "c", run = step("c")}
            tasker.add{name = "d", run = step("d")}
            tasker.all{a}
            while #order < 4 do tasker.sleep(0.001) end
            print(table.concat(order, " "))
            """, concurrency: 1)
        #expect(r.lines == ["a b c d"])
    }

    @Test func extractTransformLoadChainsFinishOneByOne() async throws {
        let r = try await runLua("""
            local order = {}
            local function step(name) return function() order[#order + 1] = name end end
            local loads = {}
            for i = 1, 3 do
              local e = tasker.add{name = "e" .. i, run = step("e" .. i)}
              local t = tasker.add{name = "t" .. i, after = e, run = step("t" .. i)}
              loads[i] = tasker.add{name = "l" .. i, after = t, run = step("l" .. i)}
            end
            -- a later, higher-priority task still goes first once ready
            tasker.add{name = "urgent", priority = 5, after = loads[1], run = step("urgent")}
            tasker.all(loads)
            print(table.concat(order, " "))
            """, concurrency: 1)
        #expect(r.lines == ["e1 t1 l1 urgent e2 t2 l2 e3 t3 l3"])
    }
}

import Testing
@testable import TaskerCore

@Suite struct SchedulingTests {
    @Test func higherPriorityStartsFirstAndEqualPrioritiesInAddOrder() async {
        let order: [String] = await onLoop(concurrency: 1) { engine, _, done in
            var order: [String] = []
            let body = ImmediateBody()
            var ids: [TaskID] = []
            for (name, p) in [("a", 0), ("b", 5), ("c", 0), ("d", 5), ("e", -1)] {
                ids.append(engine.add(spec(name, body) { $0.priority = p }))
            }
            body.log = { run in order.append(engine.name(run.task)) }
            whenAll(ids, engine) { done(order) }
        }
        #expect(order == ["b", "d", "a", "c", "e"])
    }

    @Test func neverMoreRunningThanSlotsAndASlotIsReusedAtOnce() async {
        let (maxRunning, finished): (Int, Int) = await onLoop(concurrency: 3) { engine, loop, done in
            var running = 0
            var maxRunning = 0
            let body = ManualBody()
            body.onStart = { run, engine in
                running += 1
                maxRunning = max(maxRunning, running)
                loop.schedule(after: 0.001) {
                    running -= 1
                    engine.complete(run, with: .success(.none))
                }
            }
            let ids = (0..<20).map { _ in engine.add(spec(nil, body)) }
            whenAll(ids, engine) { done((maxRunning, ids.filter { engine.state($0) == .succeeded }.count)) }
        }
        #expect(maxRunning == 3)
        #expect(finished == 20)
    }

    @Test func statesMoveFromPendingToRunningToSucceeded() async {
        let seen: [TaskState] = await onLoop(concurrency: 1) { engine, _, done in
            let body = ManualBody()
            let first = engine.add(spec("first", body))
            let second = engine.add(spec("second", ImmediateBody()))
            var seen = [engine.state(first), engine.state(second)]
            body.onStart = { run, engine in
                engine.loop.enqueue {
                    seen.append(engine.state(second))  // waits for the slot
                    engine.complete(run, with: .success(.none))
                    seen.append(engine.state(first))
                }
            }
            whenAll([first, second], engine) { done(seen + [engine.state(second)]) }
        }
        #expect(seen == [.pending, .pending, .pending, .succeeded, .succeeded])
    }

    @Test func delayHoldsATaskWaitingUntilItElapses() async {
        // Manual time: 4.9 s after the add the task still waits; at 5 s it runs.
        let states: [TaskState] = await onLoop(manualClock: true) { engine, loop, done in
            let clock = manualClock(of: loop)
            let id = engine.add(spec("later", ImmediateBody()) { $0.delay = 5 })
            var seen = [engine.state(id)]
            clock.advance(by: 4.9)
            loop.enqueueNextTurn {
                seen.append(engine.state(id))
                clock.advance(by: 0.1)
                engine.addWaiter(id, Watcher { _, _ in done(seen + [engine.state(id)]) })
            }
        }
        #expect(states == [.waiting, .waiting, .succeeded])
    }

    @Test func startFalseWaitsForStartAndIdleSettlingCancelsNeverStarted() async {
        let result: [String] = await onLoop { engine, _, done in
            let a = engine.add(spec("a", ImmediateBody()) { $0.start = false })
            let b = engine.add(spec("b", ImmediateBody()) { $0.start = false })
            let dependent = engine.add(spec("c", ImmediateBody()) { $0.after = [b] })
            var out = [engine.state(a).rawValue]
            engine.start(a)
            engine.start(a)  // no effect
            engine.addWaiter(a, Watcher { _, e in
                out.append(e.state(a).rawValue)
                out.append(String(e.settleIdle()))
                out.append(e.state(b).rawValue)
                out.append(e.outcome(b)!.failure!.message)
                out.append(e.outcome(dependent)!.failure!.kind.rawValue)
                done(out)
            })
        }
        #expect(result == ["waiting", "succeeded", "true", "cancelled", "task 'b' was never started", "dependency"])
    }

    @Test func readyQueueOrdersByPriorityThenArrival() {
        var q = ReadyQueue()
        q.push(1, priority: 0)
        q.push(2, priority: 3)
        q.push(3, priority: 0)
        q.push(4, priority: 3)
        q.push(5, priority: 7)
        q.push(6, priority: -2)
        var out: [TaskID] = []
        while let id = q.pop() { out.append(id) }
        #expect(out == [5, 2, 4, 1, 3, 6])
        #expect(q.isEmpty)
    }

    /// Within a priority, add order (ids), not the order tasks became
    /// ready: a dependent released late goes before tasks added after it.
    @Test func readyQueueKeepsAddOrderWhateverTheOrderOfReadiness() {
        var q = ReadyQueue()
        for id in [1, 3, 4, 8] { q.push(id, priority: 0) }
        #expect(q.pop() == 1)
        q.push(2, priority: 0)   // released by 1
        q.push(6, priority: 0)
        q.push(5, priority: 0)
        q.push(7, priority: 2)   // higher priority still goes first
        var out: [TaskID] = []
        while let id = q.pop() {
            out.append(id)
            if id == 3 { q.push(0, priority: -1); q.push(9, priority: 0) }
        }
        #expect(out == [7, 2, 3, 4, 5, 6, 8, 9, 0])
        #expect(q.isEmpty)
    }
}

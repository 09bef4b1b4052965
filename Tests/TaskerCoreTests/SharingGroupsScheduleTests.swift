import Testing
@testable import TaskerCore

@Suite struct SharingGroupsScheduleTests {
    @Test func keyedTasksShareOneRunAndCancelOnlyWhenEveryHandleIs() async {
        let r: (Int, [TaskState], Bool, TaskState) = await onLoop { engine, _, done in
            let body = ManualBody()
            let a = engine.add(spec("a", body) { $0.key = "token" })
            let b = engine.add(spec("b", ImmediateBody()) { $0.key = "token" })
            engine.dispatch()
            engine.cancel(a)  // b still follows the work
            let aborted = !body.aborted.isEmpty
            let states = [engine.state(a), engine.state(b)]
            engine.complete(body.started[0], with: .success(.none))
            done((body.started.count, states, aborted, engine.state(b)))
        }
        #expect(r.0 == 1)
        #expect(r.1 == [.cancelled, .running])
        #expect(r.2 == false)
        #expect(r.3 == .succeeded)
    }

    @Test func cancellingTheLastHandleCancelsTheSharedWork() async {
        let r: (TaskState, Int) = await onLoop { engine, _, done in
            let body = ManualBody()
            let a = engine.add(spec("a", body) { $0.key = "k" })
            let b = engine.add(spec("b", ImmediateBody()) { $0.key = "k" })
            engine.dispatch()
            engine.cancel(b)
            engine.cancel(a)
            // a new add with the same key starts new work
            let c = engine.add(spec("c", ImmediateBody()) { $0.key = "k" })
            engine.addWaiter(c, Watcher { _, e in done((e.state(c), body.aborted.count)) })
        }
        #expect(r == (.succeeded, 1))
    }

    @Test func parallelRunsMembersAtItsConcurrencyAndFailFastStopsTheRest() async {
        let r: (Int, TaskState, [TaskState], String) = await onLoop(concurrency: 10) { engine, loop, done in
            var running = 0
            var maxRunning = 0
            let body = ManualBody()
            body.onStart = { run, e in
                running += 1
                maxRunning = max(maxRunning, running)
                loop.schedule(after: 0.002) {
                    running -= 1
                    let fail = e.name(run.task) == "m3"
                    e.complete(run, with: fail ? .failure(TaskFailure(.error, "m3 broke")) : .success(.none))
                }
            }
            let members = (1...6).map { spec("m\($0)", body) }
            let g = engine.addGroup(spec("g", nil), members: members, concurrency: 2, failFast: true)
            engine.addWaiter(g, Watcher { _, e in
                let ms = e.groupMembers(g)!
                loop.schedule(after: 0.01) {
                    done((maxRunning, e.state(g), ms.map(e.state), e.outcome(g)!.failure!.message))
                }
            })
        }
        #expect(r.0 == 2)
        #expect(r.1 == .failed)
        #expect(r.2[2] == .failed)
        #expect(r.2[0] == .succeeded)
        #expect(r.2.suffix(2).allSatisfy { $0 == .cancelled })
        #expect(r.3 == "m3 broke")
    }

    @Test func groupWithoutFailFastWaitsForAllAndCollectsMembers() async {
        let r: (TaskState, [TaskState]) = await onLoop { engine, _, done in
            let members = [
                spec("ok", ImmediateBody()),
                spec("bad", ImmediateBody { _ in .failure(TaskFailure(.error, "x")) }),
                spec("ok2", ImmediateBody()),
            ]
            let g = engine.addGroup(spec("g", nil), members: members, concurrency: 1, failFast: false)
            engine.addWaiter(g, Watcher { _, e in done((e.state(g), e.groupMembers(g)!.map(e.state))) })
        }
        #expect(r.0 == .failed)
        #expect(r.1 == [.succeeded, .failed, .succeeded])
    }

    @Test func scheduleRunsInstancesWithoutOverlapAndStopsOnCancel() async {
        let r: (Int, Int, TaskState) = await onLoop { engine, loop, done in
            var running = 0
            var overlap = 0
            var count = 0
            let body = ManualBody()
            var s: TaskID = 0
            body.onStart = { run, e in
                running += 1
                count += 1
                if running > 1 { overlap += 1 }
                // each instance takes 2.5 intervals: ticks in between are skipped
                loop.schedule(after: 0.025) {
                    running -= 1
                    e.complete(run, with: .success(.none))
                    // cancelled after its fourth instance (counted, not timed:
                    // a loaded machine ran fewer than 3 in a fixed 0.2 s); no
                    // instance starts after it
                    guard count == 4 else { return }
                    engine.cancel(s)
                    loop.schedule(after: 0.05) { done((overlap, count, engine.state(s))) }
                }
            }
            s = engine.addSchedule(spec("tick", nil), interval: 0.01) { _ in spec(nil, body) }
        }
        #expect(r.0 == 0)
        #expect(r.1 == 4)
        #expect(r.2 == .cancelled)
    }
}

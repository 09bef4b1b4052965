import Testing
@testable import TaskerCore

@Suite struct DependencyTests {
    private func run(_ condition: DependencyCondition, depFails: Bool) async -> (TaskState, TaskFailure.Kind?, Bool) {
        await onLoop { engine, _, done in
            let dep = engine.add(spec("dep", ImmediateBody { _ in
                depFails ? .failure(TaskFailure(.error, "boom")) : .success(.none)
            }))
            let body = ImmediateBody()
            var ran = false
            body.log = { _ in ran = true }
            let t = engine.add(spec("t", body) { $0.after = [dep]; $0.when = condition })
            engine.addWaiter(t, Watcher { _, e in done((e.state(t), e.outcome(t)?.failure?.kind, ran)) })
        }
    }

    @Test func successRunsAfterSuccessAndIsSkippedAfterFailure() async {
        #expect(await run(.success, depFails: false) == (.succeeded, nil, true))
        #expect(await run(.success, depFails: true) == (.skipped, .dependency, false))
    }

    @Test func failureRunsOnlyAfterFailure() async {
        #expect(await run(.failure, depFails: true) == (.succeeded, nil, true))
        #expect(await run(.failure, depFails: false) == (.skipped, .dependency, false))
    }

    /// `failure` with several dependencies: any one that failed lets it
    /// run (a rollback after deploy and smoke), judged once all are final.
    @Test func failureRunsWhenAnyOfSeveralFailed() async {
        func run(_ fails: [Bool]) async -> (TaskState, String?) {
            await onLoop { engine, _, done in
                let deps = fails.enumerated().map { i, f in
                    engine.add(spec("d\(i)", ImmediateBody { _ in f ? .failure(TaskFailure(.error, "boom")) : .success(.none) }))
                }
                let t = engine.add(spec("rollback", ImmediateBody()) { $0.after = deps; $0.when = .failure })
                engine.addWaiter(t, Watcher { _, e in done((e.state(t), e.outcome(t)?.failure?.summary)) })
            }
        }
        #expect(await run([false, true]) == (.succeeded, nil))
        #expect(await run([true, false]) == (.succeeded, nil))
        #expect(await run([true, true]) == (.succeeded, nil))
        #expect(await run([false, false]) == (.skipped, "skipped: all 2 dependencies succeeded"))
        #expect(await run([false]) == (.skipped, "skipped: dependency 'd0' succeeded"))
    }

    @Test func alwaysRunsEitherWay() async {
        #expect(await run(.always, depFails: true) == (.succeeded, nil, true))
        #expect(await run(.always, depFails: false) == (.succeeded, nil, true))
    }

    @Test func dependencyOnAFinishedTaskIsJudgedAtAdd() async {
        let state: TaskState = await onLoop { engine, _, done in
            let dep = engine.add(spec("dep", ImmediateBody { _ in .failure(TaskFailure(.error, "x")) }))
            engine.addWaiter(dep, Watcher { _, e in
                let t = e.add(spec("t", ImmediateBody()) { $0.after = [dep] })
                done(e.state(t))
            })
        }
        #expect(state == .skipped)
    }

    @Test func skippingCascadesAndEveryWaiterIsToldOnce() async {
        let (states, calls): ([TaskState], [Int]) = await onLoop { engine, _, done in
            let a = engine.add(spec("a", ImmediateBody { _ in .failure(TaskFailure(.error, "x")) }))
            let b = engine.add(spec("b", ImmediateBody()) { $0.after = [a] })
            let c = engine.add(spec("c", ImmediateBody()) { $0.after = [b] })
            let watchers = [a, b, c].map { id in (id, Watcher { _, _ in }) }
            for (id, w) in watchers { engine.addWaiter(id, w) }
            whenAll([a, b, c], engine) {
                engine.loop.enqueue {
                    done(([a, b, c].map(engine.state), watchers.map(\.1.calls)))
                }
            }
        }
        #expect(states == [.failed, .skipped, .skipped])
        #expect(calls == [1, 1, 1])
    }
}

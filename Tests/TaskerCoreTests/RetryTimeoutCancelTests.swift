import Testing
@testable import TaskerCore

@Suite struct RetryTimeoutCancelTests {
    @Test func backoffDelaysFollowTheFormula() {
        let exp = RetryPolicy(attempts: 6, delay: 0.5, backoff: .exponential, factor: 2, maxDelay: 3)
        #expect((1...5).map { exp.delay(after: $0) } == [0.5, 1, 2, 3, 3])
        let fixed = RetryPolicy(attempts: 3, delay: 0.25, backoff: .fixed)
        #expect([1, 2].map { fixed.delay(after: $0) } == [0.25, 0.25])
        let jitter = RetryPolicy(attempts: 3, delay: 1, factor: 2, jitter: true)
        for _ in 0..<100 {
            let d = jitter.delay(after: 2)
            #expect(d >= 1 && d <= 2)
        }
    }

    @Test func retriesUntilSuccessCountingAttemptsAndReportingEachRetry() async {
        let (state, attempts, retries): (TaskState, Int, [Int]) = await onLoop { engine, _, done in
            final class Log: EngineObserver {
                var retries: [Int] = []
                func taskRetrying(_ id: TaskID, failedAttempt: Int, failure: TaskFailure, delay: Double, engine: Engine) {
                    retries.append(failedAttempt)
                }
            }
            let log = Log()
            engine.observers.append(log)
            let id = engine.add(spec("flaky", ImmediateBody { run in
                run.attempt < 3 ? .failure(TaskFailure(.error, "no")) : .success(.none)
            }) { $0.retry = RetryPolicy(attempts: 5, delay: 0.001) })
            engine.addWaiter(id, Watcher { _, e in done((e.state(id), e.attempts(id), log.retries)) })
        }
        #expect(state == .succeeded)
        #expect(attempts == 3)
        #expect(retries == [1, 2])
    }

    @Test func retryStopsWhenAttemptsRunOutOrThePredicateSaysNo() async {
        let results: [Int] = await onLoop { engine, _, done in
            let failing = ImmediateBody { _ in .failure(TaskFailure(.error, "no")) }
            let a = engine.add(spec("a", failing) { $0.retry = RetryPolicy(attempts: 3, delay: 0) })
            var asked: [Int] = []
            let b = engine.add(spec("b", failing) {
                $0.retry = RetryPolicy(attempts: 10, delay: 0)
                $0.retryWhen = { _, attempt in
                    asked.append(attempt)
                    return attempt < 2
                }
            })
            whenAll([a, b], engine) { done([engine.attempts(a), engine.attempts(b)] + asked) }
        }
        #expect(results == [3, 2, 1, 2])
    }

    @Test func timeoutFailsTheAttemptFreesTheSlotAndIsRetried() async {
        let result: (TaskState, Int, String, Int, Bool) = await onLoop(concurrency: 1, manualClock: true) { engine, loop, done in
            let slow = ManualBody()  // never completes on its own
            // Each attempt that starts is let run 30 s of manual time.
            slow.onStart = { _, _ in loop.enqueueNextTurn { manualClock(of: loop).advance(by: 30) } }
            let id = engine.add(spec("slow", slow) {
                $0.timeout = 30
                $0.retry = RetryPolicy(attempts: 2, delay: 0)
            })
            let next = engine.add(spec("next", ImmediateBody()))
            whenAll([id, next], engine) {
                let f = engine.outcome(id)!.failure!
                done((engine.state(id), engine.attempts(id), f.description, slow.aborted.count,
                      engine.state(next) == .succeeded))
            }
        }
        #expect(result.0 == .failed)
        #expect(result.1 == 2)
        #expect(result.2 == "timeout: task 'slow' exceeded 30s")
        #expect(result.3 == 2)
        #expect(result.4)
    }

    @Test func cancelFreesTheSlotAtOnceAndIsNeverRetried() async {
        let (states, aborted, nextStartedAfterCancel): ([TaskState], Int, Bool) = await onLoop(concurrency: 1) { engine, _, done in
            let body = ManualBody()
            let a = engine.add(spec("a", body) { $0.retry = RetryPolicy(attempts: 5, delay: 0) })
            let nextBody = ManualBody()
            let b = engine.add(spec("b", nextBody))
            body.onStart = { _, e in
                e.loop.enqueue {
                    e.cancel(a, reason: "enough")
                    e.dispatch()
                    let started = nextBody.started.count == 1
                    e.complete(nextBody.started.first!, with: .success(.none))
                    done(([e.state(a), e.state(b)], body.aborted.count, started))
                }
            }
        }
        #expect(states == [.cancelled, .succeeded])
        #expect(aborted == 1)
        #expect(nextStartedAfterCancel)
    }

    @Test func lateReportOfAnAbortedAttemptIsIgnored() async {
        let (state, message): (TaskState, String) = await onLoop { engine, _, done in
            let body = ManualBody()
            let a = engine.add(spec("a", body))
            body.onStart = { run, e in
                e.loop.enqueue {
                    e.cancel(a)
                    e.complete(run, with: .success(.none))
                    done((e.state(a), e.outcome(a)!.failure!.message))
                }
            }
        }
        #expect(state == .cancelled)
        #expect(message == "task 'a' was cancelled")
    }

    @Test func swiftAPIRunsAsyncClosuresWithValuesErrorsAndCancel() async throws {
        let tasks = TaskManager(concurrency: 2)
        let ok = await tasks.add(name: "ok") { ctx in "hello \(ctx.name)" }
        #expect(try await ok.value as? String == "hello ok")
        let flaky = await tasks.add(name: "flaky", retry: RetryPolicy(attempts: 3, delay: 0.001)) { ctx in
            if ctx.attempt < 3 { throw TaskFailure(.error, "attempt \(ctx.attempt)") }
            return ctx.attempt
        }
        #expect(try await flaky.value as? Int == 3)
        let slow = await tasks.add(name: "slow") { _ in
            try await Task.sleep(nanoseconds: 60_000_000_000)
            return 0
        }
        slow.cancel()
        await #expect(throws: TaskFailure.self) { try await slow.value }
        #expect(await slow.state == .cancelled)
        let timed = await tasks.add(name: "timed", timeout: 0.02) { _ in
            try await Task.sleep(nanoseconds: 60_000_000_000)
            return 0
        }
        let outcome = await timed.outcome
        #expect(outcome.failure?.kind == .timeout)
    }
}

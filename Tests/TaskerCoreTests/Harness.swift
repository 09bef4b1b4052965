import Foundation
import TaskerCore

/// Runs a scenario on a fresh loop thread with an engine; the scenario calls
/// `done` with its findings, which ends the loop. With `manualClock`, time
/// moves only when the scenario advances `loop.clock` (see `manualClock(of:)`).
func onLoop<T: Sendable>(concurrency: Int = 4, manualClock: Bool = false,
                         _ scenario: @escaping @Sendable (Engine, EventLoop, @escaping (T) -> Void) -> Void) async -> T {
    await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
        let thread = Thread {
            let loop = manualClock ? EventLoop(clock: ManualClock()) : EventLoop()
            var engine: Engine?
            loop.run {
                let e = Engine(loop: loop, concurrency: concurrency)
                engine = e
                scenario(e, loop) { result in
                    continuation.resume(returning: result)
                    loop.stop()
                }
            }
            withExtendedLifetime(engine) {}
        }
        thread.start()
    }
}

/// A body the test drives: records each attempt and completes it when told.
final class ManualBody: TaskBody {
    var started: [AttemptRun] = []
    var aborted: [AttemptRun] = []
    var onStart: ((AttemptRun, Engine) -> Void)?

    func startAttempt(_ run: AttemptRun, engine: Engine) {
        started.append(run)
        onStart?(run, engine)
    }

    func abortAttempt(_ run: AttemptRun, reason: TaskFailure, engine: Engine) {
        aborted.append(run)
    }
}

/// Completes every attempt at once with `result(attempt)`.
final class ImmediateBody: TaskBody {
    let result: (AttemptRun) -> Result<TaskValue, TaskFailure>
    var log: ((AttemptRun) -> Void)?

    init(_ result: @escaping (AttemptRun) -> Result<TaskValue, TaskFailure> = { _ in .success(.none) }) {
        self.result = result
    }

    func startAttempt(_ run: AttemptRun, engine: Engine) {
        log?(run)
        let r = result(run)
        engine.loop.enqueue { engine.complete(run, with: r) }
    }

    func abortAttempt(_ run: AttemptRun, reason: TaskFailure, engine: Engine) {}
}

/// Calls `body` once when the task is final.
final class Watcher: TaskWaiter {
    let body: (TaskID, Engine) -> Void
    var calls = 0

    init(_ body: @escaping (TaskID, Engine) -> Void) { self.body = body }

    func taskFinished(_ id: TaskID, engine: Engine) {
        calls += 1
        body(id, engine)
    }
}

/// Waits for all of `ids` to finish, then calls `then`.
func whenAll(_ ids: [TaskID], _ engine: Engine, then: @escaping () -> Void) {
    var left = ids.count
    if left == 0 { then(); return }
    for id in ids {
        engine.addWaiter(id, Watcher { _, _ in
            left -= 1
            if left == 0 { then() }
        })
    }
}

func spec(_ name: String? = nil, _ body: TaskBody?, _ configure: (inout TaskSpec) -> Void = { _ in }) -> TaskSpec {
    var s = TaskSpec(name: name, body: body)
    configure(&s)
    return s
}

/// The manual clock of a loop made by `onLoop(manualClock: true)`.
func manualClock(of loop: EventLoop) -> ManualClock { loop.clock as! ManualClock }

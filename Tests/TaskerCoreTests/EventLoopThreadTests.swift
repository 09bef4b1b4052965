import Foundation
import Synchronization
import Testing
@testable import TaskerCore

@Suite struct EventLoopThreadTests {
    /// What each thread answered, by who asked.
    final class Answers: Sendable {
        private let answers = Mutex<[String: Bool]>([:])
        subscript(key: String) -> Bool? {
            get { answers.withLock { $0[key] } }
            set { answers.withLock { $0[key] = newValue } }
        }
    }

    /// `inLoop` is true on the thread inside `run` only: not on another
    /// thread while it runs, not before `run` nor after it returns (also on
    /// the thread that ran it), and again on the thread of a second `run`.
    @Test func inLoopIsTrueOnlyOnTheThreadRunningTheLoop() async {
        let loop = EventLoop()
        let answers = Answers()
        answers["before"] = loop.inLoop
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread {
                loop.run {
                    answers["loop"] = loop.inLoop
                    Thread {
                        let other = loop.inLoop
                        loop.execute {
                            answers["other"] = other
                            answers["job"] = loop.inLoop
                            loop.stop()
                        }
                    }.start()
                }
                answers["after, same thread"] = loop.inLoop
                done.resume()
            }.start()
        }
        #expect(answers["before"] == false)
        #expect(answers["loop"] == true)
        #expect(answers["other"] == false)
        #expect(answers["job"] == true)
        #expect(answers["after, same thread"] == false)

        // A loop that ended can run again, on another thread.
        let again = EventLoop()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread {
                again.run { again.stop() }
                Thread {
                    again.run {
                        answers["second run"] = again.inLoop
                        again.stop()
                    }
                    done.resume()
                }.start()
            }.start()
        }
        #expect(answers["second run"] == true)
    }

    /// A poller that, in its next wait, runs `callback` as the process
    /// reactor runs its callbacks: on the loop thread, once the wait has
    /// returned. A wait that is not woken ends after 10 s and is counted.
    final class FakePoller: LoopPoller {
        struct State {
            var callback: (@Sendable () -> Void)?
            var wakes = 0
            var waitsTimedOut = 0
        }
        let state = Mutex(State())
        private let woken = DispatchSemaphore(value: 0)

        func poll(until deadline: UInt64?) {
            guard deadline != 0 else { return }
            if let callback = state.withLock({ s in defer { s.callback = nil }; return s.callback }) {
                callback()
                return
            }
            if woken.wait(timeout: .now() + 10) == .timedOut { state.withLock { $0.waitsTimedOut += 1 } }
        }

        func wake() {
            state.withLock { $0.wakes += 1 }
            woken.signal()
        }
    }

    /// A job the loop thread sends itself from inside the poller runs at
    /// once and wakes nothing; a stop from another thread, sent while the
    /// loop waits in the poller or before, ends it at once.
    @Test func aJobSentFromInsideThePollerRunsWithoutAWake() async {
        let loop = EventLoop()
        let poller = FakePoller()
        loop.poller = poller
        let answers = Answers()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread {
                loop.run {
                    poller.state.withLock { s in
                        s.callback = {
                            loop.execute {
                                answers["no wake"] = poller.state.withLock { $0.wakes == 0 }
                                Thread { loop.stop() }.start()
                            }
                        }
                    }
                }
                done.resume()
            }.start()
        }
        #expect(answers["no wake"] == true)
        // Neither the job nor the stop waited for the poller's 10 s.
        #expect(poller.state.withLock { $0.waitsTimedOut } == 0)
    }
}

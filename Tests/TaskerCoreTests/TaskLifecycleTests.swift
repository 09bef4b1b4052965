import Testing
@testable import TaskerCore

/// Runs a transition inside `#expect` (which cannot call a mutating method).
private func after<T>(_ transition: () -> T) -> T { transition() }

/// The task lifecycle as a value, without a loop or an engine: each
/// transition's new stage and the actions it hands the engine.
@Suite struct TaskLifecycleTests {
    @Test func aTaskGoesFromWaitingToOneFinalState() {
        var life = TaskLifecycle()
        #expect(life.state == .waiting)
        #expect(life.isReady)
        #expect(after { life.queue() } == .enqueue)
        #expect(life.state == .pending)
        #expect(after { life.take() } == .admit(.from(0)))
        #expect(after { life.begin(token: 7) } == .announceStart)
        #expect(life.state == .running)
        #expect(life.attempt(7)?.slot == .held)
        #expect(after { life.endAttempt() } == .freeSlot)
        #expect(life.attempt(7) == nil)  // no slot: its reports are stale now
        life.backOff(until: 100)
        #expect(life.state == .running)  // between attempts
        #expect(after { life.queue() } == .enqueue)
        #expect(after { life.take() } == .admit(.from(0)))
        #expect(after { life.begin(token: 8) } == [])  // a retry: announced once only
        #expect(life.attempts == 2)
        #expect(after { life.endAttempt() } == .freeSlot)
        life.react(ReactingState(pending: 1, outcome: .succeeded(.none)))
        #expect(life.state == .reacting)
        #expect(life.reactions != nil)
        #expect(after { life.finish(.succeeded) } == .deliver)
        #expect(life.state == .succeeded)
        #expect(after { life.finish(.failed) } == nil)  // delivered once
    }

    @Test func nothingMovesAFinalState() {
        var life = TaskLifecycle()
        #expect(after { life.queue() } == .enqueue)
        #expect(after { life.finish(.cancelled) } == .deliver)
        #expect(after { life.queue() } == [])
        #expect(after { life.take() } == .stale)  // its entry in the ready queue is skipped
        #expect(after { life.begin(token: 1) } == nil)
        #expect(after { life.beginWithoutSlot() } == [])
        #expect(after { life.release(resumingAt: 1) } == false)
        #expect(after { life.requeue(reintercept: true) } == [])
        #expect(after { life.pause(now: 0) } == nil)
        #expect(after { life.requestStart() } == false)
        #expect(after { life.endAttempt() } == nil)
        #expect(life.state == .cancelled)
    }

    @Test func aHeldTaskIsReleasedToTheNextInterceptor() {
        var life = TaskLifecycle()
        _ = life.queue()
        _ = life.take()
        let batch = HeldBatch()
        life.hold(by: batch)
        #expect(life.state == .held)
        #expect(after { life.release(resumingAt: 2) })
        #expect(life.state == .pending)  // never started
        #expect(after { life.release(resumingAt: 3) } == false)  // a stray release changes nothing
        #expect(after { life.take() } == .admit(.from(2)))

        var cancelled = TaskLifecycle()
        _ = cancelled.queue()
        _ = cancelled.take()
        cancelled.hold(by: batch)
        // The engine takes it out of the batch.
        #expect(after { cancelled.finish(.cancelled) } == .deliverLeaving(batch))
        #expect(after { cancelled.finish(.cancelled) } == nil)
    }

    @Test func aLentSlotIsFreedOnceAndReclaimedOnlyByItsAttempt() {
        var life = TaskLifecycle()
        _ = life.queue()
        _ = life.take()
        _ = life.begin(token: 5)
        #expect(after { life.lendSlot(token: 4) } == [])  // a stale attempt
        #expect(after { life.lendSlot(token: 5) } == .freeSlot)
        #expect(after { life.lendSlot(token: 5) } == [])
        #expect(life.attempt(5)?.slot == .lent)
        #expect(after { life.reclaimSlot(token: 5) })
        #expect(after { life.reclaimSlot(token: 5) } == false)
        _ = life.lendSlot(token: 5)
        #expect(after { life.endAttempt() } == [])  // lent: the slot is free already
    }

    @Test func pausingStopsTheClockAndParksATaskThatComesUp() {
        var running = TaskLifecycle()
        _ = running.queue()
        _ = running.take()
        _ = running.begin(token: 1)
        running.clockStarted(deadline: 1_000)
        #expect(running.deadline == 1_000)
        #expect(after { running.pause(now: 400) } == .disarmTimeout)
        #expect(after { running.pause(now: 500) } == nil)  // paused already
        #expect(running.deadline == 0)
        #expect(running.attempt(1)?.clock == .stopped(remaining: 600))
        #expect(after { running.resume(now: 10_000) } == .rearm(deadline: 10_600))
        #expect(running.deadline == 10_600)
        #expect(after { running.resume(now: 10_001) } == nil)
        #expect(after { running.endAttempt() } == [.freeSlot, .disarmTimeout])

        var queued = TaskLifecycle()
        _ = queued.queue()
        #expect(after { queued.pause(now: 0) } == [])
        #expect(after { queued.take() } == .parked)
        #expect(after { queued.take() } == .stale)  // parked, not queued
        #expect(after { queued.resume(now: 0) } == .enqueue)
        #expect(after { queued.take() } == .admit(.from(0)))
    }

    @Test func dependenciesAndAStartRequestMakeItReady() {
        var life = TaskLifecycle(startRequested: false)
        life.dependencyAdded()
        life.dependencyAdded()
        life.dependencyAlreadyEnded(succeeded: true)
        #expect(after { life.dependencyEnded(succeeded: false) } == false)
        #expect(after { life.dependencyEnded(succeeded: true) })
        #expect(life.unmetDependencies == 0)
        #expect(life.dependencyFailed)
        #expect(!life.isReady)  // not started yet
        #expect(after { life.requestStart() })
        #expect(after { life.requestStart() } == false)
        #expect(life.isReady)
        life.delay(until: 50)
        #expect(!life.isReady)  // serving its delay
        #expect(life.state == .waiting)
        #expect(after { life.queue() } == .enqueue)
    }

    @Test func aRequeueSkipsTheChainUnlessItReintercepts() {
        var life = TaskLifecycle()
        _ = life.queue()
        _ = life.take()
        _ = life.begin(token: 1)
        _ = life.endAttempt()
        #expect(after { life.requeue(reintercept: false) } == .enqueue)
        #expect(life.state == .pending)
        #expect(life.requeues == 1)
        #expect(after { life.take() } == .admit(.skip))
        _ = life.begin(token: 2)
        _ = life.endAttempt()
        life.react(ReactingState(pending: 1, outcome: .succeeded(.none)))
        #expect(after { life.requeue(reintercept: true) } == .enqueue)
        #expect(after { life.take() } == .admit(.from(0)))
        #expect(life.requeues == 2)
    }

    @Test func anInterceptorsDelayAsksTheSameInterceptorAgain() {
        var life = TaskLifecycle()
        _ = life.queue()
        _ = life.take()
        life.delayAdmission(until: 10, resumingAt: 1)
        #expect(life.state == .pending)
        #expect(after { life.queue() } == .enqueue)
        #expect(after { life.take() } == .admit(.from(1)))
        life.queueBehindReleased(resumingAt: 2)
        #expect(after { life.take() } == .admit(.from(2)))
    }
}

import Testing
import TaskerCore

/// The task lifecycle as a value, without a loop or an engine.
@Suite struct TaskLifecycleTests {
    @Test func aTaskGoesFromWaitingToOneFinalState() {
        var life = TaskLifecycle()
        #expect(life.state == .waiting)
        #expect(life.apply(.queued).isEmpty)
        #expect(life.state == .pending)
        #expect(life.apply(.attemptStarted) == [.announceStart])
        #expect(life.state == .running)
        #expect(life.apply(.attemptStarted).isEmpty)  // a retry: announced once only
        #expect(life.attemptsStarted == 2)
        #expect(life.apply(.reacting).isEmpty)
        #expect(life.state == .reacting)
        #expect(life.apply(.finished(.succeeded)) == [.deliver])
        #expect(life.state == .succeeded)
    }

    @Test func nothingMovesAFinalState() {
        var life = TaskLifecycle()
        life.apply(.finished(.cancelled))
        for input: TaskLifecycle.Input in [.queued, .held, .released, .attemptStarted, .reacting,
                                           .finished(.succeeded), .finished(.failed)] {
            #expect(life.apply(input).isEmpty, "\(input)")
            #expect(life.state == .cancelled)
        }
    }

    @Test func releaseReturnsAHeldTaskToWhereItWas() {
        var fresh = TaskLifecycle()
        fresh.apply(.queued)
        fresh.apply(.held)
        #expect(fresh.state == .held)
        fresh.apply(.released)
        #expect(fresh.state == .pending)  // never started

        var retrying = TaskLifecycle()
        retrying.apply(.attemptStarted)
        retrying.apply(.held)
        retrying.apply(.released)
        #expect(retrying.state == .running)  // between attempts

        var notHeld = TaskLifecycle()
        notHeld.apply(.queued)
        notHeld.apply(.released)
        #expect(notHeld.state == .pending)  // a stray release changes nothing
    }
}

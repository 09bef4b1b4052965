import Foundation

/// Attempts: starting a body, its report, timeouts and retries.
extension Engine {
    func beginAttempt(_ r: TaskRecord) {
        guard let actions = r.lifecycle.begin(token: newToken()) else { return }
        running += 1
        announce(r, actions)
        let run = currentRun(r)
        if run.attempt > 1 {
            for o in observers { o.taskAttemptStarted(r.id, attempt: run.attempt, engine: self) }
        }
        if let timeout = r.timeout {
            let deadline = loop.clock.now &+ Monotonic.nanos(timeout)
            r.lifecycle.clockStarted(deadline: deadline)
            armTimeout(r, run, at: deadline)
        }
        guard let body = r.body else {
            complete(run, with: .success(.none))
            return
        }
        body.startAttempt(run, engine: self)
    }

    /// Tells the observers the task started, when the lifecycle says so
    /// (at its first attempt only).
    @inline(__always)
    func announce(_ r: TaskRecord, _ actions: TaskLifecycle.Actions) {
        guard actions.contains(.announceStart) else { return }
        if let stamps { r.startedAt = stamps.now() }
        if startLog != nil { startLog!.started(r.id) }
        for o in startObservers { o.taskStarted(r.id, engine: self) }
    }

    func armTimeout(_ r: TaskRecord, _ run: AttemptRun, at deadline: UInt64) {
        r.timeoutTimer = loop.schedule(at: deadline) { [unowned self] in
            self.attemptTimedOut(run)
        }
    }

    /// The body's report of an attempt. Stale reports (an aborted attempt)
    /// are ignored.
    public func complete(_ run: AttemptRun, with result: Result<TaskValue, TaskFailure>) {
        guard let r = record(run.task), r.lifecycle.attempt(run.token) != nil else { return }
        endAttempt(r)
        switch result {
        case .success(let value): finalAttemptEnded(r, .succeeded(value))
        case .failure(let failure): attemptFailed(r, failure)
        }
    }

    /// Frees the slot at once and disarms the attempt's timeout.
    func endAttempt(_ r: TaskRecord) {
        guard let actions = r.lifecycle.endAttempt() else { return }
        if actions.contains(.freeSlot) { running -= 1 }
        if actions.contains(.disarmTimeout) { disarmTimeout(r) }
        scheduleDispatch()
    }

    /// The attempt `run` is timed elsewhere from now on (a worker times a
    /// defined task from its claim, not from its enqueue here): its timeout
    /// here is disarmed.
    public func handTimeoutOver(_ run: AttemptRun) {
        guard let r = record(run.task) else { return }
        if r.lifecycle.clockHandedOver(token: run.token).contains(.disarmTimeout) { disarmTimeout(r) }
    }

    func disarmTimeout(_ r: TaskRecord) {
        r.timeoutTimer?.cancel()
        r.timeoutTimer = nil
    }

    func currentRun(_ r: TaskRecord) -> AttemptRun {
        AttemptRun(task: r.id, attempt: r.lifecycle.attempts, token: r.lifecycle.token)
    }

    /// A timeout that fires while the body waits; a body busy computing is
    /// stopped by its runtime (which reports the same failure).
    public func timeoutFailure(_ id: TaskID) -> TaskFailure {
        let seconds = record(id)?.timeout ?? 0
        return TaskFailure(.timeout, "task '\(name(id))' exceeded \(formatSeconds(seconds))")
    }

    private func attemptTimedOut(_ run: AttemptRun) {
        guard let r = record(run.task), r.lifecycle.attempt(run.token) != nil else { return }
        let failure = timeoutFailure(r.id)
        endAttempt(r)
        r.body?.abortAttempt(run, reason: failure, engine: self)
        attemptFailed(r, failure)
    }

    func attemptFailed(_ r: TaskRecord, _ failure: TaskFailure) {
        guard !r.state.isFinal else { return }
        let attempts = r.lifecycle.attempts
        guard r.retry.allowsRetry(failure, attempt: attempts),
              r.retryWhen?(failure, attempts) ?? !failure.permanent else {
            finalAttemptEnded(r, .ending(with: failure))
            return
        }
        let delay = failure.retryAfter.map { min(max(0, $0), r.retry.maxDelay) } ?? r.retry.delay(after: attempts)
        for o in observers {
            o.taskRetrying(r.id, failedAttempt: attempts, failure: failure, delay: delay, engine: self)
        }
        guard !r.state.isFinal else { return }  // an observer may have cancelled it
        let until = loop.clock.now &+ Monotonic.nanos(delay)
        r.lifecycle.backOff(until: until)
        r.timer = loop.schedule(at: until) { [unowned self] in
            r.timer = nil
            self.enqueueReady(r)
        }
    }

    /// Reports progress of a running task to the observers.
    public func progress(_ id: TaskID, fraction: Double, message: String?) {
        guard let r = record(id), r.finalState == nil else { return }
        for o in observers { o.taskProgress(id, fraction: fraction, message: message, engine: self) }
    }
}

/// `2` → "2s", `0.25` → "0.25s".
public func formatSeconds(_ seconds: Double) -> String {
    if seconds == seconds.rounded(), abs(seconds) < 1e15 { return "\(Int(seconds))s" }
    return String(format: "%gs", seconds)
}

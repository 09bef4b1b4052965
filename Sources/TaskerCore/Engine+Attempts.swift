import Foundation

/// Attempts: starting a body, its report, timeouts and retries.
extension Engine {
    func beginAttempt(_ r: TaskRecord) {
        running += 1
        r.inSlot = true
        r.attempts += 1
        r.token = newToken()
        announceStartOnce(r)
        if r.attempts > 1 {
            for o in observers { o.taskAttemptStarted(r.id, attempt: r.attempts, engine: self) }
        }
        let run = AttemptRun(task: r.id, attempt: r.attempts, token: r.token)
        if let timeout = r.timeout { armTimeout(r, run, in: Monotonic.nanos(timeout)) }
        guard let body = r.body else {
            complete(run, with: .success(.none))
            return
        }
        body.startAttempt(run, engine: self)
    }

    /// Tells the observers the task started, at its first attempt only.
    func announceStartOnce(_ r: TaskRecord) {
        guard r.lifecycle.apply(.attemptStarted).contains(.announceStart) else { return }
        if let stamps { r.startedAt = stamps.now() }
        for o in observers { o.taskStarted(r.id, engine: self) }
    }

    func armTimeout(_ r: TaskRecord, _ run: AttemptRun, in nanos: UInt64) {
        r.deadline = loop.clock.now &+ nanos
        r.timeoutTimer = loop.schedule(at: r.deadline) { [unowned self] in
            self.attemptTimedOut(run)
        }
    }

    /// The body's report of an attempt. Stale reports (an aborted attempt)
    /// are ignored.
    public func complete(_ run: AttemptRun, with result: Result<TaskValue, TaskFailure>) {
        guard let r = record(run.task), r.inSlot, r.token == run.token else { return }
        endAttempt(r)
        switch result {
        case .success(let value): finalAttemptEnded(r, .succeeded(value))
        case .failure(let failure): attemptFailed(r, failure)
        }
    }

    /// Frees the slot at once and disarms the attempt's timeout.
    func endAttempt(_ r: TaskRecord) {
        guard r.inSlot else { return }
        r.inSlot = false
        if r.slotLent { r.slotLent = false } else { running -= 1 }
        r.deadline = 0
        r.timeoutTimer?.cancel()
        r.timeoutTimer = nil
        scheduleDispatch()
    }

    func currentRun(_ r: TaskRecord) -> AttemptRun {
        AttemptRun(task: r.id, attempt: r.attempts, token: r.token)
    }

    /// A timeout that fires while the body waits; a body busy computing is
    /// stopped by its runtime (which reports the same failure).
    public func timeoutFailure(_ id: TaskID) -> TaskFailure {
        let seconds = record(id)?.timeout ?? 0
        return TaskFailure(.timeout, "task '\(name(id))' exceeded \(formatSeconds(seconds))")
    }

    private func attemptTimedOut(_ run: AttemptRun) {
        guard let r = record(run.task), r.inSlot, r.token == run.token else { return }
        let failure = timeoutFailure(r.id)
        endAttempt(r)
        r.body?.abortAttempt(run, reason: failure, engine: self)
        attemptFailed(r, failure)
    }

    func attemptFailed(_ r: TaskRecord, _ failure: TaskFailure) {
        guard !r.state.isFinal else { return }
        guard r.retry.allowsRetry(failure, attempt: r.attempts),
              r.retryWhen?(failure, r.attempts) ?? !failure.permanent else {
            finalAttemptEnded(r, .ending(with: failure))
            return
        }
        let delay = failure.retryAfter.map { min(max(0, $0), r.retry.maxDelay) } ?? r.retry.delay(after: r.attempts)
        for o in observers {
            o.taskRetrying(r.id, failedAttempt: r.attempts, failure: failure, delay: delay, engine: self)
        }
        guard !r.state.isFinal else { return }  // an observer may have cancelled it
        r.timer = loop.schedule(after: delay) { [unowned self] in
            r.timer = nil
            guard !r.state.isFinal else { return }
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

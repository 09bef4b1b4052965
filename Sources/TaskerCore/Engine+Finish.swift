/// Final states: finishing work and handles, cancellation, dependencies.
/// Every handle reaches exactly one outcome in `finishHandle`.
extension Engine {
    /// Cancels a handle unless it is final. A handle on shared (keyed) work
    /// cancels the work only when it is the last one on it.
    public func cancel(_ id: TaskID, reason: String? = nil) {
        guard let r = record(id), r.finalState == nil else { return }
        var failure = TaskFailure(.cancelled, reason.map { "task '\(r.name)' was cancelled: \($0)" }
                                               ?? "task '\(r.name)' was cancelled")
        failure.summary = reason.map { "cancelled: \($0)" } ?? "cancelled"
        cancel(r, failure)
    }

    func cancel(_ r: TaskRecord, _ failure: TaskFailure) {
        guard r.finalState == nil else { return }
        if case .follower(let leaderID) = r.role {
            finishHandle(r, .cancelled(failure))
            if let leader = record(leaderID) { releaseHandle(leader, failure) }
            return
        }
        if r.lifecycle.handles > 1 {
            _ = r.lifecycle.handleLeft()
            finishHandle(r, .cancelled(failure))
            return
        }
        cancelWork(r, failure)
    }

    private func releaseHandle(_ leader: TaskRecord, _ failure: TaskFailure) {
        if leader.lifecycle.handleLeft() { cancelWork(leader, failure) }
    }

    /// Stops the work wherever it is and ends it `cancelled` (or with the
    /// failure's kind: `dependency`, `discarded`).
    public func cancelWork(_ id: TaskID, _ failure: TaskFailure) {
        guard let r = record(id) else { return }
        cancelWork(r, failure)
    }

    func cancelWork(_ r: TaskRecord, _ failure: TaskFailure) {
        guard !r.state.isFinal else { return }
        r.timer?.cancel()
        r.timer = nil
        if r.lifecycle.inSlot {
            let run = currentRun(r)
            endAttempt(r)
            r.body?.abortAttempt(run, reason: failure, engine: self)
        }
        switch r.role {
        case .group(let g):
            finishWork(r, .ending(with: failure))
            var memberFailure = TaskFailure(failure.kind == .cancelled ? .cancelled : .dependency,
                                            "group '\(r.name)' was stopped: \(failure.message)")
            // Members of a group whose condition was not met are skipped with it.
            memberFailure.conditionUnmet = failure.conditionUnmet
            if failure.conditionUnmet { memberFailure.summary = failure.summary }
            for m in g.members { if let mr = record(m) { cancel(mr, memberFailure) } }
        case .schedule(let s):
            finishWork(r, .ending(with: failure))
            s.current = nil
        default:
            finishWork(r, .ending(with: failure))
        }
    }

    /// The work is done: set its state, then end its own handle and its
    /// followers' handles with the same outcome.
    func finishWork(_ r: TaskRecord, _ outcome: TaskOutcome) {
        switch r.lifecycle.finish(outcome.state) {
        case nil: return
        case .deliver: break
        case .deliverLeaving(let batch): batch.tasks.removeAll { $0 == r.id }
        }
        r.body = nil
        r.retryWhen = nil
        r.timer?.cancel()
        r.timer = nil
        if let key = r.key, keyIndex[key] == r.id { keyIndex[key] = nil }
        if r.finalState == nil { finishHandle(r, outcome) }
        for f in r.followers {
            if let fr = record(f), fr.finalState == nil { finishHandle(fr, outcome) }
        }
        if let parent = r.parent, let g = record(parent) { groupMemberFinished(g, r) }
    }

    /// The one place a handle becomes final: observers, waiters, dependents.
    func finishHandle(_ r: TaskRecord, _ outcome: TaskOutcome) {
        precondition(r.finalState == nil, "task \(r.id) finished twice")
        r.outcome = outcome
        r.finalState = outcome.state
        unfinishedCount -= 1
        if startLog != nil { startLog!.finished(r.id) }
        for o in finishObservers { o.taskFinished(r.id, outcome: outcome, engine: self) }
        if let sink = finishSink, !keptQuickly(r, outcome) {
            let f = facts(of: r)
            sink._withUnsafeGuaranteedRef { $0.taskFinished(r.id, outcome: outcome, facts: f, engine: self) }
        }
        let first = r.waiter
        let more = r.moreWaiters
        r.waiter = nil
        r.moreWaiters = []
        first?.taskFinished(r.id, engine: self)
        for w in more { w.taskFinished(r.id, engine: self) }
        let dependents = r.dependents
        r.dependents = []
        for d in dependents {
            if let dr = record(d) { dependencyFinished(dr, r, outcome.state) }
        }
    }

    private func dependencyFinished(_ r: TaskRecord, _ dep: TaskRecord, _ state: TaskState) {
        guard !r.state.isFinal, r.finalState == nil, !cancellingAll else { return }
        guard !r.condition.failsEarly(on: state) else {
            cancelWork(r, dependencyFailure(r, dep, state))
            return
        }
        if r.lifecycle.dependencyEnded(succeeded: state == .succeeded) { dependenciesSettled(r) }
    }

    /// Every dependency is final: `when = "failure"` needs one that failed.
    func dependenciesSettled(_ r: TaskRecord) {
        guard r.condition == .failure, !r.lifecycle.dependencyFailed, !r.after.isEmpty else { return tryMakeReady(r) }
        if r.after.count == 1, let dep = record(r.after[0]) { return cancelWork(r, dependencyFailure(r, dep, .succeeded)) }
        var failure = TaskFailure(.dependency,
                                  "task '\(r.name)' did not run: all \(r.after.count) dependencies succeeded (when = \"failure\")")
        failure.summary = "skipped: all \(r.after.count) dependencies succeeded"
        failure.conditionUnmet = true
        cancelWork(r, failure)
    }

    func dependencyFailure(_ r: TaskRecord, _ dep: TaskRecord, _ state: TaskState) -> TaskFailure {
        let what = switch state {
        case .succeeded: "succeeded"
        case .cancelled: "was cancelled"
        case .skipped: "was skipped"
        default: "failed"
        }
        var failure = TaskFailure(.dependency,
                                  "task '\(r.name)' did not run: dependency '\(dep.name)' \(what) (when = \"\(r.condition.rawValue)\")")
        failure.summary = "skipped: dependency '\(dep.name)' \(what)"
        failure.conditionUnmet = true
        return failure
    }

    /// Cancels every handle that is not final (Ctrl-C, `tasker.exit`, a
    /// failed main chunk).
    public func cancelAll(reason: String) {
        // A dependent is cancelled for the same reason, not skipped because
        // its dependency was cancelled first.
        cancellingAll = true
        defer { cancellingAll = false }
        for case let r? in records where r.finalState == nil {
            var failure = TaskFailure(.cancelled, "task '\(r.name)' was cancelled: \(reason)")
            failure.summary = "cancelled: \(reason)"
            cancel(r, failure)
        }
    }

    /// Fails every handle that is not final with `failure` (a deadlock that
    /// had to be broken).
    public func failAll(_ failure: TaskFailure) {
        for case let r? in records where r.finalState == nil {
            var f = failure
            f.message = "task '\(r.name)': \(failure.message)"
            cancel(r, f)
        }
    }

    /// Called when nothing else can happen: tasks that were never started
    /// can never start now, so they end cancelled (and their dependents with
    /// them); so do paused tasks, since nothing is left to resume them
    /// (they are not stuck on each other: no deadlock). Returns whether
    /// anything changed.
    @discardableResult
    public func settleIdle() -> Bool {
        if releaseAllHeld() { return true }
        var changed = false
        for case let r? in records where r.finalState == nil && r.lifecycle.isPaused {
            var failure = TaskFailure(.cancelled, "task '\(r.name)' was paused and nothing left in the run could resume it")
            failure.summary = "paused, and never resumed"
            cancel(r, failure)
            changed = true
        }
        if changed { return true }
        for case let r? in records where r.finalState == nil && !r.lifecycle.startRequested && r.state == .waiting {
            var failure = TaskFailure(.cancelled, "task '\(r.name)' was never started")
            failure.summary = "never started"
            cancel(r, failure)
            changed = true
        }
        return changed
    }
}

/// Pausing: `tasker.pause()` stops new starts; `h:pause()` keeps one task
/// from starting, or, running, stops its timeout clock (the runtime holds
/// its body at its next wait and stops its processes).
extension Engine {
    public func pauseStarts() {
        guard !startsPaused else { return }
        startsPaused = true
        mark(.startsPaused)
    }

    public func resumeStarts() {
        guard startsPaused else { return }
        startsPaused = false
        mark(.startsResumed)
        scheduleDispatch()
    }

    func mark(_ m: RunMark) {
        for o in observers { o.runMarked(m, engine: self) }
    }

    /// Pauses task `id`; false when it is final (or already paused).
    @discardableResult
    public func pause(_ id: TaskID) -> Bool {
        guard let r = record(id), r.finalState == nil, !r.state.isFinal, !r.paused else { return false }
        r.paused = true
        mark(.taskPaused(id))
        if r.inSlot, let timer = r.timeoutTimer {
            timer.cancel()
            r.timeoutTimer = nil
            let now = loop.clock.now
            r.pausedRemaining = r.deadline > now ? r.deadline - now : 0
            r.deadline = 0
        }
        return true
    }

    /// Resumes task `id` where it was; false when it was not paused.
    @discardableResult
    public func resume(_ id: TaskID) -> Bool {
        guard let r = record(id), r.paused else { return false }
        r.paused = false
        mark(.taskResumed(id))
        if let remaining = r.pausedRemaining {
            r.pausedRemaining = nil
            if r.inSlot { armTimeout(r, currentRun(r), in: remaining) }
        }
        if r.parkedWhilePaused {
            r.parkedWhilePaused = false
            if !r.state.isFinal { enqueueReady(r) }
            scheduleDispatch()
        }
        return true
    }

    public func isPaused(_ id: TaskID) -> Bool { record(id)?.paused ?? false }

    /// What pausing task `id` pauses: the task itself and, for a group, its
    /// members (nested groups' too), so `g:pause()` holds the work, not only
    /// the group's state; for a schedule, its running instance.
    public func pauseScope(_ id: TaskID) -> [TaskID] {
        guard let r = record(id) else { return [] }
        switch r.role {
        case .group(let g): return [id] + g.members.flatMap { pauseScope($0) }
        case .schedule(let s): return [id] + (s.current.map { pauseScope($0) } ?? [])
        default: return [id]
        }
    }
}

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
        guard let r = record(id), r.finalState == nil,
              let actions = r.lifecycle.pause(now: loop.clock.now) else { return false }
        mark(.taskPaused(id))
        if actions.contains(.disarmTimeout) { disarmTimeout(r) }
        return true
    }

    /// Resumes task `id` where it was; false when it was not paused.
    @discardableResult
    public func resume(_ id: TaskID) -> Bool {
        guard let r = record(id), let resumed = r.lifecycle.resume(now: loop.clock.now) else { return false }
        mark(.taskResumed(id))
        switch resumed {
        case .asItWas: break
        case .rearm(let deadline): armTimeout(r, currentRun(r), at: deadline)
        case .enqueue: pushReady(r)
        }
        return true
    }

    public func isPaused(_ id: TaskID) -> Bool { record(id)?.lifecycle.isPaused ?? false }

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

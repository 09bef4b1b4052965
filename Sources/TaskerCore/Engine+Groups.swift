/// Groups (`parallel`, `serial`) and schedules (`every`). Neither holds a
/// concurrency slot: only their members and instances do.
extension Engine {
    /// Adds a group whose members run `concurrency` at a time. With
    /// `failFast`, the first failure stops the rest and fails the group;
    /// otherwise the group waits for all and fails with the first failure in
    /// input order, if any. Its value is a `GroupValue`.
    @discardableResult
    /// `reused`: members (by index) a resumed run reuses, with their stored
    /// values; they succeed as the group starts (see `finishReusedMembers`).
    public func addGroup(_ spec: TaskSpec, members: [TaskSpec], concurrency: Int, failFast: Bool,
                         reused: [Int: TaskValue] = [:]) -> TaskID {
        addGroup(spec, members: members, concurrency: concurrency, failFast: failFast, rolling: nil, reused: reused)
    }

    func addGroup(_ spec: TaskSpec, members: [TaskSpec], concurrency: Int, failFast: Bool, rolling: RollingState?,
                  reused: [Int: TaskValue]) -> TaskID {
        var groupSpec = spec
        groupSpec.body = nil
        groupSpec.key = nil
        let g = newRecord(groupSpec)
        var memberIDs: [TaskID] = []
        memberIDs.reserveCapacity(members.count)
        var reusedByID: [TaskID: TaskValue] = [:]
        for (k, var m) in members.enumerated() {
            m.start = false
            m.key = nil
            let mr = newRecord(m)
            mr.parent = g.id
            if let value = reused[k] {
                mr.reused = true
                reusedByID[mr.id] = value
            }
            memberIDs.append(mr.id)
        }
        let state = GroupState(members: memberIDs, concurrency: concurrency, failFast: failFast)
        state.rolling = rolling
        state.reused = reusedByID
        g.role = .group(state)
        for o in addObservers { o.taskAdded(g.id, engine: self) }
        for m in memberIDs { for o in addObservers { o.taskAdded(m, engine: self) } }
        for (m, spec) in zip(memberIDs, members) where !spec.after.isEmpty {
            if let mr = record(m) { attachDependencies(mr, spec.after) }
        }
        attachDependencies(g, spec.after)
        if let reason = cancelsAdds { cancel(g.id, reason: reason) }
        return g.id
    }

    func startGroup(_ r: TaskRecord) {
        guard case .group(let g) = r.role else { return }
        announce(r, r.lifecycle.beginWithoutSlot())
        if g.members.isEmpty {
            finishWork(r, .succeeded(.group([])))
            return
        }
        finishReusedMembers(r, g)
        guard !r.state.isFinal else { return }
        if let rs = g.rolling { return startBatch(r, g, rs) }
        startMembers(r, g)
    }

    /// The members a resumed run reuses succeed with their stored values,
    /// in order, before any other starts (a rolling group's batches are
    /// then made of the others). Interceptors and reactors never see them.
    private func finishReusedMembers(_ r: TaskRecord, _ g: GroupState) {
        guard !g.reused.isEmpty else { return }
        let values = g.reused
        g.reused = [:]
        // no member starts from within these finishes: the group starts them after
        g.startingReused = true
        for m in g.members {
            guard let value = values[m], let mr = record(m), mr.finalState == nil else { continue }
            for o in observers { o.taskReused(m, engine: self) }
            finishWork(mr, .succeeded(value))
        }
        g.startingReused = false
    }

    private func startMembers(_ r: TaskRecord, _ g: GroupState) {
        while g.running < g.concurrency, g.nextToStart < g.members.count, !r.state.isFinal {
            let m = g.members[g.nextToStart]
            g.nextToStart += 1
            guard let mr = record(m), mr.finalState == nil else { continue }
            g.running += 1
            start(m)
        }
    }

    func groupMemberFinished(_ r: TaskRecord, _ member: TaskRecord) {
        guard case .group(let g) = r.role else { return }
        if g.startingReused {
            // a reused member: never started, so it holds no slot or host
            g.finished += 1
            if g.finished == g.members.count, !r.state.isFinal { finishWork(r, .succeeded(.group(g.members))) }
            return
        }
        if let rs = g.rolling { return rollingMemberFinished(r, g, rs, member) }
        g.finished += 1
        if member.lifecycle.startRequested { g.running -= 1 }
        guard !r.state.isFinal else { return }
        // A skipped member (its condition not met) is an outcome, not a failure.
        if let failure = member.outcome?.failure, member.outcome?.state != .skipped {
            let index = g.members.firstIndex(of: member.id) ?? Int.max
            if g.failFast {
                finishWork(r, .ending(with: failure))
                let stop = TaskFailure(.dependency, "group '\(r.name)' stopped: member '\(member.name)' \(member.outcome?.state == .cancelled ? "was cancelled" : "failed")")
                for m in g.members { if let mr = record(m), mr.finalState == nil { cancel(mr, stop) } }
                return
            }
            if g.firstFailure == nil || index < g.firstFailure!.index { g.firstFailure = (index, failure) }
        }
        if g.finished == g.members.count {
            if let f = g.firstFailure {
                finishWork(r, .ending(with: f.failure))
            } else {
                finishWork(r, .succeeded(.group(g.members)))
            }
            return
        }
        startMembers(r, g)
    }

    /// Adds a schedule: a new instance every `interval` seconds, the first
    /// at once; a tick is skipped while the previous instance runs. It lives
    /// until cancelled.
    @discardableResult
    public func addSchedule(_ spec: TaskSpec, interval: Double, makeInstance: @escaping (Int) -> TaskSpec) -> TaskID {
        var scheduleSpec = spec
        scheduleSpec.body = nil
        scheduleSpec.key = nil
        let s = newRecord(scheduleSpec)
        s.role = .schedule(ScheduleState(interval: interval, makeInstance: makeInstance))
        for o in addObservers { o.taskAdded(s.id, engine: self) }
        attachDependencies(s, spec.after)
        if let reason = cancelsAdds { cancel(s.id, reason: reason) }
        return s.id
    }

    func startSchedule(_ r: TaskRecord) {
        guard case .schedule(let s) = r.role else { return }
        s.firstTick = loop.clock.now
        announce(r, r.lifecycle.beginWithoutSlot())
        tick(r, s)
    }

    private func tick(_ r: TaskRecord, _ s: ScheduleState) {
        guard !r.state.isFinal else { return }
        // The previous instance still runs only if its record is there and
        // not final (a finished instance's record may have been freed).
        let busy = s.current.flatMap { record($0) }.map { $0.finalState == nil } ?? false
        // A paused schedule skips its ticks as a busy one does.
        if !busy && !r.lifecycle.isPaused {
            s.count += 1
            var spec = s.makeInstance(s.count)
            spec.name = "\(r.name)#\(s.count)"
            let instance = add(spec)
            record(instance)?.ephemeral = true
            s.current = instance
        }
        // Fixed rate from the first tick; ticks missed while busy are skipped.
        let interval = Monotonic.nanos(s.interval)
        let now = loop.clock.now
        s.ticks = max(s.ticks + 1, interval > 0 ? (now - s.firstTick) / interval + 1 : s.ticks + 1)
        r.timer = loop.schedule(at: s.firstTick &+ s.ticks &* max(interval, 1)) { [unowned self] in
            r.timer = nil
            self.tick(r, s)
        }
    }
}

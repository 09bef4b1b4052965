/// Rolling groups (`tasker.rolling`): a group whose members start batch by
/// batch, each batch once the previous one has ended (plus the pause), and
/// stop once too many failed. Within the tolerance the group succeeds (its
/// failed members say which hosts); past it, the members not started are
/// cancelled with the reason and the group fails with it once the running
/// ones have ended.
extension Engine {
    /// Adds a rolling group over `members`, `hosts[k]` being member k's host.
    /// `reused`: members (by index) a resumed run reuses (their hosts are
    /// left out of the batches).
    @discardableResult
    public func addRolling(_ spec: TaskSpec, members: [TaskSpec], hosts: [String], policy: RollingPolicy,
                           reused: [Int: TaskValue] = [:]) -> TaskID {
        precondition(members.count == hosts.count, "one host per member")
        return addGroup(spec, members: members, concurrency: Int.max, failFast: false,
                        rolling: RollingState(policy: policy, hosts: hosts), reused: reused)
    }

    /// Starts the next batch (the group has begun, nothing of it runs): the
    /// next `batch` members not already final (reused on resume, cancelled).
    func startBatch(_ r: TaskRecord, _ g: GroupState, _ rs: RollingState) {
        guard !r.state.isFinal, !rs.stopped else { return }
        var batch: [Int] = []
        while batch.count < rs.policy.batch, g.nextToStart < g.members.count {
            let k = g.nextToStart
            g.nextToStart += 1
            if let mr = record(g.members[k]), mr.finalState == nil { batch.append(k) }
        }
        guard !batch.isEmpty else { return }
        rs.pending = batch
        startPending(r, g, rs)
    }

    /// Starts the current batch's members whose host has room. A member
    /// may end within `start` (reused on resume): `starting` keeps that
    /// from ending the batch under this loop, which looks once it is done.
    func startPending(_ r: TaskRecord, _ g: GroupState, _ rs: RollingState) {
        rs.starting = true
        var started = true
        // again after a start: a member that ended within it freed its host
        while started {
            started = false
            var i = 0
            while i < rs.pending.count, !r.state.isFinal, !rs.stopped {
                let k = rs.pending[i]
                guard let mr = record(g.members[k]), mr.finalState == nil else {
                    rs.pending.remove(at: i)
                    continue
                }
                guard hostSlots.take(rs.hosts[k], limit: rs.policy.perHost) else {
                    i += 1
                    continue
                }
                rs.pending.remove(at: i)
                g.running += 1
                started = true
                start(g.members[k])
            }
        }
        rs.starting = false
        guard !r.state.isFinal, !rs.stopped else { return }
        if !rs.pending.isEmpty {
            if !hostSlots.waiting.contains(r.id) { hostSlots.waiting.append(r.id) }
        } else if g.running == 0 {
            batchEnded(r, g, rs)
        }
    }

    /// A member ended: its host is free again, failures are counted, and
    /// the group stops, goes on with its batch, or starts the next one.
    func rollingMemberFinished(_ r: TaskRecord, _ g: GroupState, _ rs: RollingState, _ member: TaskRecord) {
        g.finished += 1
        let started = member.lifecycle.startRequested
        if started {
            g.running -= 1
            if let k = g.members.firstIndex(of: member.id) { hostSlots.release(rs.hosts[k]) }
            wakeHostWaiters()
        }
        guard !r.state.isFinal else { return }
        if started, member.outcome?.failure != nil, member.outcome?.state != .skipped {
            rs.failures += 1
        }
        if rs.failures > rs.policy.maxFailures && !rs.stopped {
            stopRolling(r, g, rs)
        }
        guard !r.state.isFinal else { return }
        if g.finished == g.members.count {
            if rs.stopped {
                // Failed, as a group whose member failed is (its awaiters
                // still see kind `dependency`), not cancelled.
                finishWork(r, .failed(TaskFailure(.dependency, rs.stopMessage ?? "rolling: stopped")))
            } else {
                finishWork(r, .succeeded(.group(g.members)))
            }
            return
        }
        guard !rs.starting, !rs.stopped, g.running == 0, rs.pending.isEmpty else { return }
        batchEnded(r, g, rs)
    }

    /// Every member of the batch is final: the next one starts after the pause.
    private func batchEnded(_ r: TaskRecord, _ g: GroupState, _ rs: RollingState) {
        guard g.nextToStart < g.members.count else { return }
        if rs.policy.pause > 0 {
            r.timer = loop.schedule(after: rs.policy.pause) { [unowned self] in
                r.timer = nil
                self.startBatch(r, g, rs)
            }
        } else {
            startBatch(r, g, rs)
        }
    }

    /// Too many failures: the members not started are cancelled with the reason.
    private func stopRolling(_ r: TaskRecord, _ g: GroupState, _ rs: RollingState) {
        rs.stopped = true
        let reason = "rolling: too many failures (\(rs.failures) > \(rs.policy.maxFailures))"
        rs.stopMessage = reason
        let notStarted = rs.pending.map { g.members[$0] } + g.members[g.nextToStart...]
        rs.pending = []
        g.nextToStart = g.members.count
        for m in notStarted {
            guard let mr = record(m), mr.finalState == nil else { continue }
            var failure = TaskFailure(.cancelled, "task '\(mr.name)' was cancelled: \(reason)")
            failure.summary = "cancelled: \(reason)"
            cancel(mr, failure)
        }
    }

    /// A host has room again: groups waiting for one try their members.
    private func wakeHostWaiters() {
        guard !hostSlots.waiting.isEmpty else { return }
        let groups = hostSlots.waiting
        hostSlots.waiting = []
        for id in groups {
            guard let r = record(id), !r.state.isFinal, case .group(let g) = r.role, let rs = g.rolling else { continue }
            // a group inside its own loop looks again there
            if rs.starting { continue }
            startPending(r, g, rs)
        }
    }
}

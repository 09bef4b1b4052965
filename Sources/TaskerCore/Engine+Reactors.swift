/// Reactors: asked after a task's final attempt; their reactions run one at
/// a time per reactor, and the task's result is delivered only after them.
extension Engine {
    public func addReactor(_ r: TaskReactor) { reactors.append(r) }

    public func removeReactor(_ r: TaskReactor) {
        reactors.removeAll { $0 === r }
        coverage[ObjectIdentifier(r)] = nil
    }

    /// Puts `new` where `old` was; a running reaction of `old` finishes as is.
    public func replaceReactor(_ old: TaskReactor, with new: TaskReactor) {
        guard let index = reactors.firstIndex(where: { $0 === old }) else {
            addReactor(new)
            return
        }
        reactors[index] = new
        coverage[ObjectIdentifier(old)] = nil
    }

    func finalAttemptEnded(_ r: TaskRecord, _ outcome: TaskOutcome) {
        guard !reactors.isEmpty, !r.ownedByReaction, !r.state.isFinal else {
            finishWork(r, outcome)
            return
        }
        var chosen: [TaskReactor] = []
        for reactor in reactors {
            switch reactor.wants(r.id, outcome: outcome, engine: self) {
            case .success(true): chosen.append(reactor)
            case .success(false): break
            case .failure(let failure):
                finishWork(r, .failed(failure))
                return
            }
            if r.state.isFinal { return }
        }
        guard !chosen.isEmpty else {
            finishWork(r, outcome)
            return
        }
        // An attempt that started before a requeueing reactor's last
        // reaction ended was made with the state that reaction replaced (a
        // stale token): it is requeued without reacting again, so a storm
        // of late 401s after a refresh causes no second refresh.
        let state = ReactingState(pending: 0, outcome: outcome)
        var fresh: [TaskReactor] = []
        for reactor in chosen {
            if reactor.options.requeue, let end = coverage[ObjectIdentifier(reactor)], r.lifecycle.token <= end {
                state.requeueLimit = min(state.requeueLimit ?? Int.max, reactor.options.maxRequeues)
                state.reintercept = state.reintercept || reactor.options.reintercept
            } else {
                fresh.append(reactor)
            }
        }
        guard !fresh.isEmpty else {
            settleReactions(r, state)
            return
        }
        state.pending = fresh.count
        r.lifecycle.react(state)
        for reactor in fresh {
            for o in observers { o.taskReacting(r.id, reactor: reactor.name, engine: self) }
            join(reactor, r)
        }
    }

    private func join(_ reactor: TaskReactor, _ r: TaskRecord) {
        if let reaction = reactions[ObjectIdentifier(reactor)] {
            reaction.tasks.append(r.id)
            return
        }
        nextReaction += 1
        let reaction = Reaction(id: nextReaction, reactor: reactor, first: r.id)
        reactions[ObjectIdentifier(reactor)] = reaction
        if reactor.options.suspend { suspendAll(1) }
        if let timeout = reactor.options.timeout {
            reaction.timer = loop.schedule(after: timeout) { [unowned self] in
                reaction.timer = nil
                guard !reaction.ended else { return }
                reactor.abort(reaction, engine: self)
                self.reactionEnded(reaction, failure: TaskFailure(.reactor,
                    "reactor '\(reactor.name)' exceeded its timeout of \(formatSeconds(timeout))"))
            }
        }
        reactor.react(reaction, engine: self)
    }

    /// The end of a reaction, with the failure that fails its tasks, if any.
    public func reactionEnded(_ reaction: Reaction, failure: TaskFailure?) {
        guard !reaction.ended else { return }
        reaction.ended = true
        reaction.timer?.cancel()
        reaction.timer = nil
        let reactor = reaction.reactor
        if reactions[ObjectIdentifier(reactor)] === reaction { reactions[ObjectIdentifier(reactor)] = nil }
        if reactor.options.suspend { suspendAll(-1) }
        if failure == nil { coverage[ObjectIdentifier(reactor)] = currentToken }
        for id in reaction.tasks {
            guard let r = record(id), let state = r.lifecycle.reactions else { continue }
            state.pending -= 1
            if let failure {
                if state.failure == nil { state.failure = failure }
            } else if reactor.options.requeue {
                state.requeueLimit = min(state.requeueLimit ?? Int.max, reactor.options.maxRequeues)
                state.reintercept = state.reintercept || reactor.options.reintercept
            }
            if state.pending == 0 { settleReactions(r, state) }
        }
    }

    /// All reactions for `r` ended: fail it, run it again, or deliver.
    private func settleReactions(_ r: TaskRecord, _ state: ReactingState) {
        if let failure = state.failure {
            // a reaction stopped by an interrupt or an exit: the task is
            // cancelled with the run, as every other task is
            finishWork(r, failure.kind == .cancelled ? .cancelled(failure) : .failed(failure))
        } else if let limit = state.requeueLimit, r.lifecycle.requeues < limit {
            for o in observers {
                o.taskRequeued(r.id, attempt: r.lifecycle.attempts, outcome: state.outcome, engine: self)
            }
            if r.lifecycle.requeue(reintercept: state.reintercept).contains(.enqueue) { pushReady(r) }
        } else {
            finishWork(r, state.outcome)
        }
    }
}

extension Engine {
    /// A reactor with `suspend` holds back this engine and its peer: nothing
    /// in either starts while it runs.
    private func suspendAll(_ delta: Int) {
        suspended += delta
        peer?.suspended += delta
    }

    /// The result a reacting task holds back until its reactions end.
    public func heldOutcome(_ id: TaskID) -> TaskOutcome? { record(id)?.lifecycle.reactions?.outcome }
}

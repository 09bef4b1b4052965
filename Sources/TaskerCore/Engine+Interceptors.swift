/// The interceptor chain: registration, the decision loop run before every
/// attempt, and held batches.
extension Engine {
    public func addInterceptor(_ i: TaskInterceptor) {
        interceptors.append(i)
    }

    /// Removes an interceptor; the tasks it holds go on to the next one.
    public func removeInterceptor(_ i: TaskInterceptor) {
        release(i)
        interceptors.removeAll { $0 === i }
        batches[ObjectIdentifier(i)] = nil
    }

    /// Puts `new` where `old` was, atomically between two interceptions; the
    /// tasks `old` holds move to `new`'s batch.
    public func replaceInterceptor(_ old: TaskInterceptor, with new: TaskInterceptor) {
        guard let index = interceptors.firstIndex(where: { $0 === old }) else {
            addInterceptor(new)
            return
        }
        interceptors[index] = new
        if let batch = batches.removeValue(forKey: ObjectIdentifier(old)) {
            batch.timer?.cancel()
            batch.timer = nil
            batches[ObjectIdentifier(new)] = batch
            if !batch.tasks.isEmpty { armMaxHold(new, batch) }
        }
    }

    /// How many tasks `i` holds now.
    public func heldCount(_ i: TaskInterceptor) -> Int {
        batches[ObjectIdentifier(i)]?.tasks.count ?? 0
    }

    private func batch(for i: TaskInterceptor) -> HeldBatch {
        if let b = batches[ObjectIdentifier(i)] { return b }
        let b = HeldBatch()
        batches[ObjectIdentifier(i)] = b
        return b
    }

    /// Asks the interceptors, from where this attempt stands in the chain
    /// (a callout into user code: an interceptor may cancel this task, add
    /// others, release batches). Returns whether the task may start now;
    /// otherwise its lifecycle says where it went (held, delayed, queued
    /// behind a released batch, finished).
    func admit(_ r: TaskRecord, from chain: TaskLifecycle.Chain) -> Bool {
        guard case .from(var index) = chain else { return true }
        while index < interceptors.count {
            let i = interceptors[index]
            let batch = batch(for: i)
            let decision = i.intercept(r.id, held: batch.tasks.count, engine: self)
            if r.lifecycle.isFinished { return false }  // the interceptor cancelled it
            switch decision {
            case .execute, .force:
                if case .force = decision { index = interceptors.count } else { index += 1 }
                if !batch.tasks.isEmpty {
                    // Held tasks go first, then this one.
                    releaseBatch(i, batch, then: r, resumingAt: index)
                    return false
                }
            case .hold:
                guard interceptors.contains(where: { $0 === i }) else {
                    // It removed itself while deciding: no one would release
                    // this task. It goes on to the next interceptor (now at
                    // `index`), as what an interceptor holds does when removed.
                    continue
                }
                hold(r, in: batch, by: i)
                return false
            case .discard:
                cancelWork(r, TaskFailure(.discarded, "task '\(r.name)' was discarded by interceptor '\(i.name)'"))
                return false
            case .delay(let seconds):
                let until = loop.clock.now &+ Monotonic.nanos(seconds)
                r.lifecycle.delayAdmission(until: until, resumingAt: index)
                r.timer = loop.schedule(at: until) { [unowned self] in
                    r.timer = nil
                    self.enqueueReady(r)
                }
                return false
            case .fail(let failure):
                finishWork(r, .failed(failure))
                return false
            }
        }
        return true
    }

    private func hold(_ r: TaskRecord, in batch: HeldBatch, by i: TaskInterceptor) {
        r.lifecycle.hold(by: batch)
        batch.tasks.append(r.id)
        for o in observers { o.taskHeld(r.id, by: i.name, engine: self) }
        if batch.tasks.count == 1 {
            batch.oldestHeld = loop.clock.now
            armMaxHold(i, batch)
        }
    }

    private func armMaxHold(_ i: TaskInterceptor, _ batch: HeldBatch) {
        guard let maxHold = i.maxHold else { return }
        // Not a reason to stay alive: an otherwise idle run releases what is
        // held at once instead of waiting out `max_hold`.
        batch.timer = loop.schedule(at: batch.oldestHeld &+ Monotonic.nanos(maxHold), keepAlive: false) { [unowned self, weak i] in
            batch.timer = nil
            if let i { self.release(i) }
        }
    }

    /// Releases what `i` holds, in hold order, to the next interceptor.
    func release(_ i: TaskInterceptor) {
        guard let batch = batches[ObjectIdentifier(i)], !batch.tasks.isEmpty else { return }
        releaseBatch(i, batch, then: nil, resumingAt: 0)
    }

    /// Queues what `batch` holds to go on after `i`; then `releaser` (the
    /// task whose `execute` released it) from `releaserIndex`.
    private func releaseBatch(_ i: TaskInterceptor, _ batch: HeldBatch, then releaser: TaskRecord?,
                              resumingAt releaserIndex: Int) {
        batch.timer?.cancel()
        batch.timer = nil
        let next = (interceptors.firstIndex { $0 === i } ?? interceptors.count - 1) + 1
        var order: [TaskID] = []
        for id in batch.tasks {
            guard let h = record(id), h.lifecycle.release(resumingAt: next) else { continue }
            order.append(id)
            for o in observers { o.taskReleased(id, by: i.name, engine: self) }
        }
        batch.tasks = []
        if let releaser {
            releaser.lifecycle.queueBehindReleased(resumingAt: releaserIndex)
            order.append(releaser.id)
        }
        interceptFirst(order)
    }

    /// Releases every batch (the run would otherwise be idle). Returns
    /// whether anything was held.
    func releaseAllHeld() -> Bool {
        var any = false
        for i in interceptors where heldCount(i) > 0 {
            release(i)
            any = true
        }
        return any
    }
}

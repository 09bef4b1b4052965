/// The tasks that started since someone last looked, kept by the engine for
/// a recorder that shows which tasks are running (the journal, every 50 ms).
/// Kept here rather than told per task to an observer: an observer call is
/// two reference-count pairs and an indirect call for each of 200,000
/// tasks, a few percent of a run of no-op tasks, where appending an id is
/// a store.
struct StartLog {
    /// In start order, from `head` on (the ones before it finished already).
    private var ids: [TaskID] = []
    private var head = 0
    /// Called at the first start after a look (not again until the next):
    /// the recorder schedules its next look then.
    let wake: () -> Void
    private var woken = false

    init(wake: @escaping () -> Void) { self.wake = wake }

    mutating func started(_ id: TaskID) {
        ids.append(id)
        guard !woken else { return }
        woken = true
        wake()
    }

    /// Most tasks end before the next look, in the order they started (a
    /// batch started in one turn ends in the next) or at once (a task that
    /// never waits): the look need not see them (it saw 180,000 of a run of
    /// 200,000 no-op tasks, most of it cache misses).
    @inline(__always)
    mutating func finished(_ id: TaskID) {
        let n = ids.count
        guard head < n else { return }
        if ids[head] == id {
            head += 1
            if head == n {
                ids.removeAll(keepingCapacity: true)
                head = 0
            }
        } else if ids[n - 1] == id {
            ids.removeLast()
        }
    }

    /// The ids since the last look (some may have finished since), in
    /// start order; the log is empty after.
    mutating func take(into out: inout [TaskID]) {
        out.removeAll(keepingCapacity: true)
        out.append(contentsOf: ids[head...])
        ids.removeAll(keepingCapacity: true)
        head = 0
        woken = false
    }
}

extension Engine {
    /// Keeps the tasks that start (at their first attempt) for
    /// `takeStarted`; `wake` is called at the first start after each take.
    public func keepStartLog(wake: @escaping () -> Void) {
        startLog = StartLog(wake: wake)
    }

    /// The tasks that started since the last call, in start order; some
    /// may have finished since (most that did are left out).
    public func takeStarted(into out: inout [TaskID]) {
        guard startLog != nil else { return out.removeAll() }
        startLog!.take(into: &out)
    }
}

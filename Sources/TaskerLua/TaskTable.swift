import TaskerCore

/// A map from task id to value backed by an array: ids are dense and
/// assigned in order, so this beats hashing on the per-task path.
struct TaskTable<Value> {
    private var slots: [Value?] = []

    subscript(id: TaskID) -> Value? {
        get { id < slots.count ? slots[id] : nil }
        set {
            if id >= slots.count {
                guard newValue != nil else { return }
                slots.append(contentsOf: repeatElement(nil, count: max(id + 1 - slots.count, slots.count)))
            }
            slots[id] = newValue
        }
    }
}

import DequeModule
import HeapModule

/// Tasks ready to start: highest priority first, then in the order they
/// became ready (add order for first attempts). One FIFO per priority; the
/// highest one is kept outside the dictionary, so the common case (all at
/// one priority) costs a deque append and a pop per task.
struct ReadyQueue {
    private var topPriority = 0
    private var top = Deque<TaskID>()
    private var others: [Int: Deque<TaskID>] = [:]
    private var otherPriorities = Heap<Int>()

    var isEmpty: Bool { top.isEmpty }

    mutating func push(_ id: TaskID, priority: Int) {
        if top.isEmpty || priority == topPriority {
            topPriority = priority
            top.append(id)
        } else if priority > topPriority {
            stash(topPriority, top)
            topPriority = priority
            top = [id]
        } else {
            if others[priority] == nil { otherPriorities.insert(priority) }
            others[priority, default: []].append(id)
        }
    }

    mutating func pop() -> TaskID? {
        guard let id = top.popFirst() else { return nil }
        if top.isEmpty, let next = otherPriorities.popMax() {
            topPriority = next
            top = others.removeValue(forKey: next) ?? []
        }
        return id
    }

    private mutating func stash(_ priority: Int, _ queue: Deque<TaskID>) {
        if others[priority] == nil { otherPriorities.insert(priority) }
        others[priority, default: []].append(contentsOf: queue)
    }
}

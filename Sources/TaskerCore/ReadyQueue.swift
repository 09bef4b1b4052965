import DequeModule
import HeapModule

/// Tasks ready to start: highest priority first, then in add order (task
/// ids grow with it), so a dependent released by its dependency starts
/// before tasks added after it: a pipeline makes depth-first progress and
/// an interrupted run leaves whole chains finished. One `ReadyLane` per
/// priority; the highest one is kept outside the dictionary, so the common
/// case (all at one priority, ready in add order) costs a deque append and
/// a pop per task.
struct ReadyQueue {
    private var topPriority = 0
    private var top = ReadyLane()
    private var others: [Int: ReadyLane] = [:]
    private var otherPriorities = Heap<Int>()

    var isEmpty: Bool { top.isEmpty }

    mutating func push(_ id: TaskID, priority: Int) {
        if top.isEmpty || priority == topPriority {
            topPriority = priority
            top.push(id)
        } else if priority > topPriority {
            stash(topPriority, top)
            topPriority = priority
            top = ReadyLane()
            top.push(id)
        } else {
            if others[priority] == nil { otherPriorities.insert(priority) }
            others[priority, default: ReadyLane()].push(id)
        }
    }

    mutating func pop() -> TaskID? {
        guard let id = top.pop() else { return nil }
        if top.isEmpty, let next = otherPriorities.popMax() {
            topPriority = next
            top = others.removeValue(forKey: next) ?? ReadyLane()
        }
        return id
    }

    private mutating func stash(_ priority: Int, _ lane: ReadyLane) {
        if others[priority] == nil {
            otherPriorities.insert(priority)
            others[priority] = lane
        } else {
            others[priority]!.merge(lane)
        }
    }
}

/// One priority's ready tasks in add order. Most become ready in that
/// order and are appended to a sorted deque; one that becomes ready after
/// a later-added task (a dependent, a retry, a resumed pause) waits in a
/// heap, and each pop takes the lower id of the two heads.
struct ReadyLane {
    private var inOrder = Deque<TaskID>()
    private var early = Heap<TaskID>()

    var isEmpty: Bool { inOrder.isEmpty && early.isEmpty }

    mutating func push(_ id: TaskID) {
        if let last = inOrder.last, id < last {
            early.insert(id)
        } else {
            inOrder.append(id)
        }
    }

    mutating func pop() -> TaskID? {
        if let e = early.min, inOrder.first.map({ e < $0 }) ?? true {
            return early.popMin()
        }
        return inOrder.popFirst()
    }

    mutating func merge(_ other: ReadyLane) {
        var other = other
        while let id = other.pop() { push(id) }
    }
}

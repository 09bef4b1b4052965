import Testing
@testable import TaskerCore

/// Observers hear of adds unless they say they do not want them (the
/// engine then skips the call for every task).
@Suite struct ObserverTests {
    final class Counting: EngineObserver {
        let wantsAdds: Bool
        var added = 0
        var finished = 0
        init(wantsAdds: Bool) { self.wantsAdds = wantsAdds }
        var observesAdds: Bool { wantsAdds }
        func taskAdded(_ id: TaskID, engine: Engine) { added += 1 }
        func taskFinished(_ id: TaskID, outcome: TaskOutcome, engine: Engine) { finished += 1 }
    }

    @Test func anObserverThatDoesNotWantAddsIsNotToldOfThem() async {
        let counts: [Int] = await onLoop { engine, _, done in
            let yes = Counting(wantsAdds: true), no = Counting(wantsAdds: false)
            engine.observers = [yes, no]
            let ids = (1...3).map { engine.add(spec("t\($0)", ImmediateBody())) }
            let g = engine.addGroup(spec("g", nil), members: [spec("m", ImmediateBody())], concurrency: 1, failFast: false)
            engine.addWaiter(g, Watcher { _, _ in
                engine.addWaiter(ids[2], Watcher { _, _ in done([yes.added, no.added, yes.finished, no.finished]) })
            })
        }
        #expect(counts == [5, 0, 5, 5])  // three tasks, a group and its member; both hear the finishes
    }
}

import Testing
@testable import TaskerCore

/// Quick finishes (see `QuickFinish`) are kept in the engine's log for the
/// sink's owner to take, with their times and their one integer; every
/// other finish still reaches the finish sink, each once.
@Suite struct QuickFinishTests {
    final class Sink: FinishSink {
        var told: [TaskID] = []
        override func taskFinished(_ id: TaskID, outcome: TaskOutcome, facts: TaskFacts, engine: Engine) { told.append(id) }
    }

    struct Found: Sendable {
        var kept: [TaskID] = []
        var integers: [Int64?] = []
        var told: [TaskID] = []
        var timesInOrder = false
        var wakes = 0
        var fulls = 0
        var ids: [String: TaskID] = [:]
    }

    @Test func onlyQuickFinishesAreKeptAndEveryOtherReachesTheSink() async {
        let found: Found = await onLoop { engine, _, done in
            let sink = Sink()
            engine.setFinishSink(sink)
            engine.keepTimes(TickClock().source)
            var wakes = 0, fulls = 0
            engine.keepQuickFinishes(batch: 3, wake: { wakes += 1 }, full: { fulls += 1 })
            func add(_ value: Result<TaskValue, TaskFailure> = .success(.none), handedOver: Bool = true,
                     _ configure: (inout TaskSpec) -> Void = { _ in }) -> TaskID {
                engine.add(spec(nil, ImmediateBody { _ in value }) {
                    $0.identityHandedOver = handedOver
                    configure(&$0)
                })
            }
            var ids: [String: TaskID] = [:]
            ids["none"] = add()
            ids["integer"] = add(.success(.integer(-7)))
            ids["named"] = add { $0.name = "named" }
            ids["failed"] = add(.failure(TaskFailure(.error, "x")))
            ids["stored"] = add(.success(.stored(slot: 0, count: 1)))
            ids["notHandedOver"] = add(handedOver: false)
            ids["dependent"] = add { $0.after = [ids["none"]!] }
            ids["asked"] = add()
            engine.finishThroughSink(ids["asked"]!)
            ids["last"] = add()
            whenAll(Array(ids.values), engine) {
                var log: [QuickFinish] = []
                engine.takeQuickFinishes(into: &log)
                var f = Found()
                f.kept = log.map(\.id).sorted()
                f.integers = log.sorted { $0.id < $1.id }.map { $0.hasInteger ? $0.integer : nil }
                f.told = sink.told.sorted()
                f.timesInOrder = log.allSatisfy { $0.added > 0 && $0.added <= $0.started && $0.started <= $0.ended && $0.attempts == 1 }
                f.wakes = wakes
                f.fulls = fulls
                f.ids = ids
                done(f)
            }
        }
        let ids = found.ids
        #expect(found.kept == [ids["none"]!, ids["integer"]!, ids["last"]!])
        #expect(found.integers == [nil, -7, nil])
        #expect(found.told == ["named", "failed", "stored", "notHandedOver", "dependent", "asked"].map { ids[$0]! }.sorted())
        #expect(found.timesInOrder)
        #expect(found.wakes == 1 && found.fulls == 1)  // one wake until the take; full at the third
    }
}

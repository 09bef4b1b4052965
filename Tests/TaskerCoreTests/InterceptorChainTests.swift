import Testing
@testable import TaskerCore

final class ScriptedInterceptor: TaskInterceptor {
    let name: String
    let maxHold: Double?
    let decide: (TaskID, Int) -> InterceptDecision
    var asked: [TaskID] = []

    init(_ name: String, maxHold: Double? = nil, _ decide: @escaping (TaskID, Int) -> InterceptDecision) {
        self.name = name
        self.maxHold = maxHold
        self.decide = decide
    }

    func intercept(_ id: TaskID, held: Int, engine: Engine) -> InterceptDecision {
        asked.append(id)
        return decide(id, held)
    }
}

@Suite struct InterceptorChainTests {
    @Test func releasedTasksGoAheadOfTheReleaserAndOnToTheNextLink() async {
        let r: ([String], [TaskID]) = await onLoop(concurrency: 1) { engine, _, done in
            var order: [String] = []
            let batch = ScriptedInterceptor("batch") { _, held in held < 2 ? .hold : .execute }
            let after = ScriptedInterceptor("after") { _, _ in .execute }
            engine.addInterceptor(batch)
            engine.addInterceptor(after)
            let body = ImmediateBody()
            body.log = { run in order.append(engine.name(run.task)) }
            let ids = ["a", "b", "c"].map { engine.add(spec($0, body)) }
            whenAll(ids, engine) { done((order, after.asked)) }
        }
        #expect(r.0 == ["a", "b", "c"])
        #expect(r.1 == [1, 2, 3])
    }

    @Test func replacingAnInterceptorMovesItsHeldTasksToTheNewOne() async {
        let r: (Int, Int, [TaskState]) = await onLoop { engine, _, done in
            let old = ScriptedInterceptor("gate") { _, _ in .hold }
            engine.addInterceptor(old)
            let ids = (0..<3).map { _ in engine.add(spec(nil, ImmediateBody())) }
            engine.dispatch()
            let new = ScriptedInterceptor("gate") { _, held in held >= 3 ? .execute : .hold }
            engine.replaceInterceptor(old, with: new)
            let heldOld = engine.heldCount(old)
            let heldNew = engine.heldCount(new)
            let releaser = engine.add(spec(nil, ImmediateBody()))
            whenAll(ids + [releaser], engine) { done((heldOld, heldNew, (ids + [releaser]).map(engine.state))) }
        }
        #expect(r.0 == 0)
        #expect(r.1 == 3)
        #expect(r.2 == [.succeeded, .succeeded, .succeeded, .succeeded])
    }
}

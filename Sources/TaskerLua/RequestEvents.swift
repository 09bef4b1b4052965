import CLua
import CLuaShim
import Foundation
import TaskerCore
import TaskerHTTP

/// One HTTP attempt as the events file shows it (`"event": "request"`).
public struct RequestEvent: Sendable {
    /// The request's own number (not a task's id).
    public var id: TaskID
    /// The task that made it, and that task's name (nil: the main chunk).
    public var task: TaskID?
    public var taskName: String?
    public var method: String
    /// Credentials and secret query values redacted.
    public var url: String
    public var status: Int?
    /// Transport failure code (`timeout`, `connect`…) or `cancelled`.
    public var code: String?
    public var attempt: Int
    public var elapsed: Double
    /// Seconds until the next try, when one follows.
    public var retryIn: Double?
}

/// Turns the requests' engine's attempt ends into `RequestEvent`s.
final class RequestEventSource: EngineObserver {
    var observesAdds: Bool { false }
    unowned let runtime: LuaRuntime
    let sink: (RequestEvent) -> Void

    init(runtime: LuaRuntime, sink: @escaping (RequestEvent) -> Void) {
        self.runtime = runtime
        self.sink = sink
    }

    func taskRetrying(_ id: TaskID, failedAttempt: Int, failure: TaskFailure, delay: Double, engine: Engine) {
        emit(id, attempt: failedAttempt, outcome: .failed(failure), retryIn: delay, engine: engine)
    }

    func taskFinished(_ id: TaskID, outcome: TaskOutcome, engine: Engine) {
        emit(id, attempt: engine.attempts(id), outcome: outcome, retryIn: nil, engine: engine)
    }

    /// The attempt a reactor handled (a 401 before a token refresh) is one
    /// too; the next try follows the reaction at once.
    func taskRequeued(_ id: TaskID, attempt: Int, outcome: TaskOutcome, engine: Engine) {
        emit(id, attempt: attempt, outcome: outcome, retryIn: 0, engine: engine)
    }

    private func emit(_ id: TaskID, attempt: Int, outcome: TaskOutcome, retryIn: Double?, engine: Engine) {
        guard let call = runtime.http.calls[id], let url = call.shownURL else { return }
        var e = RequestEvent(id: id, method: call.method, url: url, attempt: attempt,
                             elapsed: Double(Monotonic.now() &- call.attemptStart) / 1e9, retryIn: retryIn)
        if let task = call.task {
            e.task = task
            e.taskName = runtime.engine.name(task)
        }
        switch outcome {
        case .succeeded(.swift(let response as HTTPResponse)):
            e.status = response.status
        case .succeeded:
            break
        case .failed(let f), .cancelled(let f), .skipped(let f):
            let info = f.payload as? HTTPFailureInfo
            if let status = info?.response?.status {
                e.status = status
            } else {
                e.code = info?.code?.rawValue ?? (f.kind == .cancelled || f.kind == .discarded ? "cancelled" : f.kind.rawValue)
            }
        }
        sink(e)
    }
}

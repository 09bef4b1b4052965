import Foundation
import TaskerCore

/// `--events FILE`: one JSON object per line per event, written as it
/// happens (DESIGN §3): `t` (seconds since the run started), `event`, `id`,
/// `name`, `state`, and `error` when there is one.
final class EventsWriter: EngineObserver {
    private let handle: FileHandle
    private let start = Monotonic.now()

    init(path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil),
              let handle = FileHandle(forWritingAtPath: path) else {
            throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: path])
        }
        self.handle = handle
    }

    deinit { try? handle.close() }

    private func write(_ event: String, _ id: TaskID, _ engine: Engine, extra: [String: Any] = [:]) {
        var object: [String: Any] = [
            "t": (Double(Monotonic.now() - start) / 1e6).rounded() / 1e3,
            "event": event,
            "id": id,
            "name": engine.name(id),
            "state": engine.state(id).rawValue,
        ]
        object.merge(extra) { $1 }
        guard var data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        data.append(0x0A)
        handle.write(data)
    }

    func taskAdded(_ id: TaskID, engine: Engine) { write("added", id, engine) }
    func taskStarted(_ id: TaskID, engine: Engine) { write("started", id, engine) }

    func taskProgress(_ id: TaskID, fraction: Double, message: String?, engine: Engine) {
        var extra: [String: Any] = ["fraction": fraction]
        if let message { extra["message"] = message }
        write("progress", id, engine, extra: extra)
    }

    func taskRetrying(_ id: TaskID, failedAttempt: Int, failure: TaskFailure, delay: Double, engine: Engine) {
        write("retry", id, engine, extra: ["attempt": failedAttempt, "error": failure.description, "delay": delay])
    }

    func taskHeld(_ id: TaskID, by interceptor: String, engine: Engine) {
        write("held", id, engine, extra: ["interceptor": interceptor])
    }

    func taskReleased(_ id: TaskID, by interceptor: String, engine: Engine) {
        write("released", id, engine, extra: ["interceptor": interceptor])
    }

    func taskReacting(_ id: TaskID, reactor: String, engine: Engine) {
        write("reacting", id, engine, extra: ["reactor": reactor])
    }

    /// A used file was reloaded (not a task event: no id).
    func reloaded(_ file: String) {
        var object: [String: Any] = ["t": (Double(Monotonic.now() - start) / 1e6).rounded() / 1e3, "event": "reloaded", "file": file]
        object["state"] = "reloaded"
        guard var data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return }
        data.append(0x0A)
        handle.write(data)
    }

    func taskFinished(_ id: TaskID, outcome: TaskOutcome, engine: Engine) {
        var extra: [String: Any] = [:]
        if let f = outcome.failure { extra["error"] = f.description }
        write("finished", id, engine, extra: extra)
    }
}

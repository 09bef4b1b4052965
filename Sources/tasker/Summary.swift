import Foundation
import TaskerCore
import TaskerLua

/// The end-of-run report on stderr: counts per final state (groups and
/// schedules apart), wall time, each failed task with its error and each
/// cancelled task with its reason.
struct Summary {
    let result: RunResult
    /// The slowest tasks, longest first (known when the run was recorded).
    var slowest: [(name: String, seconds: Double)] = []
    /// Longer messages are cut (a 50 MB error string is not a summary).
    static let messageLimit = 2000
    /// Cancelled tasks listed by name; past this, a count.
    static let cancelledLimit = 20

    var text: String {
        var lines: [String] = []
        if let error = result.mainError {
            let task = result.mainErrorTask.map { " (from task '\($0)')" } ?? ""
            lines.append("tasker: error\(task): \(Self.cut(error))")
        }
        let total = result.counts.values.reduce(0, +)
        let parts = [TaskState.succeeded, .failed, .cancelled].compactMap { state -> String? in
            let n = result.counts[state] ?? 0
            guard n > 0 || state != .cancelled else { return nil }
            if state == .succeeded && result.reused > 0 { return "\(n) succeeded (\(result.reused) reused)" }
            return "\(n) \(state.rawValue)"
        }
        let time = String(format: "%.2fs", result.seconds)
        var head = "tasker: \(total) task\(total == 1 ? "" : "s"): \(parts.joined(separator: ", ")) in \(time)"
        let groups = [TaskState.succeeded, .failed, .cancelled].compactMap { state -> String? in
            let n = result.groups[state] ?? 0
            return n > 0 ? "\(n) \(state.rawValue)" : nil
        }
        if !groups.isEmpty { head += " (groups and schedules: \(groups.joined(separator: ", ")))" }
        if result.signal != 0 { head += " (interrupted by \(Self.signalName(result.signal)))" }
        lines.append(head)
        for f in result.failed {
            lines.append("  failed \(f.name): \(Self.cut(f.message))")
        }
        for c in result.cancelled.prefix(Self.cancelledLimit) {
            lines.append("  \(c.name): \(Self.cut(c.message))")
        }
        if result.cancelled.count > Self.cancelledLimit {
            lines.append("  … and \(result.cancelled.count - Self.cancelledLimit) more cancelled")
        }
        // Only worth a line when something took a noticeable time.
        let slow = slowest.filter { $0.seconds >= 0.1 }
        if !slow.isEmpty {
            lines.append("  slowest: " + slow.map { "\($0.name) \(Self.duration($0.seconds))" }.joined(separator: ", "))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func duration(_ s: Double) -> String {
        s < 60 ? String(format: "%.1fs", s) : String(format: "%dm%02ds", Int(s) / 60, Int(s) % 60)
    }

    static func cut(_ message: String) -> String {
        guard message.utf8.count > messageLimit else { return message }
        let kept = String(decoding: message.utf8.prefix(messageLimit), as: UTF8.self)
        return kept + "… (\(message.utf8.count - messageLimit) more bytes)"
    }

    static func signalName(_ sig: Int32) -> String {
        switch sig {
        case SIGINT: "SIGINT"
        case SIGTERM: "SIGTERM"
        case SIGHUP: "SIGHUP"
        default: "signal \(sig)"
        }
    }

    func print() {
        StandardError.write(text)
    }
}

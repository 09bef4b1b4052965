import Foundation
import TaskerCore
import TaskerLua

/// The end-of-run report on stderr: counts per final state, wall time, and
/// each failed task with its error.
struct Summary {
    let result: RunResult

    var text: String {
        var lines: [String] = []
        if let error = result.mainError {
            lines.append("tasker: error: \(error)")
        }
        let total = result.counts.values.reduce(0, +)
        let parts = [TaskState.succeeded, .failed, .cancelled].compactMap { state -> String? in
            let n = result.counts[state] ?? 0
            return n > 0 || state != .cancelled ? "\(n) \(state.rawValue)" : nil
        }
        let time = String(format: "%.2fs", result.seconds)
        var head = "tasker: \(total) task\(total == 1 ? "" : "s"): \(parts.joined(separator: ", ")) in \(time)"
        if result.exitCode == 130 { head += " (interrupted)" }
        lines.append(head)
        for f in result.failed {
            lines.append("  failed \(f.name): \(f.message)")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    func print() {
        FileHandle.standardError.write(Data(text.utf8))
    }
}

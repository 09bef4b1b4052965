import TaskerCore

/// What each task's processes (`tasker.exec`, `tasker.sh`) wrote, kept for
/// the journal (`tasker show RUN --task NAME --output`, the report) while
/// someone records the run: per task the last `perTask` bytes, each command
/// headed by `$ command` and followed by its exit code when not 0. Only the
/// Lua thread touches it.
final class TaskOutputs {
    static let perTask = 1 << 20
    private var outputs: [TaskID: [UInt8]] = [:]
    /// Off until a journal asks (`LuaRuntime.keepTaskOutput`): nothing is
    /// kept for a run that is not recorded.
    var keeping = false

    func note(task: TaskID?, command: String, code: Int?, stdout: [UInt8], stderr: [UInt8]) {
        guard keeping, let task else { return }
        var out = outputs[task] ?? []
        // Masked before the cut below: a secret cut in half is no longer found.
        let mask = SecretMask.shared
        // one line (masked first: escaped, a secret would no longer match):
        // a newline in an argument would start a fake one
        // (a backslash doubled: a typed `\n` reads apart from an escaped newline)
        let line = String(mask.mask("$ " + command).flatMap { $0 == "\\" ? ["\\", "\\"] : [$0] })
        out += Array((TerminalText.escape(line, keepTabs: false) + "\n").utf8)
        for part in [stdout, stderr] where !part.isEmpty {
            out += mask.mask(part) ?? part
            if part.last != UInt8(ascii: "\n") { out.append(UInt8(ascii: "\n")) }
        }
        if let code, code != 0 { out += Array("(exit code \(code))\n".utf8) }
        // The end of a long output is the part that says what went wrong.
        if out.count > Self.perTask { out.removeFirst(out.count - Self.perTask) }
        outputs[task] = out
    }

    var holdsAny: Bool { !outputs.isEmpty }

    /// The task's output, given once (nil: its processes wrote nothing).
    func take(_ task: TaskID) -> [UInt8]? {
        guard !outputs.isEmpty else { return nil }  // most runs: every task, at once
        return outputs.removeValue(forKey: task)
    }
}

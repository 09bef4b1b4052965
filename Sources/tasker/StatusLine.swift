import Foundation
import TaskerCore
import TaskerLua

/// The live status line on a terminal (README, The command line): running, done/total,
/// failed, elapsed, and a bar for each running task that reports progress.
/// Redrawn at most 10 times a second by a timer that does not keep the run
/// alive; `print` output erases it first so the two never mix.
final class StatusLine: EngineObserver, @unchecked Sendable {
    // Safety: every method runs on the engine's loop thread (engine
    // callbacks, the loop timer, and `print`, which Lua calls on that
    // thread); `attach` and `finish` run before and after the loop.
    private var engine: Engine?
    private var total = 0
    private var running = 0
    private var done = 0
    private var failed = 0
    private var bars: [TaskID: (fraction: Double, message: String?)] = [:]
    private var drawnLines = 0
    private var finished = false
    private let start = Monotonic.now()
    private let color = ProcessInfo.processInfo.environment["NO_COLOR"].map { $0.isEmpty } ?? true
    static let maxBars = 5

    /// Whether a status line should be shown: stderr is a terminal.
    static var wanted: Bool { isatty(STDERR_FILENO) == 1 }

    func attach(_ engine: Engine) {
        self.engine = engine
        engine.observers.append(self)
        tick()
    }

    private func tick() {
        guard !finished, let engine else { return }
        draw()
        engine.loop.schedule(after: 0.1, keepAlive: false) { [weak self] in self?.tick() }
    }

    /// Output from the script: erase the status line, write, redraw later.
    /// Through C's stdout like Lua's own `print`, so a write error (a reader
    /// that went away) is seen and reported at the end, never a crash.
    func write(_ text: String) {
        erase()
        let out = luaStandardOutput()
        _ = text.withCString { fputs($0, out) }
        fflush(out)
    }

    /// Erases the status line for good (before the summary).
    func finish() {
        finished = true
        erase()
    }

    func taskAdded(_ id: TaskID, engine: Engine) { total += 1 }
    func taskStarted(_ id: TaskID, engine: Engine) { running += 1 }

    func taskProgress(_ id: TaskID, fraction: Double, message: String?, engine: Engine) {
        bars[id] = (fraction, message)
    }

    func taskFinished(_ id: TaskID, outcome: TaskOutcome, engine: Engine) {
        done += 1
        if outcome.state == .failed { failed += 1 }
        if engine.attempts(id) > 0, running > 0 { running -= 1 }
        bars[id] = nil
    }

    private func paint(_ text: String, _ code: String) -> String {
        color ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text
    }

    private func draw() {
        guard let engine else { return }
        let width = Self.columns()
        let elapsed = String(format: "%.1fs", Double(Monotonic.now() - start) / 1e9)
        let failedText = failed > 0 ? paint("failed \(failed)", "31") : "failed 0"
        var lines = ["tasker: running \(running) · done \(done)/\(total) · \(failedText) · \(elapsed)"]
        for (id, bar) in bars.sorted(by: { $0.key < $1.key }).prefix(Self.maxBars) {
            let cells = 20
            let filled = Int((bar.fraction * Double(cells)).rounded())
            let meter = paint(String(repeating: "#", count: filled), "32") + String(repeating: ".", count: cells - filled)
            let percent = String(format: "%3d%%", Int((bar.fraction * 100).rounded()))
            lines.append("  \(engine.name(id)) [\(meter)] \(percent) \(bar.message ?? "")")
        }
        var out = eraseSequence()
        out += lines.map { String($0.prefix(width + (color ? 20 : 0))) }.joined(separator: "\n")
        drawnLines = lines.count
        StandardError.write(out)
    }

    private func erase() {
        guard drawnLines > 0 else { return }
        StandardError.write(eraseSequence())
        drawnLines = 0
    }

    /// Moves to the start of the first drawn line and clears to the end.
    private func eraseSequence() -> String {
        guard drawnLines > 0 else { return "\r\u{1B}[2K" }
        return (drawnLines > 1 ? "\u{1B}[\(drawnLines - 1)A" : "") + "\r\u{1B}[J"
    }

    private static func columns() -> Int {
        var size = winsize()
        if ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return 100
    }
}

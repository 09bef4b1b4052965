import Foundation
import Synchronization
import TaskerCore
import TaskerLua

/// The live status line on a terminal (README, The command line): running, done/total,
/// failed, elapsed, and a bar for each running task that reports progress.
/// Redrawn at most 10 times a second by a timer that does not keep the run
/// alive; `print` output erases it first so the two never mix.
final class StatusLine: EngineObserver, Sendable {
    /// What is drawn. Engine callbacks, the loop timer and `print` all run
    /// on the loop thread; the lock makes that a checked fact rather than a
    /// promise (it is never contended, so it costs next to nothing).
    private struct State {
        var loop: EventLoop?
        /// Read on the loop, when drawing: whether starts are paused.
        var engine: LoopBound<Engine>?
        var total = 0
        var running = 0
        var done = 0
        var failed = 0
        var bars: [TaskID: (name: String, fraction: Double, message: String?)] = [:]
        /// Running tasks with their start, to name the longest-running ones.
        var runningSince: [TaskID: (name: String, since: UInt64)] = [:]
        /// The display width of each line drawn now, to know how many rows
        /// to erase if the window has narrowed since.
        var drawnWidths: [Int] = []
        var finished = false
    }

    private let state = Mutex(State())
    private let start = Monotonic.now()
    private let color = ProcessInfo.processInfo.environment["NO_COLOR"].map { $0.isEmpty } ?? true
    static let maxBars = 5

    /// Whether a status line should be shown: stderr is a terminal.
    static var wanted: Bool { isatty(STDERR_FILENO) == 1 }

    func attach(_ engine: Engine) {
        let loop = engine.loop, bound = LoopBound(engine, loop: engine.loop)
        state.withLock {
            $0.loop = loop
            $0.engine = bound
        }
        resizeTarget.withLock { $0 = loop }
        engine.observers.append(self)
        tick()
    }

    /// The window was resized (SIGWINCH): erase what was drawn for the old
    /// width and draw again for the new one at once, rather than leaving
    /// wrapped rows on screen until the next tick.
    /// The loop, for `resized` alone: the signal thread must not wait on
    /// `state`, which the loop holds while a draw is stuck on a stalled
    /// terminal (the signal thread would then read no signal at all).
    private let resizeTarget = Mutex<EventLoop?>(nil)

    func resized() {
        guard let loop = resizeTarget.withLock({ $0 }) else { return }
        loop.execute {
            self.state.withLock { s in
                guard !s.finished else { return }
                self.draw(&s)
            }
        }
    }

    private func tick() {
        let loop: EventLoop? = state.withLock { s in
            guard !s.finished, let loop = s.loop else { return nil }
            draw(&s)
            return loop
        }
        // Strong, not weak: a weak reference would give this observer a side
        // table and slow every retain of it by the engine (see JournalRecorder).
        loop?.schedule(after: 0.1, keepAlive: false) { self.tick() }
    }

    /// Output from the script: erase the status line, write, redraw later.
    /// Through C's stdout like Lua's own `print`, so a write error (a reader
    /// that went away) is seen and reported at the end, never a crash.
    func write(_ text: String) {
        state.withLock { erase(&$0) }
        let out = luaStandardOutput()
        _ = text.withCString { fputs($0, out) }
        fflush(out)
    }

    /// A line for stderr (a log line, a warning): the status line is erased
    /// first, so the two never mix; it is drawn again at the next tick.
    func writeError(_ text: String, json: Bool = false) {
        state.withLock { s in
            erase(&s)
            StandardError.write(text, json: json)
        }
    }

    /// Erases the status line for good (before the summary).
    func finish() {
        state.withLock { s in
            s.finished = true
            erase(&s)
        }
    }

    func taskAdded(_ id: TaskID, engine: Engine) { state.withLock { $0.total += 1 } }
    func taskStarted(_ id: TaskID, engine: Engine) {
        let name = Self.shown(engine.name(id)), now = Monotonic.now()
        let named = !engine.isGroupOrSchedule(id)
        state.withLock { s in
            s.running += 1
            if named { s.runningSince[id] = (name, now) }
        }
    }

    func taskProgress(_ id: TaskID, fraction: Double, message: String?, engine: Engine) {
        let name = Self.shown(engine.name(id)), message = message.map(Self.shown)
        state.withLock { $0.bars[id] = (name, fraction, message) }
    }

    /// A name or message from the script, escaped once when it arrives: a
    /// newline or ESC in it would break the line count the erase relies on
    /// or paint over the screen; a tab would break the width.
    private static func shown(_ s: String) -> String { TerminalText.escape(s, keepTabs: false) }

    func taskFinished(_ id: TaskID, outcome: TaskOutcome, engine: Engine) {
        let started = engine.attempts(id) > 0
        state.withLock { s in
            s.done += 1
            if outcome.state == .failed { s.failed += 1 }
            if started, s.running > 0 { s.running -= 1 }
            s.bars[id] = nil
            s.runningSince[id] = nil
        }
    }

    private func paint(_ text: String, _ code: String) -> String {
        color ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text
    }

    private func draw(_ s: inout State) {
        // Never the last column: a character there leaves the cursor waiting
        // to wrap, and some terminals then wrap on the next write.
        let width = max(Self.columns() - 1, 0)
        let elapsed = String(format: "%.1fs", Double(Monotonic.now() - start) / 1e9)
        let failedText = s.failed > 0 ? paint("failed \(s.failed)", "31") : "failed 0"
        var head = "tasker: running \(s.running) · done \(s.done)/\(s.total) · \(failedText) · \(elapsed)"
        if s.engine?.value.startsPaused == true { head += " · " + paint("paused (SIGUSR2 resumes)", "33") }
        head += Self.longestRunning(s.runningSince, room: width - TerminalWidth.of(head))
        var lines = [head]
        for (_, bar) in s.bars.sorted(by: { $0.key < $1.key }).prefix(Self.maxBars) {
            let cells = 20
            let filled = Int((bar.fraction * Double(cells)).rounded())
            let meter = paint(String(repeating: "#", count: filled), "32") + String(repeating: ".", count: cells - filled)
            let percent = String(format: "%3d%%", Int((bar.fraction * 100).rounded()))
            lines.append("  \(bar.name) [\(meter)] \(percent) \(bar.message ?? "")")
        }
        // Masked before it is clipped: a secret cut in half is no longer found.
        lines = lines.map { TerminalWidth.clip(SecretMask.shared.mask($0), to: width) }
        let out = eraseSequence(s) + lines.joined(separator: "\n")
        s.drawnWidths = lines.map { TerminalWidth.of($0) }
        StandardError.write(out)
    }

    /// ` · build 12.3s, test 3.4s, +2` — the longest-running tasks first,
    /// as many as fit in `room` columns.
    static func longestRunning(_ running: [TaskID: (name: String, since: UInt64)], room: Int) -> String {
        guard !running.isEmpty, room > 12 else { return "" }
        let now = Monotonic.now()
        let oldest = running.values.sorted { $0.since < $1.since }
        var out = " · "
        var shown = 0
        for t in oldest.prefix(8) {
            let item = "\(t.name) \(String(format: "%.1fs", Double(now &- t.since) / 1e9))"
            let more = oldest.count - shown - 1
            let tail = more > 0 ? ", +\(more)" : ""
            guard TerminalWidth.of(out + item) + (shown > 0 ? 2 : 0) + tail.count <= room else { break }
            out += (shown > 0 ? ", " : "") + item
            shown += 1
        }
        guard shown > 0 else { return "" }
        if oldest.count > shown { out += ", +\(oldest.count - shown)" }
        return out
    }

    private func erase(_ s: inout State) {
        guard !s.drawnWidths.isEmpty else { return }
        StandardError.write(eraseSequence(s))
        s.drawnWidths = []
    }

    /// Moves to the start of the first row drawn and clears to the end of
    /// the screen. Rows, not lines: a window narrowed since the last draw
    /// may have wrapped a line onto several rows.
    private func eraseSequence(_ s: State) -> String {
        guard !s.drawnWidths.isEmpty else { return "\r\u{1B}[2K" }
        let rows = TerminalWidth.rows(of: s.drawnWidths, columns: Self.columns())
        return (rows > 1 ? "\u{1B}[\(rows - 1)A" : "") + "\r\u{1B}[J"
    }

    private static func columns() -> Int {
        var size = winsize()
        if ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        return 100
    }
}

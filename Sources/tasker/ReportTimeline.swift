import Foundation
import TaskerJournal

/// The report's timeline and the chart above it, across the page's width.
/// Shapes live in an inner SVG whose `units` stretch to the width
/// (`preserveAspectRatio="none"`, lines keep their stroke); names, ticks and
/// mark labels sit in the outer SVG at percentages of the width, so text
/// keeps its size whatever the window. Pauses are shaded bands (the whole
/// run's across every row, a task's on its row) and the interrupt a line.
extension HTMLReport {
    static let units = 1000.0
    static let labelUnits = 220.0
    static let rightUnits = 30.0
    static let row = 18.0

    /// Where second `t` of the run is, in inner units.
    func x(_ t: Double) -> Double {
        Self.labelUnits + t * (Self.units - Self.labelUnits - Self.rightUnits) / end
    }

    /// Inner units as a percentage of the width, for text in the outer SVG.
    func pct(_ units: Double) -> String { String(format: "%.2f%%", units / Self.units * 100) }

    var timeline: String {
        let shown = summary.timelineTasks
        var note = ""
        if summary.isSampled {
            let reused = summary.counts["reused"] ?? 0
            note = "<p class=\"note\">\(summary.workCount) tasks\(reused > 0 ? " (\(reused) reused from an earlier run, not drawn)" : ""): showing \(shown.count) (failed, retried, held and unfinished first, then the slowest); the chart above counts them all.</p>"
        }
        var s = "<section><h2>Timeline</h2>" + concurrencyChart + note
        s += "<div class=\"legend\"><span class=\"k ok\"></span>succeeded <span class=\"k fail\"></span>failed attempt <span class=\"k cancel\"></span>cancelled <span class=\"k held\"></span>held <span class=\"k reuse\"></span>reused <span class=\"k gap\"></span>retry gap"
        if !marks.runPauses.isEmpty || !marks.taskPauses.isEmpty { s += " <span class=\"k paused\"></span>paused" }
        if marks.stop != nil { s += " <span class=\"k stop\"></span>interrupted" }
        s += "</div>"
        if shown.isEmpty { return s + "<p class=\"note\">No tasks.</p></section>" }
        let height = Double(shown.count) * Self.row + 30
        let axisY = height - 22
        var shapes = "", text = ""
        axis(axisY, &shapes, &text)
        pauseBands(marks.runPauses, y: 0, height: axisY, &shapes)
        for (i, t) in shown.enumerated() {
            row(t, y: Double(i) * Self.row, &shapes, &text)
        }
        stopLine(top: 0, bottom: axisY, label: true, &shapes, &text)
        s += "<svg class=\"timeline\" width=\"100%\" height=\"\(Int(height))\" role=\"img\" aria-label=\"timeline\">"
        s += "<svg width=\"100%\" height=\"\(Int(height))\" viewBox=\"0 0 \(Int(Self.units)) \(Int(height))\" preserveAspectRatio=\"none\">"
        return s + shapes + "</svg>" + text + "</svg></section>"
    }

    /// One task's row: its name, held time, pauses, attempts and the gaps
    /// between them.
    private func row(_ t: JournalTask, y: Double, _ shapes: inout String, _ text: inout String) {
        text += "<text x=\"\(pct(Self.labelUnits - 8))\" y=\"\(f(y + 12))\" class=\"name\" text-anchor=\"end\">\(esc(short(t.name, 30)))</text>"
        if t.reused {
            shapes += "<rect x=\"\(f(Self.labelUnits))\" y=\"\(f(y + 4))\" width=\"6\" height=\"10\" class=\"reuse\"><title>\(esc(t.name)): reused from an earlier run</title></rect>"
            return
        }
        if t.held > 0, let start = t.started {
            shapes += "<rect x=\"\(f(x(start - t.held)))\" y=\"\(f(y + 6))\" width=\"\(f(max(1, x(start) - x(start - t.held))))\" height=\"6\" class=\"held\"><title>held \(History.seconds(t.held))</title></rect>"
        }
        var attempts = t.allAttempts
        if attempts.isEmpty {
            text += "<text x=\"\(pct(Self.labelUnits + 4))\" y=\"\(f(y + 12))\" class=\"notrun\">did not run (\(esc(t.state)))</text>"
        }
        // A task still running: its bar reaches the last moment seen.
        if t.state == "running", t.ended == nil, let last = attempts.indices.last { attempts[last].end = end }
        for (k, a) in attempts.enumerated() {
            if k > 0 {
                shapes += "<line x1=\"\(f(x(attempts[k - 1].end)))\" x2=\"\(f(x(a.start)))\" y1=\"\(f(y + 9))\" y2=\"\(f(y + 9))\" class=\"gap\"/>"
            }
            let last = k == attempts.count - 1
            let style = !last || t.state == "failed" ? "fail"
                : (t.state == "cancelled" ? "cancel" : (t.state == "running" ? "running" : "ok"))
            let tip = "\(t.name): attempt \(k + 1), \(History.seconds(a.end - a.start))" + (t.state == "running" && last ? " so far" : "")
                + (a.error.map { " — \($0)" } ?? "")
            shapes += "<rect x=\"\(f(x(a.start)))\" y=\"\(f(y + 3))\" width=\"\(f(max(1.5, x(a.end) - x(a.start))))\" height=\"12\" rx=\"2\" class=\"\(style)\"><title>\(esc(short(tip, 300)))</title></rect>"
        }
        // Over the bars (translucent), and no later than the task's end: a
        // task that ended while paused was not paused after.
        if let pauses = marks.taskPauses[t.id] {
            pauseBands(pauses, y: y + 1, height: Self.row - 2, until: t.ended ?? end, &shapes)
        }
    }

    private func pauseBands(_ pauses: [ReportMarks.Span], y: Double, height: Double, until last: Double? = nil,
                            _ shapes: inout String) {
        for p in pauses {
            let to = min(p.to ?? end, max(p.from, last ?? end))
            let tip = "paused \(History.seconds(p.from)) – \(p.to != nil || last != nil ? History.seconds(to) : "the end") (\(History.seconds(to - p.from)))"
            shapes += "<rect x=\"\(f(x(p.from)))\" y=\"\(f(y))\" width=\"\(f(max(1, x(to) - x(p.from))))\" height=\"\(f(height))\" class=\"paused\"><title>\(esc(tip))</title></rect>"
        }
    }

    /// The moment the run was stopped (a signal, `tasker.exit`), labelled
    /// at the top when `label`.
    private func stopLine(top: Double, bottom: Double, label: Bool, _ shapes: inout String, _ text: inout String) {
        guard let stop = marks.stop else { return }
        let why = "\(stop.detail ?? "interrupted") at \(History.seconds(stop.at))"
        shapes += "<line x1=\"\(f(x(stop.at)))\" x2=\"\(f(x(stop.at)))\" y1=\"\(f(top))\" y2=\"\(f(bottom))\" class=\"stop\"><title>\(esc(why))</title></line>"
        if label {
            text += "<text x=\"\(pct(x(stop.at) - 4))\" y=\"\(f(top + 10))\" class=\"stoplabel\" text-anchor=\"end\">\(esc(why))</text>"
        }
    }

    /// How many attempts ran at once in each of 200 slices of the run, on
    /// average over the slice (all tasks, however many): the time they held
    /// a slot (a retry's wait holds none) over the slice's length, so never
    /// above `--concurrency`. Counting every attempt that touched a slice
    /// showed 12 at concurrency 4 for short tasks; an exact count at each
    /// instant depends on the order of times recorded to the microsecond.
    private var concurrencyChart: String {
        let buckets = 200
        let slice = end / Double(buckets)
        var busy = [Double](repeating: 0, count: buckets)
        // whole slices an attempt covers: +1 from its first, -1 after its last
        var whole = [Int](repeating: 0, count: buckets + 1)
        let spans = summary.spans
        var k = 0
        while slice > 0, k + 1 < spans.count {
            let a = max(0, min(spans[k], end)), b = max(a, min(spans[k + 1] < 0 ? end : spans[k + 1], end))
            k += 2
            guard a.isFinite, b.isFinite else { continue }
            let i = bucket(a, buckets), j = bucket(b, buckets)
            if i == j {
                busy[i] += b - a
                continue
            }
            busy[i] += Double(i + 1) * slice - a
            busy[j] += b - Double(j) * slice
            if j > i + 1 {
                whole[i + 1] += 1
                whole[j] -= 1
            }
        }
        var covering = 0
        var average = [Double](repeating: 0, count: buckets)
        for i in 0..<buckets {
            covering += whole[i]
            average[i] = slice > 0 ? busy[i] / slice + Double(covering) : 0
        }
        let peak = max(average.max() ?? 0, 1e-9)
        let h = 60.0, w = (x(end) - x(0)) / Double(buckets)
        var s = "<div class=\"legend\">running at once, average per slice (peak \(String(format: "%.1f", peak)))</div>"
        s += "<svg class=\"chart\" width=\"100%\" height=\"\(Int(h + 4))\" viewBox=\"0 0 \(Int(Self.units)) \(Int(h + 4))\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"tasks running at once over time\">"
        var shapes = "", unused = ""
        pauseBands(marks.runPauses, y: 0, height: h, &shapes)
        for (k, n) in average.enumerated() where n > 0 {
            let bh = n / peak * h
            shapes += "<rect x=\"\(f(x(0) + Double(k) * w))\" y=\"\(f(h - bh))\" width=\"\(f(w + 0.3))\" height=\"\(f(bh))\" class=\"bar\"/>"
        }
        stopLine(top: 0, bottom: h, label: false, &shapes, &unused)
        return s + shapes + "</svg>"
    }

    /// The slice of moment `t` (clamped: a bad time stays on the chart).
    private func bucket(_ t: Double, _ buckets: Int) -> Int {
        let x = t / end * Double(buckets)
        guard x.isFinite, x > 0 else { return 0 }
        return x >= Double(buckets - 1) ? buckets - 1 : Int(x)
    }

    private func axis(_ y: Double, _ shapes: inout String, _ text: inout String) {
        let step = niceStep(end / 8)
        var t = 0.0
        // Ticks up to the end; one past it would sit in the margin.
        while t <= end * 1.0001 {
            let at = x(t)
            shapes += "<line x1=\"\(f(at))\" x2=\"\(f(at))\" y1=\"0\" y2=\"\(f(y))\" class=\"grid\"/>"
            text += "<text x=\"\(pct(at))\" y=\"\(f(y + 14))\" class=\"tick\" text-anchor=\"middle\">\(History.seconds(t))</text>"
            t += step
        }
    }

    private func niceStep(_ raw: Double) -> Double {
        guard raw > 0 else { return 1 }
        let p = pow(10, floor(log10(raw)))
        for m in [1.0, 2, 5, 10] where m * p >= raw { return m * p }
        return 10 * p
    }
}

/// A run's marks as the report draws them: pause spans of the whole run
/// and of each task (a pause still on at the end has no `to`), and the
/// first stop.
struct ReportMarks {
    struct Span {
        var from: Double
        var to: Double?
    }

    private(set) var runPauses: [Span] = []
    private(set) var taskPauses: [Int: [Span]] = [:]
    private(set) var stop: JournalMark?
    /// The end of what failed tasks' processes wrote, by task id.
    private(set) var failedOutputs: [Int: String] = [:]
    static let outputShown = 4000

    mutating func add(_ m: JournalMark) {
        switch m.kind {
        case .paused where m.task == 0:
            if !Self.open(&runPauses, m.at), runPauseOpen == nil {
                runPauseOpen = m.at
                runPausesNotDrawn += 1
            }
        case .resumed where m.task == 0:
            if !Self.close(&runPauses, m.at), let from = runPauseOpen {
                runPausedBeyond += max(0, m.at - from)
                runPauseOpen = nil
            }
        case .paused:
            _ = Self.open(&taskPauses[m.task, default: []], m.at)
        case .resumed:
            _ = Self.close(&taskPauses[m.task, default: []], m.at)
        case .interrupted:
            if stop == nil { stop = m }
        case .failedOutput:
            // the end of it, for the first tasks with errors
            guard let text = m.detail, failedOutputs.count < ReportSummary.errorRows else { return }
            failedOutputs[m.task] = String(text.suffix(Self.outputShown))
        case .output:
            break
        }
    }

    /// Spans kept per row (or for the run), so a script pausing in a loop
    /// cannot grow the page; the run's paused time counts them all.
    static let spansKept = 100
    /// The run's pauses past `spansKept`: how many, and how long in all.
    private(set) var runPausesNotDrawn = 0
    private(set) var runPausedBeyond = 0.0
    private var runPauseOpen: Double?

    /// Seconds the run's starts were paused, every pause counted (one
    /// still on at `end` lasts until then).
    func runPaused(end: Double) -> Double {
        runPauses.reduce(runPausedBeyond) { $0 + (($1.to ?? end) - $1.from) } + (runPauseOpen.map { end - $0 } ?? 0)
    }

    private static func open(_ spans: inout [Span], _ at: Double) -> Bool {
        if let last = spans.last, last.to == nil { return true }
        guard spans.count < spansKept else { return false }
        spans.append(Span(from: at))
        return true
    }

    private static func close(_ spans: inout [Span], _ at: Double) -> Bool {
        guard let last = spans.indices.last, spans[last].to == nil else { return false }
        spans[last].to = max(at, spans[last].from)
        return true
    }
}

import Foundation
import TaskerJournal

/// One recorded run as a self-contained HTML page (inline CSS and SVG, no
/// script, no network): the summary, a timeline of the tasks' attempts
/// (retry gaps, held time, reuse), the dependency graph, the tasks with
/// errors and the slowest ones, and HTTP requests per host. It draws a
/// `ReportSummary`, so its size does not grow with the run: past
/// `ReportSummary.timelineRows` tasks the timeline shows the ones worth
/// seeing and a concurrency chart of them all, and says so.
struct HTMLReport {
    let run: JournalRun
    let summary: ReportSummary
    let requests: [JournalHostRequests]
    /// Pauses and the stop, drawn on the timeline.
    var marks = ReportMarks()

    var html: String {
        var out = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>tasker run \(esc(run.id)) · \(esc(fileName))</title>
            <style>\(Self.css)</style></head><body>
            """
        out += header
        out += timeline
        out += graph
        out += taskTables
        out += http
        out += "<footer>tasker report · run \(esc(run.id)) · \(esc(run.pipeline))</footer></body></html>\n"
        return out
    }

    private var fileName: String { (run.pipeline as NSString).lastPathComponent }
    /// The run's length, or the last moment a task was seen (a run still
    /// going, or one whose clock went wrong); never 0, it divides.
    var end: Double { max(run.duration ?? 0, summary.lastMoment, 0.001) }

    // MARK: summary

    private var header: String {
        let exit = run.exitCode.map { $0 < 0 ? "died" : String($0) } ?? "running"
        let ok = run.exitCode == 0
        var s = "<header><h1>\(esc(fileName)) <span class=\"run\">run \(esc(run.id))</span></h1>"
        s += "<p class=\"meta\">\(esc(run.pipeline)) · started \(History.localTime(run.started))"
        if !run.args.isEmpty { s += " · args <code>\(esc(run.args.joined(separator: " ")))</code>" }
        if let from = run.resumedFrom { s += " · resumed from \(esc(from))" }
        let paused = marks.runPaused(end: end)
        if paused > 0 {
            let count = marks.runPauses.count + marks.runPausesNotDrawn
            s += " · paused \(History.seconds(paused)) (\(count) time\(count == 1 ? "" : "s")"
                + (marks.runPausesNotDrawn > 0 ? ", the first \(marks.runPauses.count) drawn)" : ")")
        }
        if let stop = marks.stop { s += " · stopped by \(esc(stop.detail ?? "an interrupt")) at \(History.seconds(stop.at))" }
        s += "</p><div class=\"cards\">"
        s += card("exit code", exit, ok ? "good" : "bad")
        s += card("duration", run.duration.map(History.seconds) ?? "-", "")
        s += card("tasks", String(summary.workCount), "")
        for (state, style) in [("succeeded", "good"), ("reused", "reuse"), ("failed", "bad"), ("cancelled", "warn"),
                               ("skipped", ""), ("running", "")] {
            if let n = summary.counts[state], n > 0 { s += card(state, String(n), style) }
        }
        if summary.retried > 0 { s += card("retried", String(summary.retried), "warn") }
        return s + "</div></header>"
    }

    private func card(_ label: String, _ value: String, _ style: String) -> String {
        "<div class=\"card \(style)\"><div class=\"value\">\(esc(value))</div><div class=\"label\">\(esc(label))</div></div>"
    }

    // MARK: dependency graph

    private var graph: String {
        guard !summary.linked.isEmpty else {
            return "<section><h2>Dependencies</h2><p class=\"note\">No task waits on another (no <code>after</code>).</p></section>"
        }
        let nodes = summary.graphNodes
        var note = ""
        if summary.linked.count > nodes.count {
            note = "<p class=\"note\">\(summary.linked.count) tasks have dependencies: showing the first \(nodes.count).</p>"
        }
        let byID = Dictionary(nodes.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        // Layer = the longest chain of dependencies before the task. Ids
        // only point back (a task waits on tasks added before it), so one
        // pass in id order settles every layer.
        var layer: [Int: Int] = [:]
        for t in nodes.sorted(by: { $0.id < $1.id }) {
            layer[t.id] = t.after.compactMap { byID[$0] == nil || $0 >= t.id ? nil : layer[$0].map { $0 + 1 } }.max() ?? 0
        }
        let columns = Dictionary(grouping: nodes, by: { layer[$0.id] ?? 0 })
        let colWidth = 190.0, rowHeight = 34.0, boxW = 160.0, boxH = 24.0
        let maxRows = columns.values.map(\.count).max() ?? 1
        let width = Double((columns.keys.max() ?? 0) + 1) * colWidth + 20
        let height = Double(maxRows) * rowHeight + 20
        var position: [Int: (Double, Double)] = [:]
        for (c, list) in columns {
            for (r, t) in list.enumerated() { position[t.id] = (10 + Double(c) * colWidth, 10 + Double(r) * rowHeight) }
        }
        var s = "<section><h2>Dependencies</h2>\(note)<div class=\"scroll\"><svg class=\"graph\" viewBox=\"0 0 \(Int(width)) \(Int(height))\" width=\"\(Int(width))\" height=\"\(Int(height))\" role=\"img\" aria-label=\"dependency graph\">"
        s += "<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" class=\"arrowhead\"/></marker></defs>"
        for t in nodes {
            guard let (x2, y2) = position[t.id] else { continue }
            for d in t.after {
                guard let (x1, y1) = position[d] else { continue }
                s += "<path d=\"M \(f(x1 + boxW)) \(f(y1 + boxH / 2)) C \(f(x1 + boxW + 20)) \(f(y1 + boxH / 2)), \(f(x2 - 20)) \(f(y2 + boxH / 2)), \(f(x2)) \(f(y2 + boxH / 2))\" class=\"edge\" marker-end=\"url(#arrow)\"/>"
            }
        }
        for t in nodes {
            guard let (x, y) = position[t.id] else { continue }
            let style = t.reused ? "reuse" : ["succeeded": "ok", "failed": "fail", "skipped": "skip"][t.state] ?? "cancel"
            s += "<g><rect x=\"\(f(x))\" y=\"\(f(y))\" width=\"\(f(boxW))\" height=\"\(f(boxH))\" rx=\"5\" class=\"node \(style)\"><title>\(esc(t.name)): \(esc(t.reused ? "reused" : t.state))</title></rect>"
            s += "<text x=\"\(f(x + boxW / 2))\" y=\"\(f(y + 16))\" text-anchor=\"middle\" class=\"nodelabel\">\(esc(short(t.name, 22)))</text></g>"
        }
        return s + "</svg></div></section>"
    }

    // MARK: tables

    /// The end of what a failed task's processes wrote, folded under its
    /// error (no script: `<details>` opens it).
    private func outputDetails(_ id: Int) -> String {
        guard let text = marks.failedOutputs[id], !text.isEmpty else { return "" }
        return "<details><summary>output (the last \(ReportMarks.outputShown / 1000) KB; all of it: tasker show \(esc(run.id)) --task \(id) --output)</summary><pre>\(esc(text))</pre></details>"
    }

    private var taskTables: String {
        var s = "<section><h2>Tasks with errors</h2>"
        let bad = summary.failures
        if bad.isEmpty {
            let running = summary.counts["running"] ?? 0
            s += "<p class=\"note\">None: every task \(running > 0 ? "that finished " : "")succeeded.</p>"
        } else {
            s += "<table><thead><tr><th>task</th><th>state</th><th>attempts</th><th>duration</th><th>error</th></tr></thead><tbody>"
            for t in bad {
                let state = t.errorKind == "lost" ? "lost" : t.state
                s += "<tr class=\"\(esc(t.state))\"><td>\(esc(short(t.name, 200)))</td><td><span class=\"pill \(esc(t.state))\">\(esc(state))</span></td><td>\(t.attempts)</td><td>\(t.duration.map(History.seconds) ?? "-")</td><td class=\"error\">\(esc(short(t.error ?? "", 1500)))\(outputDetails(t.id))</td></tr>"
            }
            s += "</tbody></table>"
            if summary.failureCount > bad.count {
                s += "<p class=\"note\">… and \(summary.failureCount - bad.count) more tasks with errors (\(summary.failureCount) in all): every one is counted by its error below.</p>"
                s += errorGroups
            }
        }
        s += "</section><section><h2>Slowest tasks</h2>"
        let slowest = summary.slowest
        if slowest.isEmpty { return s + "<p class=\"note\">No task ran.</p></section>" }
        s += "<table><thead><tr><th>task</th><th>state</th><th>attempts</th><th>duration</th><th>held</th></tr></thead><tbody>"
        for t in slowest {
            s += "<tr><td>\(esc(short(t.name, 200)))</td><td><span class=\"pill \(esc(t.state))\">\(esc(t.state))</span></td><td>\(t.attempts)</td><td>\(t.duration.map(History.seconds) ?? "-")</td><td>\(t.held > 0 ? History.seconds(t.held) : "-")</td></tr>"
        }
        return s + "</tbody></table></section>"
    }

    /// Every failed and cancelled task, counted by the first line of its error.
    private var errorGroups: String {
        var s = "<h3>By error</h3><table><thead><tr><th>tasks</th><th>state</th><th>error (first line)</th><th>first task</th></tr></thead><tbody>"
        let groups = summary.groups.sorted { a, b in
            a.value.count != b.value.count ? a.value.count > b.value.count : a.value.first < b.value.first
        }
        for (error, g) in groups {
            s += "<tr><td>\(g.count)</td><td><span class=\"pill \(esc(g.state))\">\(esc(g.state))</span></td><td class=\"error\">\(error.isEmpty ? "(no message)" : esc(error))</td><td>\(esc(short(g.example, 200)))</td></tr>"
        }
        if summary.ungrouped > 0 {
            s += "<tr><td>\(summary.ungrouped)</td><td></td><td class=\"error\">(other errors)</td><td></td></tr>"
        }
        return s + "</tbody></table>"
    }

    private var http: String {
        guard !requests.isEmpty else { return "" }
        var s = "<section><h2>HTTP requests per host</h2><table><thead><tr><th>host</th><th>attempts</th><th>retries</th><th>failures</th></tr></thead><tbody>"
        for h in requests {
            s += "<tr><td>\(esc(h.host))</td><td>\(h.requests)</td><td>\(h.retries)</td><td>\(h.failures)</td></tr>"
        }
        return s + "</tbody></table></section>"
    }

    // MARK: helpers

    func f(_ x: Double) -> String { String(format: "%.1f", x) }

    func short(_ s: String, _ n: Int) -> String {
        guard s.utf8.count > n else { return s }
        let p = s.prefix(n)
        return p.endIndex == s.endIndex ? s : String(s.prefix(n - 1)) + "…"
    }

    /// Text for HTML: markup characters as entities, and control characters
    /// (which HTML does not allow) as their visible pictures (␛ for ESC).
    func esc(_ s: String) -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        for c in s.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            case "\t", "\n", "\r": out.unicodeScalars.append(c)
            case "\u{0}"..."\u{1F}": out.unicodeScalars.append(Unicode.Scalar(0x2400 + c.value) ?? "?")
            case "\u{7F}": out += "\u{2421}"
            // Direction overrides would reorder the text around them (a
            // name reading backwards): shown, not obeyed.
            case "\u{200E}", "\u{200F}", "\u{202A}"..."\u{202E}", "\u{2066}"..."\u{2069}":
                out += String(format: "[U+%04X]", c.value)
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    static let css = """
        :root{--bg:#f7f8fa;--fg:#1d2330;--muted:#697386;--card:#fff;--line:#e3e6ec;--ok:#2f9e63;--fail:#d64545;--warn:#d9902b;--reuse:#5b7bd5;--held:#b9a6e0}
        *{box-sizing:border-box}body{margin:0;padding:28px 36px;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
        h1{font-size:22px;margin:0 0 4px}h1 .run{font-weight:400;color:var(--muted);font-size:15px;margin-left:8px}
        h2{font-size:16px;margin:0 0 10px}.meta{color:var(--muted);margin:0 0 16px}code{background:#eef0f4;padding:1px 5px;border-radius:4px}
        .cards{display:flex;flex-wrap:wrap;gap:10px}.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:10px 16px;min-width:110px}
        .card .value{font-size:22px;font-weight:600}.card .label{color:var(--muted);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
        .card.good .value{color:var(--ok)}.card.bad .value{color:var(--fail)}.card.warn .value{color:var(--warn)}.card.reuse .value{color:var(--reuse)}
        section{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:16px 18px;margin:18px 0;overflow-x:auto}
        .note{color:var(--muted);margin:6px 0}.legend{color:var(--muted);font-size:12px;margin:6px 0 8px}.legend .k{display:inline-block;width:12px;height:10px;border-radius:2px;margin:0 4px 0 12px;vertical-align:middle}
        .k.ok,rect.ok{fill:var(--ok);background:var(--ok)}.k.fail,rect.fail{fill:var(--fail);background:var(--fail)}.k.cancel,rect.cancel{fill:var(--warn);background:var(--warn)}
        .k.held,rect.held{fill:var(--held);background:var(--held)}rect.running{fill:#8fb3e8}h3{font-size:14px;margin:14px 0 6px}.k.reuse,rect.reuse{fill:var(--reuse);background:var(--reuse)}.k.gap{border-top:2px dashed var(--fail);height:0}
        rect.paused,.k.paused{fill:#c9ced8;fill-opacity:.45;background:#dfe2e8}line.stop{stroke:var(--fail);stroke-width:2;stroke-dasharray:6 3}.k.stop{border-top:2px dashed var(--fail);height:0}
        text.stoplabel{fill:var(--fail);font-size:11px;font-weight:600;paint-order:stroke;stroke:#fff;stroke-width:3px}
        svg.timeline,svg.chart{min-width:760px}svg.timeline line,svg.chart line{vector-effect:non-scaling-stroke}
        line.gap{stroke:var(--fail);stroke-width:1.5;stroke-dasharray:3 3}line.grid{stroke:var(--line)}text.tick{fill:var(--muted);font-size:10px}
        text.name{fill:var(--fg);font-size:11px}text.notrun{fill:var(--muted);font-size:10px;font-style:italic}rect.bar{fill:#8fb3e8}svg{display:block}
        rect.node{stroke-width:1.5;fill-opacity:.14}rect.node.ok{stroke:var(--ok)}rect.node.fail{stroke:var(--fail)}rect.node.cancel{stroke:var(--warn)}rect.node.reuse{stroke:var(--reuse)}rect.node.skip{stroke:#8a93a3;stroke-dasharray:4 3}
        text.nodelabel{font-size:11px;fill:var(--fg)}path.edge{fill:none;stroke:#9aa3b5;stroke-width:1.2}path.arrowhead{fill:#9aa3b5}
        table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:6px 10px;border-bottom:1px solid var(--line);vertical-align:top}th{color:var(--muted);font-weight:500;font-size:12px;text-transform:uppercase}
        td.error pre{max-height:320px;overflow:auto;background:#f4f5f8;padding:8px;border-radius:6px;white-space:pre-wrap}td.error summary{cursor:pointer;color:var(--muted);font-family:system-ui,sans-serif}
        td.error{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;white-space:pre-wrap;word-break:break-word}
        .pill{padding:1px 8px;border-radius:10px;font-size:12px;background:#eef0f4}.pill.failed{background:#fbe3e3;color:var(--fail)}.pill.cancelled{background:#fbefdc;color:#a86a14}.pill.succeeded{background:#e1f4e9;color:var(--ok)}.pill.skipped{background:#eef0f4;color:#5b6472}
        footer{color:var(--muted);font-size:12px;margin-top:20px}
        """
}

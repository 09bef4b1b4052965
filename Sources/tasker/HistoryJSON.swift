import Foundation
import TaskerCore
import TaskerJournal

/// `tasker show --json` written as the tasks are read: the run's fields one
/// per line, then `tasks`, one compact object per line (any size of run in
/// little memory, and a line per task to grep).
enum HistoryJSON {
    /// `{` and the run's fields, up to the opening of `"tasks" : [`.
    static func opening(_ run: [String: Any]) -> String {
        var out = "{\n"
        for key in run.keys.sorted() {
            out += "  "
            string(key, into: &out)
            out += " : "
            value(run[key] as Any, into: &out)
            out += ",\n"
        }
        return out + "  \"tasks\" : ["
    }

    /// One task: `id`, `identity`, `name`, `state`, `attempts`, `duration`,
    /// `reused`, `error`, `kind`, `held`, and when there are some
    /// `error_kind`, `not_resumable`, `after`, `tags` (keys sorted).
    static func task(_ t: JournalTask, into out: inout String) {
        out += "{"
        if !t.after.isEmpty { out += "\"after\":[\(t.after.map(String.init).joined(separator: ","))]," }
        out += "\"attempts\":\(t.attempts),\"duration\":"
        seconds(t.duration, into: &out)
        out += ",\"error\":"
        optional(t.error, into: &out)
        if let k = t.errorKind {
            out += ",\"error_kind\":"
            string(k, into: &out)
        }
        out += ",\"held\":"
        seconds(t.held, into: &out)
        out += ",\"id\":\(t.id),\"identity\":"
        optional(t.identity, into: &out)
        out += ",\"kind\":"
        string(t.kind, into: &out)
        out += ",\"name\":"
        string(t.name, into: &out)
        if let why = t.notResumable {
            out += ",\"not_resumable\":"
            string(why, into: &out)
        }
        out += ",\"reused\":\(t.reused),\"state\":"
        string(t.state, into: &out)
        if !t.tags.isEmpty {
            out += ",\"tags\":"
            value(t.tags, into: &out)
        }
        out += "}"
    }

    /// Compact JSON of what `History.runObject` holds: strings, numbers,
    /// booleans, null, arrays and objects of them (keys sorted).
    static func value(_ v: Any, into out: inout String) {
        switch v {
        case let s as String: string(s, into: &out)
        case let b as Bool: out += b ? "true" : "false"
        case let i as Int: out += String(i)
        case let d as Double: out += d.isFinite ? String(d) : "null"
        case let a as [Any]:
            out += "["
            for (k, x) in a.enumerated() {
                if k > 0 { out += "," }
                value(x, into: &out)
            }
            out += "]"
        case let o as [String: Any]:
            out += "{"
            for (k, key) in o.keys.sorted().enumerated() {
                if k > 0 { out += "," }
                string(key, into: &out)
                out += ":"
                value(o[key] as Any, into: &out)
            }
            out += "}"
        default: out += "null"
        }
    }

    private static func optional(_ s: String?, into out: inout String) {
        if let s { string(s, into: &out) } else { out += "null" }
    }

    /// Seconds to the microsecond the journal keeps (no float noise), or
    /// null for none (and for what JSON cannot say: inf, nan).
    private static func seconds(_ d: Double?, into out: inout String) {
        guard let d, d.isFinite else {
            out += "null"
            return
        }
        out += String((d * 1e6).rounded() / 1e6)
    }

    /// `s` quoted, control characters escaped.
    static func string(_ s: String, into out: inout String) { JSONEscaping.tasker.append(s, to: &out) }
}

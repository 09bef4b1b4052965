import TaskerCore
import TaskerJournal

/// `tasker show --json` written as the tasks are read: the run's fields one
/// per line, then `tasks`, one compact object per line (any size of run in
/// little memory, and a line per task to grep). tasker's JSON form (see
/// `JSONWriter.Format.tasker`), keys in String order.
enum HistoryJSON {
    /// `{` and the run's fields, up to the opening of `"tasks" : [`.
    static func opening(_ run: [String: JSONValue]) -> String {
        var out = "{\n"
        for (key, value) in JSONKeyOrder.string.sorted(run) {
            out += "  "
            JSONEscaping.tasker.append(key, to: &out)
            out += " : "
            var w = JSONWriter(.tasker)
            w.value(value)
            out += w.text + ",\n"
        }
        return out + "  \"tasks\" : ["
    }

    /// One task: `id`, `identity`, `name`, `state`, `attempts`, `duration`,
    /// `reused`, `error`, `kind`, `held`, and when there are some
    /// `error_kind`, `not_resumable`, `after`, `tags` (keys sorted).
    static func task(_ t: JournalTask, into out: inout String) {
        var w = JSONWriter(.tasker, capacity: 256)
        w.beginObject()
        if !t.after.isEmpty {
            w.key("after")
            w.beginArray()
            for a in t.after { w.integer(a) }
            w.endArray()
        }
        w.key("attempts")
        w.integer(t.attempts)
        w.key("duration")
        seconds(t.duration, &w)
        w.key("error")
        w.string(t.error)
        if let k = t.errorKind {
            w.key("error_kind")
            w.string(k)
        }
        w.key("held")
        seconds(t.held, &w)
        w.key("id")
        w.integer(t.id)
        w.key("identity")
        w.string(t.identity)
        w.key("kind")
        w.string(t.kind)
        w.key("name")
        w.string(t.name)
        if let why = t.notResumable {
            w.key("not_resumable")
            w.string(why)
        }
        w.key("reused")
        w.bool(t.reused)
        w.key("state")
        w.string(t.state)
        if !t.tags.isEmpty {
            w.key("tags")
            w.strings(t.tags)
        }
        w.endObject()
        out += w.text
    }

    /// Seconds to the microsecond the journal keeps (no float noise), or
    /// null for none.
    private static func seconds(_ d: Double?, _ w: inout JSONWriter) {
        if let d { w.double((d * 1e6).rounded() / 1e6) } else { w.null() }
    }
}

import TaskerJournal

/// What the HTML report draws of a run, gathered as its tasks stream past
/// (one pass, whatever the size): counts, when each task ran (for the
/// chart), and a bounded choice of tasks kept as rows — every task of a
/// small run; of a large one the failed, retried, held and unfinished first,
/// then the slowest —, the first tasks with errors and all of them grouped
/// by error. Kept tasks are trimmed (long names and errors cut), so a run
/// of huge errors stays small too.
struct ReportSummary {
    static let timelineRows = 250
    static let errorRows = 1000
    static let slowestRows = 15
    static let errorGroups = 50
    static let graphNodes = 150

    /// Tasks of kind `task` (groups and schedules are not drawn as rows).
    private(set) var workCount = 0
    /// Per final state, `reused` and `running`.
    private(set) var counts: [String: Int] = [:]
    private(set) var retried = 0
    /// The latest moment any task was seen (seconds into the run).
    private(set) var lastMoment = 0.0
    /// Start and end of every attempt that ran (a retry's wait holds no
    /// slot), in pairs; end -1: still running.
    private(set) var spans: [Double] = []
    /// Every task, while there are at most `timelineRows`.
    private var all: [JournalTask]? = []
    /// The first tasks worth a row whatever their duration.
    private var notable: [JournalTask] = []
    private var slowestPlain = Longest(keep: Self.timelineRows)
    private var slowestAny = Longest(keep: Self.slowestRows)
    /// Failed and cancelled tasks: the first ones, and how many in all.
    private(set) var failures: [JournalTask] = []
    private(set) var failureCount = 0
    /// Failed and cancelled tasks by the first line of their error.
    private(set) var groups: [String: ErrorGroup] = [:]
    private(set) var ungrouped = 0
    /// Every task that waits on another or is waited on.
    private(set) var linked = Set<Int>()
    /// The graph's nodes, filled by `addGraphNode` in a second pass.
    private(set) var graphNodes: [JournalTask] = []

    struct ErrorGroup {
        var count = 0
        var state: String
        var example: String
        var first: Int
    }

    mutating func add(_ t: JournalTask) {
        lastMoment = max(lastMoment, t.ended ?? t.started ?? t.added)
        if !t.after.isEmpty {
            linked.insert(t.id)
            linked.formUnion(t.after)
        }
        guard t.kind == "task" else { return }
        workCount += 1
        counts[t.reused ? "reused" : t.state, default: 0] += 1
        if t.attempts > 1 { retried += 1 }
        let kept = t.trimmed()
        if all != nil {
            if workCount <= Self.timelineRows { all?.append(kept) } else { all = nil }
        }
        guard !t.reused else { return }
        let attempts = t.allAttempts
        for (k, a) in attempts.enumerated() {
            spans.append(a.start)
            spans.append(k == attempts.count - 1 && t.state == "running" && t.ended == nil ? -1 : a.end)
        }
        slowestAny.add(kept)
        if t.state == "succeeded" && t.attempts <= 1 && t.held == 0 {
            slowestPlain.add(kept)
        } else if notable.count < Self.timelineRows {
            notable.append(kept)
        }
        guard t.state == "failed" || t.state == "cancelled" else { return }
        failureCount += 1
        if failures.count < Self.errorRows { failures.append(kept) }
        let key = Self.firstLine(t.error ?? "", 200)
        if groups[key] != nil {
            groups[key]?.count += 1
        } else if groups.count < Self.errorGroups {
            groups[key] = ErrorGroup(count: 1, state: t.state, example: kept.name, first: t.id)
        } else {
            ungrouped += 1
        }
    }

    /// The linked tasks the graph draws: the first `graphNodes` by id.
    var graphIDs: Set<Int> { Set(linked.sorted().prefix(Self.graphNodes)) }

    /// Second pass: keeps `t` when the graph draws it.
    mutating func addGraphNode(_ t: JournalTask, of ids: Set<Int>) {
        guard ids.contains(t.id) else { return }
        var kept = t.trimmed()
        kept.after = t.after.filter(ids.contains)
        graphNodes.append(kept)
    }

    /// Whether the timeline shows a choice of the tasks, not all of them.
    var isSampled: Bool { all == nil }

    /// The tasks drawn as timeline rows, in id order.
    var timelineTasks: [JournalTask] {
        if let all { return all }
        return Array((notable + slowestPlain.tasks).prefix(Self.timelineRows)).sorted { $0.id < $1.id }
    }

    /// The slowest tasks that ran, longest first.
    var slowest: [JournalTask] { slowestAny.tasks }

    /// `s` up to its first line break, at most `n` characters.
    static func firstLine(_ s: String, _ n: Int) -> String {
        let line = s.prefix(n + 1).prefix { !$0.isNewline }
        return line.count > n ? String(line.prefix(n - 1)) + "…" : String(line)
    }
}

/// The `keep` longest tasks of a stream (ties: the earlier task), without
/// holding the stream: trimmed back to `keep` whenever it doubles.
struct Longest {
    let keep: Int
    private var items: [JournalTask] = []

    init(keep: Int) { self.keep = keep }

    mutating func add(_ t: JournalTask) {
        items.append(t)
        if items.count >= 2 * keep { trim() }
    }

    var tasks: [JournalTask] {
        var copy = self
        copy.trim()
        return copy.items
    }

    private mutating func trim() {
        items.sort { a, b in
            let da = a.duration ?? 0, db = b.duration ?? 0
            return da != db ? da > db : a.id < b.id
        }
        if items.count > keep { items.removeLast(items.count - keep) }
    }
}

extension JournalTask {
    /// A copy small enough to keep many of: long names and errors cut,
    /// at most 100 attempts, no values.
    func trimmed() -> JournalTask {
        var t = self
        t.name = Self.cut(name, 300)
        t.error = error.map { Self.cut($0, 2000) }
        t.value = nil
        t.identity = nil
        t.notResumable = nil
        t.tags = []
        t.after = []
        if !attemptLog.isEmpty {
            t.attemptLog = attemptLog.prefix(100).map { a in
                var a = a
                a.error = a.error.map { Self.cut($0, 500) }
                return a
            }
        }
        return t
    }

    /// `s` cut to about `n` characters (checked by bytes first: cheap for
    /// the usual short strings, bounded for huge ones).
    static func cut(_ s: String, _ n: Int) -> String {
        guard s.utf8.count > n else { return s }
        let p = s.prefix(n)
        return p.endIndex == s.endIndex ? s : String(p) + "…"
    }
}

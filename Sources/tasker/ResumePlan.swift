import Foundation
import TaskerCore
import TaskerJournal
import TaskerLua

/// `tasker run --resume --plan FILE`: the current file (with this command's
/// `--var`s and args) evaluated as the resume would run it, no task body
/// run: each task it adds is `reuse` (its identity succeeded in the earlier
/// run) or `run` with why. The main chunk runs (it is what adds the tasks);
/// where it would wait for a task that must run, nothing can tell what it
/// adds next: the plan says so, and lists the earlier run's tasks it did
/// not come to as that run left them.
enum ResumePlan {
    /// The plan's text and the exit code: 0, or 2 when the main chunk
    /// failed (as the resume would). A signal ends the process (128 + it).
    static func evaluate(_ path: String, options base: LuaRuntime.Options, earlier: RunJournal.Resumable) -> (text: String, code: Int32) {
        var options = base
        options.planOnly = true
        options.identify = true
        options.output = { _ in }  // the script's prints are not the plan
        let collector = Collector()
        // Ctrl-C and SIGTERM end a plan at once (nothing ran that needs
        // cleaning up), also a main chunk that never ends: a plain handler,
        // armed before the main chunk runs, and the signals unblocked on
        // this thread (a parent may have left them blocked).
        for sig in SignalWatcher.handled {
            signal(sig) { _exit(128 + $0) }
        }
        var unblocked = sigset_t()
        sigemptyset(&unblocked)
        for sig in SignalWatcher.handled { sigaddset(&unblocked, sig) }
        pthread_sigmask(SIG_UNBLOCK, &unblocked, nil)
        let result = PipelineRunner.run(path: path, options: options) { runtime in
            collector.runtime = runtime
            runtime.engine.observers.append(collector)
        }
        let shown = { (s: String) in TerminalText.escape(s) }
        var byIdentity: [String: JournalTask] = [:]
        for t in earlier.earlierTasks { if let i = t.identity { byIdentity[i] = t } }
        var lines = ["plan: resume run \(earlier.run) of \(shown(earlier.pipeline)): \(shown(path)) as it is now, evaluated without running task bodies"]
        var reuse = 0
        for t in collector.tasks {
            let reason: String?
            if t.reused {
                reason = nil
                reuse += 1
            } else if let why = t.notResumable {
                reason = "not resumable: \(why)"
            } else if let old = t.identity.flatMap({ byIdentity[$0] }) {
                reason = old.errorKind == "lost" ? "lost (the run ended while it was running)"
                    : (old.state == "succeeded" ? "succeeded, but its values were not stored" : old.state)
            } else {
                reason = "new, or changed since then"
            }
            lines.append("\(reason == nil ? "reuse" : "run  ")  \(shown(t.name))\(reason.map { "  (\(shown($0)))" } ?? "")")
        }
        if let error = result.mainError, result.planStop == nil {
            lines.append("plan: the main chunk failed: \(shown(error.split(separator: "\n").first.map(String.init) ?? error))")
        }
        var toRun = collector.tasks.count - reuse
        if let stop = result.planStop {
            lines.append("plan: incomplete: \(shown(stop)); the tasks it adds after that are not known until it runs")
            // The earlier run's tasks the evaluation did not come to, as
            // that run left them: what the resume reuses if the file adds
            // them again.
            let rest = Self.notReached(earlier.earlierTasks, by: collector.tasks)
            if !rest.isEmpty {
                lines.append("plan: the earlier run's other tasks, as it left them:")
                for t in rest {
                    let reason = Self.reason(t, earlier)
                    if reason == nil { reuse += 1 } else { toRun += 1 }
                    lines.append("\(reason == nil ? "reuse" : "run  ")  \(shown(t.name))\(reason.map { "  (\(shown($0)))" } ?? "")")
                }
            }
        }
        lines.append("plan: \(reuse) to reuse, \(toRun) to run again")
        let failed = result.mainError != nil && result.planStop == nil
        return (lines.joined(separator: "\n") + "\n", failed ? 2 : 0)
    }

    /// The earlier run's tasks that none the evaluation added stands for:
    /// one with the same identity, or else (a changed body: a new identity)
    /// the first one left with the same name, each taken once.
    static func notReached(_ earlierTasks: [JournalTask], by evaluated: [Collector.Task]) -> [JournalTask] {
        var taken = Set<Int>()
        var byIdentity: [String: Int] = [:]
        for (i, t) in earlierTasks.enumerated() { if let id = t.identity, byIdentity[id] == nil { byIdentity[id] = i } }
        var unmatched: [Collector.Task] = []
        for t in evaluated {
            if let id = t.identity, let i = byIdentity[id], !taken.contains(i) {
                taken.insert(i)
            } else {
                unmatched.append(t)
            }
        }
        var byName: [String: [Int]] = [:]
        for (i, t) in earlierTasks.enumerated().reversed() where !taken.contains(i) { byName[t.name, default: []].append(i) }
        for t in unmatched {
            if let i = byName[t.name]?.popLast() { taken.insert(i) }
        }
        return earlierTasks.enumerated().filter { !taken.contains($0.offset) }.map(\.element)
    }

    /// Why a task of the earlier run runs again, from its record (nil: it
    /// is reused).
    static func reason(_ t: JournalTask, _ earlier: RunJournal.Resumable) -> String? {
        if let why = t.notResumable { return "not resumable: \(why)" }
        if t.errorKind == "lost" || t.state == "running" { return "lost (the run ended while it was running)" }
        guard t.state == "succeeded" else { return t.state }
        guard let identity = t.identity, earlier.reuse[identity] != nil else { return "succeeded, but its values were not stored" }
        return nil
    }

    /// The tasks a plan's evaluation adds, in add order, as they end (every
    /// one ends: reused at once, the rest when the evaluation stops).
    final class Collector: EngineObserver {
        struct Task {
            var name: String
            var reused = false
            var identity: String?
            var notResumable: String?
        }

        weak var runtime: LuaRuntime?
        private var index: [TaskID: Int] = [:]
        private(set) var tasks: [Task] = []

        func taskAdded(_ id: TaskID, engine: Engine) {
            guard !engine.isGroupOrSchedule(id), !engine.isEphemeral(id) else { return }
            index[id] = tasks.count
            tasks.append(Task(name: engine.name(id)))
        }

        func taskReused(_ id: TaskID, engine: Engine) {
            if let i = index[id] { tasks[i].reused = true }
        }

        func taskFinished(_ id: TaskID, outcome: TaskOutcome, engine: Engine) {
            guard let i = index[id], let runtime else { return }
            let parts = runtime.identityParts(of: id)
            if let s = parts.explicit {
                tasks[i].identity = JournalEntry.Identity.explicit(s).text
            } else if let h = parts.hash {
                tasks[i].identity = JournalEntry.Identity.derived(h, occurrence: parts.occurrence).text
            }
            tasks[i].notResumable = parts.notResumable
        }
    }
}

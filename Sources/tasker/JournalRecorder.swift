import Foundation
import TaskerCore
import TaskerJournal
import TaskerLua

/// Turns a run's engine events into journal entries: each task when it
/// finishes (completion order), and every 50 ms the tasks that started and
/// are still running (so a run that dies shows them lost). Runs on the
/// loop and stays cheap there: compact entries, no formatting; the writer
/// thread packs and commits them.
final class JournalRecorder: FinishSink, EngineObserver {
    private let writer: JournalWriter
    /// Read per task (a stored reference: the global's lazy check is not).
    private let secrets = SecretMask.shared
    private let start = Monotonic.now()
    /// The run recorded (identities, values, tags). A strong `let`: the
    /// runtime's engine holds the recorder too (a cycle that lives as
    /// long as the process's one run), and a `let` is read without a
    /// retain per task.
    let runtime: LuaRuntime
    /// What few tasks have: held time, earlier attempts.
    private var extras: [TaskID: Extra] = [:]
    /// Tasks started since the last tick (the engine keeps them: see
    /// `Engine.keepStartLog`), a buffer kept between ticks.
    private var startedSinceTick: [TaskID] = []
    /// A few tasks recorded as running, oldest first: every `beatInterval`
    /// one still running is recorded again with how long it has run so
    /// far, so a run killed later shows how long its lost tasks (and it)
    /// really lasted, to within a beat.
    private var runningSample: [TaskID] = []
    static let beatInterval = 0.5
    private var hosts: [String: JournalHostRequests] = [:]
    /// The slowest tasks so far (for the summary), longest first, in ticks
    /// of `clock`.
    private var slowestTicks: [(name: String, ticks: UInt64)] = []
    var slowest: [(name: String, seconds: Double)] {
        let scale = clock.scale(origin: start)
        return slowestTicks.map { ($0.name, Double(scale.nanos(ticks: $0.ticks)) / 1e9) }
    }
    static let slowestKept = 5
    private var ticking = false
    /// Entries since the last tick (handed to the writer then): most as
    /// plain values, the others encoded.
    private var plain: [PlainEntry] = []
    /// Plain entries go to the writer in batches of this many (and at each
    /// tick): the buffers stay small and warm instead of growing with the
    /// run's pace.
    static let plainBatch = 4096
    /// Their values, in one buffer; it goes with them (and earlier, past
    /// this many bytes).
    private var plainValues: [UInt8] = []
    static let plainValuesBatch = 1 << 20
    /// Quick finishes taken from the engine (see `QuickFinish`), checked
    /// here and handed to the writer as they are: between takes an empty
    /// array whose storage the engine's log takes over.
    private var quick: [QuickFinish] = []
    /// Marks, encoded here.
    private var encoded: [UInt8] = []
    /// Entries that are not plain: the writer thread encodes them.
    private var entries: [JournalEntry] = []
    /// The writer thread counts derived identities' occurrences (unless the
    /// run is resumed): this thread hands it each identity as it is added.
    private let occurrencesOnWriter: Bool
    private var added = AddedIdentities()

    private struct Extra {
        var heldSince: Double?
        var held: Double = 0
        var attemptStart: Double?
        var log: [JournalAttempt] = []
    }

    /// Starts recording `runtime`'s run (before its script runs). The
    /// engine keeps each task's add and start times (no table here: the
    /// finish reads them).
    init(writer: JournalWriter, runtime: LuaRuntime) {
        self.writer = writer
        self.runtime = runtime
        let clock = TickClock()
        self.clock = clock
        source = clock.source
        occurrencesOnWriter = runtime.countOccurrencesElsewhere()
        super.init()
        plain.reserveCapacity(Self.plainBatch)
        runtime.engine.keepTimes(source)
        runtime.engine.keepStartLog { [unowned engine = runtime.engine] in self.scheduleTick(engine) }
        // Quick finishes go to the writer in batches, like plain entries.
        runtime.engine.keepQuickFinishes(batch: Self.plainBatch) { [unowned engine = runtime.engine] in
            self.scheduleTick(engine)
        } full: {
            self.submitPlain()
        }
        runtime.keepTaskOutput()
        runtime.engine.observers.append(self)
        runtime.engine.setFinishSink(self)
        runtime.observeRequests { self.request($0) }
        scheduleBeat(runtime.engine)
    }

    /// Tasks are recorded from their start (the engine's start log) or
    /// finish on.
    var observesAdds: Bool { false }
    var observesStarts: Bool { false }
    /// Finishes come through the engine's finish sink.
    var observesFinishes: Bool { false }

    /// Not keeping the loop alive: a run ends when its work does.
    private func scheduleBeat(_ engine: Engine) {
        engine.loop.schedule(after: Self.beatInterval, keepAlive: false) { [unowned engine] in
            self.beat(engine)
            self.scheduleBeat(engine)
        }
    }

    private func beat(_ engine: Engine) {
        runningSample.removeAll { engine.isFinished($0) }
        guard let id = runningSample.first else { return }
        var e = entry(id, engine.facts(id), engine, state: .running)
        e.attempts = max(1, engine.attempts(id))
        e.ended = now  // so far: the run was alive until here
        entries.append(e)
        handOver()
    }

    /// Task times, read by the engine (add, start) and here (end, from
    /// `source`: a value, nothing to retain per task).
    private let clock: TickClock
    private let source: TickSource

    private var now: Double { seconds(source.now()) }

    /// A reading of `clock` as seconds into the run (0 stays 0: unknown).
    private func seconds(_ t: UInt64) -> Double {
        t == 0 ? 0 : Double(Int64(bitPattern: clock.monotonic(t) &- start)) / 1e9
    }

    /// Marks recorded so far; past `marksKept` a script pausing in a loop
    /// records no more (the report draws 100 a row at most).
    private var marksRecorded = (run: 0, tasks: 0)
    static let marksKept = 10_000
    /// Pauses recorded and not yet ended (0: the run's starts): their end
    /// is recorded past the limit too, so no pause is drawn as endless.
    private var openPauses = Set<TaskID>()

    /// Pauses and the stop, written at once (they are few): a run killed
    /// while paused still shows the pause.
    func runMarked(_ mark: RunMark, engine: Engine) {
        switch mark {
        case .startsPaused:
            guard marksRecorded.run < Self.marksKept else { return }
            marksRecorded.run += 1
            openPauses.insert(0)
        case .taskPaused(let id):
            guard marksRecorded.tasks < Self.marksKept else { return }
            marksRecorded.tasks += 1
            openPauses.insert(id)
        case .startsResumed:
            guard openPauses.remove(0) != nil else { return }
        case .taskResumed(let id):
            guard openPauses.remove(id) != nil else { return }
        case .stopped:
            break
        }
        let m: JournalMark = switch mark {
        case .startsPaused: JournalMark(.paused, at: now)
        case .startsResumed: JournalMark(.resumed, at: now)
        case .taskPaused(let id): JournalMark(.paused, at: now, task: id)
        case .taskResumed(let id): JournalMark(.resumed, at: now, task: id)
        case .stopped(let why): JournalMark(.interrupted, at: now, detail: why)
        }
        JournalCodec.encode(m, into: &encoded)
        writer.submit(&encoded)
    }

    private func scheduleTick(_ engine: Engine) {
        guard !ticking else { return }
        ticking = true
        // Strong, not weak: a weak reference gives the recorder a side
        // table, and every retain by the engine's observer loop then takes
        // Swift's slow path (measured: a few percent of a no-op run). The
        // timer holds it at most 50 ms; keepAlive false lets the loop end.
        engine.loop.schedule(after: 0.05, keepAlive: false) { [unowned engine] in self.tick(engine) }
    }

    /// Every 50 ms while the run records: the tasks that started since the
    /// last tick and are still running, then everything to the writer.
    private func tick(_ engine: Engine) {
        ticking = false
        engine.takeStarted(into: &startedSinceTick)
        for id in startedSinceTick where !engine.isFinished(id) {
            var e = entry(id, engine.facts(id), engine, state: .running)
            e.attempts = max(1, engine.attempts(id))
            entries.append(e)
            if runningSample.count < 64 { runningSample.append(id) }
        }
        handOver()
    }

    /// Everything recorded so far to the writer.
    private func handOver() {
        submitPlain()
        writer.submit(&encoded)
        writer.submit(entries: &entries)
    }

    /// The identities added so far go first: the writer counts their
    /// occurrences before it writes an entry that needs one. Then the
    /// quick finishes, then the plain entries.
    private func submitPlain() {
        if occurrencesOnWriter {
            runtime.takeAddedIdentities(into: &added)
            writer.submit(identities: &added)
        }
        let scale = clock.scale(origin: start)
        takeQuickFinishes()
        writer.submit(quick: &quick, scale: scale)
        writer.submit(plain: &plain, values: &plainValues, scale: scale)
        plain.reserveCapacity(Self.plainBatch)
    }

    /// The engine's quick finishes into `quick`, each seen here as a
    /// finish through the sink would be: the slowest kept, output taken.
    /// (Also at the run's end, off the loop: nothing here may need it.)
    private func takeQuickFinishes() {
        let engine = runtime.engine
        engine.takeQuickFinishes(into: &quick)
        guard !quick.isEmpty else { return }
        quick.withUnsafeBufferPointer { all in
            for q in all where q.ended > q.started { noteDuration(q.id, ticks: q.ended &- q.started, engine) }
            if runtime.holdsTaskOutput {
                for q in all { recordOutput(q.id, failed: false) }
            }
        }
    }

    func taskRetrying(_ id: TaskID, failedAttempt: Int, failure: TaskFailure, delay: Double, engine: Engine) {
        engine.finishThroughSink(id)  // its attempts are recorded
        let t = now
        var x = extras[id] ?? Extra()
        let started = engine.facts(id).started
        x.log.append(JournalAttempt(start: x.attemptStart ?? (started > 0 ? seconds(started) : t), end: t,
                                    error: failure.description, kind: failure.kind.rawValue))
        x.attemptStart = t + delay
        extras[id] = x
    }

    /// The attempt's real start (the retry's planned one is only a guess:
    /// slots may all be busy then).
    func taskAttemptStarted(_ id: TaskID, attempt: Int, engine: Engine) {
        guard extras[id] != nil else { return }
        extras[id]?.attemptStart = now
    }

    func taskHeld(_ id: TaskID, by interceptor: String, engine: Engine) {
        engine.finishThroughSink(id)  // its held time is recorded
        extras[id, default: Extra()].heldSince = now
    }

    func taskReleased(_ id: TaskID, by interceptor: String, engine: Engine) {
        guard let since = extras[id]?.heldSince else { return }
        extras[id]?.held += now - since
        extras[id]?.heldSince = nil
    }

    /// The common case as a plain value, or nil when the task needs more
    /// (`spec.id`, tags, dependencies, values that cannot be stored, a held
    /// time…).
    @inline(__always)
    private func plainEntry(_ id: TaskID, _ outcome: TaskOutcome, _ f: TaskFacts, ended: UInt64,
                            _ engine: Engine) -> PlainEntry? {
        guard case .succeeded(let value) = outcome, !f.isReused, !f.isGroup,
              !f.isSchedule, !f.isEphemeral, !f.hasDependencies, extras.isEmpty || extras[id] == nil else { return nil }
        // Occurrence -1: the writer finds the identity by id and counts it
        // (the common case takes no look-up here: ~60 instructions a task).
        let d = f.identityHandedOver ? (hash: 0, occurrence: -1) : runtime.plainIdentity(of: id)
        guard d.occurrence != 0 else { return nil }
        var p = PlainEntry(id: id, state: .succeeded, attempts: f.attempts, identityHash: d.hash,
                           occurrence: d.occurrence, added: f.added, started: f.started, ended: ended)
        let valuesBefore = plainValues.count
        if f.hasExplicitName, let name = engine.explicitName(id) {
            p.nameStart = Int32(valuesBefore)
            plainValues.append(contentsOf: name.utf8)
            p.nameLength = Int32(plainValues.count - valuesBefore)
        }
        switch value {
        case .none:  // the writer thread writes these two forms
            p.valueLength = PlainEntry.noValues
        case .integer(let n):
            // the full path says why it is not stored; with no secret
            // registered, one load here (the call and the global's lazy
            // check cost ~50 instructions a task)
            guard secrets.isEmpty || !LuaRuntime.holdsSecret(n) else { return nil }
            p.valueLength = PlainEntry.loneInteger
            p.integer = n
        default:
            let start = plainValues.count
            // Values that cannot be stored take the full path, which says why.
            guard runtime.appendStorableValues(value, to: &plainValues) else {
                plainValues.removeSubrange(valuesBefore...)
                return nil
            }
            p.valueStart = Int32(start)
            p.valueLength = Int32(plainValues.count - start)
        }
        return p
    }

    /// The parts every entry has.
    private func entry(_ id: TaskID, _ f: TaskFacts, _ engine: Engine, state: JournalEntry.State) -> JournalEntry {
        var e = JournalEntry(id: id, state: state)
        e.name = engine.explicitName(id)
        e.added = seconds(f.added)
        e.started = f.started > 0 ? seconds(f.started) : nil
        let identity = runtime.identityParts(of: id, asCounted: occurrencesOnWriter)  // 0: the writer counts it
        if let s = identity.explicit {
            e.identity = .explicit(s)
        } else if let h = identity.hash {
            e.identity = .derived(h, occurrence: identity.occurrence)
        }
        e.notResumable = identity.notResumable
        return e
    }

    /// Bytes of output recorded for tasks that did not fail; past them only
    /// failed tasks' output is (the run's journal stays a journal).
    static let outputBudget = 64 << 20
    private var outputRecorded = 0

    private func recordOutput(_ id: TaskID, failed: Bool) {
        guard let bytes = runtime.takeTaskOutput(id) else { return }
        if !failed {
            guard outputRecorded + bytes.count <= Self.outputBudget else { return }
            outputRecorded += bytes.count
        }
        let text = String(decoding: bytes, as: UTF8.self)
        JournalCodec.encode(JournalMark(failed ? .failedOutput : .output, at: now, task: id, detail: text), into: &encoded)
    }

    /// As the engine's finish sink (not an observer of finishes).
    override func taskFinished(_ id: TaskID, outcome: TaskOutcome, facts f: TaskFacts, engine: Engine) {
        let end = source.now()
        recordOutput(id, failed: outcome.state == .failed)
        if f.started > 0, !f.isGroup, !f.isSchedule { noteDuration(id, ticks: end &- f.started, engine) }
        if let p = plainEntry(id, outcome, f, ended: end, engine) {
            plain.append(p)
            if plain.count >= Self.plainBatch || plainValues.count >= Self.plainValuesBatch { submitPlain() }
        } else {
            recordEntry(id, outcome, f, ended: end, engine)
        }
        scheduleTick(engine)
    }

    /// A finish that is not a plain entry: apart, so the common path keeps
    /// a small frame.
    @inline(never)
    private func recordEntry(_ id: TaskID, _ outcome: TaskOutcome, _ f: TaskFacts, ended end: UInt64, _ engine: Engine) {
        let state: JournalEntry.State = switch outcome.state {
        case .succeeded: .succeeded
        case .failed: .failed
        case .skipped: .skipped
        default: .cancelled
        }
        var e = entry(id, f, engine, state: state)
        let t = seconds(end)
        e.ended = t
        e.attempts = f.attempts
        if f.isReused {
            e.reused = true
        } else if f.isGroup || f.isSchedule {
            e.kind = f.isGroup ? .group : .schedule
        }
        let after = engine.dependencies(id)
        if !after.isEmpty { e.after = after }
        if let f = outcome.failure {
            e.error = f.description
            e.errorKind = f.kind.rawValue
        }
        if runtime.hasTags(id) { e.tags = runtime.tags(of: id) }
        if state == .succeeded, e.notResumable == nil {
            switch runtime.storableValues(of: id, warn: true, refusingSecrets: true) {
            case .json(let text): e.value = text
            case .notStorable(let why): e.notResumable = why
            }
        }
        if !extras.isEmpty, var x = extras.removeValue(forKey: id) {
            if let since = x.heldSince { x.held += t - since }
            e.held = x.held
            if !x.log.isEmpty {
                x.log.append(JournalAttempt(start: x.attemptStart ?? t, end: t, error: e.error, kind: e.errorKind))
                e.attemptLog = x.log
            }
        }
        entries.append(e)
    }

    /// Keeps the slowest tasks (groups and schedules apart): one comparison
    /// for a task that is not among them.
    @inline(__always)
    private func noteDuration(_ id: TaskID, ticks: UInt64, _ engine: Engine) {
        guard slowestTicks.count < Self.slowestKept || ticks > slowestTicks[slowestTicks.count - 1].ticks else { return }
        slowestTicks.append((engine.name(id), ticks))
        slowestTicks.sort { $0.ticks > $1.ticks }
        if slowestTicks.count > Self.slowestKept { slowestTicks.removeLast() }
    }

    /// One HTTP attempt (from the runtime's request events).
    func request(_ e: RequestEvent) {
        let host = URLComponents(string: e.url).map { c in (c.host ?? "?") + (c.port.map { ":\($0)" } ?? "") } ?? "?"
        var h = hosts[host] ?? JournalHostRequests(host: host)
        h.requests += 1
        if e.retryIn != nil {
            h.retries += 1
        } else if e.code != nil || (e.status ?? 0) >= 400 {
            h.failures += 1
        }
        hosts[host] = h
    }

    /// The run's end; the writer flushes and stops. Returns a write error,
    /// if the journal could not be written.
    func finish(_ result: RunResult, exitCode: Int32, waitingAtMost seconds: Double? = nil) -> String? {
        handOver()
        return Self.close(writer, result, exitCode: exitCode, requests: hosts.values.sorted { $0.host < $1.host },
                          waitingAtMost: seconds)
    }

    /// Records the run's end in `writer` (also for a run whose runtime
    /// never started, so no recorder was made).
    static func close(_ writer: JournalWriter, _ result: RunResult, exitCode: Int32, requests: [JournalHostRequests] = [],
                      waitingAtMost seconds: Double? = nil) -> String? {
        var counts: [String: Int] = [:]
        for (state, n) in result.counts { counts[state.rawValue] = n }
        if result.reused > 0 { counts["reused"] = result.reused }
        return writer.close(ended: Date().timeIntervalSince1970, exitCode: Int(exitCode), counts: counts,
                            requests: requests, waitingAtMost: seconds)
    }
}

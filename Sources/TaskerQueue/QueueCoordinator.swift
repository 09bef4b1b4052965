import Foundation
import Synchronization
import TaskerCore

/// The coordinator's side of the queue (`tasker run --store`): attempts of
/// defined tasks are inserted in batches by a connection thread, their
/// endings come back by NOTIFY (with a slow poll as a backstop) and are
/// handed to whoever waits for them. It holds a lease on its run
/// (`tasker_coordinators`), so the workers cancel the run's jobs once it is
/// gone. PostgreSQL going away is an outage: the work waits and goes once
/// the server is back; past the outage limit every attempt waiting, and
/// every later one, fails with kind `store`.
public final class QueueCoordinator: RemoteQueue {
    public let run: String
    let db: PGThread
    private let state = Mutex(State())
    private let lease: Double

    private struct Key: Hashable {
        var task: TaskID
        var attempt: Int
    }

    private struct Waiter {
        var done: @Sendable (RemoteOutcome) -> Void
        /// Kept to be sent again after a server restart (its row may be lost).
        var attempt: RemoteAttempt
        var since: UInt64
        var name: String { attempt.name }
    }

    private struct State {
        var waiting: [Key: Waiter] = [:]
        var outbox: [RemoteAttempt] = []
        /// Attempts inserted before that go again after a reconnect (their
        /// rows may have been lost): apart from `outbox`, whose attempts
        /// were never inserted, so a cancel of one of these still reaches
        /// the database.
        var resend: [RemoteAttempt] = []
        /// The batch being inserted (kept until it is: the insert may be
        /// tried again after a reconnect).
        var inFlight: [RemoteAttempt] = []
        var flushing = false
        /// Attempts to cancel in the database, gathered while a cancel
        /// statement runs (`cancelling`); those it holds, kept until it
        /// succeeds (it may be tried again after a reconnect).
        var cancels: [Key] = []
        var cancelsInFlight: [Key] = []
        var cancelling = false
        /// A cancel statement failed, or the connection was lost (a server
        /// that restarted may have lost commits): jobs of the run may be
        /// left that no waiter accounts for.
        var unaccounted = false
        var fetching = false
        /// Finished ids named by notifications, not read yet.
        var named: [Int64] = []
        /// Look by every waiting attempt (a tick, or a notification without ids).
        var scan = false
        var error: String?
        var listener: PGListener?
        /// Names already warned about (no live worker defines them; a
        /// worker ran another version), and when live workers were last
        /// looked up.
        var warnedUndefined: Set<String> = []
        /// Names a look found undefined, and when: said only if a later look
        /// still finds them so (see `checkUndefined`).
        var suspectedUndefined: [String: UInt64] = [:]
        /// Names whose workers were said to fail their claims (apart: a
        /// name said undefined may later get a worker that cannot claim).
        var warnedTroubled: Set<String> = []
        var warnedVersion: Set<String> = []
        var checkedWorkers: UInt64 = 0
        var checking = false
        var warn: (@Sendable (String) -> Void)?
        var heartbeating = false
        var lastHeartbeat = Monotonic.now()
        /// The server was away past the outage limit: the run fails.
        var gaveUp: TaskFailure?
        var notice: @Sendable (String) -> Void = { _ in }
        var deliveryLoop: EventLoop?
        /// The set-up is done: the listener's calls count from then on.
        var setUp = false
        /// The run is over (`stop`): no heartbeat, no attempt sent again.
        var stopping = false
        /// The listener's ticks so far.
        var ticks = 0
    }

    /// Seconds an attempt waits before the coordinator looks whether any
    /// live worker defines its task (tests shorten it).
    /// How long a name found undefined must stay so to be said: a worker's
    /// heartbeat interval (a sixth of the default lease) and a second.
    static let confirmUndefinedAfter: UInt64 = 6_000_000_000

    static let undefinedAfter: Double = {
        if let s = ProcessInfo.processInfo.environment["TASKER_TEST_UNDEFINED_AFTER"], let v = Double(s), v >= 0 { return v }
        return 30
    }()

    /// Where warnings go (the run's log); stderr until set.
    public func onWarning(_ warn: @escaping @Sendable (String) -> Void) {
        state.withLock { $0.warn = warn }
    }

    /// The loop the attempts' callbacks run on: the results of one fetch
    /// go there in one hop (a callback then finds itself on its loop)
    /// instead of one per attempt, each a lock and a wake-up.
    public func deliver(on loop: EventLoop) {
        state.withLock { $0.deliveryLoop = loop }
    }

    private func warn(_ message: String) {
        if let w = state.withLock({ $0.warn }) {
            w(message)
        } else {
            FileHandle.standardError.write(Data("tasker: warning: \(message)\n".utf8))
        }
    }

    /// Connects (so a bad URL fails the run at once), creates the schema
    /// and takes the run's lease (`lease` seconds without a heartbeat and
    /// the workers cancel its jobs). `resuming`: the run this one resumes,
    /// whose jobs are cancelled now if its coordinator is gone.
    public init(url: String, run: String, lease: Double = 60, resuming: String? = nil) throws {
        self.run = run
        self.lease = lease
        let events = OutageRelay()
        db = PGThread(url: url, name: "tasker.queue", outageLimit: StoreOutage.limit) { events.send($0) }
        let host = QueueWorker.hostName
        // The listener connects beside the set-up (LISTEN needs no table):
        // a run's start waited for one connection after the other.
        // Nothing from the listener before the set-up is done (its tick
        // would hand the database thread work meanwhile).
        let onNotify: @Sendable (String, String) -> Void = { [weak self] _, payload in
            guard let self, self.state.withLock({ $0.setUp }) else { return }
            self.notified(payload)
        }
        // Six heartbeats a lease, as `--lease` promises: a lease under 6 s
        // ticks more often than once a second (a lease of 0.6 s lapsed
        // between two ticks, and the workers cancelled a live run's jobs);
        // the slow poll for results stays at about a second.
        let tick = min(1, lease / 6)
        let ticksPerPoll = max(1, Int((1 / tick).rounded()))
        let onTick: @Sendable () -> Void = { [weak self] in
            guard let self, let tick = self.state.withLock({ s -> Int? in
                guard s.setUp else { return nil }
                s.ticks &+= 1
                return s.ticks
            }) else { return }
            if tick % ticksPerPoll == 0 {
                self.fetch(scan: true)
                self.checkUndefined()
            }
            self.heartbeatIfDue()
        }
        let makeListener: @Sendable () -> PGListener = { PGListener(url: url, channels: [QueueStore.doneChannel], tick: tick, onNotify: onNotify, onTick: onTick) }
        let register = { [db] in
            try db.sync { c throws in
                try QueueSchema.ensure(c)
                try QueueStore.register(run: run, host: host, pid: getpid(), lease: lease, c)
                if let resuming { try QueueStore.takeOver(run: resuming, host: host, c) }
            }
        }
        let listening = Mutex<PGListener?>(nil)
        let listened = DispatchSemaphore(value: 0)
        Thread {
            let listener = makeListener()
            listening.withLock { $0 = listener }
            listened.signal()
        }.start()
        var listener: PGListener?
        do {
            try register()
            listened.wait()
            listener = listening.withLock { $0 }
        } catch {
            listened.wait()
            let early = listening.withLock { $0 }
            early?.stop()
            // The server took the listener's connection and refused this
            // one (a role or server at its connection limit): as before
            // the listener came first, set up, then listen if it can.
            guard early?.listenedAtStart == true else { throw error }
            try register()
            listener = makeListener()
        }
        events.target = { [weak self] event in self?.outage(event) }
        // Listening before anything is queued: no completion's NOTIFY can
        // come before it.
        state.withLock { s in
            s.listener = listener
            s.setUp = true
        }
        // While the runtime starts and the script adds its first tasks: the
        // first insert on a new connection was parsed and planned in its
        // way (~1.5 ms of a run's first job). Should it fail, the insert
        // says why.
        db.submit({ c, _ in try QueueStore.prepareEnqueue(c) })
    }

    /// Lines for the user about the server going away and coming back.
    public var notice: @Sendable (String) -> Void {
        get { state.withLock { $0.notice } }
        set { state.withLock { $0.notice = newValue } }
    }

    /// How long the end waits for a server that is away at that moment (a
    /// restart) to record it: past it the run's lease lapses and the
    /// workers cancel its jobs then.
    static let stopGrace: Double = {
        // tests: a loaded machine's server start and backoff may outlast 5 s
        if let s = ProcessInfo.processInfo.environment["TASKER_TEST_STOP_GRACE"], let v = Double(s), v > 0 { return v }
        return 5
    }()

    /// Gives up the lease (the run is over), cancelling whatever of the run
    /// is still queued or running, and closes the connections.
    public func stop() {
        let run = self.run
        // A reconnect after this (the server back within the stop's grace)
        // must not heartbeat: the lease given up would be taken again.
        state.withLock { $0.stopping = true }
        db.submit { [self] c, _ in
            // Every attempt inserted was read back ended or cancelled by a
            // statement that worked (statements run in order: a cancel
            // submitted before this one has run), so none of the run's
            // jobs is left: no need to look through them all (16 ms for a
            // run of 10,000, at every run's end).
            let settled = state.withLock { s in
                s.waiting.isEmpty && s.outbox.isEmpty && s.resend.isEmpty && s.inFlight.isEmpty
                    && s.cancels.isEmpty && s.cancelsInFlight.isEmpty && !s.unaccounted && s.gaveUp == nil
            }
            try QueueStore.coordinatorStopped(run: run, leftovers: !settled, c)
        }
        state.withLock { s in
            let l = s.listener
            s.listener = nil
            return l
        }?.stop()
        db.stop(grace: Self.stopGrace)
    }

    /// A database error seen while the run went on, if any.
    public var lastError: String? { state.withLock { $0.error } }

    /// Why the run failed for want of the server (past the outage limit).
    public var failure: String? { state.withLock { $0.gaveUp?.message } }

    public func submit(_ a: RemoteAttempt, done: @escaping @Sendable (RemoteOutcome) -> Void) {
        let (start, gaveUp) = state.withLock { s -> (Bool, TaskFailure?) in
            if let g = s.gaveUp { return (false, g) }
            s.waiting[Key(task: a.task, attempt: a.attempt)] = Waiter(done: done, attempt: a, since: Monotonic.now())
            s.outbox.append(a)
            if s.flushing { return (false, nil) }
            s.flushing = true
            return (true, nil)
        }
        if let gaveUp { done(.failed(gaveUp)) }
        if start { flush() }
    }

    /// Inserts what accumulated since the last insert: while one batch is
    /// in flight the next one gathers.
    private func flush() {
        db.submit({ [self] c, _ in
            let jobs = state.withLock { s in
                if s.inFlight.isEmpty {
                    s.inFlight = s.resend + s.outbox
                    s.outbox = []
                    s.resend = []
                }
                return s.inFlight
            }
            // Safe twice: an attempt already there is left alone.
            try QueueStore.enqueue(run: run, jobs, c)
            flushed(nil)
        }, failed: { [self] error in
            flushed(error.message)
        })
    }

    private func flushed(_ failure: String?) {
        let (jobs, again) = state.withLock { s in
            let j = s.inFlight
            s.inFlight = []
            if (s.outbox.isEmpty && s.resend.isEmpty) || s.gaveUp != nil {
                s.flushing = false
                return (j, false)
            }
            return (j, true)
        }
        if let failure {
            // The attempts were not handed over: they fail now (their
            // retries, if any, try again).
            fail(jobs, TaskFailure(.init(rawValue: "store"), "cannot queue the task: \(failure)"))
        }
        if again { flush() }
    }

    private func fail(_ jobs: [RemoteAttempt], _ failure: TaskFailure) {
        let callbacks = state.withLock { s in
            s.error = failure.message
            return jobs.compactMap { s.waiting.removeValue(forKey: Key(task: $0.task, attempt: $0.attempt))?.done }
        }
        for cb in callbacks { cb(.failed(failure)) }
    }

    /// The server went away or came back (on the database thread).
    private func outage(_ event: PGOutageEvent) {
        switch event {
        case .lost(let why):
            state.withLock { $0.unaccounted = true }
            notice("lost the connection to PostgreSQL (\(why)): reconnecting (the run waits for it up to \(PGSession.seconds(StoreOutage.limit)))")
        case .back(let seconds):
            notice("reconnected to PostgreSQL after \(String(format: "%.1f", seconds)) s")
            // First: after a restart the workers pass over this run's jobs
            // until it heartbeats (see `QueueStore.claim`).
            heartbeatIfDue(now: true)
            resendWaiting()
        case .gaveUp(let why):
            giveUp(why)
        }
    }

    /// The server may have restarted, losing its last commits (they are
    /// not flushed one by one): every attempt still waiting is queued again
    /// (one already there is left alone), else one whose row was lost
    /// would be waited for for ever.
    func resendWaiting() {
        let start = state.withLock { s -> Bool in
            guard s.gaveUp == nil, !s.stopping else { return false }
            let pending = Set((s.outbox + s.resend + s.inFlight).map { Key(task: $0.task, attempt: $0.attempt) })
            s.resend += s.waiting.filter { !pending.contains($0.key) }.map(\.value.attempt).sorted { $0.task < $1.task }
            if s.flushing || s.resend.isEmpty { return false }
            s.flushing = true
            return true
        }
        if start { flush() }
    }

    /// Past the outage limit: every attempt waiting fails with kind
    /// `store`, and so does every later one, at once.
    private func giveUp(_ why: String) {
        let failure = TaskFailure(.init(rawValue: "store"), why)
        let callbacks = state.withLock { s in
            s.gaveUp = failure
            s.error = why
            s.outbox = []
            s.resend = []
            let all = Array(s.waiting.values)
            s.waiting = [:]
            return all
        }
        for w in callbacks { w.done(.failed(failure)) }
    }

    /// Every sixth of the lease (from the listener's tick), or `now`.
    private func heartbeatIfDue(now: Bool = false) {
        let due = state.withLock { s in
            guard !s.heartbeating, s.gaveUp == nil, !s.stopping,
                  now || Double(Monotonic.now() &- s.lastHeartbeat) / 1e9 >= lease / 6 else { return false }
            s.heartbeating = true
            return true
        }
        guard due else { return }
        let run = self.run
        db.submit({ [self] c, _ in
            // Taken before the statement: the server's heartbeat is no
            // earlier. Taken after it, a process paused (SIGSTOP) while its
            // heartbeat was in flight counted a fresh heartbeat on waking,
            // and took its swept row for one lost to a crash.
            let started = Monotonic.now()
            // (stopping meanwhile: the stop's statement ran first)
            let alive = try QueueStore.heartbeat(run: run, c)
            var resend = false
            if alive != true, !state.withLock({ $0.stopping }) {
                try QueueStore.register(run: run, host: QueueWorker.hostName, pid: getpid(), lease: lease, c)
                // A row gone within a lease of the last heartbeat was lost to
                // a crash (its commit not flushed), not swept after a lapse:
                // what it waits for is sent again (`resendWaiting`), not
                // failed; a job row still there is left alone.
                let since = Double(started &- state.withLock { $0.lastHeartbeat }) / 1e9
                if alive == false || since >= lease { try lapsed(c) } else { resend = true }
            }
            state.withLock { s in
                s.heartbeating = false
                s.lastHeartbeat = started
            }
            if resend { resendWaiting() }
        }, failed: { [self] _ in
            state.withLock { $0.heartbeating = false }
        })
    }

    /// The run's lease had lapsed (the process was paused, or its heartbeats
    /// could not get through, past the lease) and the workers cancelled its
    /// jobs; it holds the lease again. An attempt it still waits for whose
    /// row is neither live (queued, running) nor finished would be waited
    /// for for ever: it was cancelled then, or, once cancelled, deleted
    /// with the finished rows of what looked like an ended run (`--retain`,
    /// 0 by default). Each such attempt fails as `lost`, which a defined
    /// task tries again unless its own `retry` says otherwise. Attempts not
    /// inserted yet (the outbox, the batch in flight) go as they are.
    private func lapsed(_ c: PGConnection) throws {
        let inserted = state.withLock { s in
            let pending = Set((s.outbox + s.inFlight).map { Key(task: $0.task, attempt: $0.attempt) })
            return s.waiting.keys.filter { !pending.contains($0) }
        }
        let kept = try QueueStore.liveOrFinished(run: run, tasks: inserted.map(\.task), c)
            .map { Key(task: $0.task, attempt: $0.attempt) }
        let gone = Set(inserted).subtracting(kept)
        let failure = RemoteOutcome.failed(TaskFailure(.init(rawValue: "lost"),
            "the run's lease lapsed (no heartbeat for over \(PGSession.seconds(lease))): the workers cancelled this attempt"))
        let (callbacks, loop) = state.withLock { s in
            s.resend.removeAll { gone.contains(Key(task: $0.task, attempt: $0.attempt)) }
            return (gone.compactMap { s.waiting.removeValue(forKey: $0)?.done }, s.deliveryLoop)
        }
        notice("the run's lease had lapsed (no heartbeat for over \(PGSession.seconds(lease))): the workers cancelled its jobs; "
               + "\(callbacks.count) attempt(s) it waited for fail as lost (a defined task tries them again unless its retry says otherwise)")
        Self.hand(callbacks.map { ($0, failure) }, on: loop)
    }

    /// Attempts of some run finished (see `DoneNotice`): those whose
    /// results it gives are delivered at once, the others are read.
    private func notified(_ payload: String) {
        guard let notice = DoneNotice.parse(payload, run: run) else { return }
        guard let ids = notice.ids else { return fetch(scan: true) }
        if !notice.given.isEmpty { deliver(notice.given.map(FinishedJob.init(given:))) }
        if !ids.isEmpty { fetch(ids: ids) }
    }

    /// Reads finished attempts: those named, or (`scan`) any this run still
    /// waits for. While one read is in flight the next requests gather.
    private func fetch(ids: [Int64] = [], scan: Bool = false) {
        let start = state.withLock { s in
            guard !s.waiting.isEmpty else { return false }
            s.named += ids
            s.scan = s.scan || scan
            if s.fetching { return false }
            s.fetching = true
            return true
        }
        guard start else { return }
        db.submit({ [self] c, again in
            let (ids, scan, tasks) = state.withLock { s in
                // Tried again after a reconnect: look by everything waited for.
                if again { s.scan = true }
                let r = (s.named, s.scan, s.scan ? Array(Set(s.waiting.keys.map(\.task))) : [])
                s.named = []
                s.scan = false
                return r
            }
            let rows = scan ? try QueueStore.finished(run: run, tasks: tasks, c) : try QueueStore.finished(ids: ids, c)
            fetched(rows)
        }, failed: { [self] error in
            // What was to be read is looked for again at the next tick (not
            // at once: a stopping thread fails every try).
            state.withLock { s in
                s.error = error.message
                s.named = []
                s.scan = false
            }
            fetched([])
        })
    }

    private func fetched(_ rows: [FinishedJob]) {
        deliver(rows)
        let again = state.withLock { s in
            s.fetching = false
            return (!s.named.isEmpty || s.scan) && s.gaveUp == nil
        }
        if again { fetch() }
    }

    /// Hands each finished attempt still waited for to its waiter, once
    /// (a notice and a look may both find it).
    private func deliver(_ rows: [FinishedJob]) {
        var deliveries: [(@Sendable (RemoteOutcome) -> Void, RemoteOutcome)] = []
        var otherVersions: [FinishedJob] = []
        let loop = state.withLock { s in
            for r in rows {
                guard let w = s.waiting.removeValue(forKey: Key(task: r.task, attempt: r.attempt)) else { continue }
                deliveries.append((w.done, Self.outcome(r)))
                if let v = r.version, let ran = r.ranVersion, v != ran, s.warnedVersion.insert(r.name).inserted {
                    otherVersions.append(r)
                }
            }
            return s.deliveryLoop
        }
        for r in otherVersions {
            warn("'\(r.name)' ran on worker \(r.worker ?? "?") with another version of its definition "
                 + "(the worker's \(r.ranVersion ?? "?"), this pipeline's \(r.version ?? "?")): update the workers' FILE")
        }
        Self.hand(deliveries, on: loop)
    }

    /// Runs the callbacks with their outcomes, in one hop on `loop` when
    /// there is one (a callback then finds itself on its loop).
    private static func hand(_ deliveries: [(@Sendable (RemoteOutcome) -> Void, RemoteOutcome)], on loop: EventLoop?) {
        guard !deliveries.isEmpty else { return }
        if let loop {
            loop.execute { for (cb, o) in deliveries { cb(o) } }
        } else {
            for (cb, o) in deliveries { cb(o) }
        }
    }

    static func outcome(_ r: FinishedJob) -> RemoteOutcome {
        switch r.state {
        case "succeeded": return .succeeded(r.result ?? "[]")
        default:
            let kind = TaskFailure.Kind(rawValue: r.errorKind ?? "error")
            var failure = r.errorWhere == nil
                ? r.error.map { Self.failure(kind, described: $0) } ?? TaskFailure(kind, "the task \(r.state) on a worker")
                : TaskFailure(kind, r.error ?? "the task \(r.state) on a worker")
            failure.payload = r.errorValue.map(RemoteErrorValue.init(json:))
            if let position = r.errorWhere { failure.position = position }
            return .failed(failure)
        }
    }

    /// Warns (once per name) about attempts that waited past
    /// `undefinedAfter` for a definition no live worker has, or whose live
    /// workers cannot claim (each says why in its row): they stay queued,
    /// never failed for it, but someone must start such a worker or mend
    /// the store. Looks at most every few seconds.
    private func checkUndefined() {
        let now = Monotonic.now()
        let after = UInt64(Self.undefinedAfter * 1e9)
        let names: [String: Int] = state.withLock { s in
            guard !s.checking, now &- s.checkedWorkers >= min(after, 5_000_000_000) else { return [:] }
            var due: [String: Int] = [:]
            for w in s.waiting.values where now &- w.since >= after
                && !(s.warnedUndefined.contains(w.name) && s.warnedTroubled.contains(w.name)) {
                due[w.name, default: 0] += 1
            }
            if !due.isEmpty {
                s.checking = true
                s.checkedWorkers = now
            }
            return due
        }
        guard !names.isEmpty else { return }
        db.submit({ [self] c, _ in
            let undefined = (try? QueueStore.undefined(Array(names.keys), c)) ?? []
            let troubled = (try? QueueStore.troubled(Array(names.keys), c)) ?? []
            let (fresh, freshTroubled) = state.withLock { s in
                s.checking = false
                // Said when a second look, a heartbeat later, agrees: after
                // the server froze or a lock held it, every live worker's
                // heartbeat is old until it beats again (the warning named
                // a task two live workers defined).
                let now = Monotonic.now(), confirm = min(after, Self.confirmUndefinedAfter)
                for name in names.keys where !undefined.contains(name) { s.suspectedUndefined[name] = nil }
                let fresh = undefined.filter { name in
                    guard let since = s.suspectedUndefined[name] else {
                        s.suspectedUndefined[name] = now
                        return false
                    }
                    return now &- since >= confirm && s.warnedUndefined.insert(name).inserted
                }
                let freshTroubled = Set(troubled.map(\.name)).filter { s.warnedTroubled.insert($0).inserted }
                return (fresh, freshTroubled)
            }
            for name in fresh.sorted() {
                let n = names[name] ?? 0
                warn("no live worker defines '\(name)': \(n) task\(n == 1 ? "" : "s") of it wait in the queue "
                     + "(start `tasker worker` with a FILE that defines it)")
            }
            for name in freshTroubled.sorted() {
                let n = names[name] ?? 0
                let workers = troubled.filter { $0.name == name }
                var why = workers.prefix(3).map { "worker \($0.worker): \($0.problem)" }.joined(separator: "; ")
                if workers.count > 3 { why += "; and \(workers.count - 3) more" }
                warn("the live workers that define '\(name)' cannot claim jobs: \(n) task\(n == 1 ? "" : "s") of it "
                     + "wait in the queue (\(why))")
            }
        }, failed: { [self] _ in state.withLock { $0.checking = false } })
    }

    /// A worker records a failure as its description (`[position: ]kind:
    /// message`): taken apart again, so it reads as it would in one process
    /// (not `usage: usage: …`).
    static func failure(_ kind: TaskFailure.Kind, described text: String) -> TaskFailure {
        let marker = "\(kind.rawValue): "
        guard kind != .error else { return TaskFailure(kind, text) }
        if text.hasPrefix(marker) { return TaskFailure(kind, String(text.dropFirst(marker.count))) }
        // A position is `file:line`: no space (a message merely holding
        // "usage: " stays whole).
        guard let r = text.range(of: ": " + marker), !text[..<r.lowerBound].contains(" ") else { return TaskFailure(kind, text) }
        var f = TaskFailure(kind, String(text[r.upperBound...]))
        f.position = String(text[..<r.lowerBound])
        return f
    }

    public func cancel(task: TaskID, attempt: Int) {
        // true: a cancel statement is to go now (else one is under way, or
        // the attempt never reached the database)
        let start = state.withLock { s in
            guard s.waiting.removeValue(forKey: Key(task: task, attempt: attempt)) != nil else { return false }
            // Not inserted yet: it never will be.
            let before = s.outbox.count
            s.outbox.removeAll { $0.task == task && $0.attempt == attempt }
            if s.outbox.count < before { return false }
            // Inserted (perhaps lost in a crash): not sent again, and cancelled there.
            s.resend.removeAll { $0.task == task && $0.attempt == attempt }
            s.cancels.append(Key(task: task, attempt: attempt))
            if s.cancelling { return false }
            s.cancelling = true
            return true
        }
        if start { sendCancels() }
    }

    /// Cancels what gathered since the last cancel, in one statement (a
    /// stopped run cancels thousands at once). Taken when the statement
    /// runs: every attempt among them was inserted by then (the insert
    /// that took it from the outbox was submitted, and so ran, first).
    private func sendCancels() {
        db.submit({ [self] c, _ in
            let keys = state.withLock { s in
                s.cancelsInFlight += s.cancels
                s.cancels = []
                return s.cancelsInFlight
            }
            // Safe twice: a cancelled attempt is left alone.
            try QueueStore.cancel(run: run, attempts: keys.map { ($0.task, $0.attempt) }, c)
            cancelsSent()
        }, failed: { [self] _ in
            // Not now (the run stops while the server is away, or is past
            // the outage limit): the run's end cancels what is left, else
            // its lease lapsing does. Kept, they were sent again and again.
            state.withLock { s in
                s.cancels = []
                s.cancelsInFlight = []
                s.unaccounted = true
            }
            cancelsSent()
        })
    }

    private func cancelsSent() {
        let again = state.withLock { s in
            s.cancelsInFlight = []
            if s.cancels.isEmpty || s.gaveUp != nil {
                s.cancelling = false
                return false
            }
            return true
        }
        if again { sendCancels() }
    }
}

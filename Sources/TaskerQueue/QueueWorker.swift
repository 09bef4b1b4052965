import Foundation
import TaskerCore
#if canImport(Glibc)
import Glibc
#endif

/// What runs the jobs a worker claims (the Lua runtime, in tasker). Called
/// on the loop thread.
public protocol WorkerJobRunner: AnyObject {
    /// Starts a claimed job; the runner later calls `QueueWorker.finished`
    /// for it, once (also when it could not start).
    func start(_ job: ClaimedJob)
    /// The job must stop now (cancelled by the coordinator, or its claim
    /// is gone); it still reports `finished`, which the queue then refuses.
    func stop(_ job: Int64)
}

/// A worker's side of the queue (`tasker worker --store`): registers,
/// claims as many jobs as it has free slots (woken by NOTIFY, with a poll
/// every second as a backstop), hands completions back in batches fenced
/// by their claims, heartbeats, rescues the claims of silent workers, and
/// stops cleanly. Lives on the loop thread; the database on its own.
public final class QueueWorker {
    public struct Settings {
        public var concurrency: Int
        /// Seconds without a heartbeat after which others take this
        /// worker's claims back; it heartbeats six times per lease.
        public var lease: Double
        /// The definitions this worker's FILE has, with a hash of each
        /// body (nil: none could be taken): it claims only jobs of these.
        public var versions: [String: String?]
        /// Seconds finished rows stay after their run ended (`Retention`).
        public var retain: Double
        public init(concurrency: Int, lease: Double, versions: [String: String?] = [:],
                    retain: Double = Retention.defaultSeconds) {
            self.concurrency = concurrency
            self.lease = lease
            self.versions = versions
            self.retain = retain
        }
    }

    public let id: String
    private let host: String
    private let url: String
    private let settings: Settings
    private let loop: EventLoop
    private unowned let runner: WorkerJobRunner
    private let db: PGThread
    private var listener: PGListener?
    private var sweeper: QueueSweeper?
    /// Jobs running here, and when each started (its run time paces `hold`).
    private var running: [Int64: Running] = [:]
    private struct Running {
        let job: ClaimedJob
        let started: UInt64
    }
    /// Claimed and not started yet, in claim order (a backlog: see
    /// `ClaimPace`). They are this worker's claims like the running ones.
    private var ahead: [ClaimedJob] = []
    private var pace = ClaimPace()
    /// A claim in flight, on this worker's connection or on the listener's.
    private var claiming = false
    /// Free slots offered to the listener's thread while the worker is idle
    /// (see `offerStandingClaim`), and what this loop last offered there.
    private let standing = StandingClaim()
    private var offered = 0
    /// The listener took the offer and its answer has not come: a stop
    /// waits for it (the jobs it brings go back to the queue).
    private var listenerClaiming = false
    private var claimAgain = false
    /// Some run's jobs may be passed over (its coordinator not heard from
    /// since the server started: see `QueueStore.claim`): a short claim
    /// looks, and while there are such runs claims again every
    /// `passedOverRetry` seconds, as nothing wakes it when that coordinator
    /// comes back (its heartbeat sends no NOTIFY, and after a restart the
    /// listener may still be reconnecting). Set at the start and after an
    /// outage; cleared when the look finds none.
    private var passedOverMayExist = true
    private var passedOverTimer: LoopTimer?
    static let passedOverRetry = 0.2
    private var draining = false
    private var outbox: [JobCompletion] = []
    /// Jobs stopped unfinished because this worker could not heartbeat for
    /// a whole lease: they go back to the queue (fenced by their claim).
    private var returns: [(id: Int64, claim: Int64)] = []
    /// What the write in flight carries (results and returns).
    private var inFlight: Set<Int64> = []
    private var completing = false
    private var hold = CompletionHold()
    /// Set while results wait for `hold`'s time to write them.
    private var holdTimer: LoopTimer?
    private var heartbeatTimer: LoopTimer?
    private var heartbeating = false
    /// The connection is lost (or the last heartbeat failed) and not back.
    private var cannotHeartbeat = false
    private var lastHeartbeat = Monotonic.now()
    /// Running jobs this worker stopped for want of a heartbeat.
    private var selfStopped: Set<Int64> = []
    private var onStopped: (() -> Void)?
    /// Names already logged (jobs left for others; another version).
    private var saidLacking: Set<String> = []
    private var saidVersion: Set<String> = []
    /// The last claim found fewer jobs than slots: what is still queued is
    /// mostly not for this worker, so looking at it is cheap and useful (a
    /// backlog of its own jobs is not walked at every heartbeat).
    private var lastClaimShort = true
    /// Why the last claim failed (nil: it worked): each heartbeat records
    /// it in the worker's row, where a coordinator whose jobs wait reads it.
    private var claimProblem: String?
    /// When the worker's log last said so (once a minute while it lasts),
    /// and when a claim last failed.
    private var claimProblemSaid: UInt64 = 0
    private var lastClaimFailure: UInt64 = 0
    /// Lines for the worker's log (claims refused, lease trouble, outages).
    public var log: (String) -> Void = { _ in }

    public init(url: String, settings: Settings, loop: EventLoop, runner: WorkerJobRunner) throws {
        let hostName = Self.hostName
        host = hostName
        id = "\(hostName):\(getpid()):\(UInt32.random(in: 0...UInt32.max))"
        self.url = url
        self.settings = settings
        self.loop = loop
        self.runner = runner
        // A worker waits for the server for ever (its results are kept
        // meanwhile); the loop hears of the outage and of the return.
        let events = OutageRelay()
        db = PGThread(url: url, name: "tasker.queue", outageLimit: nil) { events.send($0) }
        let me = id
        try db.sync { c in
            try QueueSchema.ensure(c)
            try QueueStore.register(worker: me, host: hostName, pid: getpid(), lease: settings.lease,
                                    versions: settings.versions, c)
            // before the first claim: a coordinator that died while no
            // worker was there to see its lease lapse has its jobs
            // cancelled now, not run for nobody
            try QueueStore.rescue(c)
        }
        let bound = LoopBound(self, loop: loop)
        events.target = { event in bound.loop.execute { bound.value.outage(event) } }
    }

    static var hostName: String {
        var host = [UInt8](repeating: 0, count: 256)
        host.withUnsafeMutableBufferPointer { b in
            b.withMemoryRebound(to: CChar.self) { _ = gethostname($0.baseAddress!, $0.count - 1) }
        }
        return String(decoding: host.prefix { $0 != 0 }, as: UTF8.self)
    }

    /// Starts listening and claiming (on the loop).
    public func start() {
        loop.assertInLoop()
        let bound = LoopBound(self, loop: loop)
        // Every second (the listener's tick): a stream of jobs leaves
        // dead rows at tens of thousands a second, so the sweeper looks
        // that often whether the table needs a vacuum.
        let sweeper = QueueSweeper(url: url, retain: settings.retain) { why in
            bound.loop.execute { bound.value.log(why) }
        }
        self.sweeper = sweeper
        let standing = standing, me = id, versions = settings.versions
        listener = PGListener(
            url: url, channels: [QueueStore.jobsChannel, QueueStore.cancelChannel], tick: 1,
            setUp: { c in
                // its claims are the worker's: a claim it gives up on is
                // dropped by the server, and planned as on its connection
                try PGConnection.dropStatementsOfAGoneClient(c)
                try PGThread.setUp(c)
            },
            onNotify: { channel, payload, c in
                if channel == QueueStore.cancelChannel {
                    bound.loop.execute { if let id = Int64(payload) { bound.value.stop(id) } }
                    return
                }
                // New jobs and an idle worker: claimed here, on the
                // listener's connection, not after a hop to the loop and
                // another to the worker's own connection (measured: ~0.4 ms
                // of a 1 ms hand-over on a busy machine).
                let limit = standing.take()
                guard limit > 0 else {
                    bound.loop.execute { bound.value.claimMore() }
                    return
                }
                do {
                    let jobs = try QueueStore.claim(worker: me, limit: limit, versions: versions, c)
                    bound.loop.execute { bound.value.claimedOnListener(jobs, limit: limit) }
                } catch {
                    // lost with the connection: it may still commit
                    let lost = PGSession.isConnectionLoss(PGError(error), c)
                    bound.loop.execute { bound.value.claimedOnListener(nil, limit: limit, lost: lost) }
                }
            },
            onTick: {
                bound.loop.execute {
                    bound.value.sweepIfQuiet()
                    bound.value.claimMore()
                }
            })
        scheduleHeartbeat()
        claimMore()
        // Jobs already waiting that this worker leaves to others are said
        // now, not only at the first heartbeat.
        let names = Array(settings.versions.keys)
        db.submit { c, _ in
            let lacking = (try? QueueStore.queuedNames(notIn: names, c)) ?? []
            bound.loop.execute { bound.value.noteLacking(lacking) }
        }
    }

    public var runningCount: Int { running.count }

    /// Since when the deletes have waited for a burst to end (nil: not waiting).
    private var deferredSince: UInt64?
    /// In a burst, the deletes run at most this long apart.
    static let sweepAtLeastEvery: UInt64 = 3_000_000_000

    /// Jobs finished since the last tick (a second).
    private var finishedSinceTick = 0
    /// Past this many jobs a second the worker is in a burst.
    static let burstRate = 100

    /// The deletes of the upkeep (ended runs' rows) unless this worker is
    /// in a burst of jobs, and then every 3 s; the vacuum and index checks
    /// every second all the same, in a burst only the vacuum of a table
    /// whose dead rows pile up, and without giving pages back (see
    /// `QueueSweeper.sweep`). A burst is not slowed by deletes beside
    /// it (measured: 4 workers starting on a queue of 10,000 each deleted
    /// the last run's rows at once, a third of the database's time), a
    /// steady stream still has its rows deleted, and a worker running a
    /// few long jobs deletes at once.
    private func sweepIfQuiet() {
        let now = Monotonic.now()
        let burst = finishedSinceTick >= Self.burstRate
        finishedSinceTick = 0
        guard !burst || deferredSince.map({ now &- $0 >= Self.sweepAtLeastEvery }) ?? false else {
            if deferredSince == nil { deferredSince = now }
            sweeper?.sweep(deleting: false, inBurst: true)
            return
        }
        deferredSince = nil
        sweeper?.sweep(inBurst: burst)
    }

    // MARK: claiming

    private func claimMore() {
        // The offer goes first: a claim on the listener's connection in
        // flight beside one here could find this worker's jobs unknown.
        withdrawStandingClaim()
        let free = settings.concurrency - running.count
        let limit = pace.toClaim(free: free, held: ahead.count)
        guard !draining, limit > 0 else { return }
        guard !claiming else {
            // A wake-up during a claim: the claim may have looked before
            // the new job was committed, so look again after it.
            claimAgain = true
            return
        }
        claimAgain = false
        claiming = true
        let handBack = handBackAtNextClaim || Monotonic.now() < lookForUnknownUntil
        handBackAtNextClaim = false
        pace.claimSent()
        let bound = LoopBound(self, loop: loop)
        let me = id, versions = settings.versions
        // What this worker holds or has results of, should the claim's
        // answer be lost with the connection (see `handBackUnknown`).
        let known = Array(running.keys) + ahead.map(\.id) + outbox.map(\.id) + returns.map(\.id) + Array(inFlight)
        let lookForPassedOver = passedOverMayExist
        db.submit({ c, again in
            if again || handBack { try QueueStore.handBackUnknown(worker: me, known: known, c) }
            let claimed = try QueueStore.claim(worker: me, limit: limit, versions: versions, c)
            let passedOver: Bool? = lookForPassedOver && claimed.count < limit ? try QueueStore.anyUnheard(c) : nil
            bound.loop.execute {
                bound.value.claimed(claimed, limit: limit, failure: nil, afterALoss: again, passedOver: passedOver)
            }
        }, failed: { error in
            let why = error.message
            bound.loop.execute { bound.value.claimed([], limit: limit, failure: why) }
        })
    }

    /// `passedOver`: whether some run's jobs were passed over (nil: not looked).
    private func claimed(_ jobs: [ClaimedJob], limit: Int, failure: String?, afterALoss: Bool = false,
                         passedOver: Bool? = nil) {
        claiming = false
        if let passedOver {
            passedOverMayExist = passedOver
            if passedOver, passedOverTimer == nil {
                passedOverTimer = loop.schedule(after: Self.passedOverRetry, keepAlive: false) { [self] in
                    passedOverTimer = nil
                    claimMore()
                }
            }
        }
        if afterALoss { lookForLateClaims() }
        if let failure {
            // Once a minute whatever the text (the server's may differ each
            // time: a pid, a DETAIL line); the row gets its first line.
            let now = Monotonic.now()
            if claimProblem == nil || now &- claimProblemSaid >= 60_000_000_000 {
                log("cannot claim jobs: \(failure)")
                claimProblemSaid = now
            }
            let first = claimProblem == nil
            claimProblem = Self.headline(failure)
            lastClaimFailure = now
            if first { recordProblem() }
        } else {
            // A claim that got jobs shows claims work; an empty one (nothing
            // queued, or every row locked by another worker) may never have
            // reached what fails, so only some seconds without a failure do.
            if claimProblem != nil, !jobs.isEmpty || Monotonic.now() &- lastClaimFailure >= 10_000_000_000 {
                log("claims work again")
                claimProblem = nil
                recordProblem()
            }
            lastClaimShort = jobs.count < limit
            pace.claimed(full: jobs.count == limit)
        }
        ahead += jobs
        if draining {
            // claimed as the worker began to stop: for others to run
            handBackAhead()
            flushCompletions()
        }
        startAhead()
        // a full batch: there may be more waiting
        if jobs.count == limit || claimAgain { claimMore() }
        offerStandingClaim()
    }

    /// The listener's claim came back (nil: it failed). Its answer may be
    /// lost with the connection after its commit: then the next claim, on
    /// this worker's connection, first hands back what this worker does
    /// not know, and a claim that fails for another reason fails there
    /// too, where failures are said and recorded.
    private func claimedOnListener(_ jobs: [ClaimedJob]?, limit: Int, lost: Bool = false) {
        offered = 0
        listenerClaiming = false
        guard let jobs else {
            claiming = false
            handBackAtNextClaim = true
            if lost { lookForLateClaims() }
            claimMore()
            // stopping: it waited for this answer (the stop's statement
            // hands back what the failed claim may have taken)
            if draining { flushCompletions() }
            return
        }
        claimed(jobs, limit: limit, failure: nil)
    }

    /// While this worker is idle (its last claim found the queue empty,
    /// nothing held ahead, claims working), the listener's thread may claim
    /// its free slots itself when a NOTIFY says new jobs came. Free slots
    /// only grow meanwhile (a job starts only from a claim, and every claim
    /// here withdraws the offer first), so the offer never claims beyond them.
    private func offerStandingClaim() {
        guard !claiming, !draining, !cannotHeartbeat, claimProblem == nil, !handBackAtNextClaim, !pace.claimOnFinish,
              ahead.isEmpty else { return }
        let free = settings.concurrency - running.count
        guard free > 0, free != offered else { return }
        withdrawStandingClaim()
        // taken meanwhile: its answer comes (`claiming`)
        guard !claiming else { return }
        standing.offer(free)
        offered = free
    }

    /// Takes the offer back; when the listener took it first, its claim is
    /// in flight, and `claiming` until its answer comes.
    private func withdrawStandingClaim() {
        guard offered > 0 else { return }
        if !standing.withdraw(offered) {
            claiming = true
            listenerClaiming = true
        }
        offered = 0
    }

    /// The first line of a server error, at most 300 characters.
    static func headline(_ message: String) -> String {
        String((message.split(separator: "\n", maxSplits: 1).first ?? "").prefix(300))
    }

    /// Writes `claimProblem` to the worker's row now (heartbeats write it
    /// too): when claims begin or stop failing, a coordinator that looks
    /// meanwhile sees it. Best effort.
    private func recordProblem() {
        let me = id, problem = claimProblem
        db.submit({ c, _ in try QueueStore.record(worker: me, problem: problem, c) }, failed: { _ in })
    }

    /// Starts jobs held ahead while there are free slots.
    private func startAhead() {
        let n = min(settings.concurrency - running.count, ahead.count)
        guard n > 0 else { return }
        let jobs = ahead.prefix(n)
        ahead.removeFirst(n)
        let now = Monotonic.now()
        for j in jobs { running[j.id] = Running(job: j, started: now) }
        for j in jobs {
            noteVersion(j)
            runner.start(j)
        }
    }

    /// A job this worker must not run or go on running (cancelled, or its
    /// claim is gone): a running one is stopped (its result is then
    /// refused), one held ahead is dropped (its row is no longer its own).
    private func stop(_ id: Int64) {
        if running[id] != nil {
            runner.stop(id)
        } else {
            ahead.removeAll { $0.id == id }
        }
    }

    /// Jobs held ahead go back to the queue for any worker (fenced by their
    /// claim): this one stops, or cannot heartbeat.
    private func handBackAhead() {
        guard !ahead.isEmpty else { return }
        returns += ahead.map { ($0.id, $0.claim) }
        ahead = []
    }

    /// Says once per name when the coordinator's definition is not this
    /// worker's (a rolling upgrade half done): the job runs this worker's
    /// code, and its row records which version that was.
    private func noteVersion(_ job: ClaimedJob) {
        guard let theirs = job.version, let mine = settings.versions[job.name] ?? nil, theirs != mine,
              saidVersion.insert(job.name).inserted else { return }
        log("'\(job.name)' differs here from the coordinator's (this worker's FILE has version \(mine), "
            + "the coordinator's \(theirs)): its jobs run this worker's code")
    }

    /// Says once per name which queued jobs this worker leaves for others.
    private func noteLacking(_ names: [String]) {
        for name in names.sorted() where saidLacking.insert(name).inserted {
            log("jobs of '\(name)' are queued, but this worker's FILE does not define it: left for a worker that does")
        }
    }

    // MARK: completing

    /// The runner's report that a job ended.
    public func finished(_ completion: JobCompletion) {
        loop.assertInLoop()
        guard let ran = running.removeValue(forKey: completion.id) else { return }
        let job = ran.job
        let now = Monotonic.now()
        hold.finished(ranFor: Double(now &- ran.started) / 1e9, at: now)
        pace.didFinish()
        finishedSinceTick += 1
        if selfStopped.remove(completion.id) != nil && completion.state != .succeeded {
            // Stopped for want of a heartbeat, not by its own doing: the job
            // goes back to the queue for another try of the same attempt.
            returns.append((job.id, job.claim))
        } else {
            outbox.append(completion)
        }
        guard !turnEnding else { return }
        // Jobs that end in one turn of the loop go back in one statement,
        // and their slots are filled from those held ahead, or claimed
        // again in one (not one each).
        turnEnding = true
        loop.enqueue { [unowned self] in
            self.turnEnding = false
            self.startAhead()
            self.flushCompletions()
            // After a claim that found the queue empty, new jobs come with
            // a NOTIFY (every insert and hand-back sends one; the tick is
            // the backstop): claiming at each finished job only found
            // nothing again (four workers on one producer: 1,070 claims
            // for 10,000 jobs, half of PostgreSQL's time).
            if self.pace.claimOnFinish { self.claimMore() }
            // more slots free for the listener's claim
            self.offerStandingClaim()
        }
    }
    private var turnEnding = false

    /// Writes the results (and returns) gathered so far; while the server
    /// is away they wait, in memory, and are written once it is back.
    private func flushCompletions() {
        guard !completing, !outbox.isEmpty || !returns.isEmpty else {
            checkStopped()
            return
        }
        if !draining, returns.isEmpty,
           let wait = hold.wait(at: Monotonic.now(), pending: outbox.count, running: running.values.lazy.map(\.started)) {
            if holdTimer == nil {
                holdTimer = loop.schedule(after: wait, keepAlive: false) { [unowned self] in
                    holdTimer = nil
                    flushCompletions()
                }
            }
            return
        }
        holdTimer?.cancel()
        holdTimer = nil
        hold.written()
        completing = true
        let batch = outbox, back = returns
        outbox = []
        returns = []
        inFlight = Set(batch.map(\.id) + back.map(\.id))
        let bound = LoopBound(self, loop: loop)
        db.submit({ c, again in
            try QueueStore.handBack(back, c)
            let refused = try QueueStore.complete(batch, c)
            bound.loop.execute { bound.value.completed(batch.count, refused: refused, again: again) }
        }, failed: { error in
            // Not a lost connection (that waits): the statement itself
            // failed. Each result is recorded on its own, and one that
            // still cannot be is recorded as a failure saying why.
            let why = error.message
            bound.loop.execute { bound.value.completeOneByOne(batch, back, why) }
        })
    }

    private func completed(_ count: Int, refused: [Int64], again: Bool) {
        completing = false
        inFlight = []
        for id in refused {
            // Sent again after the connection broke under the first try:
            // that try may have recorded it.
            log(again ? "job \(id): result not recorded again (recorded before the connection broke, or its claim was given up meanwhile)"
                      : "job \(id): result refused (its claim was given up meanwhile)")
        }
        flushCompletions()
    }

    private func completeOneByOne(_ batch: [JobCompletion], _ back: [(id: Int64, claim: Int64)], _ why: String) {
        log("cannot record \(batch.count) results: \(why); recording them one by one")
        let bound = LoopBound(self, loop: loop)
        db.submit({ c, _ in
            try? QueueStore.handBack(back, c)
            for one in batch {
                do {
                    _ = try QueueStore.complete([one], c)
                } catch where !PGSession.isConnectionLoss(PGError(error), c) {
                    let failure = JobCompletion(id: one.id, claim: one.claim, state: .failed,
                                                error: "the worker could not record the result: \(PGError(error).message)",
                                                errorKind: "store")
                    _ = try QueueStore.complete([failure], c)
                }
            }
            bound.loop.execute { bound.value.completed(batch.count, refused: [], again: false) }
        }, failed: { error in
            let message = error.message
            bound.loop.execute {
                let w = bound.value
                w.log("cannot record \(batch.count) results: \(message)")
                w.completed(batch.count, refused: [], again: false)
            }
        })
    }

    // MARK: heartbeat

    private var heartbeatInterval: Double { settings.lease / 6 }

    private func scheduleHeartbeat() {
        heartbeatTimer = loop.schedule(after: heartbeatInterval, keepAlive: false) { [unowned self] in
            heartbeat()
            if !draining || !running.isEmpty || completing || stopWait != nil { scheduleHeartbeat() }
        }
    }

    /// Six times per lease; one at a time (while the server is away the one
    /// in flight waits for it, and is sent once it is back).
    private func heartbeat() {
        checkLease()
        guard !heartbeating else { return }
        heartbeating = true
        let bound = LoopBound(self, loop: loop)
        let me = id
        let ids = Array(running.keys) + ahead.map(\.id)
        let names = Array(settings.versions.keys)
        let lookForLacking = lastClaimShort
        let problem = claimProblem
        db.submit({ c, _ in
            let result = try QueueStore.heartbeat(worker: me, running: ids, problem: problem, c)
            try QueueStore.rescue(c)
            // only for a log line: never a reason to count the heartbeat failed
            let lacking = lookForLacking ? ((try? QueueStore.queuedNames(notIn: names, c)) ?? []) : []
            bound.loop.execute {
                bound.value.noteLacking(lacking)
                bound.value.heartbeatDone(result, nil)
            }
        }, failed: { error in
            let why = error.message
            bound.loop.execute { bound.value.heartbeatDone(nil, why) }
        })
    }

    private func heartbeatDone(_ result: (wasDead: Bool, stop: [Int64])?, _ failure: String?) {
        heartbeating = false
        guard let result else {
            log("heartbeat failed: \(failure ?? "no connection")")
            cannotHeartbeat = true
            checkLease()
            return
        }
        lastHeartbeat = Monotonic.now()
        cannotHeartbeat = false
        if result.wasDead {
            log("this worker was silent past its lease: its claims were given to others")
            let me = id, lease = settings.lease, host = host, versions = settings.versions
            db.submit { c, _ in try QueueStore.register(worker: me, host: host, pid: getpid(), lease: lease, versions: versions, c) }
        }
        for id in result.stop { stop(id) }
    }

    /// A worker that could not heartbeat for a whole lease (the server is
    /// away, or refuses) stops the attempts it holds: past the lease others
    /// may run them. They go back to the queue once the server answers
    /// (unless taken already). A heartbeat that is merely slow (a loaded
    /// machine) stops nothing.
    private func checkLease() {
        guard cannotHeartbeat, Double(Monotonic.now() &- lastHeartbeat) / 1e9 > settings.lease else { return }
        if !ahead.isEmpty {
            handBackAhead()
            flushCompletions()
        }
        let stopping = running.keys.filter { !selfStopped.contains($0) }
        guard !stopping.isEmpty else { return }
        log("no heartbeat for the whole lease (\(settings.lease) s): stopping the \(stopping.count) attempts this worker holds")
        for id in stopping {
            selfStopped.insert(id)
            runner.stop(id)
        }
    }

    /// Hand back, before the next claim, the jobs the server says run here
    /// and this worker does not know (see `outage`).
    private var handBackAtNextClaim = false

    /// Until then every claim hands back first what this worker does not
    /// know: a claim whose answer it gave up on (its wait) goes on in the
    /// server until the server sees the connection gone (up to 5 s) and
    /// may commit meanwhile, after the one hand-back that followed it (its
    /// jobs then sat `running` under a live worker, the run waiting).
    private var lookForUnknownUntil: UInt64 = 0
    /// A stop waiting for that window to pass.
    private var stopWait: LoopTimer?
    static let lateClaimSeconds: UInt64 = 15

    private func lookForLateClaims() {
        lookForUnknownUntil = Monotonic.now() &+ Self.lateClaimSeconds * 1_000_000_000
    }

    /// The server went away or came back.
    private func outage(_ event: PGOutageEvent) {
        switch event {
        case .lost(let why):
            cannotHeartbeat = true
            withdrawStandingClaim()
            log("lost the connection to PostgreSQL (\(why)): reconnecting; results are kept until it is back")
        case .back(let seconds):
            log("reconnected to PostgreSQL after \(String(format: "%.1f", seconds)) s")
            // A restart may have lost the last completions (commits are not
            // flushed one by one): their jobs, running here by the server's
            // account but not by this worker's, go back to the queue.
            handBackAtNextClaim = true
            passedOverMayExist = true
            // What waited went first; heartbeat now rather than at the next tick.
            heartbeat()
            claimMore()
        case .gaveUp(let why):
            log(why)
        }
    }

    // MARK: stopping

    /// Stops claiming; `then` runs once the running jobs have finished and
    /// their results are recorded.
    public func drain(then: @escaping () -> Void) {
        loop.assertInLoop()
        draining = true
        onStopped = then
        withdrawStandingClaim()
        handBackAhead()
        flushCompletions()
    }

    /// Stops at once: what is still running goes back to the queue. Safe
    /// from any thread (a second signal), as it touches only the database,
    /// on a connection of its own, and waits at most 3 s (the server may be
    /// away: the claims then run out with the lease).
    public var handBack: @Sendable () -> Void {
        let me = id, url = url
        return {
            let done = DispatchSemaphore(value: 0)
            Thread {
                if let c = try? PGConnection(url: url) { try? QueueStore.handBack(worker: me, c) }
                done.signal()
            }.start()
            _ = done.wait(timeout: .now() + 3)
        }
    }

    private func checkStopped() {
        guard draining, !listenerClaiming, running.isEmpty, outbox.isEmpty, returns.isEmpty, !completing, let done = onStopped else { return }
        // A claim given up on lately may still commit under this worker's
        // name: the stop's hand-back comes after that window (rare: only
        // after such a claim), as no one else looks for it once stopped.
        let now = Monotonic.now()
        if lookForUnknownUntil > now {
            if stopWait == nil {
                stopWait = loop.schedule(after: Double(lookForUnknownUntil &- now) / 1e9) { [unowned self] in
                    stopWait = nil
                    lookForUnknownUntil = 0
                    checkStopped()
                }
                // its lease holds meanwhile (else others' rescue would take
                // what it is about to hand back as lost attempts)
                heartbeatTimer?.cancel()
                scheduleHeartbeat()
            }
            return
        }
        onStopped = nil
        heartbeatTimer?.cancel()
        let me = id
        // It holds nothing now; what a claim in flight as it stopped took
        // (on either connection) goes back to the queue with the stop.
        db.submit { c, _ in try QueueStore.handBack(worker: me, c) }
        done()
    }

    /// Closes the connections (after `drain` or `handBack`).
    public func close() {
        holdTimer?.cancel()
        holdTimer = nil
        listener?.stop()
        listener = nil
        sweeper?.stop()
        sweeper = nil
        db.stop()
    }
}

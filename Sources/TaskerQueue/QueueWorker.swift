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
        public init(concurrency: Int, lease: Double, versions: [String: String?] = [:]) {
            self.concurrency = concurrency
            self.lease = lease
            self.versions = versions
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
    private var running: [Int64: ClaimedJob] = [:]
    private var claiming = false
    private var claimAgain = false
    private var draining = false
    private var outbox: [JobCompletion] = []
    private var completing = false
    private var heartbeatTimer: LoopTimer?
    private var lastHeartbeat = Monotonic.now()
    private var onStopped: (() -> Void)?
    /// Names already logged (jobs left for others; another version).
    private var saidLacking: Set<String> = []
    private var saidVersion: Set<String> = []
    /// The last claim found fewer jobs than slots: what is still queued is
    /// mostly not for this worker, so looking at it is cheap and useful (a
    /// backlog of its own jobs is not walked at every heartbeat).
    private var lastClaimShort = true
    /// Lines for the worker's log (claims refused, lease trouble).
    public var log: (String) -> Void = { _ in }

    public init(url: String, settings: Settings, loop: EventLoop, runner: WorkerJobRunner) throws {
        let hostName = Self.hostName
        host = hostName
        id = "\(hostName):\(getpid()):\(UInt32.random(in: 0...UInt32.max))"
        self.url = url
        self.settings = settings
        self.loop = loop
        self.runner = runner
        db = PGThread(url: url, name: "tasker.queue")
        let me = id
        try db.sync { c in
            try QueueSchema.ensure(c)
            try QueueStore.register(worker: me, host: hostName, pid: getpid(), lease: settings.lease,
                                    versions: settings.versions, c)
        }
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
        listener = PGListener(
            url: url, channels: [QueueStore.jobsChannel, QueueStore.cancelChannel], tick: 1,
            onNotify: { channel, payload in
                bound.loop.execute {
                    let w = bound.value
                    if channel == QueueStore.cancelChannel {
                        if let id = Int64(payload), w.running[id] != nil { w.runner.stop(id) }
                    } else {
                        w.claimMore()
                    }
                }
            },
            onTick: { bound.loop.execute { bound.value.claimMore() } })
        scheduleHeartbeat()
        claimMore()
        // Jobs already waiting that this worker leaves to others are said
        // now, not only at the first heartbeat.
        let names = Array(settings.versions.keys)
        db.submit { c, _ in
            let lacking = c.flatMap { try? QueueStore.queuedNames(notIn: names, $0) } ?? []
            bound.loop.execute { bound.value.noteLacking(lacking) }
        }
    }

    public var runningCount: Int { running.count }

    // MARK: claiming

    private func claimMore() {
        let free = settings.concurrency - running.count
        guard !draining, free > 0 else { return }
        guard !claiming else {
            // A wake-up during a claim: the claim may have looked before
            // the new job was committed, so look again after it.
            claimAgain = true
            return
        }
        claimAgain = false
        claiming = true
        let bound = LoopBound(self, loop: loop)
        let me = id, versions = settings.versions
        db.submit { c, error in
            var jobs: [ClaimedJob] = []
            var failure = error
            if let c {
                do { jobs = try QueueStore.claim(worker: me, limit: free, versions: versions, c) } catch { failure = PGError(error) }
            }
            let claimed = jobs
            let why = failure?.message
            bound.loop.execute {
                let w = bound.value
                w.claiming = false
                if let why { w.log("cannot claim jobs: \(why)") } else { w.lastClaimShort = claimed.count < free }
                for j in claimed { w.running[j.id] = j }
                for j in claimed {
                    w.noteVersion(j)
                    w.runner.start(j)
                }
                // a full batch: there may be more waiting
                if claimed.count == free || w.claimAgain { w.claimMore() }
            }
        }
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
        guard running.removeValue(forKey: completion.id) != nil else { return }
        outbox.append(completion)
        guard !turnEnding else { return }
        // Jobs that end in one turn of the loop go back in one statement,
        // and their slots are claimed again in one (not one each).
        turnEnding = true
        loop.enqueue { [unowned self] in
            self.turnEnding = false
            self.flushCompletions()
            self.claimMore()
        }
    }
    private var turnEnding = false

    private func flushCompletions() {
        guard !completing, !outbox.isEmpty else {
            checkStopped()
            return
        }
        completing = true
        let batch = outbox
        outbox = []
        let bound = LoopBound(self, loop: loop)
        db.submit { c, error in
            var refused: [Int64] = []
            var failure = error
            if let c {
                do { refused = try QueueStore.complete(batch, c) } catch { failure = PGError(error) }
            }
            let why = failure?.message
            let gone = refused
            bound.loop.execute {
                let w = bound.value
                w.completing = false
                if let why {
                    // Not recorded: the claims run out and the jobs are
                    // rescued and run again (at least once).
                    w.log("cannot record \(batch.count) results: \(why)")
                }
                for id in gone { w.log("job \(id): result refused (its claim was given up meanwhile)") }
                w.flushCompletions()
            }
        }
    }

    // MARK: heartbeat

    private var heartbeatInterval: Double { settings.lease / 6 }

    private func scheduleHeartbeat() {
        heartbeatTimer = loop.schedule(after: heartbeatInterval, keepAlive: false) { [unowned self] in heartbeat() }
    }

    private func heartbeat() {
        let bound = LoopBound(self, loop: loop)
        let me = id
        let ids = Array(running.keys)
        let names = Array(settings.versions.keys)
        let lookForLacking = lastClaimShort
        db.submit { c, error in
            var result: (wasDead: Bool, stop: [Int64])?
            var lacking: [String] = []
            var failure = error
            if let c {
                do {
                    result = try QueueStore.heartbeat(worker: me, running: ids, c)
                    try QueueStore.rescue(c)
                    // only for a log line: never a reason to count the heartbeat failed
                    if lookForLacking { lacking = (try? QueueStore.queuedNames(notIn: names, c)) ?? [] }
                } catch { failure = PGError(error) }
            }
            let outcome = result
            let why = failure?.message
            let missing = lacking
            bound.loop.execute {
                bound.value.noteLacking(missing)
                bound.value.heartbeatDone(outcome, why)
            }
        }
    }

    private func heartbeatDone(_ result: (wasDead: Bool, stop: [Int64])?, _ failure: String?) {
        if let result {
            lastHeartbeat = Monotonic.now()
            if result.wasDead {
                log("this worker was silent past its lease: its claims were given to others")
                let me = id, lease = settings.lease, host = host, versions = settings.versions
                db.submit { c, _ in
                    if let c { try? QueueStore.register(worker: me, host: host, pid: getpid(), lease: lease, versions: versions, c) }
                }
            }
            for id in result.stop where running[id] != nil { runner.stop(id) }
        } else {
            log("heartbeat failed: \(failure ?? "no connection")")
            // Past the lease others may run these jobs: stop ours.
            if Double(Monotonic.now() &- lastHeartbeat) / 1e9 > settings.lease {
                log("no heartbeat for the whole lease: stopping the attempts this worker holds")
                for id in running.keys { runner.stop(id) }
            }
        }
        if !draining || !running.isEmpty { scheduleHeartbeat() }
    }

    // MARK: stopping

    /// Stops claiming; `then` runs once the running jobs have finished and
    /// their results are recorded.
    public func drain(then: @escaping () -> Void) {
        loop.assertInLoop()
        draining = true
        onStopped = then
        checkStopped()
    }

    /// Stops at once: what is still running goes back to the queue. Safe
    /// from any thread (a second signal), as it touches only the database.
    public var handBack: @Sendable () -> Void {
        let me = id, db = db
        return { try? db.sync { c in try QueueStore.handBack(worker: me, c) } }
    }

    private func checkStopped() {
        guard draining, running.isEmpty, outbox.isEmpty, !completing, let done = onStopped else { return }
        onStopped = nil
        heartbeatTimer?.cancel()
        let me = id
        db.submit { c, _ in
            if let c { try? QueueStore.markStopped(worker: me, c) }
        }
        done()
    }

    /// Closes the connections (after `drain` or `handBack`).
    public func close() {
        listener?.stop()
        listener = nil
        db.stop()
    }
}

import Foundation

/// A thread that owns one PostgreSQL connection and runs what is handed to
/// it, in order. libpq blocks; the event loop never waits on it. While the
/// server is away the work waits here, in order (`PGSession`): what could
/// not be written is written once the server is back.
public final class PGThread: @unchecked Sendable {
    // Safety: `jobs` and `stopping` are touched only with `condition`
    // locked; `session` only on the thread itself (and by `init` before
    // the thread starts).
    private let condition = NSCondition()
    private var jobs: [Job] = []
    private var stopping = false
    /// Until when work handed over before `stop` still waits for a server
    /// that is away (nil: it fails at once once stopping).
    private var stopGrace: Date?
    private let session: PGSession
    private let done = DispatchSemaphore(value: 0)

    private struct Job {
        var body: (PGConnection, Bool) throws -> Void
        var failed: (PGError) -> Void
        var patient: Bool
    }

    /// `outageLimit`: seconds without the server after which work fails
    /// (nil: it waits for ever). `onEvent` (on this thread) hears of the
    /// server going and coming back.
    public convenience init(url: String, name: String, outageLimit: Double? = nil,
                            onEvent: @escaping @Sendable (PGOutageEvent) -> Void = { _ in }) {
        self.init(url: url, name: name, outageLimit: outageLimit, answerWait: PGConnection.defaultAnswerWait, onEvent: onEvent)
    }

    /// `answerWait`: how long each statement's answer is waited for (nil:
    /// for ever, for maintenance; see `PGConnection.defaultAnswerWait`).
    init(url: String, name: String, outageLimit: Double?, answerWait: Double?,
         onEvent: @escaping @Sendable (PGOutageEvent) -> Void = { _ in }) {
        session = PGSession(url: url, limit: outageLimit, answerWait: answerWait, setUp: Self.setUp, onEvent: onEvent)
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    static func setUp(_ c: PGConnection) throws {
        // One round trip for all four.
        // `synchronous_commit`: a commit the server loses in a crash (the
        // last few hundred ms) costs a rerun, never a wrong result: bodies
        // run at least once, a result counts once. Not waiting for each
        // flush is worth ~2x here.
        // The planner's switches: every queue statement finds its rows by key (ids, a run's tasks,
        // the queued index walked in order), and statements are prepared: a
        // plan made while the table was small must not stay a sequential
        // scan once it is large, nor a claim become a bitmap scan that reads
        // and sorts every queued row and dead entry (measured: each made a
        // 10,000-job run quadratic). Those switches price the plans they
        // rule out at ~1e10, over the JIT thresholds: without `jit off` the
        // rescue's small UPDATE was compiled on every heartbeat (60-190 ms
        // in which the worker claimed nothing).
        try c.execute("SET synchronous_commit TO off; SET enable_seqscan TO off; SET enable_bitmapscan TO off; SET jit TO off")
    }

    /// Runs `body` on the thread with a live connection. When the
    /// connection breaks under it, `body` runs again once the server is
    /// back (`again` true: it must be safe to run twice); `failed` gets any
    /// other error, or the outage past the limit, or the thread stopping
    /// while the server is away.
    func submit(_ body: @escaping (PGConnection, _ again: Bool) throws -> Void,
                failed: @escaping (PGError) -> Void = { _ in }) {
        enqueue(Job(body: body, failed: failed, patient: true))
    }

    private func enqueue(_ job: Job) {
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Runs `body` on the thread and waits for its result (set-up, tests):
    /// no connection fails at once.
    func sync<T>(_ body: @escaping (PGConnection) throws -> T) throws -> T {
        let box = ResultBox<T>()
        let s = DispatchSemaphore(value: 0)
        enqueue(Job(body: { c, _ in
            box.value = .success(try body(c))
            s.signal()
        }, failed: { e in
            box.value = .failure(e)
            s.signal()
        }, patient: false))
        s.wait()
        switch box.value! {
        case .success(let v): return v
        case .failure(let e): throw e
        }
    }

    /// Finishes what was handed over while the server answers (work still
    /// waiting for it fails, after `grace` seconds at most), then closes
    /// the connection.
    /// `waiting` false: returns at once (the thread ends after the
    /// statement it is in, which may wait for ever: maintenance).
    public func stop(grace: Double = 0, waiting: Bool = true) {
        condition.lock()
        stopping = true
        stopGrace = grace > 0 ? Date(timeIntervalSinceNow: grace) : nil
        condition.signal()
        condition.unlock()
        if waiting { done.wait() }
    }

    /// Waits `seconds` between tries; false when stopping (past its grace).
    private func pause(_ seconds: Double) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        let until = Date(timeIntervalSinceNow: seconds)
        while true {
            var end = until
            if stopping {
                guard let grace = stopGrace, grace > Date() else { return false }
                end = min(end, grace)
            }
            if !condition.wait(until: end) { break }
        }
        return !stopping || (stopGrace.map { $0 > Date() } ?? false)
    }

    private func run() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            let batch = jobs
            jobs = []
            let stop = stopping && batch.isEmpty
            condition.unlock()
            if stop { break }
            for job in batch {
                do {
                    try session.run(patient: job.patient, pause: pause, job.body)
                } catch {
                    job.failed(PGError(error))
                }
            }
        }
        session.close()
        done.signal()
    }
}

/// Carries a result from the thread to the caller of `sync`.
private final class ResultBox<T>: @unchecked Sendable {
    // Safety: written by the PG thread before the semaphore is signalled,
    // read by the caller after it has waited on it.
    var value: Result<T, PGError>?
}

/// Hands a connection thread's outage events to their owner, which exists
/// only once the thread does (the thread is made in the owner's `init`).
final class OutageRelay: @unchecked Sendable {
    // Safety: `target` is set once, right after the owner's first
    // (synchronous) database call and before any other work is handed to
    // the thread, and only read by that thread afterwards (the hand-over's
    // lock orders the two); events before it are set-up failures, which
    // the owner's `init` reports by throwing.
    var target: (@Sendable (PGOutageEvent) -> Void)?
    func send(_ e: PGOutageEvent) { target?(e) }
}

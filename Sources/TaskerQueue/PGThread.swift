import Foundation

/// A thread that owns one PostgreSQL connection and runs what is handed to
/// it, in order. libpq blocks; the event loop never waits on it. The
/// connection is opened on the thread and opened again after it broke.
public final class PGThread: @unchecked Sendable {
    // Safety: `jobs` and `stopping` are touched only with `condition`
    // locked; `connection` only on the thread itself.
    private let url: String
    private let condition = NSCondition()
    private var jobs: [(PGConnection?, PGError?) -> Void] = []
    private var stopping = false
    private var connection: PGConnection?
    private let done = DispatchSemaphore(value: 0)

    public init(url: String, name: String) {
        self.url = url
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    /// Runs `job` on the thread with the connection, or with why there is
    /// none (the server is down or refused us).
    func submit(_ job: @escaping (PGConnection?, PGError?) -> Void) {
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Runs `body` on the thread and waits for its result (set-up, tests).
    func sync<T>(_ body: @escaping (PGConnection) throws -> T) throws -> T {
        let box = ResultBox<T>()
        let s = DispatchSemaphore(value: 0)
        submit { c, e in
            if let c {
                do { box.value = .success(try body(c)) } catch { box.value = .failure(error as? PGError ?? PGError(message: "\(error)", sqlState: nil)) }
            } else {
                box.value = .failure(e ?? PGError(message: "no connection", sqlState: nil))
            }
            s.signal()
        }
        s.wait()
        switch box.value! {
        case .success(let v): return v
        case .failure(let e): throw e
        }
    }

    /// Finishes what was handed over, then closes the connection.
    public func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
        done.wait()
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
                var failure: PGError?
                if connection == nil || connection!.isBroken {
                    connection = nil
                    do {
                        let c = try PGConnection(url: url)
                        // A commit the server loses in a crash (the last few
                        // hundred ms) costs a rerun, never a wrong result:
                        // bodies run at least once, a result counts once.
                        // Not waiting for each flush is worth ~2x here.
                        try c.execute("SET synchronous_commit TO off")
                        // Every queue statement finds its rows by key (ids, a
                        // run's tasks, the queued index walked in order), and
                        // statements are prepared: a plan made while the table
                        // was small must not stay a sequential scan once it is
                        // large, nor a claim become a bitmap scan that reads and
                        // sorts every queued row and dead entry (measured: each
                        // made a 10,000-job run quadratic).
                        try c.execute("SET enable_seqscan TO off; SET enable_bitmapscan TO off")
                        connection = c
                    } catch { failure = PGError(error) }
                }
                job(connection, failure)
            }
        }
        connection = nil
        done.signal()
    }
}

/// Carries a result from the thread to the caller of `sync`.
private final class ResultBox<T>: @unchecked Sendable {
    // Safety: written by the PG thread before the semaphore is signalled,
    // read by the caller after it has waited on it.
    var value: Result<T, PGError>?
}

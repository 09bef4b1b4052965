import TaskerCore

/// How long a worker keeps the results of finished jobs before writing
/// them, so that more go in one statement. A statement costs the server
/// ~0.5 ms of CPU whatever it carries (its execution, bind, commit and the
/// coordinator's read after its NOTIFY): 2,000 jobs of 10 ms on 4 workers
/// made 470-650 completions of 3-4 results each, on a machine the run kept
/// busy.
///
/// A result waits at most half of what a job of this worker takes to run
/// (smoothed), and at most `most`, and only while another running job is
/// near its end (expected within the wait, and not overdue): jobs of under
/// a millisecond (their results already gather while a statement is in
/// flight), a worker running nothing else and a chain beside a long job
/// (the next task waits for this result, and nothing would join it) write
/// at once, as does a batch of `batch` results.
struct CompletionHold {
    static let most = 0.005
    static let batch = 256
    /// Holds shorter than this are not worth a timer.
    static let least = 0.0005

    /// Seconds a job of this worker runs, smoothed.
    private(set) var runTime = 0.0
    /// When the oldest result not yet handed to a statement came in (0: none).
    private(set) var oldest: UInt64 = 0

    /// A job ran for `seconds` and its result waits now.
    mutating func finished(ranFor seconds: Double, at now: UInt64) {
        runTime = runTime == 0 ? seconds : 0.8 * runTime + 0.2 * seconds
        if oldest == 0 { oldest = now }
    }

    /// The waiting results went into a statement.
    mutating func written() { oldest = 0 }

    /// Seconds to wait before writing the `pending` results (nil: now),
    /// given when each job still running here started.
    func wait(at now: UInt64, pending: Int, running started: some Sequence<UInt64>) -> Double? {
        guard pending < Self.batch, oldest != 0 else { return nil }
        let hold = min(Self.most, runTime / 2)
        guard hold >= Self.least else { return nil }
        let age = Double(now &- oldest) / 1e9
        guard age < hold else { return nil }
        let window = hold - age
        let joins = started.contains { start in
            let ran = Double(now &- start) / 1e9
            return ran + window >= runTime && ran <= 2 * runTime
        }
        return joins ? window : nil
    }
}

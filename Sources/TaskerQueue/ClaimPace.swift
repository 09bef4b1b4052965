import Foundation
import TaskerCore

/// How many jobs a worker claims beyond its free slots. While the queue is
/// shallow, none: a claim takes the free slots only, so a job handed over
/// to an idle worker starts at once and no job waits behind another on a
/// worker that is busy. While claims come back full (a backlog), it keeps
/// about `horizon` seconds of its own pace in hand (jobs finished per
/// second: slow jobs get none ahead), at most `most`: fewer, larger claims
/// (and so fewer statements per job), yet never more than a short while of
/// work that other workers could have taken. (Paced by starts instead, the
/// burst of starts after each claim made a worker of half-second jobs take
/// the whole queue.)
///
/// The next claim goes out while the worker still holds what it will run
/// during that claim's round trip (`reserve`: its pace times the claim's
/// latency), so that a worker of short jobs does not run dry and wait for
/// every claim (measured: on a loaded machine a claim took 10 ms, and the
/// 130 jobs held ahead ran in 3).
struct ClaimPace {
    static let horizon = 0.025
    static let most = 256
    /// A fixed number to hold ahead during a backlog in place of the pace
    /// (tests: a loaded machine's pace may hold none ahead).
    static let fixedAhead: Int? = {
        guard let s = ProcessInfo.processInfo.environment["TASKER_TEST_CLAIM_AHEAD"], let v = Int(s), v >= 0 else { return nil }
        return min(most, v)
    }()

    /// Jobs to hold claimed and not started yet.
    private(set) var ahead = 0
    /// Jobs the worker runs during one claim's round trip (at most `ahead`).
    private(set) var reserve = 0
    /// Whether a job that finishes claims again: the last claim came back
    /// full (there may be more), or a wake-up (new jobs) came when there
    /// was no room to claim. Otherwise new jobs come with a wake-up (the
    /// queue's NOTIFY; the one-second tick is the backstop), and claiming at
    /// each finished job only finds nothing again.
    private(set) var claimOnFinish = true
    /// Jobs finished per second, smoothed over claims.
    private var rate = 0.0
    private var finished = 0
    private var since = Monotonic.now()
    /// A claim's round trip in seconds, smoothed; when the one in flight went.
    private var latency = 0.0
    private var sent: UInt64 = 0

    mutating func didFinish() { finished += 1 }

    /// A claim goes to the database.
    mutating func claimSent() { sent = Monotonic.now() }

    /// A claim came back: `full` when it got all it asked for.
    mutating func claimed(full: Bool) {
        let now = Monotonic.now()
        if sent != 0 {
            let trip = Double(now &- sent) / 1e9
            latency = latency == 0 ? trip : 0.5 * latency + 0.5 * trip
            sent = 0
        }
        let seconds = Double(now &- since) / 1e9
        if seconds > 0 {
            let recent = Double(finished) / seconds
            rate = rate == 0 ? recent : 0.5 * rate + 0.5 * recent
            finished = 0
            since = now
        }
        ahead = full ? Self.fixedAhead ?? min(Self.most, Int(rate * Self.horizon)) : 0
        reserve = min(ahead, Int(rate * latency))
        claimOnFinish = full
    }

    /// How many to claim with `free` slots and `held` jobs claimed ahead
    /// (0: not now). A backlog is refilled once half of what is held ahead
    /// has started (or what is held would run out during the claim), not
    /// one job at a time, with what runs meanwhile on top. With no room
    /// now, the next job to finish claims: a wake-up is never lost
    /// (dropped, a worker whose last claim was short sat idle beside new
    /// jobs until the tick).
    mutating func toClaim(free: Int, held: Int) -> Int {
        let n = held <= max(ahead / 2, reserve) ? max(0, free + ahead + reserve - held) : 0
        if n == 0 { claimOnFinish = true }
        return n
    }
}

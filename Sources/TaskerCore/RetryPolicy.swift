#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `retry = {attempts, delay, backoff, factor, max_delay, jitter}` (README, Tasks).
/// `attempts` counts tries including the first; the delay before try k+1 is
/// `delay * factor^(k-1)` capped at `maxDelay`, or uniform in [d/2, d] with
/// jitter. The `when` predicate travels beside it (`TaskSpec.retryWhen`).
public struct RetryPolicy: Sendable, Equatable {
    public enum Backoff: String, Sendable { case exponential, fixed }

    public var attempts: Int
    public var delay: Double
    public var backoff: Backoff
    public var factor: Double
    public var maxDelay: Double
    public var jitter: Bool

    public init(attempts: Int = 1, delay: Double = 0.5, backoff: Backoff = .exponential,
                factor: Double = 2, maxDelay: Double = 60, jitter: Bool = false) {
        self.attempts = attempts
        self.delay = delay
        self.backoff = backoff
        self.factor = factor
        self.maxDelay = maxDelay
        self.jitter = jitter
    }

    public static var none: RetryPolicy { RetryPolicy() }

    /// Seconds to wait before the attempt after `failedAttempt` (1-based).
    public func delay(after failedAttempt: Int) -> Double {
        var d = delay
        if backoff == .exponential, failedAttempt > 1 {
            d = delay * pow(factor, Double(failedAttempt - 1))
        }
        if !d.isFinite || d > maxDelay { d = maxDelay }
        if d < 0 { d = 0 }
        if jitter, d > 0 { d = Double.random(in: (d / 2)...d) }
        return d
    }

    /// Whether a failure on attempt `attempt` may get another try (before
    /// asking any `when` predicate). Cancellation is never retried.
    public func allowsRetry(_ failure: TaskFailure, attempt: Int) -> Bool {
        attempt < attempts && failure.kind != .cancelled && failure.kind != .discarded
    }
}

import Foundation

/// Which failed HTTP attempts are worth another try (Alamofire's
/// RetryPolicy, with its gaps fixed): idempotent methods only; statuses 408,
/// 429, 500, 502, 503, 504; transport codes timeout, connect, dns, reset;
/// never a cancel. `Retry-After` says how long to wait.
///
///     HTTPRetryRule.shouldRetry(idempotent: true, status: 503, code: nil)   // true
public enum HTTPRetryRule {
    public static let retryableStatuses: Set<Int> = [408, 429, 500, 502, 503, 504]

    /// `status`: the response's, when the attempt got one; `code`: the
    /// transport failure's otherwise.
    public static func shouldRetry(idempotent: Bool, status: Int?, code: HTTPTransportError.Code?) -> Bool {
        guard idempotent else { return false }
        if let status { return retryableStatuses.contains(status) }
        return code?.isTransient ?? false
    }

    /// `Retry-After`: seconds, or an HTTP date (then the seconds from now).
    public static func retryAfterSeconds(_ value: String, now: Date = Date()) -> Double? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Double(trimmed), seconds.isFinite { return max(0, seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: trimmed) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }
}

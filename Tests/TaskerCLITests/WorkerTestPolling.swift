import Foundation

/// Polls `check` every 20 ms for at most `seconds`, on a thread of its own:
/// blocking one of the few threads async tests share (a `psql` a poll)
/// would delay other tests' reactions to their processes, and with them
/// what those tests see.
func poll(seconds: Double = 60, _ check: @escaping @Sendable () -> Bool) async -> Bool {
    await withCheckedContinuation { continuation in
        Thread {
            let deadline = Date(timeIntervalSinceNow: seconds)
            var ok = check()
            while !ok && Date() < deadline {
                usleep(20_000)
                ok = check()
            }
            continuation.resume(returning: ok)
        }.start()
    }
}

import Foundation

/// Writes to stderr with write(2). FileHandle's `write` traps when the
/// write fails (a closed pipe); a message that cannot be shown must not stop
/// the run.
public enum StandardError {
    public static func write(_ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { Foundation.write(STDERR_FILENO, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            bytes = bytes.dropFirst(n)
        }
    }
}

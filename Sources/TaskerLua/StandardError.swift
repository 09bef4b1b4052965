import TaskerCore
import Foundation

/// Writes to stderr with write(2). FileHandle's `write` traps when the
/// write fails (a closed pipe); a message that cannot be shown must not stop
/// the run.
public enum StandardError {
    /// `json`: `text` is JSON lines, masked so that they stay JSON (the
    /// plain mask, finding a secret across a quote, broke them).
    public static func write(_ text: String, json: Bool = false) {
        // every registered secret as *** (tasker's own output)
        let masked = json ? SecretMask.shared.maskJSON(text) : SecretMask.shared.mask(text)
        _ = writeAll(STDERR_FILENO, Array(masked.utf8))
    }
}

/// Writes all of `bytes` to `fd` with write(2), again after EINTR and short
/// writes; nil, or the reason it stopped (strerror).
func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> String? {
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { Foundation.write(fd, $0.baseAddress! + offset, bytes.count - offset) }
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { return String(cString: strerror(errno)) }
        offset += n
    }
    return nil
}

import TaskerCore
import Foundation

/// Writes to stderr with write(2). FileHandle's `write` traps when the
/// write fails (a closed pipe); a message that cannot be shown must not stop
/// the run.
public enum StandardError {
    public static func write(_ text: String) {
        // every registered secret as *** (tasker's own output)
        _ = writeAll(STDERR_FILENO, Array(SecretMask.shared.mask(text).utf8))
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

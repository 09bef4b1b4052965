#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Lets the loop stop an `fs` operation running on another thread. The
/// operation checks it between chunks, and where it waits for a FIFO's peer
/// or a slow device it waits in poll(2) on the file and on a wake-up pipe
/// that `cancel()` writes to: no thread stays blocked in open(2) or read(2)
/// once its task is gone, so a cancel, a timeout or a signal ends the run.
final class FileCancel: Sendable {
    private struct State {
        var cancelled = false
        /// The wake-up pipe, made at the first wait (most operations never
        /// wait): read end, write end.
        var wake: (Int32, Int32) = (-1, -1)
    }

    private let state = Mutex(State())

    deinit {
        state.withLock { s in
            if s.wake.0 >= 0 {
                close(s.wake.0)
                close(s.wake.1)
            }
        }
    }

    func cancel() {
        state.withLock { s in
            s.cancelled = true
            if s.wake.1 >= 0 {
                var byte: UInt8 = 1
                _ = write(s.wake.1, &byte, 1)
            }
        }
    }

    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Throws once the operation is cancelled.
    func check(_ path: String) throws(FSFailure) {
        if isCancelled { throw FSFailure.cancelled(path) }
    }

    /// Waits until `fd` polls ready for `events`, or at most `timeout` ms
    /// (-1: no limit); throws if the operation is cancelled meanwhile.
    func wait(_ fd: Int32, _ events: Int16, timeout: Int32 = -1, path: String) throws(FSFailure) {
        let wake: Int32 = try state.withLock { (s: inout State) throws(FSFailure) -> Int32 in
            if s.cancelled { throw FSFailure.cancelled(path) }
            if s.wake.0 < 0 {
                var p: [Int32] = [-1, -1]
                if pipe(&p) == 0 {
                    for end in p { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
                    s.wake = (p[0], p[1])
                }
            }
            return s.wake.0
        }
        // Without a wake-up pipe (out of descriptors) the flag is checked
        // every 50 ms instead.
        let limit: Int32 = wake >= 0 ? timeout : (timeout < 0 ? 50 : min(timeout, 50))
        var fds = [pollfd(fd: fd, events: events, revents: 0), pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
        let n = poll(&fds, nfds_t(fds.count), limit)
        if n < 0 && errno != EINTR { throw FSFailure("cannot wait for", path, errno) }
        try check(path)
    }
}

extension FSFailure {
    /// What a cancelled operation ends with (nobody reads it: its caller is gone).
    static func cancelled(_ path: String) -> FSFailure {
        FSFailure(message: "cancelled while working on '\(path)'", path: path)
    }
}

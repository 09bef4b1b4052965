import Foundation
import Synchronization

/// A pipe end the process reactor serves for the loop (an `io.popen`
/// file's). The reactor owns the descriptor from `add` on and is the only
/// thread that reads, writes or closes it; the loop only asks (more data,
/// these bytes, close) through the stream's lock and `ProcessReactor.poke()`.
protocol ReactorStream: AnyObject, Sendable {
    var fd: Int32 { get }
    /// On the reactor: the events it waits for now (poll(2)/epoll bits,
    /// which agree: POLLIN, POLLOUT; 0: none), or
    /// nil when it is finished (its descriptor closed): it then leaves.
    func interest() -> Int16?
    /// On the reactor: poll reported `revents` for it.
    func ready(_ revents: Int16, _ buffer: inout [UInt8])
}

/// The read end of a popen'd file: one chunk per request, so a reader that
/// wants no more (its buffer is full) leaves the child blocked on a full
/// pipe instead of growing memory. `deliver` runs on the reactor thread
/// with each chunk, then once with nil at the end of the stream (EOF or an
/// error); not after `close()`.
final class PipeReader: ReactorStream {
    let fd: Int32
    private let deliver: @Sendable ([UInt8]?) -> Void
    private struct State {
        var wanted = false
        var closing = false
        var done = false
    }
    private let state = Mutex(State())

    init(fd: Int32, deliver: @escaping @Sendable ([UInt8]?) -> Void) {
        self.fd = fd
        self.deliver = deliver
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    /// From the loop: read one more chunk.
    func request() {
        state.withLock { $0.wanted = true }
        ProcessReactor.shared.poke()
    }

    /// From the loop: tasker is done with it (the child then gets EPIPE).
    func close() {
        state.withLock { $0.closing = true }
        ProcessReactor.shared.poke()
    }

    func interest() -> Int16? {
        let (wanted, closing, done) = state.withLock { ($0.wanted, $0.closing, $0.done) }
        if closing || done {
            Foundation.close(fd)
            return nil
        }
        return wanted ? Int16(POLLIN) : 0
    }

    func ready(_ revents: Int16, _ buffer: inout [UInt8]) {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
        let closing: Bool = state.withLock { s in
            s.wanted = false
            if n <= 0 { s.done = true }
            return s.closing
        }
        if closing { return }
        deliver(n > 0 ? Array(buffer[0..<n]) : nil)
    }
}

/// The write end of a popen'd file: writes in the order given, each
/// reported once written (nil) or failed (the reason); a closed reader
/// fails what is queued with "Broken pipe". `close()` closes the descriptor
/// after the writes queued before it. Reports run on the reactor thread (or
/// the caller's, for a write after a failure).
final class PipeWriter: ReactorStream {
    let fd: Int32
    private struct Pending {
        var bytes: [UInt8]
        var offset = 0
        let done: @Sendable (String?) -> Void
    }
    private struct State {
        var queue: [Pending] = []
        var closing = false
        var broken: String?
    }
    private let state = Mutex(State())

    init(fd: Int32) {
        self.fd = fd
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    /// From the loop: queue `bytes`; `done` reports once.
    func write(_ bytes: [UInt8], done: @escaping @Sendable (String?) -> Void) {
        enum Outcome { case queued, nothingToWrite, failed(String) }
        let outcome: Outcome = state.withLock { s in
            if let broken = s.broken { return .failed(broken) }
            if s.closing { return .failed("file is closed") }
            if bytes.isEmpty && s.queue.isEmpty { return .nothingToWrite }
            s.queue.append(Pending(bytes: bytes, done: done))
            return .queued
        }
        switch outcome {
        case .queued: ProcessReactor.shared.poke()
        case .nothingToWrite: done(nil)
        case .failed(let reason): done(reason)
        }
    }

    func close() {
        state.withLock { $0.closing = true }
        ProcessReactor.shared.poke()
    }

    func interest() -> Int16? {
        let (pending, closing) = state.withLock { ($0.queue.count, $0.closing) }
        if pending > 0 { return Int16(POLLOUT) }
        if closing {
            Foundation.close(fd)
            return nil
        }
        return 0
    }

    func ready(_ revents: Int16, _ buffer: inout [UInt8]) {
        var reports: [(@Sendable (String?) -> Void, String?)] = []
        state.withLock { s in
            while !s.queue.isEmpty {
                let p = s.queue[0]
                if p.offset == p.bytes.count {
                    reports.append((p.done, nil))
                    s.queue.removeFirst()
                    continue
                }
                let n = p.bytes.withUnsafeBytes { Foundation.write(fd, $0.baseAddress! + p.offset, p.bytes.count - p.offset) }
                if n > 0 {
                    s.queue[0].offset += n
                    continue
                }
                if n < 0 && (errno == EAGAIN || errno == EINTR) { break }
                let reason = String(cString: strerror(n < 0 ? errno : EPIPE))
                s.broken = reason
                reports += s.queue.map { ($0.done, reason) }
                s.queue = []
            }
        }
        for (done, result) in reports { done(result) }
    }
}

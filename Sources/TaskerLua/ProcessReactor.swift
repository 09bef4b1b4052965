import Foundation
import Synchronization

/// One thread that watches every running child of `exec`/`sh`, `os.execute`
/// and `io.popen`: it polls their stdout and stderr pipes and their pidfds,
/// collects the output (and hands complete lines to a sink when streaming),
/// reaps the child when it exits, and reports once both pipes are drained.
/// It also reads and writes the pipes of popen'd files for the loop
/// (`PipeReader`, `PipeWriter`). A thread per child, as a general process
/// library uses, costs more than the child itself for short commands.
final class ProcessReactor: Sendable {
    /// The result of one child: its status (`exited`/`signaled`) and output.
    struct Finished: Sendable {
        var code: Int
        var stdout: [UInt8]
        var stderr: [UInt8]
        var overflow: Bool
        /// The wait status as waitpid(2) gave it.
        var status: Int32 = 0
    }

    final class Watch: @unchecked Sendable {
        // Safety: after `add`, only the reactor thread touches a Watch.
        let pid: pid_t
        let pidfd: Int32
        var fds: [Int32]
        var output: [[UInt8]] = [[], []]
        var partial: [[UInt8]] = [[], []]
        var status: Int32?
        var overflow = false
        let lineSink: (@Sendable (String) -> Void)?
        let prefix: String
        let done: @Sendable (Finished) -> Void

        init(_ child: ProcessSpawner.Child, prefix: String, lineSink: (@Sendable (String) -> Void)?,
             done: @escaping @Sendable (Finished) -> Void) {
            pid = child.pid
            pidfd = child.pidfd
            fds = [child.stdout, child.stderr]
            self.prefix = prefix
            self.lineSink = lineSink
            self.done = done
        }
    }

    static let shared = ProcessReactor()
    static let outputLimit = 64 << 20

    private let incoming = Mutex<[Watch]>([])
    private let incomingStreams = Mutex<[any ReactorStream]>([])
    private let wake: (read: Int32, write: Int32)

    private init() {
        var p: [Int32] = [-1, -1]
        _ = pipe(&p)
        for fd in p {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        }
        wake = (p[0], p[1])
        let thread = Thread { [self] in self.run() }
        thread.name = "tasker.processes"
        thread.start()
    }

    /// Watches `child` until it exits and its pipes are drained; `done`
    /// runs once, on the reactor thread.
    func add(_ child: ProcessSpawner.Child, prefix: String = "", lineSink: (@Sendable (String) -> Void)? = nil,
             done: @escaping @Sendable (Finished) -> Void) {
        for fd in [child.stdout, child.stderr] { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        incoming.withLock { $0.append(Watch(child, prefix: prefix, lineSink: lineSink, done: done)) }
        poke()
    }

    /// Reads or writes `stream` for the loop until it is finished.
    func add(_ stream: any ReactorStream) {
        incomingStreams.withLock { $0.append(stream) }
        poke()
    }

    /// Makes the reactor look at its streams again (one wants data or
    /// was given some to write, or is closing).
    func poke() {
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
    }

    private func run() {
        let wake = self.wake.read
        var watches: [Watch] = []
        var streams: [any ReactorStream] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            watches += incoming.withLock { list in
                defer { list.removeAll() }
                return list
            }
            streams += incomingStreams.withLock { list in
                defer { list.removeAll() }
                return list
            }
            var polls = [pollfd(fd: wake, events: Int16(POLLIN), revents: 0)]
            // Streams first (after the wake pipe): what they want now, and
            // those that are done leave.
            var polled: [any ReactorStream] = []
            streams.removeAll { stream in
                guard let events = stream.interest() else { return true }
                if events != 0 {
                    polls.append(pollfd(fd: stream.fd, events: events, revents: 0))
                    polled.append(stream)
                }
                return false
            }
            let firstWatch = polls.count
            var owners: [(Watch, Int)] = []  // index into fds, or -1 for the pidfd
            for w in watches {
                for (k, fd) in w.fds.enumerated() where fd >= 0 {
                    polls.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0))
                    owners.append((w, k))
                }
                if w.status == nil && w.pidfd >= 0 {
                    polls.append(pollfd(fd: w.pidfd, events: Int16(POLLIN), revents: 0))
                    owners.append((w, -1))
                }
            }
            // Without pidfds, a child that closed its pipes is reaped by
            // polling; without a wake pipe (made when descriptors ran out),
            // new work is noticed by polling.
            let timeout: Int32 = wake < 0 || watches.contains { $0.pidfd < 0 && $0.status == nil } ? 10 : -1
            let n = poll(&polls, nfds_t(polls.count), timeout)
            if n < 0 && errno != EINTR { usleep(1000) }
            if polls[0].revents != 0 {
                var sink = [UInt8](repeating: 0, count: 64)
                while read(wake, &sink, sink.count) > 0 {}
            }
            for (i, stream) in polled.enumerated() where polls[i + 1].revents != 0 {
                stream.ready(polls[i + 1].revents, &buffer)
            }
            for (i, (w, k)) in owners.enumerated() where polls[i + firstWatch].revents != 0 {
                if k < 0 {
                    Self.reap(w, blocking: true)
                } else {
                    Self.drain(w, k, &buffer)
                }
            }
            for w in watches where w.pidfd < 0 && w.status == nil { Self.reap(w, blocking: false) }
            watches.removeAll { w in
                guard w.status != nil, w.fds.allSatisfy({ $0 < 0 }) else { return false }
                Self.finish(w)
                return true
            }
        }
    }

    /// Reads what the pipe has; at EOF closes it.
    private static func drain(_ w: Watch, _ k: Int, _ buffer: inout [UInt8]) {
        let fd = w.fds[k]
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                if w.output[0].count + w.output[1].count + n > outputLimit {
                    if !w.overflow { w.overflow = true; killpg(w.pid, SIGKILL) }
                    continue
                }
                w.output[k].append(contentsOf: buffer[0..<n])
                if let sink = w.lineSink { emitLines(w, k, buffer[0..<n], sink) }
                continue
            }
            if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
            // EOF or an error: this stream is done.
            if let sink = w.lineSink, !w.partial[k].isEmpty {
                sink(w.prefix + String(decoding: w.partial[k], as: UTF8.self))
                w.partial[k] = []
            }
            close(fd)
            w.fds[k] = -1
            return
        }
    }

    /// Complete lines go to the sink whole; the rest waits for more.
    private static func emitLines(_ w: Watch, _ k: Int, _ chunk: ArraySlice<UInt8>, _ sink: @Sendable (String) -> Void) {
        var start = chunk.startIndex
        for i in chunk.indices where chunk[i] == UInt8(ascii: "\n") {
            w.partial[k].append(contentsOf: chunk[start..<i])
            sink(w.prefix + String(decoding: w.partial[k], as: UTF8.self))
            w.partial[k].removeAll(keepingCapacity: true)
            start = i + 1
        }
        w.partial[k].append(contentsOf: chunk[start...])
    }

    private static func reap(_ w: Watch, blocking: Bool) {
        var status: Int32 = 0
        let r = waitpid(w.pid, &status, blocking ? 0 : WNOHANG)
        if r == w.pid || (r < 0 && errno == ECHILD) {
            w.status = r == w.pid ? status : 0
            if w.pidfd >= 0 { close(w.pidfd) }
        }
    }

    private static func finish(_ w: Watch) {
        let s = w.status ?? 0
        // WIFEXITED / WEXITSTATUS / WTERMSIG, spelled out (C macros).
        let code = (s & 0x7f) == 0 ? Int((s >> 8) & 0xff) : 128 + Int(s & 0x7f)
        w.done(Finished(code: code, stdout: w.output[0], stderr: w.output[1], overflow: w.overflow, status: s))
    }
}

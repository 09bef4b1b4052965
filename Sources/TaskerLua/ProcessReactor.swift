import Foundation
import Synchronization
import TaskerCore

/// Watches every running child of `exec`/`sh`, `os.execute` and
/// `io.popen`: one epoll set holds their stdout and stderr pipes and their
/// pidfds (registered once, not rebuilt at every wake as a poll(2) list
/// was), collects the output (and hands complete lines to a sink when
/// streaming), reaps the child when it exits, and reports once both pipes
/// are drained. It also reads and writes the pipes of popen'd files and
/// the `--watch` inotify descriptor for the loop (`ReactorStream`). A
/// thread per child, as a general process library uses, costs more than
/// the child itself for short commands.
///
/// Where it waits: a `tasker run` hands the set to its event loop
/// (`host(on:)`), whose thread then waits on it instead of sleeping; the
/// reactor needs no thread of its own. Otherwise (several runtimes in one
/// process, as in tests) it starts its own thread at the first use.
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
        /// Done at exit, pipes or not (`finishAtExit`).
        var atExit = false
        /// When the reactor saw the child's exit while a pipe was still open
        /// (0: not yet): something it started in the background holds it.
        var exitedAt: UInt64 = 0
        /// `done` has run (the pipes are then read only to be emptied).
        var reported = false
        /// When the command times out (monotonic ns; 0: never): a child that
        /// exited is reported before then, whatever still holds its pipes.
        var deadline: UInt64 = 0
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
    /// How long the pipes may stay open after the child exits before it is
    /// reported with the output so far (`sh("server &")`: the background
    /// process keeps them open; a shell's `$(…)` would wait for it).
    static let backgroundGrace: UInt64 = 1_000_000_000
    /// Children reported with their pipes still held open whose pipes are
    /// still emptied, at most: past this, the oldest's are closed (what
    /// holds them gets EPIPE), so descriptors stay bounded however many
    /// commands leave something running.
    static let drainedAtMost = 32

    private let incoming = Mutex<[Watch]>([])
    private let finishingAtExit = Mutex<Set<pid_t>>([])
    private let incomingStreams = Mutex<[any ReactorStream]>([])
    private let wake: (read: Int32, write: Int32)

    /// Who waits on the set: nobody yet, its own thread, or a loop.
    private enum Waiter { case none, thread, loop }
    private let waiter = Mutex(Waiter.none)
    /// The loop that waits on the set, while it does (`host(on:)`).
    private let hostLoop = Mutex<EventLoop?>(nil)
    /// The set and what is registered in it. Touched only by the one
    /// waiter (the reactor's thread, or the hosting loop's thread).
    private let state: State

    private init() {
        var p: [Int32] = [-1, -1]
        _ = pipe(&p)
        for fd in p {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        }
        wake = (p[0], p[1])
        state = State(wake: wake.read)
    }

    /// Makes `loop`'s thread the one that waits on the set (before anything
    /// was added); false when the reactor already has a waiter.
    @discardableResult
    func host(on loop: EventLoop) -> Bool {
        let hosted = waiter.withLock { w in
            guard w == .none else { return false }
            w = .loop
            return true
        }
        if hosted {
            hostLoop.withLock { $0 = loop }
            loop.poller = LoopHost(reactor: self)
        }
        return hosted
    }

    /// The hosting loop has ended: the reactor's own thread takes over
    /// whatever is still registered (children a script left running, the
    /// `--watch` descriptor), so they are still reaped and drained.
    func unhost() {
        let wasHosted = waiter.withLock { w in
            guard w == .loop else { return false }
            w = .none
            return true
        }
        guard wasHosted else { return }
        hostLoop.withLock { $0 = nil }
        let idle = state.watches.isEmpty && state.streams.isEmpty
            && incoming.withLock { $0.isEmpty } && incomingStreams.withLock { $0.isEmpty }
        if !idle { ensureWaiter() }
    }

    /// Starts the reactor's own thread unless a loop waits on the set.
    private func ensureWaiter() {
        let start = waiter.withLock { w in
            guard w == .none else { return false }
            w = .thread
            return true
        }
        guard start else { return }
        let thread = Thread { [self] in
            while true { self.pass(timeout: nil) }
        }
        thread.name = "tasker.processes"
        thread.start()
    }

    /// The loop's side of a hosted reactor.
    private final class LoopHost: LoopPoller {
        let reactor: ProcessReactor
        init(reactor: ProcessReactor) { self.reactor = reactor }

        func poll(until deadline: UInt64?) {
            var timeout: Int64? = nil
            if let deadline {
                let now = Monotonic.now()
                timeout = deadline > now ? Int64(clamping: deadline - now) : 0  // a year-long timer fits no Int64
            }
            reactor.pass(timeout: timeout)
        }

        func wake() { reactor.poke() }
    }

    /// Watches `child` until it exits and its pipes are drained; `done`
    /// runs once, on the reactor thread.
    /// `deadline`: when the command (or its task) times out, monotonic ns,
    /// 0 if never (see `Watch.deadline`).
    func add(_ child: ProcessSpawner.Child, prefix: String = "", lineSink: (@Sendable (String) -> Void)? = nil,
             deadline: UInt64 = 0, done: @escaping @Sendable (Finished) -> Void) {
        for fd in [child.stdout, child.stderr] { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        let watch = Watch(child, prefix: prefix, lineSink: lineSink, done: done)
        watch.deadline = deadline
        incoming.withLock { $0.append(watch) }
        ensureWaiter()
        poke()
    }

    /// The child `pid` is reported once it has exited, with what its pipes
    /// hold then, not at their EOF: an ssh that goes through a master
    /// hands its descriptors to the master, which keeps them open while
    /// the remote command runs; a stopped one must not wait for that.
    func finishAtExit(_ pid: pid_t) {
        finishingAtExit.withLock { _ = $0.insert(pid) }
        poke()
    }

    /// Reads or writes `stream` for the loop until it is finished.
    func add(_ stream: any ReactorStream) {
        incomingStreams.withLock { $0.append(stream) }
        ensureWaiter()
        poke()
    }

    /// Makes the reactor look at its streams again (one wants data or
    /// was given some to write, or is closing) and take new children.
    /// The hosting loop's own thread (most callers) need not: it is not
    /// waiting, and it starts its next wait with a pass that looks; a
    /// write would only make that wait return at once, for nothing.
    func poke() {
        if hostLoop.withLock({ $0?.inLoop ?? false }) { return }
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
    }

    /// Who a registration in the epoll set is for.
    private enum Owner {
        case wake
        case output(Watch, Int)
        case exit(Watch)
        case stream(any ReactorStream)
    }

    /// A stream and its registration (token 0: none; it wants nothing now).
    private struct StreamEntry {
        let stream: any ReactorStream
        var token: UInt64 = 0
        var events: UInt32 = 0
    }

    /// The waiter's state: the epoll set and what is registered in it.
    private final class State: @unchecked Sendable {
        // Safety: only the reactor's one waiter (its thread, or the hosting
        // loop's thread) calls `pass`, the only user of these fields.
        /// Without an epoll set (descriptors ran out at the first use)
        /// every descriptor is tried each 10 ms: reads are non-blocking.
        let epoll = Epoll()
        let wake: Int32
        var owners: [UInt64: Owner] = [:]
        var nextToken: UInt64 = 1
        var watches: [Watch] = []
        var streams: [StreamEntry] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)

        init(wake: Int32) {
            self.wake = wake
            if wake >= 0 {
                owners[0] = .wake
                epoll?.add(wake, events: Epoll.readable, token: 0)
            }
        }

        func register(_ fd: Int32, _ events: UInt32, _ owner: Owner) -> UInt64 {
            let token = nextToken
            nextToken += 1
            owners[token] = owner
            epoll?.add(fd, events: events, token: token)
            return token
        }
    }

    /// One round: takes in new children and streams, waits up to `timeout`
    /// ns (nil: until something happens) and handles what is ready.
    private func pass(timeout: Int64?) {
        let st = state
        // Taken before the new children: a request comes after its child's `add`.
        let atExit = finishingAtExit.withLock { set in defer { set.removeAll() }; return set }
        // Streams first: one that closed its descriptor leaves the set
        // before a new child's pipe can be registered under that number.
        st.streams += incomingStreams.withLock { list in
            defer { list.removeAll() }
            return list.map { StreamEntry(stream: $0) }
        }
        var kept = 0
        for var entry in st.streams {
            let wanted = entry.stream.interest().map { UInt32(UInt16(bitPattern: $0)) }
            if entry.token != 0 && wanted != entry.events {
                if wanted != nil { st.epoll?.remove(entry.stream.fd) }  // nil: closed, gone from the set
                st.owners[entry.token] = nil
                entry.token = 0
            }
            guard let wanted else { continue }
            if wanted != 0 && entry.token == 0 { entry.token = st.register(entry.stream.fd, wanted, .stream(entry.stream)) }
            entry.events = wanted
            st.streams[kept] = entry
            kept += 1
        }
        st.streams.removeSubrange(kept...)
        for w in incoming.withLock({ list in defer { list.removeAll() }; return list }) {
            st.watches.append(w)
            for (k, fd) in w.fds.enumerated() where fd >= 0 { _ = st.register(fd, Epoll.readable, .output(w, k)) }
            if w.pidfd >= 0 { _ = st.register(w.pidfd, Epoll.readable, .exit(w)) }
        }
        var exitedAlready = false
        if !atExit.isEmpty {
            for w in st.watches where atExit.contains(w.pid) {
                w.atExit = true
                exitedAlready = exitedAlready || w.status != nil
            }
        }
        // Without pidfds, a child that closed its pipes is reaped by
        // polling; without a wake pipe (made when descriptors ran out),
        // new work is noticed by polling.
        let polling = st.epoll == nil || wake.read < 0 || st.watches.contains { $0.pidfd < 0 && $0.status == nil }
        var wait = timeout ?? -1
        if exitedAlready { wait = 0 }  // reported below, without waiting for anything else
        let started = Monotonic.now()
        for w in st.watches where w.exitedAt != 0 && !w.reported {
            let due = Self.reportDue(w)
            let left = due > started ? Int64(clamping: due - started) : 0
            if wait < 0 || left < wait { wait = left }
        }
        if polling && (wait < 0 || wait > 10_000_000) { wait = 10_000_000 }
        var ready: [(UInt64, UInt32)] = []
        if let epoll = st.epoll {
            let n = epoll.wait(timeout: wait) { ready.append(($0, $1)) }
            if n < 0 && errno != EINTR && wait != 0 { usleep(1000) }
        } else {
            if wait != 0 { usleep(UInt32(min(wait, 10_000_000) / 1000)) }
            ready = st.owners.map { token, owner in
                if case .stream = owner, let e = st.streams.first(where: { $0.token == token }) { return (token, e.events) }
                return (token, Epoll.readable)
            }
        }
        for (token, events) in ready {
            switch st.owners[token] {
            case .wake?:
                var sink = [UInt8](repeating: 0, count: 64)
                while read(wake.read, &sink, sink.count) > 0 {}
            case .output(let w, let k)?:
                if Self.drain(w, k, &st.buffer) { st.owners[token] = nil }
            case .exit(let w)?:
                Self.reap(w, blocking: st.epoll != nil)
                if w.status != nil { st.owners[token] = nil }
            case .stream(let stream)?:
                stream.ready(Int16(truncatingIfNeeded: events), &st.buffer)
            case nil:
                break  // a descriptor closed since this wait began
            }
        }
        for w in st.watches where w.pidfd < 0 && w.status == nil { Self.reap(w, blocking: false) }
        let now = Monotonic.now()
        st.watches.removeAll { w in
            guard w.status != nil else { return false }
            if !w.reported && !w.atExit && w.fds.contains(where: { $0 >= 0 }) {
                // Exited, yet a pipe is open: a background child holds it.
                // Reported after the grace with what came; the pipes are
                // still emptied (a writer would block on a full one) until
                // that child ends, at the latest with the run.
                if w.exitedAt == 0 { w.exitedAt = now }
                if now >= Self.reportDue(w) {
                    w.reported = true
                    Self.flushPartialLines(w)
                    Self.finish(w)
                }
            }
            if w.atExit && w.fds.contains(where: { $0 >= 0 }) {
                // what is there now, then the pipes go (leaving the set as they close)
                for k in w.fds.indices where w.fds[k] >= 0 { _ = Self.drain(w, k, &st.buffer) }
                Self.closePipes(w, st)
            }
            guard w.fds.allSatisfy({ $0 < 0 }) else { return false }
            if !w.reported { Self.finish(w) }
            return true
        }
        var draining = st.watches.filter { $0.reported }
        while draining.count > Self.drainedAtMost {
            let oldest = draining.removeFirst()
            Self.closePipes(oldest, st)
            st.watches.removeAll { $0 === oldest }
        }
    }

    /// Closes the pipes of `w` still open and forgets their registrations.
    private static func closePipes(_ w: Watch, _ st: State) {
        for k in w.fds.indices where w.fds[k] >= 0 {
            // out of the set first: a copy of the pipe elsewhere would keep it registered
            st.epoll?.remove(w.fds[k])
            close(w.fds[k])
            w.fds[k] = -1
        }
        st.owners = st.owners.filter { _, owner in
            if case .output(let o, _) = owner { return o !== w }
            return true
        }
    }

    /// When an exited child whose pipes are still held is reported: after
    /// the grace, or `timeoutMargin` before its command would time out (a
    /// command that ended in time must not fail for what it left running).
    private static func reportDue(_ w: Watch) -> UInt64 {
        let graceEnd = w.exitedAt &+ backgroundGrace
        guard w.deadline != 0 else { return graceEnd }
        let beforeTimeout = w.deadline > timeoutMargin ? w.deadline - timeoutMargin : 0
        return min(graceEnd, max(w.exitedAt, beforeTimeout))
    }

    /// Room for the report to reach the loop before the timeout does: 20 ms
    /// was too little on a loaded machine (a CI run's task timed out with
    /// its command's report on the way).
    static let timeoutMargin: UInt64 = 250_000_000

    /// Reads what the pipe has; at EOF closes it (and returns true).
    private static func drain(_ w: Watch, _ k: Int, _ buffer: inout [UInt8]) -> Bool {
        let fd = w.fds[k]
        guard fd >= 0 else { return true }
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                if w.reported { continue }  // reported already: emptied, not kept
                if w.output[0].count + w.output[1].count + n > outputLimit {
                    if !w.overflow { w.overflow = true; killpg(w.pid, SIGKILL) }
                    continue
                }
                w.output[k].append(contentsOf: buffer[0..<n])
                if let sink = w.lineSink { emitLines(w, k, buffer[0..<n], sink) }
                continue
            }
            if n < 0 && (errno == EAGAIN || errno == EINTR) { return false }
            // EOF or an error: this stream is done.
            flushPartialLine(w, k)
            close(fd)
            w.fds[k] = -1
            return true
        }
    }

    /// A streamed line without its newline goes to the sink as it is.
    private static func flushPartialLine(_ w: Watch, _ k: Int) {
        if let sink = w.lineSink, !w.partial[k].isEmpty {
            sink(w.prefix + String(decoding: w.partial[k], as: UTF8.self))
            w.partial[k] = []
        }
    }

    private static func flushPartialLines(_ w: Watch) {
        for k in w.partial.indices { flushPartialLine(w, k) }
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

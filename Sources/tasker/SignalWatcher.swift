import Foundation
import Synchronization
import TaskerCore
import TaskerLua

/// SIGINT, SIGTERM and SIGHUP: the first cancels everything (runaway Lua is
/// stopped by the hook) and lets the run end with its summary and exit code
/// 128 + signal; a second kills every process group the run started and
/// exits at once.
final class SignalWatcher {
    /// Handlers run on the inbox's thread, one at a time.
    private let inbox = SignalInbox.shared
    private let count = SignalCount()

    static let handled: [Int32] = [SIGINT, SIGTERM, SIGHUP]

    func start(_ runtime: LuaRuntime) {
        let handle = runtime.interruptHandle
        let groups = runtime.processGroups
        let target = LoopBound(runtime, loop: runtime.loop)
        let count = self.count
        for sig in Self.handled {
            inbox.handle(sig) { sig in
                let seen = count.n.add(1, ordering: .relaxed).newValue
                let first = handle.request(sig)
                // One lock for the first signal and the after-run handler:
                // recorded here and read by `afterRun` as one step, so a
                // signal as the run ends is seen by one side or the other
                // (two relaxed atomics could each miss the other's write).
                let late = count.state.withLock { s -> (@Sendable (Int32) -> Void)? in
                    if s.first == 0 { s.first = first }
                    return s.late
                }
                if seen > 1 { Self.exitNow(128 + first, groups: groups) }
                if let late {
                    late(sig)
                    return
                }
                let answered = SetOnce()
                target.loop.execute {
                    answered.set()
                    target.value.interrupt(signal: sig)
                }
                Self.exitUnlessAnswered(answered, code: 128 + first, groups: groups)
            }
        }
        watchPause(runtime)
    }

    /// How long the run's thread has to take up a stopping signal.
    /// Long: a C function (a pattern match over a huge string) may run this
    /// long legitimately, and the signal then should still end it cleanly.
    static let answerWait = 10.0

    /// A loop that does not take up the signal within `answerWait` is stuck
    /// where the hook cannot reach (a `__gc` finalizer that loops: Lua runs
    /// finalizers with hooks off; a C call that blocks): the signal then
    /// ends the run as a second one would, instead of being ignored.
    private static func exitUnlessAnswered(_ answered: SetOnce, code: Int32, groups: ProcessGroups) {
        let t = Thread {
            let until = Date(timeIntervalSinceNow: answerWait)
            while Date() < until {
                if answered.isSet { return }
                usleep(20_000)
            }
            if answered.isSet { return }
            exitNow(code, groups: groups, saying: "tasker: the run has not taken up the signal in 10 s (busy in a C function "
                    + "or a __gc finalizer, where the hook cannot stop it); exiting now, without the summary")
        }
        t.start()
    }

    /// SIGUSR1 pauses starts (running tasks go on), SIGUSR2 resumes them:
    /// a rollout can be held half-way from outside.
    private func watchPause(_ runtime: LuaRuntime) {
        let target = LoopBound(runtime, loop: runtime.loop)
        for (sig, pause) in [(SIGUSR1, true), (SIGUSR2, false)] {
            inbox.handle(sig) { _ in
                target.loop.execute {
                    let rt = target.value
                    if pause { rt.pauseStarts() } else { rt.resumeStarts() }
                    rt.logNotice(pause ? "paused: nothing new starts until SIGUSR2 (running tasks go on)" : "resumed")
                }
            }
        }
    }

    /// SIGWINCH redraws the status line for the terminal's new width.
    func watchResize(_ status: StatusLine) {
        inbox.handle(SIGWINCH) { _ in status.resized() }
    }

    /// After the run: a first signal calls `handler` (the loop is done).
    /// Returns the signal that came before (0: none): it may have come too
    /// late to stop the run, and the caller waits only briefly for what is
    /// quick to record.
    func afterRun(_ handler: @escaping @Sendable (Int32) -> Void) -> Int32 {
        count.state.withLock { s -> Int32 in
            s.late = handler
            return s.first
        }
    }

    /// The first signal received (0: none).
    var received: Int32 { count.state.withLock { $0.first } }

    /// The run is over: pausing and redrawing are too. INT, TERM and HUP
    /// stay caught until the process exits (one now still sets the exit
    /// code, see `caught`; a second exits at once), never the default
    /// action that would kill it without its summary.
    func stop() {
        for sig in [SIGUSR1, SIGUSR2, SIGWINCH] { inbox.release(sig, ignore: true) }
    }

    /// The process is about to exit: INT, TERM and HUP act as by default.
    func restoreDefaults() {
        for sig in Self.handled { inbox.release(sig) }
    }

    /// The stopping signal this run got, if any, up to now: the first the
    /// handler recorded, else one the C handler caught that its thread has
    /// not read yet (a signal in the run's last microseconds).
    var caught: Int32 {
        let first = received
        if first != 0 { return first }
        return Self.handled.first { inbox.wasCaught($0) } ?? 0
    }

    /// The second signal: every process group killed (also one started
    /// meanwhile), a last word if stderr can take it without waiting, what
    /// the script printed flushed if stdout can, then out — with _exit,
    /// not exit(), whose handlers and destructors would run while the loop
    /// thread may be inside Lua. Nothing here may block: a stalled terminal
    /// or pipe must not keep the process alive.
    static func exitNow(_ code: Int32, groups: ProcessGroups, saying message: String = "tasker: interrupted again, exiting now") -> Never {
        groups.killAllForExit()
        if writable(STDERR_FILENO) {
            let text = Array("\n\(message)\n".utf8)
            _ = text.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
        }
        if writable(STDOUT_FILENO) { fflush(nil) }
        _exit(code)
    }

    private static func writable(_ fd: Int32) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        return poll(&p, 1, 0) == 1 && p.revents & Int16(POLLOUT) != 0
    }
}

/// How many of the signals arrived (handlers run on the inbox's thread).
final class SignalCount: Sendable {
    let n = Atomic<Int>(0)
    /// The first signal (0: none yet), and what a signal does once the run
    /// has ended: under one lock.
    let state = Mutex<(first: Int32, late: (@Sendable (Int32) -> Void)?)>((0, nil))
}

/// Set once, read from another thread.
final class SetOnce: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .relaxed) }
    var isSet: Bool { value.load(ordering: .relaxed) }
}

/// The signal that arrived after the run ended (0: none).
final class LateSignal: Sendable {
    private let value = Atomic<Int32>(0)
    func set(_ sig: Int32) { value.store(sig, ordering: .relaxed) }
    var signal: Int32 { value.load(ordering: .relaxed) }
}

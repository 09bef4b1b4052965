import Foundation
#if canImport(Glibc)
import Glibc
#endif

// Every program the CLI tests start goes through `startChild`, and every
// wait for one through `waitForExit`. Foundation's Process on Linux has two
// traps for a test process that starts many children at once:
//
// - It learns of a child's exit from a socketpair whose child end is not
//   close-on-exec. A Process started on another thread in the same instant
//   inherits that end, and while it lives the first child never reads as
//   exited: `isRunning` stays true, `waitUntilExit` spins forever. Starts
//   are serialised here, and exits are read from the kernel (`waitid` with
//   WNOWAIT, which leaves the reaping to Foundation), never from Foundation
//   alone.
// - The child inherits the signal mask of the thread that starts it, and
//   Swift's concurrency threads block nearly every signal: a child that
//   does not unblock them (a Python server, `sleep`) ignores SIGTERM. The
//   mask is cleared while the child starts.

private let startLock = NSLock()

/// Starts `p` (see above).
func startChild(_ p: Process) throws {
    startLock.lock()
    defer { startLock.unlock() }
    var none = sigset_t(), old = sigset_t()
    sigemptyset(&none)
    pthread_sigmask(SIG_SETMASK, &none, &old)
    defer { pthread_sigmask(SIG_SETMASK, &old, nil) }
    try p.run()
}

/// How long any program a test starts may run: far beyond what the
/// slowest needs on a loaded machine, far below CI's budget.
let exitLimit = 300.0

/// Added to stderr when a child was killed at `exitLimit`.
let killedAtTheLimit = "\n[test harness: killed after \(Int(exitLimit)) s]"

/// The child's exit status (or the signal that ended it, as Foundation's
/// `terminationStatus` says), once it has exited; nil while it runs.
func exitStatus(_ p: Process) -> Int32? {
    if !p.isRunning { return p.terminationStatus }
    var info = siginfo_t()
    guard waitid(P_PID, id_t(p.processIdentifier), &info, WEXITED | WNOHANG | WNOWAIT) == 0,
          info._sifields._sigchld.si_pid == p.processIdentifier else {
        // still running, or reaped by Foundation in between
        return p.isRunning ? nil : p.terminationStatus
    }
    return info._sifields._sigchld.si_status
}

/// Waits for `p` to exit, at most `seconds`; then kills it (SIGKILL).
/// Returns its status and whether it had to be killed: a child that hangs
/// fails its test instead of hanging the suite.
@discardableResult
func waitForExit(_ p: Process, seconds: Double = exitLimit) -> (status: Int32, killed: Bool) {
    let deadline = Date(timeIntervalSinceNow: seconds)
    while Date() < deadline {
        if let status = exitStatus(p) { return (status, false) }
        usleep(10_000)
    }
    kill(p.processIdentifier, SIGKILL)
    while true {
        if let status = exitStatus(p) { return (status, true) }
        usleep(10_000)
    }
}

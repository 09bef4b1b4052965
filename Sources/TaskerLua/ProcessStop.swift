#if canImport(Glibc)
import Glibc
#endif
import TaskerCore

/// How tasker stops a child it started: SIGTERM to its process group (and
/// SIGCONT, so that a paused one can act on it), SIGKILL 2 s later unless
/// it has exited by then. Returns the timer of the SIGKILL.
enum ProcessStop {
    static let grace = 2.0

    static func terminate(group: pid_t, on loop: EventLoop, hasExited: @escaping () -> Bool) -> LoopTimer {
        killpg(group, SIGTERM)
        killpg(group, SIGCONT)
        return loop.schedule(after: grace) {
            if !hasExited() { killpg(group, SIGKILL) }
        }
    }
}

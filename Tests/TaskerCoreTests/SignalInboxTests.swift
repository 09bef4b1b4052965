import Dispatch
import Synchronization
import Testing
@testable import TaskerCore
#if canImport(Glibc)
import Glibc
#endif

@Suite struct SignalInboxTests {
    /// Every signal reaches its handler, from whichever thread the kernel
    /// delivers it on: sent one at a time, each is waited for.
    @Test func everySignalSentReachesTheHandler() {
        let arrived = DispatchSemaphore(value: 0)
        let seen = Atomic<Int>(0)
        SignalInbox.shared.handle(SIGUSR2) { sig in
            if sig == SIGUSR2 { seen.add(1, ordering: .relaxed) }
            arrived.signal()
        }
        defer { SignalInbox.shared.release(SIGUSR2, ignore: true) }
        var missed = 0
        for _ in 0..<200 {
            kill(getpid(), SIGUSR2)
            if arrived.wait(timeout: .now() + 5) == .timedOut { missed += 1 }
        }
        #expect(missed == 0)
        #expect(seen.load(ordering: .relaxed) == 200)
    }

    /// A signal blocked on every thread when it came (a parent's mask) is
    /// pending: catching it delivers it instead of losing it.
    @Test func aSignalPendingWhileBlockedArrivesOnceCaught() {
        let arrived = DispatchSemaphore(value: 0)
        let box = Mutex<Int32>(0)
        // Blocked on this thread and sent to it: pending here until the
        // inbox catches it and unblocks it on the calling thread.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGWINCH)
        pthread_sigmask(SIG_BLOCK, &set, nil)
        pthread_kill(pthread_self(), SIGWINCH)
        SignalInbox.shared.handle(SIGWINCH) { sig in
            box.withLock { $0 = sig }
            arrived.signal()
        }
        defer { SignalInbox.shared.release(SIGWINCH, ignore: true) }
        #expect(arrived.wait(timeout: .now() + 5) == .success)
        #expect(box.withLock { $0 } == SIGWINCH)
    }
}

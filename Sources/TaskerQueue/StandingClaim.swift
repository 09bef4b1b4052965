import Synchronization

/// Free slots an idle worker offers to its listener's thread, which claims
/// them at the next NOTIFY of new jobs (0: none offered). The loop offers
/// and withdraws; the listener takes: whoever swaps the number out owns it.
final class StandingClaim: Sendable {
    private let slots = Atomic<Int>(0)

    func offer(_ n: Int) { slots.store(n, ordering: .releasing) }

    /// The listener's side: the slots offered, now its to claim (0: none).
    func take() -> Int { slots.exchange(0, ordering: .acquiringAndReleasing) }

    /// The loop's side: true when `n` was still there to take back, false
    /// when the listener took it first.
    func withdraw(_ n: Int) -> Bool {
        slots.compareExchange(expected: n, desired: 0, ordering: .acquiringAndReleasing).exchanged
    }
}

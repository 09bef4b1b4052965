import Foundation
import Synchronization
import TaskerCore

/// Connections opened as the process starts, while it parses its command
/// line and prepares the run: a run's first statement waited for libpq to
/// load (~6 ms: it and the ~30 libraries it needs) and then for the server
/// to start a backend for each connection (~4-6 ms each), one after the
/// other behind ~10 ms of the process's own start. The first connections
/// the process makes to that URL take them (`PGConnection.open`); any later
/// one (a reconnect) connects as usual. A failure is kept and thrown to
/// the one that takes it: the same error, at the same place, as without.
/// One that nobody takes within a few seconds is closed (a command that
/// failed its checks, a worker that opens fewer), so no idle backend stays.
public enum PGConnectionsAhead {
    /// Opens `count` connections to `url`, each on a thread of its own;
    /// each waits `unclaimedAfter` seconds to be taken.
    public static func open(url: String, count: Int, unclaimedAfter: Double = 10) {
        for _ in 0..<count {
            let opening = Opening(url: url, unclaimedAfter: unclaimedAfter)
            openings.withLock { $0.append(opening) }
            Thread { opening.connect() }.start()
        }
    }

    private static let openings = Mutex<[Opening]>([])

    /// One connection opened ahead for `url`, waiting for it if it is still
    /// being made (nil: none left for that URL).
    static func take(url: String) -> Result<PGConnection, PGError>? {
        let mine = openings.withLock { list -> Opening? in
            guard let i = list.firstIndex(where: { $0.url == url && $0.claim() }) else { return nil }
            return list.remove(at: i)
        }
        return mine?.handOver()
    }

    private static func forget(_ opening: Opening) {
        openings.withLock { list in list.removeAll { $0 === opening } }
    }

    /// A connection being opened; whoever claims it first owns it: a taker
    /// or, past `unclaimedAfter`, the thread that opened it, which closes it.
    private final class Opening: Sendable {
        let url: String
        private let unclaimedAfter: Double
        private let claimed = Atomic<Bool>(false)
        private let made = DispatchSemaphore(value: 0)
        private let taken = DispatchSemaphore(value: 0)
        /// Set once by the opening thread, then moved out by the owner.
        private let result = Mutex<Result<PGConnection, PGError>?>(nil)

        init(url: String, unclaimedAfter: Double) {
            self.url = url
            self.unclaimedAfter = unclaimedAfter
        }

        func claim() -> Bool { claimed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged }

        /// On its own thread: connects, then waits to be taken.
        func connect() {
            let url = self.url
            result.withLock { $0 = Self.connection(to: url) }
            made.signal()
            if taken.wait(timeout: .now() + unclaimedAfter) == .success { return }
            guard claim() else { return }  // taken just now
            PGConnectionsAhead.forget(self)
            _ = result.withLock { $0.take() }  // closed as it goes
        }

        private static func connection(to url: String) -> Result<PGConnection, PGError> {
            do { return .success(try PGConnection(url: url)) } catch { return .failure(PGError(error)) }
        }

        /// The claimer's: the connection (or why it could not be made).
        func handOver() -> Result<PGConnection, PGError> {
            made.wait()
            taken.signal()
            return result.withLock { $0.take() } ?? .failure(PGError(message: "no connection", sqlState: nil))
        }
    }
}

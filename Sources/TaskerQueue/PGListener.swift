import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// LISTENs on channels with a connection of its own, on its own thread:
/// waits in poll(2) on the socket and a wake-up pipe, hands notifications
/// to `onNotify` (on its thread), and calls `onTick` every `tick` seconds
/// as well: the slow poll that covers a notification lost while the
/// connection was down. Reconnects after a failure with backoff (0.1 s
/// doubling to 5 s), and ticks at once when it is back.
public final class PGListener: Sendable {
    private let url: String
    private let channels: [String]
    private let tick: Double
    private let onNotify: @Sendable (String, String, PGConnection) -> Void
    private let onTick: @Sendable () -> Void
    private let onError: @Sendable (PGError) -> Void
    private let setUp: @Sendable (PGConnection) throws -> Void
    /// A pipe whose write end `stop` uses to interrupt poll(2).
    private let wake: [Int32]
    private let stopping = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)

    public convenience init(url: String, channels: [String], tick: Double,
                            onNotify: @escaping @Sendable (_ channel: String, _ payload: String) -> Void,
                            onTick: @escaping @Sendable () -> Void,
                            onError: @escaping @Sendable (PGError) -> Void = { _ in }) {
        self.init(url: url, channels: channels, tick: tick, onNotify: { channel, payload, _ in onNotify(channel, payload) },
                  onTick: onTick, onError: onError)
    }

    /// `setUp` runs on each new connection before its LISTENs; `onNotify`
    /// gets the connection too, and may run statements on it (a worker
    /// claims there: one thread hop fewer from a new job to its start).
    init(url: String, channels: [String], tick: Double,
         setUp: @escaping @Sendable (PGConnection) throws -> Void = { _ in },
         onNotify: @escaping @Sendable (_ channel: String, _ payload: String, _ connection: PGConnection) -> Void,
         onTick: @escaping @Sendable () -> Void,
         onError: @escaping @Sendable (PGError) -> Void = { _ in }) {
        self.url = url
        self.channels = channels
        self.tick = tick
        self.setUp = setUp
        self.onNotify = onNotify
        self.onTick = onTick
        self.onError = onError
        var fds: [Int32] = [-1, -1]
        _ = pipe(&fds)
        wake = fds
        let ready = DispatchSemaphore(value: 0)
        let thread = Thread { [self] in run(ready) }
        thread.name = "tasker.listen"
        thread.start()
        // The first LISTEN is in place (or failed) before anyone relies on it.
        ready.wait()
    }

    public func stop() {
        stopping.store(true, ordering: .relaxed)
        var b: UInt8 = 1
        _ = write(wake[1], &b, 1)
        done.wait()
        close(wake[0])
        close(wake[1])
    }

    private func connect() -> PGConnection? {
        do {
            let c = try PGConnection.open(url: url)
            try setUp(c)
            for ch in channels { try c.execute("LISTEN \(c.quotedIdentifier(ch))") }
            return c
        } catch {
            onError(PGError(error))
            return nil
        }
    }

    /// Whether the first connection (the one `init` waits for) was made.
    public var listenedAtStart: Bool { startedListening.load(ordering: .relaxed) }
    private let startedListening = Atomic<Bool>(false)

    private func run(_ ready: DispatchSemaphore) {
        var conn = connect()
        startedListening.store(conn != nil, ordering: .relaxed)
        ready.signal()
        var lastTick = Date()
        var backoff = StoreOutage.firstBackoff
        while !stopping.load(ordering: .relaxed) {
            if conn == nil || conn!.isBroken {
                conn = nil
                // The server is away: try again after 0.1 s, doubling to 5 s.
                var fds = [pollfd(fd: wake[0], events: Int16(POLLIN), revents: 0)]
                _ = poll(&fds, 1, Int32(backoff * 1000))
                if stopping.load(ordering: .relaxed) { break }
                conn = connect()
                backoff = conn == nil ? min(backoff * 2, StoreOutage.maxBackoff) : StoreOutage.firstBackoff
                // Back (a notification may have been missed meanwhile), or
                // a tick that came due while away.
                if conn != nil || Date().timeIntervalSince(lastTick) >= tick {
                    lastTick = Date()
                    onTick()
                }
                continue
            }
            var fds = [pollfd(fd: conn!.socket, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wake[0], events: Int16(POLLIN), revents: 0)]
            let left = max(0, tick - Date().timeIntervalSince(lastTick))
            _ = poll(&fds, 2, Int32(left * 1000) + 1)
            if stopping.load(ordering: .relaxed) { break }
            if fds[0].revents != 0 {
                do {
                    // Until none is left: those that came while `onNotify`
                    // ran a statement were read off the socket with its
                    // answer, and poll(2) would not report them.
                    var batch = try conn!.notifications()
                    while !batch.isEmpty {
                        for n in batch { onNotify(n.channel, n.payload, conn!) }
                        batch = conn!.isBroken ? [] : try conn!.notifications()
                    }
                } catch {
                    onError(PGError(error))
                    conn = nil
                }
            }
            if Date().timeIntervalSince(lastTick) >= tick {
                lastTick = Date()
                onTick()
            }
        }
        done.signal()
    }
}

import Foundation
import TaskerCore

/// What a session reports about the server going away and coming back.
public enum PGOutageEvent: Sendable {
    /// The connection broke or could not be made; reconnecting.
    case lost(String)
    /// Connected again after this many seconds.
    case back(Double)
    /// Past the outage limit: the message names the server (password as `***`).
    case gaveUp(String)
}

/// One connection to PostgreSQL that is opened again when the server went
/// away (a restart, a stop, a dropped connection): an outage, not a
/// failure. Work given to `run` waits while the server is away, trying
/// again after 0.1 s, doubling to 5 s, and runs again on the new
/// connection; past the outage limit (none: forever) it fails. Used by one
/// thread at a time, its owner's.
final class PGSession {
    let url: String
    private let limit: Double?
    private let setUp: (PGConnection) throws -> Void
    private let onEvent: (PGOutageEvent) -> Void
    private var connection: PGConnection?
    private var downSince: UInt64?
    /// Seconds the server has been away (0: it is there).
    var downFor: Double { downSince.map { Double(Monotonic.now() &- $0) / 1e9 } ?? 0 }
    private var backoff = StoreOutage.firstBackoff
    /// Set past the limit: everything fails at once from then on (but
    /// see `triesAfterGivingUp`).
    private(set) var gaveUp: PGError?
    /// Past the limit, each `run` still makes one attempt to connect (no
    /// waiting) and goes on if the server is back: for a journal, whose
    /// end is worth recording once it can be, not for a run that failed.
    var triesAfterGivingUp = false

    /// How long each statement's answer is waited for (see
    /// `PGConnection.defaultAnswerWait`).
    private let answerWait: Double?

    init(url: String, limit: Double?, answerWait: Double? = PGConnection.defaultAnswerWait,
         setUp: @escaping (PGConnection) throws -> Void = { _ in },
         onEvent: @escaping (PGOutageEvent) -> Void = { _ in }) {
        self.url = url
        self.limit = limit
        self.answerWait = answerWait
        self.setUp = setUp
        self.onEvent = onEvent
    }

    /// Runs `body` with a live connection (`again`: it ran before and the
    /// connection broke under it, so what it sent may or may not have been
    /// committed: `body` must be safe to run twice). With `patient` false a
    /// server that cannot be reached fails within `startGrace` (set-up: a
    /// wrong URL shows at once, a restart's moment of silence is waited
    /// out); one that was reached and then went away, or says it is
    /// shutting down or starting up, is an outage like any other.
    /// `pause` waits between tries and returns false to stop waiting (the
    /// owner is stopping).
    func run<T>(patient: Bool = true, pause: (Double) -> Bool,
                _ body: (PGConnection, _ again: Bool) throws -> T) throws -> T {
        var again = false
        var reached = false
        var conflicts = 0
        while true {
            if let gaveUp {
                // Past the limit everything fails at once, unless this
                // session tries again (one connection, no waiting).
                guard triesAfterGivingUp, (try? live()) != nil else { throw gaveUp }
                self.gaveUp = nil
            }
            let c: PGConnection
            do {
                c = try live()
                reached = true
            } catch let failure as SetUpFailure where failure.lost {
                // Reached, then lost during the set-up (a restart just
                // then): an outage like any other.
                reached = true
                try wait(after: failure.error, pause)
                continue
            } catch {
                let e = (error as? SetUpFailure)?.error ?? PGError(error)
                guard patient || reached || e.sqlState == "57P03" || (e.sqlState == "08001" && withinStartGrace())
                else { throw e }
                try wait(after: e, pause)
                continue
            }
            do {
                let result = try body(c, again)
                if downSince != nil { markBack() }
                return result
            } catch {
                let e = PGError(error)
                // A deadlock's victim (or a serialization failure) was rolled
                // back whole: tried again at once, a few times.
                if Self.isTransientConflict(e), conflicts < Self.conflictRetries {
                    conflicts += 1
                    continue
                }
                guard Self.isConnectionLoss(e, c) else { throw e }
                connection = nil
                again = true
                if downSince == nil {
                    // The server may be back already (one dropped
                    // connection): the first reconnect is at once.
                    markDown(e)
                } else {
                    // Lost again within the outage (a reconnect that then
                    // got no answer: a statement blocked past its wait):
                    // the backoff and the limit apply.
                    try wait(after: e, pause)
                }
            }
        }
    }

    /// How long a server that refuses at the start is tried again: a
    /// restart has a moment when nothing listens.
    static let startGrace = 1.0

    private func withinStartGrace() -> Bool {
        guard let since = downSince else { return true }
        return Double(Monotonic.now() &- since) / 1e9 < Self.startGrace
    }

    /// Drops the connection (stopping).
    func close() { connection = nil }

    /// The set-up failed on a connection that was made: `lost` when the
    /// connection went with it.
    private struct SetUpFailure: Error {
        var error: PGError
        var lost: Bool
    }

    private func live() throws -> PGConnection {
        if let c = connection {
            if !c.isBroken { return c }
            // Broken under a statement whose error its caller set aside
            // (a best-effort look): an outage all the same, said and ended
            // like one. Reconnected quietly, its owner missed the `back`
            // that makes a worker hand back what a restart may have lost
            // (seen: a worker that never said it reconnected).
            markDown(PGError(message: "the connection was lost", sqlState: "08006"))
        }
        connection = nil
        do {
            let c = try PGConnection.open(url: url, answerWait: answerWait)
            do {
                try PGConnection.dropStatementsOfAGoneClient(c)
                try setUp(c)
            } catch {
                let e = PGError(error)
                throw SetUpFailure(error: e, lost: Self.isConnectionLoss(e, c))
            }
            connection = c
            return c
        } catch let failure as SetUpFailure {
            throw failure
        } catch {
            throw PGError(error)
        }
    }

    /// A statement succeeded after an outage: the server is back (a
    /// connection alone is not: it may get no answer).
    private func markBack() {
        if let since = downSince { onEvent(.back(Double(Monotonic.now() &- since) / 1e9)) }
        downSince = nil
        backoff = StoreOutage.firstBackoff
    }

    private func markDown(_ e: PGError) {
        guard downSince == nil else { return }
        downSince = Monotonic.now()
        backoff = StoreOutage.firstBackoff
        onEvent(.lost(Self.oneLine(e.message)))
    }

    /// Waits before the next try, or gives up past the limit.
    private func wait(after e: PGError, _ pause: (Double) -> Bool) throws {
        markDown(e)
        let down = Double(Monotonic.now() &- (downSince ?? Monotonic.now())) / 1e9
        if let limit, down >= limit {
            let why = PGError(message: "PostgreSQL at \(StoreOutage.redacted(url)) unreachable for \(Self.seconds(limit)): \(Self.oneLine(e.message))",
                              sqlState: e.sqlState)
            gaveUp = why
            onEvent(.gaveUp(why.message))
            throw why
        }
        let delay = limit.map { min(backoff, max(0.01, $0 - down)) } ?? backoff
        backoff = min(backoff * 2, StoreOutage.maxBackoff)
        guard pause(delay) else { throw e }
    }

    /// libpq's messages span lines ("…failed: Connection refused\n\tIs the
    /// server running…"): one line for a log or an error.
    static func oneLine(_ s: String) -> String {
        s.split(whereSeparator: { $0 == "\n" || $0 == "\r" || $0 == "\t" })
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.joined(separator: " ")
    }

    static func seconds(_ s: Double) -> String {
        s == s.rounded() ? "\(Int(s)) s" : "\(s) s"
    }

    static let conflictRetries = 3

    /// A deadlock (40P01) or a serialization failure (40001): the statement
    /// was rolled back and may simply be run again.
    static func isTransientConflict(_ e: PGError) -> Bool {
        e.sqlState == "40P01" || e.sqlState == "40001"
    }

    /// Whether `e` means the connection is gone (the statement may be tried
    /// again on a new one), not that the statement failed.
    static func isConnectionLoss(_ e: PGError, _ c: PGConnection) -> Bool {
        if c.isBroken { return true }
        guard let state = e.sqlState else { return false }
        // 08: connection exception; 57P01-03: the server is shutting down,
        // crashed, or not accepting connections yet.
        return state.hasPrefix("08") || ["57P01", "57P02", "57P03"].contains(state)
    }
}

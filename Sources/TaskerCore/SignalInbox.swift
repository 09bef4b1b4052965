import CSignalPipe
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Signals delivered to Swift code on one thread of their own, in arrival
/// order. The C handler only writes the signal's number to a pipe; this
/// thread reads it and calls the handler registered for it.
///
/// Not libdispatch's signal sources: on Linux their handler re-sends the
/// signal to the thread that registered the source (a pool thread that may
/// have exited since, and the signal is lost) and blocks every signal on
/// the thread it interrupted. A Ctrl-C as a run ended was lost about three
/// times in a hundred.
public final class SignalInbox: Sendable {
    public typealias Handler = @Sendable (Int32) -> Void

    /// The process has one set of signal dispositions, so one inbox.
    public static let shared = SignalInbox()

    private let handlers = Handlers()

    private init() {
        let fd = tasker_signal_pipe_open()
        precondition(fd >= 0, "tasker: cannot create the signal pipe (errno \(errno))")
        let context = Unmanaged.passRetained(ReaderContext(fd: fd, handlers: handlers)).toOpaque()
        var thread = pthread_t()
        let started = pthread_create(&thread, nil, { raw in
            let context = Unmanaged<ReaderContext>.fromOpaque(raw!).takeRetainedValue()
            context.read()
            return nil
        }, context)
        precondition(started == 0, "tasker: cannot start the signal thread (\(started))")
        pthread_detach(thread)
    }

    /// From now on `sig` calls `handler` on the inbox's thread (replacing
    /// any handler before). The signal is unblocked on the calling thread
    /// once caught: one the parent left blocked still arrives, and one
    /// already pending arrives now instead of being lost.
    public func handle(_ sig: Int32, _ handler: @escaping Handler) {
        handlers.table.withLock { $0[Int(UInt8(truncatingIfNeeded: sig))] = handler }
        _ = tasker_signal_pipe_catch(sig)
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, sig)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    /// Whether `sig` was caught at any time since it was first handled: as
    /// soon as the C handler ran, before this inbox's thread read it.
    public func wasCaught(_ sig: Int32) -> Bool { tasker_signal_pipe_caught(sig) != 0 }

    /// `sig` gets its default action again (SIGINT, SIGTERM, SIGHUP end the
    /// process), or is ignored.
    public func release(_ sig: Int32, ignore: Bool = false) {
        handlers.table.withLock { $0[Int(UInt8(truncatingIfNeeded: sig))] = nil }
        signal(sig, ignore ? SIG_IGN : SIG_DFL)
    }
}

/// The handler for each signal, shared by the inbox and its thread: by
/// number (the pipe carries it as a byte), an array and not a dictionary,
/// whose first use costs more of a run's start than all its lookups.
private final class Handlers: Sendable {
    let table = Mutex<[SignalInbox.Handler?]>(Array(repeating: nil, count: 256))
}

/// What the reader thread owns: the pipe's read end and the handlers.
private final class ReaderContext: Sendable {
    let fd: Int32
    let handlers: Handlers

    init(fd: Int32, handlers: Handlers) {
        self.fd = fd
        self.handlers = handlers
    }

    func read() {
        tasker_signal_pipe_name_reader()
        var bytes = [UInt8](repeating: 0, count: 64)
        while true {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            for byte in bytes[..<n] {
                let sig = Int32(byte)
                let handler = handlers.table.withLock { $0[Int(byte)] }
                handler?(sig)
            }
        }
    }
}

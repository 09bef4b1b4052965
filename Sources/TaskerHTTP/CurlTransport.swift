import CCurlLoader
import Foundation
import Synchronization

/// `HTTPTransport` on libcurl's multi interface, driven by one thread of
/// its own (README, HTTP).
///
/// Not FoundationNetworking's URLSession, which drives the same libcurl
/// through libdispatch: it kept a write source armed on every socket
/// waiting for a response (about 3 s of CPU burnt per 4 s request), took
/// 2-4 libdispatch threads, and its dispatch hops capped throughput near
/// 3,000 requests a second here. Configured for a tool rather than a
/// browser: no cookies, cache or credential store; http and https only;
/// redirects followed here, so secret headers never travel to another
/// origin.
public final class CurlTransport: HTTPTransport {
    private let driver: CurlDriver

    /// Fails when libcurl (loaded only now, see `CCurlLoader`) is not on
    /// the machine.
    public init(connectionsPerHost: Int) throws(HTTPTransportError) {
        var err = [CChar](repeating: 0, count: 512)
        guard tasker_curl_load(&err, err.count) == 0 else {
            let why = String(decoding: err.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            // out of descriptors or memory: say that, not that it is missing
            if why.contains("Too many open files") || why.contains("Cannot allocate memory") {
                throw HTTPTransportError(.other, "cannot load libcurl: \(why)")
            }
            throw HTTPTransportError(.other, "HTTP needs libcurl (Debian: libcurl4): \(why)")
        }
        guard let driver = CurlDriver(connectionsPerHost: max(1, connectionsPerHost)) else {
            throw HTTPTransportError(.other, "libcurl could not start (curl_multi_init failed)")
        }
        self.driver = driver
    }

    deinit { driver.stop() }

    public func limitConnections(perHost n: Int) { driver.limitConnections(perHost: max(1, n)) }

    public func send(_ request: HTTPRequest,
                     completion: @escaping @Sendable (Result<HTTPResponse, HTTPTransportError>) -> Void) -> HTTPExchange {
        let exchange = CurlExchange(request, driver: driver, completion: completion)
        driver.start(exchange)
        return exchange
    }
}

/// The thread that owns the multi handle: it starts what was sent, cancels
/// what was cancelled, lets libcurl move every transfer along and waits in
/// `curl_multi_poll` (woken by `curl_multi_wakeup` from other threads).
final class CurlDriver: Sendable {
    /// The multi handle. Safety: used only on the driver's thread, except
    /// `curl_multi_wakeup`, which libcurl documents as callable from any
    /// thread; freed by that thread as its last act.
    private struct Multi: @unchecked Sendable { let handle: UnsafeMutableRawPointer }
    private let multi: Multi

    private struct Inbox {
        var starts: [CurlExchange] = []
        var cancels: [CurlExchange] = []
        var stopping = false
        /// A new per-host connection limit to apply.
        var connectionsPerHost: Int?
        /// The multi handle is gone: nothing may wake it.
        var stopped = false
    }
    private let inbox = Mutex(Inbox())

    init?(connectionsPerHost: Int) {
        guard let handle = tasker_curl_multi_init() else { return nil }
        // As many connections per host as requests may be in flight (more
        // would queue inside libcurl, out of the engine's sight).
        Self.limit(handle, connectionsPerHost)
        multi = Multi(handle: handle)
        Thread { [self] in
            Thread.current.name = "tasker-http"  // set from the thread itself: Linux shows it
            run()
        }.start()
    }

    // The wake-ups happen under the inbox's lock, so none comes after the
    // thread has freed the multi handle.

    func start(_ e: CurlExchange) {
        let accepted = inbox.withLock { box -> Bool in
            guard !box.stopping else { return false }
            box.starts.append(e)
            _ = tasker_curl_multi_wakeup(multi.handle)
            return true
        }
        // never begun: nothing else touches it
        if !accepted { e.end(.failure(HTTPTransportError(.cancelled, "cancelled"))) }
    }

    func cancel(_ e: CurlExchange) {
        inbox.withLock { box in
            guard !box.stopped else { return }
            box.cancels.append(e)
            _ = tasker_curl_multi_wakeup(multi.handle)
        }
    }

    func limitConnections(perHost n: Int) {
        inbox.withLock { box in
            guard !box.stopping else { return }
            box.connectionsPerHost = n
            _ = tasker_curl_multi_wakeup(multi.handle)
        }
    }

    private static func limit(_ m: UnsafeMutableRawPointer, _ n: Int) {
        _ = tasker_curl_multi_setopt_long(m, Int32(TASKER_CURLMOPT_MAX_HOST_CONNECTIONS), n)
        _ = tasker_curl_multi_setopt_long(m, Int32(TASKER_CURLMOPT_MAXCONNECTS), max(n, 16))
    }

    func stop() {
        inbox.withLock { box in
            guard !box.stopping else { return }
            box.stopping = true
            _ = tasker_curl_multi_wakeup(multi.handle)
        }
    }

    private func run() {
        let m = multi.handle
        // Transfers by their easy handle.
        var active: [UnsafeMutableRawPointer: CurlExchange] = [:]
        while true {
            let work = inbox.withLock { box -> Inbox in
                let taken = box
                box.starts.removeAll(keepingCapacity: true)
                box.cancels.removeAll(keepingCapacity: true)
                box.connectionsPerHost = nil
                return taken
            }
            if let n = work.connectionsPerHost { Self.limit(m, n) }
            for e in work.starts {
                if let easy = e.begin(on: m) { active[easy] = e }
            }
            for e in work.cancels {
                guard let easy = e.easy, active.removeValue(forKey: easy) != nil else { continue }
                _ = tasker_curl_multi_remove_handle(m, easy)
                e.end(.failure(HTTPTransportError(.cancelled, "cancelled")))
            }
            if work.stopping {
                for (easy, e) in active {
                    _ = tasker_curl_multi_remove_handle(m, easy)
                    e.end(.failure(HTTPTransportError(.cancelled, "cancelled")))
                }
                inbox.withLock { $0.stopped = true }
                _ = tasker_curl_multi_cleanup(m)
                return
            }
            // Every perform is followed by reading what finished: a transfer
            // that ended unread would leave the poll below nothing to wait on.
            var hopped = true
            while hopped {
                hopped = false
                var running: Int32 = 0
                _ = tasker_curl_multi_perform(m, &running)
                var done: UnsafeMutableRawPointer?
                var code: Int32 = 0
                while tasker_curl_multi_next_done(m, &done, &code) == 1 {
                    guard let easy = done, let e = active.removeValue(forKey: easy) else { continue }
                    _ = tasker_curl_multi_remove_handle(m, easy)
                    // A redirect to follow starts its next hop at once.
                    if let next = e.transferEnded(code, on: m) {
                        active[next] = e
                        hopped = true
                    }
                }
            }
            // libcurl returns sooner when one of its own timeouts is due.
            // Idle too, a second at most: a multi handle made while the
            // process was out of descriptors has no wake-up pipe, and its
            // new requests and the run's stop then waited a minute here.
            _ = tasker_curl_multi_poll(m, 1000)
        }
    }
}

import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A small HTTP/1.1 server on 127.0.0.1 (a random port) for the HTTP tests.
/// Started once per test process; tests keep apart by their own `key`s.
///
///     /echo                 200, JSON of method, path, query, headers, body
///     /status/N             status N (`?retry_after=S` adds Retry-After)
///     /delay?s=X            200 after X seconds
///     /gate?key=K&at=N&linger=L&max=T
///                           held until N requests of K are held at once (then
///                           answered L seconds later, with any that came
///                           meanwhile) or for T seconds; `maxInFlight(K)` is
///                           the most held at once
///     /redirect?to=URL      302 to URL
///     /token?realm=R        a new token for realm R (counts refreshes)
///     /bearer?realm=R       200 with the realm's current token, else 401
///     /items/N              the same check (realm ""), 200 {"item":"N"}
///     /flaky?key=K&fail=N&status=S[&retry_after=T]
///                           status S for the first N calls of K, then 200
///     /count?key=K          how many calls K has had
///     /drop                 promises 100000 bytes, sends 10, closes
///     /bigheader?bytes=N    a response header N bytes long
///     /lie?declared=N&chunks=M  declares N bytes, streams M × 64 KiB, 10 ms apart
///     /large?bytes=N        N bytes
///     /collect?key=K        counts POSTs of K and the items in their JSON arrays (K.items)
///     /page?key=K&p=P&of=N  page P of N: {"items": [...], "next": url or null}
///     /metrics/NAME         {"service": NAME, "requests": …, "errors": …}
final class TestHTTPServer: Sendable {
    static let shared: TestHTTPServer = {
        do { return try TestHTTPServer() } catch { fatalError("cannot start the test HTTP server: \(error)") }
    }()

    struct State {
        var counters: [String: Int] = [:]
        var tokens: [String: Int] = [:]
        /// `/gate` requests waiting for their answer, by key and arrival.
        var held: [String: [Int: HeldRequest]] = [:]
        var maxInFlight: [String: Int] = [:]
        /// What happened at each key's gate and when: read when a test fails.
        var gateLog: [String: [String]] = [:]
        /// Keys whose held requests are about to be answered together.
        var releasing: Set<String> = []
        var nextRequest = 0
    }

    /// A `/gate` request and how to answer it (on the server's loop).
    struct HeldRequest: Sendable {
        let answer: @Sendable () -> Void
    }

    let port: Int
    let state = NIOLockedValueBox(State())
    private let group: MultiThreadedEventLoopGroup
    private let channel: Channel

    var base: String { "http://127.0.0.1:\(port)" }

    init() throws {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let state = self.state
        channel = try ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 512)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(TestHTTPHandler(state: state))
                }
            }
            .bind(host: "127.0.0.1", port: 0).wait()
        port = channel.localAddress!.port!
    }

    func count(_ key: String) -> Int { state.withLockedValue { $0.counters[key] ?? 0 } }
    func refreshes(_ realm: String) -> Int { state.withLockedValue { $0.tokens[realm] ?? 0 } }
    func maxInFlight(_ key: String) -> Int { state.withLockedValue { $0.maxInFlight[key] ?? 0 } }
    func gateLog(_ key: String) -> String { state.withLockedValue { ($0.gateLog[key] ?? []).joined(separator: "; ") } }
}

/// Seconds since the test process's server started, for the gate's log.
private let serverEpoch = ContinuousClock.now
private func sinceStart() -> String {
    let d = (ContinuousClock.now - serverEpoch).components
    return String(format: "%.3f", Double(d.seconds) + Double(d.attoseconds) / 1e18)
}

private final class TestHTTPHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let state: NIOLockedValueBox<TestHTTPServer.State>
    var head: HTTPRequestHead?
    var body = ByteBuffer()

    init(state: NIOLockedValueBox<TestHTTPServer.State>) { self.state = state }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            body.clear()
        case .body(var b):
            body.writeBuffer(&b)
        case .end:
            guard let head else { return }
            route(context, head)
        }
    }

    private func route(_ context: ChannelHandlerContext, _ head: HTTPRequestHead) {
        let components = URLComponents(string: head.uri)
        let path = components?.path ?? head.uri
        var query: [String: String] = [:]
        for item in components?.queryItems ?? [] { query[item.name] = item.value ?? "" }
        let keepAlive = head.isKeepAlive

        if path == "/echo" {
            var headers: [String: String] = [:]
            for (name, value) in head.headers { headers[name.lowercased()] = value }
            let object: [String: Any] = ["method": head.method.rawValue, "path": path,
                                         "query": components?.percentEncodedQuery ?? "", "headers": headers,
                                         "body": body.getString(at: body.readerIndex, length: body.readableBytes) ?? ""]
            let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
            respond(context, .ok, String(decoding: data, as: UTF8.self), keepAlive,
                    extra: [("content-type", "application/json")])
        } else if path.hasPrefix("/status/"), let code = Int(path.dropFirst("/status/".count)) {
            var extra: [(String, String)] = []
            if let ra = query["retry_after"] { extra.append(("retry-after", ra)) }
            respond(context, HTTPResponseStatus(statusCode: code), "status \(code)", keepAlive, extra: extra)
        } else if path == "/delay" {
            let seconds = Double(query["s"] ?? "0") ?? 0
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: .nanoseconds(Int64(seconds * 1e9))) {
                let (handler, context) = bound.value
                handler.respond(context, .ok, "slept", keepAlive)
            }
        } else if path == "/gate" {
            hold(context, key: query["key"] ?? "", at: Int(query["at"] ?? "1") ?? 1,
                 linger: Double(query["linger"] ?? "0") ?? 0, limit: Double(query["max"] ?? "5") ?? 5, keepAlive)
        } else if path == "/redirect", let to = query["to"] {
            respond(context, .found, "", keepAlive, extra: [("location", to)])
        } else if path == "/token" {
            let realm = query["realm"] ?? ""
            let n = state.withLockedValue { s -> Int in
                s.tokens[realm, default: 0] += 1
                return s.tokens[realm]!
            }
            respond(context, .ok, "{\"token\":\"tok-\(n)\"}", keepAlive, extra: [("content-type", "application/json")])
        } else if path == "/bearer" || path.hasPrefix("/items/") {
            let realm = query["realm"] ?? ""
            let n = state.withLockedValue { $0.tokens[realm] ?? 0 }
            if n > 0, head.headers["authorization"].first == "Bearer tok-\(n)" {
                respond(context, .ok, path == "/bearer" ? "hello \(realm)" : "{\"item\":\"\(path.dropFirst(7))\"}", keepAlive,
                        extra: path == "/bearer" ? [] : [("content-type", "application/json")])
            } else {
                respond(context, .unauthorized, "no", keepAlive)
            }
        } else if path == "/flaky" {
            let key = query["key"] ?? ""
            let fail = Int(query["fail"] ?? "0") ?? 0
            let n = state.withLockedValue { s -> Int in
                s.counters[key, default: 0] += 1
                return s.counters[key]!
            }
            if n <= fail {
                var extra: [(String, String)] = []
                if let ra = query["retry_after"] { extra.append(("retry-after", ra)) }
                respond(context, HTTPResponseStatus(statusCode: Int(query["status"] ?? "503") ?? 503), "fail \(n)",
                        keepAlive, extra: extra)
            } else {
                respond(context, .ok, "ok after \(n - 1)", keepAlive)
            }
        } else if path == "/count" {
            let key = query["key"] ?? ""
            respond(context, .ok, "\(state.withLockedValue { $0.counters[key] ?? 0 })", keepAlive)
        } else if path == "/drop" {
            var h = HTTPHeaders()
            h.add(name: "content-length", value: "100000")
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: h))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "0123456789")))), promise: nil)
            context.close(promise: nil)
        } else if path == "/bigheader" {
            let n = Int(query["bytes"] ?? "200000") ?? 200000
            respond(context, .ok, "ok", keepAlive, extra: [("x-big", String(repeating: "h", count: n))])
        } else if path == "/lie" {
            // Declares `declared` bytes, then streams 64 KiB every 10 ms,
            // `chunks` times at most (a bounded "endless" body), then closes.
            let declared = query["declared"] ?? "100000000000"
            let chunks = Int(query["chunks"] ?? "300") ?? 300
            var h = HTTPHeaders()
            h.add(name: "content-length", value: declared)
            context.writeAndFlush(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: h))), promise: nil)
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            let chunk = ByteBuffer(repeating: 0x78, count: 64 << 10)
            @Sendable func send(_ left: Int) {
                guard left > 0, bound.value.channel.isActive else { bound.value.close(promise: nil); return }
                bound.value.writeAndFlush(NIOAny(HTTPServerResponsePart.body(.byteBuffer(chunk)))).whenComplete { _ in
                    bound.value.eventLoop.scheduleTask(in: .milliseconds(10)) { send(left - 1) }
                }
            }
            send(chunks)
        } else if path == "/collect" {
            let key = query["key"] ?? ""
            let items = (try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [Any])?.count ?? 0
            state.withLockedValue { s in
                s.counters[key, default: 0] += 1
                s.counters[key + ".items", default: 0] += items
            }
            respond(context, .ok, "{\"ok\":true}", keepAlive, extra: [("content-type", "application/json")])
        } else if path == "/page" {
            let key = query["key"] ?? "", p = Int(query["p"] ?? "1") ?? 1, of = Int(query["of"] ?? "1") ?? 1
            state.withLockedValue { $0.counters[key, default: 0] += 1 }
            let items = (1...3).map { "\"\(key)-\(p)-\($0)\"" }.joined(separator: ",")
            let next = p < of ? "\"/page?key=\(key)&p=\(p + 1)&of=\(of)\"" : "null"
            respond(context, .ok, "{\"items\":[\(items)],\"next\":\(next)}", keepAlive,
                    extra: [("content-type", "application/json")])
        } else if path.hasPrefix("/metrics/") {
            let name = String(path.dropFirst("/metrics/".count))
            respond(context, .ok, "{\"service\":\"\(name)\",\"requests\":\(name.count * 100),\"errors\":\(name.count % 3)}",
                    keepAlive, extra: [("content-type", "application/json")])
        } else if path == "/large" {
            let n = Int(query["bytes"] ?? "0") ?? 0
            respond(context, .ok, String(repeating: "x", count: n), keepAlive)
        } else {
            respond(context, .notFound, "not found", keepAlive)
        }
    }

    /// `/gate`: holds the request (see the type's docs). The count of held
    /// requests is what the client has in flight: a request is counted
    /// from its arrival until the server answers it.
    private func hold(_ context: ChannelHandlerContext, key: String, at: Int, linger: Double, limit: Double,
                      _ keepAlive: Bool) {
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let request = TestHTTPServer.HeldRequest {
            let (handler, context) = bound.value
            handler.respond(context, .ok, "released", keepAlive)
        }
        let (id, release) = state.withLockedValue { s -> (Int, Bool) in
            s.nextRequest += 1
            s.held[key, default: [:]][s.nextRequest] = request
            let n = s.held[key]!.count
            s.maxInFlight[key] = max(s.maxInFlight[key] ?? 0, n)
            s.gateLog[key, default: []].append("\(sinceStart()) #\(s.nextRequest) held (\(n))")
            guard n >= at, !s.releasing.contains(key) else { return (s.nextRequest, false) }
            s.releasing.insert(key)
            return (s.nextRequest, true)
        }
        let state = self.state
        if release {
            // The linger leaves time for a request over the cap to arrive
            // and be counted before the held ones are answered.
            context.eventLoop.scheduleTask(in: .nanoseconds(Int64(linger * 1e9))) {
                let answered = state.withLockedValue { s -> [TestHTTPServer.HeldRequest] in
                    s.releasing.remove(key)
                    s.gateLog[key, default: []].append("\(sinceStart()) released \(s.held[key]?.count ?? 0)")
                    return (s.held.removeValue(forKey: key) ?? [:]).sorted { $0.key < $1.key }.map(\.value)
                }
                for request in answered { request.answer() }
            }
        }
        context.eventLoop.scheduleTask(in: .nanoseconds(Int64(limit * 1e9))) {
            state.withLockedValue { s -> TestHTTPServer.HeldRequest? in
                guard let held = s.held[key]?.removeValue(forKey: id) else { return nil }
                s.gateLog[key, default: []].append("\(sinceStart()) #\(id) answered at its deadline")
                return held
            }?.answer()
        }
    }

    private func respond(_ context: ChannelHandlerContext, _ status: HTTPResponseStatus, _ text: String,
                         _ keepAlive: Bool, extra: [(String, String)] = []) {
        var headers = HTTPHeaders()
        headers.add(name: "content-length", value: "\(text.utf8.count)")
        for (k, v) in extra { headers.add(name: k, value: v) }
        if !keepAlive { headers.add(name: "connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: text)))), promise: nil)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            if !keepAlive { bound.value.close(promise: nil) }
        }
    }
}

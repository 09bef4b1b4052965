import CLua
import CLuaShim
import Foundation
import Logging
import TaskerCore
import TaskerHTTP

/// What an HTTP failure carries besides its message: the transport code,
/// or the response whose status failed the attempt (a retryable status).
struct HTTPFailureInfo: Sendable {
    var code: HTTPTransportError.Code?
    var url: String
    var response: HTTPResponse?
}

/// The body of every request in the requests' engine: it reads the request
/// table (as the interceptors left it) and hands it to the transport.
final class LuaRequestBody: TaskBody {
    unowned let module: HTTPModule

    init(module: HTTPModule) { self.module = module }

    func startAttempt(_ run: AttemptRun, engine: Engine) { module.send(run) }

    func abortAttempt(_ run: AttemptRun, reason: TaskFailure, engine: Engine) { module.stopExchange(run.task) }
}

/// `http.request` and its shorthands: once the caller has yielded, the
/// request becomes a task of the requests' engine; its end (after retries
/// and reactions) resumes the caller; closing the caller cancels it.
final class HTTPWait: FiberWait, TaskWaiter {
    private let call: HTTPCall
    private let spec: TaskSpec
    private unowned let module: HTTPModule
    private var fiber: Fiber?
    private var id: TaskID?

    init(call: HTTPCall, spec: TaskSpec, module: HTTPModule) {
        self.call = call
        self.spec = spec
        self.module = module
    }

    func start(_ fiber: Fiber, in runtime: LuaRuntime) {
        self.fiber = fiber
        let id = module.engine.add(spec)
        self.id = id
        call.id = id
        module.calls[id] = call
        module.engine.addWaiter(id, self)
    }

    func taskFinished(_ id: TaskID, engine: Engine) {
        guard id == self.id, let fiber else { return }
        self.id = nil
        module.requestFinished(id, for: fiber)
    }

    func cancel() {
        guard let id else { return }
        self.id = nil
        module.engine.removeWaiter(id, self)
        module.abandonRequest(id)
    }
}

extension HTTPModule {
    func send(_ run: AttemptRun) {
        guard let call = calls[run.task] else {
            engine.complete(run, with: .failure(TaskFailure(.cancelled, "request was cancelled")))
            return
        }
        let request: HTTPRequest
        switch HTTPRequestReader(L: runtime.L).read(call) {
        case .failure(let failure):
            engine.complete(run, with: .failure(failure))
            return
        case .success(let r):
            request = r
        }
        call.idempotent = request.isIdempotent
        if transport == nil {
            do {
                transport = try CurlTransport(connectionsPerHost: settings.concurrency)
            } catch {
                // a transport failure like any other: its code and the URL
                engine.complete(run, with: .failure(TaskFailure(.http, error.message,
                                                                payload: HTTPFailureInfo(code: error.code, url: request.url.absoluteString))))
                return
            }
        }
        let loop = runtime.loop
        loop.beginActivity()  // until the transport's completion is back on the loop
        let target = LoopBound(self, loop: loop)
        let url = request.url.absoluteString
        let display = "\(request.method) \(Redaction.url(url))"
        call.shownURL = Redaction.url(url)
        call.attemptStart = Monotonic.now()
        call.exchange = transport!.send(request) { result in
            target.loop.execute { target.value.requestEnded(run, result, url: url, display: display, headers: request.headers) }
        }
        call.timer = loop.schedule(after: request.timeout) { [unowned self] in
            call.timer = nil
            self.stopExchange(run.task)
            let failure = TaskFailure(.http, "\(display): timed out after \(formatSeconds(request.timeout))",
                                      payload: HTTPFailureInfo(code: .timeout, url: request.url.absoluteString))
            if self.runtime.logger.logLevel <= .debug {
                self.logRequest(display, request.headers, .failure(HTTPTransportError(.timeout, "timed out after \(formatSeconds(request.timeout))")))
            }
            self.engine.complete(run, with: .failure(failure))
        }
    }

    /// Cancels the request's exchange and its timer (cancel, timeout).
    func stopExchange(_ id: TaskID) {
        guard let call = calls[id] else { return }
        call.timer?.cancel()
        call.timer = nil
        call.exchange?.cancel()
        call.exchange = nil
    }

    /// The transport's answer, back on the loop. A late answer for an
    /// attempt that was cancelled or timed out is dropped.
    private func requestEnded(_ run: AttemptRun, _ result: Result<HTTPResponse, HTTPTransportError>,
                              url: String, display: String, headers: [(name: String, value: String)]) {
        runtime.loop.endActivity()
        guard engine.isCurrent(run), let call = calls[run.task] else { return }
        call.timer?.cancel()
        call.timer = nil
        call.exchange = nil
        if runtime.logger.logLevel <= .debug { logRequest(display, headers, result) }
        switch result {
        case .success(let response) where HTTPRetryRule.retryableStatuses.contains(response.status):
            var failure = TaskFailure(.http, "\(display) returned \(response.status)",
                                      payload: HTTPFailureInfo(url: response.url, response: response))
            failure.retryAfter = response.header("retry-after").flatMap { HTTPRetryRule.retryAfterSeconds($0) }
            engine.complete(run, with: .failure(failure))
        case .success(let response):
            engine.complete(run, with: .success(.swift(response)))
        case .failure(let error):
            engine.complete(run, with: .failure(TaskFailure(.http, "\(display): \(Redaction.url(error.message))",
                                                            payload: HTTPFailureInfo(code: error.code, url: url))))
        }
    }

    /// `GET url -> 200 (12 ms)` at debug level, with the request headers
    /// (secrets shown as `***` by the log handler).
    private func logRequest(_ display: String, _ headers: [(name: String, value: String)],
                            _ result: Result<HTTPResponse, HTTPTransportError>) {
        var metadata: Logger.Metadata = [:]
        for h in headers { metadata[h.name] = "\(h.value)" }
        switch result {
        case .success(let r):
            runtime.logger.debug("\(display) -> \(r.status) (\(Int(r.elapsed * 1000)) ms)", metadata: metadata)
        case .failure(let e):
            runtime.logger.debug("\(display) -> \(e.code.rawValue): \(e.message)", metadata: metadata)
        }
    }

    /// The retry rule on top of the policy's count: idempotent methods only,
    /// retryable statuses and transient transport codes; never a cancel.
    static func mayRetry(_ call: HTTPCall, _ failure: TaskFailure) -> Bool {
        guard failure.kind == .http, let info = failure.payload as? HTTPFailureInfo else { return false }
        return HTTPRetryRule.shouldRetry(idempotent: call.idempotent, status: info.response?.status, code: info.code)
    }

    /// The request ended (after its reactions): hand the outcome to the
    /// fiber and forget the request.
    func requestFinished(_ id: TaskID, for f: Fiber) {
        guard let call = calls[id] else { return }
        let outcome = engine.outcome(id) ?? .cancelled(TaskFailure(.cancelled, "request was cancelled"))
        dropRequest(id)
        runtime.finishWait(f, .push { [unowned self] co in self.pushResult(outcome, call, onto: co) })
    }

    /// The caller stopped waiting (it was closed): cancel its request.
    func abandonRequest(_ id: TaskID) {
        engine.cancel(id, reason: "its caller stopped")
        dropRequest(id)
    }

    private func dropRequest(_ id: TaskID) {
        guard let call = calls[id] else { return }
        calls[id] = nil
        luaL_unref(runtime.L, tasker_registryindex(), call.table)
        // Later: the engine is still inside the finish that got us here.
        runtime.loop.enqueue { [unowned self] in self.engine.forget(id) }
    }

    // MARK: results in Lua

    /// `true, response` or `false, err` for the resumed caller.
    func pushResult(_ outcome: TaskOutcome, _ call: HTTPCall, onto co: OpaquePointer) -> Int32 {
        switch HTTPResult(outcome) {
        case .response(let response):
            if call.check && response.status >= 400 {
                lua_pushboolean(co, 0)
                var failure = TaskFailure(.http, "\(call.method) \(Redaction.url(response.url)) returned \(response.status)",
                                          payload: HTTPFailureInfo(url: response.url, response: response))
                failure.position = call.position
                runtime.pushFailure(co, failure)
                return 2
            }
            lua_pushboolean(co, 1)
            pushResponse(co, response, savedTo: call.toFile)
            return 2
        case .failure(var failure):
            lua_pushboolean(co, 0)
            if failure.position == nil { failure.position = call.position }
            runtime.pushFailure(co, failure)
            return 2
        }
    }

    /// `{status, headers, body, url, elapsed, ok}` with `resp:json()`.
    func pushResponse(_ co: OpaquePointer, _ r: HTTPResponse, savedTo: String? = nil) {
        let s = LuaStack(co)
        s.newTable(hash: 6)
        s.push(r.status)
        s.rawSet(-2, "status")
        s.push(r.status < 400)
        s.rawSet(-2, "ok")
        s.newTable(hash: Int32(r.headers.count))
        for h in r.headers {
            s.push(h.value)
            s.rawSet(-2, h.name)
        }
        s.rawSet(-2, "headers")
        r.body.withUnsafeBytes { raw in
            _ = lua_pushlstring(co, raw.baseAddress?.assumingMemoryBound(to: CChar.self), raw.count)
        }
        s.rawSet(-2, "body")
        if let saved = r.savedBytes, let file = savedTo {
            // `to_file`: the body is on disk
            s.push(file)
            s.rawSet(-2, "file")
            s.push(saved)
            s.rawSet(-2, "size")
        }
        s.push(r.url)
        s.rawSet(-2, "url")
        s.push(r.elapsed)
        s.rawSet(-2, "elapsed")
        lua_rawgeti(co, tasker_registryindex(), lua_Integer(responseMeta))
        lua_setmetatable(co, -2)
    }

    /// The request table, `t` of `on="http"` interceptors and reactors.
    func pushRequestTable(_ L: OpaquePointer, _ id: TaskID, attempt: Int) {
        guard let call = calls[id] else {
            lua_createtable(L, 0, 0)
            return
        }
        let s = LuaStack(L)
        s.pushRegistry(call.table)
        guard lua_getmetatable(L, -1) != 0 else { return }
        s.push(id)
        s.rawSet(-2, "id")
        s.push(attempt)
        s.rawSet(-2, "attempt")
        s.pop()
    }

    /// Pushes a reactor's `result` for a request: the response plus `ok`,
    /// or `{ok=false, error=…}`.
    func pushRequestResult(_ L: OpaquePointer, _ outcome: TaskOutcome) {
        switch HTTPResult(outcome) {
        case .response(let response):
            pushResponse(L, response)
        case .failure(let failure):
            let s = LuaStack(L)
            s.newTable(hash: 2)
            s.push(false)
            s.rawSet(-2, "ok")
            runtime.pushFailure(L, failure)
            s.rawSet(-2, "error")
        }
    }
}

/// A request's outcome as the caller sees it: a response (whatever its
/// status, retries done) or a failure.
enum HTTPResult {
    case response(HTTPResponse)
    case failure(TaskFailure)

    init(_ outcome: TaskOutcome) {
        switch outcome {
        case .succeeded(.swift(let value as HTTPResponse)):
            self = .response(value)
        case .succeeded:
            self = .failure(TaskFailure(.http, "no response"))
        case .failed(let f), .cancelled(let f), .skipped(let f):
            if let info = f.payload as? HTTPFailureInfo, let response = info.response {
                self = .response(response)
            } else {
                self = .failure(f)
            }
        }
    }
}

/// Reads a request table back into an `HTTPRequest` (raw access; what the
/// interceptors changed is checked here).
struct HTTPRequestReader {
    let L: OpaquePointer

    /// An absolute http(s) URL with a host and a valid port; the scheme and
    /// host are lower-cased (`HTTP://` works).
    static func parseURL(_ text: String) -> URL? {
        // A control character (NUL would cut the URL libcurl sees) is no URL.
        guard !text.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else { return nil }
        guard var parts = URLComponents(string: escapingInvalid(text)), let scheme = parts.scheme?.lowercased(),
              scheme == "http" || scheme == "https", parts.host?.isEmpty == false else { return nil }
        if let port = parts.port, !(1...65535).contains(port) { return nil }
        parts.scheme = scheme
        return parts.url
    }

    /// What a URL may hold after its authority as it is: RFC 3986's
    /// unreserved and reserved characters, and `%` (escapes already there).
    private static let allowedAfterAuthority = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/?#%")

    /// `text` with the characters a URL may not hold after its authority
    /// (`[`, `]`, a space, non-ASCII…) escaped, and nothing else: left to
    /// Foundation, such a URL was escaped whole, its `%7e` sent as `%257e`.
    static func escapingInvalid(_ text: String) -> String {
        guard let schemeEnd = text.range(of: "://") else { return text }
        let rest = text[schemeEnd.upperBound...]
        guard let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) else { return text }
        let tail = text[authorityEnd...]
        guard tail.unicodeScalars.contains(where: { !allowedAfterAuthority.contains($0) }),
              let escaped = tail.addingPercentEncoding(withAllowedCharacters: allowedAfterAuthority) else { return text }
        return text[..<authorityEnd] + escaped
    }

    /// RFC 9110 token characters: what a method or a header name may hold.
    static func isToken(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
                || "!#$%&'*+-.^_`|~".utf8.contains(c)
        }
    }

    /// A header value may not break the message: no CR, LF or NUL.
    static func isSafeValue(_ s: String) -> Bool {
        !s.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0 }
    }

    func read(_ call: HTTPCall) -> Result<HTTPRequest, TaskFailure> {
        let s = LuaStack(L)
        let base = lua_gettop(L)
        defer { lua_settop(L, base) }
        s.pushRegistry(call.table)
        let t = lua_gettop(L)
        func bad(_ field: String, _ expected: String) -> Result<HTTPRequest, TaskFailure> {
            var f = TaskFailure(.usage, "bad request field t.\(field) to '\(call.function)' (\(expected) expected, got \(s.got(-1, expected: expected)))")
            f.position = call.position
            return .failure(f)
        }
        func usage(_ message: String) -> Result<HTTPRequest, TaskFailure> {
            var f = TaskFailure(.usage, message)
            f.position = call.position
            return .failure(f)
        }
        s.rawGet(t, "method")
        guard let method = s.string(-1), !method.isEmpty else { return bad("method", "string") }
        // CR/LF here would inject a request line or headers.
        guard HTTPRequestReader.isToken(method) else {
            return usage("bad request method \(String(reflecting: method)) to '\(call.function)' (letters, digits and !#$%&'*+-.^_`|~ only)")
        }
        s.rawGet(t, "url")
        guard let text = s.string(-1) else { return bad("url", "string") }
        guard let url = HTTPRequestReader.parseURL(text) else { return bad("url", "absolute http(s) url") }
        s.rawGet(t, "timeout")
        guard let timeout = s.number(-1), timeout > 0, timeout.isFinite else { return bad("timeout", "positive number") }
        s.rawGet(t, "body")
        var body: Data?
        if s.type(-1) == LUA_TSTRING {
            var len = 0
            let p = tasker_tostring(L, -1, &len)!
            body = Data(bytes: p, count: len)
        } else if !s.isNoneOrNil(-1) {
            return bad("body", "string or nil")
        }
        s.rawGet(t, "headers")
        var headers: [(name: String, value: String)] = []
        if s.type(-1) == LUA_TTABLE {
            let h = lua_gettop(L)
            lua_pushnil(L)
            while lua_next(L, h) != 0 {
                guard let name = s.type(-2) == LUA_TSTRING ? s.string(-2) : nil, let value = s.describeScalar(-1) else {
                    return bad("headers", "table of strings")
                }
                s.pop()
                guard HTTPRequestReader.isToken(name) else {
                    return usage("bad header name \(String(reflecting: name)) to '\(call.function)' (letters, digits and !#$%&'*+-.^_`|~ only)")
                }
                guard HTTPRequestReader.isSafeValue(value) else {
                    return usage("bad value for header '\(name)' to '\(call.function)' (CR, LF and NUL are not allowed)")
                }
                headers.append((name: name.lowercased(), value: value))
            }
        } else if !s.isNoneOrNil(-1) {
            return bad("headers", "table")
        }
        call.method = method.uppercased()
        var request = HTTPRequest(method: call.method, url: url, headers: headers, body: body, timeout: timeout,
                                  followRedirects: call.followRedirects, maxBodySize: call.maxBody)
        request.bodyFile = call.bodyFile
        request.toFile = call.toFile
        return .success(request)
    }
}

import CLua
import CLuaShim
import Foundation
import TaskerCore
import TaskerHTTP

/// The `http` global (README, HTTP): `http.request{...}`, the shorthands and
/// `http.configure{...}`. A call builds the request table (what `on="http"`
/// interceptors get as `t`), adds it to the requests' engine and waits.
/// The module owns every request's call state, the configured defaults and
/// the transport; the runtime only drives the requests' engine.
final class HTTPModule: LuaModule {
    static let responseMetatableName = "tasker.response"

    unowned let runtime: LuaRuntime
    /// Each request's call state, by its id in the requests' engine.
    var calls = TaskTable<HTTPCall>()
    var settings = HTTPSettings()
    /// Said once: a `concurrency` above the run's task slots.
    private var warnedAboutSlots = false
    /// Opened at the first request (after `http.configure` has had its say).
    var transport: HTTPTransport?
    /// The body of every request task: it hands the request to the transport.
    lazy var requestBody = LuaRequestBody(module: self)
    /// The metatable of responses (`resp:json()`), by registry ref.
    private(set) var responseMeta: Int32 = LUA_NOREF
    /// The request view's metamethods (registry refs): `id` and `attempt`
    /// are read from the request's own metatable, and only the fields an
    /// interceptor may change can be set (`RequestView`).
    private(set) var requestIndex: Int32 = LUA_NOREF
    private(set) var requestNewindex: Int32 = LUA_NOREF

    init(runtime: LuaRuntime) { self.runtime = runtime }

    var engine: Engine { runtime.httpEngine }

    static let functions: [(String, tasker_SwiftFunction)] = [
        ("request", { L in HTTPModule.this(L!).request(L!) }),
        ("configure", { L in HTTPModule.this(L!).configure(L!) }),
    ]

    func install(in runtime: LuaRuntime) {
        let L = runtime.L
        let s = LuaStack(L)
        pushTable(Self.functions, in: L)
        for (name, hasBody) in [("get", false), ("head", false), ("delete", false),
                                ("post", true), ("put", true), ("patch", true)] {
            lua_pushlightuserdata(L, Unmanaged.passUnretained(self).toOpaque())
            s.push(name.uppercased())
            s.push(hasBody)
            s.push({ L in HTTPModule.this(L!).shorthand(L!) }, upvalues: 3)
            s.rawSet(-2, name)
        }
        setGlobal("http", in: L)
        luaL_newmetatable(L, Self.responseMetatableName)
        pushTable([("json", { L in HTTPModule.this(L!).responseJSON(L!) })], in: L)
        s.rawSet(-2, "__index")
        responseMeta = s.ref()
        push({ L in HTTPModule.this(L!).requestViewIndex(L!) }, in: L)
        requestIndex = s.ref()
        push({ L in HTTPModule.this(L!).requestViewNewindex(L!) }, in: L)
        requestNewindex = s.ref()
    }
}

/// Defaults set with `http.configure`.
struct HTTPSettings {
    var timeout = 30.0
    /// Alamofire's default: two retries, 0.5 s then 1 s.
    var retry = RetryPolicy(attempts: 3, delay: 0.5, backoff: .exponential, factor: 2, maxDelay: 30)
    var headers: [(name: String, value: String)] = []
    var concurrency = 64
    var maxBody = 64 << 20
}

/// A usage error's text, as a `Result` failure.
struct UsageMessage: Error {
    let text: String
    init(_ text: String) { self.text = text }
}

/// What the caller asked of one request beyond the request itself.
final class HTTPCall {
    /// The request table in the registry (`t` of the interceptors).
    let table: Int32
    let check: Bool
    let followRedirects: Bool
    let maxBody: Int
    /// `body_file=`, `to_file=`: paths as given (from the current directory).
    var bodyFile: String?
    var toFile: String?
    /// The caller's file:line and the function it called, for errors.
    let position: String
    let function: String
    var id: TaskID = 0
    /// The task that made the request (nil: the main chunk), for events.
    var task: TaskID?
    /// The method of the last attempt (interceptors may change it).
    var method = "GET"
    var exchange: HTTPExchange?
    var timer: LoopTimer?
    var idempotent = true
    /// The URL of the last attempt as tasker shows it (secrets redacted),
    /// and when that attempt started (for `request` events).
    var shownURL: String?
    var attemptStart: UInt64 = 0

    init(table: Int32, check: Bool, followRedirects: Bool, maxBody: Int, position: String, function: String) {
        self.table = table
        self.check = check
        self.followRedirects = followRedirects
        self.maxBody = maxBody
        self.position = position
        self.function = function
    }
}

extension HTTPModule {
    static let requestFields: Set<String> = ["method", "url", "headers", "query", "body", "json", "timeout",
                                             "follow_redirects", "retry", "check", "body_file", "to_file"]
    static let configureFields: Set<String> = ["timeout", "retry", "headers", "concurrency", "max_body"]
    static let retryFields: Set<String> = ["attempts", "delay", "backoff", "factor", "max_delay", "jitter"]

    /// `http.request{method=, url=, headers=, query=, body=, json=, timeout=,
    /// follow_redirects=, retry=, check=}`.
    func request(_ L: OpaquePointer) -> Int32 {
        guard lua_type(L, 1) == LUA_TTABLE else { return runtime.argError(L, "http.request", 1, "table") }
        lua_settop(L, 1)
        return startRequest(L, options: 1, fn: "http.request")
    }

    /// `http.get(url [, opts])`, `http.post(url, body [, opts])`, …: upvalue
    /// 3 is the method, 4 whether a body argument comes before the options.
    func shorthand(_ L: OpaquePointer) -> Int32 {
        let s = LuaStack(L)
        let method = s.string(tasker_upvalueindex(3)) ?? "GET"
        let hasBody = lua_toboolean(L, tasker_upvalueindex(4)) != 0
        let fn = "http.\(method.lowercased())"
        guard s.type(1) == LUA_TSTRING else { return runtime.argError(L, fn, 1, "string (the url)") }
        let optionsArg: Int32 = hasBody ? 3 : 2
        guard s.isNoneOrNil(optionsArg) || s.type(optionsArg) == LUA_TTABLE else {
            return runtime.argError(L, fn, optionsArg, "table")
        }
        if hasBody {
            let t = s.type(2)
            guard t <= LUA_TNIL || t == LUA_TSTRING || t == LUA_TTABLE else { return runtime.argError(L, fn, 2, "string or table") }
        }
        lua_settop(L, 3)
        // The options, copied, plus url, method and body.
        s.newTable(hash: 8)
        let options = lua_gettop(L)
        if s.type(optionsArg) == LUA_TTABLE {
            lua_pushnil(L)
            while lua_next(L, optionsArg) != 0 {
                lua_pushvalue(L, -2)
                lua_pushvalue(L, -2)
                lua_rawset(L, options)
                s.pop()
            }
        }
        lua_pushvalue(L, 1)
        s.rawSet(options, "url")
        s.push(method)
        s.rawSet(options, "method")
        if hasBody && !s.isNoneOrNil(2) {
            lua_pushvalue(L, 2)
            s.rawSet(options, s.type(2) == LUA_TTABLE ? "json" : "body")
        }
        return startRequest(L, options: options, fn: fn)
    }

    /// A method as it is sent: upper-cased. A registered secret in it (a
    /// script may take a method from anywhere) is registered upper-cased
    /// too, so the method tasker shows is masked as well.
    static func sent(method: String) -> String {
        let upper = method.uppercased()
        if upper != method {
            for value in SecretMask.shared.values(in: method) { SecretMask.shared.register(value.uppercased()) }
        }
        return upper
    }

    /// Builds the request table from the options at `o` and suspends the
    /// caller until the response (or a failure) is in.
    private func startRequest(_ L: OpaquePointer, options o: Int32, fn: String) -> Int32 {
        let s = LuaStack(L)
        let reader = OptionReader(L: L, table: o, function: fn, known: Self.requestFields)
        if let message = reader.unknownOption() { return runtime.usage(L, message) }
        let settings = self.settings
        s.newTable(hash: 8)
        let t = lua_gettop(L)
        let method: String, timeout: Double, followRedirects: Bool, check: Bool
        let bodyFile: String?, toFile: String?
        var url: String
        do throws(UsageMessage) {
            method = try reader.read("method", "string") { i in s.string(i).flatMap { $0.isEmpty ? nil : Self.sent(method: $0) } } ?? "GET"
            guard let u = try reader.read("url", "string", { s.string($0) }) else {
                lua_pushnil(L)  // what `bad` describes
                throw UsageMessage(reader.bad("url", "string"))
            }
            url = u
            if let query = try reader.read("query", "table of strings, numbers, booleans or lists of them",
                                           { i in s.type(i) == LUA_TTABLE ? queryString(L, i) : nil }), !query.isEmpty {
                url += (url.contains("?") ? "&" : "?") + query
            }
            timeout = try reader.read("timeout", "positive number") { s.number($0).flatMap { $0 > 0 && $0.isFinite ? $0 : nil } }
                ?? settings.timeout
            followRedirects = try reader.read("follow_redirects", "boolean") { s.type($0) == LUA_TBOOLEAN ? s.boolean($0) : nil } ?? true
            check = try reader.read("check", "boolean") { s.type($0) == LUA_TBOOLEAN ? s.boolean($0) : nil } ?? false
            bodyFile = try reader.read("body_file", "non-empty path") { s.string($0).flatMap { $0.isEmpty ? nil : $0 } }
            toFile = try reader.read("to_file", "non-empty path") { s.string($0).flatMap { $0.isEmpty ? nil : $0 } }
        } catch {
            return runtime.usage(L, error.text)
        }
        guard HTTPRequestReader.parseURL(url) != nil else {
            return runtime.usage(L, "\(fn): bad url '\(Redaction.malformedURL(url))' (an absolute http:// or https:// url expected)")
        }
        s.push(method)
        s.rawSet(t, "method")
        s.push(url)
        s.rawSet(t, "url")
        s.push(timeout)
        s.rawSet(t, "timeout")

        // headers: the configured defaults, then the call's, names lower-cased
        s.newTable(hash: Int32(settings.headers.count + 4))
        let headers = lua_gettop(L)
        for h in settings.headers {
            s.push(h.value)
            s.rawSet(headers, h.name)
        }
        s.rawGet(o, "headers")
        if !s.isNoneOrNil(-1) {
            guard s.type(-1) == LUA_TTABLE, copyHeaders(L, from: lua_gettop(L), to: headers) else {
                return runtime.usage(L, reader.bad("headers", "table of strings"))
            }
        }
        s.pop()

        s.rawGet(o, "body")
        let hasBody = !s.isNoneOrNil(-1)
        if hasBody || bodyFile != nil {
            s.rawGet(o, "json")
            let bodies = [hasBody, !s.isNoneOrNil(-1), bodyFile != nil].filter { $0 }.count
            s.pop()
            if bodies > 1 { return runtime.usage(L, "\(fn): give one of 'body', 'json' and 'body_file'") }
        }
        if let bodyFile, let why = Self.unreadableFile(bodyFile) {
            return runtime.raise(L, TaskFailure(.fs, "\(fn): cannot read body_file '\(bodyFile)': \(why)",
                                                position: s.whereString(level: 1)))
        }
        if hasBody {
            guard s.type(-1) == LUA_TSTRING else { return runtime.usage(L, reader.bad("body", "string")) }
            s.rawSet(t, "body")
        } else {
            s.pop()
        }
        s.rawGet(o, "json")
        if !s.isNoneOrNil(-1) {
            guard !hasBody else { return runtime.usage(L, "\(fn): give one of 'body', 'json' and 'body_file'") }
            let bytes: [UInt8]
            do {
                bytes = try runtime.json.encodeJSON(L, -1)
            } catch {
                return runtime.raise(L, TaskFailure(.json, error.message, position: s.whereString(level: 1)))
            }
            _ = bytes.withUnsafeBufferPointer { b in b.withMemoryRebound(to: CChar.self) { lua_pushlstring(L, $0.baseAddress, $0.count) } }
            s.rawSet(t, "body")
            s.rawGet(headers, "content-type")
            if s.isNoneOrNil(-1) {
                s.push("application/json")
                s.rawSet(headers, "content-type")
            }
            s.pop()
        }
        s.pop()
        lua_pushvalue(L, headers)
        s.rawSet(t, "headers")

        s.rawGet(o, "retry")
        let retry: RetryPolicy
        switch readRetry(L, over: settings.retry, fn: fn) {
        case .success(let r): retry = r
        case .failure(let message): return runtime.usage(L, message.text)
        }
        lua_settop(L, t)
        setRequestViewMetatable(L, t)

        if let status = runtime.cannotWait(L, fn) { return status }
        let call = HTTPCall(table: s.ref(), check: check, followRedirects: followRedirects,
                            maxBody: settings.maxBody, position: s.whereString(level: 1), function: fn)
        call.bodyFile = bodyFile
        call.toFile = toFile
        call.task = callingTask
        // The name shows in messages (a cancel, a discard): secrets masked.
        var spec = TaskSpec(name: "\(method) \(Redaction.url(url))", body: requestBody)
        spec.retry = retry
        spec.retryWhen = { failure, _ in HTTPModule.mayRetry(call, failure) }
        spec.ownedByReaction = callerBelongsToReaction
        return runtime.suspend(L, .wait(HTTPWait(call: call, spec: spec, module: self)))
    }

    /// Why `path` cannot be sent as a body (a directory would be a body
    /// that never ends), or nil.
    static func unreadableFile(_ path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0 else { return String(cString: strerror(errno)) }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            return (st.st_mode & S_IFMT) == S_IFDIR ? String(cString: strerror(EISDIR)) : "not a regular file"
        }
        guard access(path, R_OK) == 0 else { return String(cString: strerror(errno)) }
        return nil
    }

    /// The task whose body makes a request (nil: the main chunk or a
    /// reaction, whose tasks may be requests themselves).
    private var callingTask: TaskID? {
        if case .task(let run) = runtime.driver.current?.kind { return run.task }
        return nil
    }

    /// Reactions' own requests start while reactors suspend, and are not
    /// reacted to (a reaction must not wait on itself).
    private var callerBelongsToReaction: Bool {
        guard let f = runtime.driver.current else { return false }
        switch f.kind {
        case .reaction: return true
        case .task(let run): return runtime.engine.isOwnedByReaction(run.task)
        case .main: return false
        }
    }

    /// The `retry` option on top of the stack: `false` (one attempt), a
    /// retry table read over `base`, or nil (`base`).
    private func readRetry(_ L: OpaquePointer, over base: RetryPolicy, fn: String) -> Result<RetryPolicy, UsageMessage> {
        let s = LuaStack(L)
        switch s.type(-1) {
        case LUA_TNIL, LUA_TNONE:
            return .success(base)
        case LUA_TBOOLEAN:
            var r = base
            if !s.boolean(-1) { r.attempts = 1 }
            return .success(r)
        case LUA_TTABLE:
            do {
                return .success(try SpecReader(runtime: runtime, L: L, function: fn)
                    .readRetryPolicy(lua_gettop(L), base: base, allowed: Self.retryFields).0)
            } catch {
                guard case .usage(let message) = error else { return .failure(UsageMessage("bad option 'retry' to '\(fn)'")) }
                return .failure(UsageMessage(message))
            }
        default:
            return .failure(UsageMessage("bad option 'retry' to '\(fn)' (table or false expected, got \(s.got(-1, expected: "table or false")))"))
        }
    }

    /// Copies string-keyed headers into the table at `to`, names lower-cased.
    func copyHeaders(_ L: OpaquePointer, from: Int32, to: Int32) -> Bool {
        let s = LuaStack(L)
        lua_pushnil(L)
        while lua_next(L, from) != 0 {
            guard s.type(-2) == LUA_TSTRING, let name = s.string(-2),
                  s.type(-1) == LUA_TSTRING || s.type(-1) == LUA_TNUMBER, let value = s.describeScalar(-1) else {
                s.pop(2)
                return false
            }
            s.pop()
            s.push(value)
            s.rawSet(to, name.lowercased())
        }
        return true
    }

    /// `k=v&…` from a table of scalars or lists of scalars, keys sorted.
    private func queryString(_ L: OpaquePointer, _ t: Int32) -> String? {
        let s = LuaStack(L)
        var pairs: [(String, String)] = []
        lua_pushnil(L)
        while lua_next(L, t) != 0 {
            guard let key = s.type(-2) == LUA_TSTRING ? s.string(-2) : nil else { s.pop(2); return nil }
            if s.type(-1) == LUA_TTABLE {
                // a list: a table with other keys ({a = 1}) is refused, not dropped
                guard Self.isList(L, lua_gettop(L)) else { s.pop(2); return nil }
                for k in stride(from: 1, through: s.rawLength(-1), by: 1) {
                    s.rawGet(-1, k)
                    guard let v = s.describeScalar(-1) else { s.pop(3); return nil }
                    s.pop()
                    pairs.append((key, v))
                }
            } else {
                guard let v = s.describeScalar(-1) else { s.pop(2); return nil }
                pairs.append((key, v))
            }
            s.pop()
        }
        pairs.sort { $0.0 < $1.0 }
        return pairs.map { "\(Self.percentEncode($0.0))=\(Self.percentEncode($0.1))" }.joined(separator: "&")
    }

    /// Whether the table at `t` has only the keys 1…#t.
    private static func isList(_ L: OpaquePointer, _ t: Int32) -> Bool {
        let n = LuaStack(L).rawLength(t)
        var count = 0
        lua_pushnil(L)
        while lua_next(L, t) != 0 {
            tasker_pop(L, 1)
            count += 1
            guard count <= n else {
                tasker_pop(L, 1)
                return false
            }
        }
        return count == n
    }

    private static func percentEncode(_ s: String) -> String {
        s.addingPercentEncoding(withAllowedCharacters: queryAllowed) ?? s
    }

    static let queryAllowed: CharacterSet = {
        var c = CharacterSet.alphanumerics
        c.insert(charactersIn: "-._~")
        return c
    }()

    /// `http.configure{timeout=, retry=, headers=, concurrency=, max_body=}`:
    /// defaults for the requests made after it.
    func configure(_ L: OpaquePointer) -> Int32 {
        let s = LuaStack(L)
        guard s.type(1) == LUA_TTABLE else { return runtime.argError(L, "http.configure", 1, "table") }
        lua_settop(L, 1)
        let reader = OptionReader(L: L, table: 1, function: "http.configure", known: Self.configureFields)
        if let message = reader.unknownOption() { return runtime.usage(L, message) }
        var settings = self.settings
        var asked: Int?
        do {
            settings.timeout = try reader.read("timeout", "positive number") {
                s.number($0).flatMap { $0 > 0 && $0.isFinite ? $0 : nil }
            } ?? settings.timeout
            asked = try reader.read("concurrency", "positive integer") { s.integer($0).flatMap { $0 >= 1 ? $0 : nil } }
            settings.concurrency = asked ?? settings.concurrency
            settings.maxBody = try reader.read("max_body", "non-negative integer (bytes)") {
                s.integer($0).flatMap { $0 >= 0 ? $0 : nil }
            } ?? settings.maxBody
            settings.headers = try reader.read("headers", "table of strings") { i in
                guard s.type(i) == LUA_TTABLE else { return nil }
                s.newTable()
                defer { s.pop() }
                guard copyHeaders(L, from: i, to: lua_gettop(L)) else { return nil }
                var headers: [(name: String, value: String)] = []
                lua_pushnil(L)
                while lua_next(L, -2) != 0 {
                    headers.append((name: s.string(-2)!, value: s.string(-1)!))
                    s.pop()
                }
                return headers.sorted { $0.name < $1.name }
            } ?? settings.headers
        } catch {
            return runtime.usage(L, error.text)
        }
        s.rawGet(1, "retry")
        switch readRetry(L, over: settings.retry, fn: "http.configure") {
        case .success(let r): settings.retry = r
        case .failure(let message): return runtime.usage(L, message.text)
        }
        if settings.concurrency != self.settings.concurrency {
            engine.concurrency = settings.concurrency
            // requests in flight go on; later ones get the new limit
            transport?.limitConnections(perHost: settings.concurrency)
        }
        let slots = runtime.engine.concurrency
        if let asked, asked > slots, !warnedAboutSlots {
            // Requests are made from tasks: the task slots cap them first.
            warnedAboutSlots = true
            let at = s.whereString()
            runtime.logger.warning("\(at.isEmpty ? "" : at + ": ")http.configure{concurrency = \(asked)} is above the run's \(slots) task slots: requests made from tasks are capped by those too (tasker run --concurrency N)")
        }
        self.settings = settings
        return 0
    }

    /// `resp:json()`: the body decoded (kind `json` if it is not JSON).
    func responseJSON(_ L: OpaquePointer) -> Int32 {
        let s = LuaStack(L)
        guard s.type(1) == LUA_TTABLE else { return runtime.argError(L, "resp:json", 1, "response table") }
        s.rawGet(1, "body")
        guard s.type(-1) == LUA_TSTRING else { return runtime.usage(L, "resp:json(): the response has no body") }
        return runtime.json.decodeJSONString(L, lua_gettop(L), fn: "resp:json")
    }
}

import Foundation
import Logging
import Testing

/// Runs `source` with `base` (the test server's address) defined.
func runHTTP(_ source: String, concurrency: Int = 16, logLevel: Logger.Level = .info) async throws -> LuaRun {
    try await runLua("local base = tasker.vars.base\n" + source, vars: ["base": TestHTTPServer.shared.base],
                     concurrency: concurrency, logLevel: logLevel)
}

func uniqueKey() -> String { String(UUID().uuidString.prefix(12)) }

/// README, HTTP against a real server on 127.0.0.1.
@Suite struct HTTPRequestTests {
    @Test func responseFieldsQueryHeadersAndJSON() async throws {
        let r = try await runHTTP("""
            local resp = http.request{url = base .. "/echo", query = {b = 2, a = {"x", "y z"}},
                                      headers = {["X-Custom"] = "v"}}
            local e = resp:json()
            print(resp.status, resp.ok, resp.headers["content-type"], resp.url == base .. "/echo?a=x&a=y%20z&b=2")
            print(type(resp.elapsed), resp.elapsed >= 0 and resp.elapsed < 10)
            print(e.method, e.query, e.headers["x-custom"])
            local p = http.post(base .. "/echo", "raw body").json and http.post(base .. "/echo", "raw body"):json()
            print(p.method, p.body)
            local j = http.request{method = "put", url = base .. "/echo", json = {n = 1}}:json()
            print(j.method, j.body, j.headers["content-type"])
            print(http.patch(base .. "/echo", {k = true}):json().body)
            print(http.delete(base .. "/echo"):json().method)
            local h = http.head(base .. "/echo")
            print(h.status, h.body == "")
            -- a GET with a body is sent as a GET (libcurl would make it a POST)
            local g = http.request{method = "GET", url = base .. "/echo", body = "B"}:json()
            print(g.method, g.body, http.get(base .. "/echo", {json = {a = 1}}):json().method)
            """)
        #expect(r.exitCode == 0, "\(r.result.mainError ?? "")")
        #expect(r.lines == ["200\ttrue\tapplication/json\ttrue", "number\ttrue", "GET\ta=x&a=y%20z&b=2\tv",
                            "POST\traw body", "PUT\t{\"n\":1}\tapplication/json", "{\"k\":true}", "DELETE", "200\ttrue",
                            "GET\tB\tGET"])
    }

    /// A request's name (in a discard's or a cancel's message) shows the
    /// URL with its password and token masked.
    @Test func aDiscardedRequestsMessageMasksItsURL() async throws {
        let r = try await runHTTP("""
            tasker.intercept{name = "drop", on = "http", fn = function() return "discard" end}
            local ok, err = pcall(http.get, "http://alice:s3cr3tpw@127.0.0.1:1/x?token=TOPSECRET")
            local text = tostring(err)
            print(ok, err.kind, text:find("s3cr3tpw", 1, true) == nil, text:find("TOPSECRET", 1, true) == nil,
                  text:find("***", 1, true) ~= nil)
            """)
        #expect(r.lines == ["false\tdiscarded\ttrue\ttrue\ttrue"], "\(r.result.mainError ?? "")")
    }

    /// `http.configure{concurrency}` while requests are in flight changes
    /// the limit for later ones; those in flight finish.
    @Test func reconfiguringTheConcurrencyLetsRequestsInFlightFinish() async throws {
        let r = try await runHTTP("""
            http.configure{retry = false}
            local hs = {}
            for i = 1, 6 do hs[i] = tasker.add(function() return http.get(base .. "/delay?s=0.5").status end) end
            tasker.add(function() tasker.sleep(0.2); http.configure{concurrency = 32} end)
            local statuses = {}
            for i, h in ipairs(hs) do
              local ok, v = pcall(h.await, h)
              statuses[i] = ok and tostring(v) or tostring(v.code or v.kind)
            end
            print(table.concat(statuses, " "))
            """)
        #expect(r.lines == ["200 200 200 200 200 200"], "\(r.result.mainError ?? "")")
    }

    @Test func statusIsReturnedAndRaisedOnlyWithCheck() async throws {
        let r = try await runHTTP("""
            local resp = http.get(base .. "/status/404")
            print(resp.status, resp.ok, resp.body)
            local ok, err = pcall(function() return http.get(base .. "/status/418", {check = true}) end)
            print(ok, err.kind, err.status, err.url == base .. "/status/418", err.where)
            print(http.get(base .. "/status/204", {check = true}).status)
            """)
        #expect(r.lines == ["404\tfalse\tstatus 404", "false\thttp\t418\ttrue\tpipeline.lua:4", "204"])
    }

    /// Any finite timeout works, however large (1e308 s trapped converting
    /// to curl's milliseconds and killed the process), however it is set.
    @Test func aHugeTimeoutIsNoTimeoutAtAll() async throws {
        let r = try await runHTTP("""
            print(http.get(base .. "/status/200", {timeout = 1e308}).status)
            -- between 2^63 ns and 2^64 ns: a loop timer too far for an Int64 of nanoseconds
            print(http.get(base .. "/status/200", {timeout = 1e10}).status, tasker.sh("true", {timeout = 9.3e9}).code)
            http.configure{timeout = 1e19}
            print(http.get(base .. "/status/201").status)
            tasker.intercept{on = "http", fn = function(r) r.timeout = 1e300 end}
            print(http.get(base .. "/status/202").status)
            """)
        #expect(r.lines == ["200", "200\t0", "201", "202"], "\(r.result.mainError ?? "")")
    }

    @Test func transportFailuresRaiseKindHTTPWithCode() async throws {
        let port = TestHTTPServer.shared.port
        let r = try await runHTTP("""
            local function code(url, opts)
                local ok, err = pcall(function() return http.get(url, opts) end)
                return err.kind, err.code, err.url, err.where
            end
            print(code("http://127.0.0.1:1/x", {retry = false}))
            print(code("http://no-such-host.invalid/x", {retry = false}))
            print(code("https://127.0.0.1:\(port)/echo", {retry = false}))
            -- before the timeout: a /drop right after a request timed out
            -- was classified timeout in 2 of 31 suite runs (cause not found)
            print(code(base .. "/drop", {retry = false}))
            local t0 = tasker.now()
            print(code(base .. "/delay?s=5", {retry = false, timeout = 0.2}))
            local waited = tasker.now() - t0
            print(waited < 4.5)
            """)
        #expect(r.lines == ["http\tconnect\thttp://127.0.0.1:1/x\tpipeline.lua:3",
                            "http\tdns\thttp://no-such-host.invalid/x\tpipeline.lua:3",
                            "http\ttls\thttps://127.0.0.1:\(port)/echo\tpipeline.lua:3",
                            "http\treset\t\(TestHTTPServer.shared.base)/drop\tpipeline.lua:3",
                            "http\ttimeout\t\(TestHTTPServer.shared.base)/delay?s=5\tpipeline.lua:3",
                            // the 0.2 s timeout, not the server's 5 s (a bound a loaded machine keeps)
                            "true"])
    }

    @Test func bodyLargerThanTheLimitFailsClearly() async throws {
        let r = try await runHTTP("""
            http.configure{max_body = 1000}
            print(#http.get(base .. "/large?bytes=1000").body)
            local ok, err = pcall(function() return http.get(base .. "/large?bytes=200000") end)
            print(ok, err.kind, err.code, err.message:find("exceeds the limit of 1000 bytes", 1, true) ~= nil)
            """)
        #expect(r.lines == ["1000", "false\thttp\tother\ttrue"])
    }

    /// A URL holding characters it may not (`[`, `]`, a space) has those
    /// escaped and its own escapes kept: `%7e` is not sent as `%257e`.
    @Test func aURLsOwnEscapesAreKeptWhenOthersAreAdded() async throws {
        let r = try await runHTTP("""
            print(http.get(base .. "/echo?user[name]=bob&x=%7e&y=a%20b"):json().query)
            print(http.get(base .. "/echo?plain=1&z=%2F"):json().query)
            """)
        #expect(r.lines == ["user%5Bname%5D=bob&x=%7e&y=a%20b", "plain=1&z=%2F"])
    }

    @Test func badArgumentsAreUsageErrorsAtTheCallersLine() async throws {
        let r = try await runHTTP("""
            for _, f in ipairs{
                function() http.get(5) end,
                function() http.get("ftp://x/y") end,
                function() http.request{url = base, bogus = 1} end,
                function() http.get(base, {timeout = -1}) end,
                function() http.post(base, "a", {json = {}}) end,
                function() http.configure{concurrency = 0} end,
                function() return http.get(base .. "/status/200"):json() end,
                function() http.get(base, {query = {t = {a = 1}}}) end,
                function() http.get("http://erin:pw777@127.0.0.1:99999/x?token=t888") end,
            } do
                local ok, err = pcall(f)
                print(err.kind, err.where, err.message)
            end
            """)
        #expect(r.lines == [
            "usage\tpipeline.lua:3\tbad argument #1 to 'http.get' (string (the url) expected, got number)",
            "usage\tpipeline.lua:4\thttp.get: bad url 'ftp://x/y' (an absolute http:// or https:// url expected)",
            "usage\tpipeline.lua:5\tunknown option 'bogus' to 'http.request' (known: body, body_file, check, follow_redirects, headers, json, method, query, retry, timeout, to_file, url)",
            "usage\tpipeline.lua:6\tbad option 'timeout' to 'http.get' (positive number expected, got -1)",
            "usage\tpipeline.lua:7\thttp.post: give one of 'body', 'json' and 'body_file'",
            "usage\tpipeline.lua:8\tbad option 'concurrency' to 'http.configure' (positive integer expected, got 0)",
            "json\tpipeline.lua:9\tunexpected 's' at line 1, column 1 (byte 1)",
            "usage\tpipeline.lua:10\tbad option 'query' to 'http.get' (table of strings, numbers, booleans or lists of them expected, got table)",
            // a bad url's password and token are not shown
            "usage\tpipeline.lua:11\thttp.get: bad url 'http://***@127.0.0.1:99999/x?token=***' (an absolute http:// or https:// url expected)",
        ])
    }

    @Test func cancellingTheTaskCancelsItsRequestAtOnce() async throws {
        // The run ends only when the transport has given the request back:
        // well before the server's 5 s answer only if it was cancelled.
        let r = try await runHTTP("""
            local h = tasker.add{name = "slow", run = function() return http.get(base .. "/delay?s=5") end}
            tasker.sleep(0.2)
            h:cancel()
            print(h:state())
            """)
        #expect(r.lines == ["cancelled"])
        #expect(r.result.seconds < 3)
    }

    @Test func twoHundredConcurrentRequests() async throws {
        let r = try await runHTTP("""
            local hs = {}
            for i = 1, 200 do
                hs[i] = tasker.add(function() return http.get(base .. "/echo", {query = {i = i}}):json().query end)
            end
            local values = tasker.all(hs)
            local good = 0
            for i, q in ipairs(values) do if q == "i=" .. i then good = good + 1 end end
            print(good)
            """, concurrency: 200)
        #expect(r.lines == ["200"])
    }

    @Test func requestsInFlightAreCapped() async throws {
        // The server holds each request until it holds three at once, then
        // answers them 0.1 s later (time for a fourth to arrive, should the
        // cap let one through); nine requests make three full batches, so
        // the cap is reached every time. A batch that never fills is
        // answered after 30 s (a whole CI run once starved this server for
        // seconds: the bound below is for a batch that never filled).
        let key = uniqueKey()
        let r = try await runHTTP("""
            http.configure{concurrency = 3}
            local hs = {}
            for i = 1, 9 do
                hs[i] = tasker.add(function() return http.get(base .. "/gate?key=\(key)&at=3&linger=0.1&max=30", {timeout = 60}).status end)
            end
            print(table.concat(tasker.all(hs), " "))
            """, concurrency: 12)
        #expect(r.lines == [Array(repeating: "200", count: 9).joined(separator: " ")])
        let most = TestHTTPServer.shared.maxInFlight(key)
        #expect(most <= 3, "more requests in flight than the cap: \(most)")
        #expect(most == 3, "the cap was never reached: \(most)")
        #expect(r.result.seconds < 25, "a batch waited for the server's deadline: \(TestHTTPServer.shared.gateLog(key))")
    }

    /// A request that times out is logged at debug level like any other.
    @Test func aTimedOutRequestIsLoggedToo() async throws {
        let r = try await runHTTP("""
            local ok, err = pcall(http.get, base .. "/delay?s=3", {timeout = 0.2, retry = false})
            print(ok, err.code)
            """, logLevel: .debug)
        #expect(r.lines == ["false\ttimeout"])
        #expect(r.diagnostics.contains("GET \(TestHTTPServer.shared.base)/delay?s=3 -> timeout: timed out after"), "\(r.diagnostics)")
    }

    @Test func secretHeadersAreMaskedInLogs() async throws {
        let r = try await runHTTP("""
            http.get(base .. "/echo", {headers = {Authorization = "Bearer s3cret", ["X-Api-Key"] = "k3y", Accept = "text/plain"}})
            log.info("sent", {authorization = "Bearer s3cret"})
            """, logLevel: .debug)
        #expect(r.diagnostics.contains("GET \(TestHTTPServer.shared.base)/echo -> 200"))
        #expect(r.diagnostics.contains("authorization=***"))
        #expect(r.diagnostics.contains("x-api-key=***"))
        #expect(r.diagnostics.contains("accept=text/plain"))
        #expect(!r.diagnostics.contains("s3cret") && !r.diagnostics.contains("k3y"))
    }
}

/// Retries (idempotent methods, statuses, transport codes, Retry-After)
/// and redirects.
@Suite struct HTTPRetryAndRedirectTests {
    @Test func retryableStatusesAreRetriedThroughTheInterceptorsAgain() async throws {
        let key = uniqueKey()
        let r = try await runHTTP("""
            local seen = {}
            tasker.intercept{on = "http", fn = function(t) seen[#seen + 1] = t.method .. "#" .. t.attempt end}
            local resp = http.get(base .. "/flaky?key=\(key)&fail=2&status=503", {retry = {delay = 0.01}})
            print(resp.status, resp.body, table.concat(seen, " "))
            """)
        #expect(r.lines == ["200\tok after 2\tGET#1 GET#2 GET#3"])
        #expect(TestHTTPServer.shared.count(key) == 3)
    }

    @Test func nonIdempotentMethodsAndOtherStatusesAreNotRetried() async throws {
        let post = uniqueKey(), notFound = uniqueKey(), exhausted = uniqueKey()
        let r = try await runHTTP("""
            print(http.post(base .. "/flaky?key=\(post)&fail=1&status=503", "x", {retry = {delay = 0.01}}).status)
            print(http.get(base .. "/flaky?key=\(notFound)&fail=1&status=404", {retry = {delay = 0.01}}).status)
            local ok, err = pcall(function()
                return http.get(base .. "/flaky?key=\(exhausted)&fail=9&status=502", {retry = {delay = 0.01}, check = true})
            end)
            print(err.kind, err.status)
            """)
        #expect(r.lines == ["503", "404", "http\t502"])
        #expect(TestHTTPServer.shared.count(post) == 1)
        #expect(TestHTTPServer.shared.count(notFound) == 1)
        #expect(TestHTTPServer.shared.count(exhausted) == 3)
    }

    @Test func transientTransportFailuresAreRetried() async throws {
        let r = try await runHTTP("""
            local attempts = 0
            tasker.intercept{on = "http", fn = function(t) attempts = t.attempt end}
            local ok, err = pcall(function() return http.get("http://127.0.0.1:1/", {retry = {attempts = 4, delay = 0.01}}) end)
            print(err.code, attempts)
            http.configure{retry = {attempts = 2, delay = 0.01}}
            pcall(function() return http.get("http://127.0.0.1:1/") end)
            print(attempts)
            """)
        #expect(r.lines == ["connect\t4", "2"])
    }

    @Test func retryAfterIsHonouredAndCappedByMaxDelay() async throws {
        let honoured = uniqueKey(), capped = uniqueKey()
        let r = try await runHTTP("""
            local t0 = tasker.now()
            local a = http.get(base .. "/flaky?key=\(honoured)&fail=1&status=429&retry_after=0.3", {retry = {delay = 0.01}})
            local waited = tasker.now() - t0
            print(a.status, waited >= 0.29)
            t0 = tasker.now()
            local b = http.get(base .. "/flaky?key=\(capped)&fail=1&status=503&retry_after=120", {retry = {max_delay = 0.05}})
            print(b.status, tasker.now() - t0 < 5)
            """)
        #expect(r.lines == ["200\ttrue", "200\ttrue"])
    }

    @Test func redirectsKeepAuthorizationOnlyOnTheSameHost() async throws {
        let base = TestHTTPServer.shared.base, port = TestHTTPServer.shared.port
        let r = try await runHTTP("""
            local auth = {headers = {Authorization = "Bearer t"}}
            local same = http.get(base .. "/redirect?to=/echo", auth)
            print(same.status, same.url, same:json().headers.authorization)
            local other = http.get(base .. "/redirect?to=http://localhost:\(port)/echo", auth)
            print(other.status, other.url, other:json().headers.authorization)
            local stay = http.get(base .. "/redirect?to=/echo", {follow_redirects = false})
            print(stay.status, stay.headers.location)
            """)
        #expect(r.lines == ["200\t\(base)/echo\tBearer t", "200\thttp://localhost:\(port)/echo\tnil", "302\t/echo"])
    }
}

/// Requests that would inject headers, and secrets across origins.
@Suite struct HTTPSafetyTests {
    @Test func crOrLfInAMethodHeaderNameOrValueIsAUsageErrorNamingIt() async throws {
        let r = try await runHTTP("""
            local function try(opts)
              local ok, err = pcall(http.request, opts)
              print(ok, err.kind, err.message)
            end
            try{url = base .. "/echo", method = "GET /evil HTTP/1.1\\r\\nX: "}
            try{url = base .. "/echo", headers = {["x-f\\r\\nX-Injected"] = "v"}}
            try{url = base .. "/echo", headers = {["x-ok"] = "a\\r\\nX-Injected: 1"}}
            tasker.intercept{name = "evil", on = "http", fn = function(t) t.headers["x-g\\nY"] = "1" end}
            try{url = base .. "/echo"}
            """)
        #expect(r.lines.count == 4)
        #expect(r.lines[0].hasPrefix("false\tusage\tbad request method \"GET /EVIL HTTP/1.1\\r\\nX: \" to 'http.request' ("))
        #expect(r.lines[1].hasPrefix("false\tusage\tbad header name \"x-f\\r\\nx-injected\" to 'http.request' ("))
        #expect(r.lines[2] == "false\tusage\tbad value for header 'x-ok' to 'http.request' (CR, LF and NUL are not allowed)")
        #expect(r.lines[3].hasPrefix("false\tusage\tbad header name \"x-g\\nY\" to 'http.request' ("))
    }

    @Test func everySecretHeaderIsDroppedOnARedirectToAnotherOrigin() async throws {
        let base = TestHTTPServer.shared.base, port = TestHTTPServer.shared.port
        let other = try TestHTTPServer()
        let r = try await runHTTP("""
            local secrets = {headers = {Authorization = "Bearer t", Cookie = "c=1", ["X-Api-Key"] = "k",
                                        ["Proxy-Authorization"] = "Basic p", ["X-Plain"] = "kept"}}
            local function show(resp)
              local h = resp:json().headers
              print(h.authorization, h.cookie, h["x-api-key"], h["proxy-authorization"], h["x-plain"])
            end
            show(http.get(base .. "/redirect?to=/echo", secrets))                                 -- same origin
            show(http.get(base .. "/redirect?to=http://localhost:\(port)/echo", secrets))          -- other host
            show(http.get(base .. "/redirect?to=http://127.0.0.1:\(other.port)/echo", secrets))   -- other port
            """)
        #expect(r.lines == ["Bearer t\tc=1\tk\tBasic p\tkept", "nil\tnil\tnil\tnil\tkept", "nil\tnil\tnil\tnil\tkept"])
        _ = base
    }

    @Test func urlsShowNoCredentialsOrSecretQueryValues() async throws {
        let r = try await runHTTP("""
            local h = tasker.add{name = "call", run = function()
              return http.get("http://alice:PW@127.0.0.1:1/x?access_token=T0KEN&page=2", {retry = false})
            end}
            print(tostring(select(2, h:result())))
            """)
        #expect(r.lines.count == 1)
        #expect(r.lines[0].contains("http://***@127.0.0.1:1/x?access_token=***&page=2"))
        #expect(!r.lines[0].contains("PW") && !r.lines[0].contains("T0KEN"))
        #expect(!r.result.failed.map(\.message).joined().contains("T0KEN"))
    }

    @Test func aLyingContentLengthIsCheckedAtOnceAndTheTimeoutHolds() async throws {
        let r = try await runHTTP("""
            http.configure{max_body = 1 << 30}
            local t0 = tasker.now()
            local ok, err = pcall(http.get, base .. "/lie?declared=100000000&chunks=300", {retry = false, timeout = 0.5})
            local waited = tasker.now() - t0
            print(ok, err.kind, err.code, waited >= 0.45 and waited < 20)
            t0 = tasker.now()
            -- refused on its declared length, before any of the body: the
            -- server streams ~19 MB over 3 s and closes, which a check of
            -- the body alone would report otherwise ("transfer closed");
            -- the bound is generous (the suite runs a browser beside it,
            -- and twice a whole CI run starved this server for seconds)
            ok, err = pcall(http.get, base .. "/lie?declared=100000000000&chunks=300", {retry = false, timeout = 60})
            print(ok, err.kind, err.message:match("exceeds the limit") ~= nil, tasker.now() - t0 < 20)
            """)
        #expect(r.lines.count == 2)
        #expect(r.lines[0] == "false\thttp\ttimeout\ttrue")
        #expect(r.lines[1] == "false\thttp\ttrue\ttrue")
    }

    @Test func aHugeResponseHeaderIsNamedAsSuch() async throws {
        let r = try await runHTTP("""
            local ok, err = pcall(http.get, base .. "/bigheader?bytes=200000", {retry = false})
            print(ok, err.kind, err.message:match("headers are too large") ~= nil)
            """)
        #expect(r.lines == ["false\thttp\ttrue"])
    }

    @Test func uppercaseSchemesWorkAndBadPortsAreUsageErrors() async throws {
        let port = TestHTTPServer.shared.port
        let r = try await runHTTP("""
            print(http.get("HTTP://127.0.0.1:\(port)/echo").status)
            local ok, err = pcall(http.get, "http://127.0.0.1:99999/x")
            print(ok, err.kind)
            """)
        #expect(r.lines == ["200", "false\tusage"])
    }
}

/// `on = "http"` interceptors and reactors.
@Suite struct HTTPInterceptorReactorTests {
    @Test func interceptorsChangeDiscardAndFailRequests() async throws {
        let r = try await runHTTP("""
            tasker.intercept{name = "auth", on = "http", fn = function(t)
                t.headers.authorization = "Bearer abc"
                if t.url:find("drop") then return "discard" end
                if t.url:find("boom") then error("no such thing") end
                t.url = t.url:gsub("/renamed", "/echo")
            end}
            print(http.get(base .. "/renamed"):json().headers.authorization)
            local ok, err = pcall(function() return http.get(base .. "/drop") end)
            print(err.kind, err.where)
            ok, err = pcall(function() return http.get(base .. "/boom") end)
            print(err.kind, err.message:find("interceptor 'auth' failed", 1, true) ~= nil)
            local t = tasker.add(function() return http.get(base .. "/echo").status end)
            print(t:await())
            """)
        #expect(r.lines == ["Bearer abc", "discarded\tpipeline.lua:9", "interceptor\ttrue", "200"])
    }

    /// A request's `id` and `attempt` are read-only and it has no other
    /// fields to set, as a task's view: refused at the line that tried.
    @Test func aRequestsIdAndAttemptAreReadOnlyAndUnknownFieldsAreRefused() async throws {
        let r = try await runHTTP("""
            local which
            tasker.intercept{name = "edit", on = "http", fn = function(t)
                if which == "read" then print(math.type(t.id), t.attempt, t.nothing) end
                if which == "id" then t.id = 5 end
                if which == "attempt" then t.attempt = 9 end
                if which == "bogus" then t.bogus = 1 end
                if which == "body" then t.body = "set"; t.method = "POST" end
            end}
            for _, w in ipairs({"read", "id", "attempt", "bogus", "body"}) do
                which = w
                local ok, res = pcall(http.get, base .. "/echo")
                print(w, ok and res:json().body or res.message)
            end
            """)
        #expect(r.lines == [
            "integer\t1\tnil",
            "read\t",
            "id\tinterceptor 'edit' failed: pipeline.lua:5: usage: t.id cannot be set (a request has method, url, headers, body, timeout; id and attempt are read-only)",
            "attempt\tinterceptor 'edit' failed: pipeline.lua:6: usage: t.attempt cannot be set (a request has method, url, headers, body, timeout; id and attempt are read-only)",
            "bogus\tinterceptor 'edit' failed: pipeline.lua:7: usage: t.bogus cannot be set (a request has method, url, headers, body, timeout; id and attempt are read-only)",
            "body\tset",
        ], "\(r.lines) \(r.diagnostics)")
    }

    /// An HTTP reaction may await any task: its own tasks are requests,
    /// whose ids are not tasks' (request #1 was taken for task #1, whose
    /// await was refused as a reaction awaiting its own task).
    @Test func anHTTPReactionMayAwaitATaskWhoseIdARequestShares() async throws {
        let key = uniqueKey()
        let r = try await runHTTP("""
            local t1 = tasker.add{name = "t1", run = function() tasker.sleep(0.02); return "t1 done" end}
            tasker.react{name = "r", on = "http", when = function(t, res) return res.status == 401 end,
                         fn = function() print(t1:await()) end}
            local t2 = tasker.add{name = "t2", run = function()
              return http.get(base .. "/flaky?key=\(key)&fail=1&status=401").status
            end}
            print(t2:await())
            """)
        #expect(r.lines == ["t1 done", "401"], "\(r.lines) \(r.diagnostics)")
    }

    @Test func heldRequestsGoOutAsABatch() async throws {
        let r = try await runHTTP("""
            local order = {}
            tasker.intercept{on = "http", fn = function(t, held)
                if held < 2 and not t.url:find("last") then return "hold" end
            end}
            local hs = {}
            for i = 1, 3 do
                hs[i] = tasker.add(function() local q = http.get(base .. "/echo?n=" .. i):json().query; order[#order + 1] = q; return q end)
            end
            print(table.concat(tasker.all(hs), " "))
            """)
        #expect(r.lines == ["n=1 n=2 n=3"])
    }

    @Test func a401StormCausesOneTokenRefreshAndEveryRequestSucceeds() async throws {
        let realm = uniqueKey()
        let r = try await runHTTP("""
            local token = "stale"
            tasker.intercept{name = "auth", on = "http", fn = function(t)
                if not t.url:find("/token") then t.headers.authorization = "Bearer " .. token end
            end}
            tasker.react{name = "refresh", on = "http", requeue = true, reintercept = true, suspend = true,
                when = function(t, r) return r.status == 401 end,
                fn = function(t, r) token = http.post(base .. "/token?realm=\(realm)"):json().token end}
            local hs = {}
            for i = 1, 60 do hs[i] = tasker.add(function() return http.get(base .. "/bearer?realm=\(realm)").status end) end
            local ok = 0
            for _, s in ipairs(tasker.all(hs)) do if s == 200 then ok = ok + 1 end end
            print(ok, token)
            """, concurrency: 60)
        #expect(r.lines == ["60\ttok-1"])
        #expect(TestHTTPServer.shared.refreshes(realm) == 1)
    }

    @Test func reactorsSeeTransportFailuresAndRequeueAtMostMaxRequeues() async throws {
        let r = try await runHTTP("""
            local reactions = 0
            tasker.react{on = "http", requeue = true, max_requeues = 2,
                when = function(t, r) return not r.ok end,
                fn = function(t, r) reactions = reactions + 1; last = r.error and r.error.code or r.status end}
            print(http.get(base .. "/status/500", {retry = false}).status)
            local ok, err = pcall(function() return http.get("http://127.0.0.1:1/", {retry = false}) end)
            print(err.code, reactions, last)
            """)
        #expect(r.lines == ["500", "connect\t6\tconnect"])
    }
}

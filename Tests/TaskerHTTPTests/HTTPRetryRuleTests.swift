import Foundation
import Testing
import TaskerHTTP

/// The retry rule and URL redaction, in Swift, without Lua or a server.
@Suite struct HTTPRetryRuleTests {
    @Test func retriesOnlyIdempotentRequestsWithRetryableStatusesOrTransientCodes() {
        for status in [408, 429, 500, 502, 503, 504] {
            #expect(HTTPRetryRule.shouldRetry(idempotent: true, status: status, code: nil))
            #expect(!HTTPRetryRule.shouldRetry(idempotent: false, status: status, code: nil))
        }
        for status in [200, 301, 400, 401, 404, 501] {
            #expect(!HTTPRetryRule.shouldRetry(idempotent: true, status: status, code: nil))
        }
        for code: HTTPTransportError.Code in [.timeout, .connect, .dns, .reset] {
            #expect(HTTPRetryRule.shouldRetry(idempotent: true, status: nil, code: code))
        }
        for code: HTTPTransportError.Code in [.tls, .cancelled, .other] {
            #expect(!HTTPRetryRule.shouldRetry(idempotent: true, status: nil, code: code))
        }
    }

    @Test func retryAfterReadsSecondsAndDates() {
        #expect(HTTPRetryRule.retryAfterSeconds(" 120 ") == 120)
        #expect(HTTPRetryRule.retryAfterSeconds("-5") == 0)
        let now = Date(timeIntervalSince1970: 1_700_000_000)  // Tue, 14 Nov 2023 22:13:20 GMT
        #expect(HTTPRetryRule.retryAfterSeconds("Tue, 14 Nov 2023 22:13:50 GMT", now: now) == 30)
        #expect(HTTPRetryRule.retryAfterSeconds("Tue, 14 Nov 2023 22:00:00 GMT", now: now) == 0)
        #expect(HTTPRetryRule.retryAfterSeconds("soon") == nil)
    }

    @Test func urlsAreRedactedAndOriginsCompared() {
        #expect(Redaction.url("https://alice:pw@h.example/x?token=abc&q=1#frag") == "https://***@h.example/x?token=***&q=1#frag")
        #expect(Redaction.url("http://h/x?api_key=k&Signature=s&page=2") == "http://h/x?api_key=***&Signature=***&page=2")
        #expect(Redaction.url("http://h/plain") == "http://h/plain")
        // camelCase names, and a token handed back in the fragment (OAuth)
        #expect(Redaction.url("http://h/x?accessToken=a1&clientSecret=c2&sortKey=name&monkey=m") ==
                "http://h/x?accessToken=***&clientSecret=***&sortKey=***&monkey=m")
        #expect(Redaction.url("http://h/cb#access_token=t1&state=s") == "http://h/cb#access_token=***&state=s")
        #expect(Redaction.url("http://h/cb?a=1#section") == "http://h/cb?a=1#section")
        // what should have been a URL: before its last @, a password maybe
        for typo in ["https//d:pw111@api.example.com/v1", "https:/d:pw222@api.example.com/v1", "d:pw333@api.example.com/v1"] {
            #expect(Redaction.malformedURL(typo) == "***@api.example.com/v1", "\(typo)")
        }
        #expect(Redaction.malformedURL("ftp://u:pw@h/x?token=t") == "ftp://***@h/x?token=***")
        #expect(Redaction.origin(of: URL(string: "https://H.example/x")!) == "https://h.example:443")
        #expect(Redaction.origin(of: URL(string: "http://h:8080/")!) != Redaction.origin(of: URL(string: "http://h/")!))
    }
}

import Foundation

/// One request as the transport sends it (after the interceptors).
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: URL
    /// Lower-case names, in the order they were set.
    public var headers: [(name: String, value: String)]
    public var body: Data?
    /// Seconds for the whole exchange.
    public var timeout: Double
    public var followRedirects: Bool
    /// A response body larger than this fails with a clear error.
    public var maxBodySize: Int
    /// The body streamed from this file instead of `body` (`body_file=`).
    public var bodyFile: String?
    /// A successful response's body (status under 400) streamed into this
    /// file instead of memory (`to_file=`): written beside it and renamed
    /// over it once complete; `maxBodySize` does not apply.
    public var toFile: String?

    public init(method: String, url: URL, headers: [(name: String, value: String)] = [], body: Data? = nil,
                timeout: Double = 30, followRedirects: Bool = true, maxBodySize: Int = 64 << 20) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.followRedirects = followRedirects
        self.maxBodySize = maxBodySize
    }
}

/// What came back: status, lower-case headers, body, the URL after redirects.
public struct HTTPResponse: Sendable {
    public var status: Int
    /// Lower-case names; repeated headers are joined with ", ".
    public var headers: [(name: String, value: String)]
    public var body: Data
    public var url: String
    /// Seconds from sending to the end of the body.
    public var elapsed: Double
    /// With `toFile`: the body's size, now in that file (`body` is empty).
    public var savedBytes: Int?

    public init(status: Int, headers: [(name: String, value: String)], body: Data, url: String, elapsed: Double) {
        self.status = status
        self.headers = headers
        self.body = body
        self.url = url
        self.elapsed = elapsed
    }

    public func header(_ name: String) -> String? {
        headers.first { $0.name == name }?.value
    }
}

/// A request that got no response (README: HTTP, transport codes).
public struct HTTPTransportError: Error, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable {
        case timeout, connect, dns, tls, reset, cancelled, other

        /// Worth another try: the request may not have reached the server,
        /// or the server did not answer in time.
        public var isTransient: Bool { self == .timeout || self == .connect || self == .dns || self == .reset }
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}

/// Sends requests; the completion runs on some other thread, exactly once.
/// The engine talks to HTTP only through this, so tests and benches can
/// swap the client.
public protocol HTTPTransport: AnyObject, Sendable {
    func send(_ request: HTTPRequest,
              completion: @escaping @Sendable (Result<HTTPResponse, HTTPTransportError>) -> Void) -> HTTPExchange
    /// At most `n` connections to one host from now on; requests in flight
    /// are not disturbed.
    func limitConnections(perHost n: Int)
}

/// A request in flight; `cancel` ends it with code `cancelled` (if it has
/// not ended already).
public protocol HTTPExchange: AnyObject, Sendable {
    func cancel()
}

extension HTTPRequest {
    /// Methods that may be sent twice with the same effect (RFC 9110 §9.2.2).
    public var isIdempotent: Bool {
        switch method {
        case "GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE": true
        default: false
        }
    }
}

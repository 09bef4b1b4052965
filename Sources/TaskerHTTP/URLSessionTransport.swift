import CCurlLoader
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `HTTPTransport` on FoundationNetworking's URLSession (README, HTTP).
///
/// One session per transport, configured for a tool rather than a browser:
/// no cookies, cache or credential store, and as many connections per host
/// as requests may be in flight (URLSession's default of 6 would queue the
/// rest inside URLSession, out of the engine's sight). Callbacks arrive on
/// one serial delegate queue; per-request state lives in `Exchange`.
public final class URLSessionTransport: HTTPTransport {
    private let session: URLSession
    private let router: ExchangeRouter

    /// Fails when libcurl, which FoundationNetworking needs and which is
    /// loaded only now (see `CCurlLoader`), is not on the machine.
    public init(connectionsPerHost: Int) throws(HTTPTransportError) {
        var err = [CChar](repeating: 0, count: 512)
        guard tasker_curl_load(&err, err.count) == 0 else {
            let why = String(decoding: err.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw HTTPTransportError(.other, "HTTP needs libcurl (Debian: libcurl4): \(why)")
        }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = max(1, connectionsPerHost)
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        // Without this, every response header line is decoded and scanned
        // for cookies even with no cookie store: ~20% of URLSession's time.
        configuration.httpCookieAcceptPolicy = .never
        configuration.urlCache = nil
        configuration.urlCredentialStorage = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        router = ExchangeRouter()
        session = URLSession(configuration: configuration, delegate: router, delegateQueue: queue)
    }

    deinit {
        // The session keeps its delegate until invalidated.
        session.finishTasksAndInvalidate()
    }

    public func send(_ request: HTTPRequest,
                     completion: @escaping @Sendable (Result<HTTPResponse, HTTPTransportError>) -> Void) -> HTTPExchange {
        var r = URLRequest(url: request.url)
        r.httpMethod = request.method
        for h in request.headers { r.setValue(h.value, forHTTPHeaderField: h.name) }
        // The caller's own timer enforces `request.timeout` exactly. URLSession
        // on Linux fails a request at once (-1001) when its timeout is under
        // a second and the body is still coming, so it only gets a safety net.
        r.timeoutInterval = max(request.timeout, 1) + 1
        let task: URLSessionDataTask
        if let file = request.bodyFile {
            // read from the file as it is sent, never whole in memory
            task = session.uploadTask(with: r, fromFile: URL(fileURLWithPath: file))
        } else {
            r.httpBody = request.body
            task = session.dataTask(with: r)
        }
        let exchange = Exchange(task: task, request: request, completion: completion)
        router.register(exchange, for: task.taskIdentifier)
        task.resume()
        return exchange
    }
}

/// One request in flight.
final class Exchange: HTTPExchange, @unchecked Sendable {
    // Safety: `task` is immutable and URLSessionTask is thread-safe;
    // `body`, `tooLarge` and `finished` are touched only by delegate
    // callbacks, which URLSession runs one at a time on its serial queue.
    let task: URLSessionDataTask
    let followRedirects: Bool
    let maxBodySize: Int
    /// Scheme, host and port of the first request: secrets stay with it.
    let origin: String
    let started = DispatchTime.now().uptimeNanoseconds
    let completion: @Sendable (Result<HTTPResponse, HTTPTransportError>) -> Void
    var body = Data()
    var tooLarge = false
    var finished = false
    /// `to_file`: where a successful body goes, while it comes.
    let toFile: String?
    var sink: ResponseFile?
    var sinkError: String?

    init(task: URLSessionDataTask, request: HTTPRequest,
         completion: @escaping @Sendable (Result<HTTPResponse, HTTPTransportError>) -> Void) {
        self.task = task
        self.followRedirects = request.followRedirects
        self.maxBodySize = request.maxBodySize
        self.origin = Redaction.origin(of: request.url)
        self.toFile = request.toFile
        self.completion = completion
    }

    func cancel() { task.cancel() }

    /// Delegate queue only: a chunk of the body, to memory or the file.
    func receive(_ data: Data) {
        if let sink {
            if sinkError == nil, let why = sink.write(data) {
                sinkError = why
                task.cancel()
            }
            return
        }
        if body.count + data.count > maxBodySize {
            tooLarge = true
            task.cancel()
            return
        }
        if body.isEmpty { body = data } else { body.append(data) }
    }

    /// Delegate queue only.
    func finish(_ error: Error?) {
        guard !finished else { return }
        finished = true
        var saved: Int?
        if let sink {
            // complete and not failed: in place; else the old file stays
            if error == nil && sinkError == nil, let why = sink.commit() {
                sinkError = why
            }
            if error != nil || sinkError != nil { sink.discard() }
            saved = sink.written
        }
        if let sinkError {
            completion(.failure(HTTPTransportError(.other, "cannot write the response to '\(toFile ?? "")': \(sinkError)")))
            return
        }
        if tooLarge {
            completion(.failure(HTTPTransportError(.other, "the response body exceeds the limit of \(maxBodySize) bytes (http.configure{max_body=...})")))
            return
        }
        if let error {
            completion(.failure(HTTPTransportError.from(error)))
            return
        }
        let url = task.originalRequest?.url?.absoluteString ?? "?"
        guard let response = task.response as? HTTPURLResponse else {
            completion(.failure(HTTPTransportError(.other, "no HTTP response")))
            return
        }
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(response.allHeaderFields.count)
        for (k, v) in response.allHeaderFields {
            headers.append((name: "\(k)".lowercased(), value: "\(v)"))
        }
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        var result = HTTPResponse(status: response.statusCode, headers: headers, body: body,
                                  url: response.url?.absoluteString ?? url, elapsed: elapsed)
        result.savedBytes = saved
        completion(.success(result))
    }
}

/// The session delegate: routes callbacks to their exchange.
final class ExchangeRouter: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    // Safety: `exchanges` is guarded by `lock` (registration happens on the
    // sender's thread, callbacks on the delegate queue).
    private let lock = NSLock()
    private var exchanges: [Int: Exchange] = [:]

    func register(_ e: Exchange, for id: Int) {
        lock.lock()
        exchanges[id] = e
        lock.unlock()
    }

    private func exchange(_ task: URLSessionTask, remove: Bool = false) -> Exchange? {
        lock.lock()
        defer { lock.unlock() }
        return remove ? exchanges.removeValue(forKey: task.taskIdentifier) : exchanges[task.taskIdentifier]
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        if let e = exchange(dataTask), let path = e.toFile, ((response as? HTTPURLResponse)?.statusCode ?? 0) < 400 {
            // a body that is the thing asked for goes to its file; an error
            // page stays in memory (and the old file where it is)
            switch ResponseFile.open(beside: path) {
            case .success(let file): e.sink = file
            case .failure(let why):
                e.sinkError = why.message
                completionHandler(.cancel)
                dataTask.cancel()
                return
            }
            completionHandler(.allow)
            return
        }
        if let e = exchange(dataTask), Self.declaredLength(response) > Int64(e.maxBodySize) {
            // Refused before any body byte is kept. `.cancel` alone lets
            // FoundationNetworking go on reading: cancel the task too.
            e.tooLarge = true
            completionHandler(.cancel)
            dataTask.cancel()
            return
        }
        completionHandler(.allow)
    }

    /// The declared body length: `expectedContentLength`, or the header
    /// itself when that reads -1 (values past what it parses).
    static func declaredLength(_ response: URLResponse) -> Int64 {
        if response.expectedContentLength >= 0 { return response.expectedContentLength }
        guard let http = response as? HTTPURLResponse,
              let text = http.value(forHTTPHeaderField: "Content-Length")?.trimmingCharacters(in: .whitespaces)
        else { return -1 }
        return Int64(text) ?? (text.allSatisfy(\.isNumber) && !text.isEmpty ? .max : -1)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard let e = exchange(dataTask), !e.tooLarge else { return }
        e.receive(data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        exchange(task, remove: true)?.finish(error)
    }

    /// Follows redirects unless told not to; secret headers (authorization,
    /// cookie, proxy-authorization, x-api-key) do not travel to another
    /// origin (scheme, host or port).
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
        guard let e = exchange(task), e.followRedirects else {
            completionHandler(nil)
            return
        }
        var next = request
        if next.url.map(Redaction.origin(of:)) != e.origin {
            for name in Redaction.secretHeaders { next.setValue(nil, forHTTPHeaderField: name) }
        }
        completionHandler(next)
    }
}

extension HTTPTransportError {
    /// Maps URLSession's errors to the codes the README lists under HTTP.
    static func from(_ error: Error) -> HTTPTransportError {
        guard let e = error as? URLError else { return HTTPTransportError(.other, error.localizedDescription) }
        let code: Code = switch e.code {
        case .timedOut: .timeout
        case .cannotConnectToHost, .notConnectedToInternet: .connect
        case .cannotFindHost, .dnsLookupFailed: .dns
        case .secureConnectionFailed, .serverCertificateHasBadDate, .serverCertificateUntrusted,
             .serverCertificateHasUnknownRoot, .serverCertificateNotYetValid, .clientCertificateRejected,
             .clientCertificateRequired: .tls
        case .networkConnectionLost: .reset
        case .cancelled: .cancelled
        default: classify(e.localizedDescription)
        }
        let what = switch code {
        case .timeout: "timed out"
        case .connect: "could not connect"
        case .dns: "could not resolve the host"
        case .tls: "TLS failed"
        case .reset: "the connection was lost"
        case .cancelled: "cancelled"
        case .other: "failed"
        }
        // libcurl refuses a header block over 100 KB as "Out of memory".
        if code == .other, e.localizedDescription.contains("Out of memory") {
            return HTTPTransportError(code, "failed: the response headers are too large (over libcurl's 100 KB), or memory ran out")
        }
        return HTTPTransportError(code, "\(what) (\(e.localizedDescription))")
    }

    /// FoundationNetworking reports several libcurl failures (a TLS
    /// handshake with a server that does not speak TLS, a connection closed
    /// mid-body) as an unknown error with libcurl's message; the message is
    /// all there is to tell them by.
    private static func classify(_ text: String) -> Code {
        if ["SSL", "TLS", "certificate"].contains(where: { text.contains($0) }) { return .tls }
        let lost = ["transfer closed", "reset by peer", "Recv failure", "Send failure", "Empty reply"]
        return lost.contains(where: { text.contains($0) }) ? .reset : .other
    }
}

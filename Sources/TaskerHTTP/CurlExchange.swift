import CCurlLoader
import Foundation

/// One request in flight on `CurlDriver`'s thread: one libcurl easy
/// handle per hop (a followed redirect is a new hop), the response as it
/// arrives, and the completion, called exactly once.
final class CurlExchange: HTTPExchange, @unchecked Sendable {
    // Safety: `driver`, `completion` and the request's constants are set
    // in init and only read. Everything else is touched only on the
    // driver's thread (`begin`, libcurl's callbacks during
    // `curl_multi_perform`, `transferEnded`, `end`); `cancel` only hands
    // the exchange to that thread.
    private let driver: CurlDriver
    private let completion: @Sendable (Result<HTTPResponse, HTTPTransportError>) -> Void
    private let started = DispatchTime.now().uptimeNanoseconds
    private let followRedirects: Bool
    private let maxBodySize: Int
    private let timeout: Double
    private let toFile: String?
    /// Scheme, host and port of the first request: secrets stay with it.
    private let origin: String

    // This hop.
    private var method: String
    private var url: String
    private var headers: [(name: String, value: String)]
    private var body: Data?
    private var bodyFile: String?
    private(set) var easy: UnsafeMutableRawPointer?
    private var headerList: UnsafeMutableRawPointer?
    /// libcurl's words for a failure (it keeps the pointer: allocated once).
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(TASKER_CURL_ERROR_SIZE))
    private var upload: FileHandle?
    private var hops = 0

    // The response of this hop.
    private var status = 0
    private var responseHeaders: [(name: String, value: String)] = []
    private var redirecting = false
    /// The final response's header block ended (a connection closed before
    /// its blank line is a lost connection, not a response).
    private var headersComplete = false
    private var tooManyRedirects = false
    private var received = Data()
    private var sink: ResponseFile?
    private var sinkError: String?
    private var tooLarge = false
    private var finished = false

    /// URLSession's limit, kept.
    static let maxRedirects = 16

    init(_ request: HTTPRequest, driver: CurlDriver,
         completion: @escaping @Sendable (Result<HTTPResponse, HTTPTransportError>) -> Void) {
        self.driver = driver
        self.completion = completion
        followRedirects = request.followRedirects
        maxBodySize = request.maxBodySize
        timeout = request.timeout
        toFile = request.toFile
        origin = Redaction.origin(of: request.url)
        method = request.method
        url = request.url.absoluteString
        headers = request.headers
        body = request.body
        bodyFile = request.bodyFile
    }

    func cancel() { driver.cancel(self) }

    // MARK: a hop

    /// A new easy handle for this hop, added to `multi`; nil when it could
    /// not start (the exchange has ended then).
    func begin(on multi: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
        guard !finished else { return nil }
        guard let h = tasker_curl_easy_init() else {
            end(.failure(HTTPTransportError(.other, "libcurl could not create a request")))
            return nil
        }
        easy = h
        status = 0
        responseHeaders = []
        redirecting = false
        headersComplete = false
        errorBuffer[0] = 0
        let me = Unmanaged.passUnretained(self).toOpaque()
        setLong(h, TASKER_CURLOPT_NOSIGNAL, 1)
        setString(h, TASKER_CURLOPT_URL, url)
        setString(h, TASKER_CURLOPT_PROTOCOLS_STR, "http,https")
        setString(h, TASKER_CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        // The caller's own timer enforces the timeout exactly; this is a
        // safety net for a caller that never comes back.
        // (None past ~30 years: `Int(_:)` of a larger double traps.)
        let netMs = (max(timeout, 1) + 1) * 1000
        setLong(h, TASKER_CURLOPT_TIMEOUT_MS, netMs < 1e12 ? Int(netMs) : 0)
        // Compressed bodies are accepted and decoded, as URLSession did.
        setString(h, TASKER_CURLOPT_ACCEPT_ENCODING, "")
        setLong(h, TASKER_CURLOPT_TCP_KEEPALIVE, 1)
        if let file = Self.trustedCertificates.file { setString(h, TASKER_CURLOPT_CAINFO, file) }
        if let dir = Self.trustedCertificates.directory { setString(h, TASKER_CURLOPT_CAPATH, dir) }
        _ = tasker_curl_easy_setopt_pointer(h, Int32(TASKER_CURLOPT_ERRORBUFFER), errorBuffer)
        _ = tasker_curl_easy_setopt_pointer(h, Int32(TASKER_CURLOPT_PRIVATE), me)
        _ = tasker_curl_easy_setopt_function(h, Int32(TASKER_CURLOPT_HEADERFUNCTION), curlHeaderLine)
        _ = tasker_curl_easy_setopt_pointer(h, Int32(TASKER_CURLOPT_HEADERDATA), me)
        _ = tasker_curl_easy_setopt_function(h, Int32(TASKER_CURLOPT_WRITEFUNCTION), curlBodyChunk)
        _ = tasker_curl_easy_setopt_pointer(h, Int32(TASKER_CURLOPT_WRITEDATA), me)
        if let why = setMethodAndBody(h) {
            end(.failure(HTTPTransportError(.other, why)))
            return nil
        }
        setHeaders(h)
        let added = tasker_curl_multi_add_handle(multi, h)
        guard added == 0 else {
            end(.failure(HTTPTransportError(.other, "libcurl refused the request (\(added))")))
            return nil
        }
        return h
    }

    /// HEAD without a body; a body from memory (libcurl copies it) or
    /// streamed from its file; any other method by name.
    private func setMethodAndBody(_ h: UnsafeMutableRawPointer) -> String? {
        if method == "HEAD" {
            setLong(h, TASKER_CURLOPT_NOBODY, 1)
            return nil
        }
        // By name also for a GET with a body: given a body, libcurl would
        // send POST (PUT for a file), and a retry would repeat it.
        if method != "GET" || body != nil || bodyFile != nil { setString(h, TASKER_CURLOPT_CUSTOMREQUEST, method) }
        if let bodyFile {
            // Opened again for a retry or a 307: it may have been replaced
            // meanwhile. O_NONBLOCK: a FIFO must not hang this thread.
            let fd = open(bodyFile, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
            guard fd >= 0 else { return "cannot read the body file '\(bodyFile)': \(String(cString: strerror(errno)))" }
            var st = stat()
            guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
                close(fd)
                return "the body file '\(bodyFile)' is not a regular file"
            }
            upload = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
            let size = Int64(st.st_size)
            setLong(h, TASKER_CURLOPT_UPLOAD, 1)
            _ = tasker_curl_easy_setopt_offset(h, Int32(TASKER_CURLOPT_INFILESIZE_LARGE), size)
            _ = tasker_curl_easy_setopt_function(h, Int32(TASKER_CURLOPT_READFUNCTION), curlUploadChunk)
            _ = tasker_curl_easy_setopt_pointer(h, Int32(TASKER_CURLOPT_READDATA), Unmanaged.passUnretained(self).toOpaque())
            return nil
        }
        // POST, PUT and PATCH say "Content-Length: 0" when they send nothing.
        if body == nil && ["POST", "PUT", "PATCH"].contains(method) { body = Data() }
        if let body {
            _ = tasker_curl_easy_setopt_offset(h, Int32(TASKER_CURLOPT_POSTFIELDSIZE_LARGE), Int64(body.count))
            _ = body.withUnsafeBytes { raw in
                // copied by libcurl (the size was set first: binary is fine)
                tasker_curl_easy_setopt_pointer(h, Int32(TASKER_CURLOPT_COPYPOSTFIELDS), raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1))
            }
        }
        return nil
    }

    /// The request's headers as given; "Expect:" turns off libcurl's
    /// 100-continue wait for large bodies, and an empty value is sent as
    /// one ("Name;" in libcurl's terms).
    private func setHeaders(_ h: UnsafeMutableRawPointer) {
        var list: UnsafeMutableRawPointer?
        var hasExpect = false, hasAgent = false
        for header in headers {
            // libcurl frames the body itself: a length or coding given by
            // the script could desynchronise the connection (a reused
            // `r.headers` carries a compressed body's length).
            if header.name == "content-length" || header.name == "transfer-encoding" { continue }
            if header.name == "expect" { hasExpect = true }
            if header.name == "user-agent" { hasAgent = true }
            let line = header.value.isEmpty ? "\(header.name);" : "\(header.name): \(header.value)"
            list = tasker_curl_slist_append(list, line)
        }
        if !hasExpect { list = tasker_curl_slist_append(list, "Expect:") }
        if !hasAgent { setString(h, TASKER_CURLOPT_USERAGENT, CurlExchange.userAgent) }
        headerList = list
        _ = tasker_curl_easy_setopt_pointer(h, Int32(TASKER_CURLOPT_HTTPHEADER), list)
    }

    static let userAgent = "tasker"

    /// A private CA, as OpenSSL's tools and curl take it: `SSL_CERT_FILE`
    /// or `CURL_CA_BUNDLE`, `SSL_CERT_DIR`; else the system's.
    static let trustedCertificates: (file: String?, directory: String?) = {
        let env = ProcessInfo.processInfo.environment
        let file = [env["SSL_CERT_FILE"], env["CURL_CA_BUNDLE"]].compactMap { $0 }.first { !$0.isEmpty }
        let dir = env["SSL_CERT_DIR"].flatMap { $0.isEmpty ? nil : $0 }
        return (file, dir)
    }()

    private func setLong(_ h: UnsafeMutableRawPointer, _ option: Int, _ value: Int) {
        _ = tasker_curl_easy_setopt_long(h, Int32(option), value)
    }

    /// libcurl copies string options (not POSTFIELDS).
    private func setString(_ h: UnsafeMutableRawPointer, _ option: Int, _ value: String) {
        _ = value.withCString { tasker_curl_easy_setopt_pointer(h, Int32(option), $0) }
    }

    /// The hop's handle and what it held go.
    private func endHop() {
        if let easy { tasker_curl_easy_cleanup(easy) }
        easy = nil
        if let headerList { tasker_curl_slist_free_all(headerList) }
        headerList = nil
        try? upload?.close()
        upload = nil
    }

    // MARK: libcurl's callbacks (driver thread, inside curl_multi_perform)

    /// One header line. A status line starts a new block (an interim 1xx
    /// or a redirect's); the empty line ends it. False stops the transfer.
    func headerLine(_ raw: UnsafeRawBufferPointer) -> Bool {
        var line = Substring(String(decoding: raw, as: UTF8.self))
        while let last = line.last, last.isNewline { line = line.dropLast() }  // "\r\n" is one Character
        if line.hasPrefix("HTTP/") {
            responseHeaders = []
            headersComplete = false
            return true
        }
        if line.isEmpty { return headersEnded() }
        if let first = line.first, first == " " || first == "\t", !responseHeaders.isEmpty {
            // an obsolete folded line continues the last value
            responseHeaders[responseHeaders.count - 1].value += " " + line.trimmingCharacters(in: .whitespaces)
            return true
        }
        guard let colon = line.firstIndex(of: ":") else { return true }
        let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        if let i = responseHeaders.firstIndex(where: { $0.name == name }) {
            responseHeaders[i].value += ", " + value
        } else {
            responseHeaders.append((name: name, value: value))
        }
        return true
    }

    /// The headers are in: decide where the body goes.
    private func headersEnded() -> Bool {
        var code = 0
        if let easy { _ = tasker_curl_easy_getinfo_long(easy, Int32(TASKER_CURLINFO_RESPONSE_CODE), &code) }
        status = code
        if (100..<200).contains(code) {
            responseHeaders = []
            return true
        }
        headersComplete = true
        if followRedirects && [301, 302, 303, 307, 308].contains(code) && responseHeaders.contains(where: { $0.name == "location" }) {
            guard hops < Self.maxRedirects else {
                tooManyRedirects = true
                return false
            }
            redirecting = true
            return true
        }
        // Only a body that is the thing asked for goes to its file; an error
        // page, a redirect, 204/205 or 304 (nothing new) or a HEAD leave the
        // old file as it is (the body, if any, stays in memory).
        if let toFile, (200..<300).contains(code), code != 204, code != 205, method != "HEAD" {
            switch ResponseFile.open(beside: toFile) {
            case .success(let file): sink = file
            case .failure(let why):
                sinkError = why.message
                return false
            }
            return true
        }
        if declaredLength > Int64(maxBodySize) {
            tooLarge = true  // refused before any body byte is kept
            return false
        }
        return true
    }

    /// The Content-Length header: -1 when absent, `.max` past Int64.
    private var declaredLength: Int64 {
        guard let text = responseHeaders.first(where: { $0.name == "content-length" })?.value,
              !text.isEmpty, text.allSatisfy(\.isNumber) else { return -1 }
        return Int64(text) ?? .max
    }

    /// A piece of the body. False stops the transfer.
    func bodyChunk(_ raw: UnsafeRawBufferPointer) -> Bool {
        if redirecting { return true }  // the redirect's own body is not kept
        if let sink {
            if let why = sink.write(raw) {
                sinkError = why
                return false
            }
            return true
        }
        if received.count + raw.count > maxBodySize {
            tooLarge = true
            return false
        }
        received.append(contentsOf: raw)
        return true
    }

    /// The next piece of the body file; -1 stops the transfer.
    func uploadChunk(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard let upload else { return -1 }
        let n = read(upload.fileDescriptor, buffer.baseAddress, buffer.count)
        return n < 0 ? -1 : n
    }

    // MARK: the end

    /// The hop's transfer ended with `code`: the next hop's handle when a
    /// redirect is followed, else nil (the exchange has ended).
    func transferEnded(_ result: Int32, on multi: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
        let code = Int(result)
        if code == TASKER_CURLE_OK && redirecting, let next = redirectTarget() {
            endHop()
            hops += 1
            follow(to: next)
            return begin(on: multi)
        }
        var effective: UnsafePointer<CChar>?
        if let easy { _ = tasker_curl_easy_getinfo_string(easy, Int32(TASKER_CURLINFO_EFFECTIVE_URL), &effective) }
        let finalURL = effective.map { String(cString: $0) } ?? url
        let message = errorBuffer[0] != 0 ? String(cString: errorBuffer) : String(cString: tasker_curl_easy_strerror(result))
        endHop()
        if let sinkError {
            end(.failure(HTTPTransportError(.other, "cannot write the response to '\(toFile ?? "")': \(sinkError)")))
        } else if tooManyRedirects {
            end(.failure(HTTPTransportError(.other, "too many redirects (more than \(Self.maxRedirects)); the last went to \(Redaction.url(finalURL))")))
        } else if code == TASKER_CURLE_OK && !headersComplete {
            // libcurl calls a response cut inside its headers a success
            end(.failure(HTTPTransportError(.reset, "the connection was lost (closed before the response's headers ended)")))
        } else if tooLarge {
            end(.failure(HTTPTransportError(.other, "the response body exceeds the limit of \(maxBodySize) bytes (http.configure{max_body=...})")))
        } else if code != TASKER_CURLE_OK {
            end(.failure(HTTPTransportError.fromCurl(code, message)))
        } else {
            var saved: Int?
            if let sink {
                if let why = sink.commit() {
                    end(.failure(HTTPTransportError(.other, "cannot write the response to '\(toFile ?? "")': \(why)")))
                    return nil
                }
                saved = sink.written
                self.sink = nil  // in place now: nothing to discard
            }
            let elapsed = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
            var response = HTTPResponse(status: status, headers: responseHeaders, body: received, url: finalURL, elapsed: elapsed)
            response.savedBytes = saved
            end(.success(response))
        }
        return nil
    }

    /// Where the redirect goes (libcurl resolves Location against the URL).
    private func redirectTarget() -> String? {
        guard let easy else { return nil }
        var target: UnsafePointer<CChar>?
        _ = tasker_curl_easy_getinfo_string(easy, Int32(TASKER_CURLINFO_REDIRECT_URL), &target)
        return target.map { String(cString: $0) }
    }

    /// The next hop, as browsers and URLSession do it: 303, and 301 or 302
    /// after a POST, become a GET without a body; 307 and 308 repeat the
    /// request. Secret headers stay with the first origin.
    private func follow(to next: String) {
        if status == 303 && method != "HEAD" || (status == 301 || status == 302) && method == "POST" {
            method = "GET"
            body = nil
            bodyFile = nil
            headers.removeAll { $0.name == "content-type" || $0.name == "content-length" }
        }
        if let nextURL = URL(string: next), Redaction.origin(of: nextURL) != origin {
            headers.removeAll { Redaction.secretHeaders.contains($0.name) || $0.name == "host" }
        }
        url = next
        received = Data()
    }

    deinit { errorBuffer.deallocate() }

    /// Calls the completion, once.
    func end(_ result: Result<HTTPResponse, HTTPTransportError>) {
        guard !finished else { return }
        finished = true
        endHop()
        // Not committed (a failure, a cancel, a timeout, the run's end): the
        // partial file goes and the old one stays.
        sink?.discard()
        sink = nil
        completion(result)
    }
}

// libcurl's callbacks: the context is the exchange (unretained: the driver
// keeps it while its transfer runs). A short count stops the transfer.
private let curlHeaderLine: tasker_curl_data_fn = { data, size, count, context in
    let n = size * count
    let e = Unmanaged<CurlExchange>.fromOpaque(context!).takeUnretainedValue()
    return e.headerLine(UnsafeRawBufferPointer(start: data, count: n)) ? n : 0
}

private let curlBodyChunk: tasker_curl_data_fn = { data, size, count, context in
    let n = size * count
    let e = Unmanaged<CurlExchange>.fromOpaque(context!).takeUnretainedValue()
    return e.bodyChunk(UnsafeRawBufferPointer(start: data, count: n)) ? n : 0
}

/// CURL_READFUNC_ABORT when the file cannot be read.
private let curlUploadChunk: tasker_curl_data_fn = { data, size, count, context in
    let e = Unmanaged<CurlExchange>.fromOpaque(context!).takeUnretainedValue()
    let n = e.uploadChunk(into: UnsafeMutableRawBufferPointer(start: data, count: size * count))
    return n < 0 ? 0x1000_0000 : n
}

extension HTTPTransportError {
    /// libcurl's result codes as the codes the README lists under HTTP.
    static func fromCurl(_ code: Int, _ message: String) -> HTTPTransportError {
        let kind: Code = switch code {
        case TASKER_CURLE_OPERATION_TIMEDOUT: .timeout
        case TASKER_CURLE_COULDNT_CONNECT: .connect
        case TASKER_CURLE_COULDNT_RESOLVE_HOST, TASKER_CURLE_COULDNT_RESOLVE_PROXY: .dns
        case TASKER_CURLE_SSL_CONNECT_ERROR, TASKER_CURLE_PEER_FAILED_VERIFICATION, TASKER_CURLE_SSL_CERTPROBLEM,
             TASKER_CURLE_SSL_CIPHER, TASKER_CURLE_SSL_CACERT_BADFILE, TASKER_CURLE_SSL_SHUTDOWN_FAILED,
             TASKER_CURLE_SSL_CRL_BADFILE, TASKER_CURLE_SSL_ISSUER_ERROR, TASKER_CURLE_SSL_PINNEDPUBKEYNOTMATCH,
             TASKER_CURLE_SSL_INVALIDCERTSTATUS, TASKER_CURLE_SSL_CLIENTCERT, TASKER_CURLE_SSL_ENGINE_NOTFOUND: .tls
        case TASKER_CURLE_GOT_NOTHING, TASKER_CURLE_SEND_ERROR, TASKER_CURLE_RECV_ERROR, TASKER_CURLE_PARTIAL_FILE,
             TASKER_CURLE_HTTP2_STREAM: .reset
        default: .other
        }
        let what = switch kind {
        case .timeout: "timed out"
        case .connect: "could not connect"
        case .dns: "could not resolve the host"
        case .tls: "TLS failed"
        case .reset: "the connection was lost"
        case .cancelled: "cancelled"
        case .other: "failed"
        }
        // libcurl refuses a header block over 100 KB.
        if kind == .other, code == TASKER_CURLE_OUT_OF_MEMORY || message.contains("header") && message.contains("max") {
            return HTTPTransportError(kind, "failed: the response headers are too large (over libcurl's 100 KB), or memory ran out")
        }
        return HTTPTransportError(kind, "\(what) (\(message))")
    }
}

import Foundation
import Synchronization
import Testing
import TaskerHTTP
#if canImport(Glibc)
import Glibc
#endif

/// A keep-alive HTTP/1.1 server that answers every request at once with
/// 204 (a thread per connection, no event loop in between): answers come
/// back as fast as loopback allows, as from nginx.
final class InstantServer: Sendable {
    let port: Int
    private let fd: Int32

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        guard bound == 0, listen(fd, 64) == 0 else { throw POSIXError(.EADDRINUSE) }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        self.fd = fd
        port = Int(UInt16(bigEndian: addr.sin_port))
        Thread {
            while true {
                let c = accept(fd, nil, nil)
                if c < 0 { return }
                Thread { Self.serve(c) }.start()
            }
        }.start()
    }

    private static func serve(_ c: Int32) {
        let answer = Array("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n".utf8)
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(c, &buffer, buffer.count)
            if n <= 0 { break }
            pending += buffer[..<n]
            // one answer per complete request head
            while let end = pending.firstRange(of: [13, 10, 13, 10]) {
                pending.removeSubrange(..<end.upperBound)
                _ = answer.withUnsafeBytes { write(c, $0.baseAddress, $0.count) }
            }
        }
        close(c)
    }

    func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }
}

@Suite struct CurlTransportTests {
    /// Bursts of four requests, each burst waited for before the next: at
    /// the end of a burst nothing new wakes the HTTP thread, so a finished
    /// transfer it did not read would keep it asleep until its poll times
    /// out (1 s). Every burst must end as soon as the server answers.
    @Test func theLastRequestsOfABurstDoNotWaitForThePollToTimeOut() throws {
        let server = try InstantServer()
        defer { server.stop() }
        let transport = try CurlTransport(connectionsPerHost: 4)
        let url = URL(string: "http://127.0.0.1:\(server.port)/")!
        var slowest = 0.0
        var statuses: [Int: Int] = [:]
        for _ in 0..<300 {
            let answered = DispatchSemaphore(value: 0)
            let results = Mutex<[Int]>([])
            let started = Date()
            for _ in 0..<4 {
                _ = transport.send(HTTPRequest(method: "GET", url: url, timeout: 10)) { result in
                    results.withLock { $0.append((try? result.get().status) ?? -1) }
                    answered.signal()
                }
            }
            for _ in 0..<4 { #expect(answered.wait(timeout: .now() + 10) == .success) }
            slowest = max(slowest, Date().timeIntervalSince(started))
            for s in results.withLock({ $0 }) { statuses[s, default: 0] += 1 }
        }
        #expect(statuses == [204: 1200])
        #expect(slowest < 0.9, "a burst of four took \(slowest) s")
    }
}

import Foundation
import Testing

/// HTTPS to a server whose certificate a private CA signed: refused with
/// code tls, trusted once `SSL_CERT_FILE` names that certificate.
@Suite struct HTTPTrustCLITests {
    @Test func aPrivateCertificateIsTrustedThroughSSLCertFile() async throws {
        let s = try Scratch(["p.lua": """
            local ok, r = pcall(http.get, "https://localhost:" .. tasker.args[1] .. "/hello.txt", {retry = false})
            print(ok, ok and r.status or r.code, ok and r.body or "")
            """, "hello.txt": "hi"])
        defer { s.cleanup() }
        let made = try await shell("openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost "
                                   + "-addext subjectAltName=DNS:localhost -days 1 -keyout key.pem -out cert.pem", in: s.dir)
        try #require(made.status == 0, "\(made.stderr)")
        let server = try Background(["python3", "-c", """
            import http.server, ssl
            s = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain("cert.pem", "key.pem")
            s.socket = ctx.wrap_socket(s.socket, server_side=True)
            print("port %d" % s.server_address[1], flush=True)
            s.serve_forever()
            """], in: s.dir, executable: URL(fileURLWithPath: "/usr/bin/env"))
        defer { server.signal(SIGKILL) }
        // the whole line (with PYTHONUNBUFFERED, print writes each part apart)
        #expect(await server.waitFor("\n"))
        let port = try #require(server.output.split(separator: " ").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) })
        let untrusted = try await tasker(["run", "--no-progress", "--no-journal", "p.lua", port], in: s.dir)
        #expect(untrusted.stdout == "false\ttls\t\n", "\(untrusted.stderr) port '\(port)', server said '\(server.output)'")
        let trusted = try await shell("SSL_CERT_FILE=cert.pem \"$TASKER\" run --no-progress --no-journal p.lua \(port)", in: s.dir)
        #expect(trusted.stdout == "true\t200\thi\n", "\(trusted.stderr)")
    }
}

import Foundation
import Testing

/// `body_file=` and `to_file=` stream request and response bodies from and
/// to disk: a 48 MB upload and download keep the process small, the target
/// file is the old one or the whole new one, and a missing body file is a
/// clear error. Against a real server (Python's http.server, loopback).
@Suite struct HTTPFileStreamCLITests {
    static let server = """
        import http.server, hashlib
        BIG = b"0123456789abcdef" * (48 * 1024 * 1024 // 16)
        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def log_message(self, *a): pass
            def reply(self, code, body):
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            def do_PUT(self):
                n = int(self.headers.get("Content-Length", "-1"))
                h, left = hashlib.sha256(), n
                while left > 0:
                    chunk = self.rfile.read(min(left, 1 << 16))
                    if not chunk: break
                    h.update(chunk)
                    left -= len(chunk)
                self.reply(200, f"{n} {h.hexdigest()}".encode())
            def do_GET(self):
                if self.path == "/missing":
                    return self.reply(404, b"not here")
                if self.path == "/cut":
                    self.send_response(200)
                    self.send_header("Content-Length", "1000000")
                    self.end_headers()
                    self.wfile.write(b"partial...")
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.reply(200, BIG)
        s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        print(s.server_address[1], flush=True)
        s.serve_forever()
        """

    @Test func bodiesStreamFromAndToFilesInLittleMemory() async throws {
        let s = try Scratch(["server.py": Self.server, "p.lua": """
            local api = tasker.args[1]
            local up = http.put(api .. "/up", nil, {body_file = "up.bin", check = true})
            print("up", up.body)
            local down = http.get(api .. "/big", {to_file = "down.bin", check = true})
            print("down", down.status, #down.body, down.file, down.size)
            local missing = http.get(api .. "/missing", {to_file = "old.bin"})
            print("missing", missing.status, missing.body, missing.file)
            local ok, err = pcall(http.get, api .. "/cut", {to_file = "old.bin", retry = false})
            print("cut", ok, err.kind)
            local ok2, err2 = pcall(http.put, api .. "/up", nil, {body_file = "nope.bin"})
            print("nofile", ok2, err2.kind, err2.message)
            local ok3, err3 = pcall(http.put, api .. "/up", nil, {body_file = "."})
            print("dir", ok3, err3.kind, err3.message)
            print("peak kB", fs.read("/proc/self/status"):match("VmHWM:%s*(%d+)"))
            """])
        defer { s.cleanup() }
        // 48 MB of bytes that do not compress or repeat
        try Data("old".utf8).write(to: s.dir.appendingPathComponent("old.bin"))
        let sha = try await shell("head -c \(48 << 20) /dev/urandom > up.bin && sha256sum up.bin | cut -c1-64", in: s.dir)
            .stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let server = try Background(["server.py"], in: s.dir, executable: URL(fileURLWithPath: "/usr/bin/python3"))
        defer { server.signal(SIGKILL) }
        #expect(await server.waitFor("\n"))
        let port = try #require(server.output.split(separator: "\n").first.flatMap { Int($0) })
        let r = try await tasker(["run", "--no-progress", "--no-journal", "p.lua", "http://127.0.0.1:\(port)"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("up\t\(48 << 20) \(sha)"), "\(r.stdout)")
        #expect(lines.contains("down\t200\t0\tdown.bin\t\(48 << 20)"), "\(r.stdout)")
        let down = try Data(contentsOf: s.dir.appendingPathComponent("down.bin"))
        #expect(down.count == 48 << 20 && down.prefix(16) == Data("0123456789abcdef".utf8))
        // an error page stays in memory, a cut body never replaces the file
        #expect(lines.contains("missing\t404\tnot here\tnil"), "\(r.stdout)")
        #expect(lines.contains("cut\tfalse\thttp"), "\(r.stdout)")
        #expect(try String(contentsOf: s.dir.appendingPathComponent("old.bin"), encoding: .utf8) == "old")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: s.dir.path).filter { $0.contains(".tasker-") }
        #expect(leftovers.isEmpty, "\(leftovers)")
        #expect(lines.contains { $0.hasPrefix("nofile\tfalse\tfs\thttp.put: cannot read body_file 'nope.bin': No such file or directory") },
                "\(r.stdout)")
        // a directory would be a body that never ends
        #expect(lines.contains("dir\tfalse\tfs\thttp.put: cannot read body_file '.': Is a directory"), "\(r.stdout)")
        // 48 MB up and 48 MB down, never whole in memory
        let peak = try #require(lines.first { $0.hasPrefix("peak kB\t") }.flatMap { Int($0.dropFirst(8)) })
        #expect(peak < 100_000, "peak RSS \(peak) kB")
    }
}

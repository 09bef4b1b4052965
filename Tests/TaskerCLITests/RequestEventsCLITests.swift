import Foundation
import Testing

/// Every HTTP attempt is a `request` event, also the one a reactor handled
/// (the 401 before a token refresh), through the built CLI against a real
/// server (Python's http.server on a loopback port).
@Suite struct RequestEventsCLITests {
    static let server = """
        import http.server, json, sys
        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a): pass
            def reply(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            def do_POST(self):
                self.reply(200, {"token": "fresh"})
            def do_GET(self):
                if self.headers.get("Authorization") == "Bearer fresh":
                    self.reply(200, {"item": "widget"})
                else:
                    self.reply(401, {"error": "expired"})
        s = http.server.HTTPServer(("127.0.0.1", 0), H)
        print(s.server_address[1], flush=True)
        s.serve_forever()
        """

    @Test func theAttemptAReactorHandledIsAnEventToo() async throws {
        let s = try Scratch(["server.py": Self.server, "p.lua": """
            local api = tasker.args[1]
            local token = "none-yet"
            tasker.intercept{name = "auth", on = "http", fn = function(t)
              if not t.url:find("/token", 1, true) then t.headers.authorization = "Bearer " .. token end
            end}
            tasker.react{name = "refresh", on = "http", requeue = true, reintercept = true, suspend = true,
              when = function(t, resp) return resp.status == 401 end,
              fn = function() token = http.post(api .. "/token", nil, {check = true}):json().token end}
            print(http.get(api .. "/items/1", {check = true}):json().item)
            print(tasker.add{name = "fetch", run = function() return http.get(api .. "/items/2").status end}:await())
            """])
        defer { s.cleanup() }
        let server = try Background(["server.py"], in: s.dir, executable: URL(fileURLWithPath: "/usr/bin/python3"))
        defer { server.signal(SIGKILL) }
        #expect(await server.waitFor("\n"))
        let port = try #require(server.output.split(separator: "\n").first.flatMap { Int($0) })
        let r = try await tasker(["run", "--no-progress", "--no-journal", "--events", "ev.jsonl", "p.lua",
                                  "http://127.0.0.1:\(port)"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "widget\n200\n")
        let lines = try String(contentsOf: s.dir.appendingPathComponent("ev.jsonl"), encoding: .utf8).split(separator: "\n")
        let requests = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .filter { $0["event"] as? String == "request" }
        let gets = requests.filter { ($0["url"] as? String)?.hasSuffix("/items/1") == true }
        #expect(gets.map { $0["status"] as? Int } == [401, 200], "\(requests)")
        #expect(gets.map { $0["attempt"] as? Int } == [1, 2], "\(requests)")
        #expect(requests.filter { ($0["url"] as? String)?.hasSuffix("/token") == true }.count == 1)
        // a request carries the id and name of the task that made it (none
        // for the main chunk's), and its own number apart
        #expect(gets.allSatisfy { $0["id"] == nil && $0["name"] == nil }, "\(requests)")
        let fetch = requests.filter { ($0["url"] as? String)?.hasSuffix("/items/2") == true }
        let added = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .first { $0["event"] as? String == "added" && $0["name"] as? String == "fetch" }
        #expect(fetch.count == 1 && fetch.first?["name"] as? String == "fetch", "\(requests)")
        #expect(fetch.first?["id"] as? Int == added?["id"] as? Int && added?["id"] != nil)
        // one number per request: its two attempts share it
        #expect(Set(gets.compactMap { $0["request"] as? Int }).count == 1, "\(requests)")
        #expect(Set(requests.compactMap { $0["request"] as? Int }).count == 3, "\(requests)")
    }
}

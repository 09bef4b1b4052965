import Foundation
import PostgresTestServer
import Testing
@testable import TaskerQueue

/// Connections opened as the process starts: the first connections to
/// their URL take them, a failure reaches the one that takes it, and one
/// that nobody takes is closed.
@Suite struct ConnectionsAheadTests {
    /// The server's process ids of this database's client connections
    /// (not psql's: an earlier look's may still be on its way out).
    static func backends(_ server: PostgresTestServer, _ url: String) -> Set<Int> {
        let text = server.psql(url, """
            SELECT pid FROM pg_stat_activity
            WHERE datname = current_database() AND backend_type = 'client backend' AND application_name <> 'psql'
            """)
        return Set(text.split(whereSeparator: \.isNewline).compactMap { Int($0.trimmingCharacters(in: .whitespaces)) })
    }

    /// Polls (generously) until `done` holds.
    static func eventually(_ done: () -> Bool) async throws -> Bool {
        let deadline = Date(timeIntervalSinceNow: 90)
        while Date() < deadline {
            if done() { return true }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        return false
    }

    static func pid(_ c: PGConnection) throws -> Int {
        try c.query("SELECT pg_backend_pid()").rows[0].int(0)
    }

    @Test func theFirstConnectionsToTheURLAreTheOnesOpenedAhead() async throws {
        let (server, url) = try await PostgresTestServer.freshDatabase()
        // unclaimed for longer than the polls below may take on a loaded machine
        PGConnectionsAhead.open(url: url, count: 2, unclaimedAfter: 120)
        var ahead: Set<Int> = []
        #expect(try await Self.eventually {
            ahead = Self.backends(server, url)
            return ahead.count == 2
        })
        let first = try PGConnection.open(url: url, answerWait: 7)
        let second = try PGConnection.open(url: url)
        let third = try PGConnection.open(url: url)
        #expect(try Set([Self.pid(first), Self.pid(second)]) == ahead)
        #expect(!ahead.contains(try Self.pid(third)))
        // taken with the answer wait its taker asked for
        #expect(first.answerWait == 7)
        #expect(second.answerWait == PGConnection.defaultAnswerWait)
    }

    /// A connection opened ahead for one URL is not another's.
    @Test func anotherURLConnectsAnew() async throws {
        let (server, url) = try await PostgresTestServer.freshDatabase()
        let other = server.freshDatabase()
        PGConnectionsAhead.open(url: url, count: 1, unclaimedAfter: 120)
        var ahead: Set<Int> = []
        #expect(try await Self.eventually {
            ahead = Self.backends(server, url)
            return ahead.count == 1
        })
        let c = try PGConnection.open(url: other)
        #expect(!ahead.contains(try Self.pid(c)))
        #expect(Self.backends(server, url) == ahead)
    }

    /// The one that takes a connection that could not be made gets the
    /// error a connection of its own would have got.
    @Test func aFailureAheadIsThrownToItsTaker() throws {
        // a port nothing listens on: bound, then closed
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        close(fd)
        let url = "postgres://nobody@127.0.0.1:\(UInt16(bigEndian: addr.sin_port))/postgres"
        let direct = #expect(throws: PGError.self) { try PGConnection(url: url) }
        PGConnectionsAhead.open(url: url, count: 1)
        let ahead = #expect(throws: PGError.self) { try PGConnection.open(url: url) }
        #expect(ahead?.message == direct?.message)
        #expect(ahead?.sqlState == "08001")
        #expect(ahead?.message.contains("cannot connect to PostgreSQL") == true)
    }

    /// Nobody takes it (a command that stopped at its checks): it is
    /// closed, and a later connection is a new one.
    @Test func oneNobodyTakesIsClosed() async throws {
        let (server, url) = try await PostgresTestServer.freshDatabase()
        // long enough to be seen by a loaded suite's psql
        PGConnectionsAhead.open(url: url, count: 1, unclaimedAfter: 2)
        var ahead: Set<Int> = []
        #expect(try await Self.eventually {
            ahead = Self.backends(server, url)
            return ahead.count == 1
        })
        // that backend goes (others may come and go meanwhile)
        #expect(try await Self.eventually { Self.backends(server, url).isDisjoint(with: ahead) })
        let c = try PGConnection.open(url: url)
        #expect(!ahead.contains(try Self.pid(c)))
    }
}

/// A connection opened ahead that the server closed before its first use
/// (stopped or restarted meanwhile) is not handed over: a server down at
/// the start stays a connection error, not an outage.
@Suite struct ConnectionsAheadClosedTests {
    @Test func oneTheServerClosedIsNotTaken() async throws {
        let server = try await PostgresTestServer.isolated()
        defer { server.destroy() }
        let url = server.url()
        PGConnectionsAhead.open(url: url, count: 2, unclaimedAfter: 120)
        #expect(try await ConnectionsAheadTests.eventually { ConnectionsAheadTests.backends(server, url).count == 2 })
        #expect(server.restart())
        // a new connection to the server that is back
        let c = try PGConnection.open(url: url)
        #expect(try c.query("SELECT 1").first?.int(0) == 1)
        #expect(server.stop())
        let direct = #expect(throws: PGError.self) { try PGConnection(url: url) }
        let ahead = #expect(throws: PGError.self) { try PGConnection.open(url: url) }
        #expect(ahead?.message == direct?.message)
        #expect(ahead?.sqlState == "08001")
    }
}

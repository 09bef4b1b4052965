import Foundation
import PostgresTestServer
import Testing

/// The test PostgreSQL lives as long as the test process. Whatever starts
/// it must not hand it a descriptor of the process: a test reading a
/// child's output until its end would wait forever if the server held
/// that pipe too (Foundation's pipes are not close-on-exec).
@Suite struct TestServerDescriptorTests {
    @Test func commandsTheServerRunsKeepNoDescriptorOfTheTestProcess() throws {
        let pipe = Pipe()  // open, and not close-on-exec, while the command starts
        let held = pipe.fileHandleForWriting.fileDescriptor
        #expect(fcntl(held, F_GETFD) & FD_CLOEXEC == 0)
        let (status, listing) = PostgresTestServer.run("/bin/ls", ["/proc/self/fd"])
        #expect(status == 0)
        let open = Set(listing.split(separator: "\n").compactMap { Int32($0) })
        #expect(open.isSuperset(of: [0, 1, 2]))
        #expect(!open.contains(held))
        // 0-2 and the directory ls reads: nothing else came along
        #expect(open.count <= 4, "open descriptors: \(open.sorted())")
    }
}

import Testing
@testable import TaskerLua

/// Identity texts are 16 lower-case hex digits, zero-padded: the form
/// journals of earlier runs hold, which a resume matches.
@Suite struct TaskIdentityHexTests {
    @Test func sixteenLowerCaseDigitsZeroPadded() {
        #expect(TaskIdentity.hex(0) == "0000000000000000")
        #expect(TaskIdentity.hex(0xdead_beef) == "00000000deadbeef")
        #expect(TaskIdentity.hex(0x0123_4567_89ab_cdef) == "0123456789abcdef")
        #expect(TaskIdentity.hex(.max) == "ffffffffffffffff")
        for x: UInt64 in [1, 0xf, 0x10, 0x8000_0000_0000_0000, 0x00ff_00ff_00ff_00ff] {
            let s = String(x, radix: 16)
            #expect(TaskIdentity.hex(x) == String(repeating: "0", count: 16 - s.count) + s)
        }
    }

    /// Debian's Lua 5.4 has the layout the fast path reads captures with
    /// (checked against the API as the first state opens): the fast path
    /// is taken, not silently left for the API.
    @Test func closuresCapturesAreReadInPlaceHere() async throws {
        _ = try await runLua("tasker.add(function() end)")
        #expect(TaskIdentities.readsCapturesInPlace)
    }
}

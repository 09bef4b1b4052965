import Testing
@testable import TaskerLua

/// The per-task identity store: ids arrive in order and are read and
/// rewritten anywhere, across page boundaries.
@Suite struct PagedArrayTests {
    @Test func appendsReadsAndRewritesAcrossPages() {
        var a = PagedArray<Int>()
        #expect(a.isEmpty)
        for i in 0..<10_000 { a.append(i * 3) }
        #expect(a.count == 10_000)
        #expect(a.indices == 0..<10_000)
        for i in [0, 4095, 4096, 8191, 8192, 9999] { #expect(a[i] == i * 3) }
        a[4096] = -1
        a[9999] = -2
        #expect(a[4095] == 4095 * 3 && a[4096] == -1 && a[4097] == 4097 * 3 && a[9999] == -2)
        var copy = a  // a value: writing the copy leaves the original
        copy[0] = 7
        #expect(a[0] == 0 && copy[0] == 7)
        #expect(a.indices.reduce(0) { $0 + (a[$1] < 0 ? 1 : 0) } == 2)
    }
}

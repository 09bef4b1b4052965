import Testing
import TaskerCore
@testable import TaskerLua

/// The store of identity runs: ids arrive in order and are read and
/// rewritten anywhere, across page boundaries.
@Suite struct PagedArrayTests {
    @Test func appendsReadsAndRewritesAcrossPages() {
        var a = PagedArray<Int>()
        let wasEmpty = a.isEmpty
        #expect(wasEmpty)
        for i in 0..<10_000 { a.append(i * 3) }
        let count = a.count
        #expect(count == 10_000)
        let indices = a.indices
        #expect(indices == 0..<10_000)
        for i in [0, 4095, 4096, 8191, 8192, 9999] {
            let v = a[i]
            #expect(v == i * 3)
        }
        a[4096] = -1
        a[9999] = -2
        let (x, y, z, w) = (a[4095], a[4096], a[4097], a[9999])
        #expect(x == 4095 * 3 && y == -1 && z == 4097 * 3 && w == -2)
        var negatives = 0
        for i in a.indices where a[i] < 0 { negatives += 1 }
        #expect(negatives == 2)
    }
}

/// Derived identities by task id, kept as runs: what is stored is what is
/// found, whatever the order and the shape of the adds.
@Suite struct DerivedRunsTests {
    @Test func oneBodyAddedAgainAndAgainIsFoundTaskByTask() {
        var d = DerivedRuns()
        let wasEmpty = d.isEmpty
        #expect(wasEmpty)
        for id in 1...10_000 { d.store(id, hash: 42, occurrence: DerivedRuns.uncounted) }
        for id in [1, 4096, 4097, 9_999, 10_000] {
            let f = d.find(id)
            #expect(f.hash == 42 && f.occurrence == DerivedRuns.uncounted)
        }
        let past = d.find(10_001), before = d.find(0)
        #expect(past.hash == 0 && past.occurrence == 0 && before.occurrence == 0)
    }

    @Test func occurrencesCountedHereFollowWithinARunAndBreakItOtherwise() {
        var d = DerivedRuns()
        d.store(1, hash: 7, occurrence: 1)
        d.store(2, hash: 7, occurrence: 2)
        d.store(3, hash: 7, occurrence: 3)
        d.store(4, hash: 7, occurrence: 9)  // not the next: a run of its own
        d.store(5, hash: 8, occurrence: 1)
        d.store(7, hash: 8, occurrence: 2)  // a gap: 6 has none
        d.store(8, hash: 8, occurrence: 0)  // placeholder, joins nothing
        d.store(9, hash: 8, occurrence: 0)
        let found = (1...9).map { d.find($0) }
        #expect(found.map(\.occurrence) == [1, 2, 3, 9, 1, 0, 2, 0, 0])
        #expect(found.map(\.hash) == [7, 7, 7, 7, 8, 0, 8, 8, 8])
        d.setOccurrence(8, 3)
        d.setOccurrence(9, 4)
        let after = [7, 8, 9].map { d.find($0).occurrence }
        #expect(after == [2, 3, 4])
    }

    @Test func aTaskIdentifiedLateIsFoundAndCountedInIdOrder() {
        var d = DerivedRuns()
        d.store(1, hash: 5, occurrence: DerivedRuns.uncounted)
        d.store(2, hash: 5, occurrence: DerivedRuns.uncounted)
        d.store(4, hash: 5, occurrence: DerivedRuns.uncounted)
        d.store(3, hash: 5, occurrence: DerivedRuns.uncounted)  // below the end: kept apart
        d.store(6, hash: 6, occurrence: DerivedRuns.uncounted)
        d.store(5, hash: 6, occurrence: DerivedRuns.uncounted)
        let counts = IdentityCounts()
        d.countUncounted(counts)
        let occurrences = (1...6).map { d.find($0).occurrence }
        #expect(occurrences == [1, 2, 3, 4, 1, 2])
        let hashes = [3, 5].map { d.find($0).hash }
        #expect(hashes == [5, 6])
    }

    /// A loop of closures (a new hash per task, counted elsewhere) is kept
    /// dense; one body again starts a run; counting here later gives each
    /// task of a dense run its own occurrence, in id order.
    @Test func aLoopOfClosuresIsDenseAndFoundAndCountedTaskByTask() {
        var d = DerivedRuns()
        let u = DerivedRuns.uncounted
        for id in 1...9_000 { d.store(id, hash: UInt64(id % 7_000 + 100), occurrence: u) }  // 7,000 distinct, then repeats
        for id in 9_001...9_010 { d.store(id, hash: 5, occurrence: u) }  // one body again and again
        for id in 9_011...9_020 { d.store(id, hash: UInt64(id), occurrence: u) }  // closures again
        d.store(9_025, hash: 77, occurrence: u)  // a gap
        for id in [1, 2, 4_096, 4_097, 7_000, 7_001, 9_000, 9_001, 9_010, 9_011, 9_020, 9_025, 3, 8_999] {
            let f = d.find(id)
            let expected: UInt64 = id <= 9_000 ? UInt64(id % 7_000 + 100) : id <= 9_010 ? 5 : id == 9_025 ? 77 : UInt64(id)
            #expect(f.hash == expected && f.occurrence == u, "\(id): \(f)")
        }
        let none = d.find(9_022)
        #expect(none.hash == 0 && none.occurrence == 0)
        let counts = IdentityCounts()
        d.countUncounted(counts)
        // ids 1...2,000 and 7,001...9,000 share hashes (id % 7,000): the later one is the second
        let occurrences = [1, 2_000, 2_001, 7_000, 7_001, 9_000, 9_001, 9_010, 9_011, 9_025].map { d.find($0).occurrence }
        #expect(occurrences == [1, 1, 1, 1, 2, 2, 1, 10, 1, 1], "\(occurrences)")
        #expect(d.find(9_000).hash == 9_000 % 7_000 + 100)
    }

    @Test func lookupsFarFromTheLastOneFindTheirRun() {
        var d = DerivedRuns()
        for id in 1...5_000 { d.store(id, hash: UInt64(id / 10 + 1), occurrence: DerivedRuns.uncounted) }
        for id in [4_999, 3, 2_500, 1, 5_000, 10, 9, 11] {
            let hash = d.find(id).hash
            #expect(hash == UInt64(id / 10 + 1))
        }
    }
}

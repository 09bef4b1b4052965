import Testing
import TaskerCore

/// Occurrences counted apart from the run's thread, from identities in add
/// order: the n-th task with an identity is occurrence n.
@Suite struct OccurrenceTableTests {
    @Test func theNthTaskWithAnIdentityIsOccurrenceN() {
        let t = OccurrenceTable()
        t.count([AddedIdentity(id: 1, hash: 7), AddedIdentity(id: 2, hash: 9), AddedIdentity(id: 3, hash: 7)])
        t.count([AddedIdentity(id: 5, hash: 0), AddedIdentity(id: 6, hash: 7), AddedIdentity(id: 8, hash: 0)])
        #expect([1, 2, 3, 4, 5, 6, 7, 8].map { t[$0] } == [1, 1, 2, 0, 1, 3, 0, 2])
        #expect(t[100] == 0 && t[-1] == 0)  // not counted
    }

    /// A loop adding one body again and again comes as one run of ids.
    @Test func aRunOfIdsCountsLikeItsTasksOneByOne() {
        let runs = OccurrenceTable(), single = OccurrenceTable()
        runs.count([AddedIdentity(id: 1, hash: 7, count: 3), AddedIdentity(id: 4, hash: 9)])
        runs.count([AddedIdentity(id: 5, hash: 7, count: 2), AddedIdentity(id: 9, hash: 9, count: 4096)])
        single.count([1, 2, 3].map { AddedIdentity(id: $0, hash: 7) } + [AddedIdentity(id: 4, hash: 9)])
        single.count([5, 6].map { AddedIdentity(id: $0, hash: 7) } + (9..<(9 + 4096)).map { AddedIdentity(id: $0, hash: 9) })
        // the zero hash (its count kept apart) and a key counted before another
        runs.count([AddedIdentity(id: 4110, hash: 0, count: 3), AddedIdentity(id: 4113, hash: 7, count: 2),
                    AddedIdentity(id: 4115, hash: 0, count: 2)])
        single.count([4110, 4111, 4112].map { AddedIdentity(id: $0, hash: 0) } + [4113, 4114].map { AddedIdentity(id: $0, hash: 7) }
                     + [4115, 4116].map { AddedIdentity(id: $0, hash: 0) })
        #expect((0...4200).allSatisfy { runs[$0] == single[$0] })
        #expect([4112, 4114, 4116].map { runs[$0] } == [3, 7, 5])
        #expect([1, 3, 4, 6, 7, 9, 4104, 4105].map { runs[$0] } == [1, 3, 1, 5, 0, 2, 4097, 0])
    }

    @Test func manyRandomIdentitiesCountLikeADictionary() {
        let t = OccurrenceTable()
        var expected: [UInt64: Int] = [:]
        var added: [AddedIdentity] = []
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var want: [Int] = [0]
        for id in 1...50_000 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let h = id % 7 == 0 ? 42 : state >> 20  // a few repeats among many new keys
            expected[h, default: 0] += 1
            want.append(expected[h]!)
            added.append(AddedIdentity(id: id, hash: h))
        }
        t.count(added)
        #expect((1...50_000).allSatisfy { t[$0] == want[$0] })
    }
}

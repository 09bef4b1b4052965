import Testing
@testable import TaskerQueue

/// What a coordinator reads in a `tasker_done` payload.
@Suite struct DoneNoticeTests {
    @Test func aRunsIDsAndGivenResultsAreRead() {
        #expect(DoneNotice.parse("r1", run: "r1") == DoneNotice(run: "r1", ids: nil))
        #expect(DoneNotice.parse("r1 4,5,6", run: "r1") == DoneNotice(run: "r1", ids: [4, 5, 6]))
        let both = DoneNotice.parse(#"r1 7 [[1, 2, "[\"a b\"]"], [3, 1, null]]"#, run: "r1")
        #expect(both == DoneNotice(run: "r1", ids: [7], given: [.init(task: 1, attempt: 2, result: #"["a b"]"#),
                                                                 .init(task: 3, attempt: 1, result: "[]")]))
        // escapes as json_agg writes them
        #expect(DoneNotice.parse(#"r1  [[1, 1, "[\"\u00e9\\n\"]"]]"#, run: "r1")?.given.first?.result == #"["é\n"]"#)
        // every result given, nothing to read
        #expect(DoneNotice.parse(#"r1  [[1, 1, "[]"]]"#, run: "r1")?.ids == [])
    }

    @Test func anotherRunsNoticeIsNotOurs() {
        #expect(DoneNotice.parse("r2 1,2", run: "r1") == nil)
        #expect(DoneNotice.parse("r10 1", run: "r1") == nil)
        #expect(DoneNotice.parse("", run: "r1") == nil)
    }

    /// A notice it cannot read is not trusted in part: the run is looked
    /// through for what it waits for.
    @Test func anUnreadableListOfResultsMeansALookThroughTheRun() {
        for bad in ["[[1, 1]]", "[[1, 1, 2]]", "[[1, 1, \"[]\"]] x", "[[1.5, 1, \"[]\"]]", "[[1, 1, \"[]\"],]", "[[\"1\", 1, \"[]\"]]", "{\"a\": 1}", "[[1, 1, \"[]\"]", "not json"] {
            #expect(DoneNotice.parse("r1 5 " + bad, run: "r1") == DoneNotice(run: "r1", ids: nil), "\(bad)")
        }
    }
}

import Testing
import TaskerJournal

/// The runs table's JSON columns: the bytes every version stored, and back.
@Suite struct RunColumnsTests {
    @Test func theStoredTextAndBack() {
        let args = ["--mode", "x\"y", "a/b", "tab\there", "\u{8}\u{7F}é"]
        let vars = ["Zeta": "1", "alpha": "a/b\"c", "10": "x", "9": "y", "_u": "\n"]
        let counts = ["succeeded": 6, "failed": 1, "unrecorded": 0]
        #expect(RunColumns.args(args) == #"["--mode","x\"y","a/b","tab\there","\u0008\u007fé"]"#)
        #expect(RunColumns.vars(vars) == #"{"10":"x","9":"y","Zeta":"1","_u":"\n","alpha":"a/b\"c"}"#)
        #expect(RunColumns.counts(counts) == #"{"failed":1,"succeeded":6,"unrecorded":0}"#)
        #expect(RunColumns.args([]) == "[]" && RunColumns.vars([:]) == "{}")
        #expect(RunColumns.args(from: RunColumns.args(args)) == args)
        #expect(RunColumns.vars(from: RunColumns.vars(vars)) == vars)
        #expect(RunColumns.counts(from: RunColumns.counts(counts)) == counts)
    }

    @Test func otherTextIsNone() {
        #expect(RunColumns.args(from: nil) == nil)
        #expect(RunColumns.args(from: #"["a",1]"#) == nil)
        #expect(RunColumns.vars(from: #"{"a":1}"#) == nil)
        #expect(RunColumns.counts(from: #"{"a":1.5}"#) == nil)
        #expect(RunColumns.counts(from: "{") == nil)
        // as PostgreSQL's jsonb would give it back
        #expect(RunColumns.counts(from: #"{"failed": 1, "succeeded": 6}"#) == ["failed": 1, "succeeded": 6])
    }
}

import Foundation
import Testing
import TaskerCore

/// Script text made safe for a terminal: control characters escaped, the
/// rest untouched, in time linear in the text.
@Suite struct TerminalTextTests {
    @Test func controlCharactersBecomeVisibleEscapesAndTheRestStays() {
        #expect(TerminalText.escape("déploy 日本 ✓") == "déploy 日本 ✓")
        #expect(TerminalText.escape("a\nb\rc\td\u{1B}[2J\u{9B}1m\u{7F}\0") == #"a\nb\rc"# + "\t" + #"d\u001b[2J\u009b1m\u007f\u0000"#)
        #expect(TerminalText.escape("a\tb", keepTabs: false) == #"a\tb"#)
        #expect(TerminalText.escape("a\nb\r", keepNewlines: true) == "a\nb\\r")
        #expect(TerminalText.jsonQuoted("x\u{9B}\n\"") == #""x\u009b\n\"""#)
        #expect(TerminalText.escapingC1(json: #"{"a":"\#u{85}"}"#) == #"{"a":"\u0085"}"#)
    }

    /// Every character escaped, half a megabyte: quadratic appends took
    /// minutes here (a 900 KB task name held a run for over ten).
    @Test func aLargeTextFullOfControlCharactersIsEscapedQuickly() {
        let text = String(repeating: "\n\u{1B}", count: 1 << 18)
        let start = Date()
        let escaped = TerminalText.escape(text)
        #expect(escaped.utf8.count == (1 << 18) * 8)
        #expect(TerminalText.escapingC1(json: String(repeating: "\u{9B}", count: 1 << 18)).utf8.count == (1 << 18) * 6)
        // generous: the quadratic form took minutes; a flooded machine
        // (load 13 on 2 cores) took 5.03 s for the linear one
        #expect(Date().timeIntervalSince(start) < 30)
    }
}

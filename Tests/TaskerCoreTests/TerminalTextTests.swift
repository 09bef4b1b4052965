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

    /// Characters that reorder what a bidi terminal shows (a name that
    /// reads `exe.jpg` is `gpj.<U+202E>exe`) and the Unicode line breaks
    /// are escaped as the HTML report shows them; their neighbours stay.
    @Test func reorderingCharactersAndUnicodeLineBreaksAreEscaped() {
        #expect(TerminalText.escape("gpj.\u{202E}exe") == #"gpj.\u202eexe"#)
        let all = "\u{200E}\u{200F}\u{2028}\u{2029}\u{202A}\u{202B}\u{202C}\u{202D}\u{202E}\u{2066}\u{2067}\u{2068}\u{2069}"
        #expect(TerminalText.escape(all) == #"\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"#)
        // the characters next to them in the same block stay as they are
        let near = "\u{200D}\u{2010}\u{2027}\u{202F}\u{2065}\u{206A}—…€"
        #expect(TerminalText.escape(near) == near)
        #expect(TerminalText.escapingC1(json: "\"\u{2066}x\"") == #""\u2066x""#)
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

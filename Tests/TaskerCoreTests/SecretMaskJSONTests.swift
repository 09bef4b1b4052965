import Foundation
import Testing
@testable import TaskerCore

/// Masking JSON text keeps it JSON: a secret inside a string is `***`
/// there, one in a number or a literal turns the token into `"***"`.
@Suite struct SecretMaskJSONTests {
    func parses(_ text: String) -> Bool {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) != nil
    }

    @Test func aNumericSecretInNumbersAndStringsLeavesValidJSON() {
        let mask = SecretMask()
        mask.register("0.01")
        let line = #"{"delay":0.01,"t":10.014,"ts":"2026-11-28T00:00:00.01Z","n":[1,0.01,2],"s":"at 0.01 s"}"#
        let masked = mask.maskJSON(line)
        #expect(parses(masked), "\(masked)")
        #expect(!masked.contains("0.01"), "\(masked)")
        #expect(masked == #"{"delay":"***","t":"***","ts":"2026-11-28T00:00:0***Z","n":[1,"***",2],"s":"at *** s"}"#)
        // the plain mask is what broke it
        #expect(!parses(mask.mask(line)))
    }

    @Test func keywordsKeysEscapesAndNoSecretAtAll() {
        let mask = SecretMask()
        mask.register("false")
        mask.register("pa\"ss")
        let text = #"{"false":false, "default" : false, "v":"x pa\"ss y", "ok":true, "nul":null}"#
        let masked = mask.maskJSON(text)
        #expect(parses(masked), "\(masked)")
        #expect(masked == #"{"***":"***", "default" : "***", "v":"x *** y", "ok":true, "nul":null}"#)
        let clean = #"{"a":[1,2,{"b":"c"}]}"#
        #expect(mask.maskJSON(clean) == clean)
        #expect(mask.maskJSON(Array(clean.utf8)) == nil)
    }

    /// Escapes are read for what they say: a secret that only looks like
    /// part of an escape (`001b` in `\u001b`) is not one there, and one
    /// written with escapes is masked as what it means.
    @Test func escapesAreMaskedForWhatTheySay() {
        let mask = SecretMask()
        mask.register("001b")
        mask.register("se\"q1")
        let line = #"{"name":"esc\u001b[1m","x":"id 001b","y":"a se\"q1 b","z":"\u0073e\"q1"}"#
        let masked = mask.maskJSON(line)
        #expect(parses(masked), "\(masked)")
        #expect(masked == #"{"name":"esc\u001b[1m","x":"id ***","y":"a *** b","z":"***"}"#, "\(masked)")
    }

    @Test func anUnterminatedStringOrTruncatedTextIsMaskedToo() {
        let mask = SecretMask()
        mask.register("s3cr3t")
        #expect(mask.maskJSON(#"{"a":"s3cr3t"#) == #"{"a":"***"#)
        #expect(mask.maskJSON("[s3cr3t") == #"["***""#)
    }
}

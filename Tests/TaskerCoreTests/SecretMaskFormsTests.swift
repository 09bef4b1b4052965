import Testing
@testable import TaskerCore

/// What the mask finds besides a value as it is: two values that overlap,
/// the ways a URL or a form writes one, and text cut to a length.
@Suite struct SecretMaskFormsTests {
    @Test func overlappingValuesAreMaskedAsOne() {
        let mask = SecretMask()
        mask.register("abcdXYZW")
        mask.register("XYZW123456")
        // the second starts inside the first and ends past it: none of it shows
        #expect(mask.mask("ov abcdXYZW123456 end") == "ov *** end")
        #expect(mask.mask("abcdXYZW and XYZW123456") == "*** and ***")
        // a chain of three
        mask.register("3456qrst")
        #expect(mask.mask("abcdXYZW123456qrst!") == "***!")
    }

    @Test func percentEncodingsAsServersAndFormsWriteThem() {
        let mask = SecretMask()
        mask.register("sec ret/x+y")
        // mixed case, `/` kept and `+` escaped (Python's quote), letters
        // escaped that need not be
        for form in ["sec%20ret%2Fx%2By", "sec%20ret%2fx%2by", "sec+ret%2Fx%2By", "sec+ret%2fx%2by", "sec+ret%2fx%2By",
                     "sec%20ret/x%2By", "%73%65%63%20ret%2Fx%2By"] {
            #expect(mask.mask("q=\(form)&n=1") == "q=***&n=1", "\(form)")
        }
        // JavaScript's encodeURIComponent of a secret with `!'()*~`
        mask.register("Pa~ss!w'o(r)d* x/y")
        #expect(mask.mask("p=Pa~ss!w'o(r)d*%20x%2Fy") == "p=***")
        #expect(mask.mask("p=Pa~ss%21w%27o%28r%29d%2A+x%2Fy") == "p=***")
        // a text with escapes and no secret is left alone
        #expect(mask.mask("a%20b+c%2F") == "a%20b+c%2F")
    }

    @Test func textIsMaskedBeforeItIsCut() {
        let mask = SecretMask()
        mask.register("hunter2secret")
        let text = String(repeating: "x", count: 20) + "hunter2secret" + String(repeating: "y", count: 20)
        // cut inside the secret: without the mask first, "hunt" would show
        #expect(mask.cut(text, bytes: 24) == String(repeating: "x", count: 20) + "***y…")
        #expect(mask.cut("short", bytes: 24) == "short")
        // a character is never cut in half
        #expect(mask.cut("ééé", bytes: 3, ellipsis: "...") == "é...")
    }
}

import Testing
import Foundation
@testable import TaskerCore

struct DecimalTextTests {
    /// The same text as printf's `%.*f` wherever a duration can be.
    @Test func fixedDecimalsReadAsPrintfWritesThem() {
        let cases: [(Double, Int)] = [(0, 2), (0.004, 2), (0.005, 1), (1.5, 0), (2.5, 0), (12.345678, 2), (59.99, 1),
                                      (59.96, 1), (-0.001, 2), (-3.25, 1), (123456.789, 3), (7, 9), (0.1, 9),
                                      // ties as written, not as multiplied: 0.015 is 0.01499…
                                      (0.015, 2), (1.115, 2), (2.675, 2), (0.05, 1), (0.125, 2), (0.375, 2),
                                      (0.5, 0), (1.5, 0), (-2.5, 0), (4503599627370495.5, 0)]
        for (x, places) in cases {
            #expect(DecimalText.fixed(x, places: places) == String(format: "%.*f", places, x), "\(x) with \(places)")
        }
    }

    @Test func fixedDecimalsMatchPrintfOnManyDurations() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<5000 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let ns = Double(state >> 40)  // up to ~16.7 s in nanoseconds, ties included
            let x = ns / 1e9 * (state & 1 == 0 ? 1 : 37)
            for places in [1, 2, 3] {
                #expect(DecimalText.fixed(x, places: places) == String(format: "%.*f", places, x), "\(x) with \(places)")
            }
        }
    }

    @Test func fixedDecimalsOfHugeOrOddNumbersAreStillText() {
        #expect(DecimalText.fixed(.infinity, places: 2) == "inf")
        #expect(DecimalText.fixed(.nan, places: 1) == "nan")
        #expect(DecimalText.fixed(1e300, places: 2) == "1e+300")
        #expect(DecimalText.fixed(1e17, places: 2) == "1e+17")
        #expect(DecimalText.fixed(9e16, places: 2) == "9e+16")
        #expect(DecimalText.fixed(8e16, places: 2) == "80000000000000000.00")
    }
}

struct RunIDTests {
    @Test func base36IsZeroPaddedToItsWidthAndWiderWhenItMustBe() {
        #expect(RunID.base36(0, width: 3) == "000")
        #expect(RunID.base36(35, width: 3) == "00z")
        #expect(RunID.base36(36, width: 1) == "10")
        #expect(RunID.base36(UInt64.max, width: 3) == "3w5e11264sgsf")
    }

    /// Twelve characters; a later millisecond sorts after an earlier one.
    @Test func idsAreTwelveCharactersAndSortByTime() {
        let id = RunID.make()
        #expect(id.count == 12)
        #expect(id.allSatisfy { ("0"..."9").contains($0) || ("a"..."z").contains($0) })
        let now: UInt64 = 1_795_000_000_000
        for later in [now + 1, now + 35, now + 36, now + 1_000_000] {
            #expect(RunID.base36(now, width: 9) < RunID.base36(later, width: 9))
        }
    }
}

import Testing
import Foundation
@testable import TaskerCore

struct DecimalTextTests {
    /// The same text as printf's `%.*f` wherever a duration can be.
    @Test func fixedDecimalsReadAsPrintfWritesThem() {
        let cases: [(Double, Int)] = [(0, 2), (0.004, 2), (0.005, 1), (1.5, 0), (2.5, 0), (12.345678, 2), (59.99, 1),
                                      (59.96, 1), (-0.001, 2), (-3.25, 1), (123456.789, 3), (7, 9), (0.1, 9)]
        for (x, places) in cases {
            #expect(DecimalText.fixed(x, places: places) == String(format: "%.*f", places, x), "\(x) with \(places)")
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

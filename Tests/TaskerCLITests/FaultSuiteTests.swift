import Foundation
import Testing

/// The project's fault suite (`scripts/faults`) in its short form: every
/// scenario once, on small runs, against the binary these tests built. The
/// full run (20 iterations with different timings) is for before a release.
@Suite struct FaultSuiteTests {
    @Test func everyFaultScenarioKeepsItsPromisesOnce() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let script = root.appendingPathComponent("scripts/faults")
        let result = await collect(try launch(["--short", "--bin", taskerBinary().path], in: nil, executable: script))
        // the suite prints one line per scenario: the failing ones say why
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains(" passed, 0 failed"), "\(result.stdout)")
    }
}

import Foundation
import Testing

/// The project's fault suite (`scripts/faults`) in its short form: every
/// scenario once, on small runs, against the binary these tests built. The
/// full run (20 iterations with different timings) is for before a release.
///
/// The scenarios mostly wait (for a lease to lapse, a server to come back),
/// so they run as parallel groups, not one after another: each group is a
/// `scripts/faults` process of its own, and each group that needs
/// PostgreSQL starts its own server (it stops and restarts it).
@Suite struct FaultSuiteTests {
    static let groups: [[String]] = [
        ["pg-stop", "coordinator-kill"],
        ["worker-kill", "pg-restart"],
        ["worker-sigstop", "pg-stop-sigint"],
        ["journal-locked", "coordinator-sigstop"],
        ["disk-full"],
        ["journal-kill", "sigint"],
    ]

    @Test(arguments: groups)
    func everyFaultScenarioKeepsItsPromisesOnce(_ scenarios: [String]) async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let script = root.appendingPathComponent("scripts/faults")
        let args = ["--short", "--only", scenarios.joined(separator: ","), "--bin", taskerBinary().path]
        let result = await collect(try launch(args, in: nil, executable: script))
        // the suite prints one line per scenario: the failing ones say why
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("\(scenarios.count) passed, 0 failed"), "\(result.stdout)")
    }

    /// The groups above are every scenario the script knows, once each: a
    /// scenario added to the script and not here would never run in CI.
    @Test func theGroupsCoverEveryScenario() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("scripts/faults"), encoding: .utf8)
        let table = text.components(separatedBy: "\nSCENARIOS = [")[1].components(separatedBy: "\n]")[0]
        let known = table.split(separator: "\n").compactMap { line -> String? in
            guard let open = line.firstIndex(of: "\""), let close = line[line.index(after: open)...].firstIndex(of: "\"")
            else { return nil }
            return String(line[line.index(after: open)..<close])
        }
        #expect(known.count >= 9, "\(table)")
        #expect(Self.groups.flatMap { $0 }.sorted() == known.sorted())
    }
}

import ArgumentParser
import Foundation
import TaskerLua
import TaskerJournal

extension Tasker {
    /// `tasker report RUN|last [-o FILE.html]`.
    struct Report: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "report",
            abstract: "Write a recorded run as one self-contained HTML page.")

        @Argument(help: ArgumentHelp("A run id, or 'last'.", valueName: "run"))
        var runID: String

        @Option(name: .shortAndLong, help: ArgumentHelp("Where to write it (default: tasker-RUN.html).", valueName: "file.html"))
        var output: String?

        @OptionGroup var journal: JournalOptions

        func run() throws {
            let reader = try journal.reader()
            let r = try History.run(runID, in: reader)
            let path = output ?? "tasker-\(r.id).html"
            do {
                try ReportCommand.render(r, reader: reader, to: path)
            } catch {
                StandardError.write("tasker: error: cannot write \(path): \(error)\n")
                throw ExitCode(2)
            }
            print(path)
        }
    }
}

enum ReportCommand {
    /// `tasker run --report FILE`: the run just recorded.
    static func write(runID: String, place: JournalPlace, to path: String) throws {
        let reader = try place.reader()
        guard let run = try reader.run(runID) else { throw RunJournalError("the run was not recorded") }
        try render(run, reader: reader, to: path)
    }

    static func render(_ run: JournalRun, reader: JournalReader, to path: String) throws {
        let report = HTMLReport(run: run, tasks: try reader.tasks(of: run.id), requests: try reader.requests(of: run.id))
        try report.html.write(toFile: path, atomically: true, encoding: .utf8)
    }
}

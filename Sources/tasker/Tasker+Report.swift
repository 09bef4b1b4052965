import ArgumentParser
import Foundation
import TaskerLua
import TaskerJournal

extension Tasker {
    /// `tasker report RUN|last [FILE] [-o FILE.html]`.
    struct Report: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "report",
            abstract: "Write a recorded run as one self-contained HTML page.")

        @Argument(help: ArgumentHelp("A run id, or 'last'.", valueName: "run"))
        var runID: String

        @Argument(help: ArgumentHelp("With 'last': the last run of this pipeline file.", valueName: "file"))
        var file: String?

        @Option(name: .shortAndLong, help: ArgumentHelp("Where to write it (default: tasker-RUN.html).", valueName: "file.html"))
        var output: String?

        @OptionGroup var journal: JournalOptions

        func run() throws {
            let reader = try journal.reader()
            let r = try History.run(runID, of: file, in: reader)
            let path = output ?? "tasker-\(r.id).html"
            do {
                try ReportCommand.render(r, reader: reader, to: path)
            } catch let e as OutputError {
                StandardError.write("tasker: error: \(ReportCommand.message(e))\n")
                throw ExitCode(1)
            } catch {
                StandardError.write("tasker: error: cannot read run \(r.id): \(error)\n")
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

    /// Reads the run (twice when it has dependencies: the graph's few
    /// nodes are picked once all are known), then writes the page into
    /// `path` in place: a symlink's target or a FIFO's reader gets it, and
    /// nothing is touched unless the page is ready.
    static func render(_ run: JournalRun, reader: JournalReader, to path: String) throws {
        var summary = ReportSummary()
        var marks = ReportMarks()
        try reader.forEachTask(of: run.id, onMark: { marks.add($0) }) { summary.add($0) }
        if !summary.linked.isEmpty {
            let ids = summary.graphIDs
            try reader.forEachTask(of: run.id) { summary.addGraphNode($0, of: ids) }
        }
        var report = HTMLReport(run: run, summary: summary, requests: try reader.requests(of: run.id))
        report.marks = marks
        try OutputFile.write(report.html, to: path)
    }

    /// What a report that could not be written says (after `tasker: error: `).
    static func message(_ e: OutputError) -> String { "cannot write report '\(e.path)': \(e.reason)" }
}

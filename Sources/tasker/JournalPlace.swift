import ArgumentParser
import Foundation
import Synchronization
import TaskerJournal
import TaskerLua
import TaskerQueue

/// Where a command's journal is: the file in the state directory, or the
/// PostgreSQL database of `--store` (a run with workers keeps its journal
/// beside its queue, readable from any machine that reaches it).
enum JournalPlace: CustomStringConvertible {
    case directory(String)
    case store(String)

    /// Where, for messages (a store's password is not shown).
    var description: String {
        switch self {
        case .directory(let d): d + "/" + Journal.fileName
        case .store: "the --store database"
        }
    }

    init(state: String?, store: String?) {
        if let store {
            self = .store(store)
        } else {
            // the three variables read, not ProcessInfo's whole environment
            // (a dictionary built at every start)
            var env: [String: String] = [:]
            for name in ["TASKER_STATE_DIR", "XDG_STATE_HOME", "HOME"] {
                if let value = getenv(name) { env[name] = String(cString: value) }
            }
            let dir = Journal.directory(override: state, environment: env)
            if Journal.homeless(override: state, environment: env) { Self.guessed.withLock { $0 = dir } }
            self = .directory(dir)
        }
    }

    /// Without HOME the journal's place is a guess: said once, on stderr,
    /// when the journal is used (not by a `--no-journal` run). `--state`
    /// given means the place was chosen.
    private static let guessed = Mutex<String?>(nil)
    private static let announced = Mutex(false)
    private static func announce(_ dir: String) {
        guard guessed.withLock({ $0 == dir }),
              announced.withLock({ seen in defer { seen = true }; return !seen }) else { return }
        StandardError.write("tasker: note: HOME is not set: the journal is in \(dir) (--state DIR or TASKER_STATE_DIR chooses)\n")
    }

    func reader() throws -> JournalReader {
        switch self {
        case .directory(let d):
            Self.announce(d)
            return try JournalReader(directory: d, onUnreadableRows: Self.warnUnreadable)
        case .store(let url): return try JournalReader(store: PGJournalStore(url: url), onUnreadableRows: Self.warnUnreadable)
        }
    }

    /// Rows a reader skipped: what is shown and reused lacks their tasks.
    private static func warnUnreadable(run: String, rows: Int) {
        StandardError.write("tasker: warning: run \(run): \(rows) of its journal rows could not be read (the file is damaged): "
                            + "their tasks are missing here, and a resume runs them again\n")
    }

    /// The writer of a new run (it connects on its own thread).
    func writer(run: JournalRun) throws -> JournalWriter {
        switch self {
        case .directory(let d):
            Self.announce(d)
            return try JournalWriter(directory: d, run: run)
        case .store(let url): return JournalWriter(run: run, endWait: StoreOutage.limit) { try PGJournalStore(url: url) }
        }
    }
}

/// `--state` and `--store` of the commands that read the journal.
struct JournalOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The journal's directory.", valueName: "dir"))
    var state: String?

    @Option(name: .long, help: ArgumentHelp("Read the journal in this PostgreSQL database (of runs with --store).",
                                            valueName: "postgres-url"))
    var store: String?

    var place: JournalPlace { JournalPlace(state: state, store: store) }

    func validate() throws {
        if let store { try StoreURL.validate(store) }
    }

    /// The reader, or exit 2 saying why there is none.
    func reader() throws -> JournalReader {
        do {
            return try place.reader()
        } catch {
            StandardError.write("tasker: error: \(error)\n")
            throw ExitCode(2)
        }
    }
}

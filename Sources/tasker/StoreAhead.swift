import TaskerQueue

/// Opens the store's connections while the command line is parsed and the
/// run prepared (see `PGConnectionsAhead`): as many as the command makes
/// at its start. A word of a pipeline's own that looks so only opens
/// connections for nothing, closed unused a few seconds later.
enum StoreAhead {
    static func start(_ argv: [String]) {
        guard argv.count > 2, let url = url(in: argv) else { return }
        let count = switch argv[1] {
        // the queue's connection and its listener, and the journal's
        case "run": argv.contains("--no-journal") ? 2 : 3
        // the queue's connection, its listener and the sweeper's
        case "worker": 3
        default: 1
        }
        PGConnectionsAhead.open(url: url, count: count)
    }

    /// The word after the first `--store` (or after `--store=`).
    static func url(in argv: [String]) -> String? {
        for (i, word) in argv.enumerated() {
            if word == "--store" { return i + 1 < argv.count ? argv[i + 1] : nil }
            if word.hasPrefix("--store=") { return String(word.dropFirst("--store=".count)) }
        }
        return nil
    }
}

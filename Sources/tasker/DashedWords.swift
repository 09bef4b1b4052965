/// Words that begin with `---` are the argument parser's own wherever they
/// stand (its hidden completion requests), so a script's arg such as `---`
/// (a YAML document marker) was refused as an invalid option. For `run` and
/// `worker` they are marked before parsing, which then takes them as plain
/// words, and unmarked in `validate` (README, The command line: words after
/// FILE are `tasker.args`).
enum DashedWords {
    static let mark = "\u{1}"

    /// `argv` with the words after the subcommand that begin with `---` marked.
    static func marked(_ argv: [String]) -> [String] {
        guard argv.count > 2, argv[1] == "run" || argv[1] == "worker" else { return argv }
        return argv.enumerated().map { i, word in i >= 2 && word.hasPrefix("---") ? mark + word : word }
    }

    static func unmarked(_ word: String) -> String {
        word.hasPrefix(mark) ? String(word.dropFirst(mark.count)) : word
    }
}

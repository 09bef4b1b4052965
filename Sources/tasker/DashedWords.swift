/// Words that begin with `---` are the argument parser's own wherever they
/// stand (its hidden completion requests), so a script's arg such as `---`
/// (a YAML document marker) was refused as an invalid option. For `run` and
/// `worker` they are marked before parsing, which then takes them as plain
/// words, and unmarked in `validate` (README, The command line: words after
/// FILE are `tasker.args`).
enum DashedWords {
    /// Control characters around a name: no word a user types begins so.
    static let mark = "\u{1}tasker-dashes\u{1}"

    /// `argv` with the words after FILE that begin with `---` marked (an
    /// option's value before FILE stays as typed: the parser refuses it, as
    /// it always has, rather than take it marked).
    static func marked(_ argv: [String]) -> [String] {
        guard argv.count > 2, argv[1] == "run" || argv[1] == "worker" else { return argv }
        let valued = argv[1] == "run" ? MisplacedOptions.valued : MisplacedOptions.valued.union(["--retain"])
        // FILE: the first word that is neither an option nor an option's value
        var file = 2
        while file < argv.count {
            let word = argv[file]
            if word == "--" { file += 1; break }
            guard word.hasPrefix("-"), word != "-" else { break }
            file += valued.contains(word) ? 2 : 1
        }
        return argv.enumerated().map { i, word in i > file && word.hasPrefix("---") ? mark + word : word }
    }

    static func unmarked(_ word: String) -> String {
        word.hasPrefix(mark) ? String(word.dropFirst(mark.count)) : word
    }
}

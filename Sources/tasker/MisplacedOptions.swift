import Foundation
import TaskerHTTP

/// `tasker run etl.lua --resume --plan`: the words after FILE are the
/// script's `tasker.args`, so run's own options there were silently handed
/// to the script and the job ran for real. One of them after FILE is a
/// usage error that shows the command meant; `--` passes the words after it
/// to the script as they are.
enum MisplacedOptions {
    /// `run`'s own options that take no value.
    static let flags: Set<String> = ["--watch", "--no-progress", "--no-journal", "--resume", "--plan",
                                     "--resume-from-other"]
    /// Those that take the next word (or `--name=value`).
    static let valued: Set<String> = ["--concurrency", "--events", "--state", "--report", "--store", "--lease",
                                      "--var", "--log-level", "--log-format"]

    /// The parameter names `tasker.param{name = "…"}` declares in `file`,
    /// found in its text (the run has not started yet): a pipeline's own
    /// `--plan` parameter is its, not run's misplaced option.
    static func declaredParameters(in file: String, secretOnly: Bool = false) -> Set<String> {
        guard let data = FileManager.default.contents(atPath: file) else { return [] }
        return DeclaredParameters(source: Array(data)).names(secretOnly: secretOnly)
    }

    /// The script's words: `words` up to a first `--`, then the rest as
    /// given (the `--` dropped).
    static func scriptWords(_ words: [String]) -> (checked: ArraySlice<String>, passed: ArraySlice<String>) {
        guard let dash = words.firstIndex(of: "--") else { return (words[...], []) }
        return (words[..<dash], words[(dash + 1)...])
    }

    /// The option a word is, if it is one of run's own.
    static func option(_ word: String) -> (name: String, takesNext: Bool)? {
        let name = word.split(separator: "=", maxSplits: 1).first.map(String.init) ?? word
        if flags.contains(word) { return (word, false) }
        if valued.contains(name) { return (name, !word.contains("=")) }
        return nil
    }

    /// Nil when no word before a `--` is one of run's options; else the
    /// message, with the command as it was meant: those options (and their
    /// values) moved before FILE, or else after a `--` (the other words stay
    /// where they were: parameters before the `--` are still read).
    /// `before` are the words between `run` and FILE as typed.
    /// `declared` (the pipeline's parameters, read from its file) is asked
    /// for only when a word is one of run's options: the usual run, with
    /// none after FILE, does not read the file here.
    static func message(before: [String], file: String, words: [String],
                        declared: () -> Set<String> = { [] }) -> String? {
        let (checked, passed) = scriptWords(words)
        guard checked.contains(where: { option($0) != nil }) else { return nil }
        let declared = declared()
        var moved: [String] = [], kept: [String] = [], found: [String] = []
        var i = checked.startIndex
        while i < checked.endIndex {
            let word = checked[i]
            if let o = option(word), !declared.contains(String(o.name.dropFirst(2))) {
                found.append(o.name)
                moved.append(word)
                if o.takesNext, i + 1 < checked.endIndex {
                    moved.append(checked[i + 1])
                    i += 1
                }
            } else {
                kept.append(word)
            }
            i += 1
        }
        guard let first = found.first else { return nil }
        var meant = before + moved + [file] + kept
        if !passed.isEmpty { meant += ["--"] + passed }
        let names = found.count == 1 ? first
            : found.dropLast().joined(separator: ", ") + " and " + found[found.count - 1]
        return """
            \(names) \(found.count == 1 ? "comes" : "come") after the pipeline file, where words are the \
            script's tasker.args; options of 'tasker run' go before FILE. Did you mean:
              tasker run \(shellWords(meant))
            To give \(found.count == 1 ? "it" : "them") to the script, put \(found.count == 1 ? "it" : "them") after '--': \
            tasker run \(shellWords(before + [file] + kept + ["--"] + moved + passed))
            """
    }

    /// Words as a shell reads them back, secrets hidden.
    static func shellWords(_ words: [String]) -> String {
        Redaction.arguments(words).map { w in
            let plain = !w.isEmpty && w.allSatisfy { $0.isLetter || $0.isNumber || "-_./=:,@%+*".contains($0) }
            return plain ? w : "'" + w.replacingOccurrences(of: "'", with: "'\\''") + "'"
        }.joined(separator: " ")
    }
}

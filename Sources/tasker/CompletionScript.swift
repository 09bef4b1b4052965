import ArgumentParser

/// `tasker --generate-completion-script bash`: argument-parser's script,
/// with one change. After FILE a word that starts with `-` is one of FILE's
/// parameters (`--env`, `--no-dry-run`): run's own options go before FILE,
/// where they are errors after it. The generated script takes such a word
/// for an option of `run` and offers run's options (and, past them, file
/// names), so `tasker run deploy.lua --e<TAB>` never completed `--env`.
enum CompletionScript {
    /// The script for `argv` (`tasker --generate-completion-script bash`,
    /// or `=bash`), or nil when argv asks for something else.
    static func requested(_ argv: [String]) -> String? {
        guard argv.count >= 2 else { return nil }
        let shell: String
        if argv[1] == "--generate-completion-script", argv.count == 3 {
            shell = argv[2]
        } else if argv[1].hasPrefix("--generate-completion-script="), argv.count == 2 {
            shell = String(argv[1].dropFirst("--generate-completion-script=".count))
        } else {
            return nil
        }
        guard shell == "bash" else { return nil }
        return bash(Tasker.completionScript(for: .bash))
    }

    /// Where `_tasker_run` has sorted the words into options and
    /// positionals; a word starting with `-` after FILE then goes to FILE's
    /// completions (the same call an empty word after FILE makes).
    static let anchor = "_tasker_run() {"
    static let afterSorting = "    __tasker_offer_flags_options -1\n"
    static let parameters = """
            # after FILE, a word starting with '-' is one of FILE's parameters
            if [[ "${cur}" = -* && "${positional_number}" -ge 1 ]]; then
                COMPREPLY=()
                __tasker_add_completions -W "$(__tasker_custom_complete ---completion run -- positional@1 "${COMP_CWORD}" "$(__tasker_cursor_index_in_current_word)")"
                return
            fi

        """

    /// `script` with the parameters' branch added to `_tasker_run`; as it
    /// was if its layout is not the one this knows (a newer argument-parser).
    static func bash(_ script: String) -> String {
        guard let run = script.range(of: anchor),
              let sorted = script.range(of: afterSorting, range: run.upperBound..<script.endIndex),
              script[run.upperBound..<sorted.lowerBound].range(of: "\n}") == nil,
              script.contains("__tasker_custom_complete ---completion run -- positional@1")
        else { return script }
        var out = script
        out.insert(contentsOf: parameters, at: sorted.upperBound)
        return out
    }
}

import ArgumentParser

/// `tasker --generate-completion-script bash`: argument-parser's script,
/// with one change: every word after FILE is completed from FILE (its
/// targets, its parameters, a parameter's choices), taken literally.
/// The generated script took a word starting with `-` for an option of
/// `run` (which goes before FILE: after it, it is an error) and offered
/// run's options, so `tasker run deploy.lua --e<TAB>` never completed
/// `--env`; and it passed FILE's words through `compgen -W`, which expands
/// them (a choice `$(cmd)` ran `cmd` at a TAB).
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
            # after FILE (a word starting with '-' is not counted: one of FILE's
            # parameters), FILE's own words, as they are (no expansion)
            if [[ ( "${cur}" = -* && "${positional_number}" -ge 1 ) || "${positional_number}" -ge 2 ]]; then
                COMPREPLY=()
                local word
                while IFS='' read -r word; do
                    COMPREPLY+=("${word}")
                done < <(__tasker_custom_complete ---completion run -- positional@1 "${COMP_CWORD}" "$(__tasker_cursor_index_in_current_word)")
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

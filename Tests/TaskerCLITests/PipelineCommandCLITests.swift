import Foundation
import Testing

/// A pipeline is a command: typed parameters after FILE (then
/// TASKER_PARAM_*, then defaults), targets run after the main chunk, and
/// `--help` / `tasker list` that run nothing.
@Suite struct PipelineCommandCLITests {
    static let deploy = """
        -- Deploy the service to an environment.
        -- Builds and tests first.
        local env = tasker.param{name = "env", choices = {"staging", "prod"}, required = true, help = "where to deploy"}
        local replicas = tasker.param{name = "replicas", type = "integer", default = 2, help = "how many instances"}
        local ratio = tasker.param{name = "ratio", type = "number", default = 0.5}
        local dry = tasker.param{name = "dry-run", type = "boolean", default = false}
        local regions = tasker.param{name = "region", type = "list", default = {"eu"}}
        print(env, replicas, math.type(replicas), ratio, dry, table.concat(regions, "+"), "[" .. table.concat(tasker.args, " ") .. "]")
        local function mark(name) return function() fs.append("ran.txt", name .. "\\n") end end
        tasker.target("build", {help = "compile"}, mark("build"))
        tasker.target("test", {help = "run the tests", after = {"build"}}, function()
          if tasker.vars.fail_tests then error("2 tests failed") end
          mark("test")()
        end)
        tasker.target("deploy", {after = {"test", "build"}}, mark("deploy"))
        tasker.target("default", {after = {"build"}}, mark("default"))
        """

    func ran(_ s: Scratch) -> String {
        (try? String(contentsOf: s.dir.appendingPathComponent("ran.txt"), encoding: .utf8)) ?? ""
    }

    @Test func parametersAreTypedAndComeFromWordsThenTheEnvironmentThenDefaults() async throws {
        let s = try Scratch(["deploy.lua": Self.deploy])
        defer { s.cleanup() }
        let full = try await tasker(["run", "--no-progress", "--no-journal", "deploy.lua", "--env", "staging", "--replicas=3",
                                     "--ratio", "-0.25", "--dry-run", "--region", "eu,us", "--region", "ap", "--extra", "build"],
                                    in: s.dir)
        #expect(full.status == 0, "\(full.stderr)")
        // target names leave tasker.args only when the targets run, after the main chunk
        #expect(full.stdout == "staging\t3\tinteger\t-0.25\ttrue\teu+us+ap\t[--extra build]\n", "\(full.stdout)")
        #expect(ran(s) == "build\n")
        let fromEnv = try await shell("TASKER_PARAM_ENV=prod TASKER_PARAM_DRY_RUN=no TASKER_PARAM_REPLICAS=5 $TASKER run --no-progress --no-journal deploy.lua --no-dry-run build",
                                      in: s.dir)
        #expect(fromEnv.stdout == "prod\t5\tinteger\t0.5\tfalse\teu\t[build]\n", "\(fromEnv.stdout)\(fromEnv.stderr)")
    }

    @Test func aBadOrMissingValueIsOneLineExitTwoBeforeAnyTask() async throws {
        let s = try Scratch(["deploy.lua": Self.deploy])
        defer { s.cleanup() }
        let cases: [([String], String)] = [
            ([], "tasker: error: deploy.lua:3: usage: missing parameter --env (a string: where to deploy); give it after the file, or set TASKER_PARAM_ENV\n"),
            (["--env", "prdo"], "tasker: error: deploy.lua:3: usage: bad value for parameter --env: 'prdo' from the command line (one of staging, prod expected)\n"),
            (["--env", "prod", "--replicas", "three"], "tasker: error: deploy.lua:4: usage: bad value for parameter --replicas: 'three' from the command line (an integer expected)\n"),
            (["--env", "prod", "--replicas", "2.5"], "tasker: error: deploy.lua:4: usage: bad value for parameter --replicas: '2.5' from the command line (an integer expected)\n"),
            (["--env", "prod", "--dry-run=maybe"], "tasker: error: deploy.lua:6: usage: bad value for parameter --dry-run: 'maybe' from the command line (true or false expected)\n"),
            (["--env", "prod", "--replicas"], "tasker: error: deploy.lua:4: usage: parameter --replicas needs a value (an integer)\n"),
            (["--env", "prod", "--no-dry-run=true"], "tasker: error: deploy.lua:6: usage: parameter --no-dry-run takes no value (write --dry-run=false, or --no-dry-run)\n"),
            // an option next is not the value: it read --ratio as --env's
            // value, then --ratio again as the parameter declared later
            (["--env", "--ratio", "0.1"], "tasker: error: deploy.lua:3: usage: parameter --env needs a value (a string), not the option --ratio (write --env=--ratio if that is the value)\n"),
            (["--env", "prod", "biuld"], "tasker: error: usage: unknown target 'biuld' (targets: build, test, deploy, default)\n"),
        ]
        for (words, expected) in cases {
            let r = try await tasker(["run", "--no-progress", "--no-journal", "deploy.lua"] + words, in: s.dir)
            #expect(r.status == 2, "\(words)")
            #expect(r.stderr == expected, "\(words): \(r.stderr)")
        }
        #expect(ran(s) == "", "a task ran")
        let env = try await shell("TASKER_PARAM_REPLICAS=x $TASKER run --no-progress --no-journal deploy.lua --env prod", in: s.dir)
        #expect(env.stderr.contains("'x' from TASKER_PARAM_REPLICAS (an integer expected)"), "\(env.stderr)")
        // control characters in the value are escaped as everywhere (`\n`, `\u001b`, C1)
        let ctl = try await shell(#"TASKER_PARAM_REPLICAS="$(printf '1\n2\033\302\233')" $TASKER run --no-progress --no-journal deploy.lua --env prod"#,
                                  in: s.dir)
        #expect(ctl.stderr.contains(#"'1\n2\u001b\u009b' from TASKER_PARAM_REPLICAS"#), "\(ctl.stderr)")
    }

    @Test func targetsRunAfterTheMainChunkEachOnceInOrder() async throws {
        let s = try Scratch(["deploy.lua": Self.deploy])
        defer { s.cleanup() }
        let both = try await tasker(["run", "--no-progress", "--concurrency", "1", "deploy.lua", "--env", "prod", "deploy", "test"],
                                    in: s.dir)
        #expect(both.status == 0, "\(both.stderr)")
        #expect(ran(s) == "build\ntest\ndeploy\n", "build is shared: once")
        #expect(both.stderr.contains("tasker: 3 tasks: 3 succeeded"), "\(both.stderr)")
        try FileManager.default.removeItem(at: s.dir.appendingPathComponent("ran.txt"))
        let none = try await tasker(["run", "--no-progress", "deploy.lua", "--env", "prod"], in: s.dir)
        #expect(none.status == 0)
        #expect(ran(s) == "build\ndefault\n", "no target named: default")

        // a failed target skips those after it; the resume reuses what succeeded
        try FileManager.default.removeItem(at: s.dir.appendingPathComponent("ran.txt"))
        let failed = try await tasker(["run", "--no-progress", "--var", "fail_tests=1", "deploy.lua", "--env", "prod", "deploy"], in: s.dir)
        #expect(failed.status == 1)
        #expect(failed.stderr.contains("deploy: skipped: dependency 'test' failed"), "\(failed.stderr)")
        let resumed = try await tasker(["run", "--no-progress", "--resume", "deploy.lua", "--env", "prod", "deploy"], in: s.dir)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(resumed.stderr.contains("3 succeeded (1 reused)"), "\(resumed.stderr)")
        #expect(ran(s) == "build\ntest\ndeploy\n")
    }

    /// Targets named one after another run in that order, as make runs
    /// them, each with what it waits for: `x` (slow) then `a`; they ran at
    /// once unless an `after` said otherwise. A failure skips the rest.
    @Test func namedTargetsRunInTheOrderGiven() async throws {
        let s = try Scratch(["t.lua": """
            local function mark(name, pause)
              return function()
                if pause then tasker.sleep(pause) end
                if tasker.vars.fail == name then error(name .. " failed") end
                fs.append("ran.txt", name .. "\\n")
              end
            end
            tasker.target("a", mark("a"))
            tasker.target("b", {after = {"a"}}, mark("b"))
            tasker.target("x", mark("x", 0.05))
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--no-journal", "t.lua", "x", "b"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(ran(s) == "x\na\nb\n")
        try FileManager.default.removeItem(at: s.dir.appendingPathComponent("ran.txt"))
        let failed = try await tasker(["run", "--no-progress", "--no-journal", "--var", "fail=x", "t.lua", "x", "b"], in: s.dir)
        #expect(failed.status == 1)
        #expect(ran(s) == "", "\(failed.stderr)")
        #expect(failed.stderr.contains("a: skipped: dependency 'x' failed"), "\(failed.stderr)")
    }

    /// A target's `after` is checked once the main chunk ended; a name
    /// that is no target, or targets waiting for each other, are usage
    /// errors at the declaration that says so.
    @Test func aTargetsBadAfterNamesItsDeclaration() async throws {
        let s = try Scratch(["t.lua": """
            tasker.target("a", {after = {"b"}}, function() end)
            tasker.target("b", {after = "a"}, function() end)
            tasker.target("c", {after = {"nope"}}, function() end)
            tasker.target("d", {after = {"e"}}, function() end)
            tasker.target("e", {after = {"f"}}, function() end)
            tasker.target("f", {after = {"d"}}, function() end)
            tasker.target("g", {after = {"g"}}, function() end)
            """])
        defer { s.cleanup() }
        let long = try await tasker(["run", "--no-progress", "--no-journal", "t.lua", "d"], in: s.dir)
        #expect(long.stderr == "tasker: error: t.lua:6: usage: targets wait for each other: 'd' waits for 'e', which waits for 'f', which waits for 'd'\n",
                "\(long.stderr)")
        let own = try await tasker(["run", "--no-progress", "--no-journal", "t.lua", "g"], in: s.dir)
        #expect(own.stderr == "tasker: error: t.lua:7: usage: targets wait for each other: 'g' waits for 'g'\n", "\(own.stderr)")
        let cycle = try await tasker(["run", "--no-progress", "--no-journal", "t.lua", "a"], in: s.dir)
        #expect(cycle.status == 2)
        #expect(cycle.stderr == "tasker: error: t.lua:2: usage: targets wait for each other: 'a' waits for 'b', which waits for 'a'\n",
                "\(cycle.stderr)")
        let unknown = try await tasker(["run", "--no-progress", "--no-journal", "t.lua", "c"], in: s.dir)
        #expect(unknown.status == 2)
        #expect(unknown.stderr == "tasker: error: t.lua:3: usage: target 'c' waits for 'nope', which is not a target (targets: a, b, c, d, e, f, g)\n",
                "\(unknown.stderr)")
    }

    /// A task added at the top does not end the description: what is
    /// declared after it is shown too, and the task never starts (nor its
    /// handlers, a schedule or a group); a process ends it, unrun.
    @Test func declarationsAfterAnAddAreDescribedAndTheTaskNeverRuns() async throws {
        let s = try Scratch(["p.lua": """
            local early = tasker.param{name = "early", help = "first"}
            local h = tasker.add{name = "setup", run = function() fs.write("task-ran", "x") end}
            h:on("finish", function() fs.write("handler-ran", "x") end)
            h:cancel()  -- no handler runs for it
            local late = tasker.param{name = "late", type = "integer", default = 1, help = "after a task"}
            tasker.target("deploy", {help = "after a task too", after = {}}, function() fs.write("target-ran", "x") end)
            tasker.every(0.2, {name = "tick", run = function() fs.write("tick-ran", "x") end})
            local g = tasker.parallel{function() fs.write("group-ran", "x") end}
            -- a change to files ends it too (caught, the next act ends it again)
            pcall(fs.write, "written", "x")
            pcall(function() io.open("opened", "w"):close() end)
            tasker.sh("touch process-ran")
            tasker.target("unseen", {}, function() end)
            """])
        defer { s.cleanup() }
        let help = try await tasker(["run", "p.lua", "--help"], in: s.dir)
        #expect(help.status == 0, "\(help.stderr)")
        for expected in ["  --early EARLY  first (string)", "  --late N       after a task (integer; default 1)", "  deploy  after a task too"] {
            #expect(help.stdout.contains(expected), "no '\(expected)' in:\n\(help.stdout)")
        }
        #expect(!help.stdout.contains("unseen"))
        // what is not shown is said (it was left out silently)
        #expect(help.stdout.contains("(the description may be partial: p.lua:10: the main chunk calls fs.write there, "
                                     + "which a description does not run; what it declares after that is not shown)"),
                "\(help.stdout)")
        let list = try await tasker(["list", "--json", "p.lua"], in: s.dir)
        #expect(list.status == 0, "\(list.stderr)")
        #expect(list.stdout.contains("\"late\"") && list.stdout.contains("\"deploy\""), "\(list.stdout)")
        let left = try FileManager.default.contentsOfDirectory(atPath: s.dir.path).sorted()
        #expect(left == ["p.lua"], "\(left)")
    }

    /// A loop of thousands of adds ends the description (completion runs
    /// it at every TAB): what comes after it is not described.
    @Test func aLoopOfThousandsOfAddsEndsTheDescription() async throws {
        let s = try Scratch(["p.lua": """
            local early = tasker.param{name = "early"}
            for i = 1, 200000 do tasker.add{name = "item", run = function() return i end} end
            local late = tasker.param{name = "late"}
            """])
        defer { s.cleanup() }
        let help = try await tasker(["run", "p.lua", "--help"], in: s.dir)
        #expect(help.status == 0, "\(help.stderr)")
        // stopped in the loop (no time bound here: in a loaded suite the
        // wait for a process slot is what a clock would measure)
        #expect(help.stdout.contains("--early") && !help.stdout.contains("--late"), "\(help.stdout)")
    }

    @Test func helpAndListDescribeThePipelineAndRunNothing() async throws {
        let s = try Scratch(["deploy.lua": Self.deploy + """

            tasker.sh("touch process-ran")
            tasker.add(function() fs.write("task-ran", "x") end)
            """])
        defer { s.cleanup() }
        let help = try await tasker(["run", "deploy.lua", "--help"], in: s.dir)
        #expect(help.status == 0, "\(help.stderr)")
        for expected in ["Deploy the service to an environment.\nBuilds and tests first.\n",
                         "usage: tasker run [OPTIONS] deploy.lua [TARGET...] --env ENV [PARAMETERS]",
                         "  --env ENV                where to deploy (string; required; one of staging, prod)",
                         "  --replicas N             how many instances (integer; default 2)",
                         "  --dry-run, --no-dry-run  (boolean; default false)",
                         "  --region A,B             (list; default eu)",
                         "  test     run the tests (after build)",
                         "  deploy   (after test, build)"] {
            #expect(help.stdout.contains(expected), "no '\(expected)' in:\n\(help.stdout)")
        }
        let list = try await tasker(["list", "--json", "deploy.lua"], in: s.dir)
        #expect(list.status == 0, "\(list.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: Any])
        let params = try #require(object["params"] as? [[String: Any]])
        #expect(params.map { $0["name"] as? String } == ["env", "replicas", "ratio", "dry-run", "region"])
        #expect(params[1]["default"] as? Int == 2 && params[0]["required"] as? Bool == true)
        #expect((object["targets"] as? [[String: Any]])?.map { $0["name"] as? String } == ["build", "test", "deploy", "default"])
        let text = try await tasker(["list", "deploy.lua"], in: s.dir)
        #expect(text.stdout == help.stdout)
        for marker in ["process-ran", "task-ran", "ran.txt"] {
            #expect(!FileManager.default.fileExists(atPath: s.dir.appendingPathComponent(marker).path), "\(marker) exists")
        }
    }

    /// The description is the leading comment in any of Lua's forms: `--`
    /// or `---` lines, or a `--[[ … ]]` (`--[==[ … ]==]`) block.
    @Test func theDescriptionIsTheLeadingCommentInEachForm() async throws {
        let s = try Scratch([
            "dashes.lua": "#!/usr/bin/env tasker\n--- Rotate the logs.\n---\n--- Then compress them.\nlocal x = 1\n",
            "block.lua": "--[[\n  Rotate the logs.\n\n  Then compress them.\n]]\nlocal x = 1\n",
            "level.lua": "--[==[ Rotate the logs.\nThen compress them. ]==]\nlocal x = 1\n",
            "after.lua": "-- Rotate the logs.\n--[[ not this ]]\nlocal x = 1\n",
        ])
        defer { s.cleanup() }
        for (file, expected) in [("dashes.lua", "Rotate the logs.\n\nThen compress them."),
                                 ("block.lua", "Rotate the logs.\n\nThen compress them."),
                                 ("level.lua", "Rotate the logs.\nThen compress them."),
                                 ("after.lua", "Rotate the logs.")] {
            let list = try await tasker(["list", "--json", file], in: s.dir)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: Any])
            #expect(object["description"] as? String == expected, "\(file): \(list.stdout)")
        }
    }

    /// Help text that is not UTF-8 is shown with '?' for its bad bytes;
    /// the parameters are all listed (they were dropped without a word).
    @Test func helpTextThatIsNotUTF8IsShownNotDropped() async throws {
        let s = try Scratch(["p.lua": """
            tasker.param{name = "weird", help = "h" .. string.char(255) .. "x", default = "d" .. string.char(200)}
            tasker.param{name = "fine", help = "ok"}
            """])
        defer { s.cleanup() }
        let list = try await tasker(["list", "--json", "p.lua"], in: s.dir)
        #expect(list.status == 0, "\(list.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: Any])
        let params = try #require(object["params"] as? [[String: Any]])
        #expect(params.map { $0["name"] as? String } == ["weird", "fine"])
        #expect(params.first?["help"] as? String == "h?x" && params.first?["default"] as? String == "d?")
        let help = try await tasker(["run", "p.lua", "--help"], in: s.dir)
        #expect(help.stdout.contains("--weird") && help.stdout.contains("h?x"), "\(help.stdout)")
    }

    @Test func aParameterNamedLikeAnOptionOfRunIsThePipelines() async throws {
        let s = try Scratch(["p.lua": """
            local plan = tasker.param{name = "plan", type = "boolean", default = false}
            print("plan", plan)
            """])
        defer { s.cleanup() }
        let r = try await tasker(["run", "--no-progress", "--no-journal", "p.lua", "--plan"], in: s.dir)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "plan\ttrue\n")
    }
}

/// examples/release.lua, the README's worked example: its --help, a
/// rollout with its token masked, and shell completion of its targets and
/// parameters.
@Suite struct ReleaseExampleCLITests {
    static var root: URL { URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent() }

    @Test func theReleaseExampleIsACommand() async throws {
        let help = try await tasker(["run", "examples/release.lua", "--help"], in: Self.root)
        #expect(help.status == 0)
        for expected in ["Release the service: build, test, then roll out to an environment.",
                         "\n  tasker run examples/release.lua --env staging",  // the comment keeps its indent
                         "  --env ENV                where to roll out (string; required; one of staging, prod)",
                         "  rollout  roll the tested build out (after test)"] {
            #expect(help.stdout.contains(expected), "no '\(expected)' in:\n\(help.stdout)")
        }
        let rollout = try await shell("""
            RELEASE_TOKEN=rt-abcdef $TASKER run --no-progress --no-journal examples/release.lua --env prod --replicas 4 rollout
            """, in: Self.root)
        #expect(rollout.status == 0, "\(rollout.stderr)")
        #expect(rollout.stderr.contains("[build] building\n[test] testing\n[rollout] rolling out 4 replicas to prod with token ***\n"),
                "\(rollout.stderr)")
        #expect(!rollout.stderr.contains("rt-abcdef"))
    }

    @Test func completionOffersTheTargetsAndParametersOfTheFile() async throws {
        let r = try await tasker(["---completion", "run", "--", "positional@1", "3", "0", "tasker", "run", "examples/release.lua", ""],
                                 in: Self.root)
        #expect(r.status == 0, "\(r.stderr)")
        let offered = Set(r.stdout.split(separator: "\n").map(String.init))
        #expect(offered.isSuperset(of: ["build", "test", "rollout", "default", "--env", "--replicas", "--dry-run", "--no-dry-run"]),
                "\(r.stdout)")
    }

    /// In bash, a word after FILE that starts with `-` completes to FILE's
    /// parameters (run's own options go before FILE), and a parameter's
    /// value to its choices: the script the binary prints, run by bash.
    @Test func bashCompletesParametersFromTheirFirstLettersAndTheirChoices() async throws {
        func complete(_ words: String, in dir: URL = Self.root) async throws -> String {
            let r = try await shell("""
                exec bash -c 'source <("$TASKER" --generate-completion-script bash)
                PATH="$(dirname "$TASKER"):$PATH"
                COMP_WORDS=(tasker \(words)); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
                COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
                _tasker tasker "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
                printf "%s|" "${COMPREPLY[@]}"'
                """, in: dir)
            #expect(r.status == 0, "\(r.stderr)")
            return r.stdout
        }
        #expect(try await complete("run examples/release.lua --e") == "--env|")
        #expect(try await complete("run examples/release.lua --d") == "--dry-run|")
        #expect(try await complete("run examples/release.lua --no") == "--no-dry-run|")
        #expect(try await complete("run examples/release.lua --env \"\"") == "staging|prod|")
        #expect(try await complete("run examples/release.lua --env p") == "prod|")
        #expect(try await complete("run examples/release.lua r") == "rollout|")
        // before FILE, run's own options as before
        #expect(try await complete("run --no-p") == "--no-progress|")
        // a choice is offered as it is: not split, not expanded (nothing runs)
        let s = try Scratch(["c.lua": """
            local e = tasker.param{name = "env", choices = {"a b", "$HOME", "x$(touch ran)"}}
            """])
        defer { s.cleanup() }
        #expect(try await complete("run c.lua --env \"\"", in: s.dir) == "a b|$HOME|x$(touch ran)|")
        #expect(!FileManager.default.fileExists(atPath: s.dir.appendingPathComponent("ran").path))
    }

    /// FILE itself completes to Lua files (run, list, check), in bash and zsh.
    @Test func theFileCompletesToLuaFiles() async throws {
        let bash = try await tasker(["--generate-completion-script", "bash"], in: Self.root)
        #expect(bash.stdout.components(separatedBy: "-fX '!*.@(lua)'").count - 1 == 3, "\(bash.stdout)")
        let zsh = try await tasker(["--generate-completion-script", "zsh"], in: Self.root)
        #expect(zsh.stdout.components(separatedBy: "_files -g '\\''*.lua'\\''").count - 1 >= 3, "\(zsh.stdout)")
    }
}

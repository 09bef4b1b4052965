import ArgumentParser

@main
struct Tasker: ParsableCommand {
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "tasker",
        abstract: "Run task pipelines written in Lua 5.4.",
        discussion: """
            Exit codes: 0 all tasks succeeded (or were cancelled by the script), 1 a task failed,
            2 usage error or the script failed to load or raised, 130 interrupted.
            """,
        version: "tasker \(version) (Lua 5.4)",
        subcommands: [Run.self, Check.self]
    )
}

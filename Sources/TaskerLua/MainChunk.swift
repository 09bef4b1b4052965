/// The pipeline file's main chunk as the runtime drives it: the file, its
/// fiber, and how it ended when it failed.
struct MainChunk {
    /// The file as given, and its directory (`tasker.use` paths are relative to it).
    var scriptPath = ""
    var scriptDirectory = "."
    /// `scriptPath` with its links resolved, once asked for (idempotency keys).
    var realScriptPath: String?
    var mainFiber: Fiber?
    /// It has ended (returned or failed).
    var done = false
    /// Its error (or the file's load error), and the task whose error it
    /// raised (it got it from `await`, `all`, `any`…), if that is how it failed.
    var mainError: String?
    var mainErrorTask: String?
    /// Where a plan's evaluation stopped (see `LuaRuntime.Options.planOnly`).
    var planStop: String?
    /// Tasks a description (`--help`, `list`) let the main chunk add so
    /// far; past `LuaRuntime.describedAddsKept` it stops there.
    var describedAdds = 0
    /// The main chunk has returned and the targets it asked for are added.
    var targetsAdded = false
    /// The last usage error about the command line (a parameter, a target):
    /// if it ends the main chunk, it is one line, not a traceback.
    var commandLineError: String?
    var mainErrorIsCommandLine = false
}

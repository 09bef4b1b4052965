/// The modules that own their state (see `LuaModule`): all of them in
/// install order (the runtime keeps them as long as the Lua state, whose
/// functions hold them unretained), and typed references for the calls the
/// runtime itself makes into them (the calls made for every task need no
/// module at all: see `refs`).
struct ModuleList {
    private(set) var all: [LuaModule] = []
    /// `tasker.exec`/`tasker.sh` keep the process groups and outputs.
    private(set) var exec: ExecModule!
    private(set) var hooks: HookModule!
    private(set) var handles: HandleModule!
    /// `tasker.param` and `tasker.target` (the driver runs its targets and
    /// reads its declarations).
    private(set) var command: CommandModule!

    mutating func add(_ m: LuaModule) {
        all.append(m)
        switch m {
        case let m as ExecModule: exec = m
        case let m as HookModule: hooks = m
        case let m as HandleModule: handles = m
        case let m as CommandModule: command = m
        default: break
        }
    }
}

import CLua
import CLuaShim
import TaskerCore
#if canImport(Glibc)
import Glibc
#endif

/// `tasker.hosts(PATH or table [, group])`: an inventory (Ansible's INI
/// format, or a Lua table of the same shape) as a list of host objects
/// `{name=, address=, vars=, groups=}`, each usable as `host=`. The list
/// has one method, `inv:group(name)`, the hosts of a group (a list of the
/// same kind); `tasker.hosts(src, "web")` or `tasker.hosts(src, {group="web"})`
/// is the same. An unknown group, a bad line (named `file:line`) or a
/// missing file is a usage error at the caller's line.
final class HostsModule: LuaModule {
    unowned let host: any ModuleHost
    /// The pipeline's directory: a relative inventory path is looked up
    /// beside the pipeline first (as `tasker.use` does), then as given.
    private var scriptDirectory: () -> String = { "." }

    init(host: any ModuleHost) { self.host = host }

    static let functions: [(String, tasker_SwiftFunction)] = [
        ("hosts", { L in HostsModule.this(L!).hosts(L!) }),
    ]

    func install(in runtime: LuaRuntime) {
        scriptDirectory = { [unowned runtime] in runtime.chunk.scriptDirectory }
        addToTaskerTable(Self.functions, in: runtime.L)
    }

    static let maxFileSize = 16 << 20

    func hosts(_ L: OpaquePointer) -> Int32 {
        let fn = "tasker.hosts"
        var group: String?
        switch lua_type(L, 2) {
        case LUA_TNONE, LUA_TNIL: break
        case LUA_TSTRING: group = LuaStack(L).string(2)
        case LUA_TTABLE:
            let o = OptionReader(L: L, table: 2, function: fn, known: ["group"])
            if let message = o.unknownOption() { return host.usage(L, message) }
            do { group = try o.read("group", "string") { LuaStack(L).string($0) } } catch { return host.usage(L, error.text) }
        default: return host.argError(L, fn, 2, "group name or table")
        }
        let inventory: Inventory
        do {
            switch lua_type(L, 1) {
            case LUA_TSTRING: inventory = try Inventory.resolve(try readFile(LuaStack(L).string(1)!))
            case LUA_TTABLE: inventory = try Inventory.resolve(try InventoryTable(L: L).read(1))
            default: return host.argError(L, fn, 1, "inventory path or table")
            }
        } catch {
            return host.usage(L, "\(fn): \(error.message)")
        }
        lua_settop(L, 0)
        push(inventory, in: L)  // the list at 1, its groups at 2
        if let group { return pickGroup(L, groupsAt: 2, group) }
        lua_settop(L, 1)
        return 1
    }

    /// The INI file at `path` (relative: beside the pipeline, else from the
    /// current directory); only a regular file is read (a FIFO would block).
    private func readFile(_ path: String) throws(InventoryError) -> InventorySource {
        var full = path
        if !path.hasPrefix("/") {
            let beside = scriptDirectory() + "/" + path
            if access(beside, F_OK) == 0 { full = beside }
        }
        var st = stat()
        guard stat(full, &st) == 0 else {
            throw InventoryError(message: "cannot read inventory '\(path)': \(String(cString: strerror(errno)))")
        }
        guard st.st_mode & S_IFMT == S_IFREG else { throw InventoryError(message: "cannot read inventory '\(path)': not a regular file") }
        guard st.st_size <= Self.maxFileSize else { throw InventoryError(message: "inventory '\(path)' is over \(Self.maxFileSize >> 20) MiB") }
        let bytes: [UInt8]
        do { bytes = try Files.read(full, FileCancel()) } catch {
            throw InventoryError(message: "cannot read inventory: \(error.message)")
        }
        return try InventoryINI.parse(String(decoding: bytes, as: UTF8.self), file: path)
    }

    // MARK: to Lua

    /// Pushes the list of all hosts and the table of groups; every group's
    /// list (the first one is `all`'s) has the inventory's metatable, whose
    /// `group` method reads the groups table from an upvalue.
    private func push(_ inventory: Inventory, in L: OpaquePointer) {
        let s = LuaStack(L)
        s.newTable(array: Int32(inventory.hosts.count))
        let objects = s.top
        for (i, h) in inventory.hosts.enumerated() {
            pushHost(h, in: L)
            s.rawSet(objects, i + 1)
        }
        // the metatable: __index = {group = fn(groups)}, groups filled below
        s.newTable(hash: Int32(inventory.members.count))
        let groups = s.top
        s.newTable(hash: 2)
        let meta = s.top
        s.push("tasker.inventory")
        s.rawSet(meta, "__name")
        s.newTable(hash: 1)
        lua_pushlightuserdata(L, Unmanaged.passUnretained(self).toOpaque())
        lua_pushvalue(L, groups)
        s.push({ L in HostsModule.this(L!).group(L!) }, upvalues: 2)
        s.rawSet(-2, "group")
        s.rawSet(meta, "__index")
        for name in inventory.groupNames {
            let members = inventory.members[name]!
            s.newTable(array: Int32(members.count))
            for (k, i) in members.enumerated() {
                s.rawGet(objects, i + 1)
                s.rawSet(-2, k + 1)
            }
            lua_pushvalue(L, meta)
            lua_setmetatable(L, -2)
            s.rawSet(groups, name)
        }
        s.rawGet(groups, "all")
        lua_copy(L, -1, objects)
        lua_settop(L, groups)
    }

    private func pushHost(_ h: Inventory.Host, in L: OpaquePointer) {
        let s = LuaStack(L)
        s.newTable(hash: 4)
        s.push(h.name)
        s.rawSet(-2, "name")
        s.push(h.address)
        s.rawSet(-2, "address")
        s.newTable(hash: Int32(h.vars.count))
        for (k, v) in h.vars.sorted(by: { $0.key < $1.key }) {
            s.push(v)
            s.rawSet(-2, k)
        }
        s.rawSet(-2, "vars")
        s.newTable(array: Int32(h.groups.count))
        for (i, g) in h.groups.enumerated() {
            s.push(g)
            s.rawSet(-2, i + 1)
        }
        s.rawSet(-2, "groups")
    }

    /// `inv:group(name)`.
    func group(_ L: OpaquePointer) -> Int32 {
        guard lua_type(L, 1) == LUA_TTABLE else { return host.argError(L, "inventory:group", 1, "inventory (call it as inv:group(name))") }
        guard let name = LuaStack(L).string(2) else { return host.argError(L, "inventory:group", 2, "string") }
        lua_settop(L, 0)
        lua_pushvalue(L, tasker_upvalueindex(3))
        return pickGroup(L, groupsAt: 1, name)
    }

    /// Replaces the stack with the list of `name` from the groups table at
    /// `groups`, or raises a usage error naming the groups there are.
    private func pickGroup(_ L: OpaquePointer, groupsAt groups: Int32, _ name: String) -> Int32 {
        let s = LuaStack(L)
        s.rawGet(groups, name)
        if s.type(-1) == LUA_TTABLE { return 1 }
        var names: [String] = []
        lua_pushnil(L)
        while lua_next(L, groups) != 0 {
            s.pop()
            if let n = s.string(-1) { names.append(n) }
        }
        return host.usage(L, "unknown group '\(name)' in the inventory (groups: \(names.sorted().joined(separator: ", ")))")
    }
}

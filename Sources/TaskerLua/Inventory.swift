/// A fleet as `tasker.hosts` returns it: hosts in the order they first
/// appear, each with its resolved variables, its groups and the address
/// `host=` takes. Built from an `InventorySource` (Ansible's INI file or a
/// Lua table) by `Inventory.resolve`. Pure Swift, no Lua.
struct Inventory: Equatable {
    struct Host: Equatable {
        let name: String
        /// `[user@]host[:port]`, from `ansible_user`, `ansible_host` (else
        /// the name) and `ansible_port`.
        let address: String
        let vars: [String: String]
        /// Every group the host is in, directly or through `:children`,
        /// sorted, without `all` (Ansible's `group_names`).
        let groups: [String]
    }

    let hosts: [Host]
    /// Each group's hosts (indices into `hosts`, in host order); `all` and
    /// `ungrouped` included.
    let members: [String: [Int]]

    var groupNames: [String] { members.keys.sorted() }

    /// The hosts of `group`, or nil when there is no such group.
    func hosts(in group: String) -> [Host]? { members[group].map { $0.map { hosts[$0] } } }
}

/// An inventory before resolution: groups with their direct hosts, child
/// groups and variables, and each host's own variables. Where an entry
/// came from (`file:line`) is kept for the errors found while resolving.
struct InventorySource {
    struct Group {
        var hosts: [String] = []
        var children: [String] = []
        var vars: [String: String] = [:]
    }

    var groups: [String: Group] = [:]
    /// Hosts in the order they first appear.
    var hostOrder: [String] = []
    var hostVars: [String: [String: String]] = [:]
    /// Where each group was first named as a child (for a cycle's message).
    var childPlaces: [String: String] = [:]

    mutating func addHost(_ name: String, vars: [String: String], group: String?) {
        if hostVars[name] == nil {
            hostOrder.append(name)
            hostVars[name] = [:]
        }
        hostVars[name]!.merge(vars) { $1 }
        if let group {
            groups[group, default: Group()].hosts.append(name)
        }
    }

    mutating func addChild(_ child: String, to group: String, place: String) {
        groups[group, default: Group()].children.append(child)
        _ = groups[child, default: Group()]
        if childPlaces[child] == nil { childPlaces[child] = place }
    }

    mutating func addVars(_ vars: [String: String], to group: String) {
        groups[group, default: Group()].vars.merge(vars) { $1 }
    }
}

struct InventoryError: Error, Equatable, CustomStringConvertible {
    let message: String
    var description: String { message }
}

extension Inventory {
    /// Ansible's rules: every group is under `all`; a host in no group is in
    /// `ungrouped`; a group contains its children's hosts; variables apply
    /// `all` first, then groups by depth (a child after its parents; at one
    /// depth by name), then the host's own.
    static func resolve(_ source: InventorySource) throws(InventoryError) -> Inventory {
        var groups = source.groups
        groups["all", default: .init()].vars = source.groups["all"]?.vars ?? [:]
        let grouped = Set(groups.filter { $0.key != "all" }.flatMap(\.value.hosts))
        let loose = source.hostOrder.filter { !grouped.contains($0) }
        if !loose.isEmpty || groups["ungrouped"] != nil {
            groups["ungrouped", default: .init()].hosts += loose
        }
        // every group not another's child hangs under `all`
        let named = Set(groups.filter { $0.key != "all" }.flatMap(\.value.children))
        for name in groups.keys.sorted() where name != "all" && !named.contains(name) && !groups["all"]!.children.contains(name) {
            groups["all"]!.children.append(name)
        }
        var walk = GroupWalk(groups: groups, places: source.childPlaces)
        let index = Dictionary(uniqueKeysWithValues: source.hostOrder.enumerated().map { ($1, $0) })
        var members: [String: [Int]] = [:]
        var hostGroups: [String: Set<String>] = [:]
        for name in groups.keys.sorted() {
            let hosts = try walk.hosts(of: name)
            members[name] = hosts.compactMap { index[$0] }.sorted()
            for h in hosts { hostGroups[h, default: []].insert(name) }
        }
        let order = try groups.keys.sorted().map { name throws(InventoryError) in (name, try walk.depth(of: name)) }
            .sorted { $0.1 != $1.1 ? $0.1 < $1.1 : $0.0 < $1.0 }.map(\.0)
        var hosts: [Host] = []
        for name in source.hostOrder {
            let mine = hostGroups[name] ?? []
            var vars: [String: String] = [:]
            for g in order where mine.contains(g) { vars.merge(groups[g]!.vars) { $1 } }
            vars.merge(source.hostVars[name] ?? [:]) { $1 }
            hosts.append(Host(name: name, address: try address(name, vars), vars: vars,
                              groups: mine.filter { $0 != "all" }.sorted()))
        }
        return Inventory(hosts: hosts, members: members)
    }

    /// `[user@]host[:port]` from Ansible's connection variables.
    static func address(_ name: String, _ vars: [String: String]) throws(InventoryError) -> String {
        let host = vars["ansible_host"] ?? vars["ansible_ssh_host"] ?? name
        let user = vars["ansible_user"] ?? vars["ansible_ssh_user"]
        let port = vars["ansible_port"] ?? vars["ansible_ssh_port"]
        if let port, !(UInt16(port).map { $0 > 0 } ?? false) {
            throw InventoryError(message: "host '\(name)': bad ansible_port '\(port)' (a port number 1-65535 expected)")
        }
        let shownHost = host.contains(":") && port != nil ? "[\(host)]" : host
        return (user.map { "\($0)@" } ?? "") + shownHost + (port.map { ":\($0)" } ?? "")
    }
}

/// The closure of `:children` (hosts of a group and its descendants) and
/// each group's depth under `all`, memoized; a cycle is an error.
private struct GroupWalk {
    let groups: [String: InventorySource.Group]
    let places: [String: String]
    private var hostMemo: [String: [String]] = [:]
    private var depthMemo: [String: Int] = [:]
    private var parents: [String: [String]] = [:]

    init(groups: [String: InventorySource.Group], places: [String: String]) {
        self.groups = groups
        self.places = places
        for (name, g) in groups { for c in g.children { parents[c, default: []].append(name) } }
    }

    private func cycle(_ name: String) -> InventoryError {
        let place = places[name].map { "\($0): " } ?? ""
        return InventoryError(message: "\(place)group '\(name)' is its own descendant through ':children'")
    }

    mutating func hosts(of name: String, visiting: Set<String> = []) throws(InventoryError) -> [String] {
        if let known = hostMemo[name] { return known }
        guard !visiting.contains(name) else { throw cycle(name) }
        var seen = Set<String>(), out: [String] = []
        for h in groups[name]?.hosts ?? [] where seen.insert(h).inserted { out.append(h) }
        for c in groups[name]?.children ?? [] {
            for h in try hosts(of: c, visiting: visiting.union([name])) where seen.insert(h).inserted { out.append(h) }
        }
        hostMemo[name] = out
        return out
    }

    mutating func depth(of name: String, visiting: Set<String> = []) throws(InventoryError) -> Int {
        if name == "all" { return 0 }
        if let known = depthMemo[name] { return known }
        guard !visiting.contains(name) else { throw cycle(name) }
        var d = 1
        for p in parents[name] ?? [] { d = max(d, try depth(of: p, visiting: visiting.union([name])) + 1) }
        depthMemo[name] = d
        return d
    }
}

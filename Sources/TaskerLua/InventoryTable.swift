import CLua
import CLuaShim

/// An inventory given as a Lua table, read with raw access into an
/// `InventorySource` (the same rules as the INI file then apply):
///
///     tasker.hosts{
///       "loose.example.com",                          -- ungrouped
///       web = {"web1", {name = "web2", ansible_host = "10.0.0.2", role = "api"}},
///       prod = {children = {"web"}, vars = {region = "eu"}, hosts = {"db1"}},
///     }
///
/// A host is a name (`"name"` or `"name:port"`) or a table with `name` and
/// its variables; a group is a list of hosts or a table of `hosts`,
/// `children` and `vars`. Variables are strings, numbers or booleans.
struct InventoryTable {
    let L: OpaquePointer
    private var s: LuaStack { LuaStack(L) }

    func read(_ index: Int32) throws(InventoryError) -> InventorySource {
        let t = lua_absindex(L, index)
        var source = InventorySource()
        for k in stride(from: 1, through: s.rawLength(t), by: 1) {
            s.rawGet(t, k)
            defer { s.pop() }
            try addHost(at: s.top, group: nil, what: "entry #\(k)", into: &source)
        }
        lua_pushnil(L)
        while lua_next(L, t) != 0 {
            defer { s.pop() }
            if s.type(-2) == LUA_TNUMBER, let k = s.integer(-2), k >= 1, k <= s.rawLength(t) { continue }
            guard s.type(-2) == LUA_TSTRING, let name = s.string(-2), InventoryINI.isGroupName(name) else {
                throw InventoryError(message: "bad inventory table: key \(s.describe(-2)) is not a group name")
            }
            guard s.type(-1) == LUA_TTABLE else {
                throw InventoryError(message: "bad inventory table: group '\(name)' (table expected, got \(s.typeName(-1)))")
            }
            try readGroup(name, at: s.top, into: &source)
        }
        return source
    }

    private func readGroup(_ name: String, at g: Int32, into source: inout InventorySource) throws(InventoryError) {
        _ = source.groups[name, default: .init()]
        if let bad = OptionReader.unknownKey(L, g, allowed: ["hosts", "children", "vars"], skippingIntegers: true) {
            throw InventoryError(message: "bad inventory table: group '\(name)' has key \(bad) (hosts, children, vars or a list of hosts)")
        }
        try eachElement(of: g) { i, k throws(InventoryError) in
            try addHost(at: i, group: name, what: "group '\(name)' entry #\(k)", into: &source)
        }
        s.rawGet(g, "hosts")
        defer { s.pop() }
        if s.type(-1) == LUA_TTABLE {
            try eachElement(of: s.top) { i, k throws(InventoryError) in
                try addHost(at: i, group: name, what: "group '\(name)' hosts #\(k)", into: &source)
            }
        } else if !s.isNoneOrNil(-1) {
            throw InventoryError(message: "bad inventory table: group '\(name)' hosts (list expected, got \(s.typeName(-1)))")
        }
        s.rawGet(g, "children")
        defer { s.pop() }
        if s.type(-1) == LUA_TTABLE {
            try eachElement(of: s.top) { i, k throws(InventoryError) in
                guard let child = s.string(i), InventoryINI.isGroupName(child) else {
                    throw InventoryError(message: "bad inventory table: group '\(name)' children #\(k) (group name expected, got \(s.describe(i)))")
                }
                source.addChild(child, to: name, place: "group '\(name)'")
            }
        } else if !s.isNoneOrNil(-1) {
            throw InventoryError(message: "bad inventory table: group '\(name)' children (list expected, got \(s.typeName(-1)))")
        }
        s.rawGet(g, "vars")
        defer { s.pop() }
        if s.type(-1) == LUA_TTABLE {
            source.addVars(try vars(at: s.top, skipping: nil, what: "group '\(name)' vars"), to: name)
        } else if !s.isNoneOrNil(-1) {
            throw InventoryError(message: "bad inventory table: group '\(name)' vars (table expected, got \(s.typeName(-1)))")
        }
    }

    private func eachElement(of t: Int32, _ body: (Int32, Int) throws(InventoryError) -> Void) throws(InventoryError) {
        for k in stride(from: 1, through: s.rawLength(t), by: 1) {
            s.rawGet(t, k)
            defer { s.pop() }
            try body(s.top, k)
        }
    }

    private func addHost(at i: Int32, group: String?, what: String, into source: inout InventorySource) throws(InventoryError) {
        let fail = { (m: String) in InventoryError(message: "bad inventory table: \(what): \(m)") }
        if let word = s.string(i) {
            let (name, port) = try InventoryINI.splitPort(word, fail)
            guard !name.isEmpty, !name.contains(where: \.isWhitespace) else { throw fail("bad host name '\(word)'") }
            source.addHost(name, vars: port.map { ["ansible_port": $0] } ?? [:], group: group)
            return
        }
        guard s.type(i) == LUA_TTABLE else { throw fail("host name or table with name expected, got \(s.typeName(i))") }
        s.rawGet(i, "name")
        let name = s.string(-1)
        s.pop()
        guard let name, !name.isEmpty, !name.contains(where: \.isWhitespace) else { throw fail("a host table needs a name (a string without blanks)") }
        let vars = try vars(at: i, skipping: "name", what: "host '\(name)'")
        if let p = vars["ansible_port"], !(UInt16(p).map { $0 > 0 } ?? false) {
            throw fail("bad ansible_port '\(p)' (a port number 1-65535 expected)")
        }
        source.addHost(name, vars: vars, group: group)
    }

    private func vars(at t: Int32, skipping: String?, what: String) throws(InventoryError) -> [String: String] {
        var out: [String: String] = [:]
        lua_pushnil(L)
        while lua_next(L, t) != 0 {
            defer { s.pop() }
            guard let key = s.string(-2) else {
                throw InventoryError(message: "bad inventory table: \(what): key \(s.describe(-2)) is not a variable name")
            }
            if key == skipping { continue }
            switch s.type(-1) {
            case LUA_TSTRING: out[key] = s.string(-1)
            case LUA_TNUMBER: out[key] = s.describe(-1)
            case LUA_TBOOLEAN: out[key] = s.boolean(-1) ? "true" : "false"
            default:
                throw InventoryError(message: "bad inventory table: \(what): variable '\(key)' (string, number or boolean expected, got \(s.typeName(-1)))")
            }
        }
        return out
    }
}

import CLua
import CLuaShim

/// The field names of a table the runtime reads (a task spec, a retry
/// table) as the Lua strings they are. Lua interns short strings (one
/// object per content), so a key met with `lua_next` is one of these names
/// exactly when its address is one of theirs: a pointer comparison instead
/// of a Swift string and a hash per key, or a `lua_pushstring` (a hash and
/// an intern lookup) per field looked up. Kept in the registry: no other
/// string can take one of their addresses while the state lives.
struct InternedKeys {
    let names: [String]
    private let addresses: [UnsafeRawPointer]
    /// At most this many names (the reader keeps their places inline).
    static let most = 16

    init(_ names: [String], in L: OpaquePointer) {
        // Longer strings are not interned (LUAI_MAXSHORTLEN, 40 in 5.4).
        precondition(names.count <= Self.most && names.allSatisfy { !$0.isEmpty && $0.utf8.count <= 40 })
        let s = LuaStack(L)
        lua_createtable(L, Int32(names.count), 0)
        var addresses: [UnsafeRawPointer] = []
        for (i, name) in names.enumerated() {
            s.push(name)
            addresses.append(lua_topointer(L, -1)!)
            lua_rawseti(L, -2, lua_Integer(i + 1))
        }
        _ = s.ref()  // for the state's life
        self.names = names
        self.addresses = addresses
    }

    /// The position in `names` of the key at stack index `i` (nil: not a
    /// string, or not one of them).
    @inline(__always)
    func index(ofKeyAt i: Int32, in L: OpaquePointer) -> Int? {
        guard lua_type(L, i) == LUA_TSTRING, let p = lua_topointer(L, i) else { return nil }
        return addresses.firstIndex(of: p)
    }
}

import CLua
import CLuaShim
import TaskerCore

/// What the journal keeps of a task's values: a JSON array of its return
/// values (integers stay integers), when `json.encode` accepts them and
/// they fit in 1 MiB; otherwise why not (the task is then not resumable).
public enum StoredValues: Sendable, Equatable {
    case json(String)
    case notStorable(String)
}

/// A task's identity: `spec.id`, or a hash with its occurrence number;
/// else why the task has none.
public struct IdentityParts: Sendable {
    public var explicit: String?
    public var hash: UInt64?
    public var occurrence = 1
    public var notResumable: String?

    init(explicit: String? = nil, hash: UInt64? = nil, occurrence: Int = 1, notResumable: String? = nil) {
        self.explicit = explicit
        self.hash = hash
        self.occurrence = occurrence
        self.notResumable = notResumable
    }
}

extension LuaRuntime {
    static let maxStoredValueBytes = 1 << 20

    /// The values of finished task `id`, for the journal.
    public func storableValues(of id: TaskID) -> StoredValues {
        loop.assertInLoop()
        guard case .succeeded(let value)? = engine.outcome(id) else { return .notStorable("it did not succeed") }
        switch value {
        case .none:
            return .json("[]")
        case .group:
            return .notStorable("it is a group")
        case .swift:
            return .notStorable("its value is not a Lua value")
        case .stored:
            let top = lua_gettop(L)
            defer { lua_settop(L, top) }
            guard lua_checkstack(L, 64) != 0 else { return .notStorable("no stack space") }
            let n = pushValues(L, value)
            var out: [UInt8] = [UInt8(ascii: "[")]
            for k in 0..<n {
                if k > 0 { out.append(UInt8(ascii: ",")) }
                do {
                    out += try json.encodeJSON(L, top + 1 + k)
                } catch {
                    return .notStorable("its value cannot be stored as JSON: \(error.message)")
                }
            }
            out.append(UInt8(ascii: "]"))
            if out.count > Self.maxStoredValueBytes {
                return .notStorable("its value is \(Self.sizeText(out.count)) as JSON, over the limit of 1 MiB")
            }
            return .json(String(decoding: out, as: UTF8.self))
        }
    }

    /// "2.0 MiB", "1048577 bytes": precise near the limit, short past it.
    static func sizeText(_ bytes: Int) -> String {
        bytes < 2 << 20 ? "\(bytes) bytes" : "\(bytes >> 20).\((bytes & ((1 << 20) - 1)) * 10 >> 20) MiB"
    }

    /// What a failed task raised, as a JSON array of one value, for a
    /// worker to hand to the coordinator, which raises the same value (a
    /// string stays a string, as in one process). Nil for the engine's
    /// own error tables (their kind, message and position travel as they
    /// are). A value JSON cannot hold (a function, a cycle, a table with a
    /// metatable such as one with `__tostring`) goes as its `tostring`.
    public func raisedValueJSON(_ failure: TaskFailure) -> String? {
        loop.assertInLoop()
        guard let slot = failure.payload as? LuaErrorSlot else { return nil }
        let top = lua_gettop(L)
        defer { lua_settop(L, top) }
        guard lua_checkstack(L, 8) != 0 else { return nil }
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(refs.errors))
        lua_rawgeti(L, -1, lua_Integer(slot.slot))
        let v = lua_gettop(L)
        if lua_type(L, v) == LUA_TTABLE, isErrorTable(L, v) { return nil }
        var plain = lua_type(L, v) != LUA_TTABLE || lua_getmetatable(L, v) == 0
        if !plain { tasker_pop(L, 1) }
        var out: [UInt8] = []
        if plain {
            do { out = try json.encodeJSON(L, v) } catch { plain = false }
        }
        if !plain {
            LuaStack(L).push(failure.message)
            do { out = try json.encodeJSON(L, -1) } catch { return nil }
        }
        guard out.count <= Self.maxStoredValueBytes else { return nil }
        return "[" + String(decoding: out, as: UTF8.self) + "]"
    }

    /// Task `id`'s derived identity (occurrence 0: it has none).
    public func derivedIdentity(of id: TaskID) -> (hash: UInt64, occurrence: Int) { identities.derived(id) }

    /// Task `id`'s identity in parts (formatted by whoever stores it), or
    /// why it has none.
    public func identityParts(of id: TaskID) -> IdentityParts {
        let d = identities.derived(id)
        if d.occurrence > 0 { return IdentityParts(hash: d.hash, occurrence: d.occurrence) }
        if let e = identities[id] {
            switch e.identity {
            case .explicit(let s): return IdentityParts(explicit: s)
            case .derived(let h): return IdentityParts(hash: h, occurrence: e.occurrence)
            case .unidentifiable(let reason): return IdentityParts(notResumable: reason)
            }
        }
        if engine.isGroupOrSchedule(id) {
            return IdentityParts(notResumable: engine.groupMembers(id) != nil ? "it is a group (its members are resumed)" : "it is a schedule")
        }
        if engine.isEphemeral(id) { return IdentityParts(notResumable: "it is one run of an 'every' schedule") }
        return IdentityParts(notResumable: "it was added without an identity")
    }

    /// Decodes stored values (a JSON array) into the values table under
    /// `slot`; nil if they do not decode (the task then runs again).
    func storedValues(_ text: String, slot: TaskID, in L: OpaquePointer) -> TaskValue? {
        let top = lua_gettop(L)
        let n = pushJSONValues(text, onto: L)
        guard n >= 0 else { return nil }
        let value = storeValues(L, count: n, slot: slot)
        lua_settop(L, top)
        return value
    }

    /// Pushes the elements of a JSON array as values (a null is nil) and
    /// returns how many; -1 (nothing pushed) if `text` is not one.
    func pushJSONValues(_ text: String, onto L: OpaquePointer) -> Int32 {
        let top = lua_gettop(L)
        var text = text
        let decoded: Bool = text.withUTF8 { bytes in
            do { try json.decodeJSON(L, bytes) } catch { return false }
            return true
        }
        guard decoded, lua_type(L, -1) == LUA_TTABLE else {
            lua_settop(L, top)
            return -1
        }
        let list = lua_gettop(L)
        let n = Int32(lua_rawlen(L, list))
        guard lua_checkstack(L, n + 4) != 0 else {
            lua_settop(L, top)
            return -1
        }
        for k in stride(from: 1, through: n, by: 1) {
            lua_rawgeti(L, list, lua_Integer(k))
            // a stored null is a nil value again
            if lua_type(L, -1) == LUA_TLIGHTUSERDATA && lua_touserdata(L, -1) == JSONModule.null {
                tasker_pop(L, 1)
                lua_pushnil(L)
            }
        }
        tasker_remove(L, list)
        return n
    }
}

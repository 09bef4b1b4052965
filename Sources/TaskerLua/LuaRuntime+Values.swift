import CLua
import CLuaShim
import TaskerCore
#if canImport(Glibc)
import Glibc
#endif

/// A Lua error value raised by a task body, kept in the errors table.
struct LuaErrorSlot: Sendable {
    let slot: TaskID
}

extension LuaRuntime {
    /// Moves the top `count` values of `co` into the values table.
    func storeValues(_ co: OpaquePointer, count: Int32, slot: TaskID) -> TaskValue {
        guard count > 0 else { return .none }
        let base = lua_gettop(co) - count
        if count == 1 && tasker_isinteger_value(co, -1) != 0 {
            // Nothing to keep in the values table.
            let n = tasker_tointeger(co, -1, nil)
            lua_settop(co, base)
            return .integer(Int64(n))
        }
        if count > 1 {
            lua_createtable(co, count, 0)
            for i in 1...count {
                lua_pushvalue(co, base + i)
                lua_rawseti(co, -2, lua_Integer(i))
            }
        }
        lua_rawgeti(co, tasker_registryindex(), lua_Integer(refs.values))
        lua_rotate(co, -2, 1)
        lua_rawseti(co, -2, lua_Integer(slot))
        lua_settop(co, base)
        return .stored(slot: slot, count: count)
    }

    /// Pushes a task's values; returns how many.
    @discardableResult
    func pushValues(_ co: OpaquePointer, _ value: TaskValue, firstOnly: Bool = false) -> Int32 {
        switch value {
        case .none, .swift:
            return 0
        case .integer(let n):
            lua_pushinteger(co, lua_Integer(n))
            return 1
        case .stored(let slot, let count):
            lua_rawgeti(co, tasker_registryindex(), lua_Integer(refs.values))
            lua_rawgeti(co, -1, lua_Integer(slot))
            if count == 1 {
                tasker_remove(co, -2)
                return 1
            }
            // packed: {n = count, ...}
            tasker_remove(co, -2)
            let packed = lua_gettop(co)
            let n = firstOnly ? 1 : count
            _ = lua_checkstack(co, n)
            for i in 1...n { lua_rawgeti(co, packed, lua_Integer(i)) }
            tasker_remove(co, packed)
            return n
        case .group(let members):
            lua_createtable(co, Int32(members.count), 0)
            for (i, m) in members.enumerated() {
                if case .succeeded(let v)? = engine.outcome(m), pushValues(co, v, firstOnly: true) == 1 {
                    lua_rawseti(co, -2, lua_Integer(i + 1))
                }
            }
            return 1
        }
    }

    /// Pushes exactly one value: the first value of a task (nil if none).
    func pushFirstValue(_ co: OpaquePointer, _ id: TaskID) {
        if case .succeeded(let v)? = engine.outcome(id), pushValues(co, v, firstOnly: true) == 1 { return }
        lua_pushnil(co)
    }

    /// Keeps the error on top of `co` in the errors table and describes it.
    func storeError(_ co: OpaquePointer, slot: TaskID) -> TaskFailure {
        let s = LuaStack(co)
        var kind = TaskFailure.Kind.error
        var message: String
        var position: String?
        var permanent = false
        if s.type(-1) == LUA_TTABLE, isErrorTable(co, -1) {
            s.rawGet(-1, "kind")
            kind = s.string(-1).flatMap(TaskFailure.Kind.init(rawValue:)) ?? .error
            s.pop()
            s.rawGet(-1, "message")
            message = s.string(-1) ?? ""
            s.pop()
            s.rawGet(-1, "where")
            if let w = s.string(-1), !w.isEmpty { position = w }
            s.pop()
            s.rawGet(-1, "permanent")
            permanent = lua_toboolean(co, -1) != 0
            s.pop()
        } else if s.type(-1) == LUA_TTABLE, let text = describeErrorTable(co, -1) {
            message = text
            // A table the script raises may say it too (README, Tasks: retry).
            s.rawGet(-1, "permanent")
            permanent = s.type(-1) == LUA_TBOOLEAN && lua_toboolean(co, -1) != 0
            s.pop()
        } else {
            message = s.describe(-1)
            // Lua's own errors raised where no Lua line is current ("C stack
            // overflow" from a metamethod chain) come without a position.
            if LuaRuntime.positionlessLuaErrors.contains(message) {
                position = s.innermostLuaPosition()
            }
        }
        lua_rawgeti(co, tasker_registryindex(), lua_Integer(refs.errors))
        lua_rotate(co, -2, 1)
        lua_rawseti(co, -2, lua_Integer(slot))
        tasker_pop(co, 1)
        var failure = TaskFailure(kind, message, payload: LuaErrorSlot(slot: slot))
        failure.position = position
        failure.permanent = permanent
        return failure
    }

    /// A table raised as an error, in words: its `__tostring`, else its
    /// `message` field, else its content as compact JSON (cut at 300
    /// bytes); nil when none of these (then `tostring`'s `table: 0x…`).
    func describeErrorTable(_ co: OpaquePointer, _ i: Int32) -> String? {
        let s = LuaStack(co)
        let t = lua_absindex(co, i)
        guard lua_checkstack(co, 4) != 0 else { return nil }
        if luaL_getmetafield(co, t, "__tostring") != LUA_TNIL {
            s.pop()
            return nil  // tostring uses it
        }
        let top = lua_gettop(co)
        defer { lua_settop(co, top) }  // a failed encoding leaves its walk on the stack
        s.rawGet(t, "message")
        if let m = s.string(-1) { return m }
        // As a log field shows a table: keys sorted (one error reads the
        // same in every run), what JSON has no form for as Lua shows it (a
        // function, NaN, invalid UTF-8). Only a cycle or a nesting past
        // JSON's depth is left to `tostring`.
        guard let bytes = try? json.encodeJSON(co, t, lossy: true) else { return nil }
        // masked before it is cut: a secret cut in half is no longer found
        let inner = SecretMask.shared.mask(String(decoding: bytes, as: UTF8.self))
        return inner.utf8.count > 300 ? SecretMask.shared.cut(inner, bytes: 297, ellipsis: "...") : inner
    }

    static let positionlessLuaErrors: Set<String> = ["C stack overflow", "stack overflow", "not enough memory",
                                                     "error in error handling"]

    func isErrorTable(_ co: OpaquePointer, _ i: Int32) -> Bool { hasMetatable(co, i, refs.errorMeta) }

    /// Pushes the Lua error value for a failure: the raised value itself, or
    /// a new error table {kind, message} with tostring "kind: message".
    func pushFailure(_ co: OpaquePointer, _ failure: TaskFailure) {
        if let slot = failure.payload as? LuaErrorSlot {
            lua_rawgeti(co, tasker_registryindex(), lua_Integer(refs.errors))
            lua_rawgeti(co, -1, lua_Integer(slot.slot))
            tasker_remove(co, -2)
            return
        }
        pushErrorTable(co, kind: failure.kind.rawValue, message: failure.message, where: failure.position)
        if let info = failure.payload as? HTTPFailureInfo {
            let s = LuaStack(co)
            s.push(info.url)
            s.rawSet(-2, "url")
            if let code = info.code {
                s.push(code.rawValue)
                s.rawSet(-2, "code")
            }
            if let status = info.response?.status {
                s.push(status)
                s.rawSet(-2, "status")
            }
        }
    }

    func pushErrorTable(_ co: OpaquePointer, kind: String, message: String, where position: String?) {
        let s = LuaStack(co)
        s.newTable(hash: 3)
        s.push(kind)
        s.rawSet(-2, "kind")
        s.push(message)
        s.rawSet(-2, "message")
        if let position, !position.isEmpty {
            s.push(position)
            s.rawSet(-2, "where")
        }
        lua_rawgeti(co, tasker_registryindex(), lua_Integer(refs.errorMeta))
        lua_setmetatable(co, -2)
    }

    /// Pushes what a resumed fiber receives: `true, values…` or `false, err`.
    func push(_ r: Resumption, onto co: OpaquePointer) -> Int32 {
        _ = lua_checkstack(co, 8)
        switch r {
        case .continueSlice:
            return 0
        case .push(let body):
            return body(co)
        case .nothing:
            lua_pushboolean(co, 1)
            return 1
        case .failure(let failure), .failureOfTasks(let failure, _):
            lua_pushboolean(co, 0)
            pushFailure(co, failure)
            return 2
        case .luaFailureOf(let id):
            lua_pushboolean(co, 0)
            pushFailure(co, engine.outcome(id)?.failure ?? TaskFailure(.cancelled, "cancelled"))
            return 2
        case .taskResult(let id, let mode):
            guard let outcome = engine.outcome(id) else {
                lua_pushboolean(co, 0)
                pushFailure(co, TaskFailure(.cancelled, "task '\(engine.name(id))' was cancelled"))
                return 2
            }
            return pushOutcome(co, outcome, mode: mode, leading: true)
        case .anyWinner(let id):
            lua_pushboolean(co, 1)
            guard case .succeeded(let v)? = engine.outcome(id) else { return 1 }
            return 1 + pushValues(co, v)
        case .values(let ids, let compact):
            lua_pushboolean(co, 1)
            lua_createtable(co, Int32(ids.count), 0)
            var n = 0
            for id in ids {
                if compact {
                    guard engine.state(id) == .succeeded else { continue }
                }
                n += 1
                pushFirstValue(co, id)
                lua_rawseti(co, -2, lua_Integer(n))
            }
            return 2
        }
    }

    /// `true, values…`, or for a failure `false, err` (raising mode) or
    /// `true, false, err` (result mode: the call returns `false, err`).
    func pushOutcome(_ co: OpaquePointer, _ outcome: TaskOutcome, mode: AwaitMode, leading: Bool) -> Int32 {
        switch outcome {
        case .succeeded(let v):
            var n: Int32 = 0
            if leading { lua_pushboolean(co, 1); n += 1 }
            if mode == .result { lua_pushboolean(co, 1); n += 1 }
            return n + pushValues(co, v)
        case .failed(let f), .cancelled(let f), .skipped(let f):
            var n: Int32 = 0
            if leading { lua_pushboolean(co, mode == .result ? 1 : 0); n += 1 }
            if mode == .result { lua_pushboolean(co, 0); n += 1 }
            pushFailure(co, f)
            return n + 1
        }
    }
}

extension LuaRuntime {
    /// Keyed by the pipeline's real path, so that the key does not depend
    /// on the directory the run was started from. The path is resolved
    /// once per run: `realpath` walks every component (a readlink each),
    /// a tenth of a coordinator's time when every remote task asked.
    func idempotencyKey(_ id: TaskID, in L: OpaquePointer) -> String {
        if chunk.realScriptPath == nil {
            chunk.realScriptPath = realpath(chunk.scriptPath, nil).map { p in defer { free(p) }; return String(cString: p) }
                ?? chunk.scriptPath
        }
        return identities.idempotencyKey(id, pipeline: chunk.realScriptPath ?? chunk.scriptPath, in: L)
    }
}

extension LuaRuntime {
    /// Pushes table[id] of a per-task table (args, tags), creating `{}` on
    /// first use so that every read sees (and may change) the same table.
    func pushPart(_ L: OpaquePointer, _ table: Int32, _ id: TaskID) {
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(table))
        lua_rawgeti(L, -1, lua_Integer(id))
        if lua_type(L, -1) != LUA_TTABLE {
            tasker_pop(L, 1)
            lua_createtable(L, 0, 0)
            lua_pushvalue(L, -1)
            lua_rawseti(L, -3, lua_Integer(id))
        }
        tasker_remove(L, -2)
    }
}

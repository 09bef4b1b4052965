import CLua
import CLuaShim
import TaskerCore

/// Each task's parts in the registry's per-task tables (body, args, tags,
/// retry predicate): stored when it is added, copied for a schedule's
/// instances, dropped when no longer needed. The one place a retry's Lua
/// `when` is kept and wired into the engine's `retryWhen`.
extension LuaRuntime {
    /// Stores a parsed spec's Lua parts under task `id`, and gives `spec`
    /// (the task's, as the engine will get it) its retry `when`.
    func commit(_ p: ParsedSpec, as id: TaskID, into spec: inout TaskSpec, in L: OpaquePointer) {
        store(p.body, in: refs.bodies, id, L)
        store(p.args, in: refs.args, id, L)
        store(p.tags, in: refs.tags, id, L)
        store(p.predicate, in: refs.predicates, id, L)
        if p.predicate != 0 {
            refs.flags.hasPredicate[id] = true
            spec.retryWhen = predicate(for: id)
        }
        if p.tags != 0 { refs.flags.tagged[id] = true }
    }

    /// Copies the Lua parts of task `from` to task `to` (a schedule's
    /// instance), and gives `spec` (the instance's) its retry `when`.
    func copyParts(from: TaskID, to: TaskID, into spec: inout TaskSpec, in L: OpaquePointer) {
        for ref in [refs.bodies, refs.args, refs.tags, refs.predicates] {
            lua_rawgeti(L, tasker_registryindex(), lua_Integer(ref))
            lua_rawgeti(L, -1, lua_Integer(from))
            lua_rawseti(L, -2, lua_Integer(to))
            tasker_pop(L, 1)
        }
        if refs.flags.hasPredicate[from] != nil {
            refs.flags.hasPredicate[to] = true
            spec.retryWhen = predicate(for: to)
        } else {
            spec.retryWhen = nil
        }
        if refs.flags.tagged[from] != nil { refs.flags.tagged[to] = true }
    }

    private func store(_ index: Int32, in table: Int32, _ id: TaskID, _ L: OpaquePointer) {
        guard index != 0 else { return }
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(table))
        lua_pushvalue(L, index)
        lua_rawseti(L, -2, lua_Integer(id))
        tasker_pop(L, 1)
    }

    /// Forgets the Lua parts a finished task no longer needs.
    func dropParts(_ id: TaskID) {
        clear(refs.bodies, id)
        if refs.flags.hasPredicate[id] != nil {
            clear(refs.predicates, id)
            refs.flags.hasPredicate[id] = nil
        }
    }

    /// Forgets every Lua part of a task whose record goes away.
    func dropAllParts(_ id: TaskID) {
        dropParts(id)
        for table in [refs.args, refs.tags, refs.values, refs.errors, refs.handlers] { clear(table, id) }
    }

    private func clear(_ table: Int32, _ id: TaskID) {
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(table))
        lua_pushnil(L)
        lua_rawseti(L, -2, lua_Integer(id))
        tasker_pop(L, 1)
    }

    /// The retry predicate closure for task `id`: calls retry.when(err, attempt).
    private func predicate(for id: TaskID) -> (TaskFailure, Int) -> Bool {
        return { [unowned self] failure, attempt in
            lua_rawgeti(L, tasker_registryindex(), lua_Integer(refs.predicates))
            lua_rawgeti(L, -1, lua_Integer(id))
            tasker_remove(L, -2)
            guard lua_type(L, -1) == LUA_TFUNCTION else {
                tasker_pop(L, 1)
                return true
            }
            pushFailure(L, failure)
            lua_pushinteger(L, lua_Integer(attempt))
            guard callProtected(nargs: 2, nresults: 1,
                                context: "the retry 'when' predicate of task '\(engine.name(id))'") else { return false }
            defer { tasker_pop(L, 1) }
            return lua_toboolean(L, -1) != 0
        }
    }
}

import CLua
import CLuaShim
import TaskerCore

/// What the journal and a worker read of a task: its values as stored
/// text, its identity in parts.
extension LuaRuntime {
    public static let maxStoredValueBytes = 1 << 20
    /// What a value may weigh on its way between a coordinator and a
    /// worker (the queue's rows hold it; the journal's limit applies after).
    public static let maxRemoteValueBytes = 64 << 20

    /// Appends the stored form of succeeded task `id`'s values to `buffer`
    /// (the journal's common path: no String per task); false, with
    /// `buffer` as it was, when they cannot be stored (`storableValues`
    /// then says why).
    public func appendStorableValues(of id: TaskID, to buffer: inout [UInt8]) -> Bool {
        loop.assertInLoop()
        guard case .succeeded(let value)? = engine.outcome(id) else { return false }
        return appendStorableValues(value, to: &buffer)
    }

    /// The same for a succeeded task's value already in hand.
    public func appendStorableValues(_ value: TaskValue, to buffer: inout [UInt8]) -> Bool {
        loop.assertInLoop()
        switch value {
        case .none:
            buffer.append(UInt8(ascii: "["))
            buffer.append(UInt8(ascii: "]"))
            return true
        case .group, .swift:
            return false
        case .integer(let n):
            if Self.holdsSecret(n) { return false }
            buffer.append(UInt8(ascii: "["))
            DecimalText.append(n, to: &buffer)
            buffer.append(UInt8(ascii: "]"))
            return true
        case .stored:
            let top = lua_gettop(L)
            defer { lua_settop(L, top) }
            guard lua_checkstack(L, 64) != 0 else { return false }
            let n = pushValues(L, value)
            do {
                try StoredValueEncoder.encode(L, first: top + 1, count: n, limit: Self.maxStoredValueBytes,
                                              arrayMeta: json.arrayMeta, errorMeta: refs.errorMeta, refusingSecrets: true,
                                              appendingTo: &buffer)
                return true
            } catch {
                return false
            }
        }
    }

    /// Whether the text of `n` holds a registered secret (a PIN).
    public static func holdsSecret(_ n: Int64) -> Bool {
        guard !SecretMask.shared.isEmpty else { return false }
        var text: [UInt8] = []
        DecimalText.append(n, to: &text)
        return text.withUnsafeBufferPointer { SecretMask.shared.occurs(in: $0) }
    }

    /// The values of finished task `id`, for the journal (and a worker's
    /// result). With `warn`, values that cannot be stored are named in a
    /// warning (the task then runs again on resume).
    public func storableValues(of id: TaskID, warn: Bool = false, limit: Int = maxStoredValueBytes,
                               refusingSecrets: Bool = false) -> StoredValues {
        loop.assertInLoop()
        guard case .succeeded(let value)? = engine.outcome(id) else { return .notStorable("it did not succeed") }
        func notStored(_ reason: String) -> StoredValues {
            let why = "its values cannot be stored: \(reason)"
            if warn {
                var task = "task '\(engine.name(id))'"
                if case .explicit(let given)? = identities[id]?.identity, given != engine.name(id) { task += " (id '\(given)')" }
                logger.warning("\(task): \(why); not recorded, it runs again on resume")
            }
            return .notStorable(why)
        }
        switch value {
        case .none:
            return .json("[]")
        case .integer(let n):
            if refusingSecrets, Self.holdsSecret(n) { return notStored(StoredValueEncoder.holdsSecret) }
            return .json("[\(n)]")
        case .group:
            return .notStorable("it is a group")
        case .swift:
            return .notStorable("its value is not a Lua value")
        case .stored:
            let top = lua_gettop(L)
            defer { lua_settop(L, top) }
            guard lua_checkstack(L, 64) != 0 else { return .notStorable("no stack space") }
            let n = pushValues(L, value)
            do {
                return .json(try StoredValueEncoder.encode(L, first: top + 1, count: n, limit: limit,
                                                                     arrayMeta: json.arrayMeta, errorMeta: refs.errorMeta,
                                                                     refusingSecrets: refusingSecrets))
            } catch {
                return notStored(error.reason)
            }
        }
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
        // In the stored values' form: integer keys stay integers, and an
        // engine error keeps its fields (an exec error's code and stderr)
        // and its metatable. What cannot be stored (a function, a table
        // with a metatable of its own) goes as its message.
        if let stored = try? StoredValueEncoder.encode(L, first: v, count: 1, limit: Self.maxStoredValueBytes,
                                                       arrayMeta: json.arrayMeta, errorMeta: refs.errorMeta) {
            return stored
        }
        LuaStack(L).push(failure.message)
        return try? StoredValueEncoder.encode(L, first: lua_gettop(L), count: 1, limit: Self.maxStoredValueBytes,
                                              arrayMeta: json.arrayMeta)
    }

    /// Task `id`'s derived identity, if its journal entry can be plain (it
    /// has one, and no tags): occurrence 0 otherwise; -1 when it is counted
    /// by whoever takes `takeAddedIdentities`. One call per finished task.
    public func plainIdentity(of id: TaskID) -> (hash: UInt64, occurrence: Int) {
        guard refs.flags.tagged[id] == nil else { return (0, 0) }
        return identities.derivedAsCounted(id)
    }

    /// Lets the caller count derived identities' occurrences (a journal's
    /// writer thread, from `takeAddedIdentities`): the run's thread then
    /// counts them only if someone asks for one here. Not for a resumed
    /// run. Returns whether the caller counts them.
    public func countOccurrencesElsewhere() -> Bool {
        guard options.reuse.isEmpty else { return false }
        identities.countElsewhere()
        return true
    }

    /// Derived identities added since the last call, in add order.
    public func takeAddedIdentities(into out: inout AddedIdentities) { identities.takeAdded(into: &out) }

    /// Task `id`'s identity in parts (formatted by whoever stores it), or
    /// why it has none. `asCounted`: an occurrence counted elsewhere stays
    /// 0 (see `countOccurrencesElsewhere`) instead of being counted here.
    public func identityParts(of id: TaskID, asCounted: Bool = false) -> IdentityParts {
        let d = asCounted ? identities.derivedAsCounted(id) : identities.derived(id)
        if d.occurrence > 0 { return IdentityParts(hash: d.hash, occurrence: d.occurrence) }
        if d.occurrence < 0 { return IdentityParts(hash: d.hash, occurrence: 0) }
        if let e = identities[id] {
            switch e.identity {
            case .explicit(let s):
                // recorded as `***`, it would never match the id again
                guard SecretMask.shared.mask(s) == s else { return IdentityParts(notResumable: "its id holds a secret") }
                return IdentityParts(explicit: s)
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

    /// Records task `id`'s identity (when the run identifies tasks or the
    /// spec names an `id`) and, on resume, returns the values it succeeded
    /// with in the earlier run, stored under `id` (nil: it runs). For every
    /// task that can be reused: added, a group's member, a rolling host's.
    /// `spec` (the task's) learns whether its identity was handed over to
    /// be counted elsewhere (`TaskSpec.identityHandedOver`).
    func identify(_ p: ParsedSpec, as id: TaskID, into spec: inout TaskSpec, in L: OpaquePointer) -> TaskValue? {
        guard options.identify || p.explicitID != nil else { return nil }
        if p.explicitID == nil, p.spec.name == nil, p.args == 0, p.body != 0,
           identities.recordBodyCountedElsewhere(id, body: p.body, in: L) {
            spec.identityHandedOver = p.tags == 0
            return nil
        }
        let entry = identities.record(id, explicitID: p.explicitID, name: p.spec.name, body: p.body, args: p.args,
                                      in: L, needOccurrence: !options.reuse.isEmpty)
        if entry.occurrence == Int(TaskIdentities.uncounted) { spec.identityHandedOver = p.tags == 0 }
        guard !options.reuse.isEmpty, let text = entry.text, let stored = options.reuse[text] else { return nil }
        return storedValues(stored, slot: id, in: L)
    }

    /// Group `id`'s identity from its `count` members (ids `id + 1`…), when
    /// the run identifies tasks: a task that awaits the group's handle is
    /// then resumable too. `kind` tells parallel, serial and rolling apart.
    func identifyGroup(_ id: TaskID, kind: UInt8, count: Int) {
        guard options.identify else { return }
        identities.recordGroup(id, kind: kind, members: (id + 1)..<(id + 1 + count))
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

    /// Pushes stored values (see `StoredValueCodec`: either form) and
    /// returns how many; -1 (nothing pushed) if `text` is not stored values.
    func pushJSONValues(_ text: String, onto L: OpaquePointer) -> Int32 {
        StoredValueDecoder.push(text, onto: L, arrayMeta: json.arrayMeta, errorMeta: refs.errorMeta)
    }
}

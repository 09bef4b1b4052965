import CLua
import CLuaShim
import TaskerCore
#if canImport(Glibc)
import Glibc
#endif

/// Derives each task's identity at `tasker.add` (values captured by value
/// at add time) and keeps it by task id. Walks values with raw access and
/// no metamethods; never calls into Lua code.
final class TaskIdentities {
    /// A task's identity as numbered in this run.
    struct Entry {
        var identity: TaskIdentity
        /// 1 for the first task with this identity, 2 for the second…
        var occurrence: Int

        /// `spec.id`, the hash in hex, with `#n` from the second one on.
        var text: String? {
            guard let base = identity.text else { return nil }
            return occurrence > 1 ? "\(base)#\(occurrence)" : base
        }
    }

    private struct Unidentifiable: Error {
        let reason: String
    }

    /// Tables whose content is bigger than this make a task unidentifiable.
    static let maxTableBytes = 64 << 10

    /// Set once, by the runtime that owns this.
    unowned var runtime: LuaRuntime!
    /// Derived identities by task id: the hash and the occurrence (0: none;
    /// `uncounted` while counted elsewhere); explicit and missing ones
    /// apart (rare).
    private var derivedByID = DerivedRuns()
    private var special: [TaskID: Entry] = [:]
    private let derivedCounts = IdentityCounts()
    /// The occurrence of a derived identity someone else counts.
    static let uncounted: Int32 = DerivedRuns.uncounted
    /// Occurrences are counted elsewhere (a journal's writer thread, from
    /// `added`) until someone here asks for one: then they are counted
    /// here, from the first task on, in add order, as the writer does.
    private var countingElsewhere = false
    /// Derived identities added since the last `takeAdded`, in add order.
    private var added = AddedIdentities()
    private var explicitIDs: Set<String> = []
    /// Bytecode hashes by function prototype: every closure made from one
    /// function expression (a new one per task in a loop) shares it, so
    /// the dump is hashed once per prototype. The first closure of each is
    /// kept in the registry table `prototypeAnchors`, so a prototype cannot
    /// be collected and its address given to another.
    private var prototypeHashes = PrototypeHashes()
    private var prototypeAnchors: Int32 = LUA_NOREF
    /// Beyond this many prototypes (code made with `load` in a loop), the
    /// hash is cached per closure, weakly, as before.
    static let maxPrototypes = 4096
    /// Registry ref of a weak-keyed table: function -> hash of its bytecode.
    private var bytecodeHashes: Int32 = LUA_NOREF
    /// Names of loaded modules and their functions, by address; built the
    /// first time a walk meets a table or a C function, and again when the
    /// set of loaded modules changes (see `name(of:)`).
    private var names: [UnsafeRawPointer: String]?


    subscript(id: TaskID) -> Entry? {
        countHere()
        let d = derivedByID.find(id)
        if d.occurrence > 0 { return Entry(identity: .derived(d.hash), occurrence: Int(d.occurrence)) }
        return special.isEmpty ? nil : special[id]
    }

    /// The derived hash and occurrence of task `id` (occurrence 0: none).
    func derived(_ id: TaskID) -> (hash: UInt64, occurrence: Int) {
        countHere()
        let d = derivedByID.find(id)
        return (d.hash, Int(d.occurrence))
    }

    /// The same without counting here: the occurrence is `uncounted` (-1)
    /// when it is counted elsewhere.
    func derivedAsCounted(_ id: TaskID) -> (hash: UInt64, occurrence: Int) {
        countPending()
        let d = derivedByID.find(id)
        return (d.hash, Int(d.occurrence))
    }

    /// From now on occurrences are counted by whoever takes `added`
    /// (before any task is added; not for a resumed run, which matches
    /// them as tasks are added).
    func countElsewhere() {
        guard derivedByID.isEmpty, special.isEmpty else { return }
        countingElsewhere = true
    }

    /// The derived identities added since the last call, in add order.
    func takeAdded(into out: inout AddedIdentities) {
        closeAddedRun()
        swap(&added, &out)
        added.removeAll()
    }

    /// The last identities added, one body again and again: a run, kept
    /// out of `added` until another identity comes (`count` 0: none).
    private var addedRun = AddedIdentity(id: 0, hash: 0, count: 0)

    private func closeAddedRun() {
        guard addedRun.count > 0 else { return }
        added.append(addedRun)
        addedRun.count = 0
    }

    /// `record` for the commonest adds while occurrences are counted
    /// elsewhere: no id, name or args, and the body the last such add had
    /// (a loop adding one function) or a closure of scalars (a loop making
    /// one per task). True if it was one of those, and is recorded (no
    /// entry made: nobody reads it).
    @inline(__always)
    func recordBodyCountedElsewhere(_ id: TaskID, body: Int32, in L: OpaquePointer) -> Bool {
        guard countingElsewhere else { return false }
        // The same object as the last body (anchored, so its address is
        // its own): nothing else to look at.
        if let last = lastBody, lua_topointer(L, body) == last {
            keepForCounting(lastBodyHash, id)
            return true
        }
        var proto: UnsafeRawPointer?
        guard let closure = tasker_lua_closure(L, body, &proto) else { return false }
        guard let h = closureOfScalars(L, body, closure: closure, proto: proto!) else { return false }
        keepForCounting(h, id)
        return true
    }

    /// Someone here needs an occurrence: count every identity so far here,
    /// in add order, and from now on as they are added.
    private func countHere() {
        countPending()
        guard countingElsewhere else { return }
        countingElsewhere = false
        derivedByID.countUncounted(derivedCounts)
    }

    private func store(_ e: Entry, for id: TaskID) {
        if case .derived(let h) = e.identity {
            storeDerived(h, occurrence: e.occurrence, for: id)
        } else {
            special[id] = e
        }
    }

    private func storeDerived(_ h: UInt64, occurrence: Int, for id: TaskID) {
        derivedByID.store(id, hash: h, occurrence: Int32(truncatingIfNeeded: occurrence))
    }

    /// Whether closures' captures are read in place (this Lua's layout
    /// was checked when the first state opened), not through the API.
    static var readsCapturesInPlace: Bool { tasker_identity_reads_in_place() != 0 }

    /// Whether `id` was already used by `spec.id` in this run.
    func isTaken(_ explicitID: String) -> Bool { explicitIDs.contains(explicitID) }

    /// Derives and records task `id`'s identity from its explicit id, or
    /// from its explicit name, args and body (stack indices; 0 = absent).
    /// `needOccurrence`: the caller reads the entry's occurrence (else it
    /// may be counted at the next add, and the entry says 0).
    @discardableResult @inline(never)  // not into `identify`'s common path
    func record(_ id: TaskID, explicitID: String?, name: String?, body: Int32, args: Int32, in L: OpaquePointer,
                needOccurrence: Bool = true) -> Entry {
        if explicitID == nil, name == nil, args == 0, body != 0 {
            // A loop adding one body again and again: the last identity, one
            // occurrence later (nothing walked, nothing copied).
            if let h = sameBodyAsLast(L, body) {
                if countingElsewhere { return addedForCounting(h, id) }
                let occurrence = count(h)
                storeDerived(h, occurrence: occurrence, for: id)
                return Entry(identity: .derived(h), occurrence: occurrence)
            }
            // A loop of closures: a new identity each, counted at the next
            // add while its slot comes into the cache.
            if let h = closureOfScalars(L, body) {
                if countingElsewhere { return addedForCounting(h, id) }
                guard needOccurrence else {
                    storeDerived(h, occurrence: 0, for: id)
                    countLater(h, id)
                    return Entry(identity: .derived(h), occurrence: 0)
                }
                let occurrence = count(h)
                storeDerived(h, occurrence: occurrence, for: id)
                return Entry(identity: .derived(h), occurrence: occurrence)
            }
        }
        let identity: TaskIdentity
        if let explicitID {
            explicitIDs.insert(explicitID)
            identity = .explicit(explicitID)
        } else {
            identity = derive(name: name, body: body, args: args, in: L)
        }
        var occurrence = 1
        if case .derived(let h) = identity {
            if countingElsewhere { return addedForCounting(h, id) }
            occurrence = count(h)
        }
        let e = Entry(identity: identity, occurrence: occurrence)
        store(e, for: id)
        return e
    }

    /// Keeps `h` for task `id`, to be counted elsewhere.
    private func addedForCounting(_ h: UInt64, _ id: TaskID) -> Entry {
        keepForCounting(h, id)
        return Entry(identity: .derived(h), occurrence: Int(Self.uncounted))
    }

    /// Stores `h` for task `id` uncounted, and adds it to `added`: to the
    /// run of the tasks before it when they had it too.
    @inline(__always)
    private func keepForCounting(_ h: UInt64, _ id: TaskID) {
        derivedByID.storeUncounted(id, hash: h)
        if addedRun.count > 0, addedRun.hash == h, addedRun.id + addedRun.count == id {
            addedRun.count += 1
        } else {
            closeAddedRun()
            addedRun = AddedIdentity(id: id, hash: h)
        }
    }

    /// Counts one more task with identity `h`; returns its occurrence
    /// (after the one left to count: occurrences follow add order).
    private func count(_ h: UInt64) -> Int {
        countPending()
        return derivedCounts.increment(h)
    }

    /// The last identity added, not counted yet (see `countLater`).
    private var uncounted: (hash: UInt64, id: TaskID)?

    /// Counts `h` for task `id` at the next add or read, asking for its
    /// slot now: each new identity of a loop of closures was a wait for
    /// memory (the table outgrows the cache), the largest cost of
    /// recording such a run.
    private func countLater(_ h: UInt64, _ id: TaskID) {
        countPending()
        derivedCounts.prefetch(h)
        uncounted = (h, id)
    }

    private func countPending() {
        guard let u = uncounted else { return }
        uncounted = nil
        derivedByID.setOccurrence(u.id, Int32(truncatingIfNeeded: derivedCounts.increment(u.hash)))
    }

    /// A group's identity, for a task whose body captures its handle (the
    /// group itself is never reused: its members are): made of its kind and
    /// its members' identities in order; none when a member has none.
    /// Groups are few: kept apart from the tasks' tables.
    func recordGroup(_ id: TaskID, kind: UInt8, members: Range<TaskID>) {
        var h = IdentityHasher()
        h.byte(0x47)  // G
        h.byte(kind)
        for m in members {
            guard let text = self[m]?.text else { return }
            h.string(text)
        }
        groupTexts[id] = TaskIdentity.hex(h.finish())
    }

    private var groupTexts: [TaskID: String] = [:]

    /// Marks a task that has no identity of its own (groups, schedules).
    func recordNone(_ id: TaskID, reason: String) {
        store(Entry(identity: .unidentifiable(reason), occurrence: 1), for: id)
    }

    /// A walk of the name, body and args (`record` first tries the body it
    /// saw last).
    private func derive(name: String?, body: Int32, args: Int32, in L: OpaquePointer) -> TaskIdentity {
        var h = IdentityHasher()
        // Taken out, not copied: a copy would share the array's storage and
        // the first append would copy it (an allocation per task).
        var walk = Walk()
        swap(&walk, &reusableWalk)
        walk.open.removeAll(keepingCapacity: true)
        walk.tableBytes = 0
        walk.tableDepth = 0
        walk.captures = 0
        defer { swap(&walk, &reusableWalk) }
        do {
            if let name {
                h.byte(0x4e)  // N
                h.string(name)
            }
            if body != 0 {
                h.byte(0x42)  // B (identity.c writes the same tags)
                try value(L, lua_absindex(L, body), into: &h, &walk)
            }
            if args != 0 {
                h.byte(0x41)  // A
                try value(L, lua_absindex(L, args), into: &h, &walk)
            }
        } catch {
            return .unidentifiable(error.reason)
        }
        let hash = h.finish()
        if name == nil, args == 0, body != 0, walk.captures == 0 { rememberBody(L, lua_absindex(L, body), hash) }
        return .derived(hash)
    }

    /// A hash of the function at `f` as a body's identity hashes it (its
    /// bytecode without line numbers and what it captures, by value), in
    /// hex; nil when it cannot be taken. A definition's version.
    func version(ofFunctionAt f: Int32, in L: OpaquePointer) -> String? {
        guard lua_type(L, f) == LUA_TFUNCTION else { return nil }
        var h = IdentityHasher()
        var walk = Walk()
        do { try value(L, lua_absindex(L, f), into: &h, &walk) } catch { return nil }
        return TaskIdentity.hex(h.finish())
    }

    /// A loop adds many tasks with one body and nothing else: the last such
    /// body (anchored in the registry, so its address cannot be reused) and
    /// its identity. Remembered only when the body captures nothing but
    /// `_ENV` (a closure's upvalues are fixed when it is made, so the same
    /// closure still does).
    private var lastBody: UnsafeRawPointer?
    private var lastBodyHash: UInt64 = 0
    private var lastBodyRef: Int32 = LUA_NOREF
    private var reusableWalk = Walk()

    /// The derived hash of the body at stack index `f`, if it is the last one remembered.
    private func sameBodyAsLast(_ L: OpaquePointer, _ f: Int32) -> UInt64? {
        guard let last = lastBody else { return nil }
        let f = f > 0 ? f : lua_absindex(L, f)
        guard lua_type(L, f) == LUA_TFUNCTION, lua_topointer(L, f) == last else { return nil }
        return lastBodyHash
    }

    /// The common shape, a closure made in a loop capturing numbers or
    /// strings, hashed in C without the walk: the same hash `derive` gives
    /// (`B`, then the function: its prototype's bytecode hash, then each
    /// capture). Nil when the prototype is not hashed yet or a capture is
    /// anything else (or nothing but _ENV is captured: `rememberBody`
    /// takes that one).
    private func closureOfScalars(_ L: OpaquePointer, _ f: Int32) -> UInt64? {
        var proto: UnsafeRawPointer?
        guard let closure = tasker_lua_closure(L, f, &proto) else { return nil }
        return closureOfScalars(L, f, closure: closure, proto: proto!)
    }

    private func closureOfScalars(_ L: OpaquePointer, _ f: Int32, closure: UnsafeRawPointer,
                                  proto: UnsafeRawPointer) -> UInt64? {
        guard let code = prototypeHashes[proto] else { return nil }
        var h = IdentityHasher(h: code.prefix)
        let captures = tasker_hash_scalar_closure(L, f > 0 ? f : lua_absindex(L, f), closure, code.env, &h.h)
        guard captures > 0 else { return nil }
        return h.finish()
    }

    /// What `function` feeds before a Lua function's captures: the body's
    /// tag (`derive`), the function's, its bytecode's hash. The same for
    /// every closure of a prototype, so kept with its hash.
    private static func closurePrefix(code: UInt64) -> UInt64 {
        var h = IdentityHasher()
        h.byte(0x42)  // B
        h.byte(7)  // a Lua function
        h.word(code)
        return h.h
    }

    /// `f` captured nothing but _ENV (the walk counted no captures).
    private func rememberBody(_ L: OpaquePointer, _ f: Int32, _ hash: UInt64) {
        guard lua_type(L, f) == LUA_TFUNCTION, lua_iscfunction(L, f) == 0 else { return }
        if lastBodyRef == LUA_NOREF {
            lua_pushvalue(L, f)
            lastBodyRef = LuaStack(L).ref()
        } else {
            lua_pushvalue(L, f)
            lua_rawseti(L, tasker_registryindex(), lua_Integer(lastBodyRef))
        }
        lastBody = lua_topointer(L, f)
        lastBodyHash = hash
    }

    // MARK: the walk

    private struct Walk {
        /// Tables and functions being walked (a cycle refers back by depth).
        var open: [UnsafeRawPointer] = []
        /// Bytes of table content seen since the outermost table began.
        var tableBytes = 0
        var tableDepth = 0
        /// Values captured by the functions walked (_ENV aside).
        var captures = 0
    }

    private func value(_ L: OpaquePointer, _ i: Int32, into h: inout IdentityHasher, _ walk: inout Walk) throws(Unidentifiable) {
        switch lua_type(L, i) {
        case LUA_TNIL, LUA_TNONE:
            h.byte(0)
        case LUA_TBOOLEAN:
            h.byte(lua_toboolean(L, i) != 0 ? 2 : 1)
        case LUA_TNUMBER:
            var isInt: Int32 = 0
            let n = tasker_tointeger(L, i, &isInt)  // 1.0 and 1 are the same key and value
            if isInt != 0 {
                h.byte(3)
                h.word(UInt64(bitPattern: Int64(n)))
            } else {
                h.byte(4)
                h.word(tasker_tonumber(L, i, nil).bitPattern)
            }
            try count(8, &walk)
        case LUA_TSTRING:
            var len = 0
            let p = tasker_tostring(L, i, &len)!
            h.byte(5)
            h.bytes(UnsafeRawBufferPointer(start: p, count: len))
            try count(len, &walk)
        case LUA_TTABLE:
            try table(L, i, into: &h, &walk)
        case LUA_TFUNCTION:
            try function(L, i, into: &h, &walk)
        case LUA_TUSERDATA:
            guard let task = runtime.handleID(L, i) else { throw Unidentifiable(reason: "its body captures a userdata") }
            guard let text = self[task]?.text ?? groupTexts[task] else {
                throw Unidentifiable(reason: "it refers to task '\(runtime.engine.name(task))', which has no identity")
            }
            h.byte(8)
            h.string(text)
        case LUA_TLIGHTUSERDATA where lua_touserdata(L, i) == JSONModule.null:
            h.byte(9)
        case LUA_TTHREAD:
            throw Unidentifiable(reason: "its body captures a coroutine")
        default:
            throw Unidentifiable(reason: "its body captures a \(LuaStack(L).typeName(i))")
        }
    }

    private func count(_ bytes: Int, _ walk: inout Walk) throws(Unidentifiable) {
        guard walk.tableDepth > 0 else { return }
        walk.tableBytes += bytes
        if walk.tableBytes > Self.maxTableBytes {
            throw Unidentifiable(reason: "it captures a table over 64 KiB")
        }
    }

    /// A table or function already being walked (a cycle) hashes as how far
    /// up it is.
    private func backReference(_ p: UnsafeRawPointer, into h: inout IdentityHasher, _ walk: Walk) -> Bool {
        guard let depth = walk.open.lastIndex(of: p) else { return false }
        h.byte(11)
        h.word(UInt64(depth))
        return true
    }

    private func table(_ L: OpaquePointer, _ t: Int32, into h: inout IdentityHasher, _ walk: inout Walk) throws(Unidentifiable) {
        let p = lua_topointer(L, t)!
        if let name = name(of: p, L) {
            h.byte(10)
            h.string(name)
            return
        }
        if backReference(p, into: &h, walk) { return }
        guard lua_checkstack(L, 4) != 0 else { throw Unidentifiable(reason: "its values nest too deeply") }
        walk.open.append(p)
        if walk.tableDepth == 0 { walk.tableBytes = 0 }
        walk.tableDepth += 1
        defer {
            walk.open.removeLast()
            walk.tableDepth -= 1
        }
        // Entries in any order: hash each pair alone, then the sorted hashes.
        var pairs: [UInt64] = []
        lua_pushnil(L)
        while lua_next(L, t) != 0 {
            var pair = IdentityHasher()
            do {
                try value(L, lua_gettop(L) - 1, into: &pair, &walk)
                try value(L, lua_gettop(L), into: &pair, &walk)
            } catch {
                tasker_pop(L, 2)
                throw error
            }
            pairs.append(pair.finish())
            tasker_pop(L, 1)
            try count(8, &walk)
        }
        pairs.sort()
        h.byte(6)
        h.word(UInt64(pairs.count))
        for x in pairs { h.word(x) }
    }

    private func function(_ L: OpaquePointer, _ f: Int32, into h: inout IdentityHasher, _ walk: inout Walk) throws(Unidentifiable) {
        let p = lua_topointer(L, f)!
        if lua_iscfunction(L, f) != 0 {
            guard let name = name(of: p, L) else {
                throw Unidentifiable(reason: "its body captures a C function that no loaded module names")
            }
            h.byte(12)
            h.string(name)
            return
        }
        if backReference(p, into: &h, walk) { return }
        h.byte(7)
        h.word(try bytecodeHash(L, f))
        walk.open.append(p)
        defer { walk.open.removeLast() }
        guard lua_checkstack(L, 4) != 0 else { throw Unidentifiable(reason: "its values nest too deeply") }
        var n: Int32 = 1
        while let upname = lua_getupvalue(L, f, n) {
            defer { n += 1 }
            // _ENV is the globals: excluded (a task reads them when it runs).
            if upname.pointee == 0x5F /* _ */, strcmp(upname, "_ENV") == 0 {
                tasker_pop(L, 1)
                continue
            }
            walk.captures += 1
            do { try value(L, lua_gettop(L), into: &h, &walk) } catch {
                tasker_pop(L, 1)
                throw error
            }
            tasker_pop(L, 1)
        }
    }

    /// The hash of the function's stripped bytecode without line numbers,
    /// cached per prototype (see `prototypeHashes`).
    private func bytecodeHash(_ L: OpaquePointer, _ f: Int32) throws(Unidentifiable) -> UInt64 {
        guard let proto = tasker_proto(L, f).map(UnsafeRawPointer.init) else { return try closureBytecodeHash(L, f) }
        if let e = prototypeHashes[proto] { return e.hash }
        guard prototypeHashes.count < Self.maxPrototypes, lua_checkstack(L, 2) != 0 else {
            return try closureBytecodeHash(L, f)
        }
        let hash = try Self.hashOfDump(L, f)
        let s = LuaStack(L)
        if prototypeAnchors == LUA_NOREF {
            s.newTable()
            prototypeAnchors = s.ref()
        }
        s.pushRegistry(prototypeAnchors)
        lua_pushvalue(L, f)
        lua_rawseti(L, -2, lua_Integer(prototypeHashes.count + 1))
        tasker_pop(L, 1)
        prototypeHashes.insert(proto, .init(hash: hash, prefix: Self.closurePrefix(code: hash), env: tasker_env_upvalue(L, f)))
        return hash
    }

    /// The same, cached per function (weak keys: a collected function's
    /// entry goes): when the prototype cannot be read, and past
    /// `maxPrototypes`.
    private func closureBytecodeHash(_ L: OpaquePointer, _ f: Int32) throws(Unidentifiable) -> UInt64 {
        let s = LuaStack(L)
        if bytecodeHashes == LUA_NOREF {
            s.newTable()
            s.newTable(hash: 1)
            s.push("k")
            s.rawSet(-2, "__mode")
            lua_setmetatable(L, -2)
            bytecodeHashes = s.ref()
        }
        s.pushRegistry(bytecodeHashes)
        lua_pushvalue(L, f)
        lua_rawget(L, -2)
        var isInt: Int32 = 0
        let cached = tasker_tointeger(L, -1, &isInt)
        tasker_pop(L, 1)
        if isInt != 0 {
            tasker_pop(L, 1)
            return UInt64(bitPattern: Int64(cached))
        }
        let hash: UInt64
        do { hash = try Self.hashOfDump(L, f) } catch {
            tasker_pop(L, 1)
            throw error
        }
        lua_pushvalue(L, f)
        lua_pushinteger(L, lua_Integer(Int64(bitPattern: hash)))
        lua_rawset(L, -3)
        tasker_pop(L, 1)
        return hash
    }

    /// Dumps the function at `f` (stripped) and hashes it without line numbers.
    private static func hashOfDump(_ L: OpaquePointer, _ f: Int32) throws(Unidentifiable) -> UInt64 {
        var len = 0
        guard let dump = tasker_dump(L, f, &len) else { throw Unidentifiable(reason: "its body could not be dumped") }
        defer { free(dump) }
        let raw = UnsafeRawBufferPointer(start: dump, count: len)
        var h = IdentityHasher()
        if let normalized = BytecodeNormalizer.normalize(raw) {
            normalized.withUnsafeBytes { h.bytes($0) }
        } else {
            h.bytes(raw)
        }
        return h.finish()
    }

    /// The name a loaded module gives `p` ("string", "_G.print",
    /// "tasker.exec": modules and the functions in them). Looked up again
    /// when an entry was added to `package.loaded` since (its __newindex
    /// counts them: `require`, or by hand), so a module loaded between two
    /// adds is found at once; counting `package.loaded` at each look (or at
    /// each miss: every args table) was most of a defined task's
    /// derivation. Entries replaced in place or set with `rawset`, or a
    /// metatable of the script's own on `package.loaded`, go unseen (such
    /// a module is then hashed by its content, not its name).
    private func name(of p: UnsafeRawPointer, _ L: OpaquePointer) -> String? {
        let changes = tasker_loaded_changes(L)
        if names == nil || changes != namesChanges {
            namesChanges = changes
            names = loadedNames(L)
        }
        return names?[p]
    }

    /// `tasker_loaded_changes` when `names` was built.
    private var namesChanges: UInt64 = 0

    /// Pushes `package.loaded` (and what led to it); false if it is not a table.
    private func pushLoaded(_ L: OpaquePointer) -> Bool {
        let s = LuaStack(L)
        guard lua_checkstack(L, 6) != 0 else { return false }
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(LUA_RIDX_GLOBALS))
        s.rawGet(-1, "package")
        guard s.type(-1) == LUA_TTABLE else { return false }
        s.rawGet(-1, "loaded")
        return s.type(-1) == LUA_TTABLE
    }

    private func loadedNames(_ L: OpaquePointer) -> [UnsafeRawPointer: String] {
        let s = LuaStack(L)
        var out: [UnsafeRawPointer: String] = [:]
        let top = lua_gettop(L)
        defer { lua_settop(L, top) }
        guard pushLoaded(L) else { return out }
        let loaded = lua_gettop(L)
        var modules: [(String, Int32)] = []
        lua_pushnil(L)
        while lua_next(L, loaded) != 0 {
            if s.type(-2) == LUA_TSTRING, let name = s.string(-2), s.type(-1) == LUA_TTABLE {
                out[lua_topointer(L, -1)!] = name
                modules.append((name, 0))
            }
            tasker_pop(L, 1)
        }
        for (module, _) in modules.sorted(by: { $0.0 < $1.0 }) {
            s.rawGet(loaded, module)
            let m = lua_gettop(L)
            lua_pushnil(L)
            while lua_next(L, m) != 0 {
                if s.type(-1) == LUA_TFUNCTION, s.type(-2) == LUA_TSTRING, let field = s.string(-2) {
                    let p = lua_topointer(L, -1)!
                    if out[p] == nil { out[p] = "\(module).\(field)" }
                }
                tasker_pop(L, 1)
            }
            tasker_pop(L, 1)
        }
        return out
    }

    /// `ctx.idempotency_key`: a hash of the pipeline and the task's
    /// identity, the same across attempts and resumes. A task added while
    /// identities were not derived gets one now (its body and args as they
    /// are); one without an identity gets a key stable within the run.
    private var pipelinePrefix: (pipeline: String, hasher: IdentityHasher)?

    func idempotencyKey(_ id: TaskID, pipeline: String, in L: OpaquePointer) -> String {
        if self[id] == nil {
            let top = lua_gettop(L)
            // Read only: the body slot holds the function every attempt
            // calls, so nothing may be created or replaced in it.
            Self.pushSlot(L, runtime.refs.bodies, id)
            Self.pushSlot(L, runtime.refs.args, id)
            let body: Int32 = lua_type(L, top + 1) == LUA_TNIL ? 0 : top + 1
            let args: Int32 = lua_type(L, top + 2) == LUA_TNIL ? 0 : top + 2
            record(id, explicitID: nil, name: runtime.engine.explicitName(id), body: body, args: args, in: L)
            lua_settop(L, top)
        }
        // The pipeline's part once per run (a path hashed a byte at a time
        // for every remote task).
        if pipelinePrefix?.pipeline != pipeline {
            var p = IdentityHasher()
            p.string(pipeline)
            pipelinePrefix = (pipeline, p)
        }
        var h = pipelinePrefix!.hasher
        if let text = self[id]?.text {
            h.string(text)
        } else {
            h.string("task")
            h.word(UInt64(id))
        }
        return TaskIdentity.hex(h.finish())
    }

    /// Pushes `id`'s value in the registry table `table` (nil when none).
    private static func pushSlot(_ L: OpaquePointer, _ table: Int32, _ id: TaskID) {
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(table))
        if lua_type(L, -1) == LUA_TTABLE {
            lua_rawgeti(L, -1, lua_Integer(id))
        } else {
            lua_pushnil(L)
        }
        tasker_remove(L, -2)
    }
}

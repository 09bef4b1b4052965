import CLua
import CLuaShim
import TaskerCore

/// Reads a task spec (a function, or a table as the README's Tasks section has it) with raw
/// access, validating every field; the Lua parts (body, args, tags,
/// retry predicate) are stored by id once the task exists.
struct ParsedSpec {
    var spec: TaskSpec
    /// Stack indices of the Lua parts (0 = absent).
    var body: Int32 = 0
    var args: Int32 = 0
    var tags: Int32 = 0
    var predicate: Int32 = 0
    /// `spec.id`: names the task across runs (resume).
    var explicitID: String?
}

enum SpecError: Error {
    case usage(String)
}

struct SpecReader {
    let runtime: LuaRuntime
    let L: OpaquePointer
    /// The API function, for messages ("tasker.add").
    let function: String

    /// A spec table's fields, in the order they are checked (the first bad
    /// one is the one reported).
    static let fieldOrder = ["run", "name", "args", "tags", "priority", "timeout", "retry",
                             "after", "when", "start", "delay", "key", "id"]
    static let fields = Set(fieldOrder)
    static let retryFieldOrder = ["attempts", "delay", "backoff", "factor", "max_delay", "jitter", "when"]
    static let retryFields = Set(retryFieldOrder)

    func read(_ index: Int32, argument: Int32) throws(SpecError) -> ParsedSpec {
        let i = lua_absindex(L, index)
        _ = lua_checkstack(L, 48)  // the fields read stay on the stack until committed
        switch lua_type(L, i) {
        case LUA_TFUNCTION:
            var p = ParsedSpec(spec: TaskSpec(body: runtime.taskBody))
            p.body = i
            return p
        case LUA_TTABLE:
            return try readTable(i)
        default:
            throw .usage("bad argument #\(argument) to '\(function)' (function or table expected, got \(LuaStack(L).got(i, expected: "function or table")))")
        }
    }

    private func fieldError(_ name: String, _ expected: String, _ i: Int32) -> SpecError {
        .usage("bad field '\(name)' in '\(function)' spec (\(expected) expected, got \(LuaStack(L).got(i, expected: expected)))")
    }

    /// The stack indices of a table's fields, by their place in the keys
    /// read (absent ones: a nil).
    typealias Fields = InlineArray<16, Int32>

    /// Reads table `t` in one pass, leaving each field's value on the
    /// stack: a key that is not among `keys` (and `allowed`, when it
    /// narrows them) is an error naming the known ones.
    private func fields(_ t: Int32, _ keys: InternedKeys, allowed: Set<String>, what: String) throws(SpecError) -> Fields {
        lua_pushnil(L)
        var at = Fields(repeating: lua_gettop(L))
        lua_pushnil(L)
        while lua_next(L, t) != 0 {  // …, key, value
            guard let k = keys.index(ofKeyAt: -2, in: L), allowed.count == keys.names.count || allowed.contains(keys.names[k]) else {
                let shown = LuaStack(L).string(-2).map { "'\($0)'" } ?? "of type \(LuaStack(L).typeName(-2))"
                tasker_pop(L, 2)
                throw .usage("unknown field \(shown) in '\(function)' \(what) (known: \(allowed.sorted().joined(separator: ", ")))")
            }
            lua_rotate(L, -2, 1)  // …, value, key: the value stays
            at[k] = lua_gettop(L) - 1
        }
        return at
    }

    private func readTable(_ t: Int32) throws(SpecError) -> ParsedSpec {
        let f = try fields(t, runtime.specKeys(L), allowed: Self.fields, what: "spec")
        let s = LuaStack(L)
        var p = ParsedSpec(spec: TaskSpec(body: runtime.taskBody))

        let run = f[0]
        guard s.type(run) == LUA_TFUNCTION else { throw fieldError("run", "function", run) }
        p.body = run

        let name = f[1]
        if !s.isNoneOrNil(name) {
            guard let v = s.string(name) else { throw fieldError("name", "string", name) }
            p.spec.name = v
        }
        let args = f[2]
        if !s.isNoneOrNil(args) {
            guard s.type(args) == LUA_TTABLE else { throw fieldError("args", "table", args) }
            p.args = args
        }
        let tags = f[3]
        if !s.isNoneOrNil(tags) {
            guard s.type(tags) == LUA_TTABLE, s.notAListOfStrings(tags) == nil else { throw fieldError("tags", "list of strings", tags) }
            p.tags = tags
        }
        let priority = f[4]
        if !s.isNoneOrNil(priority) {
            guard let v = s.integer(priority) else { throw fieldError("priority", "integer", priority) }
            p.spec.priority = v
        }
        let timeout = f[5]
        if !s.isNoneOrNil(timeout) {
            guard let v = s.number(timeout), v > 0, v.isFinite else { throw fieldError("timeout", "positive number", timeout) }
            p.spec.timeout = v
        }
        let retry = f[6]
        if !s.isNoneOrNil(retry) {
            guard s.type(retry) == LUA_TTABLE else { throw fieldError("retry", "table", retry) }
            try readRetry(retry, into: &p)
        }
        let after = f[7]
        if !s.isNoneOrNil(after) {
            guard let ids = runtime.handleList(L, after, allowSingle: true) else {
                throw fieldError("after", "handle or list of handles", after)
            }
            p.spec.after = ids
        }
        let when = f[8]
        if !s.isNoneOrNil(when) {
            guard let v = s.string(when), let c = DependencyCondition(rawValue: v) else {
                throw .usage("bad field 'when' in '\(function)' spec (\"success\", \"failure\" or \"always\" expected, got \(s.string(when).map { "\"\($0)\"" } ?? s.typeName(when)))")
            }
            p.spec.when = c
        }
        let start = f[9]
        if !s.isNoneOrNil(start) {
            guard s.type(start) == LUA_TBOOLEAN else { throw fieldError("start", "boolean", start) }
            p.spec.start = s.boolean(start)
        }
        let delay = f[10]
        if !s.isNoneOrNil(delay) {
            guard let v = s.number(delay), v >= 0, v.isFinite else { throw fieldError("delay", "non-negative number", delay) }
            p.spec.delay = v
        }
        let key = f[11]
        if !s.isNoneOrNil(key) {
            guard let v = s.string(key) else { throw fieldError("key", "string", key) }
            p.spec.key = v
        }
        let id = f[12]
        if !s.isNoneOrNil(id) {
            guard s.type(id) == LUA_TSTRING, let v = s.string(id), !v.isEmpty else { throw fieldError("id", "non-empty string", id) }
            p.explicitID = v
        }
        return p
    }

    private func readRetry(_ t: Int32, into p: inout ParsedSpec) throws(SpecError) {
        let (policy, when) = try readRetryPolicy(t, base: RetryPolicy(attempts: 1), allowed: Self.retryFields)
        p.predicate = when
        p.spec.retry = policy
    }

    /// Reads a retry table over `base`; returns the policy and the stack
    /// index of its `when` function (0 if none).
    func readRetryPolicy(_ t: Int32, base: RetryPolicy, allowed: Set<String>) throws(SpecError) -> (RetryPolicy, Int32) {
        let f = try fields(t, runtime.retryKeys(L), allowed: allowed, what: "retry table")
        // by place in `retryFieldOrder`
        let (attempts, delay, backoff, factor, maxDelay, jitter, when) = (f[0], f[1], f[2], f[3], f[4], f[5], f[6])
        let s = LuaStack(L)
        var r = base
        func number(_ name: String, _ i: Int32, min: Double) throws(SpecError) -> Double? {
            if s.isNoneOrNil(i) { return nil }
            guard let v = s.number(i), v >= min, v.isFinite else {
                throw fieldError("retry.\(name)", min > 0 ? "positive number" : "non-negative number", i)
            }
            return v
        }
        if !s.isNoneOrNil(attempts) {
            guard let v = s.integer(attempts), v >= 1 else { throw fieldError("retry.attempts", "integer >= 1", attempts) }
            r.attempts = v
        }
        if let v = try number("delay", delay, min: 0) { r.delay = v }
        if let v = try number("factor", factor, min: Double.leastNonzeroMagnitude) { r.factor = v }
        if let v = try number("max_delay", maxDelay, min: 0) { r.maxDelay = v }
        if !s.isNoneOrNil(backoff) {
            guard let v = s.string(backoff), let b = RetryPolicy.Backoff(rawValue: v) else {
                throw fieldError("retry.backoff", "\"exponential\" or \"fixed\"", backoff)
            }
            r.backoff = b
        }
        if !s.isNoneOrNil(jitter) {
            guard s.type(jitter) == LUA_TBOOLEAN else { throw fieldError("retry.jitter", "boolean", jitter) }
            r.jitter = s.boolean(jitter)
        }
        var predicate: Int32 = 0
        if allowed.contains("when") {
            if !s.isNoneOrNil(when) {
                guard s.type(when) == LUA_TFUNCTION else { throw fieldError("retry.when", "function", when) }
                predicate = when
            }
        }
        return (r, predicate)
    }
}

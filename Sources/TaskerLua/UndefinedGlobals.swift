import Foundation
import TaskerCore

/// `tasker check`'s warnings about reads of globals nothing sets: `after =
/// biuld` (a typo) is nil, and a nil `after` is no dependency at all, so the
/// mistake only shows as a wrong order. A resolver over the source's tokens
/// (the file compiles first, so they are valid Lua), as luacheck does:
/// locals, parameters and loop variables by block, the rest globals. A
/// global counts as set when the file (or a file it requires or dofiles by
/// a literal name) assigns it anywhere, or a fresh runtime has it.
///
/// Where it cannot be sure it stays quiet rather than warn: `local x = x`
/// and a `repeat` body's locals in its `until` count as known.
public enum UndefinedGlobals {
    public struct Finding: Equatable, Sendable {
        public let line: Int
        public let name: String
        public let suggestion: String?
        /// What the name is in plain Lua and what tasker has instead.
        public let note: String?
    }

    static let notes = ["arg": "the script's arguments are tasker.args"]

    /// The globals of a fresh runtime (Lua's libraries and tasker's).
    public static func runtimeGlobals() -> Set<String> {
        var names = Set(UnknownFields.moduleFields().keys)
        let loop = EventLoop()
        loop.run {
            if let rt = try? LuaRuntime(loop: loop, options: .init()) { names.formUnion(rt.globalTableKeys(["_G"])["_G"] ?? []) }
            loop.stop()
        }
        return names.union(["_ENV", "_G"])
    }

    /// Reads of globals in `source` that nothing sets. `path` finds the
    /// files it requires (beside it) for the globals they set.
    public static func scan(_ source: String, path: String, known: Set<String>) -> [Finding] {
        let use = Resolver(LuaTokens(source).all()).run()
        var defined = known.union(use.writes)
        var seen = Set<String>()
        for file in requiredFiles(source, from: path) {
            defined.formUnion(definitions(of: file, seen: &seen))
        }
        // names by length: a suggestion is within two edits, so only
        // names within two characters of the length are compared
        var byLength: [Int: [String]] = [:]
        for n in defined.union(use.locals) { byLength[n.count, default: []].append(n) }
        var suggestions: [String: String?] = [:]
        var findings: [Finding] = []
        var reported = Set<String>()
        for r in use.reads where !defined.contains(r.name) && reported.insert("\(r.line):\(r.name)").inserted {
            let outOfScope = use.locals.contains(r.name) ? "a local '\(r.name)' is declared in another block, not seen here" : nil
            // a file of thousands of misses gets suggestions for the first ones only
            if suggestions[r.name] == nil && suggestions.count < Self.suggested {
                suggestions[r.name] = Self.nearest(r.name, byLength)
            }
            findings.append(Finding(line: r.line, name: r.name, suggestion: suggestions[r.name] ?? nil,
                                    note: Self.notes[r.name] ?? outOfScope))
        }
        return findings
    }

    /// Names that get a suggestion; past them, the warnings alone.
    static let suggested = 30

    /// The name within two edits of `name` (not itself), the nearest, ties
    /// by order; nil if none.
    static func nearest(_ name: String, _ byLength: [Int: [String]]) -> String? {
        var best: (String, Int)?
        for length in max(1, name.count - 2)...(name.count + 2) {
            for candidate in byLength[length] ?? [] where candidate != name {
                let d = UnknownFields.distance(name, candidate)
                if d <= 2, best.map({ d < $0.1 || (d == $0.1 && candidate < $0.0) }) ?? true { best = (candidate, d) }
            }
        }
        return best?.0
    }

    /// The globals `file` sets, and those set by the files it requires.
    private static func definitions(of file: String, seen: inout Set<String>) -> Set<String> {
        guard seen.insert(file).inserted, let data = FileManager.default.contents(atPath: file) else { return [] }
        let source = String(decoding: data, as: UTF8.self)
        var out = Resolver(LuaTokens(source).all()).run().writes
        for f in requiredFiles(source, from: file) { out.formUnion(definitions(of: f, seen: &seen)) }
        return out
    }

    /// Files named by a literal in `require "x"`, `require("x")`,
    /// `dofile("x")`: a module beside the pipeline (`x.lua`, `x/init.lua`,
    /// dots as directories), a dofile path from the current directory or
    /// the pipeline's.
    static func requiredFiles(_ source: String, from path: String) -> [String] {
        let dir = (path as NSString).deletingLastPathComponent
        let pattern = #"\b(require|dofile)\s*\(?\s*["']([^"'\n]+)["']"#
        guard let re = try? NSRegularExpression(pattern: pattern) else { return [] }
        let ns = source as NSString
        var files: [String] = []
        for m in re.matches(in: source, range: NSRange(location: 0, length: ns.length)) {
            let call = ns.substring(with: m.range(at: 1)), name = ns.substring(with: m.range(at: 2))
            let tries: [String]
            if call == "require" {
                let rel = name.replacingOccurrences(of: ".", with: "/")
                tries = [rel + ".lua", rel + "/init.lua"].map { dir.isEmpty ? $0 : dir + "/" + $0 }
            } else {
                tries = [name] + (name.hasPrefix("/") || dir.isEmpty ? [] : [dir + "/" + name])
            }
            if let found = tries.first(where: { FileManager.default.isReadableFile(atPath: $0) }) { files.append(found) }
        }
        return files
    }
}

/// Walks tokens with a stack of blocks, each with its locals: what is read
/// and set as a global, and every local name (for suggestions).
private struct Resolver {
    struct Read { let name: String; let line: Int }

    private let tokens: [LuaToken]
    private var blocks: [(names: Set<String>, brackets: [String])] = [([], [])]
    /// A `for` declared its variables; its `do` opens no block of its own.
    private var forPending = false
    private(set) var reads: [Read] = []
    private(set) var writes = Set<String>()
    private(set) var locals = Set<String>()

    init(_ tokens: [LuaToken]) { self.tokens = tokens }

    private func text(_ k: Int) -> String { k >= 0 && k < tokens.count ? tokens[k].text : "" }
    private func isName(_ k: Int) -> Bool { k >= 0 && k < tokens.count && tokens[k].isName }
    private func isLocal(_ name: String) -> Bool { blocks.contains { $0.names.contains(name) } }

    private mutating func declare(_ name: String) {
        blocks[blocks.count - 1].names.insert(name)
        locals.insert(name)
    }

    private mutating func open(freshBrackets: Bool = false) {
        blocks.append(([], freshBrackets ? [] : blocks.last?.brackets ?? []))
    }

    private mutating func close() {
        if blocks.count > 1 { blocks.removeLast() }
    }

    private mutating func read(_ k: Int) {
        if !isLocal(tokens[k].text) { reads.append(Read(name: tokens[k].text, line: tokens[k].line)) }
    }

    consuming func run() -> (reads: [Read], writes: Set<String>, locals: Set<String>) {
        var k = 0
        while k < tokens.count { k = step(k) }
        return (reads, writes, locals)
    }

    /// Handles the token at `k`; returns the next one to look at.
    private mutating func step(_ k: Int) -> Int {
        switch text(k) {
        case "local":
            if text(k + 1) == "function" {
                if isName(k + 2) { declare(text(k + 2)) }
                return k + 1
            }
            var j = k + 1
            while isName(j) {
                declare(text(j))
                j += 1
                if text(j) == "<" { j += 3 }  // <const>, <close>
                guard text(j) == "," else { break }
                j += 1
            }
            return j
        case "function":
            return function(at: k)
        case "for":
            open()
            forPending = true
            var j = k + 1
            while isName(j) || text(j) == "," {
                if isName(j) { declare(text(j)) }
                j += 1
            }
            return j
        case "do":
            if forPending { forPending = false } else { open() }
        case "then", "repeat":
            open()
        case "elseif":
            close()
        case "else":
            close()
            open()
        case "end":
            close()
        case "until":
            // the body's locals stay visible in the condition: kept
            if blocks.count > 1 {
                let body = blocks.removeLast()
                blocks[blocks.count - 1].names.formUnion(body.names)
            }
        case "goto":
            return k + 2
        case "::":
            return k + 3
        case "(", "{", "[":
            blocks[blocks.count - 1].brackets.append(text(k))
        case ")", "}", "]":
            _ = blocks[blocks.count - 1].brackets.popLast()
        default:
            if isName(k) { return name(at: k) }
        }
        return k + 1
    }

    /// `function name.path:method(params) … end` or `function(params)`:
    /// a named one sets a global unless its name is local.
    private mutating func function(at k: Int) -> Int {
        var j = k + 1
        var method = false
        if isName(j) {
            if text(j + 1) == "." || text(j + 1) == ":" {
                read(j)
            } else if !isLocal(text(j)) {
                writes.insert(text(j))
            }
            j += 1
            while text(j) == "." || text(j) == ":" {
                if text(j) == ":" { method = true }
                j += 2
            }
        }
        open(freshBrackets: true)
        if method { declare("self") }
        guard text(j) == "(" else { return j }
        j += 1
        while j < tokens.count && text(j) != ")" {
            if isName(j) { declare(text(j)) }
            j += 1
        }
        return j + 1
    }

    /// Whether the tokens from `k` are a list of assignment targets (names
    /// with `.name` and `[…]` suffixes, separated by commas) followed by `=`.
    private func endsInAssignment(from k: Int) -> Bool {
        var j = k
        while isName(j) {
            j += 1
            while true {
                if text(j) == ".", isName(j + 1) {
                    j += 2
                } else if text(j) == "[" {
                    var depth = 0
                    repeat {
                        if text(j) == "[" { depth += 1 } else if text(j) == "]" { depth -= 1 }
                        j += 1
                    } while depth > 0 && j < tokens.count
                } else {
                    break
                }
            }
            if text(j) == "=" { return true }
            guard text(j) == "," else { return false }
            j += 1
        }
        return false
    }

    /// A name that is not a keyword: a field, a table key, the targets of
    /// an assignment, or a read.
    private mutating func name(at k: Int) -> Int {
        let before = text(k - 1)
        if before == "." || before == ":" { return k + 1 }
        let brackets = blocks[blocks.count - 1].brackets
        if brackets.last == "{", text(k + 1) == "=", ["{", ",", ";"].contains(before) { return k + 1 }  // {key = …}
        if brackets.isEmpty {
            // `a = …`, `a, b.c, t[i] = …`: a bare name among the targets is
            // set (a global unless local); `b` of `b.c` is read, as it is
            if ["=", ","].contains(text(k + 1)), endsInAssignment(from: k) {
                if !isLocal(text(k)) { writes.insert(text(k)) }
                return k + 1
            }
            // `_G.name = …` sets a global too
            if text(k) == "_G", text(k + 1) == ".", isName(k + 2), text(k + 3) == "=" {
                writes.insert(text(k + 2))
                return k + 4
            }
        }
        read(k)
        return k + 1
    }
}

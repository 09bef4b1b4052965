import CLua
import CLuaShim
import Foundation
import TaskerCore

/// `tasker check`'s warnings about fields of tasker's own modules that do
/// not exist (`tasker.shell`, `fs.rea`): a misspelt call is nil only when
/// it runs, maybe an hour into a pipeline. A scan of the source's tokens
/// (strings and comments skipped), not an evaluation: `M.name` where `M`
/// is one of the modules as a global (not a field of something else, not a
/// local or a parameter of that name anywhere in the file) and `name` is
/// neither a field of it nor assigned by the script (`tasker.helper = …`).
public enum UnknownFields {
    public struct Finding: Equatable, Sendable {
        public let line: Int
        public let module: String
        public let field: String
        public let suggestion: String?
    }

    /// The fields of each module in a fresh runtime (what a script sees),
    /// plus those set when a pipeline starts.
    public static func moduleFields() -> [String: Set<String>] {
        var fields: [String: Set<String>] = [:]
        let loop = EventLoop()
        loop.run {
            if let rt = try? LuaRuntime(loop: loop, options: .init()) {
                fields = rt.globalTableKeys(["tasker", "fs", "http", "json", "log"])
            }
            loop.stop()
        }
        fields["tasker", default: []].insert("script_dir")  // set by `start(path:)`
        return fields
    }

    public static func scan(_ source: String, modules: [String: Set<String>]) -> [Finding] {
        let tokens = LuaTokens(source).all()
        // `local fs`, `local a, fs`, `for _, fs in`, `function(x, fs)`,
        // `function fs()`: that name is not the module in this file
        var shadowed = Set<String>()
        for (k, t) in tokens.enumerated() where modules[t.text] != nil {
            if (k > 0 && tokens[k - 1].text == "function") || isDeclarationList(tokens, at: k) { shadowed.insert(t.text) }
        }
        var known = modules
        var findings: [Finding] = []
        for k in tokens.indices {
            let m = tokens[k].text
            guard known[m] != nil, !shadowed.contains(m), k + 2 < tokens.count,
                  tokens[k + 1].text == ".", tokens[k + 2].isName else { continue }
            if k > 0, [".", ":"].contains(tokens[k - 1].text) { continue }
            let field = tokens[k + 2].text
            if k + 3 < tokens.count, tokens[k + 3].text == "=" {
                known[m]!.insert(field)  // the script adds it
                continue
            }
            guard !known[m]!.contains(field) else { continue }
            findings.append(Finding(line: tokens[k + 2].line, module: m, field: field,
                                    suggestion: closest(field, in: known[m]!)))
        }
        return findings
    }

    /// Whether the name at `k` is in a declaration list: after `local` or
    /// `for` (through commas), or in a `function(...)` parameter list.
    private static func isDeclarationList(_ tokens: [LuaToken], at k: Int) -> Bool {
        var j = k - 1
        while j >= 1, tokens[j].text == ",", tokens[j - 1].isName { j -= 2 }
        guard j >= 0 else { return false }
        if tokens[j].text == "local" || tokens[j].text == "for" { return true }
        if tokens[j].text == "(" {
            // `function (`, `function name(`, `function a.b:c(`
            var i = j - 1
            while i >= 0, tokens[i].isName || tokens[i].text == "." || tokens[i].text == ":" {
                if tokens[i].text == "function" { return true }
                i -= 1
            }
            return i >= 0 && tokens[i].text == "function"
        }
        return false
    }

    /// A known name within two edits, the nearest; else one that starts
    /// the other (`shell` → `sh`).
    static func closest(_ name: String, in names: Set<String>) -> String? {
        var best: (String, Int)?
        for n in names.sorted() {
            let d = distance(name, n)
            if d <= 2, d < (best?.1 ?? .max) { best = (n, d) }
        }
        if let best { return best.0 }
        return names.sorted().first { $0.count >= 2 && (name.hasPrefix($0) || $0.hasPrefix(name)) }
    }

    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var row = Array(0...b.count)
        for i in 1...max(1, a.count) where !a.isEmpty {
            var prev = row[0]
            row[0] = i
            for j in 1...max(1, b.count) where !b.isEmpty {
                let old = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1))
                prev = old
            }
        }
        return a.isEmpty ? b.count : (b.isEmpty ? a.count : row[b.count])
    }
}

struct LuaToken {
    let text: String
    let line: Int
    var isName: Bool {
        guard let f = text.unicodeScalars.first else { return false }
        return (f == "_" || CharacterSet.letters.contains(f)) && !LuaTokens.keywords.contains(text)
    }
}

/// Names and punctuation of Lua source with their lines; strings, long
/// strings, numbers and comments are skipped.
struct LuaTokens {
    static let keywords: Set<String> = ["and", "break", "do", "else", "elseif", "end", "false", "for", "function",
                                        "goto", "if", "in", "local", "nil", "not", "or", "repeat", "return", "then",
                                        "true", "until", "while"]
    private let s: [UInt8]
    private var i = 0
    private var line = 1

    init(_ source: String) { s = Array(source.utf8) }

    func all() -> [LuaToken] {
        var me = self
        var out: [LuaToken] = []
        while let t = me.next() { out.append(t) }
        return out
    }

    private func at(_ k: Int) -> UInt8 { k < s.count ? s[k] : 0 }

    private mutating func next() -> LuaToken? {
        while i < s.count {
            let c = s[i]
            if c == UInt8(ascii: "\n") { line += 1; i += 1; continue }
            if c == 32 || c == 9 || c == 13 { i += 1; continue }
            if c == UInt8(ascii: "-") && at(i + 1) == UInt8(ascii: "-") {
                i += 2
                if let level = longBracket() { skipLong(level) } else { while i < s.count && s[i] != 10 { i += 1 } }
                continue
            }
            if c == UInt8(ascii: "\"") || c == UInt8(ascii: "'") { skipString(c); continue }
            if c == UInt8(ascii: "["), let level = longBracket() { skipLong(level); continue }
            if isNameStart(c) {
                let start = i
                while i < s.count && (isNameStart(s[i]) || (s[i] >= 48 && s[i] <= 57)) { i += 1 }
                return LuaToken(text: String(decoding: s[start..<i], as: UTF8.self), line: line)
            }
            if c >= 48 && c <= 57 || (c == UInt8(ascii: ".") && at(i + 1) >= 48 && at(i + 1) <= 57) {
                while i < s.count && (isNameStart(s[i]) || (s[i] >= 48 && s[i] <= 57) || s[i] == UInt8(ascii: ".")
                                      || ((s[i] == UInt8(ascii: "+") || s[i] == UInt8(ascii: "-"))
                                          && (s[i - 1] | 0x20) == UInt8(ascii: "e"))) { i += 1 }
                continue
            }
            // `..` and `...` are one token; `==` too (an assignment is a lone `=`)
            var len = 1
            if c == UInt8(ascii: ".") && at(i + 1) == UInt8(ascii: ".") { len = at(i + 2) == UInt8(ascii: ".") ? 3 : 2 }
            if (c == UInt8(ascii: "=") || c == UInt8(ascii: "~") || c == UInt8(ascii: "<") || c == UInt8(ascii: ">"))
                && at(i + 1) == UInt8(ascii: "=") { len = 2 }
            let t = LuaToken(text: String(decoding: s[i..<min(s.count, i + len)], as: UTF8.self), line: line)
            i += len
            return t
        }
        return nil
    }

    private func isNameStart(_ c: UInt8) -> Bool {
        (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c == 95 || c >= 0x80
    }

    /// At `[` (or after `--`): the level of a long bracket `[==[`, moving
    /// past it; nil (not moving) when there is none.
    private mutating func longBracket() -> Int? {
        guard at(i) == UInt8(ascii: "[") else { return nil }
        var j = i + 1, level = 0
        while at(j) == UInt8(ascii: "=") { level += 1; j += 1 }
        guard at(j) == UInt8(ascii: "[") else { return nil }
        i = j + 1
        return level
    }

    private mutating func skipLong(_ level: Int) {
        while i < s.count {
            if s[i] == 10 { line += 1 }
            if s[i] == UInt8(ascii: "]") {
                var j = i + 1, l = 0
                while at(j) == UInt8(ascii: "=") { l += 1; j += 1 }
                if l == level && at(j) == UInt8(ascii: "]") { i = j + 1; return }
            }
            i += 1
        }
    }

    private mutating func skipString(_ quote: UInt8) {
        i += 1
        while i < s.count && s[i] != quote {
            if s[i] == 10 { line += 1 }
            if s[i] == UInt8(ascii: "\\") {
                i += 1
                if at(i) == 10 { line += 1 }
            }
            i += 1
        }
        i += 1
    }
}

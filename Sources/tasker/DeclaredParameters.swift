/// The parameters a pipeline declares, read from its text before it runs:
/// `tasker.param{… name = "x" …}` (with `secret = true` for the secret
/// ones) and `tasker.secret(…, {param = "x"})`. A scan of bytes, not a
/// regular expression: compiling one loads ICU's Unicode sets, about a
/// millisecond and a half of every `tasker run`. Declarations' tables are
/// found as Lua reads the file (strings and comments skipped, nested
/// tables matched), in one pass.
///
/// It errs towards finding more: every `name = "…"` of a declaration
/// counts (not only the first, which text in a help string could be), a
/// call never closed runs to the end of the file, and any Unicode space
/// is a space. A name too many masks a value that needed none or lets a
/// word after FILE through as the pipeline's; a name missed would record
/// a secret.
struct DeclaredParameters {
    private let s: [UInt8]

    init(source: [UInt8]) { s = source }

    /// Names of every `tasker.param{…}`, or only of the secret ones plus
    /// the plain parameters a `tasker.secret` is taken from.
    func names(secretOnly: Bool) -> Set<String> {
        var names = Set<String>()
        // Outermost first, and a body inside one already read is not read
        // again (its names and `secret` were seen in the outer one, which
        // errs towards more): the reads stay within the file's length, where
        // 200,000 nested or unclosed declarations each read to the end of
        // the file took minutes.
        var readTo = 0
        for body in paramBodies().sorted(by: { $0.lowerBound < $1.lowerBound }) where body.lowerBound >= readTo {
            readTo = body.upperBound
            if secretOnly && !has("secret", valued: "true", in: body) { continue }
            names.formUnion(quotedNames(of: "name", in: body))
        }
        guard secretOnly else { return names }
        // `tasker.secret(…)` up to its first `)`, or the end of the file;
        // what one call's span covered is not read again for the next
        let secret = Array("tasker.secret".utf8)
        var read = 0
        var i = 0
        while let at = find(secret, from: i) {
            i = at + secret.count
            let open = skipSpaces(i)
            guard open < s.count, s[open] == UInt8(ascii: "(") else { continue }
            // inside the last span, its `)` is this call's too (no search
            // again to the same `)`: a file of unclosed calls stays linear)
            let close = open < read ? read : s[(open + 1)...].firstIndex(of: UInt8(ascii: ")")) ?? s.count
            let from = max(open + 1, read)
            if from < close { names.formUnion(quotedNames(of: "param", in: from..<close)) }
            read = max(read, close)
        }
        return names
    }

    /// Where each `tasker.secret("NAME", {env = "VAR", file = "path"})`
    /// whose names are written out takes its value from, as the call
    /// does: the environment variable `env`, or `NAME` when the call has no
    /// options, and the file when one is given. A run registers those
    /// values before it records its command line, so a secret also passed
    /// on it is `***` there from the first byte.
    func secretSources() -> [(env: String?, file: String?)] {
        var out: [(env: String?, file: String?)] = []
        let secret = Array("tasker.secret".utf8)
        var i = 0
        // the last `)` found: a call inside its span ends there too (a file
        // of unclosed calls is read once, not once per call)
        var lastClose = 0
        while let at = find(secret, from: i) {
            i = at + secret.count
            let open = skipSpaces(i)
            // `tasker.secret "NAME"`, `tasker.secret[[NAME]]`: Lua's call of one string
            if open < s.count, let name = literal(at: open, before: min(s.count, open + Self.longestSecretCall))
                ?? longLiteral(at: open) {
                out.append((name, nil))
                continue
            }
            guard open < s.count, s[open] == UInt8(ascii: "(") else { continue }
            let close = open < lastClose ? lastClose : s[(open + 1)...].firstIndex(of: UInt8(ascii: ")")) ?? s.count
            lastClose = close
            // a call is short: what lies further is not one (and a file of
            // unclosed calls costs a bounded look at each)
            let end = min(close, open + 1 + Self.longestSecretCall)
            let first = skipSpaces(open + 1, before: end)
            guard let name = literal(at: first, before: end) ?? longLiteral(at: first) else { continue }
            let options = s[(open + 1)..<end].contains(UInt8(ascii: "{"))
            var env = options ? nil : name, file: String?
            forEachValue(of: "env", in: (open + 1)..<end) { j in env = literal(at: j, before: end) ?? longLiteral(at: j) ?? env }
            forEachValue(of: "file", in: (open + 1)..<end) { j in file = literal(at: j, before: end) ?? longLiteral(at: j) }
            out.append((env, file))
            i = close
        }
        return out
    }

    static let longestSecretCall = 512

    /// The table of each `tasker.param{…}` (or `tasker.param({…})`), as
    /// Lua reads the file, in one pass: braces, and declarations, in
    /// strings, long strings and comments do not count, so a `}` in a help
    /// text or a nested `choices = {…}` does not end a declaration early.
    /// One never closed runs to the end of the file.
    private func paramBodies() -> [Range<Int>] {
        let word = Array("tasker.param".utf8)
        var bodies: [Range<Int>] = []
        var open: [(at: Int, isParam: Bool)] = []
        var paramBrace = -1  // where the `{` of the declaration just read is
        var i = 0
        // a first line starting with `#` (`#!/usr/bin/env tasker`) is not Lua
        if s.first == UInt8(ascii: "#") { while i < s.count, !isLineBreak(s[i]) { i += 1 } }
        while i < s.count {
            switch s[i] {
            case UInt8(ascii: "{"):
                open.append((i, i == paramBrace))
            case UInt8(ascii: "}"):
                if let top = open.popLast(), top.isParam { bodies.append((top.at + 1)..<i) }
            case UInt8(ascii: "\""), UInt8(ascii: "'"):
                let quote = s[i]
                i += 1
                while i < s.count, s[i] != quote, !isLineBreak(s[i]) {
                    if s[i] == UInt8(ascii: "\\") {
                        i += 1
                        if i < s.count, s[i] == UInt8(ascii: "z") {
                            // `\z` skips the spaces and line breaks after it
                            while i + 1 < s.count, s[i + 1] == 32 || (s[i + 1] >= 9 && s[i + 1] <= 13) { i += 1 }
                        } else if i + 1 < s.count, isLineBreak(s[i]), isLineBreak(s[i + 1]), s[i] != s[i + 1] {
                            i += 1  // an escaped CR LF (or LF CR) is one line break
                        }
                    }
                    i += 1
                }
            case UInt8(ascii: "["):
                if let end = longBracketEnd(at: i) { i = end - 1 }
            case UInt8(ascii: "-") where i + 1 < s.count && s[i + 1] == UInt8(ascii: "-"):
                if let end = longBracketEnd(at: i + 2) {
                    i = end - 1
                } else {
                    while i + 1 < s.count, !isLineBreak(s[i + 1]) { i += 1 }
                }
            case UInt8(ascii: "t") where i + word.count <= s.count && s[i..<(i + word.count)].elementsEqual(word)
                                          && (i == 0 || !(isNameStart(s[i - 1]) || isDigit(s[i - 1]))):
                var j = skipSpaces(i + word.count)
                if j < s.count, s[j] == UInt8(ascii: "(") { j = skipSpaces(j + 1) }
                if j < s.count, s[j] == UInt8(ascii: "{") { paramBrace = j }
                i += word.count - 1
            default:
                break
            }
            i += 1
        }
        for top in open where top.isParam { bodies.append((top.at + 1)..<s.count) }
        return bodies
    }

    /// The long bracket (`[[`, `[==[`) that opens at `j`: where its content
    /// starts and the bytes that close it; nil if none opens there.
    private func longBracket(at j: Int) -> (content: Int, close: [UInt8])? {
        guard j < s.count, s[j] == UInt8(ascii: "[") else { return nil }
        var k = j + 1
        while k < s.count, s[k] == UInt8(ascii: "=") { k += 1 }
        guard k < s.count, s[k] == UInt8(ascii: "[") else { return nil }
        return (k + 1, [UInt8(ascii: "]")] + Array(repeating: UInt8(ascii: "="), count: k - j - 1) + [UInt8(ascii: "]")])
    }

    /// One past the end of the long bracket that opens at `j`; nil if none
    /// opens there. Unclosed: the end of the file.
    private func longBracketEnd(at j: Int) -> Int? {
        guard let (content, close) = longBracket(at: j) else { return nil }
        return find(close, from: content).map { $0 + close.count } ?? s.count
    }

    /// `[[…]]` or `[==[…]==]` at `j`, short and on one line.
    private func longLiteral(at j: Int) -> String? {
        guard let (content, close) = longBracket(at: j) else { return nil }
        let end = min(s.count, j + Self.longestSecretCall)
        guard let at = find(close, from: content, before: end), at > content,
              !s[content..<at].contains(where: isLineBreak) else { return nil }
        return String(decoding: s[content..<at], as: UTF8.self)
    }

    /// The string literal (double or single quotes, no escapes) at `j`.
    private func literal(at j: Int, before end: Int) -> String? {
        guard j < end, s[j] == UInt8(ascii: "\"") || s[j] == UInt8(ascii: "'") else { return nil }
        guard let q = s[(j + 1)..<end].firstIndex(of: s[j]), q > j + 1,
              !s[(j + 1)..<q].contains(UInt8(ascii: "\\")) else { return nil }
        return String(decoding: s[(j + 1)..<q], as: UTF8.self)
    }

    /// Every `key = "value"` (or single quotes) in `body`, `key` not the
    /// end of a longer word and the value a name: a letter or `_`, then
    /// letters, digits, `_`, `-` (any non-ASCII character counts as a letter).
    private func quotedNames(of key: String, in body: Range<Int>) -> [String] {
        var out: [String] = []
        forEachValue(of: key, in: body) { j in
            guard j < body.upperBound, s[j] == UInt8(ascii: "\"") || s[j] == UInt8(ascii: "'"),
                  j + 1 < body.upperBound, isNameStart(s[j + 1]) || s[j + 1] >= 0x80 else { return }
            let start = j + 1
            var k = start + 1
            while k < body.upperBound, isNameStart(s[k]) || isDigit(s[k]) || s[k] == UInt8(ascii: "-") || s[k] >= 0x80 {
                k += 1
            }
            guard k < body.upperBound, s[k] == UInt8(ascii: "\"") || s[k] == UInt8(ascii: "'") else { return }
            out.append(String(decoding: s[start..<k], as: UTF8.self))
        }
        return out
    }

    /// Whether `key = value` is in `body`, `key` not the end of a longer word.
    private func has(_ key: String, valued value: String, in body: Range<Int>) -> Bool {
        let v = Array(value.utf8)
        var found = false
        forEachValue(of: key, in: body) { j in
            if j + v.count <= body.upperBound, s[j..<(j + v.count)].elementsEqual(v) { found = true }
        }
        return found
    }

    /// Calls `value` with where the value of each `key =` in `body` starts.
    private func forEachValue(of key: String, in body: Range<Int>, _ value: (Int) -> Void) {
        let word = Array(key.utf8)
        var i = body.lowerBound
        while let at = find(word, from: i, before: body.upperBound) {
            i = at + 1
            // a letter, digit or `_` before it: the end of another word
            // (a non-ASCII one is taken as a boundary: erring towards more)
            if at > 0, isNameStart(s[at - 1]) || isDigit(s[at - 1]) { continue }
            var j = skipSpaces(at + word.count, before: body.upperBound)
            guard j < body.upperBound, s[j] == UInt8(ascii: "=") else { continue }
            j = skipSpaces(j + 1, before: body.upperBound)
            value(j)
        }
    }

    private func find(_ word: [UInt8], from: Int, before end: Int? = nil) -> Int? {
        let end = end ?? s.count
        guard let first = word.first, from + word.count <= end else { return nil }
        var i = from
        while i + word.count <= end {
            if s[i] == first, s[i..<(i + word.count)].elementsEqual(word) { return i }
            i += 1
        }
        return nil
    }

    /// Past ASCII spaces and any Unicode space (U+00A0, U+2003…).
    private func skipSpaces(_ from: Int, before end: Int? = nil) -> Int {
        let end = end ?? s.count
        var i = from
        while i < end {
            if s[i] == 32 || (s[i] >= 9 && s[i] <= 13) {
                i += 1
            } else if s[i] >= 0x80, let (scalar, length) = scalar(at: i, before: end), scalar.properties.isWhitespace {
                i += length
            } else {
                break
            }
        }
        return i
    }

    /// The UTF-8 character starting at `i`, and its length in bytes.
    private func scalar(at i: Int, before end: Int) -> (Unicode.Scalar, Int)? {
        let lead = s[i]
        let length = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 0
        guard length > 0, i + length <= end else { return nil }
        var value = UInt32(lead) & (0xFF >> (length + 1))
        for k in 1..<length {
            guard s[i + k] & 0xC0 == 0x80 else { return nil }
            value = value << 6 | UInt32(s[i + k] & 0x3F)
        }
        return Unicode.Scalar(value).map { ($0, length) }
    }

    /// Lua ends a line (a comment, a short string) at CR as at LF.
    private func isLineBreak(_ c: UInt8) -> Bool { c == 10 || c == 13 }

    private func isNameStart(_ c: UInt8) -> Bool { (c | 0x20) >= 97 && (c | 0x20) <= 122 || c == 95 }
    private func isDigit(_ c: UInt8) -> Bool { c >= 48 && c <= 57 }
}

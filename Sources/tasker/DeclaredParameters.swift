/// The parameters a pipeline declares, read from its text before it runs:
/// `tasker.param{… name = "x" …}` (with `secret = true` for the secret
/// ones) and `tasker.secret(…, {param = "x"})`. A scan of bytes, not a
/// regular expression: compiling one loads ICU's Unicode sets, about a
/// millisecond and a half of every `tasker run`.
struct DeclaredParameters {
    private let s: [UInt8]

    init(source: [UInt8]) { s = source }

    /// Names of every `tasker.param{…}`, or only of the secret ones plus
    /// the plain parameters a `tasker.secret` is taken from.
    func names(secretOnly: Bool) -> Set<String> {
        var names = Set<String>()
        for body in bodies(after: "tasker.param", open: UInt8(ascii: "{"), close: UInt8(ascii: "}")) {
            if secretOnly && !hasWord("secret", followedByValue: "true", in: body) { continue }
            if let name = quotedName(of: "name", in: body) { names.insert(name) }
        }
        if secretOnly {
            for body in bodies(after: "tasker.secret", open: UInt8(ascii: "("), close: UInt8(ascii: ")")) {
                if let name = quotedName(of: "param", in: body) { names.insert(name) }
            }
        }
        return names
    }

    /// What stands between `open` and the first `close` after each `call`
    /// (spaces allowed before `open`); a call never closed has none.
    private func bodies(after call: String, open: UInt8, close: UInt8) -> [Range<Int>] {
        let word = Array(call.utf8)
        var out: [Range<Int>] = []
        var i = 0
        while let at = find(word, from: i) {
            var j = skipSpaces(at + word.count)
            i = at + word.count
            guard j < s.count, s[j] == open else { continue }
            j += 1
            guard let end = s[j...].firstIndex(of: close) else { break }
            out.append(j..<end)
            i = end + 1
        }
        return out
    }

    /// `key = "value"` (or single quotes) in `body`, `key` a whole word and
    /// the value a name (a letter or `_`, then letters, digits, `_`, `-`).
    private func quotedName(of key: String, in body: Range<Int>) -> String? {
        let word = Array(key.utf8)
        var i = body.lowerBound
        while let at = find(word, from: i, before: body.upperBound) {
            i = at + 1
            guard startsWord(at) else { continue }
            var j = skipSpaces(at + word.count, before: body.upperBound)
            guard j < body.upperBound, s[j] == UInt8(ascii: "=") else { continue }
            j = skipSpaces(j + 1, before: body.upperBound)
            guard j < body.upperBound, s[j] == UInt8(ascii: "\"") || s[j] == UInt8(ascii: "'"),
                  j + 1 < body.upperBound, isNameStart(s[j + 1]) else { continue }
            let start = j + 1
            var k = start + 1
            while k < body.upperBound, isNameStart(s[k]) || isDigit(s[k]) || s[k] == UInt8(ascii: "-") { k += 1 }
            guard k < body.upperBound, s[k] == UInt8(ascii: "\"") || s[k] == UInt8(ascii: "'") else { continue }
            return String(decoding: s[start..<k], as: UTF8.self)
        }
        return nil
    }

    /// `key = value` in `body`, `key` a whole word.
    private func hasWord(_ key: String, followedByValue value: String, in body: Range<Int>) -> Bool {
        let word = Array(key.utf8), v = Array(value.utf8)
        var i = body.lowerBound
        while let at = find(word, from: i, before: body.upperBound) {
            i = at + 1
            guard startsWord(at) else { continue }
            var j = skipSpaces(at + word.count, before: body.upperBound)
            guard j < body.upperBound, s[j] == UInt8(ascii: "=") else { continue }
            j = skipSpaces(j + 1, before: body.upperBound)
            if j + v.count <= body.upperBound, s[j..<(j + v.count)].elementsEqual(v) { return true }
        }
        return false
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

    private func skipSpaces(_ from: Int, before end: Int? = nil) -> Int {
        let end = end ?? s.count
        var i = from
        while i < end, s[i] == 32 || (s[i] >= 9 && s[i] <= 13) { i += 1 }
        return i
    }

    private func startsWord(_ i: Int) -> Bool { i == 0 || !(isNameStart(s[i - 1]) || isDigit(s[i - 1])) }
    private func isNameStart(_ c: UInt8) -> Bool { (c | 0x20) >= 97 && (c | 0x20) <= 122 || c == 95 }
    private func isDigit(_ c: UInt8) -> Bool { c >= 48 && c <= 57 }
}

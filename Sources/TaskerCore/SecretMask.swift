#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// The run's registered secrets (`tasker.secret`, a `secret = true`
/// parameter), replaced by `***` wherever tasker writes: stderr, stdout,
/// the events file, the journal. Applied where output leaves the process,
/// once, so an output added later is covered by construction. Values under
/// 4 bytes are not registered (they would mask half of every line).
///
/// Any thread: the values sit behind a lock; the common case (no secret)
/// costs one atomic load.
public final class SecretMask: Sendable {
    public static let shared = SecretMask()
    public static let minimumLength = 4
    public static let replacement: [UInt8] = Array("***".utf8)

    private struct Patterns {
        /// Longest first: a secret containing another is masked whole.
        var values: [[UInt8]] = []
        /// The values starting with each byte, longest first (indices into
        /// `values`): a candidate position is compared with those alone.
        var byFirst = [[Int]](repeating: [], count: 256)
        /// Their first four bytes (a value has at least four), in the same
        /// order: a candidate is compared as one word before its bytes.
        var prefixes = [[UInt32]](repeating: [], count: 256)

        /// Which pairs of bytes start a value (`b0 << 8 | b1`; a value has
        /// at least four): most positions of a text are ruled out by one
        /// load.
        var pairs = [Bool](repeating: false, count: 1 << 16)

        /// The values as registered, and for each form in `values` the
        /// one it is a form of.
        var registered: [String] = []
        /// Those holding a byte a URL encoder may write as `%XX` (a space,
        /// `/`, `+`, `!`…), as bytes: looked for in the percent-decoded
        /// text too, whatever case and set of escapes the encoder chose.
        var encodable: [[UInt8]] = []
        var known: Set<String> = []
        var origin: [[UInt8]: Int] = [:]
    }

    private let patterns = Mutex(Patterns())
    private let count = Atomic<Int>(0)

    public init() {}

    /// Masks `value` from now on — as it is and as outputs write it: JSON-
    /// escaped (events, JSON logs, the journal's values), escaped for a
    /// terminal line, percent-encoded (URLs), and each of its lines (an
    /// error's lines are written apart). False if it is too short.
    @discardableResult
    public func register(_ value: String) -> Bool {
        guard value.utf8.count >= Self.minimumLength else { return false }
        // again and again from a worker's jobs: once is enough
        if patterns.withLock({ $0.known.contains(value) }) { return true }
        var base = [value, TerminalText.escape(value)] + value.split(separator: "\n").map(String.init)
        for allowed in [CharacterSet.urlQueryAllowed, .urlPathAllowed, .alphanumerics] {
            // (other spellings, `%2f` or `+` for a space: `encodedMatches`)
            if let encoded = value.addingPercentEncoding(withAllowedCharacters: allowed) { base.append(encoded) }
        }
        // and each as every JSON form writes it between the quotes (`\b` or
        // `\u0008`, `/` or `\/`, …: see `JSONEscaping`)
        // — twice, too: a script's `json.encode` of the value, logged or
        // stored as JSON again, is escaped a second time.
        var forms: [String] = []
        for form in base {
            forms.append(form)
            for escaping in JSONEscaping.all {
                let once = String(escaping.quoted(form).dropFirst().dropLast())
                forms.append(once)
                guard once != form else { continue }
                for again in JSONEscaping.all { forms.append(String(again.quoted(once).dropFirst().dropLast())) }
            }
        }
        patterns.withLock { p in
            guard p.known.insert(value).inserted else { return }
            p.registered.append(value)
            let raw = Array(value.utf8)
            if raw.contains(where: { !Self.isUnreserved($0) }) { p.encodable.append(raw) }
            for form in forms {
                let bytes = Array(form.utf8)
                guard bytes.count >= Self.minimumLength, p.origin[bytes] == nil else { continue }
                p.origin[bytes] = p.registered.count - 1
                p.values.append(bytes)
                p.pairs[Int(bytes[0]) << 8 | Int(bytes[1])] = true
            }
            p.values.sort { $0.count > $1.count }
            p.byFirst = [[Int]](repeating: [], count: 256)
            p.prefixes = [[UInt32]](repeating: [], count: 256)
            for (k, v) in p.values.enumerated() {
                p.byFirst[Int(v[0])].append(k)
                p.prefixes[Int(v[0])].append(v.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) })
            }
            count.store(p.values.count, ordering: .releasing)
        }
        return true
    }

    public var isEmpty: Bool { count.load(ordering: .acquiring) == 0 }

    /// Changes whenever a value is registered (a writer that masked
    /// something earlier knows to mask it again).
    public var generation: Int { count.load(ordering: .acquiring) }

    /// `text` with every registered value as `***`.
    public func mask(_ text: String) -> String { masked(text, Self.mask) }

    /// `text` through `mask` when a registered value occurs in it.
    private func masked(_ text: String, _ mask: ([UInt8], Patterns) -> [UInt8]?) -> String {
        guard !isEmpty else { return text }
        return patterns.withLock { p in
            // most text holds no value: found in place, no copy
            let found = text.utf8.withContiguousStorageIfAvailable { Self.contains($0, p) } ?? true
            guard found, let masked = mask(Array(text.utf8), p) else { return text }
            return String(decoding: masked, as: UTF8.self)
        }
    }

    /// `bytes` with every registered value as `***`, or nil when none occurs.
    public func mask(_ bytes: [UInt8]) -> [UInt8]? {
        guard !isEmpty else { return nil }
        return patterns.withLock { Self.mask(bytes, $0) }
    }

    /// `json` (JSON text) with every registered value masked so that it
    /// stays JSON: inside a string as `***`, and a number or literal
    /// holding one (a PIN, a port: `"delay":0.01`, `"t":12.2026`) replaced
    /// whole by the string `"***"`. The plain mask would leave `"t":***4`.
    public func maskJSON(_ json: String) -> String { masked(json, Self.maskJSON) }

    /// The same for JSON text in bytes; nil when no value occurs.
    public func maskJSON(_ bytes: [UInt8]) -> [UInt8]? {
        guard !isEmpty else { return nil }
        return patterns.withLock { Self.maskJSON(bytes, $0) }
    }

    /// A JSON string's content (between its quotes) masked, or nil. With
    /// escapes in it, what it says is masked, not how it is written: a
    /// secret `001b` in `\u001b` is no secret there (masking it broke the
    /// escape), and one written with escapes is found as what they mean.
    private static func maskJSONString(_ content: [UInt8], _ p: Patterns) -> [UInt8]? {
        guard content.contains(UInt8(ascii: "\\")) else { return mask(content, p) }
        var decoded: [UInt8] = []
        let quoted = [UInt8(ascii: "\"")] + content + [UInt8(ascii: "\"")]
        let ok = quoted.withUnsafeBufferPointer { b -> Bool in
            var scanner = JSONScanner(b)
            return (try? scanner.string(into: &decoded)) != nil
        }
        // not a string JSON can read: masked as it is written
        guard ok else { return mask(content, p) }
        guard let masked = mask(decoded, p) else { return nil }
        let text = JSONEscaping.tasker.quoted(String(decoding: masked, as: UTF8.self))
        return Array(text.utf8.dropFirst().dropLast())
    }

    private static func maskJSON(_ bytes: [UInt8], _ p: Patterns) -> [UInt8]? {
        let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        func isStructure(_ b: UInt8) -> Bool {
            switch b {
            case UInt8(ascii: "{"), UInt8(ascii: "}"), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: ","),
                 UInt8(ascii: ":"), UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"), quote: true
            default: false
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var changed = false
        var i = 0
        let n = bytes.count
        while i < n {
            if bytes[i] == quote {
                // a string: its content masked alone, its quotes kept
                var j = i + 1
                while j < n, bytes[j] != quote { j += bytes[j] == backslash ? 2 : 1 }
                let content = Array(bytes[(i + 1)..<min(j, n)])
                out.append(quote)
                if let m = maskJSONString(content, p) {
                    out.append(contentsOf: m)
                    changed = true
                } else {
                    out.append(contentsOf: content)
                }
                if j < n { out.append(quote) }
                i = j + 1
            } else if !isStructure(bytes[i]) {
                // a number or a literal, whole
                var j = i
                while j < n, !isStructure(bytes[j]) { j += 1 }
                let token = Array(bytes[i..<j])
                if mask(token, p) != nil {
                    out.append(quote)
                    out.append(contentsOf: replacement)
                    out.append(quote)
                    changed = true
                } else {
                    out.append(contentsOf: token)
                }
                i = j
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return changed ? out : nil
    }

    private static func mask(_ bytes: [UInt8], _ p: Patterns) -> [UInt8]? {
        let n = bytes.count
        guard n >= minimumLength else { return nil }
        return bytes.withUnsafeBufferPointer { b -> [UInt8]? in
            let found = encodedMatches(b, p)  // sorted by start
            var next = 0
            var out: [UInt8]?
            var copied = 0
            var i = 0
            while i < n {
                var end = i
                if let length = longestMatch(b, at: i, endingPast: i, p) { end = i + length }
                while next < found.count, found[next].start == i {
                    end = max(end, found[next].end)
                    next += 1
                }
                guard end > i else {
                    i += 1
                    continue
                }
                if out == nil { out = []; out!.reserveCapacity(n) }
                out!.append(contentsOf: b[copied..<i])
                out!.append(contentsOf: replacement)
                // a value that starts inside this one and ends past it (one
                // secret's end another's start) goes in the same `***`
                var j = i + 1
                while j < end {
                    if let w = longestMatch(b, at: j, endingPast: end, p) { end = j + w }
                    while next < found.count, found[next].start <= j {
                        end = max(end, found[next].end)
                        next += 1
                    }
                    j += 1
                }
                i = end
                copied = i
            }
            guard var result = out else { return nil }
            result.append(contentsOf: b[copied..<n])
            return result
        }
    }

    /// Letters, digits and `-._~`: what no URL encoder escapes.
    private static func isUnreserved(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"): true
        default: false
        }
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Where a registered value shows percent-encoded in `b` in a way its
    /// registered forms do not cover (`%2f` beside `%2B`, `+` for a space,
    /// `/` kept and `+` escaped…): found in the text with every `%XX` and
    /// `+` decoded, as ranges of `b`. Empty (no work) for text without `%`
    /// or `+`, or when no value holds a byte an encoder escapes.
    private static func encodedMatches(_ b: UnsafeBufferPointer<UInt8>, _ p: Patterns) -> [(start: Int, end: Int)] {
        guard !p.encodable.isEmpty, b.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }) else { return [] }
        // the decoded bytes, each with where in `b` it starts (it ends
        // where the next one starts)
        var decoded: [UInt8] = [], from: [Int32] = []
        decoded.reserveCapacity(b.count)
        from.reserveCapacity(b.count + 1)
        var k = 0
        while k < b.count {
            from.append(Int32(truncatingIfNeeded: k))
            if b[k] == UInt8(ascii: "%"), k + 2 < b.count, let h = hexValue(b[k + 1]), let l = hexValue(b[k + 2]) {
                decoded.append(h << 4 | l)
                k += 3
            } else {
                decoded.append(b[k] == UInt8(ascii: "+") ? UInt8(ascii: " ") : b[k])
                k += 1
            }
        }
        from.append(Int32(truncatingIfNeeded: b.count))
        var firsts = [Bool](repeating: false, count: 256)
        for v in p.encodable { firsts[Int(v[0])] = true }
        var ranges: [(start: Int, end: Int)] = []
        let m = decoded.count
        for i in 0..<m where firsts[Int(decoded[i])] {
            for v in p.encodable where v[0] == decoded[i] && i + v.count <= m {
                let same = decoded.withUnsafeBufferPointer { d in memcmp(d.baseAddress! + i, v, v.count) == 0 }
                guard same else { continue }
                let start = Int(from[i]), end = Int(from[i + v.count])
                // written as it is: the literal search finds it
                if end - start == v.count && b[start] != UInt8(ascii: "+") && !b[start..<end].contains(UInt8(ascii: "+")) { continue }
                ranges.append((start, end))
            }
        }
        return ranges.sorted { $0.start < $1.start }
    }

    /// The length of the longest value at `i` in `b` that ends past
    /// `end`, or nil: ruled out by the pair of bytes at `i` (one load)
    /// for most positions, then by each candidate's first four bytes.
    @inline(__always)
    private static func longestMatch(_ b: UnsafeBufferPointer<UInt8>, at i: Int, endingPast end: Int, _ p: Patterns) -> Int? {
        firstMatch(b, at: i, p) { i + $0.count > end }?.count
    }

    /// The first value at `i` in `b`, longest first, that `accept` takes.
    @inline(__always)
    private static func firstMatch(_ b: UnsafeBufferPointer<UInt8>, at i: Int, _ p: Patterns,
                                   _ accept: ([UInt8]) -> Bool) -> [UInt8]? {
        guard i + minimumLength <= b.count, let base = b.baseAddress, p.pairs[Int(base[i]) << 8 | Int(base[i + 1])] else { return nil }
        let word = UnsafeRawPointer(base + i).loadUnaligned(as: UInt32.self)
        let first = Int(base[i])
        let prefixes = p.prefixes[first]
        for k in prefixes.indices where prefixes[k] == word {
            let v = p.values[p.byFirst[first][k]]
            if i + v.count <= b.count, memcmp(base + i, v, v.count) == 0, accept(v) { return v }
        }
        return nil
    }

    /// `text` masked, then cut to at most `limit` bytes (on a character's
    /// boundary) with `ellipsis` after: cut first, a secret cut in half is
    /// no longer found, and its first half shows.
    public func cut(_ text: String, bytes limit: Int, ellipsis: String = "…") -> String {
        let masked = mask(text)
        guard masked.utf8.count > limit else { return masked }
        var end = masked.utf8.index(masked.utf8.startIndex, offsetBy: limit)
        while end > masked.startIndex, String.Index(end, within: masked) == nil { end = masked.utf8.index(before: end) }
        return masked[..<end] + ellipsis
    }

    /// The registered values that occur in `text` in any of their forms
    /// (a worker masks those of a job's args as its coordinator does).
    public func values(in text: String) -> [String] {
        guard !isEmpty else { return [] }
        return patterns.withLock { p in
            var found = Set<Int>()
            Array(text.utf8).withUnsafeBufferPointer { b in
                for i in b.indices {
                    _ = Self.firstMatch(b, at: i, p) { v in
                        if let o = p.origin[v] { found.insert(o) }
                        return false  // every one
                    }
                }
            }
            return found.sorted().map { p.registered[$0] }
        }
    }

    /// Whether a registered value occurs in `bytes` (false, at the cost of
    /// one atomic load, when none is registered).
    public func occurs(in bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard !isEmpty else { return false }
        return patterns.withLock { Self.contains(bytes, $0) }
    }

    /// Whether any value occurs in `bytes`.
    private static func contains(_ bytes: UnsafeBufferPointer<UInt8>, _ p: Patterns) -> Bool {
        let n = bytes.count
        guard n >= minimumLength, let base = bytes.baseAddress else { return false }
        // most positions ruled out here, by one load each
        // `firstMatch` written out: a task's values pass here (measured: a
        // fifth fewer instructions than through its closure)
        let candidate = p.pairs.withUnsafeBufferPointer { pairs -> Bool in
            for i in 0...(n - minimumLength) where pairs[Int(base[i]) << 8 | Int(base[i + 1])] {
                let word = UnsafeRawPointer(base + i).loadUnaligned(as: UInt32.self)
                let prefixes = p.prefixes[Int(base[i])]
                for k in prefixes.indices where prefixes[k] == word {
                    let v = p.values[p.byFirst[Int(base[i])][k]]
                    if i + v.count <= n, memcmp(base + i, v, v.count) == 0 { return true }
                }
            }
            return false
        }
        return candidate || !encodedMatches(bytes, p).isEmpty
    }

}

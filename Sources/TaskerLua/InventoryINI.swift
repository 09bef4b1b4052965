import TaskerHTTP

/// Ansible's INI inventory format, read into an `InventorySource`:
///
///     # comment (also ; comment)
///     loose.example.com                 # before any header: ungrouped
///     [web]
///     web1 ansible_host=10.0.0.1 ansible_user=deploy
///     web[01:03].example.com:2222       # ranges expand; :port is ansible_port
///     [prod:children]
///     web
///     [prod:vars]
///     region = "eu west"
///
/// Every error names `file:line`. Values are strings (Ansible would read
/// `8080` as a number; tasker keeps what was written).
enum InventoryINI {
    static func parse(_ text: String, file: String) throws(InventoryError) -> InventorySource {
        var source = InventorySource()
        var section = Section.hosts(nil)
        var lineNumber = 0
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            lineNumber += 1
            let place = "\(file):\(lineNumber)"
            func fail(_ message: String) -> InventoryError { InventoryError(message: "\(place): \(message)") }
            let line = raw.trimmed(of: " \t\r")
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                section = try header(line, fail)
                if case .hosts(let g?) = section { _ = source.groups[g, default: .init()] }
                continue
            }
            switch section {
            case .hosts(let group):
                let tokens = try words(line, fail)
                guard let first = tokens.first else { continue }
                var vars: [String: String] = [:]
                for token in tokens.dropFirst() {
                    guard let eq = token.firstIndex(of: "="), eq != token.startIndex else {
                        throw fail("bad host line: '\(token)' after the host name is not key=value")
                    }
                    vars[String(token[..<eq])] = String(token[token.index(after: eq)...])
                }
                let (pattern, port) = try splitPort(first, fail)
                if let port { vars["ansible_port"] = vars["ansible_port"] ?? port }
                if let p = vars["ansible_port"], !(UInt16(p).map { $0 > 0 } ?? false) {
                    throw fail("bad ansible_port '\(p)' (a port number 1-65535 expected)")
                }
                for name in try expand(pattern, fail) {
                    source.addHost(name, vars: vars, group: group)
                }
            case .vars(let group):
                guard let eq = line.firstIndex(of: "=") else {
                    throw fail("bad line in [\(group):vars]: '\(line)' is not key=value")
                }
                let key = line[..<eq].trimmed(of: " \t")
                guard !key.isEmpty, !key.contains(where: { $0 == " " || $0 == "\t" }) else {
                    throw fail("bad variable name '\(key)' in [\(group):vars]")
                }
                let value = try unquote(line[line.index(after: eq)...].trimmed(of: " \t"), key: key, fail)
                if key == "ansible_port", !(UInt16(value).map { $0 > 0 } ?? false) {
                    throw fail("bad ansible_port '\(value)' (a port number 1-65535 expected)")
                }
                source.addVars([key: value], to: group)
            case .children(let group):
                guard isGroupName(line) else { throw fail("bad line in [\(group):children]: '\(line)' is not a group name") }
                source.addChild(line, to: group, place: place)
            }
        }
        return source
    }

    /// Hosts before any header (`.hosts(nil)`) are in no group of the
    /// file's: they end in `ungrouped`.
    private enum Section {
        case hosts(String?), vars(String), children(String)
    }

    private static func header(_ line: String, _ fail: (String) -> InventoryError) throws(InventoryError) -> Section {
        guard line.hasSuffix("]") else { throw fail("bad section header '\(line)' (expected [group], [group:vars] or [group:children])") }
        let inside = line.dropFirst().dropLast().trimmed(of: " \t")
        let parts = inside.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        guard isGroupName(parts[0]) else { throw fail("bad group name '\(parts[0])' in '\(line)'") }
        guard parts.count == 2 else { return .hosts(parts[0]) }
        switch parts[1] {
        case "vars": return .vars(parts[0])
        case "children": return .children(parts[0])
        default: throw fail("bad section header '\(line)' (':\(parts[1])' is neither ':vars' nor ':children')")
        }
    }

    static func isGroupName(_ s: String) -> Bool {
        !s.isEmpty && !s.contains { $0 == " " || $0 == "\t" || $0 == "[" || $0 == "]" || $0 == ":" || $0 == "=" || $0 == "#" }
    }

    /// Splits a host line into words: blanks separate, quotes group (and are
    /// removed), a `#` starting a word begins a comment.
    static func words(_ line: String, _ fail: (String) -> InventoryError) throws(InventoryError) -> [String] {
        var out: [String] = [], current = "", inWord = false
        var quote: Character?
        var quoteStart = line.startIndex
        for (at, ch) in zip(line.indices, line) {
            if let q = quote {
                if ch == q { quote = nil } else { current.append(ch) }
            } else if ch == " " || ch == "\t" {
                if inWord { out.append(current); current = ""; inWord = false }
            } else if ch == "#" && !inWord {
                break
            } else if ch == "\"" || ch == "'" {
                quote = ch
                quoteStart = at
                inWord = true
            } else {
                current.append(ch)
                inWord = true
            }
        }
        // what comes before the quote, as `--var`s are shown
        // (`ansible_become_pass=` and no more): after it, a password
        if quote != nil { throw fail("unterminated quote after '\(Redaction.text(String(line[..<quoteStart])))'") }
        if inWord { out.append(current) }
        return out
    }

    private static func unquote(_ value: String, key: String, _ fail: (String) -> InventoryError) throws(InventoryError) -> String {
        guard let q = value.first, q == "\"" || q == "'" else { return value }
        // not quoted back: a password's value is the usual one here
        guard value.count >= 2, value.last == q else { throw fail("unterminated quote in the value of '\(key)'") }
        return String(value.dropFirst().dropLast())
    }

    /// `name:port` → (name, port); `[v6::addr]:port` too. A bare IPv6
    /// address (more than one colon) has no port.
    static func splitPort(_ word: String, _ fail: (String) -> InventoryError) throws(InventoryError) -> (String, String?) {
        func port(_ text: Substring) throws(InventoryError) -> String {
            guard UInt16(text).map({ $0 > 0 }) ?? false else { throw fail("bad port '\(text)' in '\(word)'") }
            return String(text)
        }
        // `[2001:db8::1]:22`: an IPv6 address in brackets (a range has no colon pair)
        if word.hasPrefix("["), let close = word.firstIndex(of: "]"), word[..<close].filter({ $0 == ":" }).count > 1 {
            let address = String(word[word.index(after: word.startIndex)..<close])
            let rest = word[word.index(after: close)...]
            if rest.isEmpty { return (address, nil) }
            guard rest.hasPrefix(":") else { throw fail("bad host '\(word)'") }
            return (address, try port(rest.dropFirst()))
        }
        // the colon of a port comes after a range's closing bracket
        let tailStart = word.lastIndex(of: "]").map { word.index(after: $0) } ?? word.startIndex
        let colons = word[tailStart...].filter { $0 == ":" }.count
        if word.lastIndex(of: "]") == nil && colons > 1 { return (word, nil) }  // a bare IPv6 address
        guard colons == 1, let c = word[tailStart...].firstIndex(of: ":") else {
            guard colons == 0 else { throw fail("bad host '\(word)'") }
            return (word, nil)
        }
        return (String(word[..<c]), try port(word[word.index(after: c)...]))
    }

    /// Ansible's host ranges: `web[1:3]`, `db-[01:10:2]` (leading zeros
    /// kept), `[a:c]`; one range per pattern.
    static func expand(_ pattern: String, _ fail: (String) -> InventoryError) throws(InventoryError) -> [String] {
        guard let open = pattern.firstIndex(of: "[") else {
            guard !pattern.contains("]") else { throw fail("bad host name '\(pattern)'") }
            return [pattern]
        }
        guard let close = pattern[open...].firstIndex(of: "]") else { throw fail("bad host range '\(pattern)' (no closing ])") }
        let head = pattern[..<open], tail = pattern[pattern.index(after: close)...]
        guard !tail.contains("["), !tail.contains("]") else { throw fail("bad host range '\(pattern)' (one range per name)") }
        let parts = pattern[pattern.index(after: open)..<close].split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2 || parts.count == 3 else { throw fail("bad host range '\(pattern)' (expected [start:end] or [start:end:step])") }
        let step = parts.count == 3 ? Int(parts[2]) : 1
        guard let step, step > 0 else { throw fail("bad step in host range '\(pattern)'") }
        if let a = Int(parts[0]), let b = Int(parts[1]), a <= b, b - a <= 100_000 {
            let width = parts[0].count
            return stride(from: a, through: b, by: step).map { n in
                let digits = String(n)
                return head + String(repeating: "0", count: max(0, width - digits.count)) + digits + tail
            }
        }
        if parts[0].count == 1, parts[1].count == 1, let a = parts[0].unicodeScalars.first, let b = parts[1].unicodeScalars.first,
           a.properties.isLowercase == b.properties.isLowercase, a.isASCII, b.isASCII, a.value <= b.value,
           parts[0].first!.isLetter, parts[1].first!.isLetter {
            return stride(from: a.value, through: b.value, by: step).map { head + String(UnicodeScalar($0)!) + tail }
        }
        throw fail("bad host range '\(pattern)' (numbers or single letters, start not after end)")
    }
}

extension StringProtocol {
    fileprivate func trimmed(of set: String) -> String {
        var s = Substring(self)
        while let f = s.first, set.contains(f) { s = s.dropFirst() }
        while let l = s.last, set.contains(l) { s = s.dropLast() }
        return String(s)
    }
}

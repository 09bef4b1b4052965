import Foundation
import Synchronization
import TaskerCore
import TaskerLua

/// What a pipeline accepts, for `tasker run FILE --help` and `tasker list
/// FILE`: its leading comment, and the parameters and targets its main
/// chunk declares — learnt by running the main chunk up to its first task,
/// process, request or wait, none of which happens.
struct PipelineDescription {
    struct Param {
        let name: String
        let type: String
        let help: String?
        let required: Bool
        let secret: Bool
        let choices: [JSONScalar]?
        let `default`: JSONScalarOrList?
        let env: String

        /// From the description's JSON; nil when a field is missing or of
        /// the wrong type (`help`, `choices` and `default` may be absent).
        init?(_ v: JSONValue) {
            guard let name = v["name"]?.string, let type = v["type"]?.string, let required = v["required"]?.bool,
                  let secret = v["secret"]?.bool, let env = v["env"]?.string,
                  let help = Self.optional(v["help"], \.string),
                  let choices = Self.optional(v["choices"], { $0.array.flatMap(JSONScalar.list) }),
                  let `default` = Self.optional(v["default"], JSONScalarOrList.init)
            else { return nil }
            self.name = name
            self.type = type
            self.help = help
            self.required = required
            self.secret = secret
            self.choices = choices
            self.default = `default`
            self.env = env
        }

        /// `.some(nil)` for an absent or null field, nil for one that does not convert.
        private static func optional<T>(_ v: JSONValue?, _ convert: (JSONValue) -> T?) -> T?? {
            guard let v, !v.isNull else { return .some(nil) }
            return convert(v).map { .some($0) }
        }
    }

    struct Target {
        let name: String
        let help: String?
        let after: [String]

        init?(_ v: JSONValue) {
            guard let name = v["name"]?.string else { return nil }
            let help = v["help"]
            guard help == nil || help == .null || help?.string != nil else { return nil }
            self.name = name
            self.help = help?.string
            // an empty Lua table comes as {} rather than []
            after = v["after"]?.stringArray ?? []
        }
    }

    /// What the main chunk declared, from its description's JSON (what
    /// `json.encode` wrote): no params (or targets) when one of them is not
    /// as expected.
    private struct Declared {
        let params: [Param]
        let targets: [Target]

        init?(json: String) {
            guard let v = try? JSONReader.read(json), v.members != nil else { return nil }
            params = Self.all(v["params"], Param.init) ?? []
            targets = Self.all(v["targets"], Target.init) ?? []
        }

        private static func all<T>(_ v: JSONValue?, _ convert: (JSONValue) -> T?) -> [T]? {
            guard let items = v?.array else { return nil }
            var out: [T] = []
            for item in items {
                guard let t = convert(item) else { return nil }
                out.append(t)
            }
            return out
        }
    }

    let file: String
    let summary: [String]
    let params: [Param]
    let targets: [Target]
    /// The main chunk failed before it declared everything (a syntax error…).
    let error: String?

    /// Where the main chunk stopped (`path:line: the main chunk calls
    /// tasker.sh there`: a description runs nothing), said when the file
    /// declares parameters or targets further down, which are then not
    /// shown; nil when nothing is declared past it.
    static func declaresAfter(_ stop: String, in file: String) -> String? {
        guard let said = stop.range(of: ": the main chunk"),
              let colon = stop[..<said.lowerBound].lastIndex(of: ":"),
              let line = Int(stop[stop.index(after: colon)..<said.lowerBound]),
              // the line is the pipeline file's (not a module's it uses)
              URL(fileURLWithPath: String(stop[..<colon])).lastPathComponent == URL(fileURLWithPath: file).lastPathComponent,
              let text = try? String(contentsOfFile: file, encoding: .utf8) else { return nil }
        let later = text.split(separator: "\n", omittingEmptySubsequences: false).dropFirst(line)
        let declares = later.contains { line in
            let code = line.drop { $0 == " " || $0 == "\t" }
            return !code.hasPrefix("--") && (code.contains("tasker.param") || code.contains("tasker.target"))
        }
        guard declares else { return nil }
        return "\(stop), which a description does not run; what it declares after that is not shown"
    }

    /// A main chunk that has not come to its first task by then (a loop
    /// that never ends) is stopped: `--help` and a shell's completion must
    /// not hang.
    static let timeLimit = 5.0

    static func of(_ file: String, args: [String], vars: [String: String]) -> PipelineDescription {
        var options = LuaRuntime.Options()
        options.describeOnly = true
        options.args = args
        options.vars = vars
        options.output = { _ in }
        options.tearDown = false  // the watchdog may still reach the runtime's record; the process ends soon
        let done = DispatchSemaphore(value: 0)
        let stopped = Mutex(false)
        let result = PipelineRunner.run(path: file, options: options) { runtime in
            let handle = runtime.interruptHandle
            let target = LoopBound(runtime, loop: runtime.loop)
            Thread {
                guard done.wait(timeout: .now() + Self.timeLimit) == .timedOut else { return }
                stopped.withLock { $0 = true }
                handle.request(SIGALRM)  // stops the running Lua at its next hook
                target.loop.execute { target.value.interrupt(signal: SIGALRM) }
            }.start()
        }
        done.signal()
        let declared = result.description.flatMap(Declared.init(json:))
        let error = stopped.withLock { $0 } ? "its main chunk ran \(Int(Self.timeLimit)) s without coming to a task; it was stopped"
            : result.mainError ?? result.planStop.flatMap { declaresAfter($0, in: file) }
        return PipelineDescription(file: file, summary: leadingComment(file), params: declared?.params ?? [],
                                   targets: declared?.targets ?? [], error: error)
    }

    /// The comment at the top (after a `#!` line): its `--` (or `---`)
    /// lines without the dashes, or a `--[[ … ]]` block's lines.
    static func leadingComment(_ file: String) -> [String] {
        guard let data = FileManager.default.contents(atPath: file) else { return [] }
        var lines: [String] = []
        var block: String?  // the closing bracket of a `--[[`/`--[==[` block being read
        for (i, raw) in String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(raw.drop { $0 == " " || $0 == "\t" }).trimmingCharacters(in: .init(charactersIn: " \t\r"))
            if let close = block {
                guard let end = line.range(of: close) else {
                    lines.append(line)
                    continue
                }
                lines.append(String(line[..<end.lowerBound]).trimmingCharacters(in: .whitespaces))
                break
            }
            if i == 0 && line.hasPrefix("#!") { continue }
            if lines.isEmpty, let open = Self.blockOpening(line) {
                let rest = line.dropFirst(open.count)
                if let end = rest.range(of: open.close) {
                    lines.append(String(rest[..<end.lowerBound]).trimmingCharacters(in: .whitespaces))
                    break
                }
                lines.append(rest.trimmingCharacters(in: .whitespaces))
                block = open.close
                continue
            }
            guard line.hasPrefix("--"), Self.blockOpening(line) == nil else { break }
            // "-- text" or "--- text": the dashes and one space go, the rest of the indent stays
            var text = line.drop { $0 == "-" }
            if text.first == " " { text = text.dropFirst() }
            lines.append(String(text))
        }
        while lines.first?.isEmpty == true { lines.removeFirst() }
        while lines.last?.isEmpty == true { lines.removeLast() }
        return lines
    }

    /// `--[[` or `--[==[` at the start of `line`, and what closes it.
    private static func blockOpening(_ line: String) -> (count: Int, close: String)? {
        guard line.hasPrefix("--[") else { return nil }
        let equals = line.dropFirst(3).prefix { $0 == "=" }.count
        let rest = line.dropFirst(3 + equals)
        guard rest.first == "[" else { return nil }
        return (4 + equals, "]" + String(repeating: "=", count: equals) + "]")
    }

    /// Shell completion after `tasker run FILE`: FILE's targets and its
    /// parameters (`--name`, `--no-flag`) that start with `prefix`; after a
    /// parameter with choices (`--env <TAB>`), its choices.
    static func completions(words: [String], at index: Int, prefix: String) -> [String] {
        guard let run = words.firstIndex(of: "run"),
              let file = words[(run + 1)...].first(where: { $0.hasSuffix(".lua") && FileManager.default.isReadableFile(atPath: $0) })
        else { return [] }
        let d = of(file, args: [], vars: [:])
        var out: [String] = []
        if index > run + 1, index - 1 < words.count, words[index - 1].hasPrefix("--"),
           let p = d.params.first(where: { "--" + $0.name == words[index - 1] }), p.type != "boolean" {
            // the parameter's value: its choices, if it has any
            out = p.choices?.map(\.text) ?? []
        } else {
            out = d.targets.map(\.name)
            for p in d.params {
                out.append("--" + p.name)
                if p.type == "boolean" { out.append("--no-" + p.name) }
            }
        }
        // a candidate is one shell word: none with a control character or a secret
        return out.filter { $0.hasPrefix(prefix) && !$0.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F } }
            .map { SecretMask.shared.mask($0) }
    }

    /// The `--help` text.
    var text: String {
        let name = (file as NSString).lastPathComponent
        var out: [String] = []
        if !summary.isEmpty { out += summary + [""] }
        var usage = "usage: tasker run [OPTIONS] \(file)"
        if !targets.isEmpty { usage += " [TARGET...]" }
        for p in params where p.required { usage += " --\(p.name) \(placeholder(p))" }
        if params.contains(where: { !$0.required }) { usage += " [PARAMETERS]" }
        out.append(usage)
        if !params.isEmpty {
            out += ["", "parameters (after \(name); each also from TASKER_PARAM_<NAME>):"]
            let rows = params.map { p -> (String, String) in
                let flag = p.type == "boolean" ? "--\(p.name), --no-\(p.name)" : "--\(p.name) \(placeholder(p))"
                var notes = [p.type]
                if p.required { notes.append("required") }
                if let c = p.choices { notes.append("one of " + c.map(\.text).joined(separator: ", ")) }
                if let d = p.default { notes.append("default \(d.text)") }
                if p.secret { notes.append("secret") }
                return (flag, (p.help.map { $0 + " " } ?? "") + "(\(notes.joined(separator: "; ")))")
            }
            out += Self.columns(rows)
        }
        if !targets.isEmpty {
            let none = targets.contains { $0.name == "default" } ? "none given: default" : "none given: none runs"
            out += ["", "targets (run after the main chunk, each once, in the order given; \(none)):"]
            out += Self.columns(targets.map { t in
                (t.name, (t.help ?? "") + (t.after.isEmpty ? "" : "\(t.help == nil ? "" : " ")(after \(t.after.joined(separator: ", ")))"))
            })
        }
        if let error { out += ["", "(the description may be partial: \(error.split(separator: "\n").first ?? ""))"] }
        return out.map { TerminalText.escape($0, keepTabs: false) }.joined(separator: "\n") + "\n"
    }


    private func placeholder(_ p: Param) -> String {
        switch p.type {
        case "integer": "N"
        case "number": "X"
        case "list": "A,B"
        default: p.name.uppercased().replacingOccurrences(of: "-", with: "_")
        }
    }

    private static func columns(_ rows: [(String, String)]) -> [String] {
        let width = min(30, rows.map(\.0.count).max() ?? 0)
        return rows.map { "  " + $0.0.padding(toLength: max(width, $0.0.count), withPad: " ", startingAt: 0) + "  " + $0.1 }
    }

    /// `tasker list --json`, in the layout and key order Foundation's
    /// JSONSerialization gave it (`.prettyPrinted`, `.sortedKeys`).
    var json: String {
        let params: [JSONValue] = params.map { p in
            var o: [String: JSONValue] = ["name": .string(p.name), "type": .string(p.type), "required": .bool(p.required),
                                          "secret": .bool(p.secret), "env": .string(p.env)]
            if let h = p.help { o["help"] = .string(h) }
            if let c = p.choices { o["choices"] = .array(c.map(\.json)) }
            if let d = p.default { o["default"] = d.json }
            return .object(o, order: .foundation)
        }
        let targets: [JSONValue] = targets.map { t in
            var o: [String: JSONValue] = ["name": .string(t.name), "after": .strings(t.after)]
            if let h = t.help { o["help"] = .string(h) }
            return .object(o, order: .foundation)
        }
        let object: [String: JSONValue] = ["file": .string(file), "description": .string(summary.joined(separator: "\n")),
                                           "params": .array(params), "targets": .array(targets)]
        var w = JSONWriter(.foundation.prettyPrinted)
        w.value(.object(object, order: .foundation))
        return w.text + "\n"
    }
}

/// A string, number or boolean from the description's JSON. A number
/// that is a whole one fitting in 64 bits is an integer, however written
/// (`1.0`, `1e2`: as JSONDecoder read them before; `--help` shows `1`).
enum JSONScalar {
    case string(String), number(Double), integer(Int64), bool(Bool)

    init?(_ v: JSONValue) {
        switch v {
        case .bool(let b): self = .bool(b)
        case .integer(let n): self = .integer(n)
        case .double(let d): self = Int64(exactly: d).map(JSONScalar.integer) ?? .number(d)
        case .string(let s): self = .string(s)
        default: return nil
        }
    }

    /// All of `items`, or nil when one is not a scalar.
    static func list(_ items: [JSONValue]) -> [JSONScalar]? {
        var out: [JSONScalar] = []
        for item in items {
            guard let s = JSONScalar(item) else { return nil }
            out.append(s)
        }
        return out
    }

    var text: String {
        switch self {
        case .string(let s): s
        case .number(let d): String(d)
        case .integer(let i): String(i)
        case .bool(let b): String(b)
        }
    }

    var json: JSONValue {
        switch self {
        case .string(let s): .string(s)
        case .number(let d): .double(d)
        case .integer(let i): .integer(i)
        case .bool(let b): .bool(b)
        }
    }
}

/// A default: a scalar, or a list of them.
enum JSONScalarOrList {
    case scalar(JSONScalar), list([JSONScalar])

    init?(_ v: JSONValue) {
        if let items = v.array {
            guard let l = JSONScalar.list(items) else { return nil }
            self = .list(l)
        } else {
            guard let s = JSONScalar(v) else { return nil }
            self = .scalar(s)
        }
    }

    var text: String {
        switch self {
        case .scalar(let s): s.text
        case .list(let l): l.map(\.text).joined(separator: ",")
        }
    }

    var json: JSONValue {
        switch self {
        case .scalar(let s): s.json
        case .list(let l): .array(l.map(\.json))
        }
    }
}

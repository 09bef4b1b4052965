import Foundation
import Synchronization
import TaskerCore
import TaskerLua

/// What a pipeline accepts, for `tasker run FILE --help` and `tasker list
/// FILE`: its leading comment, and the parameters and targets its main
/// chunk declares — learnt by running the main chunk up to its first task,
/// process, request or wait, none of which happens.
struct PipelineDescription {
    struct Param: Decodable {
        let name: String
        let type: String
        let help: String?
        let required: Bool
        let secret: Bool
        let choices: [JSONScalar]?
        let `default`: JSONScalarOrList?
        let env: String
    }

    struct Target: Decodable {
        let name: String
        let help: String?
        let after: [String]

        init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            name = try c.decode(String.self, forKey: .name)
            help = try c.decodeIfPresent(String.self, forKey: .help)
            // an empty Lua table may come as {} rather than []
            after = (try? c.decodeIfPresent([String].self, forKey: .after)) ?? []
        }

        enum CodingKeys: String, CodingKey { case name, help, after }
    }

    private struct Declared: Decodable {
        let params: [Param]
        let targets: [Target]

        init(from decoder: Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            params = (try? c.decodeIfPresent([Param].self, forKey: .params)) ?? []
            targets = (try? c.decodeIfPresent([Target].self, forKey: .targets)) ?? []
        }

        enum CodingKeys: String, CodingKey { case params, targets }
    }

    let file: String
    let summary: [String]
    let params: [Param]
    let targets: [Target]
    /// The main chunk failed before it declared everything (a syntax error…).
    let error: String?

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
        let declared = result.description.flatMap { try? JSONDecoder().decode(Declared.self, from: Data($0.utf8)) }
        let error = stopped.withLock { $0 } ? "its main chunk ran \(Int(Self.timeLimit)) s without coming to a task; it was stopped"
            : result.mainError
        return PipelineDescription(file: file, summary: leadingComment(file), params: declared?.params ?? [],
                                   targets: declared?.targets ?? [], error: error)
    }

    /// The `--` comment lines at the top (after a `#!` line), without the dashes.
    static func leadingComment(_ file: String) -> [String] {
        guard let data = FileManager.default.contents(atPath: file) else { return [] }
        var lines: [String] = []
        for (i, raw) in String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(raw.drop { $0 == " " || $0 == "\t" }).trimmingCharacters(in: .init(charactersIn: " \t\r"))
            if i == 0 && line.hasPrefix("#!") { continue }
            guard line.hasPrefix("--"), !line.hasPrefix("--[[") else { break }
            // "-- text": the dashes and one space go, the rest of the indent stays
            var text = line.dropFirst(2)
            if text.first == " " { text = text.dropFirst() }
            lines.append(String(text))
        }
        while lines.last?.isEmpty == true { lines.removeLast() }
        return lines
    }

    /// Shell completion after `tasker run FILE`: FILE's targets and its
    /// parameters (`--name`, `--no-flag`) that start with `prefix`.
    static func completions(words: [String], prefix: String) -> [String] {
        guard let run = words.firstIndex(of: "run"),
              let file = words[(run + 1)...].first(where: { $0.hasSuffix(".lua") && FileManager.default.isReadableFile(atPath: $0) })
        else { return [] }
        let d = of(file, args: [], vars: [:])
        var out = d.targets.map(\.name)
        for p in d.params {
            out.append("--" + p.name)
            if p.type == "boolean" { out.append("--no-" + p.name) }
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
                var notes: [String] = []
                if p.required { notes.append("required") }
                if let c = p.choices { notes.append("one of " + c.map(\.text).joined(separator: ", ")) }
                if let d = p.default { notes.append("default \(d.text)") }
                if p.secret { notes.append("secret") }
                let help = p.help.map { $0 + (notes.isEmpty ? "" : " ") } ?? ""
                return (flag, help + (notes.isEmpty ? "" : "(\(notes.joined(separator: "; ")))"))
            }
            out += Self.columns(rows)
        }
        if !targets.isEmpty {
            out += ["", "targets (run after the main chunk, each once; none given: default):"]
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

    /// `tasker list --json`.
    var json: String {
        let object: [String: Any] = [
            "file": file,
            "description": summary.joined(separator: "\n"),
            "params": params.map { p -> [String: Any] in
                var o: [String: Any] = ["name": p.name, "type": p.type, "required": p.required, "secret": p.secret, "env": p.env]
                if let h = p.help { o["help"] = h }
                if let c = p.choices { o["choices"] = c.map(\.any) }
                if let d = p.default { o["default"] = d.any }
                return o
            },
            "targets": targets.map { t -> [String: Any] in
                var o: [String: Any] = ["name": t.name, "after": t.after]
                if let h = t.help { o["help"] = h }
                return o
            },
        ]
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .prettyPrinted])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self) + "\n"
    }
}

/// A string, number or boolean from the description's JSON.
enum JSONScalar: Decodable {
    case string(String), number(Double), integer(Int64), bool(Bool)

    init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let i = try? c.decode(Int64.self) { self = .integer(i) }
        else if let d = try? c.decode(Double.self) { self = .number(d) }
        else { self = .string(try c.decode(String.self)) }
    }

    var text: String {
        switch self {
        case .string(let s): s
        case .number(let d): String(d)
        case .integer(let i): String(i)
        case .bool(let b): String(b)
        }
    }

    var any: Any {
        switch self {
        case .string(let s): s
        case .number(let d): d
        case .integer(let i): i
        case .bool(let b): b
        }
    }
}

/// A default: a scalar, or a list of them.
enum JSONScalarOrList: Decodable {
    case scalar(JSONScalar), list([JSONScalar])

    init(from decoder: Decoder) throws {
        if let l = try? [JSONScalar](from: decoder) { self = .list(l) } else { self = .scalar(try JSONScalar(from: decoder)) }
    }

    var text: String {
        switch self {
        case .scalar(let s): s.text
        case .list(let l): l.map(\.text).joined(separator: ",")
        }
    }

    var any: Any {
        switch self {
        case .scalar(let s): s.any
        case .list(let l): l.map(\.any)
        }
    }
}

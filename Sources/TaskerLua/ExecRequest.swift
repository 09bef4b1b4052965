import TaskerCore
import Foundation

/// What `tasker.exec` asked for.
struct ExecRequest: Sendable {
    /// The program and its arguments as the script gave them: bytes, not
    /// all UTF-8 (a file name in Latin-1 must reach the program as it is).
    var arguments: [[UInt8]]
    /// The same as text, for messages and the remote command line (which
    /// takes UTF-8 only).
    var argv: [String] { arguments.map { String(decoding: $0, as: UTF8.self) } }
    /// Whether every argument is UTF-8.
    var isUTF8: Bool { arguments.allSatisfy { String(validating: $0, as: UTF8.self) != nil } }
    var cwd: String?
    var env: [String: String] = [:]
    var stdin: [UInt8]?
    var timeout: Double?
    var check = true
    /// `stream=true`: each line also goes to `streamSink` as it arrives,
    /// prefixed `[label] ` (see ProcessReactor).
    var stream = false
    var label = ""
    var streamSink: (@Sendable (String) -> Void)?
    /// The task that ran it (nil: the main chunk), whose output it adds to.
    var task: TaskID?
    /// The script's line that called it (`p.lua:12`), for its errors.
    var position: String?

    init(arguments: [[UInt8]]) { self.arguments = arguments }

    init(argv: [String]) { arguments = argv.map { Array($0.utf8) } }

    /// The command as a person would type it, for messages.
    var display: String { argv.joined(separator: " ") }

    /// `display` on one line for an error message: a script of many lines
    /// is its first line and `…`, a long one is cut at 200 characters.
    var shortDisplay: String { Self.short(display) }

    /// A command line for an error message: its first line, at most 200
    /// characters, secrets masked.
    static func short(_ display: String) -> String {
        // Masked before it is cut: a secret cut in half is no longer found.
        let text = SecretMask.shared.mask(display)
        let first = text.prefix { $0 != "\n" }
        let cut = first.count > 200 ? first.prefix(200) : first
        return cut.count < text.count ? cut + " …" : text
    }
}

/// How a process run ended.
enum ExecOutcome: Sendable {
    case finished(code: Int, stdout: [UInt8], stderr: [UInt8])
    case timedOut
    /// It could not run; `permanent` when trying again cannot help.
    case failed(String, permanent: Bool = false)
}

/// A child's stdin: the bytes in an unlinked temporary file, positioned at
/// its start (ProcessSpawner hands it to the child).
enum StdinFile {
    static func make(_ bytes: [UInt8]) throws -> Int32 {
        // mkstemp fills in the six trailing X's.
        var template = Array("\(NSTemporaryDirectory())/tasker-stdin-\(String(repeating: "X", count: 6))".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0, fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 else { throw ExecSetupError(message: "cannot make a file for stdin: \(String(cString: strerror(errno)))") }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        if let reason = writeAll(fd, bytes) {
            close(fd)
            throw ExecSetupError(message: "cannot write stdin to a temporary file: \(reason)")
        }
        lseek(fd, 0, SEEK_SET)
        return fd
    }
}

struct ExecSetupError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

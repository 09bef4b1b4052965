import Foundation
import Subprocess
#if canImport(System)
import System
#else
import SystemPackage
#endif

/// What `tasker.exec` asked for.
struct ExecRequest: Sendable {
    var argv: [String]
    var cwd: String?
    var env: [String: String] = [:]
    var stdin: [UInt8]?
    var timeout: Double?
    var check = true
    /// `stream=true`: each line also goes to `streamSink` as it arrives,
    /// prefixed `[label] `.
    var stream = false
    var label = ""
    var streamSink: (@Sendable (String) -> Void)?

    /// The command as a person would type it, for messages.
    var display: String { argv.joined(separator: " ") }
}

/// How a process run ended.
enum ExecOutcome: Sendable {
    case finished(code: Int, stdout: [UInt8], stderr: [UInt8])
    case timedOut
    case failed(String)
}

/// Runs one process with swift-subprocess: no shell, output captured per
/// call; cancellation (and the timeout) send SIGTERM, then SIGKILL after 2 s.
enum ExecRunner {
    /// Output beyond this is an error rather than a memory blow-up.
    static let outputLimit = 64 << 20

    static func run(_ r: ExecRequest, groups: ProcessGroups) async -> ExecOutcome {
        do {
            guard let timeout = r.timeout else { return try await spawn(r, groups: groups) }
            return try await withThrowingTaskGroup(of: ExecOutcome.self) { group in
                group.addTask { try await spawn(r, groups: groups) }
                group.addTask {
                    // Saturates: a timeout of 1e300 s waits "forever", it does not trap.
                    try await Task.sleep(nanoseconds: timeout >= 1.8e10 ? UInt64.max : UInt64(timeout * 1e9))
                    return .timedOut
                }
                let first = try await group.next() ?? .timedOut
                group.cancelAll()
                return first
            }
        } catch is CancellationError {
            return .failed("cancelled")
        } catch {
            return .failed("\(error)")
        }
    }

    private static func spawn(_ r: ExecRequest, groups: ProcessGroups) async throws -> ExecOutcome {
        let program = r.argv[0]
        let executable: Executable = program.contains("/") ? .path(FilePath(program)) : .name(program)
        var platform = PlatformOptions()
        // Its own process group, signalled as a whole: a shell's children
        // (`sh -c "sleep 30; ..."`) do not outlive a cancel or timeout.
        platform.processGroupID = 0
        platform.teardownSequence = [.gracefulShutDown(toProcessGroup: true, allowedDurationToNextStep: .seconds(2))]
        var updates: [Environment.Key: String?] = [:]
        for (k, v) in r.env { updates[Environment.Key(rawValue: k)!] = v }
        let configuration = Configuration(executable: executable, arguments: Arguments(Array(r.argv.dropFirst())),
                                          environment: .inherit.updating(updates),
                                          workingDirectory: r.cwd.map { FilePath($0) },
                                          platformOptions: platform)
        // The group is known from the moment the child exists, so that it can
        // be killed at the end of the run even if its leader exits early.
        var leader: pid_t = 0
        groups.willSpawn()
        defer { if leader != 0 { groups.leaderExited(leader) } }
        if r.stream, let sink = r.streamSink {
            return try await spawnStreaming(configuration, r, sink: sink, groups: groups)
        }
        let result = if let stdin = r.stdin {
            // stdin comes from an unlinked temp file, not a pipe: a child that
            // does not read it (`true`, `head -c 10`) cannot make the write
            // fail half-way, and nothing waits on a slow reader.
            try await Subprocess.run(configuration, input: .fileDescriptor(try stdinFile(stdin), closeAfterSpawningProcess: true),
                                     output: .bytes(limit: outputLimit), error: .bytes(limit: outputLimit)) { execution in
                leader = execution.processIdentifier.value
                groups.started(leader)
            }
        } else {
            try await Subprocess.run(configuration, input: .none,
                                     output: .bytes(limit: outputLimit), error: .bytes(limit: outputLimit)) { execution in
                leader = execution.processIdentifier.value
                groups.started(leader)
            }
        }
        let code: Int = switch result.terminationStatus {
        case .exited(let c): Int(c)
        case .signaled(let s): 128 + Int(s)
        }
        return .finished(code: code, stdout: result.standardOutput, stderr: result.standardError)
    }

    /// Like `spawn`, reading stdout and stderr as they arrive: every
    /// complete line goes to `sink` as `[label] line` (one call a line, so
    /// lines of different tasks never mix mid-line), and is still captured.
    private static func spawnStreaming(_ configuration: Configuration, _ r: ExecRequest,
                                       sink: @escaping @Sendable (String) -> Void, groups: ProcessGroups) async throws -> ExecOutcome {
        let prefix = "[\(r.label)] "
        let input: FileDescriptorInput? = try r.stdin.map { .fileDescriptor(try stdinFile($0), closeAfterSpawningProcess: true) }
        let result = if let input {
            try await Subprocess.run(configuration, input: input, output: .sequence, error: .sequence) { execution in
                try await readLines(execution, prefix: prefix, sink: sink, groups: groups)
            }
        } else {
            try await Subprocess.run(configuration, input: .none, output: .sequence, error: .sequence) { execution in
                try await readLines(execution, prefix: prefix, sink: sink, groups: groups)
            }
        }
        groups.leaderExited(result.processIdentifier.value)
        let code: Int = switch result.terminationStatus {
        case .exited(let c): Int(c)
        case .signaled(let s): 128 + Int(s)
        }
        return .finished(code: code, stdout: result.closureResult.0, stderr: result.closureResult.1)
    }

    private static func readLines<I: InputProtocol>(_ execution: Execution<I, SequenceOutput, SequenceOutput>, prefix: String,
                                                    sink: @escaping @Sendable (String) -> Void,
                                                    groups: ProcessGroups) async throws -> ([UInt8], [UInt8]) {
        groups.started(execution.processIdentifier.value)
        async let out = collectLines(execution.standardOutput, prefix: prefix, sink: sink)
        async let err = collectLines(execution.standardError, prefix: prefix, sink: sink)
        return try await (out, err)
    }

    /// Captures a stream (up to the output limit) and hands each complete
    /// line to `sink`; a last line without a newline goes out at the end.
    private static func collectLines(_ sequence: SubprocessOutputSequence, prefix: String,
                                     sink: @Sendable (String) -> Void) async throws -> [UInt8] {
        var captured: [UInt8] = []
        var partial: [UInt8] = []
        for try await buffer in sequence {
            try buffer.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(ExecSetupError) in
                if captured.count + raw.count > outputLimit {
                    throw ExecSetupError(message: "output over \(outputLimit >> 20) MiB")
                }
                captured.append(contentsOf: raw)
                var start = raw.startIndex
                for i in raw.indices where raw[i] == UInt8(ascii: "\n") {
                    partial.append(contentsOf: raw[start..<i])
                    sink(prefix + String(decoding: partial, as: UTF8.self))
                    partial.removeAll(keepingCapacity: true)
                    start = i + 1
                }
                partial.append(contentsOf: raw[start...])
            }
        }
        if !partial.isEmpty { sink(prefix + String(decoding: partial, as: UTF8.self)) }
        return captured
    }

    /// The bytes in an unlinked temporary file, positioned at its start.
    private static func stdinFile(_ bytes: [UInt8]) throws -> FileDescriptor {
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
        return FileDescriptor(rawValue: fd)
    }
}

struct ExecSetupError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

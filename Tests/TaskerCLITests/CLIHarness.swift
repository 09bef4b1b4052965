import Foundation

/// The `tasker` executable built next to the test bundle.
func taskerBinary() -> URL {
    let bundleDir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    let candidates = [bundleDir.appendingPathComponent("tasker"),
                      bundleDir.deletingLastPathComponent().appendingPathComponent("tasker")]
    for c in candidates where FileManager.default.isExecutableFile(atPath: c.path) { return c }
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    return root.appendingPathComponent(".build/debug/tasker")
}

struct CLIResult {
    var status: Int32
    var stdout: String
    var stderr: String
    /// When the harness's own thread saw the process exit (`Background`):
    /// the await that returns the result may resume much later on a busy
    /// machine, when the suite's other tests hold the shared threads.
    var exited: Date?
}

/// A temporary directory with the given files; removed by `cleanup()`.
struct Scratch {
    let dir: URL

    init(_ files: [String: String]) throws {
        dir = URL(fileURLWithPath: "/tmp/tkcli-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        for (name, text) in files {
            let file = dir.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try text.write(to: file, atomically: true, encoding: .utf8)
        }
    }

    func cleanup() { try? FileManager.default.removeItem(at: dir) }
}

/// Starts `executable` with `args` in `cwd`, its output in pipes.
func launch(_ args: [String], in cwd: URL?, executable: URL = taskerBinary(),
                    environment: [String: String]? = nil) throws -> (Child, out: Pipe, err: Pipe) {
    // Each test's runs go to a journal of its own (in its scratch
    // directory), never to the user's.
    var env = environment ?? ProcessInfo.processInfo.environment
    if env["TASKER_STATE_DIR"] == nil {
        let scratch = cwd.map { $0.path.hasPrefix("/tmp/") } ?? false
        env["TASKER_STATE_DIR"] = scratch ? cwd!.appendingPathComponent(".tasker-state").path
                                          : NSTemporaryDirectory() + "tasker-tests-state-\(getpid())"
    }
    let out = Pipe.closedOnExec(), err = Pipe.closedOnExec()
    let p = try Child(executable, args, in: cwd, environment: env, stdout: out, stderr: err)
    return (p, out, err)
}

/// Runs tasker with `args` in `cwd` and waits for it to exit.
func tasker(_ args: [String], in cwd: URL? = nil) async throws -> CLIResult {
    try await collect(launch(args, in: cwd))
}

/// Runs `script` with /bin/sh in `cwd`, `$TASKER` naming the binary.
func shell(_ script: String, in cwd: URL) async throws -> CLIResult {
    var env = ProcessInfo.processInfo.environment
    env["TASKER"] = taskerBinary().path
    return try await collect(launch(["-c", script], in: cwd, executable: URL(fileURLWithPath: "/bin/sh"), environment: env))
}

/// Reads both pipes to their end and waits for the exit.
func collect(_ started: (Child, out: Pipe, err: Pipe)) async -> CLIResult {
    let (p, out, err) = started
    return await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: drain(p, out: out, err: err)) }.start()
    }
}

/// Blocks until `p` exits and its stdout and stderr end; `seen` is stdout
/// read already. Both pipes are read at once (a child that fills one while
/// the other is read would wait forever), and they get 30 s after the exit:
/// a descendant still holding them fails the test instead of hanging the
/// suite. A child still running after `exitLimit` is killed (`waitForExit`).
func drain(_ p: Child, out: Pipe, err: Pipe, seen: String = "") -> CLIResult {
    let texts = PipeTexts()
    let ended = DispatchGroup()
    for (handle, isErr) in [(out.fileHandleForReading, false), (err.fileHandleForReading, true)] {
        ended.enter()
        Thread {
            texts.set(String(decoding: handle.readDataToEndOfFile(), as: UTF8.self), isErr: isErr)
            ended.leave()
        }.start()
    }
    let (status, killed) = waitForExit(p)
    let late = ended.wait(timeout: .now() + 30) == .timedOut
    let (o, e) = texts.get()
    return CLIResult(status: status, stdout: seen + o,
                     stderr: e + (late ? pipesStillOpen : "") + (killed ? killedAtTheLimit : ""))
}

/// Added to stderr when a child's pipes outlive it (`drain`, `Background.finish`).
let pipesStillOpen = "\n[test harness: stdout or stderr still open 30 s after the exit]"

/// What the two readers of `drain` read.
private final class PipeTexts: @unchecked Sendable {
    // Safety: `out` and `err` are only touched with `lock` held.
    private let lock = NSLock()
    private var out = "", err = ""
    func set(_ text: String, isErr: Bool) { lock.withLock { if isErr { err = text } else { out = text } } }
    func get() -> (String, String) { lock.withLock { (out, err) } }
}

/// Starts tasker, waits until its stdout shows `marker`, sends `signals`
/// (one after each marker in turn), and returns how it ended.
func taskerInterrupted(_ args: [String], in cwd: URL, markers: [String], signal sig: Int32 = SIGINT) async throws -> CLIResult {
    let (p, out, err) = try launch(args, in: cwd)
    return await withCheckedContinuation { continuation in
        Thread {
            var seen = ""
            var pending = markers[...]
            while let marker = pending.first {
                let chunk = out.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                seen += String(decoding: chunk, as: UTF8.self)
                if seen.contains(marker) {
                    pending = pending.dropFirst()
                    kill(p.processIdentifier, sig)
                }
            }
            continuation.resume(returning: drain(p, out: out, err: err, seen: seen))
        }.start()
    }
}

/// A tasker process the test runs beside others (a worker): its stdout and
/// stderr are read as they come, so the test can wait for a line before acting.
final class Background: @unchecked Sendable {
    // Safety: `out`, `err` and `open` are guarded by `lock`; the rest is set in init.
    let process: Child
    private let lock = NSCondition()
    private var out = ""
    private var err = ""
    private var open = 2

    init(_ args: [String], in cwd: URL, environment: [String: String]? = nil, executable: URL = taskerBinary()) throws {
        let (p, o, e) = try launch(args, in: cwd, executable: executable,
                                   environment: ProcessInfo.processInfo.environment.merging(environment ?? [:]) { $1 })
        process = p
        for (pipe, isErr) in [(o, false), (e, true)] {
            Thread { [self] in
                while true {
                    let chunk = pipe.fileHandleForReading.availableData
                    lock.lock()
                    if chunk.isEmpty {
                        open -= 1
                    } else if isErr {
                        err += String(decoding: chunk, as: UTF8.self)
                    } else {
                        out += String(decoding: chunk, as: UTF8.self)
                    }
                    lock.broadcast()
                    lock.unlock()
                    if chunk.isEmpty { break }
                }
            }.start()
        }
    }

    var pid: Int32 { process.processIdentifier }

    /// What it has written to stdout so far.
    var output: String {
        lock.lock()
        defer { lock.unlock() }
        return out
    }

    /// What it has written to stderr so far.
    var errors: String {
        lock.lock()
        defer { lock.unlock() }
        return err
    }

    /// Waits (at most `seconds`) until stdout (or stderr) contains `text`,
    /// on a thread of its own: blocking one of the few threads async tests
    /// share could starve the very process it waits for.
    func waitFor(_ text: String, onStderr: Bool = false, seconds: Double = 60) async -> Bool {
        await withCheckedContinuation { continuation in
            Thread { [self] in continuation.resume(returning: blockingWait(text, onStderr, seconds)) }.start()
        }
    }

    private func blockingWait(_ text: String, _ onStderr: Bool, _ seconds: Double) -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        lock.lock()
        defer { lock.unlock() }
        while !(onStderr ? err : out).contains(text) {
            if open == 0 || !lock.wait(until: deadline) { return (onStderr ? err : out).contains(text) }
        }
        return true
    }

    func signal(_ sig: Int32) { kill(process.processIdentifier, sig) }

    /// `finish()`, but a process still running after `seconds` is killed
    /// (SIGKILL) and its status reads -1: a hang fails the test instead of
    /// the suite.
    func finish(within seconds: Double) async -> CLIResult {
        let exited = await withCheckedContinuation { continuation in
            Thread { [self] in
                let deadline = Date(timeIntervalSinceNow: seconds)
                while process.exitStatus == nil && Date() < deadline { usleep(20_000) }
                continuation.resume(returning: process.exitStatus != nil)
            }.start()
        }
        if !exited { signal(SIGKILL) }
        var result = await finish()
        if !exited { result.status = -1 }
        return result
    }

    /// Waits for the exit and both streams' end (at most 30 s after the
    /// exit, as `drain`).
    func finish() async -> CLIResult {
        await withCheckedContinuation { continuation in
            Thread { [self] in
                let (status, killed) = waitForExit(process)
                let exited = Date()
                let deadline = Date(timeIntervalSinceNow: 30)
                lock.lock()
                while open > 0, lock.wait(until: deadline) {}
                let late = (open > 0 ? pipesStillOpen : "") + (killed ? killedAtTheLimit : "")
                let result = CLIResult(status: status, stdout: out, stderr: err + late, exited: exited)
                lock.unlock()
                continuation.resume(returning: result)
            }.start()
        }
    }
}

/// Runs `command` with /bin/sh in a pseudo-terminal (through `script`) in
/// `dir`, its journal there too; everything it drew. Colours stay on (as
/// for most users) unless `noColor`.
func inPseudoTerminal(_ command: String, in dir: URL, noColor: Bool = false) async throws -> String {
    var environment = ProcessInfo.processInfo.environment
    environment["NO_COLOR"] = noColor ? "1" : nil
    environment["TASKER_STATE_DIR"] = dir.appendingPathComponent(".tasker-state").path
    let out = Pipe.closedOnExec()
    let p = try Child(URL(fileURLWithPath: "/usr/bin/script"), ["-qfec", command, "/dev/null"], in: dir,
                      environment: environment, stdout: out)
    return await withCheckedContinuation { continuation in
        Thread {
            let data = out.fileHandleForReading.readDataToEndOfFile()
            waitForExit(p)
            continuation.resume(returning: String(decoding: data, as: UTF8.self))
        }.start()
    }
}

extension Pipe {
    /// A pipe whose ends no other program inherits. Foundation's are not
    /// close-on-exec: a program started meanwhile by other means (system,
    /// the runtime's own spawner in the Lua tests) would keep the write end
    /// open, and a test waiting for the end of its child's output would
    /// wait for that program too. The child it is meant for still gets it
    /// (dup2 onto 0-2 clears the flag).
    static func closedOnExec() -> Pipe {
        let pipe = Pipe()
        for fd in [pipe.fileHandleForReading.fileDescriptor, pipe.fileHandleForWriting.fileDescriptor] {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        return pipe
    }
}

import Foundation
import CLuaShim
import TaskerCore

/// Runs a pipeline file start to finish.
///
///     let result = PipelineRunner.run(path: "pipeline.lua", options: .init())
///     exit(result.exitCode)
public enum PipelineRunner {
    /// Runs on the calling thread, which becomes the loop thread, and
    /// returns when the run has ended. `started` is called on the loop with
    /// the runtime once it exists (signal handlers, status line).
    public static func run(path: String, options: LuaRuntime.Options,
                           started: ((LuaRuntime) -> Void)? = nil) -> RunResult {
        let loop = EventLoop()
        var result: RunResult?
        var runtime: LuaRuntime?
        // The process's only run: its loop waits on the children's pipes
        // itself (one thread fewer).
        let hosted = options.soleRun && ProcessReactor.shared.host(on: loop)
        defer { if hosted { ProcessReactor.shared.unhost() } }
        loop.run {
            do {
                let rt = try LuaRuntime(loop: loop, options: options)
                runtime = rt
                rt.callbacks.finished = { r in
                    result = r
                    loop.stop()
                }
                started?(rt)
                rt.start(path: path)
            } catch {
                result = RunResult(exitCode: 2, counts: [:], failed: [], mainError: "\(error)", seconds: 0)
                loop.stop()
            }
        }
        if !options.tearDown, let runtime {
            _ = Unmanaged.passRetained(runtime)  // deliberately never released
        }
        withExtendedLifetime(runtime) {}
        return result ?? RunResult(exitCode: 2, counts: [:], failed: [], mainError: "tasker: the run ended early", seconds: 0)
    }

    /// Runs on a new thread (for async callers such as tests).
    public static func run(path: String, options: LuaRuntime.Options) async -> RunResult {
        await withCheckedContinuation { (continuation: CheckedContinuation<RunResult, Never>) in
            let thread = Thread {
                continuation.resume(returning: run(path: path, options: options, started: nil))
            }
            thread.stackSize = 16 << 20
            thread.start()
        }
    }

    /// Why the pipeline file cannot be read ("cannot open 'x.lua': No such
    /// file or directory", quoted as `fs` errors are), or nil.
    public static func unreadable(path: String) -> String? {
        // O_NONBLOCK: the look at a FIFO without a writer does not wait for one
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return "cannot open '\(path)': \(String(cString: strerror(errno)))" }
        defer { close(fd) }
        var st = stat()
        if fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR {
            return "cannot open '\(path)': \(String(cString: strerror(EISDIR)))"
        }
        return nil
    }

    /// Compiles a file without running it: nil, or "file:line: message".
    public static func check(path: String) -> String? {
        LuaRuntime.compileOnly(path: path)
    }
}

/// The C stream Lua's `print` and `io.write` use: other output meant to
/// interleave with it in order (`--events -`) goes through it too.
public func luaStandardOutput() -> UnsafeMutablePointer<FILE> { tasker_stdout() }

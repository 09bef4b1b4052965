import Foundation
import TaskerLua

/// An output the user named (`--events PATH`, or `-` for stdout), opened in
/// place with open(2): a FIFO, a symlink or `/dev/stdout` stays what it is
/// (a temp-file-and-rename would replace it). The first write error is kept
/// so the run can say so and exit non-zero instead of losing output quietly.
final class OutputFile {
    let path: String
    private let file: UnsafeMutablePointer<FILE>
    private(set) var error: String?

    /// Opens `path` for writing (created 0644 or truncated); `-` is stdout.
    init(path: String) throws(OutputError) {
        self.path = path
        if path == "-" {
            file = luaStandardOutput()
            return
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw OutputError(path: path, reason: String(cString: strerror(errno))) }
        guard let f = fdopen(fd, "w") else {
            close(fd)
            throw OutputError(path: path, reason: String(cString: strerror(errno)))
        }
        file = f
    }

    /// Writes `line` and a newline, then flushes (a reader sees each event
    /// as it happens). After a failure nothing more is written.
    func writeLine(_ line: String) {
        guard error == nil else { return }
        var ok = true
        line.utf8CString.withUnsafeBufferPointer { b in
            ok = fwrite(b.baseAddress, 1, b.count - 1, file) == b.count - 1 && fputc(0x0A, file) != EOF
        }
        if ok { ok = fflush(file) == 0 }
        if !ok { error = "cannot write to '\(path)': \(String(cString: strerror(errno)))" }
    }
}

struct OutputError: Error, CustomStringConvertible {
    let path: String
    let reason: String
    var description: String { "cannot open '\(path)' for writing: \(reason)" }
}

/// The process's standard streams.
enum StandardStreams {
    /// Called first thing. A reader that goes away (`tasker run p | head -1`)
    /// or a child that does not read its stdin must not kill tasker:
    /// SIGPIPE is ignored and EPIPE is an ordinary write error. A closed
    /// stdout (`>&-`) gets a placeholder, so that no file tasker opens later
    /// takes descriptor 1 and receives `print` output; writing to it fails
    /// and is reported.
    static func prepare() {
        signal(SIGPIPE, SIG_IGN)
        for fd: Int32 in 0...2 where fcntl(fd, F_GETFD) == -1 {
            // stdout: read-only, so writing fails and is reported; stderr:
            // writable, so messages vanish quietly; stdin: empty.
            let placeholder = open("/dev/null", fd == 2 ? O_WRONLY : O_RDONLY)
            if placeholder >= 0 && placeholder != fd {
                dup2(placeholder, fd)
                close(placeholder)
            }
        }
    }

    /// Flushes stdout; a message if anything written to it was lost.
    static func stdoutError() -> String? {
        errno = 0
        let flushed = fflush(luaStandardOutput()) == 0
        guard !flushed || ferror(luaStandardOutput()) != 0 else { return nil }
        let reason = errno != 0 ? String(cString: strerror(errno)) : "output was lost"
        return "cannot write to stdout: \(reason)"
    }
}

import Foundation
import TaskerCore
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

    /// Writes `text` into `path` in place, as a whole (created 0644 or
    /// truncated): like `init(path:)`, a symlink, a FIFO or a device stays
    /// what it is, where a temp file and rename would replace it.
    static func write(_ text: String, to path: String) throws(OutputError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw OutputError(path: path, reason: String(cString: strerror(errno))) }
        var failure: Int32 = 0
        var text = SecretMask.shared.mask(text)
        text.withUTF8 { bytes in
            var done = 0
            while done < bytes.count {
                let n = Glibc.write(fd, bytes.baseAddress! + done, bytes.count - done)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else {
                    failure = n < 0 ? errno : EIO
                    return
                }
                done += n
            }
        }
        // close reports what a network or full file system deferred.
        if close(fd) != 0 && failure == 0 && errno != EINTR { failure = errno }
        if failure != 0 { throw OutputError(path: path, reason: String(cString: strerror(failure))) }
    }

    /// Writes `line` (JSON: the events file) and a newline, then flushes (a
    /// reader sees each event as it happens). After a failure nothing more
    /// is written.
    func writeLine(_ line: String) {
        guard error == nil else { return }
        let line = SecretMask.shared.maskJSON(line)
        var ok = true
        line.utf8CString.withUnsafeBufferPointer { b in
            ok = fwrite(b.baseAddress, 1, b.count - 1, file) == b.count - 1 && fputc(0x0A, file) != EOF
        }
        if ok { ok = fflush(file) == 0 }
        if !ok { error = "cannot write to '\(path)': \(String(cString: strerror(errno)))" }
    }
}

/// Text for stdout made in pieces and written in chunks: a long listing
/// goes out as it is made, never held whole. The first write error stops
/// it (a reader that went away: `tasker show last | head`).
struct StdoutChunks {
    private var buffer = ""
    static let chunk = 1 << 16

    mutating func write(_ s: String) throws(StdoutError) {
        buffer += s
        if buffer.utf8.count >= Self.chunk { try flush() }
    }

    mutating func line(_ s: String) throws(StdoutError) {
        buffer += s
        buffer += "\n"
        if buffer.utf8.count >= Self.chunk { try flush() }
    }

    mutating func flush() throws(StdoutError) {
        let out = luaStandardOutput()
        let written = buffer.withUTF8 { b in b.isEmpty ? 0 : fwrite(b.baseAddress, 1, b.count, out) }
        let ok = written == buffer.utf8.count && fflush(out) == 0
        buffer.removeAll(keepingCapacity: true)
        if !ok { throw StdoutError(reason: String(cString: strerror(errno))) }
    }
}

struct StdoutError: Error, CustomStringConvertible {
    let reason: String
    var description: String { "cannot write to stdout: \(reason)" }
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

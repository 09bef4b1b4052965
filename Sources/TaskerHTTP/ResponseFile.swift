#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// A response body written to disk as it arrives (`to_file=`): into a
/// temporary file beside the target, renamed over it once complete, so the
/// target is the old file or the whole new one, never half of one.
final class ResponseFile {
    let path: String
    /// nil: written in place (a device).
    let temporary: String?
    private var fd: Int32
    private(set) var written = 0

    struct Failure: Error { let message: String }

    private init(path: String, temporary: String?, fd: Int32) {
        self.path = path
        self.temporary = temporary
        self.fd = fd
    }

    /// A temporary file beside `path`, with the mode `path` has (or a new
    /// file's, from the umask). A character device (`/dev/null`) is written
    /// in place: it is not a file to replace. Anything else that is not a
    /// regular file is refused.
    static func open(beside path: String) -> Result<ResponseFile, Failure> {
        var st = stat()
        var mode = 0o666 & ~processUmask
        if stat(path, &st) == 0 {
            switch st.st_mode & S_IFMT {
            case S_IFREG:
                mode = st.st_mode & 0o7777
            case S_IFCHR:
                let fd = Glibc.open(path, O_WRONLY | O_CLOEXEC)
                guard fd >= 0 else { return .failure(Failure(message: String(cString: strerror(errno)))) }
                return .success(ResponseFile(path: path, temporary: nil, fd: fd))
            default:
                return .failure(Failure(message: "not a regular file"))
            }
        }
        var template = Array((path + ".tasker-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { return .failure(Failure(message: String(cString: strerror(errno)))) }
        _ = fchmod(fd, mode)
        let temporary = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return .success(ResponseFile(path: path, temporary: temporary, fd: fd))
    }

    /// The process's umask, read without changing it (umask(2) would, for
    /// a moment, for every thread): from /proc, else the usual 022.
    static let processUmask: mode_t = {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Umask:") }),
              let value = mode_t(line.dropFirst(6).trimmingCharacters(in: .whitespaces), radix: 8)
        else { return 0o022 }
        return value
    }()

    /// Appends `raw`; the system's reason when it cannot (a full disk).
    func write(_ raw: UnsafeRawBufferPointer) -> String? {
        var offset = 0
        while offset < raw.count {
            let n = systemWrite(fd, raw.baseAddress! + offset, raw.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                return String(cString: strerror(errno))
            }
            offset += n
        }
        written += raw.count
        return nil
    }

    /// Flushed to disk and renamed over `path`; the reason if it could not be.
    func commit() -> String? {
        defer { closeFile() }
        guard let temporary else { return nil }
        if fsync(fd) != 0 { return String(cString: strerror(errno)) }
        if rename(temporary, path) != 0 { return String(cString: strerror(errno)) }
        return nil
    }

    /// The partial file goes; `path` stays as it was.
    func discard() {
        closeFile()
        if let temporary { unlink(temporary) }
    }

    private func closeFile() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    deinit { closeFile() }
}

/// write(2), named apart from `ResponseFile.write`.
private func systemWrite(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int { write(fd, p, n) }

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
    let temporary: String
    private var fd: Int32
    private(set) var written = 0

    struct Failure: Error { let message: String }

    private init(path: String, temporary: String, fd: Int32) {
        self.path = path
        self.temporary = temporary
        self.fd = fd
    }

    static func open(beside path: String) -> Result<ResponseFile, Failure> {
        var template = Array((path + ".tasker-XXXXXX").utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { return .failure(Failure(message: String(cString: strerror(errno)))) }
        _ = fchmod(fd, 0o644)
        let temporary = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return .success(ResponseFile(path: path, temporary: temporary, fd: fd))
    }

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
        if fsync(fd) != 0 { return String(cString: strerror(errno)) }
        if rename(temporary, path) != 0 { return String(cString: strerror(errno)) }
        return nil
    }

    /// The partial file goes; `path` stays as it was.
    func discard() {
        closeFile()
        unlink(temporary)
    }

    private func closeFile() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    deinit { closeFile() }
}

/// write(2), named apart from `ResponseFile.write`.
private func systemWrite(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int { write(fd, p, n) }

#if canImport(Glibc)
import Glibc
#endif

/// Reads a file `tasker.use` runs (first, or again under `--watch`) through
/// one descriptor: looked at with stat first (a FIFO or a device is refused
/// without being opened: an open can have effects, and a FIFO waits for a
/// writer), then opened without blocking and checked again on what was
/// opened (swapped meanwhile: refused, never read as an empty file), then
/// read. Bounded: a used file is code, not data.
enum UsedFileReader {
    /// Larger is refused (a 2 GB file held the run's thread for seconds).
    static let maxBytes = 16 << 20

    struct Failure: Error {
        let message: String
        /// The file is not there (removed before a reload).
        var missing = false
    }

    static func read(_ path: String) -> Result<[UInt8], Failure> {
        var st = stat()
        guard fstatat(AT_FDCWD, path, &st, 0) == 0 else { return .failure(failure(path, errno)) }
        if let why = notAFile(st) { return .failure(Failure(message: "cannot open '\(path)': \(why)")) }
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(failure(path, errno)) }
        defer { close(fd) }
        guard fstat(fd, &st) == 0 else { return .failure(failure(path, errno)) }
        if let why = notAFile(st) { return .failure(Failure(message: "cannot open '\(path)': \(why)")) }
        guard st.st_size <= maxBytes else {
            return .failure(Failure(message: "cannot open '\(path)': \(st.st_size) bytes, more than a used file may have (\(maxBytes >> 20) MB)"))
        }
        // one byte more than the size: the read that finds nothing there is the end
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size) + 1)
        var count = 0
        while true {
            if count == bytes.count {
                // grew since the stat: read on, within the bound (and one past it)
                guard bytes.count <= maxBytes else {
                    return .failure(Failure(message: "cannot open '\(path)': more than a used file may have (\(maxBytes >> 20) MB)"))
                }
                bytes.append(contentsOf: [UInt8](repeating: 0, count: min(max(bytes.count, 4096), maxBytes + 1 - bytes.count)))
            }
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, $0.count - count) }
            if n < 0 {
                if errno == EINTR { continue }
                return .failure(failure(path, errno))
            }
            if n == 0 { break }
            count += n
        }
        bytes.removeSubrange(count...)
        return .success(bytes)
    }

    private static func notAFile(_ st: stat) -> String? {
        switch st.st_mode & S_IFMT {
        case S_IFREG: nil
        case S_IFDIR: String(cString: strerror(EISDIR))
        case S_IFIFO: "it is a FIFO, not a file"
        case S_IFSOCK: "it is a socket, not a file"
        default: "it is a device, not a file"
        }
    }

    private static func failure(_ path: String, _ code: Int32) -> Failure {
        Failure(message: "cannot open '\(path)': \(String(cString: strerror(code)))", missing: code == ENOENT)
    }
}

import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Tells when watched files change, through inotify on their directories:
/// a watch on the file itself goes deaf after an editor's atomic save
/// (write a temp file, rename it over), so directories are watched and
/// events filtered by name (`IN_CLOSE_WRITE` and `IN_MODIFY` for in-place
/// writes, `IN_MOVED_TO` for renames). The inotify descriptor waits in the
/// process reactor's epoll set beside the children's pipes (no thread of
/// its own); `onChange` runs on the reactor thread.
final class FileWatcher: ReactorStream, @unchecked Sendable {
    // Safety: `directories`, `files` and `stopped` are guarded by `lock`;
    // `fd` is set in init and closed only by the reactor thread, once, after
    // `stop` (`interest` then says nil and the reactor lets go).
    let fd: Int32
    private let lock = NSLock()
    private var directories: [Int32: String] = [:]
    private var files: Set<String> = []
    private var stopped = false
    private var closed = false
    private let onChange: @Sendable (String) -> Void

    init(onChange: @escaping @Sendable (String) -> Void) throws {
        #if canImport(Glibc)
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        #else
        fd = -1
        #endif
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        self.onChange = onChange
        ProcessReactor.shared.add(self)
    }

    /// Starts watching `path` (absolute or relative to the working directory).
    func watch(file path: String) throws {
        let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
        let directory = (absolute as NSString).deletingLastPathComponent
        lock.lock()
        defer { lock.unlock() }
        files.insert(absolute)
        guard !directories.values.contains(directory) else { return }
        #if canImport(Glibc)
        // IN_MODIFY too: a writer still writing pushes the reload back.
        let wd = inotify_add_watch(fd, directory, UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MODIFY))
        guard wd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        directories[wd] = directory
        #endif
    }

    /// Stops watching; the reactor closes the descriptor.
    func stop() {
        lock.lock()
        stopped = true
        lock.unlock()
        ProcessReactor.shared.poke()
    }

    // MARK: on the reactor

    func interest() -> Int16? {
        lock.lock()
        let stop = stopped
        lock.unlock()
        guard stop else { return Int16(POLLIN) }
        if !closed {
            closed = true
            close(fd)
        }
        return nil
    }

    func ready(_ revents: Int16, _ buffer: inout [UInt8]) { readEvents() }

    private func readEvents() {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var changed: [String] = []
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { break }
            var offset = 0
            // struct inotify_event: int wd; uint32 mask, cookie, len; char name[len]
            while offset + 16 <= n {
                let wd = buffer.withUnsafeBytes { $0.load(fromByteOffset: offset, as: Int32.self) }
                let len = Int(buffer.withUnsafeBytes { $0.load(fromByteOffset: offset + 12, as: UInt32.self) })
                let nameBytes = buffer[(offset + 16)..<min(offset + 16 + len, n)].prefix { $0 != 0 }
                let name = String(decoding: nameBytes, as: UTF8.self)
                offset += 16 + len
                lock.lock()
                let directory = directories[wd]
                lock.unlock()
                guard let directory, !name.isEmpty else { continue }
                let path = directory + "/" + name
                lock.lock()
                let watched = files.contains(path)
                lock.unlock()
                if watched && !changed.contains(path) { changed.append(path) }
            }
        }
        for path in changed { onChange(path) }
    }
}

import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Tells when watched files change, through inotify on their directories:
/// a watch on the file itself goes deaf after an editor's atomic save
/// (write a temp file, rename it over), so directories are watched and
/// events filtered by name (`IN_CLOSE_WRITE` and `IN_MODIFY` for in-place
/// writes, `IN_MOVED_TO` for renames). The directories of every entry the
/// path resolves through are watched too (see `WatchedPath`): when one of
/// those changes, the path is resolved again, and it changed if it now
/// reads another file (or the same one, changed) that exists. The inotify
/// descriptor waits in the process reactor's epoll set beside the
/// children's pipes (no thread of its own); `onChange` runs on the reactor
/// thread.
final class FileWatcher: ReactorStream, @unchecked Sendable {
    // Safety: `directories`, `watched` and `stopped` are guarded by `lock`;
    // `fd` is set in init and closed only by the reactor thread, once, after
    // `stop` (`interest` then says nil and the reactor lets go).
    let fd: Int32
    private let lock = NSLock()
    private var directories: [Int32: String] = [:]
    private var watchDescriptors: [String: Int32] = [:]
    private var watched: [String: (path: WatchedPath, stamp: FileStamp?)] = [:]
    private var stopped = false
    private var closed = false
    private let onChange: @Sendable (String) -> Void

    #if canImport(Glibc)
    /// In-place writes, renames over, and entries made or removed (a link
    /// swapped, a directory made again).
    private static let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MODIFY | IN_CREATE | IN_DELETE | IN_MOVED_FROM)
    /// What changes a file's content where it is.
    private static let contentChange = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MODIFY)
    #endif

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
        lock.lock()
        defer { lock.unlock() }
        let resolved = WatchedPath(resolving: absolute)
        try follow(resolved, required: WatchedPath.parent(of: resolved.target))
        watched[absolute] = (resolved, FileStamp(resolved.target))
    }

    /// Watches every directory `path` hangs on (under `lock`). Only
    /// `required` must be watchable: a parent may be out of reach.
    private func follow(_ path: WatchedPath, required: String? = nil) throws {
        #if canImport(Glibc)
        for directory in path.directories where watchDescriptors[directory] == nil {
            // IN_MODIFY too: a writer still writing pushes the reload back.
            let wd = inotify_add_watch(fd, directory, Self.mask)
            guard wd >= 0 else {
                if directory == required { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
                continue
            }
            directories[wd] = directory
            watchDescriptors[directory] = wd
        }
        #endif
    }

    /// Stops watching directories no watched path hangs on any more (under
    /// `lock`): a ConfigMap's old directories, a link's old target.
    private func unfollowUnused() {
        #if canImport(Glibc)
        let used = watched.values.reduce(into: Set<String>()) { $0.formUnion($1.path.directories) }
        for (directory, wd) in watchDescriptors where !used.contains(directory) {
            inotify_rm_watch(fd, wd)
            directories[wd] = nil
            watchDescriptors[directory] = nil
        }
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

    func ready(_ revents: Int16, _ buffer: inout [UInt8]) {
        lock.lock()
        let changed = readEvents()
        lock.unlock()
        for path in changed { onChange(path) }
    }

    /// The watched paths that changed (under `lock`).
    private func readEvents() -> [String] {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var changed: [String] = []
        var moved: Set<String> = []
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { break }
            var offset = 0
            // struct inotify_event: int wd; uint32 mask, cookie, len; char name[len]
            while offset + 16 <= n {
                let wd = buffer.withUnsafeBytes { $0.load(fromByteOffset: offset, as: Int32.self) }
                let mask = buffer.withUnsafeBytes { $0.load(fromByteOffset: offset + 4, as: UInt32.self) }
                let len = Int(buffer.withUnsafeBytes { $0.load(fromByteOffset: offset + 12, as: UInt32.self) })
                let nameBytes = buffer[(offset + 16)..<min(offset + 16 + len, n)].prefix { $0 != 0 }
                let name = String(decoding: nameBytes, as: UTF8.self)
                offset += 16 + len
                #if canImport(Glibc)
                if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                    moved.formUnion(watched.keys)  // events were lost: look again at every path
                    continue
                }
                if mask & UInt32(IN_IGNORED) != 0, let directory = directories.removeValue(forKey: wd) {
                    // removed, or its file system unmounted: watched again
                    // if it comes back (its parent's entry says so)
                    watchDescriptors[directory] = nil
                    continue
                }
                guard let directory = directories[wd], !name.isEmpty else { continue }
                for (key, w) in watched where w.path.contains(directory, name) {
                    if w.path.isFile(directory, name), mask & Self.contentChange != 0 {
                        if !changed.contains(key) { changed.append(key) }
                        watched[key]?.stamp = FileStamp(w.path.target)
                    } else {
                        moved.insert(key)
                    }
                }
                #endif
            }
        }
        for key in moved {
            guard let old = watched[key] else { continue }
            let path = WatchedPath(resolving: key)
            try? follow(path)
            // read after the new watches are in: a write in between is seen
            let stamp = FileStamp(path.target)
            watched[key] = (path, stamp ?? old.stamp)
            if let stamp, stamp != old.stamp, !changed.contains(key) { changed.append(key) }
        }
        if !moved.isEmpty { unfollowUnused() }
        return changed
    }
}

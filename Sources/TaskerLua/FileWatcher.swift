import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Tells when watched files change, through inotify on directories: a
/// watch on the file itself goes deaf after an editor's atomic save (write
/// a temp file, rename it over), so directories are watched and events
/// filtered by name. Every directory the path resolves through is watched
/// (see `WatchedPath`). A write to the file (`IN_CLOSE_WRITE`, `IN_MODIFY`)
/// is a change; any other event on an entry of the path (a rename over the
/// file, a link swapped, a directory removed, renamed or made) resolves the
/// path again, watches what it now goes through, and is a change when the
/// path now reads another file (or the same one, changed). A path that
/// leads to no regular file (removed, a loop of links, a device) is no
/// change: the old version stays. The inotify descriptor waits in the
/// process reactor's epoll set beside the children's pipes (no thread of
/// its own); `onChange` and `onProblem` run on the reactor thread.
final class FileWatcher: ReactorStream, @unchecked Sendable {
    // Safety: every var below is guarded by `lock`; `fd` is set in init and
    // closed only by the reactor thread, once, after `stop` (`interest`
    // then says nil and the reactor lets go).
    let fd: Int32
    private let lock = NSLock()
    private var directories: [Int32: [UInt8]] = [:]
    private var watchDescriptors: [[UInt8]: Int32] = [:]
    private var watched: [String: (path: WatchedPath, stamp: FileStamp?)] = [:]
    /// Directories already reported as not watchable.
    private var reported: Set<[UInt8]> = []
    private var stopped = false
    private var closed = false
    private let onChange: @Sendable (String) -> Void
    private let onProblem: @Sendable (String) -> Void

    #if canImport(Glibc)
    /// Writes, entries made, removed or renamed, and the directory itself
    /// removed or renamed away.
    private static let mask = UInt32(IN_CLOSE_WRITE | IN_MODIFY | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE
                                     | IN_DELETE_SELF | IN_MOVE_SELF)
    /// What changes a file's content where it is.
    private static let write = UInt32(IN_CLOSE_WRITE | IN_MODIFY)
    #endif

    /// A directory that cannot be watched (permissions, a name too long).
    struct CannotWatch: Error, CustomStringConvertible {
        let directory: [UInt8]
        let code: Int32
        var description: String { "cannot watch '\(String(decoding: directory, as: UTF8.self))': \(String(cString: strerror(code)))" }
    }

    init(onChange: @escaping @Sendable (String) -> Void, onProblem: @escaping @Sendable (String) -> Void = { _ in }) throws {
        #if canImport(Glibc)
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        #else
        fd = -1
        #endif
        guard fd >= 0 else { throw CannotWatch(directory: Array("(inotify)".utf8), code: errno) }
        self.onChange = onChange
        self.onProblem = onProblem
        ProcessReactor.shared.add(self)
    }

    /// Starts watching `path` (absolute or relative to the working
    /// directory). Throws when the file's own directory cannot be watched.
    func watch(file path: String) throws {
        let absolute = Self.absolute(path)
        lock.lock()
        defer { lock.unlock() }
        let resolved = WatchedPath(resolving: Self.fromRoot(absolute))
        if let failure = follow(resolved).first(where: { resolved.fileEntry?.directory == $0.directory }) {
            throw failure
        }
        watched[absolute] = (resolved, FileStamp(resolved.target))
    }

    /// Watches every directory `path` goes through (under `lock`), again
    /// each time: a directory made again at the same path is another inode,
    /// and gets a watch of its own. Returns the directories that exist but
    /// cannot be watched.
    @discardableResult
    private func follow(_ path: WatchedPath) -> [CannotWatch] {
        var failures: [CannotWatch] = []
        #if canImport(Glibc)
        for directory in path.directories {
            let wd = Files.withCPath(directory) { inotify_add_watch(fd, $0, Self.mask) }
            guard wd >= 0 else {
                let code = errno
                // gone, or not a directory now: the entry above says when it is back
                if code != ENOENT && code != ENOTDIR {
                    failures.append(CannotWatch(directory: directory, code: code))
                }
                continue
            }
            if let old = watchDescriptors[directory], old != wd { forget(old) }
            directories[wd] = directory
            watchDescriptors[directory] = wd
        }
        #endif
        return failures
    }

    /// Lets go of a watch (under `lock`): its directory was renamed away or
    /// replaced.
    private func forget(_ wd: Int32) {
        #if canImport(Glibc)
        guard let directory = directories.removeValue(forKey: wd) else { return }
        if watchDescriptors[directory] == wd { watchDescriptors[directory] = nil }
        inotify_rm_watch(fd, wd)
        #endif
    }

    /// Stops watching directories no watched path goes through any more
    /// (under `lock`): a ConfigMap's old directories, a link's old target.
    private func unfollowUnused() {
        let used = watched.values.reduce(into: Set<[UInt8]>()) { $0.formUnion($1.path.directories) }
        for (wd, directory) in directories where !used.contains(directory) { forget(wd) }
    }

    /// `path` from `/`: the working directory before a relative one, and
    /// nothing else changed (`..` is the kernel's to resolve, on disk).
    /// A working directory whose name is not UTF-8 cannot be text: the
    /// path stays relative then (the kernel resolves it from there).
    static func absolute(_ path: String) -> String {
        guard !path.hasPrefix("/"), let cwd = String(validating: workingDirectory, as: UTF8.self) else { return path }
        return cwd + "/" + path
    }

    /// `path` from `/` as bytes (a relative one from the working directory).
    static func fromRoot(_ path: String) -> [UInt8] {
        path.hasPrefix("/") ? Array(path.utf8) : workingDirectory + [0x2F] + Array(path.utf8)
    }

    /// The working directory's bytes (Foundation's makes each byte that is
    /// not UTF-8 U+FFFD, another directory).
    static var workingDirectory: [UInt8] {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return [0x2E] }
        return buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
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
        let (changed, problems) = readEvents()
        lock.unlock()
        for problem in problems { onProblem(problem) }
        for path in changed { onChange(path) }
    }

    /// The watched paths that changed, and what could not be watched
    /// (under `lock`).
    private func readEvents() -> (changed: [String], problems: [String]) {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var changed: [String] = []
        var recheck: Set<String> = []
        #if canImport(Glibc)
        // a bounded number of reads a wake (the set is level-triggered: the
        // rest is read at the next): a writer that makes an event with each
        // one read (a log in a watched directory) cannot hold the thread
        for _ in 0..<16 {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { break }
            var offset = 0
            // struct inotify_event: int wd; uint32 mask, cookie, len; char name[len]
            while offset + 16 <= n {
                let wd = buffer.withUnsafeBytes { $0.load(fromByteOffset: offset, as: Int32.self) }
                let mask = buffer.withUnsafeBytes { $0.load(fromByteOffset: offset + 4, as: UInt32.self) }
                let len = Int(buffer.withUnsafeBytes { $0.load(fromByteOffset: offset + 12, as: UInt32.self) })
                let name = Array(buffer[(offset + 16)..<min(offset + 16 + len, n)].prefix { $0 != 0 })
                offset += 16 + len
                if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                    recheck.formUnion(watched.keys)  // events were lost: look again at every path
                    continue
                }
                guard let directory = directories[wd] else { continue }
                if mask & UInt32(IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF) != 0 {
                    // the directory is gone from its path: what went through it resolves again
                    forget(wd)
                    for (key, w) in watched where w.path.dependsOn(directory) { recheck.insert(key) }
                    continue
                }
                for (key, w) in watched where w.path.contains(directory, name) {
                    if mask & Self.write != 0, w.path.fileEntry == WatchedPath.Entry(directory: directory, name: name) {
                        // written in place: a change, if it is a file to load
                        let stamp = FileStamp(w.path.target)
                        if stamp != nil, !changed.contains(key) { changed.append(key) }
                        watched[key]?.stamp = stamp ?? w.stamp
                    } else {
                        recheck.insert(key)
                    }
                }
            }
        }
        #endif
        var problems: [String] = []
        for key in recheck {
            guard let old = watched[key] else { continue }
            let path = WatchedPath(resolving: Self.fromRoot(key))
            // the file's own directory matters (its writes are missed); one
            // above it only when it is removed, which a reader of it (711)
            // rarely is
            for failure in follow(path) where failure.directory == path.fileEntry?.directory
                && reported.insert(failure.directory).inserted {
                problems.append("\(failure); changes there are not seen")
            }
            // read after the new watches are in: a write in between is seen
            let stamp = FileStamp(path.target)
            watched[key] = (path, stamp ?? old.stamp)
            if let stamp, stamp != old.stamp, !changed.contains(key) { changed.append(key) }
        }
        if !recheck.isEmpty { unfollowUnused() }
        return (changed, problems)
    }
}

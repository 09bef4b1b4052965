#if canImport(Glibc)
import Glibc
#endif

/// What a watched path reads depends on: every directory entry met while
/// resolving it, as the kernel does (each directory on the way from `/`,
/// each symlink, a directory's included, then the file). A change to any
/// of them may change what the path reads: the target of a link edited in
/// another directory, a Kubernetes ConfigMap's `..data` link swapped to a
/// new directory, a directory removed, renamed away or made again at any
/// depth. Paths are bytes: names need not be UTF-8.
struct WatchedPath: Equatable {
    struct Entry: Hashable {
        var directory: [UInt8]
        var name: [UInt8]
    }

    /// In the order met.
    private(set) var entries: [Entry] = []
    /// The file the path leads to now (it may not exist), and its entry;
    /// nil when the path cannot be resolved (a loop of links).
    private(set) var target: [UInt8]?
    private(set) var fileEntry: Entry?

    /// Symlinks followed at most, as the kernel does (ELOOP past it).
    static let maxLinks = 40

    /// Resolves `absolute` one component at a time.
    init(resolving absolute: [UInt8]) {
        var pending = ArraySlice(Self.components(absolute))
        var current: [UInt8] = [0x2F]
        var links = 0
        while let name = pending.popFirst() {
            if name == [0x2E] { continue }
            if name == [0x2E, 0x2E] {
                current = Self.parent(of: current)
                continue
            }
            let entry = Entry(directory: current, name: name)
            entries.append(entry)
            let path = Self.join(current, name)
            if let link = Self.readLink(path) {
                links += 1
                guard links <= Self.maxLinks else { return }  // ELOOP: no target
                if link.first == 0x2F { current = [0x2F] }
                pending = ArraySlice(Self.components(link)) + pending
                continue
            }
            if pending.isEmpty { fileEntry = entry }
            current = path
        }
        target = current
    }

    /// The directories whose entries these are.
    var directories: Set<[UInt8]> { Set(entries.map(\.directory)) }

    func contains(_ directory: [UInt8], _ name: [UInt8]) -> Bool {
        entries.contains(Entry(directory: directory, name: name))
    }

    func dependsOn(_ directory: [UInt8]) -> Bool { entries.contains { $0.directory == directory } }

    private static func components(_ path: [UInt8]) -> [[UInt8]] {
        path.split(separator: 0x2F, omittingEmptySubsequences: true).map(Array.init)
    }

    private static func join(_ directory: [UInt8], _ name: [UInt8]) -> [UInt8] {
        directory == [0x2F] ? [0x2F] + name : directory + [0x2F] + name
    }

    static func parent(of path: [UInt8]) -> [UInt8] {
        guard let slash = path.lastIndex(of: 0x2F), slash != path.startIndex else { return [0x2F] }
        return Array(path[..<slash])
    }

    /// The link's text, or nil when `path` is not a symlink.
    private static func readLink(_ path: [UInt8]) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = Files.withCPath(path) { p in
            buffer.withUnsafeMutableBytes { readlink(p, $0.baseAddress!.assumingMemoryBound(to: CChar.self), $0.count - 1) }
        }
        guard n > 0 else { return nil }
        return Array(buffer[..<n])
    }
}

/// Which file a path reads and what it holds, as far as `stat` tells:
/// a different value means the path now reads something else.
struct FileStamp: Equatable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var modified: Int64

    /// Nil unless there is a regular file there (a device, a FIFO or a
    /// directory is nothing to load).
    init?(_ path: [UInt8]?) {
        guard let path else { return nil }
        var s = stat()
        guard Files.withCPath(path, { stat($0, &s) }) == 0, (s.st_mode & S_IFMT) == S_IFREG else { return nil }
        device = UInt64(s.st_dev)
        inode = UInt64(s.st_ino)
        size = Int64(s.st_size)
        modified = Int64(s.st_mtim.tv_sec) * 1_000_000_000 + Int64(s.st_mtim.tv_nsec)
    }
}

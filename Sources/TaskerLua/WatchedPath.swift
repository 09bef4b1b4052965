#if canImport(Glibc)
import Glibc
#endif

/// What a watched path reads depends on: every directory entry met while
/// resolving it (each symlink on the way, a directory's included, then the
/// file), and the entry of the file's directory in its parent. A change to
/// any of them may change what the path reads: the target of a link edited
/// in another directory, a Kubernetes ConfigMap's `..data` link swapped to
/// a new directory, a directory removed and made again.
struct WatchedPath: Equatable {
    struct Entry: Hashable {
        var directory: String
        var name: String
    }

    /// In the order met; the file's own entry is `last`.
    private(set) var entries: [Entry] = []
    /// The file the path leads to now (it may not exist).
    private(set) var target = "/"

    /// Symlinks followed at most, as the kernel does (ELOOP past it).
    static let maxLinks = 40

    /// Resolves `absolute` one component at a time, as the kernel does.
    init(resolving absolute: String) {
        var pending = ArraySlice(Self.components(absolute))
        var current = "/"
        var links = 0
        while let name = pending.popFirst() {
            if name == "." { continue }
            if name == ".." {
                current = Self.parent(of: current)
                continue
            }
            let path = Self.join(current, name)
            if links < Self.maxLinks, let link = Self.readLink(path) {
                links += 1
                entries.append(Entry(directory: current, name: name))
                if link.hasPrefix("/") { current = "/" }
                pending = ArraySlice(Self.components(link)) + pending
                continue
            }
            if pending.isEmpty { entries.append(Entry(directory: current, name: name)) }
            current = path
        }
        target = current
        let directory = Self.parent(of: target)
        if directory != "/" {
            entries.insert(Entry(directory: Self.parent(of: directory), name: Self.name(of: directory)), at: entries.count - 1)
        }
    }

    /// The directories whose entries these are.
    var directories: Set<String> { Set(entries.map(\.directory)) }

    /// Whether the entry `name` in `directory` is the file's own (its
    /// content changes there; any other entry changes the way to it).
    func isFile(_ directory: String, _ name: String) -> Bool {
        entries.last == Entry(directory: directory, name: name)
    }

    func contains(_ directory: String, _ name: String) -> Bool {
        entries.contains(Entry(directory: directory, name: name))
    }

    private static func components(_ path: String) -> [String] {
        path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    }

    private static func join(_ directory: String, _ name: String) -> String {
        directory == "/" ? "/" + name : directory + "/" + name
    }

    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }

    private static func name(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }

    /// The link's text, or nil when `path` is not a symlink.
    private static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink(path, &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Which file a path reads and what it holds, as far as `stat` tells:
/// a different value means the path now reads something else.
struct FileStamp: Equatable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var modified: Int64

    /// Nil when there is no file there (a directory is none either).
    init?(_ path: String) {
        var s = stat()
        guard stat(path, &s) == 0, (s.st_mode & S_IFMT) == S_IFREG else { return nil }
        device = UInt64(s.st_dev)
        inode = UInt64(s.st_ino)
        size = Int64(s.st_size)
        modified = Int64(s.st_mtim.tv_sec) * 1_000_000_000 + Int64(s.st_mtim.tv_nsec)
    }
}

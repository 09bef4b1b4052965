#if canImport(Glibc)
import Glibc
#endif

/// What `fs.*` does, in plain POSIX calls, with no Lua in sight: each
/// operation returns a value or an `FSFailure` naming the path and the
/// system's reason. Safe to run on any thread.
enum FileOperation: Sendable {
    case read(String)
    case write(String, FileData, mode: mode_t?, atomic: Bool)
    case append(String, FileData)
    case list(String)
    case glob(String)
    case stat(String)
    case exists(String)
    case mkdir(String, parents: Bool)
    case remove(String, recursive: Bool)
    case rename(String, String)
    case copy(String, String)
    case tempdir

    /// The function a script called (for messages).
    var function: String {
        switch self {
        case .read: "fs.read"
        case .write: "fs.write"
        case .append: "fs.append"
        case .list: "fs.list"
        case .glob: "fs.glob"
        case .stat: "fs.stat"
        case .exists: "fs.exists"
        case .mkdir: "fs.mkdir"
        case .remove: "fs.remove"
        case .rename: "fs.rename"
        case .copy: "fs.copy"
        case .tempdir: "fs.tempdir"
        }
    }

    /// Whether it changes what is on disk.
    var changesFiles: Bool {
        switch self {
        case .read, .list, .glob, .stat, .exists: false
        case .write, .append, .mkdir, .remove, .rename, .copy, .tempdir: true
        }
    }

    /// Operations that may take long (large files, big trees) run off the
    /// loop; the rest are single system calls.
    var mayBlock: Bool {
        switch self {
        case .read, .write, .append, .list, .glob, .copy, .tempdir: true
        case .remove(_, let recursive): recursive
        case .stat, .exists, .mkdir, .rename: false
        }
    }

    /// Runs the operation; `cancel` stops it between chunks and while it
    /// waits for a FIFO's peer. An atomic write comes back `.staged`: the
    /// caller commits it (or discards it if its task is gone meanwhile).
    func perform(_ cancel: FileCancel = FileCancel()) -> Result<FileResult, FSFailure> {
        do {
            return .success(try run(cancel))
        } catch {
            return .failure(error)
        }
    }

    private func run(_ cancel: FileCancel) throws(FSFailure) -> FileResult {
        switch self {
        case .read(let path): return .bytes(try Files.read(path, cancel))
        case .write(let path, let data, let mode, let atomic):
            // Through a symlink to the file it leads to (a rename over the
            // link would put a file in its place); a FIFO, a device or a
            // socket written as data comes (a rename would replace the node).
            let target = try Files.followingLinks(path, for: "cannot write")
            if atomic && !Files.isSpecial(target) {
                return .staged(try Files.stageAtomically(target, data, mode: mode, cancel))
            }
            try Files.write(target, data, mode: mode, cancel)
            return .nothing
        case .append(let path, let data):
            try Files.append(path, data, cancel)
            return .nothing
        case .list(let dir): return .names(try Files.list(dir))
        case .glob(let pattern): return .names(try Glob.match(pattern))
        case .stat(let path): return .stat(try Files.stat(path))
        case .exists(let path):
            var st = Glibc.stat()
            return .flag(lstat(path, &st) == 0)
        case .mkdir(let path, let parents):
            try Files.mkdir(path, parents: parents)
            return .nothing
        case .remove(let path, let recursive):
            try Files.remove(path, recursive: recursive, cancel)
            return .nothing
        case .rename(let from, let to):
            // rename(2) onto the same file (a hard link, itself) leaves both
            // names and the data as they are: never a truncation. Onto a
            // symlink to it, it would put the file in the link's place and
            // take its own name away; a symlink onto the file it leads to
            // would replace the file with a link to itself (its data gone):
            // both refused, as `copy` refuses.
            if Files.isSymlink(to, toSameFileAs: from) || Files.isSymlink(from, toSameFileAs: to) {
                throw FSFailure(message: "cannot rename '\(from)' to '\(to)': they are the same file", path: from)
            }
            guard Glibc.rename(from, to) == 0 else { throw FSFailure("cannot rename", from, errno, to: to) }
            return .nothing
        case .copy(let from, let to):
            // as `write`: where a symlink leads; a FIFO or a device in place
            let target = try Files.followingLinks(to, for: "cannot copy to")
            if Files.isSpecial(target) {
                try Files.copy(from, target, cancel)
                return .nothing
            }
            return .staged(try Files.stageCopy(from, target, cancel))
        case .tempdir:
            return .path(try Files.makeTempDir())
        }
    }
}

/// An atomic write whose temp file is written and synced beside its
/// target: `commit` renames it over the target, `discard` removes it. The
/// loop commits only if the task that asked is still live, so a write whose
/// task timed out or was cancelled leaves the old content.
struct StagedWrite: Sendable {
    let temp: String
    let path: String

    func commit() -> Result<FileResult, FSFailure> {
        guard Glibc.rename(temp, path) == 0 else {
            let failure = FSFailure("cannot replace", path, errno)
            discard()
            return .failure(failure)
        }
        return .success(.nothing)
    }

    func discard() { unlink(temp) }
}

/// stat(2), callable where a `stat` of our own is in scope.
private func statPath(_ path: String, _ st: inout stat) -> Int32 { stat(path, &st) }

/// The text of a NUL-terminated C string held in an array.
private func cString(_ chars: [CChar]) -> String {
    String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

enum FileResult: Sendable {
    case nothing
    case bytes([UInt8])
    /// Names or paths as the file system has them (not all are UTF-8).
    case names([[UInt8]])
    case stat(FileStatus?)
    case flag(Bool)
    case path(String)
    case staged(StagedWrite)
}

struct FileStatus: Sendable {
    var type: String
    var size: Int
    var mtime: Double
    var mode: Int
}

/// `cannot open 'x': No such file or directory` (shown as `fs: …`).
struct FSFailure: Error, Sendable {
    let message: String
    let path: String

    init(_ what: String, _ path: String, _ code: Int32, to other: String? = nil) {
        self.path = path
        let target = other.map { " to '\($0)'" } ?? ""
        message = "\(what) '\(path)'\(target): \(String(cString: strerror(code)))"
    }

    init(message: String, path: String) {
        self.message = message
        self.path = path
    }
}

enum Files {
    /// What mkstemp/mkdtemp replace with a unique suffix.
    static let sixXs = String(repeating: "X", count: 6)

    /// Opens `path` without blocking on a FIFO that has no peer yet.
    /// Regular files and directories come back in blocking mode (`streaming`
    /// false); anything else (a FIFO, a device) stays non-blocking and is
    /// read or written through `cancel`'s waits.
    private static func open(_ path: String, _ flags: Int32, _ mode: mode_t = 0, _ cancel: FileCancel,
                             what: String = "cannot open") throws(FSFailure) -> (fd: Int32, st: Glibc.stat, streaming: Bool) {
        var fd: Int32
        while true {
            fd = Glibc.open(path, flags | O_CLOEXEC | O_NONBLOCK, mode)
            if fd >= 0 { break }
            let code = errno
            if code == EINTR { continue }
            // A FIFO nobody reads yet: wait for a reader, as a blocking open
            // would, but cancellably (a socket says ENXIO too: that fails).
            var st = Glibc.stat()
            guard code == ENXIO, flags & O_ACCMODE != O_RDONLY, statPath(path, &st) == 0,
                  st.st_mode & S_IFMT == S_IFIFO else { throw FSFailure(what, path, code) }
            try cancel.wait(-1, 0, timeout: 50, path: path)
        }
        var st = Glibc.stat()
        guard fstat(fd, &st) == 0 else {
            let code = errno
            close(fd)
            throw FSFailure("cannot stat", path, code)
        }
        let kind = st.st_mode & S_IFMT
        let streaming = kind != S_IFREG && kind != S_IFDIR
        if !streaming { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) }
        return (fd, st, streaming)
    }

    static func read(_ path: String, _ cancel: FileCancel) throws(FSFailure) -> [UInt8] {
        let (fd, st, streaming) = try open(path, O_RDONLY, 0, cancel)
        defer { close(fd) }
        if st.st_mode & S_IFMT == S_IFDIR { throw FSFailure("cannot read", path, EISDIR) }
        var out: [UInt8] = []
        out.reserveCapacity(max(0, Int(st.st_size)))
        try readChunks(fd, streaming, path, cancel) { out.append(contentsOf: $0) }
        return out
    }

    /// Reads `fd` to its end, handing each chunk to `body`. A FIFO is read
    /// only once poll(2) says so: before its first writer, read(2) on a
    /// non-blocking FIFO says end of file.
    private static func readChunks(_ fd: Int32, _ streaming: Bool, _ path: String, _ cancel: FileCancel,
                                   _ body: (ArraySlice<UInt8>) throws(FSFailure) -> Void) throws(FSFailure) {
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        var count = 0
        while true {
            if streaming {
                try cancel.wait(fd, Int16(POLLIN), path: path)
            } else if count & 15 == 0 {
                try cancel.check(path)
            }
            count &+= 1
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw FSFailure("cannot read", path, errno)
            }
            if n == 0 { return }
            try body(chunk[0..<n])
        }
    }

    /// Writes all of `data`, a megabyte at a time so a cancel stops it soon;
    /// a full FIFO is waited for through `cancel`.
    private static func writeAll(_ fd: Int32, _ data: FileData, _ path: String, _ cancel: FileCancel) throws(FSFailure) {
        let raw = data.bytes
        var offset = 0
        while offset < raw.count {
            try cancel.check(path)
            let end = min(raw.count, offset + (1 << 20))
            let n = Glibc.write(fd, raw.baseAddress! + offset, end - offset)
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN {
                    try cancel.wait(fd, Int16(POLLOUT), path: path)
                    continue
                }
                throw FSFailure(message: "cannot write '\(path)': \(String(cString: strerror(errno)))", path: path)
            }
            offset += n
        }
    }

    /// The mode a new file gets: 0666 less the umask.
    private static var defaultMode: mode_t {
        let mask = umask(0)
        umask(mask)
        return 0o666 & ~mask
    }

    static func write(_ path: String, _ data: FileData, mode: mode_t?, _ cancel: FileCancel) throws(FSFailure) {
        let (fd, _, _) = try open(path, O_WRONLY | O_CREAT | O_TRUNC, mode ?? 0o666, cancel)
        defer { close(fd) }
        try writeAll(fd, data, path, cancel)
        if let mode, fchmod(fd, mode) != 0 { throw FSFailure("cannot set the mode of", path, errno) }
    }

    /// `path`, or where the symlink at `path` leads, through every link in a
    /// row (one that leads nowhere: where it would be created). A loop of
    /// links, or more than 40 in a row, is ELOOP, as for open(2): the path
    /// returned then would be a link, and a rename would replace it.
    static func followingLinks(_ path: String, for what: String) throws(FSFailure) -> String {
        var p = path
        for _ in 0..<40 {  // the kernel's own limit on links in a row
            var st = Glibc.stat()
            guard lstat(p, &st) == 0, st.st_mode & S_IFMT == S_IFLNK else { return p }
            var buf = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let n = readlink(p, &buf, buf.count - 1)
            guard n > 0 else { return p }
            let link = String(decoding: buf[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if link.hasPrefix("/") {
                p = link
            } else if let slash = p.lastIndex(of: "/") {
                p = String(p[...slash]) + link
            } else {
                p = link
            }
        }
        var st = Glibc.stat()
        if lstat(p, &st) == 0, st.st_mode & S_IFMT == S_IFLNK { throw FSFailure(what, path, ELOOP) }
        return p
    }

    /// Whether `path` is a FIFO, a device or a socket.
    static func isSpecial(_ path: String) -> Bool {
        var st = Glibc.stat()
        guard statPath(path, &st) == 0 else { return false }
        let kind = st.st_mode & S_IFMT
        return kind == S_IFIFO || kind == S_IFCHR || kind == S_IFBLK || kind == S_IFSOCK
    }

    /// Writes a temp file in the same directory and syncs it: renamed over
    /// `path` by `StagedWrite.commit`, readers see the old file or the new
    /// one, never half.
    static func stageAtomically(_ path: String, _ data: FileData, mode: mode_t?, _ cancel: FileCancel) throws(FSFailure) -> StagedWrite {
        try stage(path, mode: mode, what: "cannot write", cancel) { (fd) throws(FSFailure) in try writeAll(fd, data, path, cancel) }
    }

    /// A copy staged as a write is: a cancel, a timeout or a full disk
    /// leaves the target as it was (copied in place, it was left cut).
    /// The copy has the source's mode.
    static func stageCopy(_ from: String, _ to: String, _ cancel: FileCancel) throws(FSFailure) -> StagedWrite {
        let (src, st, streaming) = try open(from, O_RDONLY, 0, cancel)
        defer { close(src) }
        if st.st_mode & S_IFMT == S_IFDIR { throw FSFailure("cannot copy", from, EISDIR) }
        var target = Glibc.stat()
        if statPath(to, &target) == 0, target.st_dev == st.st_dev, target.st_ino == st.st_ino {
            throw FSFailure(message: "cannot copy '\(from)' to '\(to)': they are the same file", path: from)
        }
        return try stage(to, mode: st.st_mode & 0o7777, what: "cannot copy to", cancel) { (fd) throws(FSFailure) in
            try readChunks(src, streaming, from, cancel) { (chunk) throws(FSFailure) in
                var failure: FSFailure?
                chunk.withUnsafeBytes { b in
                    do throws(FSFailure) { try writeAll(fd, FileData(b), to, cancel) } catch { failure = error }
                }
                if let failure { throw failure }
            }
        }
    }

    /// A temp file beside `path`, filled by `fill`, given `mode` (else the
    /// target's, else the default) and synced.
    private static func stage(_ path: String, mode: mode_t?, what: String, _ cancel: FileCancel,
                              fill: (Int32) throws(FSFailure) -> Void) throws(FSFailure) -> StagedWrite {
        let slash = path.lastIndex(of: "/")
        let dir = slash.map { String(path[..<$0]) } ?? "."
        let base = slash.map { String(path[path.index(after: $0)...]) } ?? path
        // A name up to 255 bytes is valid; its temp file's adds 12: cut
        // (at a character) so the temp file's fits too.
        var short = Substring(base)
        while short.utf8.count > 240 { short = short.dropLast() }
        var template = Array("\(dir.isEmpty ? "/" : dir)/.\(short).tmp-\(Files.sixXs)".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw FSFailure(what, path, errno) }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        let temp = cString(template)
        var ok = false
        defer {
            if !ok { unlink(temp) }
        }
        do {
            defer { close(fd) }
            try fill(fd)
            var st = Glibc.stat()
            let exists = statPath(path, &st) == 0
            let keep: mode_t? = exists ? st.st_mode & 0o7777 : nil
            // root replacing another user's file keeps it theirs
            if exists, geteuid() == 0, st.st_uid != 0 || st.st_gid != 0 { _ = fchown(fd, st.st_uid, st.st_gid) }
            guard fchmod(fd, mode ?? keep ?? defaultMode) == 0 else { throw FSFailure("cannot set the mode of", path, errno) }
            try cancel.check(path)
            guard fsync(fd) == 0 else { throw FSFailure("cannot sync", path, errno) }
        }
        ok = true
        return StagedWrite(temp: temp, path: path)
    }

    static func append(_ path: String, _ data: FileData, _ cancel: FileCancel) throws(FSFailure) {
        let (fd, _, _) = try open(path, O_WRONLY | O_CREAT | O_APPEND, 0o666, cancel)
        defer { close(fd) }
        try writeAll(fd, data, path, cancel)
    }

    /// The names in `dir` as the file system has them (any bytes but NUL
    /// and `/`: not all are UTF-8), sorted by their bytes.
    static func list(_ dir: String) throws(FSFailure) -> [[UInt8]] {
        guard let names = list(bytes: Array(dir.utf8)) else { throw FSFailure("cannot list", dir, errno) }
        return names
    }

    /// The same for a path as bytes; nil with `errno` set when it cannot.
    static func list(bytes dir: [UInt8]) -> [[UInt8]]? {
        guard let d = withCPath(dir, { opendir($0) }) else { return nil }
        defer { closedir(d) }
        return names(in: d).sorted { $0.lexicographicallyPrecedes($1) }
    }

    /// Every name an open directory listing gives, but `.` and `..`, in
    /// the order it gives them.
    static func names(in d: OpaquePointer) -> [[UInt8]] {
        var names: [[UInt8]] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { raw in Array(raw.prefix { $0 != 0 }) }
            if name != [0x2E] && name != [0x2E, 0x2E] { names.append(name) }
        }
        return names
    }

    /// Calls `body` with `path` (bytes without NUL) as a C string.
    static func withCPath<R>(_ path: [UInt8], _ body: (UnsafePointer<CChar>) -> R) -> R {
        (path + [0]).withUnsafeBufferPointer { b in
            b.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) }
        }
    }

    static func stat(_ path: String) throws(FSFailure) -> FileStatus? {
        var st = Glibc.stat()
        guard lstat(path, &st) == 0 else {
            if errno == ENOENT || errno == ENOTDIR { return nil }
            throw FSFailure("cannot stat", path, errno)
        }
        let type: String = switch st.st_mode & S_IFMT {
        case S_IFREG: "file"
        case S_IFDIR: "dir"
        case S_IFLNK: "link"
        default: "other"
        }
        let mtime = Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9
        return FileStatus(type: type, size: Int(st.st_size), mtime: mtime, mode: Int(st.st_mode & 0o7777))
    }

    static func mkdir(_ path: String, parents: Bool) throws(FSFailure) {
        if !parents {
            guard Glibc.mkdir(path, 0o777) == 0 else { throw FSFailure("cannot create directory", path, errno) }
            return
        }
        var prefix = path.hasPrefix("/") ? "/" : ""
        for part in path.split(separator: "/") {
            prefix += part
            if Glibc.mkdir(prefix, 0o777) != 0 {
                let code = errno
                var st = Glibc.stat()
                guard code == EEXIST, statPath(prefix, &st) == 0, st.st_mode & S_IFMT == S_IFDIR else {
                    throw FSFailure("cannot create directory", prefix, code == EEXIST ? ENOTDIR : code)
                }
            }
            prefix += "/"
        }
    }

    /// Whether `link` is a symlink that leads to the file `path` names.
    static func isSymlink(_ link: String, toSameFileAs path: String) -> Bool {
        var l = Glibc.stat(), target = Glibc.stat(), st = Glibc.stat()
        guard lstat(link, &l) == 0, l.st_mode & S_IFMT == S_IFLNK,
              fstatat(AT_FDCWD, link, &target, 0) == 0, fstatat(AT_FDCWD, path, &st, 0) == 0 else { return false }
        return target.st_dev == st.st_dev && target.st_ino == st.st_ino
    }

    /// Copies a file with its mode. The target is opened without
    /// truncating and compared with the source first: a copy onto the same
    /// file (itself, a symlink or a hard link to it) is an error, not a
    /// truncation to nothing.
    static func copy(_ from: String, _ to: String, _ cancel: FileCancel) throws(FSFailure) {
        let (src, st, streaming) = try open(from, O_RDONLY, 0, cancel)
        defer { close(src) }
        if st.st_mode & S_IFMT == S_IFDIR { throw FSFailure("cannot copy", from, EISDIR) }
        let (dst, target, toStream) = try open(to, O_WRONLY | O_CREAT, st.st_mode & 0o7777, cancel)
        defer { close(dst) }
        if target.st_dev == st.st_dev && target.st_ino == st.st_ino {
            throw FSFailure(message: "cannot copy '\(from)' to '\(to)': they are the same file", path: from)
        }
        if !toStream, ftruncate(dst, 0) != 0 { throw FSFailure("cannot truncate", to, errno) }
        try readChunks(src, streaming, from, cancel) { (chunk) throws(FSFailure) in
            var failure: FSFailure?
            chunk.withUnsafeBytes { b in
                do throws(FSFailure) { try writeAll(dst, FileData(b), to, cancel) } catch { failure = error }
            }
            if let failure { throw failure }
        }
        if !toStream { _ = fchmod(dst, st.st_mode & 0o7777) }
    }

    static func makeTempDir() throws(FSFailure) -> String {
        let base = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array("\(base)/tasker-\(Files.sixXs)".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard made != nil else { throw FSFailure("cannot create a temporary directory in", base, errno) }
        return cString(template)
    }
}

/// `fs.glob`: `*`, `?` and `[…]` within a name (not matching a leading
/// dot), `**` for any number of directories (at the end: everything
/// below; symlinks to directories are not entered); results sorted.
/// `fs.glob`: `*`, `?`, `[…]` within a name (fnmatch, a leading dot only
/// matched by one), `**` for any depth. Paths are bytes: a name that is not
/// UTF-8 is found and returned as it is.
enum Glob {
    static func match(_ pattern: String) throws(FSFailure) -> [[UInt8]] {
        let absolute = pattern.hasPrefix("/")
        let parts = pattern.split(separator: "/").map { Array($0.utf8) }
        var results: Set<[UInt8]> = []
        walk(absolute ? [0x2F] : [], parts[...], into: &results)
        return results.sorted { $0.lexicographicallyPrecedes($1) }
    }

    private static func hasWildcard(_ s: [UInt8]) -> Bool { s.contains { $0 == 0x2A || $0 == 0x3F || $0 == 0x5B } }

    /// `base` is empty (the current directory), "/" or a path ending in a name.
    private static func walk(_ base: [UInt8], _ parts: ArraySlice<[UInt8]>, into results: inout Set<[UInt8]>) {
        guard let part = parts.first else {
            if !base.isEmpty { results.insert(base) }
            return
        }
        let rest = parts.dropFirst()
        func join(_ name: [UInt8]) -> [UInt8] { base.isEmpty ? name : (base == [0x2F] ? [0x2F] + name : base + [0x2F] + name) }
        let names = Files.list(bytes: base.isEmpty ? [0x2E] : base) ?? []
        if part == Array("**".utf8) {
            // zero or more directories; a trailing `**` is everything below
            if !rest.isEmpty { walk(base, rest, into: &results) }
            for name in names where name.first != 0x2E {
                let path = join(name)
                if rest.isEmpty { results.insert(path) }
                // lstat: a symlink to a directory is listed, not entered
                // (a link to `..` would loop), as bash's globstar does.
                if isDirectory(path) { walk(path, parts, into: &results) }
            }
        } else if hasWildcard(part) {
            for name in names where matches(part, name) {
                walk(join(name), rest, into: &results)
            }
        } else {
            let path = join(part)
            if lstatMode(path) != nil { walk(path, rest, into: &results) }
        }
    }

    /// lstat's file type of `path`, nil when there is nothing there.
    private static func lstatMode(_ path: [UInt8]) -> mode_t? {
        var st = stat()
        return Files.withCPath(path) { lstat($0, &st) } == 0 ? st.st_mode & S_IFMT : nil
    }

    private static func isDirectory(_ path: [UInt8]) -> Bool { lstatMode(path) == S_IFDIR }

    /// C.UTF-8 for this thread's matching (the process stays in the C
    /// locale Lua expects); nil where there is none.
    // Safety: made once and never changed or freed; glibc lets any number
    // of threads use one locale object at once (uselocale only reads it).
    nonisolated(unsafe) private static let utf8Locale: locale_t? = newlocale(LC_CTYPE_MASK, "C.UTF-8", nil)

    private static func matches(_ pattern: [UInt8], _ name: [UInt8]) -> Bool {
        // in UTF-8, so `?` is one character (`é`), not one byte; a name
        // that is not UTF-8 is matched byte by byte (glibc falls back)
        let saved = utf8Locale.map { uselocale($0) }
        defer { if let saved { uselocale(saved) } }
        return Files.withCPath(pattern) { p in Files.withCPath(name) { fnmatch(p, $0, FNM_PERIOD) } } == 0
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// `fs.remove`, recursive or not. A tree is removed through directory
/// descriptors, as `rm -r` does: each entry is looked at and removed
/// relative to its open directory, and a directory is entered only with
/// `O_NOFOLLOW`. So a directory swapped for a symlink while the removal
/// runs is removed as the link, never followed (by path, a user who can
/// write in the tree could make the removal delete files outside it).
/// The walk is a loop holding one directory open at a time: it climbs back
/// through `..`, checked to be the directory it came down from, so any
/// depth works within a few descriptors and a little stack. Names are bytes.
extension Files {
    static func remove(_ path: String, recursive: Bool, _ cancel: FileCancel) throws(FSFailure) {
        // as rm does: `.` or `..` would empty the directory, then fail
        if let last = path.split(separator: "/").last, last == "." || last == ".." {
            throw FSFailure(message: "cannot remove '\(shorter(path))': refusing to remove '.' or '..'", path: path)
        }
        var st = Glibc.stat()
        guard lstat(path, &st) == 0 else { throw FSFailure("cannot remove", shorter(path), errno) }
        guard st.st_mode & S_IFMT == S_IFDIR else {
            guard unlink(path) == 0 else { throw FSFailure("cannot remove", shorter(path), errno) }
            return
        }
        // `/` (or `//`, or a link to it with a trailing slash): never, as
        // rm's --preserve-root
        var root = Glibc.stat()
        if fstatat(AT_FDCWD, "/", &root, 0) == 0, root.st_dev == st.st_dev, root.st_ino == st.st_ino {
            throw FSFailure(message: "cannot remove '\(shorter(path))': refusing to remove '/'", path: path)
        }
        // an empty directory goes at once (one without read permission too)
        if rmdir(path) == 0 { return }
        guard recursive, errno == ENOTEMPTY || errno == EEXIST else { throw FSFailure("cannot remove", shorter(path), errno) }
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw FSFailure("cannot remove", shorter(path), errno) }
        try removeContents(of: fd, shown: path, cancel)
        guard rmdir(path) == 0 else { throw FSFailure("cannot remove", shorter(path), errno) }
    }

    /// One directory being emptied: what was in it, how far along, and
    /// which directory it is (to check the climb back through `..`).
    private struct Level {
        var names: [[UInt8]]
        var next = 0
        var device: UInt64
        var inode: UInt64
        /// Its name in the directory above (nil: the top).
        var name: [UInt8]?
    }

    /// Removes everything in the open directory `top`, which it closes.
    private static func removeContents(of top: Int32, shown: String, _ cancel: FileCancel) throws(FSFailure) {
        var fd = top
        defer { close(fd) }
        var levels = [try level(fd, name: nil, shown: shown)]
        // another file system below (a mount, a bind mount of a directory
        // elsewhere) is not entered: it is not this tree's to remove
        let device = levels[0].device
        var removed = 0
        // the path of `name` in the deepest level, for a message (built only then)
        func path(_ name: [UInt8]?) -> String {
            let parts = levels.compactMap(\.name) + (name.map { [$0] } ?? [])
            return shorter(([shown] + parts.map { String(decoding: $0, as: UTF8.self) }).joined(separator: "/"))
        }
        while !levels.isEmpty {
            let i = levels.count - 1
            if levels[i].next < levels[i].names.count {
                let name = levels[i].names[levels[i].next]
                levels[i].next += 1
                // a timeout, a cancel or a signal stops it between entries
                removed &+= 1
                if removed & 255 == 0 { try cancel.check(shown) }
                var st = Glibc.stat()
                let isDirectory = withCPath(name) { fstatat(fd, $0, &st, AT_SYMLINK_NOFOLLOW) } == 0
                    && st.st_mode & S_IFMT == S_IFDIR
                guard isDirectory else {
                    if withCPath(name, { unlinkat(fd, $0, 0) }) != 0 && errno != ENOENT {
                        throw FSFailure("cannot remove", path(name), errno)
                    }
                    continue
                }
                // empty (or unreadable but empty) goes at once
                if withCPath(name, { unlinkat(fd, $0, AT_REMOVEDIR) }) == 0 || errno == ENOENT { continue }
                let child = withCPath(name) { openat(fd, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
                guard child >= 0 else {
                    if errno == ENOENT { continue }  // removed meanwhile by someone else
                    // not a directory any more (a link put in its place): removed as what it is now
                    guard errno == ENOTDIR || errno == ELOOP else { throw FSFailure("cannot remove", path(name), errno) }
                    if withCPath(name, { unlinkat(fd, $0, 0) }) != 0 && errno != ENOENT {
                        throw FSFailure("cannot remove", path(name), errno)
                    }
                    continue
                }
                let below: Level
                do {
                    below = try level(child, name: name, shown: path(name))
                } catch {
                    close(child)
                    throw error
                }
                guard below.device == device else {
                    close(child)
                    throw FSFailure(message: "cannot remove '\(path(name))': it is a mount point (another file system is not removed)",
                                    path: path(name))
                }
                close(fd)
                fd = child
                levels.append(below)
            } else {
                let done = levels.removeLast()
                guard let name = done.name, let above = levels.last else { return }
                let shownDone = { path(name) }  // built for a message only
                // back up through `..`: the directory come down from, or it moved
                let parent = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                var st = Glibc.stat()
                guard parent >= 0, fstat(parent, &st) == 0, UInt64(st.st_dev) == above.device, UInt64(st.st_ino) == above.inode else {
                    if parent >= 0 { close(parent) }
                    let shown = shownDone()
                    throw FSFailure(message: "cannot remove '\(shown)': the tree moved while it was removed", path: shown)
                }
                close(fd)
                fd = parent
                if withCPath(name, { unlinkat(fd, $0, AT_REMOVEDIR) }) != 0 && errno != ENOENT {
                    guard errno == ENOTDIR, withCPath(name, { unlinkat(fd, $0, 0) }) == 0 || errno == ENOENT else {
                        throw FSFailure("cannot remove", shownDone(), errno)
                    }
                }
            }
        }
    }

    /// The open directory `fd`'s names (read through a copy of the
    /// descriptor: closing the listing leaves `fd` open) and identity.
    private static func level(_ fd: Int32, name: [UInt8]?, shown: @autoclosure () -> String) throws(FSFailure) -> Level {
        var st = Glibc.stat()
        guard fstat(fd, &st) == 0 else { throw FSFailure("cannot list", shorter(shown()), errno) }
        let copy = dup(fd)
        guard copy >= 0, let d = fdopendir(copy) else {
            let code = errno
            if copy >= 0 { close(copy) }
            throw FSFailure("cannot list", shorter(shown()), code)
        }
        defer { closedir(d) }
        // every name first: a directory changed while it is read may skip entries
        return Level(names: Files.names(in: d), device: UInt64(st.st_dev), inode: UInt64(st.st_ino), name: name)
    }

    /// A path for a message, cut to its last 200 bytes when long (a deep
    /// tree's, or a very long argument).
    static func shorter(_ path: String) -> String {
        path.utf8.count <= 240 ? path : "…" + String(decoding: path.utf8.suffix(200), as: UTF8.self)
    }
}

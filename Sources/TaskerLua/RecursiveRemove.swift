#if canImport(Glibc)
import Glibc
#endif

/// `fs.remove`, recursive or not. A tree is removed through directory
/// descriptors, as `rm -r` does: each entry is looked at and removed
/// relative to its open directory, and a directory is entered only with
/// `O_NOFOLLOW`. So a directory swapped for a symlink while the removal
/// runs is removed as the link, never followed (by path, a user who can
/// write in the tree could make the removal delete files outside it), and
/// a tree deeper than PATH_MAX is no limit. Names are bytes.
extension Files {
    static func remove(_ path: String, recursive: Bool) throws(FSFailure) {
        // as rm does: `.` or `..` would empty the directory, then fail
        if let last = path.split(separator: "/").last, last == "." || last == ".." {
            throw FSFailure(message: "cannot remove '\(path)': refusing to remove '.' or '..'", path: path)
        }
        var st = Glibc.stat()
        guard lstat(path, &st) == 0 else { throw FSFailure("cannot remove", path, errno) }
        guard st.st_mode & S_IFMT == S_IFDIR else {
            guard unlink(path) == 0 else { throw FSFailure("cannot remove", path, errno) }
            return
        }
        if recursive {
            let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else { throw FSFailure("cannot remove", path, errno) }
            try removeContents(of: fd, shown: path)
        }
        guard rmdir(path) == 0 else { throw FSFailure("cannot remove", path, errno) }
    }

    /// Removes everything in the open directory `fd`, which it closes.
    private static func removeContents(of fd: Int32, shown: String) throws(FSFailure) {
        guard let d = fdopendir(fd) else {
            let code = errno
            close(fd)
            throw FSFailure("cannot list", shown, code)
        }
        defer { closedir(d) }  // closes fd
        // every name first: a directory changed while it is read may skip entries
        var names: [[UInt8]] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { raw in Array(raw.prefix { $0 != 0 }) }
            if name != [0x2E] && name != [0x2E, 0x2E] { names.append(name) }
        }
        for name in names {
            let inner = shown + "/" + String(decoding: name, as: UTF8.self)
            var st = Glibc.stat()
            let isDirectory = withCPath(name) { fstatat(fd, $0, &st, AT_SYMLINK_NOFOLLOW) } == 0 && st.st_mode & S_IFMT == S_IFDIR
            if isDirectory {
                let child = withCPath(name) { openat(fd, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
                if child >= 0 {
                    try removeContents(of: child, shown: inner)
                } else if errno != ENOTDIR && errno != ELOOP && errno != ENOENT {
                    throw FSFailure("cannot remove", shorter(inner), errno)
                }
                // not a directory any more (a link put in its place): removed as what it is now
                if withCPath(name, { unlinkat(fd, $0, AT_REMOVEDIR) }) != 0 && errno != ENOENT {
                    guard errno == ENOTDIR, withCPath(name, { unlinkat(fd, $0, 0) }) == 0 || errno == ENOENT else {
                        throw FSFailure("cannot remove", shorter(inner), errno)
                    }
                }
            } else if withCPath(name, { unlinkat(fd, $0, 0) }) != 0 && errno != ENOENT {
                throw FSFailure("cannot remove", shorter(inner), errno)
            }
        }
    }

    /// A path deep in a tree, cut to its last 200 bytes for a message.
    private static func shorter(_ path: String) -> String {
        path.utf8.count <= 240 ? path : "…" + String(decoding: path.utf8.suffix(200), as: UTF8.self)
    }
}

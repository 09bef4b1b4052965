/// The bytes `fs.write` and `fs.append` write: the Lua string's own,
/// borrowed, not copied. Copying a 400 MB string on the loop thread (and
/// faulting in the copy's pages) held every other task for a third of a
/// second.
struct FileData: @unchecked Sendable {
    // Safety: `bytes` points into a Lua string, which Lua never moves or
    // changes. The caller keeps the string reachable for as long as the
    // operation runs: on the Lua stack for a call made in place, anchored
    // in the registry (`FileWait.anchor`) for one on the fs thread, released
    // on the loop only after that thread has let go (its completion runs
    // there). Nothing here writes through it.
    let bytes: UnsafeRawBufferPointer

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var count: Int { bytes.count }
}

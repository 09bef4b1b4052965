import CLuaShim
#if canImport(Glibc)
import Glibc
#endif

/// One epoll set, level-triggered (a descriptor that still has data reports
/// again, as poll(2) did): the thin typed layer over the C helpers. Each
/// registration names its owner by a token the caller chooses.
struct Epoll {
    let fd: Int32
    /// EPOLLIN; epoll's low bits are poll(2)'s (POLLIN, POLLOUT, POLLERR, POLLHUP).
    static let readable = UInt32(POLLIN)

    init?() {
        fd = tasker_epoll_create()
        guard fd >= 0 else { return nil }
    }

    /// Events as epoll reports them (`EPOLLIN` …): poll(2)'s bits, widened.
    @discardableResult
    func add(_ descriptor: Int32, events: UInt32, token: UInt64) -> Bool {
        tasker_epoll_ctl(fd, TASKER_EPOLL_ADD, descriptor, events, token) == 0
    }

    @discardableResult
    func modify(_ descriptor: Int32, events: UInt32, token: UInt64) -> Bool {
        tasker_epoll_ctl(fd, TASKER_EPOLL_MOD, descriptor, events, token) == 0
    }

    /// A descriptor closed elsewhere has left the set already: that is fine.
    func remove(_ descriptor: Int32) {
        _ = tasker_epoll_ctl(fd, TASKER_EPOLL_DEL, descriptor, 0, 0)
    }

    /// Waits up to `timeout` ns (-1: no limit; 0: only looks); calls
    /// `ready` per event.
    func wait(timeout: Int64, _ ready: (UInt64, UInt32) -> Void) -> Int32 {
        var tokens = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0),
                      UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        var events = (UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0),
                      UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0), UInt32(0))
        return withUnsafeMutableBytes(of: &tokens) { t in
            withUnsafeMutableBytes(of: &events) { e in
                let tp = t.baseAddress!.assumingMemoryBound(to: UInt64.self)
                let ep = e.baseAddress!.assumingMemoryBound(to: UInt32.self)
                let n = tasker_epoll_wait(fd, tp, ep, 16, timeout)
                for i in 0..<max(0, Int(n)) { ready(tp[i], ep[i]) }
                return n
            }
        }
    }
}

import Dispatch
import Foundation
import TaskerCore

/// One format of `file:read` (Lua manual §6.8).
enum ReadFormat {
    case line(keepNewline: Bool)
    case all
    case number
    case count(Int)
}

/// What one format read: bytes, a numeral to convert, or fail (nil).
enum ReadValue {
    case bytes(ArraySlice<UInt8>)
    case numeral(String)
    case fail
}

/// The pipe end of an `io.popen` file, read or written without blocking the
/// engine. Reading: a dispatch source fills a buffer on the loop (paused past
/// `bufferLimit`, so `tail -f` into a slow reader does not grow memory);
/// writing: a serial queue writes in order. Loop-confined except for what
/// the queue and the source touch, which is handed over through `loop.execute`.
final class PopenFile {
    enum Mode { case read, write }

    static let bufferLimit = 1 << 20

    let mode: Mode
    let loop: EventLoop
    private(set) var fd: Int32
    var process: ShellProcess?
    /// Set when the process has ended.
    var status: ShellStatus?
    var closed = false
    /// Fibers waiting in `close()` for the process to end.
    var closeWaiters: [(ShellStatus) -> Void] = []

    // read mode
    private var buffer: [UInt8] = []
    private var start = 0
    private(set) var eof = false
    /// The reader thread's wake-up pipe and its permission to read more.
    private var wake: [Int32] = [-1, -1]
    private let demand = DispatchSemaphore(value: 1)
    private var demandGranted = true
    /// Who waits for more data (re-tried after each chunk).
    var dataWaiters: [() -> Void] = []

    // write mode
    private let queue = DispatchQueue(label: "tasker.popen")

    init(mode: Mode, fd: Int32, loop: EventLoop) {
        self.mode = mode
        self.fd = fd
        self.loop = loop
        if mode == .read { startReading() }
    }

    var pending: Int { buffer.count - start }

    // MARK: reading

    /// While the pipe may still deliver, the loop is not idle.
    private var reading = false

    /// A thread of its own reads the pipe: it waits in poll(2) on the pipe
    /// and on a wake-up pipe (a close interrupts it), reads a chunk, hands it
    /// to the loop and waits for the loop to want more. It owns the fd and
    /// closes it when it is done, so no other thread ever closes it under it.
    private func startReading() {
        reading = true
        loop.beginActivity()
        _ = pipe(&wake)
        let (fd, wakeRead) = (self.fd, wake[0])
        let target = LoopBound(self, loop: loop)
        let demand = self.demand
        let thread = Thread {
            var chunk = [UInt8](repeating: 0, count: 64 << 10)
            while true {
                demand.wait()
                var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
                let r = poll(&fds, 2, -1)
                if r < 0 && errno == EINTR {
                    demand.signal()
                    continue
                }
                if fds[1].revents != 0 { break }  // closed by tasker
                let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR {
                    demand.signal()
                    continue
                }
                let bytes = n > 0 ? Array(chunk[..<n]) : []
                target.loop.execute { target.value.received(bytes, eof: n <= 0) }
                if n <= 0 { break }
            }
            close(fd)
            close(wakeRead)
        }
        thread.stackSize = 256 << 10
        thread.start()
    }

    private func received(_ bytes: [UInt8], eof atEnd: Bool) {
        demandGranted = false
        guard !closed else { return }
        if atEnd {
            eof = true
            stopReading()
        } else {
            if start > 0 && start == buffer.count {
                buffer.removeAll(keepingCapacity: true)
                start = 0
            }
            buffer.append(contentsOf: bytes)
            grantDemandIfWanted()
        }
        let waiters = dataWaiters
        dataWaiters = []
        for w in waiters { w() }
    }

    private func stopReading() {
        guard reading else { return }
        reading = false
        loop.endActivity()
    }

    /// Lets the reader read another chunk unless enough is buffered.
    private func grantDemandIfWanted() {
        guard !demandGranted, !eof, !closed, pending < Self.bufferLimit else { return }
        demandGranted = true
        demand.signal()
    }

    /// Reads `formats` from the buffer if it holds enough (or the pipe is at
    /// its end); nil means: wait for more.
    func tryRead(_ formats: [ReadFormat]) -> [ReadValue]? {
        var pos = start
        var values: [ReadValue] = []
        for format in formats {
            switch format {
            case .line(let keep):
                if let nl = buffer[pos...].firstIndex(of: 0x0A) {
                    values.append(.bytes(buffer[pos..<(keep ? nl + 1 : nl)]))
                    pos = nl + 1
                } else if eof {
                    values.append(pos < buffer.count ? .bytes(buffer[pos...]) : .fail)
                    pos = buffer.count
                } else {
                    return nil
                }
            case .all:
                guard eof else { return nil }
                values.append(.bytes(buffer[pos...]))
                pos = buffer.count
            case .count(let n):
                if buffer.count - pos >= n {
                    values.append(n == 0 && pos == buffer.count && eof ? .fail : .bytes(buffer[pos..<(pos + n)]))
                    pos += n
                } else if eof {
                    values.append(pos < buffer.count ? .bytes(buffer[pos...]) : .fail)
                    pos = buffer.count
                } else {
                    return nil
                }
            case .number:
                var p = pos
                while p < buffer.count, [0x20, 0x09, 0x0A, 0x0D, 0x0B, 0x0C].contains(buffer[p]) { p += 1 }
                var end = p
                let numeral = Set("0123456789abcdefABCDEFxXpP.+-".utf8)
                while end < buffer.count, numeral.contains(buffer[end]), end - p < 200 { end += 1 }
                if end == buffer.count && !eof { return nil }
                values.append(end > p ? .numeral(String(decoding: buffer[p..<end], as: UTF8.self)) : .fail)
                pos = end
            }
            if case .fail = values.last { break }
        }
        start = pos
        grantDemandIfWanted()
        return values
    }

    // MARK: writing

    /// Writes on the queue, in order; `done` gets nil or the error (on the loop).
    func write(_ bytes: [UInt8], done: @escaping (String?) -> Void) {
        let fd = self.fd
        let target = LoopBound(done, loop: loop)
        loop.beginActivity()
        queue.async {
            let result = writeAll(fd, bytes)
            target.loop.execute {
                target.loop.endActivity()
                target.value(result)
            }
        }
    }

    // MARK: closing

    /// Closes tasker's end (a reader's child then sees EOF or EPIPE).
    func closeEnd() {
        guard !closed else { return }
        closed = true
        dataWaiters = []
        switch mode {
        case .read:
            stopReading()
            // Wake the reader (wherever it waits) so it closes the pipe: the
            // command then gets EPIPE, as with Lua's own pclose.
            var byte: UInt8 = 1
            _ = Foundation.write(wake[1], &byte, 1)
            close(wake[1])
            if !demandGranted {
                demandGranted = true
                demand.signal()
            }
        case .write:
            let fd = self.fd
            queue.async { close(fd) }  // after the writes queued before
        }
        fd = -1
    }

    func processEnded(_ s: ShellStatus) {
        status = s
        let waiters = closeWaiters
        closeWaiters = []
        for w in waiters { w(s) }
    }
}

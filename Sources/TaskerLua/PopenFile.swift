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
/// engine: the process reactor serves the descriptor (`PipeReader`,
/// `PipeWriter`) and hands chunks and write results to the loop. Reading
/// fills a buffer one chunk per request, asked for while less than
/// `bufferLimit` is buffered or while a reader waits for more (a `read("a")`
/// of any size finishes; `tail -f` into a slow reader does not grow
/// memory). Loop-confined.
final class PopenFile {
    enum Mode { case read, write }

    static let bufferLimit = 1 << 20

    let mode: Mode
    let loop: EventLoop
    let process: ShellProcess
    /// Set when the process has ended.
    var status: ShellStatus?
    var closed = false
    /// Fibers waiting in `close()` for the process to end.
    var closeWaiters: [(ShellStatus) -> Void] = []

    // read mode
    private var reader: PipeReader?
    private var buffer: [UInt8] = []
    private var start = 0
    private(set) var eof = false
    /// A chunk was asked for and has not come yet.
    private var requested = false
    /// Who waits for more data (re-tried after each chunk).
    var dataWaiters: [() -> Void] = []

    // write mode
    private var writer: PipeWriter?

    /// Serves `process`'s pipe end.
    init(mode: Mode, process: ShellProcess, loop: EventLoop) {
        self.mode = mode
        self.process = process
        self.loop = loop
        switch mode {
        case .read:
            // The reader holds the file until the end of the stream or
            // `closeEnd()`, which let go of the reader in turn.
            let target = LoopBound(self, loop: loop)
            let reader = PipeReader(fd: process.pipe) { chunk in
                target.loop.execute { target.value.received(chunk) }
            }
            self.reader = reader
            ProcessReactor.shared.add(reader)
            requestChunk()
        case .write:
            let writer = PipeWriter(fd: process.pipe)
            self.writer = writer
            ProcessReactor.shared.add(writer)
        }
    }

    var pending: Int { buffer.count - start }

    // MARK: reading

    private func received(_ chunk: [UInt8]?) {
        requested = false
        guard !closed else { return }
        if let chunk {
            if start > 0 && start == buffer.count {
                buffer.removeAll(keepingCapacity: true)
                start = 0
            } else if start >= 1 << 16 && start * 2 >= buffer.count {
                // What was read goes, or a stream read line by line grows forever.
                buffer.removeFirst(start)
                start = 0
            }
            buffer.append(contentsOf: chunk)
            if pending < Self.bufferLimit || !dataWaiters.isEmpty { requestChunk() }
        } else {
            eof = true
            reader = nil
        }
        let waiters = dataWaiters
        dataWaiters = []
        for w in waiters { w() }
    }

    /// Asks the reactor for one more chunk (at most one outstanding).
    private func requestChunk() {
        guard !requested, !eof, !closed, let reader else { return }
        requested = true
        reader.request()
    }

    /// `waiter` runs after the next chunk (or the end): a reader that could
    /// not finish from the buffer gets more even past `bufferLimit`.
    func waitForData(_ waiter: @escaping () -> Void) {
        dataWaiters.append(waiter)
        requestChunk()
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
        if pending < Self.bufferLimit { requestChunk() }
        return values
    }

    // MARK: writing

    /// Writes in order; `done` gets nil or the error, on the loop (which
    /// is busy meanwhile).
    func write(_ bytes: [UInt8], done: @escaping (String?) -> Void) {
        guard let writer else { return done("Bad file descriptor") }
        let target = LoopBound(done, loop: loop)
        loop.beginActivity()
        writer.write(bytes) { result in
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
        // A read waiting in another task learns that the file was closed.
        let waiters = dataWaiters
        dataWaiters = []
        for w in waiters { w() }
        reader?.close()
        reader = nil
        writer?.close()  // after the writes queued before
    }

    func processEnded(_ s: ShellStatus) {
        status = s
        let waiters = closeWaiters
        closeWaiters = []
        for w in waiters { w(s) }
    }
}

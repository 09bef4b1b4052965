import Dispatch
import Foundation
import TaskerCore
import TaskerLua

/// SIGINT/SIGTERM: the first cancels everything (runaway Lua is stopped by
/// the hook) and lets the run end with its summary; a second exits at once.
final class SignalWatcher: @unchecked Sendable {
    // Safety: `sources` and `count` are touched only on `queue`, a serial
    // queue, apart from `start`/`stop`, which run before and after it fires.
    private let queue = DispatchQueue(label: "tasker.signals")
    private var sources: [DispatchSourceSignal] = []
    private var count = 0

    func start(_ runtime: LuaRuntime) {
        let handle = runtime.interruptHandle
        let target = LoopBound(runtime, loop: runtime.loop)
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler { [unowned self] in
                self.count += 1
                if self.count > 1 {
                    FileHandle.standardError.write(Data("\ntasker: interrupted again, exiting now\n".utf8))
                    exit(130)
                }
                handle.request()
                target.loop.execute { target.value.interrupt() }
            }
            source.resume()
            sources.append(source)
        }
    }

    func stop() {
        for s in sources { s.cancel() }
    }
}

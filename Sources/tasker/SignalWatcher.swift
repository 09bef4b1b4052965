import Dispatch
import Foundation
import TaskerCore
import TaskerLua

/// SIGINT, SIGTERM and SIGHUP: the first cancels everything (runaway Lua is
/// stopped by the hook) and lets the run end with its summary and exit code
/// 128 + signal; a second kills every process group the run started and
/// exits at once.
final class SignalWatcher: @unchecked Sendable {
    // Safety: `sources` and `count` are touched only on `queue`, a serial
    // queue, apart from `start`/`stop`, which run before and after it fires.
    private let queue = DispatchQueue(label: "tasker.signals")
    private var sources: [DispatchSourceSignal] = []
    private var count = 0

    static let handled: [Int32] = [SIGINT, SIGTERM, SIGHUP]

    func start(_ runtime: LuaRuntime) {
        let handle = runtime.interruptHandle
        let groups = runtime.processGroups
        let target = LoopBound(runtime, loop: runtime.loop)
        for sig in Self.handled {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
            source.setEventHandler { [unowned self] in
                self.count += 1
                let first = handle.request(sig)
                if self.count > 1 {
                    StandardError.write("\ntasker: interrupted again, exiting now\n")
                    groups.killAll(grace: 0)
                    exit(128 + first)
                }
                target.loop.execute { target.value.interrupt(signal: sig) }
            }
            source.resume()
            sources.append(source)
        }
    }

    func stop() {
        for s in sources { s.cancel() }
    }
}

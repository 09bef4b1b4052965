// scripts/bench http: N GETs of URL with URLSession, at most C in flight,
// the completion-handler API the way an app would write it.
// Prints the seconds the requests took.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

let url = URL(string: CommandLine.arguments[1])!
let n = Int(CommandLine.arguments[2])!
let c = Int(CommandLine.arguments[3])!
let configuration = URLSessionConfiguration.ephemeral
configuration.httpMaximumConnectionsPerHost = c
let session = URLSession(configuration: configuration)
let slots = DispatchSemaphore(value: c)
let done = DispatchGroup()
let failures = NSLock()
nonisolated(unsafe) var failed = 0  // guarded by `failures`
let start = DispatchTime.now()
for _ in 0..<n {
    slots.wait()
    done.enter()
    session.dataTask(with: url) { _, response, _ in
        if (response as? HTTPURLResponse)?.statusCode != 200 {
            failures.lock(); failed += 1; failures.unlock()
        }
        slots.signal()
        done.leave()
    }.resume()
}
done.wait()
let seconds = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
if failed > 0 { fatalError("\(failed) requests failed") }
print(String(format: "%.4f", seconds))

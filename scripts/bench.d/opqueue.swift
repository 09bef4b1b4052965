// 200,000 no-op BlockOperations through Foundation's OperationQueue: what
// the classic Swift task managers are built on. Prints the seconds taken.
import Foundation

let n = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1])! : 200_000
let queue = OperationQueue()
queue.maxConcurrentOperationCount = 16
let start = DispatchTime.now().uptimeNanoseconds
for _ in 0..<n { queue.addOperation(BlockOperation {}) }
queue.waitUntilAllOperationsAreFinished()
let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
print(String(format: "%.4f", seconds))

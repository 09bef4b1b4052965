import Foundation
import TaskerCore

/// The command line as the process got it. Swift's `CommandLine.arguments`
/// makes each byte that is not UTF-8 U+FFFD: a pipeline's path would name
/// another file, and a script's argument or `--var` value would not be what
/// was typed. Such an argument is refused, naming it and its first bad byte.
enum ArgumentBytes {
    /// The message for the first argument that is not UTF-8, or nil.
    static func problem() -> String? {
        // argc is 0 where /proc is not mounted (a chroot): nothing to check
        for i in 1..<max(1, Int(CommandLine.argc)) {
            guard let arg = CommandLine.unsafeArgv[i] else { continue }
            let bytes = UnsafeRawBufferPointer(start: arg, count: strlen(arg))
            guard let at = UTF8Check.firstInvalidByte(bytes) else { continue }
            var shown = ""
            for b in bytes.prefix(200) {
                shown += b >= 0x20 && b < 0x7F ? String(UnicodeScalar(b)) : String(format: "\\x%02X", b)
            }
            return "argument \(i) ('\(shown)') is not UTF-8: byte 0x\(String(format: "%02X", bytes[at])) at \(at + 1); "
                + "tasker takes UTF-8 arguments (a file whose name is not can be reached through a link, or found with fs.list)"
        }
        return nil
    }
}

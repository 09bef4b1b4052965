import Foundation
import TaskerCore

/// The path a pipeline's runs are recorded under: the file's real path
/// (links resolved), as the kernel has it. Foundation's resolution starts
/// from its own copy of the working directory, where each byte that is not
/// UTF-8 is U+FFFD: pipelines in `d\xff` and `d\xfe` were one pipeline, and
/// a resume in one reused the other's results. Such bytes are kept apart
/// here, written `\xFF`.
enum PipelineIdentity {
    static func of(_ file: String) -> String {
        guard let real = realpath(file, nil) else {
            return URL(fileURLWithPath: file).standardizedFileURL.resolvingSymlinksInPath().path
        }
        defer { free(real) }
        let bytes = UnsafeRawBufferPointer(start: real, count: strlen(real))
        if let text = String(validating: bytes, as: UTF8.self) { return text }
        var out = ""
        var rest = bytes[...]
        while !rest.isEmpty {
            let slice = UnsafeRawBufferPointer(rebasing: rest)
            let bad = UTF8Check.firstInvalidByte(slice) ?? slice.count
            out += String(decoding: slice[..<bad], as: UTF8.self)
            guard bad < slice.count else { break }
            out += String(format: "\\x%02X", slice[bad])
            rest = rest.dropFirst(bad + 1)
        }
        return out
    }
}

/// Where bytes stop being UTF-8, for messages that name the first bad byte
/// (a path, an argument: each such byte would have become U+FFFD).
public enum UTF8Check {
    /// The offset of the first byte of the first sequence that does not
    /// decode; nil when all of `bytes` is UTF-8.
    public static func firstInvalidByte(_ bytes: UnsafeRawBufferPointer) -> Int? {
        var parser = Unicode.UTF8.ForwardParser()
        var input = bytes.makeIterator()
        var offset = 0
        while true {
            switch parser.parseScalar(from: &input) {
            case .valid(let scalar): offset += scalar.count
            case .error: return offset
            case .emptyInput: return nil
            }
        }
    }
}

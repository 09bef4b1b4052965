import CPostgres
import Glibc

/// One row of a result, read by column with typed getters. libpq gives
/// every value as text; a NULL where a value must be, or text that is not
/// the type asked for, is an error naming the column, not a crash.
struct PGRow {
    let result: PGResultCells
    let row: Int

    private var names: [String] { result.names }
    private func name(_ i: Int) -> String { i < names.count ? names[i] : "#\(i + 1)" }

    /// The bytes of column `i`; nil for NULL or a column the result lacks.
    private func bytes(_ i: Int) -> ArraySlice<UInt8>? {
        guard i >= 0, i < result.columns else { return nil }
        let at = row * result.columns + i
        let start = result.starts[at]
        guard start >= 0 else { return nil }
        return result.bytes[start..<start + result.lengths[at]]
    }

    private func cell(_ i: Int) throws(PGError) -> String {
        guard i < result.columns else { throw PGError(message: "the result has no column \(name(i))", sqlState: nil) }
        guard let b = bytes(i) else { throw PGError(message: "column \(name(i)) is NULL", sqlState: nil) }
        return String(decoding: b, as: UTF8.self)
    }

    private func bad(_ i: Int, _ type: String, _ s: String) -> PGError {
        PGError(message: "column \(name(i)): '\(s.prefix(40))' is not \(type)", sqlState: nil)
    }

    func text(_ i: Int) throws(PGError) -> String { try cell(i) }

    /// Nil for NULL (and for a column the result does not have).
    func optionalText(_ i: Int) -> String? { bytes(i).map { String(decoding: $0, as: UTF8.self) } }

    func int64(_ i: Int) throws(PGError) -> Int64 {
        // ids, claims and counts: read from the bytes, no String made
        if let b = bytes(i), let n = Self.decimal(b) { return n }
        let s = try cell(i)
        guard let n = Int64(s) else { throw bad(i, "an integer", s) }
        return n
    }

    /// An optional `-` and 1-18 digits (no overflow possible); nil for
    /// anything else, which `Int64(String)` then reads or refuses.
    private static func decimal(_ b: ArraySlice<UInt8>) -> Int64? {
        var digits = b[...]
        let negative = digits.first == UInt8(ascii: "-")
        if negative { digits = digits.dropFirst() }
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var n: Int64 = 0
        for c in digits {
            guard c >= 0x30, c <= 0x39 else { return nil }
            n = n * 10 + Int64(c - 0x30)
        }
        return negative ? -n : n
    }

    func int(_ i: Int) throws(PGError) -> Int { Int(try int64(i)) }

    func optionalInt(_ i: Int) throws(PGError) -> Int? {
        guard bytes(i) != nil else { return nil }
        return try int(i)
    }

    func optionalDouble(_ i: Int) throws(PGError) -> Double? {
        guard let s = optionalText(i) else { return nil }
        guard let d = Double(s) else { throw bad(i, "a number", s) }
        return d
    }

    func double(_ i: Int) throws(PGError) -> Double {
        let s = try cell(i)
        guard let d = Double(s) else { throw bad(i, "a number", s) }
        return d
    }

    /// PostgreSQL's text form of a boolean: `t` or `f`.
    func bool(_ i: Int) throws(PGError) -> Bool {
        switch try cell(i) {
        case "t": return true
        case "f": return false
        case let s: throw bad(i, "a boolean", s)
        }
    }
}

/// A result's cells, copied out of libpq's result once: every value's bytes
/// in one buffer (a claim of 100 jobs made 900 Strings, most never read as
/// text), shared by the rows.
final class PGResultCells: Sendable {
    let names: [String]
    let columns: Int
    let bytes: [UInt8]
    /// Per cell (row-major): where its bytes start in `bytes`, -1 for NULL.
    let starts: [Int]
    let lengths: [Int]

    init(_ r: OpaquePointer) {
        let n = Int(PQntuples(r))
        let columns = Int(PQnfields(r))
        names = (0..<columns).map { j in PQfname(r, Int32(j)).map { String(cString: $0) } ?? "#\(j + 1)" }
        self.columns = columns
        var bytes: [UInt8] = []
        var starts: [Int] = [], lengths: [Int] = []
        starts.reserveCapacity(n * columns)
        lengths.reserveCapacity(n * columns)
        for i in 0..<Int32(n) {
            for j in 0..<Int32(columns) {
                if PQgetisnull(r, i, j) == 1 {
                    starts.append(-1)
                    lengths.append(0)
                } else {
                    // text format: a value is a C string (it holds no NUL)
                    let value = PQgetvalue(r, i, j)!
                    let length = strlen(value)
                    starts.append(bytes.count)
                    lengths.append(length)
                    value.withMemoryRebound(to: UInt8.self, capacity: length) { p in
                        bytes.append(contentsOf: UnsafeBufferPointer(start: p, count: length))
                    }
                }
            }
        }
        self.bytes = bytes
        self.starts = starts
        self.lengths = lengths
    }
}

/// One row of a result, read by column with typed getters. libpq gives
/// every value as text; a NULL where a value must be, or text that is not
/// the type asked for, is an error naming the column, not a crash.
struct PGRow {
    /// The result's column names (shared by its rows).
    let names: [String]
    let cells: [String?]

    private func name(_ i: Int) -> String { i < names.count ? names[i] : "#\(i + 1)" }

    private func cell(_ i: Int) throws(PGError) -> String {
        guard i < cells.count else { throw PGError(message: "the result has no column \(name(i))", sqlState: nil) }
        guard let s = cells[i] else { throw PGError(message: "column \(name(i)) is NULL", sqlState: nil) }
        return s
    }

    private func bad(_ i: Int, _ type: String, _ s: String) -> PGError {
        PGError(message: "column \(name(i)): '\(s.prefix(40))' is not \(type)", sqlState: nil)
    }

    func text(_ i: Int) throws(PGError) -> String { try cell(i) }

    /// Nil for NULL (and for a column the result does not have).
    func optionalText(_ i: Int) -> String? { i < cells.count ? cells[i] : nil }

    func int64(_ i: Int) throws(PGError) -> Int64 {
        let s = try cell(i)
        guard let n = Int64(s) else { throw bad(i, "an integer", s) }
        return n
    }

    func int(_ i: Int) throws(PGError) -> Int { Int(try int64(i)) }

    func optionalInt(_ i: Int) throws(PGError) -> Int? {
        guard optionalText(i) != nil else { return nil }
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

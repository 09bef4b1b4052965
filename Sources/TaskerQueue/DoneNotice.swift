import TaskerCore

/// What a NOTIFY on `tasker_done` says of a run's finished attempts:
///
/// - `run`: some finished; the coordinator looks by what it waits for;
/// - `run ids`: those jobs (`1,2,3`) finished; it reads their rows;
/// - `run ids given`: as above for `ids` (maybe none), and `given` holds
///   the results of the others, a JSON array of `[task, attempt, result]`:
///   attempts that succeeded with a short result on the definition's own
///   version, whose rows need not be read at all.
///
/// A completion names every job it finished in one of the two lists; the
/// coordinator's periodic look by what it waits for backs up a notice lost
/// or unreadable.
struct DoneNotice: Equatable {
    /// A result given in the notice.
    struct Given: Equatable {
        var task: TaskID
        var attempt: Int
        /// The result as stored (JSON text).
        var result: String
    }

    var run: Substring
    /// Jobs to read; nil: look by everything waited for.
    var ids: [Int64]?
    var given: [Given] = []

    /// Results at most this long go in the notice.
    static let givenResultBytes = 256
    /// A payload must stay under the server's 8,000 bytes; past this, the
    /// notice names every job by id instead.
    static let payloadBytes = 7900

    /// Reads a payload (nil: another run's, or not one of ours).
    static func parse(_ payload: String, run: String) -> DoneNotice? {
        let parts = payload.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard let first = parts.first, first == run else { return nil }
        guard parts.count > 1 else { return DoneNotice(run: first, ids: nil) }
        var notice = DoneNotice(run: first, ids: parts[1].split(separator: ",").compactMap { Int64($0) })
        if parts.count == 3 {
            // Unreadable: the run is looked through instead.
            guard let given = Self.given(String(parts[2])) else { return DoneNotice(run: first, ids: nil) }
            notice.given = given
        }
        return notice
    }

    /// `[[task, attempt, "result"], …]`, read in place (a tree of JSON
    /// values cost ~5,000 instructions a result).
    private static func given(_ text: String) -> [Given]? {
        var text = text
        return text.withUTF8 { bytes in
            var s = JSONScanner(bytes)
            return try? readGiven(&s)
        }
    }

    private static func readGiven(_ s: inout JSONScanner) throws(JSONReadError) -> [Given] {
        var out: [Given] = []
        var buffer: [UInt8] = []
        try expect(UInt8(ascii: "["), &s)
        s.skipSpace()
        if s.peek() == UInt8(ascii: "]") {
            s.position += 1
            try s.end()
            return out
        }
        while true {
            try expect(UInt8(ascii: "["), &s)
            let task = try integer(&s)
            try expect(UInt8(ascii: ","), &s)
            let attempt = try integer(&s)
            try expect(UInt8(ascii: ","), &s)
            s.skipSpace()
            let result: String
            if s.peek() == UInt8(ascii: "n") {
                // a succeeded attempt with no result stored returned nothing
                try s.literal("null")
                result = "[]"
            } else {
                buffer.removeAll(keepingCapacity: true)
                try s.string(into: &buffer)
                result = String(decoding: buffer, as: UTF8.self)
            }
            try expect(UInt8(ascii: "]"), &s)
            out.append(Given(task: TaskID(task), attempt: Int(attempt), result: result))
            s.skipSpace()
            guard s.peek() == UInt8(ascii: ",") else { break }
            s.position += 1
        }
        try expect(UInt8(ascii: "]"), &s)
        try s.end()
        return out
    }

    private static func expect(_ byte: UInt8, _ s: inout JSONScanner) throws(JSONReadError) {
        s.skipSpace()
        guard s.peek() == byte else { throw s.fail("expected '\(Character(UnicodeScalar(byte)))'") }
        s.position += 1
    }

    private static func integer(_ s: inout JSONScanner) throws(JSONReadError) -> Int64 {
        s.skipSpace()
        guard let b = s.peek(), b == UInt8(ascii: "-") || (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")),
              case .integer(let n) = try s.number() else { throw s.fail("expected an integer") }
        return n
    }
}

extension FinishedJob {
    /// An attempt whose result a notice gave: it succeeded on the
    /// coordinator's version of its definition, so there is no version to
    /// warn about and no row was read.
    init(given g: DoneNotice.Given) {
        self.init(task: g.task, attempt: g.attempt, state: "succeeded", result: g.result, error: nil, errorKind: nil,
                  errorWhere: nil, errorValue: nil, name: "", version: nil, ranVersion: nil, worker: nil, seq: 0)
    }
}

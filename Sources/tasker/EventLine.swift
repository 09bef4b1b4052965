import TaskerCore

/// One line of the events file: a JSON object with its keys in
/// JSONSerialization's sorted order (the file's lines keep the bytes they
/// had; for these lowercase keys it is byte order). The caller writes its
/// keys in that order; `event`, `t` and `ts`, which every line has, go in
/// at their places. Strings in the Foundation form, for a terminal
/// (`--events -`).
struct EventLine {
    var w = JSONWriter(.foundation.forTerminal, capacity: 256)
    private let event: StaticString
    private let t: Double
    private let ts: String
    /// How many of `event`, `t`, `ts` are written.
    private var common = 0
    /// The last key written (each must sort after it).
    private var last: StaticString = ""

    init(event: StaticString, t: Double, ts: String) {
        self.event = event
        self.t = t
        self.ts = ts
        w.beginObject()
    }

    mutating func key(_ k: StaticString) {
        while common < 3, Self.less(Self.commonKeys[common], k) { writeCommon() }
        assert(Self.less(last, k), "event keys out of order: \(last) before \(k)")
        last = k
        w.key(k)
    }

    mutating func id(_ id: TaskID) {
        key("id")
        w.integer(id)
    }

    /// A task event's `error`: the message, or null (every task event has
    /// the key); said whether it is written.
    mutating func error(_ message: String?) {
        key("error")
        if let message { w.string(message) } else { w.null() }
        hasError = true
    }
    private(set) var hasError = false

    mutating func nameAndState(_ id: TaskID, _ engine: Engine, state: TaskState? = nil) {
        key("name")
        w.string(engine.name(id))
        key("state")
        w.string((state ?? engine.state(id)).rawValue)
    }

    /// Counts per state (a handful, once per run).
    mutating func counts(_ c: [TaskState: Int]) {
        var byName: [String: Int] = [:]
        for (state, n) in c { byName[state.rawValue] = n }
        w.beginObject()
        for (name, n) in JSONKeyOrder.foundation.sorted(byName) {
            w.key(name)
            w.integer(n)
        }
        w.endObject()
    }

    mutating func finish() -> String {
        while common < 3 { writeCommon() }
        w.endObject()
        return w.text
    }

    private static let commonKeys: [StaticString] = ["event", "t", "ts"]

    private mutating func writeCommon() {
        let k = Self.commonKeys[common]
        assert(Self.less(last, k), "event keys out of order: \(last) before \(k)")
        last = k
        w.key(k)
        switch common {
        case 0: w.string(utf8: UnsafeBufferPointer(start: event.utf8Start, count: event.utf8CodeUnitCount))
        case 1: w.double(t)
        default: w.string(ts)
        }
        common += 1
    }

    /// Byte order.
    private static func less(_ a: StaticString, _ b: StaticString) -> Bool {
        let x = UnsafeBufferPointer(start: a.utf8Start, count: a.utf8CodeUnitCount)
        let y = UnsafeBufferPointer(start: b.utf8Start, count: b.utf8CodeUnitCount)
        return x.lexicographicallyPrecedes(y)
    }
}

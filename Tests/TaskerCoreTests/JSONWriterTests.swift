import Foundation
import Testing
import TaskerCore

/// The one JSON writer: each escaping form, numbers, layout, and the
/// Foundation form byte for byte as `JSONSerialization` writes it (the
/// outputs that used it kept their bytes).
@Suite struct JSONWriterTests {
    static let tricky = "q\"b\\s/t\u{8}\u{C}\n\r\t\u{1}\u{1F}\u{7F}\u{85}\u{9B}\u{A2}é😀\u{2028}end"

    static func json(_ format: JSONWriter.Format = .tasker, _ write: (inout JSONWriter) -> Void) -> String {
        var w = JSONWriter(format)
        write(&w)
        return w.text
    }

    @Test func eachEscapingFormWritesTheBytesItsOutputAlwaysHad() {
        let s = Self.tricky
        // the journal's run columns, show --json, log lines
        #expect(JSONEscaping.tasker.quoted(s) == #""q\"b\\s/t\u0008\u000c\n\r\t\u0001\u001f\u007f"# + "\u{85}\u{9B}\u{A2}é😀\u{2028}end\"")
        // json.encode
        #expect(JSONEscaping.lua.quoted(s) == #""q\"b\\s/t\b\f\n\r\t\u0001\u001f"# + "\u{7F}\u{85}\u{9B}\u{A2}é😀\u{2028}end\"")
        // a task's stored values
        #expect(JSONEscaping.storedValues.quoted(s) == #""q\"b\\s/t\u0008\u000c\u000a\u000d\u0009\u0001\u001f\u007f"# + "\u{85}\u{9B}\u{A2}é😀\u{2028}end\"")
        // events, runs --json, list --json, the JSON summary
        #expect(JSONEscaping.foundation.quoted(s) == #""q\"b\\s\/t\b\f\n\r\t\u0001\u001f"# + "\u{7F}\u{85}\u{9B}\u{A2}é😀\u{2028}end\"")
        // for a terminal: DEL, C1 and U+2028 too, the rest (U+00A2 is C2 A2) as it is
        #expect(JSONEscaping.foundation.forTerminal.quoted(s) == #""q\"b\\s\/t\b\f\n\r\t\u0001\u001f\u007f\u0085\u009b"# + "\u{A2}é😀" + #"\u2028end""#)
        // the characters that reorder a bidi terminal; their neighbours (E2 80 xx too) stay
        #expect(JSONEscaping.tasker.forTerminal.quoted("\u{200E}\u{202E}\u{2069}\u{2010}\u{2030}\u{206A}…")
                == #""\u200e\u202e\u2069"# + "\u{2010}\u{2030}\u{206A}…\"")
        #expect(JSONEscaping.tasker.forTerminal.quoted("x\u{9B}\n\"") == #""x\u009b\n\"""#)
        #expect(JSONEscaping.tasker.quoted("") == #""""#)
        #expect(JSONEscaping.tasker.quoted("plain text") == #""plain text""#)
        #expect(JSONEscaping.all.count == 8)
    }

    /// Bytes are copied as they are (a caller checks they are UTF-8 first);
    /// into a String or into bytes, the same text.
    @Test func bytesAndStringsAreEscapedAlike() {
        var out: [UInt8] = []
        let raw: [UInt8] = [0x61, 0xFF, 0x22, 0x0A, 0xC2]
        raw.withUnsafeBufferPointer { JSONEscaping.lua.append($0, to: &out) }
        #expect(out == [0x22, 0x61, 0xFF, 0x5C, 0x22, 0x5C, UInt8(ascii: "n"), 0xC2, 0x22])
        for e in JSONEscaping.all {
            var bytes: [UInt8] = []
            e.append(Self.tricky, to: &bytes)
            var text = "x"
            e.append(Self.tricky, to: &text)
            #expect("x" + String(decoding: bytes, as: UTF8.self) == text)
        }
    }

    @Test func numbers() {
        #expect(Self.json { w in
            w.beginArray()
            for n in [0, -1, 42, Int.max, Int.min] { w.integer(n) }
            w.endArray()
        } == "[0,-1,42,9223372036854775807,-9223372036854775808]")
        let doubles: [Double] = [0, -0.0, 1, 1.5, 0.1, 100, 1e15, 1e16, 1e-5, 1e-7, 0.1 + 0.2, 1.7976931348623157e308, .leastNonzeroMagnitude]
        #expect(Self.json { w in w.beginArray(); for d in doubles { w.double(d) }; w.endArray() }
                == "[0.0,-0.0,1.0,1.5,0.1,100.0,1000000000000000.0,1e+16,1e-05,1e-07,0.30000000000000004,1.7976931348623157e+308,5e-324]")
        #expect(Self.json(.foundation) { w in w.beginArray(); for d in doubles { w.double(d) }; w.endArray() }
                == "[0,-0,1,1.5,0.1,100,1000000000000000,1e+16,1e-05,1e-07,0.30000000000000004,1.7976931348623157e+308,5e-324]")
        // JSON has neither: null (JSONSerialization refused the whole value)
        #expect(Self.json { w in w.beginArray(); w.double(.nan); w.double(.infinity); w.double(-.infinity); w.endArray() }
                == "[null,null,null]")
    }

    @Test func nestedValuesCompactAndPretty() {
        let v: JSONValue = .object([("a", .array([.integer(1), .object([("b", .null)]), .array([])])), ("c", .object([])),
                                    ("d", .bool(true)), ("e", .string("x/y")), ("f", .double(2))])
        #expect(Self.json { $0.value(v) } == #"{"a":[1,{"b":null},[]],"c":{},"d":true,"e":"x/y","f":2.0}"#)
        #expect(Self.json(.foundation.prettyPrinted) { $0.value(v) } == """
            {
              "a" : [
                1,
                {
                  "b" : null
                },
                [

                ]
              ],
              "c" : {

              },
              "d" : true,
              "e" : "x\\/y",
              "f" : 2
            }
            """)
        #expect(Self.json { w in
            w.beginObject()
            w.key("raw"); w.raw(#"{"k":[1,2]}"#)
            w.key("s"); w.string(nil as String?)
            w.key("l"); w.strings(["a", "b"])
            w.endObject()
        } == #"{"raw":{"k":[1,2]},"s":null,"l":["a","b"]}"#)
    }

    @Test func keyOrders() {
        let keys = ["Z", "a", "é", "B", "aa", "a b", "_", "10", "9", "x2", "x10", "A"]
        let members = Dictionary(uniqueKeysWithValues: keys.map { ($0, 0) })
        #expect(JSONKeyOrder.string.sorted(members).map(\.key) == ["10", "9", "A", "B", "Z", "_", "a", "a b", "aa", "x10", "x2", "é"])
        #expect(JSONKeyOrder.foundation.sorted(members).map(\.key) == ["_", "9", "10", "a", "A", "a b", "aa", "B", "é", "x2", "x10", "Z"])
    }

    /// The Foundation form against `JSONSerialization` itself: what the
    /// events file, `runs --json`, `list --json` and the JSON summary wrote.
    @Test func theFoundationFormIsWhatJSONSerializationWrites() throws {
        let strings = [Self.tricky, "", "a/b", "\u{0}\u{7}\u{B}\u{1B}", "日本語 ✓", "\\\\\"\"", "https://x.example/a?b=c"]
        let doubles: [Double] = [0, 0.5, 1, 12.5, 0.123, 1e15, 1e16, 1e21, 1e-7, 1.0 / 3, 0.008449206, 123456.789, -2.5, 1e300]
        var vars: [String: Any] = [:]
        for (i, k) in ["Zeta", "alpha", "10", "9", "B", "_u", "é", "a b"].enumerated() { vars[k] = strings[i % strings.count] }
        let object: [String: Any] = ["strings": strings, "doubles": doubles, "ints": [0, -3, Int.max], "flags": [true, false],
                                     "vars": vars, "empty": [Any](), "none": [String: Any](), "nested": [["a": 1], ["b": [1.5]]]]
        let value: JSONValue = .object([
            "strings": .strings(strings), "doubles": .array(doubles.map(JSONValue.double)),
            "ints": .array([.integer(0), .integer(-3), .integer(Int64.max)]), "flags": .array([.bool(true), .bool(false)]),
            "vars": .object(vars.mapValues { .string($0 as! String) }, order: .foundation), "empty": .array([]), "none": .object([]),
            "nested": .array([.object([("a", .integer(1))]), .object([("b", .array([.double(1.5)]))])]),
        ], order: .foundation)
        for (options, format) in [(JSONSerialization.WritingOptions.sortedKeys, JSONWriter.Format.foundation),
                                  ([.sortedKeys, .prettyPrinted], .foundation.prettyPrinted)] {
            let expected = String(decoding: try JSONSerialization.data(withJSONObject: object, options: options), as: UTF8.self)
            #expect(Self.json(format) { $0.value(value) } == expected)
        }
    }
}

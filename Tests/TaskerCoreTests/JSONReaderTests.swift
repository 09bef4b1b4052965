import Foundation
import Testing
import TaskerCore

/// The one JSON reader: values, escapes, numbers, what the writer wrote
/// read back, and bad text refused saying what and where.
@Suite struct JSONReaderTests {
    @Test func valuesAndStructure() throws {
        let v = try JSONReader.read(#" {"a": [1, -2.5, true, false, null, "x"], "b": {}, "c": [], "a2": {"k": [[]]}} "#)
        #expect(v == .object([("a", .array([.integer(1), .double(-2.5), .bool(true), .bool(false), .null, .string("x")])),
                              ("b", .object([])), ("c", .array([])), ("a2", .object([("k", .array([.array([])]))]))]))
        #expect(v["a"]?.array?.count == 6 && v["b"]?.members?.isEmpty == true && v["zz"] == nil)
        #expect(try JSONReader.read(#"{"k":1,"k":2}"#)["k"] == .integer(2), "the last of a repeated key")
        #expect(try JSONReader.read(#"["a","b"]"#).stringArray == ["a", "b"])
        #expect(try JSONReader.read(#"["a",1]"#).stringArray == nil)
        #expect(try JSONReader.read(#"{"a":"x","b":"y"}"#).dictionary(\.string) == ["a": "x", "b": "y"])
        #expect(try JSONReader.read(#"{"a":1,"b":1.5}"#).dictionary(\.integer) == nil)
    }

    @Test func stringEscapes() throws {
        #expect(try JSONReader.read(#""q\"b\\s\/t\b\f\n\r\t\u0001\u007f\u00e9\ud83d\ude00 é""#)
                == .string("q\"b\\s/t\u{8}\u{C}\n\r\t\u{1}\u{7F}é😀 é"))
        // every escaping form reads back as the same text
        let s = JSONWriterTests.tricky
        for e in JSONEscaping.all { #expect(try JSONReader.read(e.quoted(s)) == .string(s)) }
    }

    @Test func numbers() throws {
        #expect(try JSONReader.read("[0, -0, 9223372036854775807, -9223372036854775808, 9223372036854775808, 1.0, 1e2, -0.0, 2.5E-3]")
                == .array([.integer(0), .integer(0), .integer(.max), .integer(.min), .double(9223372036854775808), .double(1),
                           .double(100), .double(-0.0), .double(0.0025)]))
        #expect(try JSONReader.read("1.0").number == 1 && JSONReader.read("3").number == 3 && JSONReader.read("1.5").integer == nil)
    }

    @Test func whatTheWriterWritesReadsBack() throws {
        let v: JSONValue = .object([("s", .string(JSONWriterTests.tricky)), ("n", .array([.integer(-7), .double(0.1), .double(1e-7)])),
                                    ("o", .object([("t", .bool(true)), ("z", .null)]))])
        for format in [JSONWriter.Format.tasker, .foundation, .foundation.prettyPrinted, .tasker.forTerminal] {
            var w = JSONWriter(format)
            w.value(v)
            #expect(try JSONReader.read(w.text) == v)
        }
    }

    @Test func badTextIsRefusedSayingWhatAndWhere() {
        let cases: [(String, String)] = [
            ("", "unexpected end of text at line 1, column 1 (byte 1)"),
            ("{\"a\" 1}", "expected ':' at line 1, column 6 (byte 6)"),
            ("{\"a\":1,}", "expected a string key at line 1, column 8 (byte 8)"),
            ("[1,]", "unexpected ']' at line 1, column 4 (byte 4)"),
            ("[1 2]", "expected ',' or ']' at line 1, column 4 (byte 4)"),
            ("{\"a\":1", "expected ',' or '}' at line 1, column 7 (byte 7)"),
            ("[1]\n x", "unexpected 'x' after the value at line 2, column 2 (byte 6)"),
            ("tru", "invalid literal (expected 'true') at line 1, column 4 (byte 4)"),
            ("01", "invalid number (leading zero) at line 1, column 1 (byte 1)"),
            ("1.", "invalid number (no digits after '.') at line 1, column 3 (byte 3)"),
            ("1e", "invalid number (no digits in the exponent) at line 1, column 3 (byte 3)"),
            ("-", "invalid number at line 1, column 2 (byte 2)"),
            ("\"abc", "unterminated string at line 1, column 5 (byte 5)"),
            ("\"a\nb\"", "control character in string at line 1, column 3 (byte 3)"),
            ("\"\\x\"", "invalid escape '\\x' at line 1, column 3 (byte 3)"),
            ("\"\\u12\"", "invalid \\u escape at line 1, column 4 (byte 4)"),
            ("\"\\u+041\"", "invalid \\u escape at line 1, column 4 (byte 4)"),
            ("\"\\u004g\"", "invalid \\u escape at line 1, column 4 (byte 4)"),
            ("\"\\ud800\"", "lone surrogate in \\u escape at line 1, column 8 (byte 8)"),
            ("\"\\udc00\"", "lone surrogate in \\u escape at line 1, column 8 (byte 8)"),
            ("\"\\ud800\\u0041\"", "invalid surrogate pair at line 1, column 14 (byte 14)"),
            ("\u{1}", "unexpected byte 0x01 at line 1, column 1 (byte 1)"),
            (String(repeating: "[", count: 201), "nested deeper than 200 levels at line 1, column 201 (byte 201)"),
        ]
        for (text, message) in cases {
            #expect(throws: JSONReadError(message: message), "\(text.debugDescription)") { try JSONReader.read(text) }
        }
        #expect(throws: Never.self) { try JSONReader.read(String(repeating: "[", count: 200) + String(repeating: "]", count: 200)) }
    }
}

/// Display widths of text on a terminal, for lines that must fit in one row:
/// a line one column too wide wraps, and erasing "the last N lines" then
/// leaves its first row behind in the scrollback.
enum TerminalWidth {
    /// Columns `scalar` takes: 0 for combining marks and zero-width
    /// characters, 2 for East Asian wide and fullwidth characters and most
    /// emoji, 1 otherwise. Control characters never reach here (names are
    /// made visible first).
    static func of(_ scalar: Unicode.Scalar) -> Int {
        let v = scalar.value
        if v < 0x300 { return 1 }
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: break
        }
        if isWide(v) { return 2 }
        return 1
    }

    private static func isWide(_ v: UInt32) -> Bool {
        switch v {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF,
             0x4E00...0x9FFF, 0xA000...0xA4CF, 0xAC00...0xD7A3, 0xF900...0xFAFF,
             0xFE30...0xFE4F, 0xFF00...0xFF60, 0xFFE0...0xFFE6,
             0x1F300...0x1F64F, 0x1F900...0x1F9FF, 0x20000...0x3FFFD:
            return true
        default:
            return false
        }
    }

    /// Columns `text` takes, not counting CSI escape sequences (colours).
    static func of(_ text: String) -> Int {
        var width = 0
        walk(text) { _, w, _ in width += w; return true }
        return width
    }

    /// `text` cut to at most `columns` columns. Escape sequences pass
    /// through at no width; a cut inside coloured text resets the colour so
    /// nothing after the line is painted.
    static func clip(_ text: String, to columns: Int) -> String {
        guard of(text) > columns else { return text }
        var out = String.UnicodeScalarView()
        var width = 0
        var painted = false
        walk(text) { scalars, w, isEscape in
            if isEscape {
                out.append(contentsOf: scalars)
                painted = !(scalars.count == 4 && scalars.elementsEqual("\u{1B}[0m".unicodeScalars))
                return true
            }
            guard width + w <= columns else { return false }
            width += w
            out.append(contentsOf: scalars)
            return true
        }
        var clipped = String(out)
        if painted { clipped += "\u{1B}[0m" }
        return clipped
    }

    /// Calls `body` with each escape sequence (width 0, `true`) or scalar
    /// (its width, `false`) in order, until it returns false.
    private static func walk(_ text: String, _ body: ([Unicode.Scalar], Int, Bool) -> Bool) {
        let scalars = Array(text.unicodeScalars)
        var i = 0
        while i < scalars.count {
            if scalars[i] == "\u{1B}", i + 1 < scalars.count, scalars[i + 1] == "[" {
                var j = i + 2
                // Parameters and intermediates, then one final byte in @...~.
                while j < scalars.count, !(0x40...0x7E).contains(scalars[j].value) { j += 1 }
                let end = min(j + 1, scalars.count)
                guard body(Array(scalars[i..<end]), 0, true) else { return }
                i = end
                continue
            }
            guard body([scalars[i]], of(scalars[i]), false) else { return }
            i += 1
        }
    }

    /// Rows that lines of these widths take on a terminal `columns` wide
    /// that reflows long lines (after the window narrowed, a line drawn to
    /// fit the old width may now take several rows).
    static func rows(of widths: [Int], columns: Int) -> Int {
        guard columns > 0 else { return widths.count }
        return widths.reduce(0) { $0 + max(1, ($1 + columns - 1) / columns) }
    }
}

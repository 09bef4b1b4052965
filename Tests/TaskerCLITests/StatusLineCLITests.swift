import Foundation
import Testing

/// The status line on narrow terminals: it must fit the window's width, so
/// erasing it leaves nothing behind between log lines.
@Suite struct StatusLineCLITests {
    static let script = """
        local names = {}
        for i = 1, 3 do
          tasker.add{name = "a-task-name-much-longer-than-the-window-" .. i, run = function(ctx)
            for k = 1, 6 do
              ctx:progress(k / 6, "step " .. k .. " of a message too long to fit")
              log.info("line " .. k .. " of task " .. i)
              tasker.sleep(0.05)
            end
            -- wait for the window to be resized, when the shell does that
            while fs.exists("resize-me") and not fs.exists("resized") do tasker.sleep(0.02) end
            for k = 1, 4 do ctx:progress(k / 4, "after"); tasker.sleep(0.05) end
          end}
        end
        """

    /// Runs `prog.lua` in a pseudo-terminal `columns` wide (through
    /// `script`), resized to `resizeTo` columns mid-run if given; the raw
    /// bytes it drew.
    func inTerminal(columns: Int, resizeTo: Int? = nil) async throws -> String {
        let s = try Scratch(["prog.lua": Self.script])
        defer { s.cleanup() }
        var command = "stty cols \(columns) rows 50; "
        if let resizeTo {
            // Resize once the tasks have drawn (they wait for "resized"),
            // and mark the moment in the output.
            command += """
                touch resize-me; \(taskerBinary().path) run prog.lua & pid=$!; \
                sleep 0.4; stty cols \(resizeTo); printf '\\033]0;RESIZED\\007'; touch resized; wait $pid
                """
        } else {
            command += "exec \(taskerBinary().path) run prog.lua"
        }
        return try await inPseudoTerminal(command, in: s.dir)
    }

    @Test(arguments: [20, 45])
    func nothingOfTheStatusLineStaysOnANarrowTerminal(columns: Int) async throws {
        let raw = try await inTerminal(columns: columns)
        var screen = TerminalScreen(width: columns)
        screen.feed(raw)
        let rows = screen.rows
        // The status line was drawn (it names the run's progress)...
        #expect(raw.contains("tasker: running"))
        // ...and after the run not one of its rows is left: every row is a
        // log line (or its wrapped rest) or the summary.
        for row in rows {
            #expect(!row.contains("·") && !row.contains("%") && !row.contains("...."), "left behind: \(row.debugDescription)")
        }
        let text = screen.joinedLines()
        for i in 1...3 {
            for k in 1...6 { #expect(text.contains("line \(k) of task \(i)"), "log line \(k) of \(i) lost") }
        }
        #expect(text.contains("3 tasks: 3 succeeded"))
    }

    /// A paused run says so in lower case, as the rest of the line reads.
    @Test func aPausedRunSaysPaused() async throws {
        let s = try Scratch(["prog.lua": """
            tasker.pause()
            local h = tasker.add{name = "later", run = function() return 1 end}
            tasker.sleep(0.6)
            tasker.resume()
            h:await()
            """])
        defer { s.cleanup() }
        let raw = try await inPseudoTerminal("stty cols 100 rows 50; exec \(taskerBinary().path) run prog.lua", in: s.dir)
        #expect(raw.contains("paused (SIGUSR2 resumes)"), "\(raw.debugDescription)")
        #expect(!raw.contains("PAUSED"))
        #expect(raw.contains("1 task: 1 succeeded") || raw.contains("1 tasks: 1 succeeded"), "\(raw.debugDescription)")
    }

    @Test func aResizedWindowGetsFramesOfItsNewWidth() async throws {
        let raw = try await inTerminal(columns: 60, resizeTo: 24)
        let marker = try #require(raw.range(of: "\u{1B}]0;RESIZED\u{07}"))
        // The last frame before the summary was drawn for the new width.
        let after = String(raw[marker.upperBound...])
        let frames = after.components(separatedBy: "\u{1B}[J").dropLast()  // the text after each erase
        let last = try #require(frames.last { $0.contains("tasker: running") })
        for line in last.split(separator: "\n") {
            let visible = line.replacingOccurrences(of: #"\u{1B}\[[0-9;]*[A-Za-z]"#, with: "", options: .regularExpression)
                .replacingOccurrences(of: "\r", with: "")
            #expect(visible.count < 24, "\(visible.debugDescription)")
        }
    }
}

/// Just enough of a terminal to see what stays on screen: printable
/// characters with automatic wrap, CR, LF, cursor up, erase in line and
/// erase to the end of the screen; colours are ignored.
struct TerminalScreen {
    let width: Int
    private(set) var rows: [String] = [""]
    private var grid: [[Character]] = [[]]
    /// Rows that began with a wrap (continuations of the row before).
    private var wrapped: Set<Int> = []
    private var row = 0, col = 0

    init(width: Int) { self.width = width }

    mutating func feed(_ text: String) {
        let chars = Array(text)
        var i = 0
        while i < chars.count {
            let c = chars[i]
            if c == "\u{1B}", i + 1 < chars.count {
                i = escape(chars, from: i)
                continue
            }
            switch c {
            case "\r": col = 0
            case "\n", "\r\n": lineFeed(); col = 0
            case "\u{07}": break
            default:
                if col >= width { lineFeed(); wrapped.insert(row); col = 0 }
                while grid[row].count <= col { grid[row].append(" ") }
                grid[row][col] = c
                col += 1
            }
            i += 1
        }
        rows = grid.map { String($0).trimmingCharacters(in: .whitespaces) }
    }

    /// Rows joined back into the lines that were written (wrapped rows
    /// rejoined), to search for whole log lines.
    func joinedLines() -> String {
        var out = ""
        for (i, r) in grid.enumerated() {
            if i > 0 && !wrapped.contains(i) { out += "\n" }
            out += String(r)
        }
        return out
    }

    private mutating func lineFeed() {
        row += 1
        if grid.count <= row { grid.append([]) }
    }

    /// Applies the sequence at `i` (CSI or OSC); the index after it.
    private mutating func escape(_ chars: [Character], from i: Int) -> Int {
        if chars[i + 1] == "]" {  // OSC: up to BEL
            var j = i + 2
            while j < chars.count, chars[j] != "\u{07}" { j += 1 }
            return j + 1
        }
        guard chars[i + 1] == "[" else { return i + 2 }
        var j = i + 2
        var params = ""
        while j < chars.count, !(chars[j].isLetter) { params.append(chars[j]); j += 1 }
        guard j < chars.count else { return j }
        let n = Int(params) ?? 1
        switch chars[j] {
        case "A": row = max(0, row - n)
        case "J":
            grid[row] = Array(grid[row].prefix(col))
            grid.removeSubrange((row + 1)...)
            wrapped = wrapped.filter { $0 <= row }
        case "K": grid[row] = params == "2" ? [] : Array(grid[row].prefix(col))
        default: break
        }
        return j + 1
    }
}

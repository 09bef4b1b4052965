import Foundation
import Testing
import TaskerCore
@testable import TaskerJournal

/// Writing log rows: a failure says SQLite's reason.
@Suite struct LogRowWriteTests {
    /// A row bound in place and refused (another process holds the write
    /// lock) names the lock: the unbinding after the step had set the
    /// connection's message to "not an error", which the run's end then
    /// printed.
    @Test func aRefusedLogRowSaysWhy() throws {
        let dir = NSTemporaryDirectory() + "journal-rows-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try SQLiteJournalStore(directory: dir, busyTimeout: 20)
        try store.insert(JournalRun(id: "r", pipeline: "/p.lua", args: [], vars: [:], started: 1, pid: 1))
        try store.appendLog(run: "r", seq: 1, data: [JournalCodec.version])
        let other = try SQLiteDatabase(path: dir + "/" + Journal.fileName)
        try other.execute("BEGIN IMMEDIATE")
        defer { try? other.execute("ROLLBACK") }
        #expect {
            try store.appendLog(run: "r", seq: 2, data: [JournalCodec.version])
        } throws: { error in
            "\(error)".contains("database is locked")
        }
        #expect {
            try store.appendLogs(run: "r", seq: 2, rows: [[JournalCodec.version], [JournalCodec.version]])
        } throws: { error in
            "\(error)".contains("locked")
        }
    }
}

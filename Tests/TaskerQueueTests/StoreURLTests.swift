import Testing
@testable import TaskerQueue

/// `--store` URLs shown with the password hidden, well-formed or not.
@Suite struct StoreURLTests {
    @Test(arguments: [
        ("postgres://app:PW@db/x", "postgres://app:***@db/x"),
        ("postgresql://app@db/x", "postgresql://app@db/x"),
        (" postgres://app:PW@db/x", " postgres://app:***@db/x"),
        ("postgres:/app:PW@db/x", "postgres:/app:***@db/x"),
        ("postgres:app:PW@db/x", "postgres:app:***@db/x"),
        ("postgres://app:P/W@db/x", "postgres://app:***@db/x"),
        ("postgres://app:P@W@db/x", "postgres://app:***@db/x"),
        ("postgres://db/x?user=a&password=PW&sslmode=off", "postgres://db/x?user=a&password=***&sslmode=off"),
        ("host=db PASSWORD=PW user=a", "host=db PASSWORD=*** user=a"),
        ("postgresql://u:PW@/db?host=/tmp", "postgresql://u:***@/db?host=/tmp"),
    ])
    func redacted(_ url: String, _ shown: String) {
        #expect(StoreURL.redacted(url) == shown)
    }

    @Test func checkAcceptsPostgresURLsAndRefusesTheRestWithoutThePassword() throws {
        for good in ["postgres://u:p@h/db", "postgresql://u:p@/db?host=/tmp", "postgres://ü:pw@hé/dé", "postgresql:///db"] {
            try StoreURL.check(good)
        }
        for bad in ["", " postgres://u:SECRET@h", "postgres:/u:SECRET@h", "mysql://u:SECRET@h", "postgres://u:SE CRET@h",
                    "postgres://u:SECRET@h\u{7}", "password=SECRET host=h", "postgres://u:" + String(repeating: "x", count: 9000) + "SECRET@h"] {
            #expect(throws: StoreURL.Invalid.self) { try StoreURL.check(bad) }
            do { try StoreURL.check(bad) } catch { #expect(!error.description.contains("SECRET"), "\(error)") }
        }
    }

    @Test func libpqTextLosesTheURLAndThePassword() {
        let url = "postgres://u:p%40ss_word@h/db"
        let text = "invalid URI \"postgres://u:p%40ss_word@h/db\" near p@ss_word and p%40ss_word"
        let out = StoreURL.redact(text, url: url)
        #expect(!out.contains("ss_word"), "\(out)")
        let port = StoreURL.redact("invalid integer value \"SECRET\" for connection option \"port\"", url: "postgres://u:SECRET/PW@h/db")
        #expect(!port.contains("SECRET"), "\(port)")
    }
}

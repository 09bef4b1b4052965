// swift-tools-version:6.0
import PackageDescription

// The engine, the runtime, the recorder and the journal's encoder work on
// one thread each (what threads share is behind locks) and never hand out
// `inout` access across calls, so release builds skip the dynamic
// exclusivity checks (they cost ~10% of the per-task path). Debug builds,
// and so the tests, keep them.
let hotPath: [SwiftSetting] = [
    .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release)),
]

let package = Package(
    name: "tasker",
    products: [
        .executable(name: "tasker", targets: ["tasker"]),
        .library(name: "TaskerCore", targets: ["TaskerCore"]),
        .library(name: "TaskerLua", targets: ["TaskerLua"]),
        .library(name: "TaskerJournal", targets: ["TaskerJournal"]),
        .library(name: "TaskerQueue", targets: ["TaskerQueue"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // Tests only: the HTTP server the HTTP tests talk to.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
    ],
    targets: [
        // Lua 5.4 from the system (Debian: liblua5.4-dev).
        .systemLibrary(
            name: "CLua",
            pkgConfig: "lua5.4",
            providers: [.apt(["liblua5.4-dev"])]
        ),
        // The only code that may longjmp: macro wrappers, the trampoline, the
        // engine-aware coroutine library and the interrupt hook.
        .target(name: "CLuaShim", dependencies: ["CLua"]),
        // SQLite 3 from the system (Debian: libsqlite3-dev), for the journal.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // The journal of runs: written on its own thread, read for history,
        // resume and the report. Knows nothing of Lua.
        .target(name: "TaskerJournal", dependencies: ["CSQLite", "TaskerCore"], swiftSettings: hotPath),
        // PostgreSQL's client library from the system (Debian: libpq-dev):
        // its header here; the functions in CPostgresLoader, which loads
        // libpq at the first connection instead of at every start.
        .systemLibrary(name: "CPostgres"),
        .target(name: "CPostgresLoader", dependencies: ["CPostgres"], linkerSettings: [.linkedLibrary("dl")]),
        // The queue of defined tasks on PostgreSQL: the coordinator's side
        // and the worker's. libpq blocks, so each connection has a thread.
        .target(name: "TaskerQueue", dependencies: ["CPostgres", "CPostgresLoader", "TaskerCore", "TaskerJournal"]),
        // A cheap clock for timestamps that are only recorded (the CPU's
        // counter; C, since Swift has no inline assembly).
        .target(name: "CTicks"),
        // Signal handlers that only write to a pipe (async-signal-safe C).
        .target(name: "CSignalPipe"),
        // mallopt, for the executable (see MemoryTuning).
        .target(name: "CMallocTuning"),
        .target(
            name: "TaskerCore",
            dependencies: ["CTicks", "CSignalPipe",
                           // the two modules used, not the umbrella: every module linked adds
                           // protocol conformance records that the runtime scans at start-up
                           .product(name: "DequeModule", package: "swift-collections"),
                           .product(name: "HeapModule", package: "swift-collections")],
            swiftSettings: hotPath
        ),
        // libcurl, loaded at the first request instead of at every start.
        .target(name: "CCurlLoader", linkerSettings: [.linkedLibrary("dl")]),
        // The HTTP client behind a small protocol (libcurl's multi interface).
        .target(name: "TaskerHTTP", dependencies: ["CCurlLoader"]),
        .target(
            name: "TaskerLua",
            dependencies: ["TaskerCore", "TaskerHTTP", "CLuaShim", "CLua",
                           .product(name: "DequeModule", package: "swift-collections"),
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: hotPath
        ),
        .executableTarget(
            name: "tasker",
            dependencies: ["TaskerCore", "TaskerHTTP", "TaskerLua", "TaskerJournal", "TaskerQueue", "CMallocTuning",
                           .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "Logging", package: "swift-log")],
            swiftSettings: hotPath
        ),
        // Ends a test process that hangs, printing where (every test target
        // links it: whichever binary runs, the watchdog runs).
        .target(name: "TestWatchdog", path: "Tests/TestWatchdog"),
        .testTarget(name: "TaskerCoreTests", dependencies: ["TaskerCore", "TestWatchdog"]),
        .testTarget(name: "TaskerHTTPTests", dependencies: ["TaskerHTTP", "TestWatchdog"]),
        .testTarget(name: "TaskerJournalTests", dependencies: ["TaskerJournal", "TaskerCore", "TestWatchdog"]),
        // A real PostgreSQL for the tests (initdb in a temp dir).
        .target(name: "PostgresTestServer", path: "Tests/PostgresTestServer"),
        // Real sshd hosts for the tests (network namespaces as root).
        .target(name: "SSHTestHosts", path: "Tests/SSHTestHosts"),
        .testTarget(name: "TaskerQueueTests", dependencies: ["TaskerQueue", "TaskerCore", "PostgresTestServer", "TestWatchdog"]),
        .testTarget(name: "TaskerLuaTests", dependencies: ["TaskerLua", "TaskerCore", "SSHTestHosts", "TestWatchdog",
                                                           .product(name: "Logging", package: "swift-log"),
                                                           .product(name: "NIOCore", package: "swift-nio"),
                                                           .product(name: "NIOPosix", package: "swift-nio"),
                                                           .product(name: "NIOHTTP1", package: "swift-nio"),
                                                           .product(name: "NIOConcurrencyHelpers", package: "swift-nio")]),
        .testTarget(name: "TaskerCLITests", dependencies: ["PostgresTestServer", "SSHTestHosts", "TestWatchdog"]),
    ],
    swiftLanguageModes: [.v6]
)

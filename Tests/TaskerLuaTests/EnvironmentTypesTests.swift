import Foundation
import Testing

/// types/tasker.lua documents exactly what the runtime exports.
@Suite struct TypesFileTests {
    @Test func everyExportedFunctionIsAnnotatedAndNothingElse() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let types = try String(contentsOf: root.appendingPathComponent("types/tasker.lua"), encoding: .utf8)
        let documented = Set(types.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("function ") else { return nil }
            let name = line.dropFirst("function ".count).prefix { $0 != "(" }
            return name.contains(":") ? nil : String(name)
        })
        let r = try await runLua("""
            local names = {}
            for _, m in ipairs({"tasker", "json", "log", "http", "fs", "ssh"}) do
              for k, v in pairs(_G[m]) do
                if type(v) == "function" then names[#names + 1] = m .. "." .. k end
              end
            end
            table.sort(names)
            print(table.concat(names, " "))
            """)
        let exported = Set(r.lines[0].split(separator: " ").map(String.init))
        #expect(exported == documented, "missing: \(exported.subtracting(documented).sorted()), stale: \(documented.subtracting(exported).sorted())")
        #expect(PipelineCheck.compiles(root.appendingPathComponent("types/tasker.lua").path))
    }
}

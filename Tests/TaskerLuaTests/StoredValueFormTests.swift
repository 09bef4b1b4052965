import Foundation
import Testing
import TaskerCore
import TaskerLua

/// Stored values as a resume reads them: the plain array every version
/// wrote, the tagged form, and forms this version does not know.
@Suite struct StoredValueFormTests {
    func resume(_ reuse: [String: String]) async throws -> LuaRun {
        let path = "/tmp/tk-stored-\(UUID().uuidString.prefix(8)).lua"
        try """
            local h = tasker.add{id = "x", run = function() return "ran" end}
            local r = table.pack(h:await())
            local out = {}
            for i = 1, r.n do
              local v = r[i]
              if type(v) == "table" then
                local keys = {}
                for k, x in pairs(v) do keys[#keys + 1] = math.type(k) or type(k) end
                table.sort(keys)
                out[#out + 1] = "table(" .. table.concat(keys, ",") .. ")"
              else
                out[#out + 1] = (math.type(v) or type(v)) .. ":" .. tostring(v)
              end
            end
            print(table.concat(out, " "))
            """.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let out = TextSink()
        var options = LuaRuntime.Options()
        options.output = { out.append($0) }
        options.identify = true
        options.reuse = reuse
        let result = await PipelineRunner.run(path: path, options: options)
        return LuaRun(output: out.value, diagnostics: "", result: result)
    }

    @Test func oldPlainArraysStillRead() async throws {
        let r = try await resume(["x": #"[42, "s", 1.5, 2.0, null, {"k": 1, "n": [1, 2]}, [true, false]]"#])
        #expect(r.output == "integer:42 string:s float:1.5 float:2.0 nil:nil table(string,string) table(integer,integer)\n")
        #expect(r.result.reused == 1)
    }

    @Test func theTaggedFormKeepsKeysAndFloats() async throws {
        let r = try await resume(["x": #"{"$v":2,"values":[{"$pairs":[[1,"a"],["1","b"],[1.5,"c"],[true,"d"]]},{"$float":"-0"},[1,null,3]]}"#])
        #expect(r.output == "table(boolean,float,integer,string) float:-0.0 table(integer,integer)\n")
    }

    @Test func aFormThisVersionDoesNotKnowRunsTheTaskAgain() async throws {
        for text in [#"{"$v":3,"values":[1]}"#, #"{"$v":2,"values":[{"$later":1}]}"#, "[1,", "not json", "{}"] {
            let r = try await resume(["x": text])
            #expect(r.output == "string:ran\n", "\(text)")
            #expect(r.result.reused == 0)
        }
    }
}

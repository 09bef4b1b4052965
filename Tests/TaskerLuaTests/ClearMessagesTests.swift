import Testing

/// Messages that say what was wrong, where.
@Suite struct ClearMessagesTests {
    @Test func badValuesAreNamedPrecisely() async throws {
        let r = try await runLua("""
            local function try(f, ...) print(select(2, pcall(f, ...)).message) end
            try(tasker.intercept, {name = "x", fn = function() end, extra = 1})
            try(tasker.exec, {"echo", "a\\0b"})
            try(tasker.sh, "echo a\\0b")
            tasker.intercept{name = "retag", fn = function(t) if t.name == "t" then t.tags = {1, 2} end end}
            print(select(2, tasker.add{name = "t", run = function() end}:result()).message)
            tasker.intercept{name = "keyed", fn = function(t) if t.name == "k" then t.tags = {"a", x = "b"} end end}
            print(select(2, tasker.add{name = "k", run = function() end}:result()).message)
            try(tasker.add, {run = print, tags = {a = "x"}})
            try(json.encode, {}, {indent = 2})
            try(json.encode, {}, {pretty = "yes"})
            print(select(2, tasker.add{name = "p", run = function(ctx) ctx:progress(0/0) end}:result()).message)
            """)
        #expect(r.lines == [
            "unknown field 'extra' in 'tasker.intercept' spec (known: fn, max_hold, name, on)",
            "bad element #2 in 'tasker.exec' command (it contains a NUL byte)",
            "bad argument #1 to 'tasker.sh' (it contains a NUL byte)",
            "interceptor 'retag' failed: pipeline.lua:5: usage: bad value for t.tags (list of strings expected, element #1 is number)",
            "interceptor 'keyed' failed: pipeline.lua:7: usage: bad value for t.tags (list of strings expected, it has the key 'x')",
            "bad field 'tags' in 'tasker.add' spec (list of strings expected, got table)",
            "unknown option 'indent' to 'json.encode' (known: pretty)",
            "bad option 'pretty' to 'json.encode' (boolean expected, got string)",
            "bad argument #1 to 'ctx:progress' (finite number expected, got NaN)",
        ])
    }

    @Test func aCStackOverflowNamesTheLineWhereItHappened() async throws {
        let r = try await runLua("""
            local h = tasker.add{name = "deep", run = function()
              local mt = {}
              mt.__index = function(t, k) return tostring(setmetatable({}, mt)) end
              mt.__tostring = function(x) return x.y end
              return tostring(setmetatable({}, mt))
            end}
            h:result()
            """)
        #expect(r.result.failed.map(\.message).first?.hasSuffix(": C stack overflow") == true)
        #expect(r.result.failed.map(\.message).first?.hasPrefix("pipeline.lua:") == true)
    }

    /// The same in an interceptor and a reactor, and a table an
    /// interceptor or a reactor raises: where it happened.
    @Test func hooksErrorsWithoutAPositionGetTheirLine() async throws {
        let r = try await runLua("""
            local function gs(n) return (string.gsub("a", "a", function() return gs(n + 1) end)) end
            tasker.intercept{name = "ic", fn = function(t) if t.name == "a" then gs(1) end end}
            tasker.react{name = "r", when = function(t, res) return t.name == "b" end, fn = function() gs(1) end}
            tasker.react{name = "t", when = function(t, res) return t.name == "c" end, fn = function() error({x = 1}) end}
            for _, n in ipairs{"a", "b", "c"} do
              local ok, err = tasker.add{name = n, run = function() return 1 end}:result()
              print(n, err.message)
            end
            """)
        // an interceptor: where it is defined; a reactor: where it happened
        #expect(r.lines == ["a\tinterceptor 'ic' failed: pipeline.lua:2: C stack overflow",
                            "b\treactor 'r' failed: pipeline.lua:1: C stack overflow",
                            "c\treactor 't' failed: pipeline.lua:4: {\"x\":1}"], "\(r.output)")
    }
}

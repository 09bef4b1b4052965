import Testing

/// README, Tasks: tasker.define — named task functions with JSON args and values.
@Suite struct DefineTests {
    @Test func aDefinedFunctionAddsTasksThatRunInProcess() async throws {
        let r = try await runLua("""
            local resize = tasker.define("resize", {timeout = 5, tags = {"img"}}, function(ctx, args)
              tasker.sleep(0.01)
              return {w = args.w // 2, h = args.h // 2}, ctx.name, ctx.tags[1]
            end)
            local h = resize{args = {w = 640, h = 480}}
            local small, name, tag = h:await()
            print(small.w, small.h, name, tag, math.type(small.w))
            local named = resize{args = {w = 2, h = 2}, name = "thumb"}
            print(select(2, named:await()))
            local plain = tasker.define("noop", function() end)
            print(plain():await())
            print(tasker.define("cp", function() end){args = {"in/a", "out/a"}}.name)
            print(tasker.define("long", function() end){args = {path = string.rep("x", 100)}}.name)
            print(tasker.define("call", function() end){args = {api_key = "AKIA123", url = "https://u:pw@h/x?token=abc&n=1"}}.name)
            local mix = tasker.define("mix", function() end)
            for _ = 1, 2 do  -- the second time, what each key is was remembered
              print(mix{args = {z = 1, [2] = "b", [1] = "a", auth = "x"}}.name, mix{args = {auth = 7}}.name)
            end
            """)
        #expect(r.lines == ["320\t240\tresize(h=480, w=640)\timg\tinteger", "thumb\timg", "", "cp(in/a, out/a)",
                           "long(path=" + String(repeating: "x", count: 54) + "…)",
                           "call(api_key=***, url=https://u:***@h/x?token=***&n=1)",
                           "mix(a, b, auth=***, z=1)\tmix(auth=***)",
                           "mix(a, b, auth=***, z=1)\tmix(auth=***)"], "\(r.output)")
    }

    /// Default names come from Swift for the usual args and from Lua for
    /// the rest; both give one text, cut past 60 characters (not bytes).
    @Test func defaultNamesAreTheSameWhicheverWayTheyAreMade() async throws {
        let r = try await runLua("""
            local f = tasker.define("f", function() end)
            for _, a in ipairs{
              {i = 1}, {b = false, a = true}, {Z = 1, a = 2, B = 3}, {x = {1}}, {Token = "t", n = -5},
              {AUTHOR = "me"}, {k1=1,k2=2,k3=3,k4=4,k5=5,k6=6,k7=7,k8=8,k9=9},
              {f = 1.5}, {u = "http://a:b@h/"}, {"p"}, {["é"] = 1}, {s = ""},
              {e = string.rep("é", 40)}, {e = string.rep("é", 59)}, {e = string.rep("x", 59)}, {e = string.rep("x", 58)},
              {x = json.null}, {x = json.null, f = 1.5},
            } do print(f{args = a}.name) end
            -- keys 1 and "1" in one order whatever order pairs gives them
            local seen = {}
            for n = 1, 20 do
              local t = {}
              for k = n, n + 5 do t["k" .. k] = true; t["k" .. k] = nil end  -- a different table history each time
              if n % 2 == 0 then t[1] = "a"; t["1"] = "b" else t["1"] = "b"; t[1] = "a" end
              seen[f{args = t}.name] = true
            end
            for name in pairs(seen) do print(name) end
            """)
        #expect(r.lines == ["f(i=1)", "f(a=true, b=false)", "f(B=3, Z=1, a=2)", "f(x={…})", "f(Token=***, n=-5)",
                           "f(AUTHOR=***)", "f(k1=1, k2=2, k3=3, k4=4, k5=5, k6=6, k7=7, k8=8, …)",
                           "f(f=1.5)", "f(u=http://a:***@h/)", "f(p)", "f(é=1)", "f(s=)",
                           "f(e=" + String(repeating: "é", count: 40) + ")",
                           "f(e=" + String(repeating: "é", count: 57) + "…)",
                           "f(e=" + String(repeating: "x", count: 57) + "…)",
                           "f(e=" + String(repeating: "x", count: 58) + ")",
                           "f(x=null)", "f(f=1.5, x=null)", "f(a, 1=b)"], "\(r.output)")
    }

    @Test func misuseIsAUsageErrorAtTheCallersLineAndNonJSONValuesFailTheTask() async throws {
        let r = try await runLua("""
            local double = tasker.define("double", function(ctx, args) return args.n * 2 end)
            for _, call in ipairs({
              function() double{args = {f = print}} end,
              function() double{run = print} end,
              function() double("x") end,
              function() tasker.define("double", function() end) end,
              function() tasker.define("", function() end) end,
              function() tasker.define("x", {bogus = 1}, function() end) end,
              function() tasker.define("y", {}) end,
              -- a spec field the add reads, at the script's line (not tasker's own Lua's)
              function() double{priority = "high"} end,
              -- the options are read at the define, as add reads them
              function() tasker.define("z", {timeout = "x"}, function() end) end,
              function() tasker.define("w", {retry = 5}, function() end) end,
            }) do
              local h = tasker.add(call)
              local ok, e = h:result()
              print(e.kind, tostring(e):match("pipeline.lua:%d+: usage") ~= nil, e.message)
            end
            local bad = tasker.define("bad", function() return print end)
            print(bad():result())
            """)
        #expect(r.lines == [
            "usage\ttrue\t'double': args must be JSON (cannot encode a function)",
            "usage\ttrue\t'double' runs its defined function: 'run' cannot be given",
            "usage\ttrue\tbad argument #1 to 'double' (table expected, got string)",
            "usage\ttrue\ttasker.define: 'double' is already defined",
            "usage\ttrue\tbad argument #1 to 'tasker.define' (non-empty string expected, got string)",
            "usage\ttrue\tunknown option 'bogus' to 'tasker.define' (spec fields other than run, args and id)",
            "usage\ttrue\tbad argument #3 to 'tasker.define' (function expected, got nil)",
            "usage\ttrue\tbad field 'priority' in 'tasker.add' spec (integer expected, got string)",
            "usage\ttrue\tbad field 'timeout' in 'tasker.define' options (positive number expected, got string)",
            "usage\ttrue\tbad field 'retry' in 'tasker.define' options (table expected, got number)",
            "false\tdefined task 'bad' returned a value JSON cannot hold (value #1: cannot encode a function)",
        ], "\(r.output)")
    }
}

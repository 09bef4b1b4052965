import Testing

/// `tasker.hosts`: the inventory as Lua sees it (file beside the pipeline,
/// groups, a Lua table), and its usage errors at the script's line.
@Suite struct HostsTests {
    static let ini = """
        [web]
        web1 ansible_host=10.0.0.1 ansible_user=deploy
        web2 ansible_port=2222
        [db]
        db1
        [prod:children]
        web
        [prod:vars]
        tier=prod
        """

    @Test func hostsFromAFileBesideThePipelineAndItsGroups() async throws {
        let r = try await runLua("""
            local inv = tasker.hosts("hosts.ini")
            for _, h in ipairs(inv) do print(h.name, h.address, table.concat(h.groups, ","), h.vars.tier) end
            local web = inv:group("web")
            print(#web, web[1].name, web[2].address, #web:group("db"))
            print(#tasker.hosts("hosts.ini", "prod"), #tasker.hosts("hosts.ini", {group = "db"}))
            """, files: ["hosts.ini": Self.ini])
        #expect(r.lines == ["web1\tdeploy@10.0.0.1\tprod,web\tprod", "web2\tweb2:2222\tprod,web\tprod", "db1\tdb1\tdb\tnil",
                            "2\tweb1\tweb2:2222\t1", "2\t1"])
    }

    @Test func aLuaTableInventory() async throws {
        let r = try await runLua("""
            local inv = tasker.hosts{
              "loose:2200",
              web = {"w1", {name = "w2", ansible_host = "10.1.1.2", ansible_port = 22, role = "api"}},
              prod = {children = {"web"}, vars = {tier = "prod"}, hosts = {"p1"}},
            }
            for _, h in ipairs(inv) do print(h.name, h.address, table.concat(h.groups, ","), h.vars.tier, h.vars.role) end
            """)
        #expect(r.lines.sorted() == ["loose\tloose:2200\tungrouped\tnil\tnil", "p1\tp1\tprod\tprod\tnil",
                                     "w1\tw1\tprod,web\tprod\tnil", "w2\t10.1.1.2:22\tprod,web\tprod\tapi"])
    }

    @Test func usageErrorsNameTheScriptLineAndTheInventoryLine() async throws {
        let r = try await runLua("""
            local function try(f) local ok, e = pcall(f); print(e.kind, e.where, e.message) end
            try(function() return tasker.hosts("hosts.ini", "nope") end)
            try(function() return tasker.hosts("bad.ini") end)
            try(function() return tasker.hosts("missing.ini") end)
            try(function() return tasker.hosts(42) end)
            try(function() return tasker.hosts({web = {{role = "x"}}}) end)
            local ok, e = pcall(function() return tasker.hosts("hosts.ini"):group("nope") end)
            print(e.kind, e.message)
            """, files: ["hosts.ini": Self.ini, "bad.ini": "[web]\nweb1\nweb2 oops\n"])
        #expect(r.lines == [
            "usage\tpipeline.lua:2\tunknown group 'nope' in the inventory (groups: all, db, prod, web)",
            "usage\tpipeline.lua:3\ttasker.hosts: bad.ini:3: bad host line: 'oops' after the host name is not key=value",
            "usage\tpipeline.lua:4\ttasker.hosts: cannot read inventory 'missing.ini': No such file or directory",
            "usage\tpipeline.lua:5\tbad argument #1 to 'tasker.hosts' (inventory path or table expected, got number)",
            "usage\tpipeline.lua:6\ttasker.hosts: bad inventory table: group 'web' entry #1: a host table needs a name (a string without blanks)",
            "usage\tunknown group 'nope' in the inventory (groups: all, db, prod, web)",
        ])
    }

    /// A FIFO or a directory named as the inventory is refused at once
    /// (reading a FIFO would block the run).
    @Test func anInventoryThatIsNotARegularFileIsRefused() async throws {
        let r = try await runLua("""
            local dir = debug.getinfo(1, "S").source:match("^@(.*)/")
            tasker.exec{"mkfifo", dir .. "/fifo.ini"}
            for _, p in ipairs{dir .. "/fifo.ini", dir} do
              local ok, e = pcall(tasker.hosts, p)
              print(e.kind, e.message:sub(-#"': not a regular file"))
            end
            """)
        #expect(r.lines == ["usage\t': not a regular file", "usage\t': not a regular file"])
    }

    @Test func aHostOptionThatIsNotAHostIsAUsageError() async throws {
        let r = try await runLua("""
            local function try(...) local ok, e = pcall(...); print(e.kind, e.message) end
            try(tasker.sh, "true", {host = "-oProxyCommand=touch /tmp/x"})
            try(tasker.exec, {"true", host = 42})
            try(tasker.sh, "true", {host = "h1", env = {["A-B"] = "1"}})
            try(tasker.configure, {ssh_config = "/nonexistent/config"})
            try(tasker.configure, {bogus = 1})
            """)
        #expect(r.lines == [
            "usage\tbad option 'host' to 'tasker.sh': bad host '-oProxyCommand=touch /tmp/x' (blanks or control characters; expected [user@]host[:port])",
            "usage\tbad option 'host' to 'tasker.exec' (address string or host object expected, got number)",
            "usage\tbad option 'env' to 'tasker.sh' (on a host, 'A-B' is not a variable name a shell can set)",
            "usage\tbad option 'ssh_config' to 'tasker.configure' (no regular file '/nonexistent/config')",
            "usage\tunknown option 'bogus' to 'tasker.configure' (known: accept_new_host_keys, ssh_config, ssh_connections)",
        ])
    }
}

import Testing
@testable import TaskerLua

/// The inventory parser (Ansible's INI format) and its resolution, without Lua.
@Suite struct InventoryTests {
    static let sample = """
        # a comment
        ; another
        loose.example.com
        [web]
        web1 ansible_host=10.0.0.1 ansible_user=deploy
        web2:2222 role="api server"   # inline comment
        web[08:10]
        [db]
        db1 ansible_host=2001:db8::1 ansible_port=5022
        [prod:children]
        web
        db
        [prod:vars]
        region = "eu west"
        role=generic
        [web:vars]
        role=frontend
        [all:vars]
        ansible_user=ops
        """

    func parse(_ text: String) throws -> Inventory {
        try Inventory.resolve(try InventoryINI.parse(text, file: "hosts.ini"))
    }

    @Test func groupsChildrenVarsAndAddresses() throws {
        let inv = try parse(Self.sample)
        #expect(inv.hosts.map(\.name) == ["loose.example.com", "web1", "web2", "web08", "web09", "web10", "db1"])
        let byName = Dictionary(uniqueKeysWithValues: inv.hosts.map { ($0.name, $0) })
        #expect(byName["web1"]!.address == "deploy@10.0.0.1")
        #expect(byName["web2"]!.address == "ops@web2:2222")
        #expect(byName["db1"]!.address == "ops@[2001:db8::1]:5022")
        #expect(byName["loose.example.com"]!.address == "ops@loose.example.com")
        // host vars beat child group vars beat parent group vars beat all
        #expect(byName["web2"]!.vars["role"] == "api server")
        #expect(byName["web1"]!.vars["role"] == "frontend")
        #expect(byName["db1"]!.vars["role"] == "generic")
        #expect(byName["db1"]!.vars["region"] == "eu west")
        #expect(byName["web1"]!.groups == ["prod", "web"])
        #expect(byName["loose.example.com"]!.groups == ["ungrouped"])
        #expect(inv.hosts(in: "prod")!.map(\.name) == ["web1", "web2", "web08", "web09", "web10", "db1"])
        #expect(inv.hosts(in: "all")!.count == 7)
        #expect(inv.hosts(in: "nope") == nil)
        #expect(inv.groupNames == ["all", "db", "prod", "ungrouped", "web"])
    }

    @Test(arguments: [
        ("[web\nh1", "hosts.ini:1: bad section header '[web' (expected [group], [group:vars] or [group:children])"),
        ("[web]\nh1 role", "hosts.ini:2: bad host line: 'role' after the host name is not key=value"),
        ("[web:vars]\n\nrole", "hosts.ini:3: bad line in [web:vars]: 'role' is not key=value"),
        ("[web:hosts]", "hosts.ini:1: bad section header '[web:hosts]' (':hosts' is neither ':vars' nor ':children')"),
        ("h1 ansible_port=http", "hosts.ini:1: bad ansible_port 'http' (a port number 1-65535 expected)"),
        ("h1:99999", "hosts.ini:1: bad port '99999' in 'h1:99999'"),
        ("[g:children]\na b", "hosts.ini:2: bad line in [g:children]: 'a b' is not a group name"),
        ("h1 x=\"open", "hosts.ini:1: unterminated quote after 'h1 x='"),
        // a secret-looking variable's value is not quoted back
        ("w2 ansible_become_pass=\"becomepw123 x=1", "hosts.ini:1: unterminated quote after 'w2 ansible_become_pass=***'"),
        ("w1 ansible_password=\"inv pw O555", "hosts.ini:1: unterminated quote after 'w1 ansible_password=***'"),
        ("[web:vars]\nansible_password=\"invpwQ777", "hosts.ini:2: unterminated quote in the value of 'ansible_password'"),
        ("web[3:1]", "hosts.ini:1: bad host range 'web[3:1]' (numbers or single letters, start not after end)"),
        ("[a:children]\nb\n[b:children]\na", "hosts.ini:4: group 'a' is its own descendant through ':children'"),
    ])
    func badLinesNameFileAndLine(text: String, message: String) {
        #expect(throws: InventoryError(message: message)) { try parse(text) }
    }

    @Test func rangesWithLettersAndSteps() throws {
        #expect(try parse("n[a:c]\nm[1:5:2].x").hosts.map(\.name) == ["na", "nb", "nc", "m1.x", "m3.x", "m5.x"])
    }

    @Test func aHostInTwoGroupsIsOneHost() throws {
        let inv = try parse("[a]\nh1 x=1\n[b]\nh1 y=2\n")
        #expect(inv.hosts.count == 1)
        #expect(inv.hosts[0].vars == ["x": "1", "y": "2"])
        #expect(inv.hosts[0].groups == ["a", "b"])
    }

    @Test func destinations() {
        func parse(_ s: String) -> String {
            switch SSHDestination.parse(s) {
            case .success(let d): "\(d.user ?? "-")|\(d.host)|\(d.port.map(String.init) ?? "-")|\(d.shown)"
            case .failure(let e): e.message
            }
        }
        #expect(parse("deploy@web1:2222") == "deploy|web1|2222|web1:2222")
        #expect(parse("web1") == "-|web1|-|web1")
        #expect(parse("[::1]:22") == "-|::1|22|[::1]:22")
        #expect(parse("::1") == "-|::1|-|::1")
        #expect(parse("-oProxyCommand=x").hasPrefix("bad host '-oProxyCommand=x'"))
        #expect(parse("a b").hasPrefix("bad host 'a b' (blanks"))
        #expect(parse("h:0").hasPrefix("bad host 'h:0' (port 0 out of range"))
        #expect(parse("@h").hasPrefix("bad host '@h' (the user is empty"))
    }

    @Test func remoteCommandQuotesEveryWord() {
        #expect(RemoteCommand.quote("it's") == "'it'\\''s'")
        let line = RemoteCommand.line(argv: ["printf", "%s", "a'b"], cwd: nil, env: [:], token: "t")
        #expect(line.hasPrefix("exec sh -c '"))
        #expect(RemoteCommand.isName("PATH_2") && !RemoteCommand.isName("2X") && !RemoteCommand.isName("A-B"))
    }
}

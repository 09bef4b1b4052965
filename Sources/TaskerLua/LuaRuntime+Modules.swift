import CLua
import CLuaShim
import TaskerCore

/// The installed modules, found by type.
extension LuaRuntime {
    /// The installed module of type `M` (modules that others call into).
    func module<M: LuaModule>(_ type: M.Type) -> M {
        for m in modules.all { if let m = m as? M { return m } }
        preconditionFailure("module \(M.self) is not installed")
    }

    var useModule: UseModule { module(UseModule.self) }
    var hooks: HookModule { modules.hooks }
    var http: HTTPModule { module(HTTPModule.self) }
}

extension LuaRuntime {
    /// The json module (HTTP encodes `json=` bodies and decodes `resp:json()` with it).
    var json: JSONModule { module(JSONModule.self) }
}

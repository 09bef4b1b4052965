import CLua
import CLuaShim
import TaskerCore

/// Something a script registered that it can take back.
enum Registration {
    case interceptor(LuaInterceptor)
    case reactor(LuaReactor)
}

extension LuaRuntime {
    /// Pushes `{name = ..., remove = function}`, what `tasker.intercept` and
    /// `tasker.react` return.
    func pushRegistrationObject(_ L: OpaquePointer, name: String, _ registration: Registration) {
        let s = LuaStack(L)
        s.newTable(hash: 2)
        s.push(name)
        s.rawSet(-2, "name")
        registrations.append(registration)
        lua_pushinteger(L, lua_Integer(registrations.count - 1))
        s.push(LuaRuntime.removeRegistration, upvalues: 1)
        s.rawSet(-2, "remove")
    }

    /// `obj.remove()`: the registration at upvalue 2 stops applying.
    static let removeRegistration: tasker_SwiftFunction = { L in
        let L = L!
        let rt = LuaRuntime.from(L)
        let index = Int(lua_tointegerx(L, tasker_upvalueindex(2), nil))
        switch rt.registrations[index] {
        case .interceptor(let i)?: i.engine.removeInterceptor(i)
        case .reactor(let r)?: r.engine.removeReactor(r)
        case nil: break
        }
        rt.registrations[index] = nil
        return 0
    }
}

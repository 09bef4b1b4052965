import CLua
import CLuaShim
import TaskerCore

/// A pipeline as a command: `tasker.param{…}` reads its typed parameters
/// from the words after FILE (`--name value`, `--name=value`, `--flag`,
/// `--no-flag`), then `TASKER_PARAM_<NAME>`, then the default;
/// `tasker.target(name, [opts,] fn)` declares entry points that run after
/// the main chunk (`tasker run FILE NAME…`, else `default`). Written in Lua:
/// it is argument handling and bookkeeping, run once per declaration. What
/// was declared is read back as JSON for `--help` and `tasker list`.
final class CommandModule: LuaModule {
    unowned let runtime: LuaRuntime

    init(runtime: LuaRuntime) { self.runtime = runtime }

    static let source = #"""
        local usage, words, getenv, describing, register, encode, param_limit = ...
        local getinfo = debug.getinfo  -- before the script could replace it
        -- the words after a `--` are the script's as they are
        local limit = math.min(param_limit or #words, #words)
        local params, param_order, targets, target_order = {}, {}, {}, {}
        local env_names = {}

        -- a value in a message: on one line, nothing that drives a terminal
        -- (escaped as everywhere else: \n, \r, \u001b, C1 and DEL too; tabs stay)
        local named = {["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\t"}
        local function shown(v)
          local s = tostring(v):gsub("[%c\127]", function(c) return named[c] or string.format("\\u%04x", c:byte()) end)
          return (s:gsub("\194([\128-\159])", function(c) return string.format("\\u%04x", c:byte()) end))
        end
        local consumed = {}
        local kinds = {string = "a string", number = "a number", integer = "an integer", boolean = "true or false",
                       list = "a list (repeated or comma-separated)"}
        local spec_keys = {name = true, type = true, default = true, choices = true, required = true, secret = true, help = true}

        local function env_name(name)
          return "TASKER_PARAM_" .. (name:upper():gsub("-", "_"))
        end

        -- tasker.args: the words after FILE that no parameter took
        local function refresh_args()
          local args = tasker.args
          for i = #args, 1, -1 do args[i] = nil end
          for i, w in ipairs(words) do if not consumed[i] then args[#args + 1] = w end end
        end

        local function split(text)
          local out = {}
          for item in (text .. ","):gmatch("([^,]*),") do
            if item ~= "" then out[#out + 1] = item end
          end
          return out
        end

        local function convert(p, text, from)
          local value
          if p.type == "string" or p.type == "list" then
            value = text
          elseif p.type == "number" then
            value = tonumber(text)
            if value and (value ~= value or value == math.huge or value == -math.huge) then value = nil end
          elseif p.type == "integer" then
            value = math.tointeger(tonumber(text))
          elseif p.type == "boolean" then
            local t = text:lower()
            if t == "true" or t == "yes" or t == "on" or t == "1" then value = true
            elseif t == "false" or t == "no" or t == "off" or t == "0" then value = false end
          end
          if value == nil and not describing then
            usage("bad value for parameter --" .. p.name .. ": '" .. (p.secret and "***" or shown(text)) .. "' from " .. from
                  .. " (" .. kinds[p.type] .. " expected)", 3)
          end
          return value
        end

        local function check_choice(p, value, from)
          if p.choices == nil or describing then return end
          for _, c in ipairs(p.choices) do if c == value then return end end
          local listed = {}
          for i, c in ipairs(p.choices) do listed[i] = shown(c) end
          if p.secret then
            usage("bad value for parameter --" .. p.name .. ": '***' from " .. from .. " (one of its allowed values expected)", 3)
          end
          usage("bad value for parameter --" .. p.name .. ": '" .. shown(value) .. "' from " .. from
                .. " (one of " .. table.concat(listed, ", ") .. " expected)", 3)
        end

        -- A word that reads as an option (`--x`; `---` and the like are
        -- the script's words, not options).
        local function is_option(w)
          return w:sub(1, 2) == "--" and w:sub(3, 3) ~= "-"
        end

        local function param(spec)
          if type(spec) ~= "table" then
            usage("bad argument #1 to 'tasker.param' (table expected, got " .. type(spec) .. ")", 2)
          end
          for k in pairs(spec) do
            if not spec_keys[k] then
              usage("unknown field '" .. tostring(k) .. "' in 'tasker.param' (known: choices, default, help, name, required, secret, type)", 2)
            end
          end
          local name = spec.name
          if type(name) ~= "string" or not name:match("^[%a_][%w_-]*$") then
            usage("bad field 'name' in 'tasker.param' (a name of letters, digits, '_' and '-' expected)", 2)
          end
          if params[name] then usage("tasker.param: '" .. name .. "' is declared twice", 2) end
          if name == "help" or name == "h" then usage("tasker.param: '" .. name .. "' is tasker's (run FILE --help)", 2) end
          if env_names[env_name(name)] then
            usage("tasker.param: '" .. name .. "' and '" .. env_names[env_name(name)] .. "' would both read "
                  .. env_name(name), 2)
          end
          local p = {name = name, type = spec.type or "string", help = spec.help, required = spec.required == true,
                     secret = spec.secret == true, choices = spec.choices, default = spec.default}
          if not kinds[p.type] then
            usage("bad field 'type' in 'tasker.param' (string, number, integer, boolean or list expected, got "
                  .. tostring(p.type) .. ")", 2)
          end
          if p.help ~= nil and type(p.help) ~= "string" then usage("bad field 'help' in 'tasker.param' (string expected)", 2) end
          if p.choices ~= nil and type(p.choices) ~= "table" then
            usage("bad field 'choices' in 'tasker.param' (list expected)", 2)
          end
          if p.default ~= nil then
            local ok = (p.type == "list" and type(p.default) == "table") or (p.type == "boolean" and type(p.default) == "boolean")
              or (p.type == "integer" and math.type(p.default) == "integer") or (p.type == "number" and type(p.default) == "number")
              or (p.type == "string" and type(p.default) == "string")
            if not ok then
              usage("bad field 'default' in 'tasker.param' (" .. kinds[p.type] .. " expected for a " .. p.type
                    .. " parameter, got " .. type(p.default) .. ")", 2)
            end
          end
          local negated = name:match("^no%-(.+)$")
          if (negated and params[negated] and params[negated].type == "boolean")
              or (p.type == "boolean" and params["no-" .. name]) then
            usage("tasker.param: '" .. name .. "' clashes with the --no- form of a boolean parameter", 2)
          end
          params[name] = p
          env_names[env_name(name)] = name
          param_order[#param_order + 1] = name
          -- the words that give it: the last one wins (lists take them all)
          local given, from = {}, "the command line"
          local i = 1
          while i <= limit do
            local w = words[i]
            if not consumed[i] then
              if w == "--" .. name then
                consumed[i] = true
                if p.type == "boolean" then
                  given[#given + 1] = "true"
                elseif i < limit and not consumed[i + 1] and not is_option(words[i + 1]) then
                  given[#given + 1] = words[i + 1]
                  consumed[i + 1] = true
                  i = i + 1
                elseif not describing then
                  -- An option next is not taken as the value: it could be a
                  -- parameter declared later, which would read it again.
                  local next_word = i < limit and words[i + 1] or nil
                  if next_word and is_option(next_word) then
                    usage("parameter --" .. name .. " needs a value (" .. kinds[p.type] .. "), not the option "
                          .. next_word .. " (write --" .. name .. "=" .. next_word .. " if that is the value)", 2)
                  end
                  usage("parameter --" .. name .. " needs a value (" .. kinds[p.type] .. ")", 2)
                end
              elseif w:sub(1, #name + 3) == "--" .. name .. "=" then
                consumed[i] = true
                given[#given + 1] = w:sub(#name + 4)
              elseif p.type == "boolean" and w == "--no-" .. name then
                consumed[i] = true
                given[#given + 1] = "false"
              elseif p.type == "boolean" and w:sub(1, #name + 6) == "--no-" .. name .. "=" and not describing then
                usage("parameter --no-" .. name .. " takes no value (write --" .. name .. "=false, or --no-" .. name .. ")", 2)
              end
            end
            i = i + 1
          end
          refresh_args()
          local value
          if #given == 0 then
            local e = getenv(env_name(name))
            if e ~= nil then given, from = {e}, env_name(name) end
          end
          -- What was given for a secret is masked before it is checked: a
          -- value refused (not a number, not a choice) is still a secret.
          if p.secret then for _, g in ipairs(given) do register(g) end end
          if #given > 0 then
            if p.type == "list" then
              value = {}
              for _, g in ipairs(given) do for _, item in ipairs(split(g)) do value[#value + 1] = item end end
              for _, item in ipairs(value) do check_choice(p, item, from) end
            else
              value = convert(p, given[#given], from)
              check_choice(p, value, from)
            end
          elseif p.default ~= nil then
            value = p.default
          elseif p.required and not describing then
            usage("missing parameter --" .. name .. " (" .. kinds[p.type] .. (p.help and ": " .. p.help or "")
                  .. "); give it after the file, or set " .. env_name(name), 2)
          end
          if p.secret and value ~= nil then
            if type(value) == "table" then for _, v in ipairs(value) do register(tostring(v)) end
            else register(tostring(value)) end
          end
          p.value = value
          return value
        end

        -- tasker.secret(name [, {env=, file=, param=}]): the value (from the
        -- environment variable `name` unless told otherwise), masked as ***
        -- in everything tasker writes from now on.
        local function secret(name, opts)
          if type(name) ~= "string" or name == "" then
            usage("bad argument #1 to 'tasker.secret' (non-empty string expected, got " .. type(name) .. ")", 2)
          end
          if opts ~= nil and type(opts) ~= "table" then
            usage("bad argument #2 to 'tasker.secret' (table expected, got " .. type(opts) .. ")", 2)
          end
          opts = opts or {}
          for k, v in pairs(opts) do
            if k ~= "env" and k ~= "file" and k ~= "param" then
              usage("unknown option '" .. tostring(k) .. "' to 'tasker.secret' (known: env, file, param)", 2)
            end
            if type(v) ~= "string" then usage("bad option '" .. k .. "' to 'tasker.secret' (string expected)", 2) end
          end
          local value, looked = nil, {}
          if opts.param then
            local p = params[opts.param]
            if not p then usage("tasker.secret: '" .. opts.param .. "' is not a declared parameter (declare it with tasker.param first)", 2) end
            value = p.value ~= nil and tostring(p.value) or nil
            looked[#looked + 1] = "the parameter --" .. opts.param .. " (or " .. env_name(opts.param) .. ")"
          end
          local var = opts.env or (next(opts) == nil and name or nil)
          if value == nil and var then
            value = getenv(var)
            looked[#looked + 1] = "the environment variable " .. var
          end
          if value == nil and opts.file then
            local f = io.open(opts.file, "rb")
            if f then
              value = (f:read("a") or ""):gsub("\r?\n$", "")
              f:close()
            end
            looked[#looked + 1] = "the file " .. opts.file
          end
          if value == nil or value == "" then
            if describing then return nil end
            usage("missing secret '" .. name .. "': looked in " .. table.concat(looked, ", then "), 2)
          end
          register(value)
          return value
        end

        local function target(name, opts, fn)
          if fn == nil and type(opts) == "function" then fn, opts = opts, nil end
          if type(name) ~= "string" or name == "" or name:sub(1, 1) == "-" or name:find("[%c%s\127]") then
            usage("bad argument #1 to 'tasker.target' (a name without spaces or control characters, not starting with '-', expected)", 2)
          end
          if opts ~= nil and type(opts) ~= "table" then usage("bad argument #2 to 'tasker.target' (table expected)", 2) end
          if type(fn) ~= "function" then usage("bad argument to 'tasker.target' (function expected as its last)", 2) end
          opts = opts or {}
          for k in pairs(opts) do
            if k ~= "help" and k ~= "after" then
              usage("unknown option '" .. tostring(k) .. "' to 'tasker.target' (known: after, help)", 2)
            end
          end
          local after = opts.after or {}
          if type(after) == "string" then after = {after} end
          if targets[name] then usage("tasker.target: '" .. name .. "' is declared twice", 2) end
          -- where it was declared: its 'after' is checked once the main chunk ended
          local info = getinfo(2, "Sl")
          local at = info and info.currentline > 0 and (info.short_src .. ":" .. info.currentline) or nil
          targets[name] = {name = name, help = opts.help, after = after, fn = fn, at = at}
          target_order[#target_order + 1] = name
        end

        local function known_targets()
          return table.concat(target_order, ", ")
        end

        -- After the main chunk: the targets named after FILE (and those they
        -- wait for, once each), else `default`.
        local function run_targets()
          if describing or #target_order == 0 then return end
          local requested = {}
          for i, w in ipairs(words) do
            if i <= limit and not consumed[i] and w:sub(1, 1) ~= "-" then
              if not targets[w] then usage("unknown target '" .. shown(w) .. "' (targets: " .. known_targets() .. ")", 0) end
              consumed[i] = true
              requested[#requested + 1] = w
            end
          end
          refresh_args()
          if #requested == 0 then
            if not targets.default then return end
            requested = {"default"}
          end
          -- Named targets run in the order given, as make runs them: each
          -- (with the targets it waits for, not added before) after the
          -- one named before it.
          local handles, visiting, path, previous = {}, {}, {}, nil
          local function add_target(name, from)
            if handles[name] then return handles[name] end
            local t = targets[name]
            -- named at the declaration whose 'after' says so
            if not t then
              usage("target '" .. from .. "' waits for '" .. tostring(name) .. "', which is not a target (targets: "
                    .. known_targets() .. ")", 0, targets[from].at)
            end
            if visiting[name] then
              -- the whole cycle, from where it starts back to it
              local chain, on = {}, false
              for _, n in ipairs(path) do
                on = on or n == name
                if on then chain[#chain + 1] = "'" .. n .. "'" end
              end
              chain[#chain + 1] = "'" .. name .. "'"
              usage("targets wait for each other: " .. chain[1] .. " waits for "
                    .. table.concat(chain, ", which waits for ", 2), 0, targets[from].at)
            end
            visiting[name] = true
            path[#path + 1] = name
            local after = {}
            for _, a in ipairs(t.after) do after[#after + 1] = add_target(a, name) end
            if previous then after[#after + 1] = previous end
            path[#path] = nil
            visiting[name] = nil
            handles[name] = tasker.add{name = name, after = after, run = t.fn}
            return handles[name]
          end
          for _, n in ipairs(requested) do
            if not handles[n] then previous = add_target(n, n) end
          end
        end

        -- What `--help` and `tasker list` show. Text that is not UTF-8 is
        -- shown with '?' for its bad bytes (JSON cannot hold it as it is).
        local function text(v)
          if type(v) == "string" and not utf8.len(v) then return (v:gsub("[\128-\255]", "?")) end
          return v
        end
        local function texts(list)
          if type(list) ~= "table" then return list end
          local out = {}
          for i, v in ipairs(list) do out[i] = text(v) end
          return out
        end
        local function describe()
          local ps, ts = {}, {}
          for _, n in ipairs(param_order) do
            local p = params[n]
            local entry = {name = n, type = p.type, help = text(p.help), required = p.required, secret = p.secret,
                           choices = (not p.secret) and texts(p.choices) or nil, env = env_name(n)}
            if not p.secret then entry.default = text(p.default) end
            ps[#ps + 1] = entry
          end
          for _, n in ipairs(target_order) do
            local t = targets[n]
            ts[#ts + 1] = {name = n, help = text(t.help), after = texts(t.after)}
          end
          return encode({params = ps, targets = ts})
        end

        return {param = param, target = target, secret = secret, run_targets = run_targets, describe = describe}
        """#

    /// `run_targets` and `describe`, by registry ref.
    private(set) var runTargetsRef: Int32 = LUA_NOREF
    private(set) var describeRef: Int32 = LUA_NOREF

    func install(in runtime: LuaRuntime) {
        let L = runtime.L
        let s = LuaStack(L)
        let top = lua_gettop(L)
        defer { lua_settop(L, top) }
        pushSource(Self.source, named: "=[tasker.param]", in: L)
        push({ L in CommandModule.this(L!).raiseUsage(L!) }, in: L)
        s.newTable(hash: 0)
        for (i, w) in runtime.options.args.enumerated() {
            s.push(w)
            lua_rawseti(L, -2, lua_Integer(i + 1))
        }
        pushGlobal("os", "getenv", in: L)
        lua_pushboolean(L, runtime.options.describeOnly ? 1 : 0)
        s.push({ L in
            // register(value): masked from now on
            if let value = LuaStack(L!).string(1) { SecretMask.shared.register(value) }
            return 0
        })
        pushGlobal("json", "encode", in: L)
        if let n = runtime.options.parameterWords { s.push(n) } else { lua_pushnil(L) }
        guard tasker_pcall_traceback(L, 7, 1) == LUA_OK else {
            preconditionFailure("tasker.param did not load: \(s.describe(-1))")
        }
        let api = lua_gettop(L)
        s.rawGet(api, "describe")
        describeRef = luaL_ref(L, tasker_registryindex())
        s.rawGet(api, "run_targets")
        runTargetsRef = luaL_ref(L, tasker_registryindex())
        lua_rawgeti(L, tasker_registryindex(), lua_Integer(LUA_RIDX_GLOBALS))
        s.rawGet(-1, "tasker")
        for name in ["param", "target", "secret"] {
            s.rawGet(api, name)
            s.rawSet(-2, name)
        }
    }

    /// `usage(message, level)`: a usage error at the caller `level` up (0:
    /// no position).
    func raiseUsage(_ L: OpaquePointer) -> Int32 {
        let s = LuaStack(L)
        let level = Int32(s.integer(2) ?? 1)
        let message = s.string(1) ?? "usage error"
        runtime.chunk.commandLineError = message
        // a position given (a target's declaration), else the caller's at `level`
        let position = s.string(3) ?? (level > 0 ? s.whereString(level: level) : nil)
        runtime.pushErrorTable(L, kind: "usage", message: message, where: position)
        return TASKER_RAISE
    }
}

---@meta
-- LuaLS annotations for tasker's Lua API (see README.md). Point your editor's
-- Lua language server at this folder (see the README's .luarc.json).

---@class tasker.Error
---@field kind "timeout"|"cancelled"|"discarded"|"dependency"|"http"|"exec"|"json"|"fs"|"ssh"|"interceptor"|"reactor"|"usage"|"deadlock"|"lost"
---@field message string
---@field where? string   # "file:line" of the call, for usage errors
---@field code? integer|string   # exec: the exit code; ssh: "connect"|"auth"|"hostkey"|"timeout"|"copy"
---@field host? string    # ssh: the host that could not be reached; exec/timeout on a host: that host
---@field stderr? string  # exec: what the program wrote to stderr
---@field path? string    # fs: the path the operation failed on

---@class tasker.Retry
---@field attempts? integer  # tries including the first (default 1)
---@field delay? number      # seconds before the second try (default 0.5)
---@field backoff? "exponential"|"fixed"
---@field factor? number     # default 2
---@field max_delay? number  # default 60
---@field jitter? boolean    # uniform in [d/2, d]
---@field when? fun(err: any, attempt: integer): boolean

---@class tasker.Context
---@field id integer
---@field name string
---@field args table
---@field tags string[]
---@field attempt integer  # 1-based
---@field idempotency_key string  # the same across attempts and resumes
local Context = {}
---@param fraction number  # 0..1
---@param message? string
function Context:progress(fraction, message) end
---@return boolean
function Context:cancelled() end

---@class tasker.Spec
---@field run fun(ctx: tasker.Context, ...): ...
---@field name? string
---@field args? table
---@field tags? string[]
---@field priority? integer
---@field timeout? number
---@field retry? tasker.Retry
---@field after? tasker.Handle|tasker.Handle[]
---@field when? "success"|"failure"|"always"
---@field start? boolean
---@field delay? number
---@field key? string
---@field id? string  # names the task across runs (--resume); unique in a run

---@alias tasker.State "waiting"|"pending"|"held"|"running"|"paused"|"reacting"|"succeeded"|"failed"|"cancelled"

---@class tasker.Handle
---@field id integer
---@field name string
---@field attempts integer
local Handle = {}
---@return tasker.State
function Handle:state() end
function Handle:start() end
---@param reason? string
function Handle:cancel(reason) end
---Holds the task: not started; running, held at its next wait, its processes stopped, its timeout clock still.
function Handle:pause() end
---Lets a paused task go on where it was.
function Handle:resume() end
---Waits; returns the task's values or raises its error.
---@return any ...
function Handle:await() end
---Waits; returns true, values... or false, err. Never raises.
---@return boolean ok
---@return any ...
function Handle:result() end
---@param event "start"|"progress"|"retry"|"finish"
---@param fn function
function Handle:on(event, fn) end

---@class tasker.TaskView
---@field id integer
---@field name string
---@field args table
---@field tags string[]
---@field priority integer
---@field attempt integer

---@class tasker.Result
---@field ok boolean
---@field value? any
---@field error? any

---@class tasker.Registration
---@field name string
---@field remove fun()

---@class tasker.ExecResult
---@field code integer
---@field stdout string
---@field stderr string
---@field ok boolean

---@class tasker.Host  # from tasker.hosts; usable as host=
---@field name string
---@field address string  # [user@]host[:port]
---@field vars table<string, string>
---@field groups string[]  # sorted, without "all"

---@class tasker.Inventory: tasker.Host[]
---@field group fun(self: tasker.Inventory, name: string): tasker.Inventory

---@class tasker
---@field args string[]              # the words after the script on the command line
---@field vars table<string, string> # from --var key=value
tasker = {}

---@param spec tasker.Spec|fun(ctx: tasker.Context, ...): ...
---@return tasker.Handle
function tasker.add(spec) end
---@param handles tasker.Handle[]
---@return any[]
function tasker.all(handles) end
---@param handles tasker.Handle[]
---@return any ...
function tasker.any(handles) end
---@param handles tasker.Handle[]
---@return any[]
function tasker.some(handles) end
---@param specs (tasker.Spec|function)[]
---@param opts? {concurrency?: integer, fail_fast?: boolean, name?: string}
---@return tasker.Handle
function tasker.parallel(specs, opts) end
---@param specs (tasker.Spec|function)[]
---@param opts? {name?: string}
---@return tasker.Handle
function tasker.serial(specs, opts) end
---A group with one member per host (named after it) running `run(ctx, host)`: batches start in
---order, each once the previous one ended (plus `pause` s); once more than `max_failures` members
---failed, no further batch starts and the hosts not started are cancelled ("rolling: too many
---failures (3 > 2)"), and the group fails with that reason. Within the budget it succeeds with the
---members' values. `batch` (default 1) and `max_failures` (default 0) are counts or percentages of
---the hosts ("25%", rounded down; a batch is at least 1); `per_host` (default 1) caps the tasks of
---one host running at once across every rolling group of the run.
---@param opts {hosts: (string|tasker.Host)[], run: fun(ctx: tasker.Context, host: string|tasker.Host): any, batch?: integer|string, max_failures?: integer|string, pause?: number, per_host?: integer, name?: string}
---@return tasker.Handle
function tasker.rolling(opts) end
---@param seconds number
function tasker.sleep(seconds) end
---A named task function whose args and values are JSON; returns a function that adds a task running it.
---@param name string
---@param opts? table  # spec fields every task of it gets (not run, args, id)
---@param fn fun(ctx: tasker.Context, args: any): ...
---@return fun(spec?: table): tasker.Handle
function tasker.define(name, opts, fn) end
---A parameter of the pipeline: from `--name value` / `--name=value` / `--flag` / `--no-flag` after FILE, then TASKER_PARAM_<NAME>, then default.
---@param spec {name: string, type?: "string"|"number"|"integer"|"boolean"|"list", default?: any, choices?: any[], required?: boolean, secret?: boolean, help?: string}
---@return any
function tasker.param(spec) end
---A secret: from the environment variable `name` unless opts say where; masked as *** in all tasker writes.
---@param name string
---@param opts? {env?: string, file?: string, param?: string}
---@return string
function tasker.secret(name, opts) end
---A named entry point, run after the main chunk when named after FILE (else `default`), after the targets it names.
---@param name string
---@param opts? {help?: string, after?: string[]}
---@param fn fun(ctx: tasker.Context): ...
function tasker.target(name, opts, fn) end
---Nothing new starts until tasker.resume() (or SIGUSR2); running tasks go on.
function tasker.pause() end
---Lets new tasks start again after tasker.pause() (or SIGUSR1).
function tasker.resume() end
---@return number
function tasker.now() end
---@param seconds number
---@param spec tasker.Spec|function
---@return tasker.Handle
function tasker.every(seconds, spec) end
---@param code? integer
function tasker.exit(code) end
---@param spec fun(t: tasker.TaskView, held: integer): (string|nil, number?)|{name?: string, on?: "task"|"http", fn: fun(t: tasker.TaskView, held: integer): (string|nil, number?), max_hold?: number}
---@return tasker.Registration
function tasker.intercept(spec) end
---@param spec {name?: string, on?: "task"|"http", when?: fun(t: tasker.TaskView, result: tasker.Result): boolean, fn: fun(t: tasker.TaskView, result: tasker.Result), requeue?: boolean, suspend?: boolean, reintercept?: boolean, timeout?: number, max_requeues?: integer}
---@return tasker.Registration
function tasker.react(spec) end
---@param path string  # relative to the pipeline's directory
function tasker.use(path) end
---@param command (string|number)[]|{cwd?: string, env?: table<string, string>, stdin?: string, timeout?: number, check?: boolean, stream?: boolean, host?: string|tasker.Host, accept_new_host_keys?: boolean}
---@return tasker.ExecResult
function tasker.exec(command) end
---@param command string
---@param opts? {cwd?: string, env?: table<string, string>, stdin?: string, timeout?: number, check?: boolean, stream?: boolean, host?: string|tasker.Host, accept_new_host_keys?: boolean}
---@return tasker.ExecResult
function tasker.sh(command, opts) end
---An inventory (Ansible INI file, beside the pipeline or from the current directory, or a table) as host objects; with `group`, that group's hosts.
---@param source string|table
---@param group? string|{group: string}
---@return tasker.Inventory
function tasker.hosts(source, group) end
---Run-wide settings: `ssh_config` (passed as `ssh -F`; else TASKER_SSH_CONFIG, else the user's own), `accept_new_host_keys` (trust on first use),
---`ssh_connections` (master connections open at once, default 64: past it an idle one is closed, or the command waits for one).
---@param opts {ssh_config?: string, accept_new_host_keys?: boolean, ssh_connections?: integer}
function tasker.configure(opts) end

---@class json
---@field null lightuserdata  # JSON null
json = {}
---@param value any
---@param opts? {pretty?: boolean}
---@return string
function json.encode(value, opts) end
---@param text string
---@return any
function json.decode(text) end
---@param t? table
---@return table
function json.array(t) end

---@class log
log = {}
---@param message string
---@param fields? table
function log.debug(message, fields) end
---@param message string
---@param fields? table
function log.info(message, fields) end
---@param message string
---@param fields? table
function log.warn(message, fields) end
---@param message string
---@param fields? table
function log.error(message, fields) end

---@class http.Response
---@field status integer
---@field ok boolean  # status < 400
---@field headers table<string, string>  # lower-case names
---@field body string
---@field url string  # after redirects
---@field elapsed number  # seconds
local Response = {}
---@return any
function Response:json() end

---@class http.Request  # `t` of on="http" interceptors and reactors
---@field id integer
---@field attempt integer
---@field method string
---@field url string
---@field headers table<string, string>
---@field body string?
---@field timeout number

---@alias http.Options {method?: string, url?: string, headers?: table<string, string>, query?: table<string, any>, body?: string, json?: any, timeout?: number, follow_redirects?: boolean, retry?: tasker.Retry|false, check?: boolean}

---@class http
http = {}
---@param opts http.Options
---@return http.Response
function http.request(opts) end
---@param url string
---@param opts? http.Options
---@return http.Response
function http.get(url, opts) end
---@param url string
---@param opts? http.Options
---@return http.Response
function http.head(url, opts) end
---@param url string
---@param opts? http.Options
---@return http.Response
function http.delete(url, opts) end
---@param url string
---@param body? string|table  # a table is sent as JSON
---@param opts? http.Options
---@return http.Response
function http.post(url, body, opts) end
---@param url string
---@param body? string|table
---@param opts? http.Options
---@return http.Response
function http.put(url, body, opts) end
---@param url string
---@param body? string|table
---@param opts? http.Options
---@return http.Response
function http.patch(url, body, opts) end
---@param opts {timeout?: number, retry?: tasker.Retry|false, headers?: table<string, string>, concurrency?: integer, max_body?: integer}
function http.configure(opts) end

---@class fs.Stat
---@field type "file"|"dir"|"link"|"other"
---@field size integer
---@field mtime number   # epoch seconds
---@field mode integer   # permission bits

---Files without shelling out; failures raise kind "fs" with `path`.
fs = {}
---@param path string
---@return string
function fs.read(path) end
---@param path string
---@param data string
---@param opts? {mode?: integer, atomic?: boolean}
function fs.write(path, data, opts) end
---@param path string
---@param data string
function fs.append(path, data) end
---@param dir string
---@return string[]
function fs.list(dir) end
---@param pattern string  # *, ?, [..] within a name; ** for any directories
---@return string[]
function fs.glob(pattern) end
---@param path string
---@return fs.Stat?
function fs.stat(path) end
---@param path string
---@return boolean
function fs.exists(path) end
---@param path string
---@param opts? {parents?: boolean}
function fs.mkdir(path, opts) end
---@param path string
---@param opts? {recursive?: boolean}
function fs.remove(path, opts) end
---@param from string
---@param to string
function fs.rename(from, to) end
---The same as fs.rename.
---@param from string
---@param to string
function fs.move(from, to) end
---@param from string
---@param to string
function fs.copy(from, to) end
---@param opts? {keep?: boolean}
---@return string
function fs.tempdir(opts) end

---Files to and from a host over its master connection: the receiving side writes a temp
---name in the target's directory and renames it once its SHA-256 matches the sender's,
---so the old file stays whole until then. Failures raise kind "ssh" with `host`
---(`code` "copy" when the host was reached but the copy failed).
ssh = {}
---@param host string|tasker.Host
---@param localPath string
---@param remotePath string  # relative: to the login directory
---@param opts? {mode?: integer|string}  # permission bits (420, "644", "0644"); default the local file's
---@return true
function ssh.put(host, localPath, remotePath, opts) end
---@param host string|tasker.Host
---@param remotePath string
---@param localPath string  # made with the umask's mode
---@return true
function ssh.get(host, remotePath, localPath) end

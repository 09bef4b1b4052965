// CLuaShim: the thin unsafe core between Swift and Lua 5.4.
//
// Rules (docs/ARCHITECTURE.md):
//  * This is the only code that may longjmp (lua_error, lua_yield, luaL_check*).
//    A Swift function exposed to Lua returns a status to `tasker_trampoline`,
//    which raises or yields after the Swift frame has returned.
//  * Swift may call only functions that cannot raise except on out-of-memory.
//    Deliberately NOT exposed as wrappers: lua_call, lua_callk, lua_error,
//    lua_yield(k), lua_gettable, lua_settable, lua_getfield, lua_setfield,
//    lua_arith, lua_compare, lua_concat, lua_len, luaL_check*, luaL_error.
#ifndef TASKER_CLUASHIM_H
#define TASKER_CLUASHIM_H

#include <lua.h>
#include <lualib.h>
#include <lauxlib.h>
#include <stdint.h>
#include <spawn.h>
#include <signal.h>
#include <stdio.h>

// ---- status codes a Swift function returns to the trampoline --------------
/// The error value is on top of the stack: raise it.
#define TASKER_RAISE (-1)
/// Yield the top `n` values (the first of them is the engine mark).
static inline int tasker_yield_status(int n) { return -2 - n; }

typedef int (*tasker_SwiftFunction)(lua_State *L);

/// Per-state data shared with the count hook. Opaque: the fields that other
/// threads touch are C11 atomics, reached only through the functions below.
typedef struct tasker_Runtime tasker_Runtime;

/// What `on_interrupt` tells the hook to do.
enum {
    /// Go on running.
    TASKER_HOOK_GO_ON = 0,
    /// Raise the error value Swift pushed. The hook then checks every
    /// instruction on that thread, so `pcall` loops cannot swallow the stop.
    TASKER_HOOK_RAISE = 1,
    /// Yield to the driver (a time slice ended, or the fiber must stop and
    /// will be closed). Only asked for when the thread can yield.
    TASKER_HOOK_YIELD = 2,
};

/// Swift's half of the hook: decides what to do (see TASKER_HOOK_*).
/// `stop` tells a stop (1) from the end of a time slice (0) for a yield.
typedef int (*tasker_InterruptFunction)(lua_State *L, int *stop);

tasker_Runtime *tasker_runtime_new(void);
void tasker_runtime_free(tasker_Runtime *rt);
void tasker_runtime_set_owner(tasker_Runtime *rt, void *owner, tasker_InterruptFunction fn);
void *tasker_runtime_owner(tasker_Runtime *rt);

/// Asks the hook to consult Swift at its next check (loop thread).
void tasker_request_interrupt(tasker_Runtime *rt, int on);
/// Records the first signal (any thread, signal-safe): running Lua is
/// consulted at the next hook check. Returns the signal recorded first.
int tasker_signal(tasker_Runtime *rt, int sig);
/// The first signal recorded, or 0.
int tasker_signalled(tasker_Runtime *rt);
/// Deadlines in monotonic ns, 0 = none (loop thread only): the running
/// fiber's timeout, the end of its time slice, and the budget of a
/// non-yieldable call made by tasker (handlers, predicates, __tostring).
void tasker_set_deadlines(tasker_Runtime *rt, uint64_t deadline, uint64_t slice);
uint64_t tasker_slice(tasker_Runtime *rt);
void tasker_set_slice(tasker_Runtime *rt, uint64_t slice);
uint64_t tasker_budget(tasker_Runtime *rt);
/// Sets the budget; returns the one it replaces (to restore it after).
uint64_t tasker_set_budget(tasker_Runtime *rt, uint64_t budget);
/// Whether `co`'s last yield came from the hook (and forgets it).
int tasker_take_hook_yield(tasker_Runtime *rt, lua_State *co);
/// Puts the normal hook back on `L` after a stop made it check every
/// instruction.
void tasker_reset_hook(lua_State *L);

/// Creates a state whose allocator userdata is `rt`, with all standard
/// libraries, the engine-aware coroutine library and the interrupt hook.
/// Returns NULL on failure (message written to `err`, up to `errlen`).
lua_State *tasker_newstate(tasker_Runtime *rt, char *err, size_t errlen);
tasker_Runtime *tasker_runtime(lua_State *L);
/// How many entries were added to package.loaded so far (by `require` or
/// by hand): a change says the set of loaded modules may have changed.
uint64_t tasker_loaded_changes(lua_State *L);

/// Pushes a Lua function that calls `fn` through the trampoline. The `nup`
/// values on top become upvalues 2...nup+1 (upvalue 1 holds `fn`).
void tasker_pushfunction(lua_State *L, tasker_SwiftFunction fn, int nup);
/// Replaces the two values on top of the stack — a C function of Lua's own
/// library (such as os.execute) and a value `fn` gets as upvalue 2 — with a
/// function that calls `fn` through the trampoline where the caller can
/// yield, and the original elsewhere.
void tasker_pushwaitingvariant(lua_State *L, tasker_SwiftFunction fn);
/// The light userdata that marks a yield as the engine's (not the user's).
void *tasker_engine_mark(void);
/// The light userdata that is `json.null`.
void *tasker_json_null(void);

/// Engine threads carry their fiber pointer in the thread's extra space;
/// user coroutines carry NULL (copied from the main thread).
void tasker_setfiber(lua_State *L, void *fiber);
void *tasker_getfiber(lua_State *L);

uint64_t tasker_now_ns(void);

/// luaL_tolstring under lua_pcall: pushes the string (or the error) and
/// returns the status. __tostring metamethods may raise, so never call it
/// bare; they run with a budget (a looping one is stopped).
int tasker_tostring_protected(lua_State *L, int idx);
/// luaL_loadbufferx in text mode.
int tasker_loadbuffer(lua_State *L, const char *buf, size_t len, const char *chunkname);
/// The stripped bytecode of the Lua function at idx in a malloc'd buffer
/// the caller frees, or NULL (a C function, out of memory).
unsigned char *tasker_dump(lua_State *L, int idx, size_t *len);
/* The prototype of the Lua closure at idx (shared by every closure made
   from one function expression), or NULL when idx is not a Lua closure or
   the layout is not the one expected. Raises nothing. */
const void *tasker_proto(lua_State *L, int idx);
/* The Lua closure at idx (its address, as lua_topointer gives it) and, in
   *proto, its prototype; NULL as tasker_proto. Raises nothing. */
const void *tasker_lua_closure(lua_State *L, int idx, const void **proto);
/* A task body's identity hash, fed into *hash as a task's identity walk
   feeds it (FNV-1a over the same bytes), when the Lua closure at idx
   (absolute; `closure` is its address from tasker_lua_closure) captures
   nothing besides _ENV but nils, booleans, numbers and strings. *hash
   comes in with the body's tag, the function's tag and its bytecode's hash
   fed already (they are the same for every closure of a prototype), and
   goes out with each capture's; returns how many captures it hashed, or -1
   (leaving *hash alone) when one is anything else or the stack cannot
   grow. `env`: which upvalue is _ENV (1-based; 0: none), as
   tasker_env_upvalue says for the closure's prototype. The captures are
   read in place, without the API, when this Lua's layout allows (checked
   as the first state opened). Raises nothing. */
int tasker_hash_scalar_closure(lua_State *L, int idx, const void *closure, int env, uint64_t *hash);
/* Whether identities read captures in place (this Lua's layout checked). */
int tasker_identity_reads_in_place(void);
/* Which upvalue of the Lua function at idx is _ENV (1-based; 0: none). */
int tasker_env_upvalue(lua_State *L, int idx);
/// pidfd_open(2): a descriptor that polls readable when `pid` exits, or -1.
int tasker_pidfd_open(int pid);
/// glibc's posix_spawn_file_actions_addclosefrom_np / _addchdir_np.
int tasker_spawn_closefrom(posix_spawn_file_actions_t *actions, int from);
int tasker_spawn_chdir(posix_spawn_file_actions_t *actions, const char *dir);
/// epoll, through C: `struct epoll_event` is packed on x86-64, which Swift
/// does not lay out. Each registration carries a 64-bit token; `wait` fills
/// `tokens` and `events` (EPOLLIN, EPOLLOUT, EPOLLERR, EPOLLHUP bits) and
/// returns how many, or -1 with errno.
int tasker_epoll_create(void);
int tasker_epoll_ctl(int ep, int op, int fd, unsigned events, unsigned long long token);
/// Waits up to `timeout_ns` (-1: no limit; 0: a look); to the nanosecond
/// where the kernel has epoll_pwait2.
int tasker_epoll_wait(int ep, unsigned long long *tokens, unsigned *events, int max, long long timeout_ns);
#define TASKER_EPOLL_ADD 1
#define TASKER_EPOLL_DEL 2
#define TASKER_EPOLL_MOD 3
/// lua_pcall with luaL_traceback as the message handler.
int tasker_pcall_traceback(lua_State *L, int nargs, int nresults);
// tasker_pcall_traceback's handler also notes where the error was raised:
// a position-less message of Lua's ("C stack overflow") gets one, and for
// a value other than a string the position is left in the registry under
// TASKER_ERROR_WHERE.
#define TASKER_ERROR_WHERE "tasker.error_where"
/// Pushes "src:line" where the Lua function at idx is defined, or nil.
void tasker_push_defined_at(lua_State *L, int idx);

/// C's `stdout` (Lua's `print` writes through it), for Swift, which cannot
/// read the global safely under strict concurrency.
static inline FILE *tasker_stdout(void) { return stdout; }

// ---- macro wrappers ----------------------------------------------------------
static inline int tasker_registryindex(void) { return LUA_REGISTRYINDEX; }
static inline int tasker_upvalueindex(int i) { return lua_upvalueindex(i); }
static inline void tasker_pop(lua_State *L, int n) { lua_pop(L, n); }
static inline const char *tasker_tostring(lua_State *L, int i, size_t *len) { return lua_tolstring(L, i, len); }
static inline lua_Number tasker_tonumber(lua_State *L, int i, int *isnum) { return lua_tonumberx(L, i, isnum); }
static inline lua_Integer tasker_tointeger(lua_State *L, int i, int *isnum) { return lua_tointegerx(L, i, isnum); }
static inline void tasker_remove(lua_State *L, int i) { lua_rotate(L, i, -1); lua_pop(L, 1); }
static inline int tasker_isinteger_value(lua_State *L, int i) { return lua_isinteger(L, i); }
static inline void *tasker_newuserdata(lua_State *L, size_t size) { return lua_newuserdatauv(L, size, 0); }
/// lua_pcall without a message handler (when only the message is wanted).
static inline int tasker_pcall(lua_State *L, int nargs, int nresults) { return lua_pcall(L, nargs, nresults, 0); }

#endif

// State creation, the allocator, the trampoline and the interrupt hook.
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>

static char engine_mark;
void *tasker_engine_mark(void) { return &engine_mark; }

static char json_null;
void *tasker_json_null(void) { return &json_null; }

uint64_t tasker_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

tasker_Runtime *tasker_runtime(lua_State *L) {
    void *ud = NULL;
    lua_getallocf(L, &ud);
    return (tasker_Runtime *)ud;
}

void tasker_setfiber(lua_State *L, void *fiber) { memcpy(lua_getextraspace(L), &fiber, sizeof fiber); }
void *tasker_getfiber(lua_State *L) { void *f; memcpy(&f, lua_getextraspace(L), sizeof f); return f; }

// ---- the runtime record ---------------------------------------------------------

tasker_Runtime *tasker_runtime_new(void) {
    tasker_Runtime *rt = calloc(1, sizeof *rt);
    if (rt) {
        atomic_init(&rt->interrupt, 0);
        atomic_init(&rt->signalled, 0);
    }
    return rt;
}

void tasker_runtime_free(tasker_Runtime *rt) {
    tasker_pool_release(&rt->pool);
    free(rt);
}

void tasker_runtime_set_owner(tasker_Runtime *rt, void *owner, tasker_InterruptFunction fn) {
    rt->owner = owner;
    rt->on_interrupt = fn;
}

void *tasker_runtime_owner(tasker_Runtime *rt) { return rt->owner; }

void tasker_request_interrupt(tasker_Runtime *rt, int on) {
    atomic_store_explicit(&rt->interrupt, on, memory_order_relaxed);
}

int tasker_signal(tasker_Runtime *rt, int sig) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&rt->signalled, &expected, sig)) return sig;
    return expected;
}

int tasker_signalled(tasker_Runtime *rt) { return atomic_load(&rt->signalled); }

void tasker_set_deadlines(tasker_Runtime *rt, uint64_t deadline, uint64_t slice) {
    rt->deadline_ns = deadline;
    rt->slice_ns = slice;
}

uint64_t tasker_slice(tasker_Runtime *rt) { return rt->slice_ns; }
void tasker_set_slice(tasker_Runtime *rt, uint64_t slice) { rt->slice_ns = slice; }
uint64_t tasker_budget(tasker_Runtime *rt) { return rt->budget_ns; }

uint64_t tasker_set_budget(tasker_Runtime *rt, uint64_t budget) {
    uint64_t old = rt->budget_ns;
    rt->budget_ns = budget;
    return old;
}

int tasker_take_hook_yield(tasker_Runtime *rt, lua_State *co) {
    if (rt->hook_yield != co) return 0;
    rt->hook_yield = NULL;
    return 1;
}

// ---- the hook -------------------------------------------------------------------

static void count_hook(lua_State *L, lua_Debug *ar);

void tasker_reset_hook(lua_State *L) { lua_sethook(L, count_hook, LUA_MASKCOUNT, 1000); }

int tasker_sticky_error(lua_State *L) {
    lua_sethook(L, count_hook, LUA_MASKCOUNT, 1);
    return lua_error(L);
}

static inline int due(uint64_t deadline, uint64_t now) { return deadline != 0 && now >= deadline; }

// Every 1000 VM instructions: consult Swift when the running code was
// aborted, a signal arrived, or a deadline (timeout, time slice, budget)
// passed. Reading the clock here costs ~20 ns per 1000 instructions.
static void count_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    tasker_Runtime *rt = tasker_runtime(L);
    if (!atomic_load_explicit(&rt->interrupt, memory_order_relaxed)
        && !atomic_load_explicit(&rt->signalled, memory_order_relaxed)) {
        if (rt->deadline_ns == 0 && rt->slice_ns == 0 && rt->budget_ns == 0) return;
        uint64_t now = tasker_now_ns();
        if (!due(rt->deadline_ns, now) && !due(rt->slice_ns, now) && !due(rt->budget_ns, now)) return;
    }
    if (rt->on_interrupt == NULL) return;
    int stop = 0;
    switch (rt->on_interrupt(L, &stop)) {
    case TASKER_HOOK_RAISE:
        tasker_sticky_error(L);
        return;
    case TASKER_HOOK_YIELD:
        if (!lua_isyieldable(L)) return;
        rt->hook_yield = L;
        rt->hook_stop = stop;
        lua_yield(L, 0);  // must be the hook's last act
        return;
    default:
        return;
    }
}

// package.loaded's __newindex: stores the new entry (raw) and counts it,
// so whoever names loaded modules (task identities) knows when to look
// again without counting package.loaded at every look. `require` and
// `package.loaded.x = t` both add entries through it.
static int loaded_newindex(lua_State *L) {
    lua_settop(L, 3);
    lua_rawset(L, 1);
    tasker_runtime(L)->loaded_changes++;
    return 0;
}

// debug.sethook would replace or remove the count hook that stops runaway
// code (timeouts, time slices, cancel, signals): a task that removed it
// could spin for ever. Refused, at the caller's line.
static int sethook_refused(lua_State *L) {
    return luaL_error(L, "debug.sethook is not available in tasker: its hook is what stops runaway code "
                         "(timeouts, cancel, Ctrl-C)");
}

static int open_all(lua_State *L) {
    luaL_openlibs(L);
    lua_getglobal(L, "debug");
    lua_pushcfunction(L, sethook_refused);
    lua_setfield(L, -2, "sethook");
    lua_pop(L, 1);
    tasker_check_identity_layout(L);
    lua_pushcfunction(L, tasker_open_coroutine);
    lua_call(L, 0, 0);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, loaded_newindex);
    lua_setfield(L, -2, "__newindex");
    lua_setmetatable(L, -2);
    lua_pop(L, 1);
    return 0;
}

uint64_t tasker_loaded_changes(lua_State *L) { return tasker_runtime(L)->loaded_changes; }

lua_State *tasker_newstate(tasker_Runtime *rt, char *err, size_t errlen) {
    lua_State *L = lua_newstate(tasker_pool_alloc, rt);
    if (L == NULL) { snprintf(err, errlen, "cannot create Lua state: out of memory"); return NULL; }
    tasker_setfiber(L, NULL);
    lua_pushcfunction(L, open_all);
    if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
        snprintf(err, errlen, "cannot open Lua libraries: %s", lua_tostring(L, -1));
        lua_close(L);
        return NULL;
    }
    // Installed on the main thread; every thread created later inherits it.
    tasker_reset_hook(L);
    return L;
}

// ---- trampoline ---------------------------------------------------------------

// Continuation of an engine yield. The driver resumes with (true, values...)
// or (false, err): return the values or raise the error, here in C.
static int engine_resume_k(lua_State *L, int status, lua_KContext base) {
    (void)status;
    int b = (int)base;
    if (lua_toboolean(L, b + 1)) return lua_gettop(L) - b - 1;
    lua_settop(L, b + 2);
    return lua_error(L);
}

static int run_swift(lua_State *L, tasker_SwiftFunction fn) {
    int r = fn(L);
    if (r >= 0) return r;
    if (r == TASKER_RAISE) return lua_error(L);
    int n = -2 - r;
    return lua_yieldk(L, n, (lua_KContext)(lua_gettop(L) - n), engine_resume_k);
}

static int trampoline(lua_State *L) {
    return run_swift(L, (tasker_SwiftFunction)lua_touserdata(L, lua_upvalueindex(1)));
}

// Where the caller can yield, the Swift version (it waits without blocking
// the engine); elsewhere (a handler, a C boundary) the original C function.
static int yieldable_or_original(lua_State *L) {
    if (lua_isyieldable(L))
        return run_swift(L, (tasker_SwiftFunction)lua_touserdata(L, lua_upvalueindex(1)));
    int n = lua_gettop(L);
    lua_pushvalue(L, lua_upvalueindex(3));
    lua_insert(L, 1);
    lua_call(L, n, LUA_MULTRET);
    return lua_gettop(L);
}

void tasker_pushwaitingvariant(lua_State *L, tasker_SwiftFunction fn) {
    // stack: original, bound → upvalues: fn, bound, original
    lua_pushlightuserdata(L, (void *)fn);
    lua_rotate(L, -3, 1);  // fn, original, bound
    lua_rotate(L, -2, 1);  // fn, bound, original
    lua_pushcclosure(L, yieldable_or_original, 3);
}

void tasker_pushfunction(lua_State *L, tasker_SwiftFunction fn, int nup) {
    lua_pushlightuserdata(L, (void *)fn);
    if (nup > 0) lua_rotate(L, -(nup + 1), 1);
    lua_pushcclosure(L, trampoline, nup + 1);
}

// ---- protected helpers --------------------------------------------------------

static int tostring_cf(lua_State *L) {
    luaL_tolstring(L, 1, NULL);
    return 1;
}

// How long a __tostring metamethod may run when tasker turns a value into
// text (an error message): 2 s, like handlers.
#define TOSTRING_BUDGET_NS 2000000000ull

int tasker_tostring_protected(lua_State *L, int idx) {
    idx = lua_absindex(L, idx);
    int user_code = luaL_getmetafield(L, idx, "__tostring") != LUA_TNIL;
    if (user_code) lua_pop(L, 1);
    tasker_Runtime *rt = tasker_runtime(L);
    uint64_t saved = rt->budget_ns;
    if (user_code) {
        uint64_t budget = tasker_now_ns() + TOSTRING_BUDGET_NS;
        if (saved == 0 || budget < saved) rt->budget_ns = budget;
    }
    lua_pushcfunction(L, tostring_cf);
    lua_pushvalue(L, idx);
    int status = lua_pcall(L, 1, 1, 0);
    rt->budget_ns = saved;
    if (status != LUA_OK && user_code) tasker_reset_hook(L);
    return status;
}

int tasker_loadbuffer(lua_State *L, const char *buf, size_t len, const char *chunkname) {
    return luaL_loadbufferx(L, buf, len, chunkname, "t");
}

// Lua's errors that come without a position (raised from C).
static const char *const positionless[] = {"C stack overflow", "stack overflow", "error in error handling", NULL};

// Pushes "src:line" of the innermost Lua function with a line that is not
// tasker's own Lua (a chunk named [tasker.*]; a load()ed string, named
// [string "..."], is the script's); 0 (nothing pushed) when none.
static int push_innermost_position(lua_State *L) {
    lua_Debug ar;
    for (int level = 0; level < 200 && lua_getstack(L, level, &ar); level++) {
        if (!lua_getinfo(L, "Sl", &ar)) continue;
        if (ar.currentline > 0 && strncmp(ar.short_src, "[tasker.", 8) != 0) {
            lua_pushfstring(L, "%s:%d", ar.short_src, ar.currentline);
            return 1;
        }
    }
    return 0;
}

// Where an error was raised, while its stack is still there: a message
// Lua gives without a position gets one; for a value other than a string
// (a table raised), the position goes to the registry's TASKER_ERROR_WHERE
// (nil when none), for whoever describes the error.
static int locate_error(lua_State *L) {
    if (lua_type(L, 1) == LUA_TSTRING) {
        const char *m = lua_tostring(L, 1);
        for (int i = 0; positionless[i]; i++) {
            if (strcmp(m, positionless[i]) != 0) continue;
            if (push_innermost_position(L)) {
                lua_pushliteral(L, ": ");
                lua_pushvalue(L, 1);
                lua_concat(L, 3);
                lua_replace(L, 1);
            }
            break;
        }
    } else {
        if (!push_innermost_position(L)) lua_pushnil(L);
        lua_setfield(L, LUA_REGISTRYINDEX, TASKER_ERROR_WHERE);
    }
    return 1;
}

void tasker_push_defined_at(lua_State *L, int idx) {
    lua_Debug ar;
    lua_pushvalue(L, idx);
    if (lua_getinfo(L, ">S", &ar) && ar.linedefined > 0) {
        lua_pushfstring(L, "%s:%d", ar.short_src, ar.linedefined);
    } else {
        lua_pushnil(L);
    }
}

// Strings get a traceback; other error values (error tables) pass unchanged.
// The message is joined to the traceback as a Lua string, not given to
// luaL_traceback as a C string: that would cut it at its first NUL.
static int traceback_handler(lua_State *L) {
    locate_error(L);
    if (lua_type(L, 1) != LUA_TSTRING) return 1;
    lua_pushvalue(L, 1);
    lua_pushliteral(L, "\n");
    luaL_traceback(L, L, NULL, 1);
    lua_concat(L, 3);
    return 1;
}

int tasker_pcall_traceback(lua_State *L, int nargs, int nresults) {
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, traceback_handler);
    lua_insert(L, base);
    int status = lua_pcall(L, nargs, nresults, base);
    lua_remove(L, base);
    return status;
}

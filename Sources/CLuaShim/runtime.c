// State creation, the allocator, the trampoline and the interrupt hook.
#include "CLuaShim.h"

#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>

int tasker_open_coroutine(lua_State *L);

static char engine_mark;
void *tasker_engine_mark(void) { return &engine_mark; }

static char json_null;
void *tasker_json_null(void) { return &json_null; }

uint64_t tasker_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *tasker_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    (void)ud; (void)osize;
    if (nsize == 0) { free(ptr); return NULL; }
    return realloc(ptr, nsize);
}

tasker_Runtime *tasker_runtime(lua_State *L) {
    void *ud = NULL;
    lua_getallocf(L, &ud);
    return (tasker_Runtime *)ud;
}

void tasker_setfiber(lua_State *L, void *fiber) { memcpy(lua_getextraspace(L), &fiber, sizeof fiber); }
void *tasker_getfiber(lua_State *L) { void *f; memcpy(&f, lua_getextraspace(L), sizeof f); return f; }

void tasker_request_interrupt(tasker_Runtime *rt, int on) { rt->interrupt = on; }
void tasker_signal(tasker_Runtime *rt) { rt->signalled = 1; }

// Every 1000 VM instructions: stop runaway code once it is cancelled or past
// its deadline. Checking the clock here costs ~20 ns per 1000 instructions.
static void count_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    tasker_Runtime *rt = tasker_runtime(L);
    if (!rt->interrupt && !rt->signalled && (rt->deadline_ns == 0 || tasker_now_ns() < rt->deadline_ns)) return;
    if (rt->on_interrupt && rt->on_interrupt(L)) lua_error(L);
}

static int open_all(lua_State *L) {
    luaL_openlibs(L);
    lua_pushcfunction(L, tasker_open_coroutine);
    lua_call(L, 0, 0);
    return 0;
}

lua_State *tasker_newstate(tasker_Runtime *rt, char *err, size_t errlen) {
    lua_State *L = lua_newstate(tasker_alloc, rt);
    if (L == NULL) { snprintf(err, errlen, "cannot create Lua state: out of memory"); return NULL; }
    tasker_setfiber(L, NULL);
    lua_pushcfunction(L, open_all);
    if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
        snprintf(err, errlen, "cannot open Lua libraries: %s", lua_tostring(L, -1));
        lua_close(L);
        return NULL;
    }
    // Installed on the main thread; every thread created later inherits it.
    lua_sethook(L, count_hook, LUA_MASKCOUNT, 1000);
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

static int trampoline(lua_State *L) {
    tasker_SwiftFunction fn = (tasker_SwiftFunction)lua_touserdata(L, lua_upvalueindex(1));
    int r = fn(L);
    if (r >= 0) return r;
    if (r == TASKER_RAISE) return lua_error(L);
    int n = -2 - r;
    return lua_yieldk(L, n, (lua_KContext)(lua_gettop(L) - n), engine_resume_k);
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

int tasker_tostring_protected(lua_State *L, int idx) {
    idx = lua_absindex(L, idx);
    lua_pushcfunction(L, tostring_cf);
    lua_pushvalue(L, idx);
    return lua_pcall(L, 1, 1, 0);
}

int tasker_loadbuffer(lua_State *L, const char *buf, size_t len, const char *chunkname) {
    return luaL_loadbufferx(L, buf, len, chunkname, "t");
}

// Strings get a traceback; other error values (error tables) pass unchanged.
static int traceback_handler(lua_State *L) {
    if (lua_type(L, 1) != LUA_TSTRING) return 1;
    luaL_traceback(L, L, lua_tostring(L, 1), 1);
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

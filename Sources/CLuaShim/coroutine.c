// The `coroutine` library as plain Lua 5.4 has it, made engine-aware
// (the OpenResty approach):
//  * a yield carrying the engine mark passes through user coroutines up to
//    the engine's driver, and the driver's answer flows back down;
//  * a yield made by the hook (a time slice ended, or the task must stop)
//    passes up the same way, so a pause or a stop is never mistaken for the
//    user's own yield and cannot be caught by the code it stops;
//  * engine threads (the main chunk, task bodies) look like Lua's main
//    thread: running() says ismain, isyieldable() is false, yield() fails
//    with Lua's own message, and they cannot be resumed or closed by users.
#include "internal.h"

enum { MODE_RESUME = 0, MODE_WRAP = 1 };
enum { COS_RUN, COS_DEAD, COS_YIELD, COS_NORM };
static const char *const statname[] = {"running", "dead", "suspended", "normal"};

static int is_engine(lua_State *co) { return tasker_getfiber(co) != NULL; }

// A user coroutine that passed an engine yield up (a sleep inside it) is,
// until its resumer goes on, in the middle of that resume: "normal", as in
// plain Lua a coroutine that resumed another is. Another task must not
// resume it (it would get the driver's answer meant for its owner). Marked
// in a weak-keyed registry table, by the thread object.
#define PASSING_KEY "tasker.passing"

// Pushes the marks' table (made the first time when `create`), or returns 0.
static int push_marks(lua_State *L, int create) {
    if (lua_getfield(L, LUA_REGISTRYINDEX, PASSING_KEY) == LUA_TTABLE) return 1;
    lua_pop(L, 1);
    if (!create) return 0;
    lua_newtable(L);
    lua_newtable(L);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, PASSING_KEY);
    return 1;
}

// Pushes the thread object of `co` onto L.
static void push_thread_of(lua_State *L, lua_State *co) {
    lua_checkstack(co, 1);
    lua_pushthread(co);
    lua_xmove(co, L, 1);
}

static void set_passing(lua_State *L, lua_State *co, int on) {
    tasker_Runtime *rt = tasker_runtime(L);
    if (!push_marks(L, on)) return;
    push_thread_of(L, co);
    if (on) {
        lua_pushboolean(L, 1);
        rt->passing_marked++;
    } else {
        lua_pushnil(L);
        if (rt->passing_marked > 0) rt->passing_marked--;  // every resume_cont follows a mark
    }
    lua_rawset(L, -3);
    lua_pop(L, 1);
}

static int is_passing(lua_State *L, lua_State *co) {
    if (tasker_runtime(L)->passing_marked == 0 || lua_status(co) != LUA_YIELD || !push_marks(L, 0)) return 0;
    push_thread_of(L, co);
    int marked = lua_rawget(L, -2) != LUA_TNIL;
    lua_pop(L, 2);
    return marked;
}

static lua_State *getco(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTHREAD);  // Lua 5.4.4's own message
    return lua_tothread(L, 1);
}

static int auxstatus(lua_State *L, lua_State *co) {
    if (L == co) return COS_RUN;
    if (is_engine(co) || is_passing(L, co)) return COS_NORM;
    switch (lua_status(co)) {
    case LUA_YIELD: return COS_YIELD;
    case LUA_OK: {
        lua_Debug ar;
        if (lua_getstack(co, 0, &ar)) return COS_NORM;
        return lua_gettop(co) == 0 ? COS_DEAD : COS_YIELD;
    }
    default: return COS_DEAD;
    }
}

static int resume_step(lua_State *L, lua_State *co, int narg, int mode);

// After the driver answered an engine yield that passed through `co`:
// hand its answer down to `co` and go on.
static int resume_cont(lua_State *L, int status, lua_KContext mode) {
    (void)status;
    lua_State *co = mode == MODE_WRAP ? lua_tothread(L, lua_upvalueindex(1)) : lua_tothread(L, 1);
    int narg = mode == MODE_WRAP ? lua_gettop(L) : lua_gettop(L) - 1;
    set_passing(L, co, 0);  // its resumer goes on with it
    return resume_step(L, co, narg, (int)mode);
}

// An error is on top of L: report it the way resume or wrap does.
static int resume_failed(lua_State *L, lua_State *co, int mode) {
    if (mode == MODE_RESUME) {
        lua_pushboolean(L, 0);
        lua_insert(L, -2);
        return 2;
    }
    int stat = lua_status(co);
    if (stat != LUA_OK && stat != LUA_YIELD) {  // error inside the coroutine
        stat = lua_resetthread(co);             // close its to-be-closed variables
        lua_xmove(co, L, 1);
    }
    if (stat != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
        luaL_where(L, 1);
        lua_insert(L, -2);
        lua_concat(L, 2);
    }
    return lua_error(L);
}

static int resume_step(lua_State *L, lua_State *co, int narg, int mode) {
    int status, nres;
    if (co != L && (is_engine(co) || is_passing(L, co))) {
        lua_pop(L, narg);
        lua_pushliteral(L, "cannot resume non-suspended coroutine");
        return resume_failed(L, co, mode);
    }
    if (!lua_checkstack(co, narg)) {
        lua_pushliteral(L, "too many arguments to resume");
        return resume_failed(L, co, mode);
    }
    lua_xmove(L, co, narg);
again:
    status = lua_resume(co, L, narg, &nres);
    if (status == LUA_YIELD && nres == 0) {
        tasker_Runtime *rt = tasker_runtime(L);
        if (tasker_take_hook_yield(rt, co)) {
            int stop = rt->hook_stop;
            if (lua_isyieldable(L)) {  // pass the pause (or stop) up to the driver
                rt->hook_yield = L;
                set_passing(L, co, 1);
                return lua_yieldk(L, 0, mode, resume_cont);
            }
            // Resumed from a context that cannot yield (a C function): a pause
            // goes on at once; a stop is raised here instead.
            if (stop && rt->on_interrupt && rt->on_interrupt(L, &stop) == TASKER_HOOK_RAISE)
                return tasker_sticky_error(L);
            narg = 0;
            goto again;
        }
    }
    if (status == LUA_YIELD && nres > 0 && lua_touserdata(co, -nres) == tasker_engine_mark()) {
        // An engine call (sleep, await, ...) inside this coroutine: pass it up.
        if (!lua_isyieldable(L)) {
            lua_pop(co, nres);
            return luaL_error(L, "cannot wait here (inside a C function such as a table.sort "
                                 "comparator, a metamethod called from C, or an event handler)");
        }
        if (!lua_checkstack(L, nres + 3)) return luaL_error(L, "too many results to resume");
        lua_xmove(co, L, nres);
        set_passing(L, co, 1);
        return lua_yieldk(L, nres, mode, resume_cont);
    }
    if (status == LUA_OK || status == LUA_YIELD) {
        if (!lua_checkstack(L, nres + 1)) {
            lua_pop(co, nres);
            lua_pushliteral(L, "too many results to resume");
            return resume_failed(L, co, mode);
        }
        if (mode == MODE_RESUME) lua_pushboolean(L, 1);
        lua_xmove(co, L, nres);
        return mode == MODE_RESUME ? nres + 1 : nres;
    }
    lua_xmove(co, L, 1);
    return resume_failed(L, co, mode);
}

static int co_create(lua_State *L) {
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_State *NL = lua_newthread(L);
    lua_pushvalue(L, 1);
    lua_xmove(L, NL, 1);
    return 1;
}

static int co_resume(lua_State *L) {
    lua_State *co = getco(L);
    return resume_step(L, co, lua_gettop(L) - 1, MODE_RESUME);
}

static int auxwrap(lua_State *L) {
    lua_State *co = lua_tothread(L, lua_upvalueindex(1));
    return resume_step(L, co, lua_gettop(L), MODE_WRAP);
}

static int co_wrap(lua_State *L) {
    co_create(L);
    lua_pushcclosure(L, auxwrap, 1);
    return 1;
}

static int co_yield(lua_State *L) {
    if (is_engine(L)) return luaL_error(L, "attempt to yield from outside a coroutine");
    return lua_yield(L, lua_gettop(L));
}

static int co_status(lua_State *L) {
    lua_State *co = getco(L);
    lua_pushstring(L, statname[auxstatus(L, co)]);
    return 1;
}

static int co_running(lua_State *L) {
    int ismain = lua_pushthread(L);
    lua_pushboolean(L, ismain || is_engine(L));
    return 2;
}

static int co_isyieldable(lua_State *L) {
    lua_State *co = lua_isnone(L, 1) ? L : getco(L);
    lua_pushboolean(L, !is_engine(co) && lua_isyieldable(co));
    return 1;
}

static int co_close(lua_State *L) {
    lua_State *co = getco(L);
    int status = auxstatus(L, co);
    switch (status) {
    case COS_DEAD:
    case COS_YIELD:
        status = lua_resetthread(co);
        if (status == LUA_OK) {
            lua_pushboolean(L, 1);
            return 1;
        }
        lua_pushboolean(L, 0);
        lua_xmove(co, L, 1);
        return 2;
    default:
        return luaL_error(L, "cannot close a %s coroutine", statname[status]);
    }
}

static const luaL_Reg co_funcs[] = {
    {"create", co_create},   {"resume", co_resume},         {"running", co_running},
    {"status", co_status},   {"wrap", co_wrap},             {"yield", co_yield},
    {"isyieldable", co_isyieldable}, {"close", co_close},   {NULL, NULL}};

// Replaces the functions of the loaded `coroutine` table in place, so
// `require "coroutine"` and the global agree.
int tasker_open_coroutine(lua_State *L) {
    lua_getglobal(L, "coroutine");
    luaL_setfuncs(L, co_funcs, 0);
    lua_pop(L, 1);
    return 0;
}

// Shared between the shim's C files only (not visible to Swift).
#ifndef TASKER_CLUASHIM_INTERNAL_H
#define TASKER_CLUASHIM_INTERNAL_H

#include "CLuaShim.h"
#include <stdatomic.h>
#include <stdint.h>

/// Blocks up to this size come from the pool (pool.c).
#define TASKER_POOL_MAX 512
#define TASKER_POOL_CLASSES (TASKER_POOL_MAX / 16)

/// The Lua state's small-block allocator: a free list per 16-byte size
/// class, carved from slabs that live until the state is closed.
typedef struct tasker_Pool {
    void **free[TASKER_POOL_CLASSES + 1];
    char *bump;
    char *end;
    struct Slab *slabs;
} tasker_Pool;

struct tasker_Runtime {
    /// Unretained pointer to the Swift owner (LuaRuntime).
    void *owner;
    tasker_InterruptFunction on_interrupt;
    /// Non-zero asks the hook to consult Swift (the running fiber was aborted).
    atomic_int interrupt;
    /// The first signal number received (set from another thread); never cleared.
    atomic_int signalled;
    /// Loop thread only (the hook runs there too).
    uint64_t deadline_ns;
    uint64_t slice_ns;
    uint64_t budget_ns;
    /// The thread whose yield came from the hook, and whether it was a stop.
    lua_State *hook_yield;
    int hook_stop;
    /// Entries added to package.loaded so far (its __newindex counts them).
    uint64_t loaded_changes;
    /// User coroutines marked as passing an engine yield up (coroutine.c);
    /// one whose resumer was abandoned keeps its count, so it only says
    /// when the marks need not be looked up at all.
    uint64_t passing_marked;
    /// Lua's memory (the state's allocator's `ud` is this record).
    tasker_Pool pool;
};

void *tasker_pool_alloc(void *ud, void *ptr, size_t osize, size_t nsize);
/// Returns every slab (after lua_close).
void tasker_pool_release(tasker_Pool *pool);

int tasker_open_coroutine(lua_State *L);
/// The hook's raise path: make every instruction on `L` check, then raise
/// the value on top of the stack.
int tasker_sticky_error(lua_State *L);

/* The start of Lua 5.4's objects (lobject.h, which Debian does not ship):
   every collectable object begins with `next`, `tt`, `marked`; a Lua
   closure goes on with `nupvalues`, `gclist`, its Proto and its upvalues;
   an upvalue with `tbc` and a pointer to its value; a value is 8 bytes and
   a type tag; a string with `extra`, `shrlen`, `hash`, the long length and
   its bytes. The layout is the same in every 5.4 release. Readers check the
   type tags they pass (tasker_proto), or that this layout holds in this
   process at all (identity.c), so a different one is never read as this. */
typedef struct {
    void *next;
    unsigned char tt, marked;
} GCHead;

typedef struct {
    uint64_t value;
    unsigned char tt;
} TValueHead;

typedef struct {
    void *next;
    unsigned char tt, marked, tbc;
    const TValueHead *v;
} UpValHead;

typedef struct {
    void *next;
    unsigned char tt, marked, nupvalues;
    void *gclist;
    const GCHead *p;
    const UpValHead *upvals[1];
} LClosureHead;

typedef struct {
    void *next;
    unsigned char tt, marked, extra, shrlen;
    unsigned int hash;
    size_t lnglen;
    char contents[1];
} TStringHead;

/* Type tags with their variant bits (and bit 6 on collectable values). */
enum {
    LUA_CLOSURE_TAG = LUA_TFUNCTION | (0 << 4),
    PROTO_TAG = (LUA_NUMTYPES + 1) | (0 << 4),
    UPVAL_TAG = LUA_NUMTYPES,
    V_NIL = LUA_TNIL,
    V_FALSE = LUA_TBOOLEAN | (0 << 4),
    V_TRUE = LUA_TBOOLEAN | (1 << 4),
    V_INT = LUA_TNUMBER | (0 << 4),
    V_FLOAT = LUA_TNUMBER | (1 << 4),
    V_SHORT_STRING = LUA_TSTRING | (0 << 4),
    V_LONG_STRING = LUA_TSTRING | (1 << 4),
    V_COLLECTABLE = 1 << 6,
};

/* Checks, once per process, that this Lua's layout is internal.h's, so
   identity.c may read captures in place (runs a small chunk; called while
   a new state opens its libraries, before any hook is set). */
void tasker_check_identity_layout(lua_State *L);

#endif

// Shared between the shim's C files only (not visible to Swift).
#ifndef TASKER_CLUASHIM_INTERNAL_H
#define TASKER_CLUASHIM_INTERNAL_H

#include "CLuaShim.h"
#include <stdatomic.h>

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

#endif

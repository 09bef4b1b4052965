// Shared between the shim's C files only (not visible to Swift).
#ifndef TASKER_CLUASHIM_INTERNAL_H
#define TASKER_CLUASHIM_INTERNAL_H

#include "CLuaShim.h"
#include <stdatomic.h>

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
};

int tasker_open_coroutine(lua_State *L);
/// The hook's raise path: make every instruction on `L` check, then raise
/// the value on top of the stack.
int tasker_sticky_error(lua_State *L);

#endif

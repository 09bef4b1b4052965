// The stripped bytecode of a Lua function (a task's identity hashes it).
// lua_dump only calls the writer; it raises nothing, so Swift may call this.
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct { unsigned char *p; size_t n, cap; int failed; } DumpBuffer;

static int dump_writer(lua_State *L, const void *bytes, size_t size, void *ud) {
    (void)L;
    DumpBuffer *b = ud;
    if (b->failed) return 1;
    if (b->n + size > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 512;
        while (cap < b->n + size) cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p) { b->failed = 1; return 1; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, bytes, size);
    b->n += size;
    return 0;
}

unsigned char *tasker_dump(lua_State *L, int idx, size_t *len) {
    if (lua_type(L, idx) != LUA_TFUNCTION || lua_iscfunction(L, idx) || !lua_checkstack(L, 1)) return NULL;
    DumpBuffer b = {0};
    lua_pushvalue(L, idx);
    int rc = lua_dump(L, dump_writer, &b, 1);
    lua_pop(L, 1);
    if (rc != 0 || b.failed) {
        free(b.p);
        return NULL;
    }
    *len = b.n;
    return b.p;
}

const void *tasker_lua_closure(lua_State *L, int idx, const void **proto) {
    if (lua_type(L, idx) != LUA_TFUNCTION || lua_iscfunction(L, idx)) return NULL;
    const LClosureHead *cl = lua_topointer(L, idx);
    if (!cl || cl->tt != LUA_CLOSURE_TAG || !cl->p || cl->p->tt != PROTO_TAG) return NULL;
    *proto = cl->p;
    return cl;
}

const void *tasker_proto(lua_State *L, int idx) {
    const void *proto = NULL;
    return tasker_lua_closure(L, idx, &proto) ? proto : NULL;
}

// The common case of a task's identity, in C: a closure made in a loop,
// capturing a few numbers or strings. The Swift walk (TaskIdentities)
// handles everything else and hashes the same bytes the same way.
#include "internal.h"

#include <string.h>

static inline uint64_t fnv_byte(uint64_t h, unsigned char b) {
    return (h ^ b) * 0x100000001b3ULL;
}

static inline uint64_t fnv_word(uint64_t h, uint64_t w) {
    for (int i = 0; i < 8; i++) {
        h = fnv_byte(h, (unsigned char)w);
        w >>= 8;
    }
    return h;
}

static inline uint64_t fnv_bytes(uint64_t h, const unsigned char *p, size_t len) {
    h = fnv_word(fnv_byte(h, 5), (uint64_t)len);
    for (size_t k = 0; k < len; k++) h = fnv_byte(h, p[k]);
    return h;
}

/* What hashing the captures came to. */
enum { NOT_SCALAR = -1, LAYOUT_UNKNOWN = -2 };

/* A number as lua_tointegerx sees it: a float with an integral value that
   fits is an integer (1.0 and 1 hash alike). */
static inline uint64_t hash_number(uint64_t h, int is_float, uint64_t bits) {
    if (is_float) {
        double d;
        memcpy(&d, &bits, sizeof d);
        if (__builtin_floor(d) == d && d >= -9223372036854775808.0 && d < 9223372036854775808.0)
            return fnv_word(fnv_byte(h, 3), (uint64_t)(lua_Integer)d);
        return fnv_word(fnv_byte(h, 4), bits);
    }
    return fnv_word(fnv_byte(h, 3), bits);
}

int tasker_env_upvalue(lua_State *L, int idx) {
    for (int n = 1;; n++) {
        const char *name = lua_getupvalue(L, idx, n);
        if (!name) return 0;
        lua_pop(L, 1);
        if (name[0] == '_' && strcmp(name, "_ENV") == 0) return n;
    }
}

/* Through the API: each capture pushed, read and popped. */
static int hash_through_api(lua_State *L, int idx, uint64_t *hash) {
    if (!lua_checkstack(L, 1)) return NOT_SCALAR;
    uint64_t h = *hash;
    int captures = 0;
    for (int n = 1;; n++) {
        const char *name = lua_getupvalue(L, idx, n);
        if (!name) break;
        int type = lua_type(L, -1);
        if (name[0] == '_' && strcmp(name, "_ENV") == 0) {
            lua_pop(L, 1);
            continue;
        }
        captures++;
        switch (type) {
        case LUA_TNIL:
            h = fnv_byte(h, 0);
            break;
        case LUA_TBOOLEAN:
            h = fnv_byte(h, lua_toboolean(L, -1) ? 2 : 1);
            break;
        case LUA_TNUMBER: {
            int isint = 0;
            lua_Integer i = lua_tointegerx(L, -1, &isint);
            if (isint) {
                h = hash_number(h, 0, (uint64_t)i);
            } else {
                lua_Number d = lua_tonumberx(L, -1, NULL);
                uint64_t bits;
                memcpy(&bits, &d, sizeof bits);
                h = hash_number(h, 1, bits);
            }
            break;
        }
        case LUA_TSTRING: {
            size_t len = 0;
            const unsigned char *p = (const unsigned char *)lua_tolstring(L, -1, &len);
            h = fnv_bytes(h, p, len);
            break;
        }
        default:
            lua_pop(L, 1);
            return NOT_SCALAR;
        }
        lua_pop(L, 1);
    }
    *hash = h;
    return captures;
}

/* Straight from the closure's upvalues (see internal.h), skipping upvalue
   `env` (1-based; 0: none): no push, no pop, no call per capture. A tag
   this does not know leaves the closure to the API. */
static int hash_in_place(const LClosureHead *cl, int env, uint64_t *hash) {
    uint64_t h = *hash;
    int captures = 0;
    for (int n = 0; n < cl->nupvalues; n++) {
        if (n + 1 == env) continue;
        const UpValHead *uv = cl->upvals[n];
        if (!uv || uv->tt != UPVAL_TAG || !uv->v) return LAYOUT_UNKNOWN;
        const TValueHead *v = uv->v;
        captures++;
        switch (v->tt) {
        case V_NIL: h = fnv_byte(h, 0); break;
        case V_FALSE: h = fnv_byte(h, 1); break;
        case V_TRUE: h = fnv_byte(h, 2); break;
        case V_INT: h = hash_number(h, 0, v->value); break;
        case V_FLOAT: h = hash_number(h, 1, v->value); break;
        case V_SHORT_STRING | V_COLLECTABLE:
        case V_LONG_STRING | V_COLLECTABLE: {
            const TStringHead *s = (const TStringHead *)(uintptr_t)v->value;
            if (!s || s->tt != (v->tt & ~V_COLLECTABLE)) return LAYOUT_UNKNOWN;
            size_t len = s->tt == V_SHORT_STRING ? s->shrlen : s->lnglen;
            h = fnv_bytes(h, (const unsigned char *)s->contents, len);
            break;
        }
        default:
            return (v->tt & V_COLLECTABLE) || v->tt == (LUA_TFUNCTION | (1 << 4)) ? NOT_SCALAR : LAYOUT_UNKNOWN;
        }
    }
    *hash = h;
    return captures;
}

/* Whether this process's Lua lays closures, upvalues and strings out as
   internal.h says: a closure capturing each kind of scalar hashed both
   ways, once, as the first state opens its libraries (1 yes, 0 no, -1 not
   checked yet: the API then). */
static atomic_int layout_holds = -1;
static int check_layout(lua_State *L);

int tasker_identity_reads_in_place(void) { return atomic_load(&layout_holds) == 1; }

void tasker_check_identity_layout(lua_State *L) {
    if (atomic_load(&layout_holds) >= 0) return;
    atomic_store(&layout_holds, check_layout(L));
}

static int check_layout(lua_State *L) {
    static const char chunk[] =
        "local a, b, c, d, e, f, g, h, i, j = 7, 2.5, 'short', "
        "'a long string: longer than forty bytes, kept apart', true, false, nil, 3.0, -0.0, -7 "
        "return function() return a, b, c, d, e, f, g, h, i, j end";
    int top = lua_gettop(L), holds = 0;
    if (lua_checkstack(L, 2) && luaL_loadstring(L, chunk) == LUA_OK && lua_pcall(L, 0, 1, 0) == LUA_OK) {
        const LClosureHead *cl = tasker_proto(L, -1) ? lua_topointer(L, -1) : NULL;
        uint64_t api = 7, direct = 7;
        holds = cl && hash_through_api(L, lua_absindex(L, -1), &api) == 10 &&
                hash_in_place(cl, 0, &direct) == 10 && api == direct;
    }
    lua_settop(L, top);
    return holds;
}

int tasker_hash_scalar_closure(lua_State *L, int idx, const void *closure, int env, uint64_t *hash) {
    uint64_t h = *hash;
    int captures = LAYOUT_UNKNOWN;
    const LClosureHead *cl = closure;
    if (atomic_load_explicit(&layout_holds, memory_order_relaxed) == 1 && cl && cl->tt == LUA_CLOSURE_TAG)
        captures = hash_in_place(cl, env, &h);
    if (captures == LAYOUT_UNKNOWN) {
        h = *hash;
        captures = hash_through_api(L, idx, &h);
    }
    if (captures >= 0) *hash = h;
    return captures;
}

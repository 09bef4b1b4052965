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

/* The tags TaskIdentities' walk writes before a body and a Lua function. */
enum { TAG_BODY = 0x42, TAG_FUNCTION = 7 };

int tasker_hash_scalar_closure(lua_State *L, int idx, uint64_t code, uint64_t *hash) {
    if (!lua_checkstack(L, 1)) return -1;
    uint64_t h = fnv_word(fnv_byte(fnv_byte(*hash, TAG_BODY), TAG_FUNCTION), code);
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
            lua_Integer i = lua_tointegerx(L, -1, &isint);  // 1.0 and 1 hash alike
            if (isint) {
                h = fnv_word(fnv_byte(h, 3), (uint64_t)i);
            } else {
                lua_Number d = lua_tonumberx(L, -1, NULL);
                uint64_t bits;
                memcpy(&bits, &d, sizeof bits);
                h = fnv_word(fnv_byte(h, 4), bits);
            }
            break;
        }
        case LUA_TSTRING: {
            size_t len = 0;
            const unsigned char *p = (const unsigned char *)lua_tolstring(L, -1, &len);
            h = fnv_word(fnv_byte(h, 5), (uint64_t)len);
            for (size_t k = 0; k < len; k++) h = fnv_byte(h, p[k]);
            break;
        }
        default:
            lua_pop(L, 1);
            return -1;
        }
        lua_pop(L, 1);
    }
    *hash = h;
    return captures;
}

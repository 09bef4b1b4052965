// The Lua state's allocator: small blocks from size-class free lists carved
// out of big slabs, everything else from malloc.
//
// Why: a run allocates ~8 small Lua objects per task (closure, upvalue,
// handle, tables, strings) and frees most of them again; through glibc's
// realloc that was ~1,700 instructions per task, its fastbin
// consolidation showed up in profiles, and every new 4 KiB page was a
// fault. Lua passes the block's size on every free and realloc, so a
// block needs no header: a free list per 16-byte class is enough. Slabs
// after the first are 2 MiB aligned and advised as huge pages (one fault
// instead of 512 where the kernel allows it).
//
// One state, one thread: Lua calls its allocator only from the thread
// running it, so nothing here locks.
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum {
    POOL_GRAIN = 16,
    POOL_FIRST_SLAB = 256 * 1024,      // small scripts stay small
    POOL_SLAB = 2 * 1024 * 1024,       // a huge page
};

typedef struct Slab {
    struct Slab *next;
    size_t bytes;   // what was mapped (for munmap)
} Slab;

static inline size_t pool_class(size_t n) { return (n + POOL_GRAIN - 1) / POOL_GRAIN; }

/// A new slab of `bytes` (a multiple of 2 MiB is aligned to it); NULL when
/// the kernel says no.
static Slab *pool_map(size_t bytes) {
    if (bytes < POOL_SLAB) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return NULL;
        Slab *s = p;
        s->bytes = bytes;
        return s;
    }
    // Over-map, then trim to a 2 MiB boundary so the kernel can back the
    // slab with one huge page.
    size_t span = bytes + POOL_SLAB;
    char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    uintptr_t start = ((uintptr_t)p + POOL_SLAB - 1) & ~(uintptr_t)(POOL_SLAB - 1);
    size_t head = start - (uintptr_t)p;
    if (head) munmap(p, head);
    size_t tail = span - head - bytes;
    if (tail) munmap((char *)start + bytes, tail);
#ifdef MADV_HUGEPAGE
    madvise((void *)start, bytes, MADV_HUGEPAGE);
#endif
    Slab *s = (Slab *)start;
    s->bytes = bytes;
    return s;
}

/// A block of class `c` carved from the current slab (a new one when it is
/// used up); NULL when no memory is left.
static void *pool_carve(tasker_Pool *pool, size_t c) {
    size_t size = c * POOL_GRAIN;
    if ((size_t)(pool->end - pool->bump) < size) {
        // What is left of the old slab goes to the free lists, largest
        // classes first, so none of it is lost.
        while (pool->end - pool->bump >= POOL_GRAIN) {
            size_t left = (size_t)(pool->end - pool->bump) / POOL_GRAIN;
            if (left > TASKER_POOL_CLASSES) left = TASKER_POOL_CLASSES;
            void **b = (void **)pool->bump;
            *b = pool->free[left];
            pool->free[left] = b;
            pool->bump += left * POOL_GRAIN;
        }
        Slab *s = pool_map(pool->slabs ? POOL_SLAB : POOL_FIRST_SLAB);
        if (s == NULL) return NULL;
        s->next = pool->slabs;
        pool->slabs = s;
        // The header takes the first grain-aligned bytes.
        pool->bump = (char *)s + ((sizeof(Slab) + POOL_GRAIN - 1) / POOL_GRAIN) * POOL_GRAIN;
        pool->end = (char *)s + s->bytes;
    }
    void *b = pool->bump;
    pool->bump += size;
    return b;
}

static inline void *pool_get(tasker_Pool *pool, size_t n) {
    size_t c = pool_class(n);
    void **b = pool->free[c];
    if (b) {
        pool->free[c] = *b;
        return b;
    }
    return pool_carve(pool, c);
}

static inline void pool_put(tasker_Pool *pool, void *p, size_t n) {
    size_t c = pool_class(n);
    void **b = p;
    *b = pool->free[c];
    pool->free[c] = b;
}

void *tasker_pool_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    tasker_Pool *pool = &((tasker_Runtime *)ud)->pool;
    // A new block: osize is then the kind of object, not a size.
    if (ptr == NULL) osize = 0;
    int wasSmall = ptr != NULL && osize <= TASKER_POOL_MAX;
    if (nsize == 0) {
        if (ptr == NULL) return NULL;
        if (wasSmall) pool_put(pool, ptr, osize); else free(ptr);
        return NULL;
    }
    if (nsize <= TASKER_POOL_MAX) {
        if (wasSmall && pool_class(osize) == pool_class(nsize)) return ptr;
        void *b = pool_get(pool, nsize);
        if (b == NULL) return NULL;  // Lua keeps the old block on failure
        if (ptr) {
            memcpy(b, ptr, osize < nsize ? osize : nsize);
            if (wasSmall) pool_put(pool, ptr, osize); else free(ptr);
        }
        return b;
    }
    if (ptr == NULL || !wasSmall) return realloc(ptr, nsize);
    void *b = malloc(nsize);
    if (b == NULL) return NULL;
    memcpy(b, ptr, osize);
    pool_put(pool, ptr, osize);
    return b;
}

void tasker_pool_release(tasker_Pool *pool) {
    Slab *s = pool->slabs;
    while (s) {
        Slab *next = s->next;
        munmap(s, s->bytes);
        s = next;
    }
    memset(pool, 0, sizeof *pool);
}

/*
 * tests/track_tracy_test.c - heapkit built with HK_TRACY (CMake
 * HEAPKIT_TRACY) against a recording stand-in for Tracy's client: the four
 * memory entry points of TracyC.h, with its exact signatures, each storing
 * the event. Tracy itself is not in Debian; this checks heapkit's side:
 * every allocator names its events with the instance's name (the pointer
 * given as desc.name), every block allocated is freed by the end (bulk
 * frees, compaction and destroy included), and nothing is freed twice or
 * before it was allocated.
 */
#include "heapkit/cache.h"
#include "heapkit/gc.h"
#include "heapkit/guard.h"
#include "heapkit/hunk.h"
#include "heapkit/pool.h"
#include "heapkit/zone.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the stand-in: TracyC.h's memory entry points --------------------------- */

typedef struct ev {
    int alloc; /* 1 alloc, 0 free */
    const void *ptr;
    size_t size;
    const char *name;
} ev;

static ev g_ev[4096];
static int g_nev, g_bad;

static void rec(int alloc, const void *ptr, size_t size, const char *name) {
    if (g_nev < (int)(sizeof g_ev / sizeof g_ev[0]))
        g_ev[g_nev++] = (ev){alloc, ptr, size, name};
    else
        g_bad = 1;
}

void ___tracy_emit_memory_alloc_named(const void *ptr, size_t size, int secure, const char *name);
void ___tracy_emit_memory_alloc_callstack_named(const void *ptr, size_t size, int depth, int secure,
                                                const char *name);
void ___tracy_emit_memory_free_named(const void *ptr, int secure, const char *name);
void ___tracy_emit_memory_free_callstack_named(const void *ptr, int depth, int secure, const char *name);

void ___tracy_emit_memory_alloc_named(const void *ptr, size_t size, int secure, const char *name) {
    if (secure) g_bad = 1;
    rec(1, ptr, size, name);
}
void ___tracy_emit_memory_alloc_callstack_named(const void *ptr, size_t size, int depth, int secure,
                                                const char *name) {
    (void)depth;
    ___tracy_emit_memory_alloc_named(ptr, size, secure, name);
}
void ___tracy_emit_memory_free_named(const void *ptr, int secure, const char *name) {
    if (secure) g_bad = 1;
    rec(0, ptr, 0, name);
}
void ___tracy_emit_memory_free_callstack_named(const void *ptr, int depth, int secure, const char *name) {
    (void)depth;
    ___tracy_emit_memory_free_named(ptr, secure, name);
}

/* ---- checks ------------------------------------------------------------------- */

static int g_fail;
#define CHECK(c)                                                                                             \
    do {                                                                                                     \
        if (!(c)) {                                                                                          \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);                            \
            g_fail = 1;                                                                                      \
        }                                                                                                    \
    } while (0)

/* Every event names `name` (the same pointer); replayed in order, each free
 * ends a live block and nothing is live at the end. Returns the allocs. */
static int check_balanced(const char *what, const char *name) {
    const void *live[1024];
    int nlive = 0, nalloc = 0;
    for (int i = 0; i < g_nev; i++) {
        const ev *e = &g_ev[i];
        if (e->name != name) {
            fprintf(stderr, "%s: event %d names %s, not the instance\n", what, i,
                    e->name ? e->name : "(null)");
            g_fail = 1;
        }
        if (e->alloc) {
            nalloc++;
            if (nlive < 1024) live[nlive++] = e->ptr;
        } else {
            int k = -1;
            for (int j = 0; j < nlive; j++)
                if (live[j] == e->ptr) k = j;
            if (k < 0) {
                fprintf(stderr, "%s: event %d frees %p, which is no live block\n", what, i, e->ptr);
                g_fail = 1;
            } else {
                live[k] = live[--nlive];
            }
        }
    }
    if (nlive) {
        fprintf(stderr, "%s: %d blocks never freed\n", what, nlive);
        g_fail = 1;
    }
    g_nev = 0;
    return nalloc;
}

static int count(int alloc) {
    int n = 0;
    for (int i = 0; i < g_nev; i++) n += g_ev[i].alloc == alloc;
    return n;
}

int main(void) {
    static const char zname[] = "tracy-zone", hname[] = "tracy-hunk", pname[] = "tracy-pool";
    static const char cname[] = "tracy-cache", gname[] = "tracy-gc";
    { /* zone: plain, tagged, freed one by one, by free_tags, by destroy */
        hk_zone_desc d = {0};
        d.name = zname;
        hk_zone *z = hk_zone_create(&d);
        CHECK(z != NULL);
        void *a = hk_zone_alloc(z, 40), *b = hk_zone_alloc(z, 100);
        for (int i = 0; i < 5; i++) (void)hk_zone_alloc_tagged(z, 64, 50, NULL, NULL);
        CHECK(count(1) == 7 && count(0) == 0);
        CHECK(g_ev[0].ptr == a && g_ev[0].size == 40);
        hk_zone_free(z, a);
        CHECK(count(0) == 1 && g_ev[g_nev - 1].ptr == a);
        CHECK(hk_zone_free_tags(z, 50, 50) == 5);
        CHECK(count(0) == 6);
        void *b2 = hk_zone_realloc(z, b, 5000);
        CHECK(b2 != NULL);
        (void)b2;
        (void)hk_zone_alloc(z, 24); /* left for destroy */
        hk_zone_destroy(z);
        CHECK(check_balanced("zone", zname) == 9);
    }
    { /* hunk: a mark ends every block above it */
        hk_hunk_desc d = {0};
        d.name = hname;
        d.size = 1 << 20;
        hk_hunk *h = hk_hunk_create(&d);
        CHECK(h != NULL);
        hk_hunk_mark m = hk_hunk_low_mark(h);
        for (int i = 0; i < 4; i++) (void)hk_hunk_alloc(h, 32, NULL);
        (void)hk_hunk_alloc_high(h, 32, NULL);
        CHECK(count(1) == 5);
        hk_hunk_free_to_low_mark(h, m);
        CHECK(count(0) == 4);
        hk_hunk_destroy(h);
        CHECK(check_balanced("hunk", hname) == 5);
    }
    { /* pool */
        hk_pool_desc d = {0};
        d.name = pname;
        d.elem_size = 24;
        d.capacity = 16;
        hk_pool *p = hk_pool_create(&d);
        CHECK(p != NULL);
        hk_pool_id ids[3];
        for (int i = 0; i < 3; i++) ids[i] = hk_pool_alloc(p, NULL);
        hk_pool_free(p, ids[1], HK_POOL_FREE_SUBTREE);
        CHECK(count(1) == 3 && count(0) == 1);
        hk_pool_destroy(p);
        CHECK(check_balanced("pool", pname) == 3);
    }
    { /* cache: compaction moves blocks (a free and an alloc each) */
        hk_cache_desc d = {0};
        d.name = cname;
        d.size = 1 << 20;
        hk_cache *c = hk_cache_create(&d);
        CHECK(c != NULL);
        hk_cache_handle h[4];
        for (int i = 0; i < 4; i++) h[i] = hk_cache_alloc(c, 100, NULL);
        void *before = hk_cache_deref(c, h[3]);
        hk_cache_free(c, h[0]);
        hk_cache_compact(c);
        CHECK(hk_cache_deref(c, h[3]) != before);
        CHECK(count(0) >= 2); /* the free and at least one move */
        hk_cache_purge(c, h[1]);
        hk_cache_destroy(c);
        CHECK(check_balanced("cache", cname) >= 4);
    }
    { /* gc: a collection ends what it reclaims */
        static const hk_gc_type t = {.name = "t", .size = 32};
        hk_gc_desc d = {0};
        d.name = gname;
        d.flags = HK_GC_IMMEDIATE;
        hk_gc *g = hk_gc_create(&d);
        CHECK(g != NULL);
        hk_gc_obj *o1 = hk_gc_alloc(g, &t), *o2 = hk_gc_alloc(g, &t);
        (void)o2;
        hk_gc_release(g, o1);
        hk_gc_collect(g);
        CHECK(count(1) == 2 && count(0) == 1);
        hk_gc_destroy(g);
        CHECK(check_balanced("gc", gname) == 2);
    }
    { /* guard: blocks freed (into quarantine) and left for destroy */
        static const char uname[] = "tracy-guard";
        hk_guard_desc d = {0};
        d.name = uname;
        hk_guard *g = hk_guard_create(&d);
        CHECK(g != NULL);
        void *a = hk_guard_alloc(g, 100), *b = hk_guard_alloc(g, 200);
        (void)b;
        CHECK(count(1) == 2);
        hk_guard_free(g, a);
        CHECK(count(0) == 1);
        hk_guard_destroy(g);
        CHECK(check_balanced("guard", uname) == 2);
    }
    CHECK(!g_bad);
    if (g_fail) return 1;
    printf("track_tracy: every allocator's events named and balanced\n");
    return 0;
}

/*
 * tests/track_prog.c - small programs, correct and buggy, for each heapkit
 * allocator, run under Valgrind memcheck, AddressSanitizer and heaptrack by
 * tests/track_tools.sh (src/track.h: what each tool hears).
 *
 *   track_prog ALLOCATOR CASE
 *     ALLOCATOR  zone hunk pool cache gc, and guard (count only)
 *     CASE       clean     every block freed, every instance destroyed: no report
 *                uaf       a block freed through the allocator's API, then read
 *                bulk      a block ended by a bulk free (zone free_tags, hunk
 *                          mark, pool clear, cache purge_all, gc collection),
 *                          then read
 *                overflow  bytes written past a block's end (into its slack and
 *                          the neighbour's header or free space)
 *                leak      a block allocated in track_leak_block and never freed
 *                          (the instance outlives main): a leak record whose
 *                          stack holds track_leak_block
 *                uninit    a fresh block's byte decides a branch (memcheck only)
 *                count N   N allocations and frees (heaptrack counts them)
 *
 * The programs exit 0 unless a tool stops them; they print nothing (stdio's
 * buffer would be one more malloc'd block in the leak summary).
 */
#include "heapkit/cache.h"
#include "heapkit/gc.h"
#include "heapkit/guard.h"
#include "heapkit/hunk.h"
#include "heapkit/pool.h"
#include "heapkit/zone.h"

#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define TP_NOINLINE __attribute__((noinline))
#else
#define TP_NOINLINE
#endif

/* Keeps the compiler from dropping reads and writes the tools must see. */
static volatile unsigned char g_sink;
static void *volatile g_keep; /* the instance outlives main (leak cases) */
static unsigned char g_sink_buf;

static TP_NOINLINE void touch_read(const void *p, size_t off) {
    g_sink = ((const volatile unsigned char *)p)[off];
}
static TP_NOINLINE void touch_write(void *p, size_t from, size_t n) {
    for (size_t i = 0; i < n; i++) ((volatile unsigned char *)p)[from + i] = 0x5a;
}
static TP_NOINLINE int touch_branch(const void *p) {
    if (((const unsigned char *)p)[3] == 0x77) { /* uninitialised: memcheck's conditional jump */
        touch_write(&g_sink_buf, 0, 1);
        return 1;
    }
    return 0;
}

enum { C_CLEAN, C_UAF, C_OVERFLOW, C_LEAK, C_UNINIT, C_COUNT, C_BULK };

/* ---- zone ----------------------------------------------------------------- */

static TP_NOINLINE void track_leak_block(void *(*fn)(void *, size_t), void *inst, size_t n) {
    void *p = fn(inst, n);
    touch_write(p, 0, n);
}

static void *zone_alloc_fn(void *z, size_t n) { return hk_zone_alloc((hk_zone *)z, n); }

static int run_zone(int c, long count) {
    hk_zone_desc d;
    memset(&d, 0, sizeof d);
    d.name = "track-zone";
    d.size = 1u << 20;
    hk_zone *z = hk_zone_create(&d);
    if (!z) return 2;
    unsigned char *a = hk_zone_alloc(z, 40), *b = hk_zone_alloc(z, 40);
    /* tagged blocks too, ended by free_tags (a bulk free) */
    void *t1 = hk_zone_alloc_tagged(z, 64, 50, NULL, "tagged");
    (void)t1;
    touch_write(a, 0, 40);
    touch_write(b, 0, 40);
    switch (c) {
    case C_UAF:
        hk_zone_free(z, a);
        touch_read(a, 8);
        break;
    case C_BULK: {
        unsigned char *t2 = hk_zone_alloc_tagged(z, 32, 51, NULL, NULL);
        hk_zone_free_tags(z, 51, 51);
        touch_read(t2, 24); /* past the free list's links, which ASan cannot watch */
        break;
    }
    case C_OVERFLOW: {
        /* 36 bytes: under ASan the zone poisons the slack of a block, not
         * the next header (a request that fills its slot exactly, 40 bytes
         * here, overflows into a header ASan does not watch; memcheck sees
         * both) */
        unsigned char *o = hk_zone_alloc(z, 36);
        touch_write(o, 36, 24);
        break;
    }
    case C_UNINIT: {
        unsigned char *u = hk_zone_alloc(z, 16);
        g_sink = (unsigned char)touch_branch(u);
        hk_zone_free(z, u);
        break;
    }
    case C_LEAK:
        track_leak_block(zone_alloc_fn, z, 72);
        g_keep = z;
        return 0;
    case C_COUNT:
        for (long i = 0; i < count; i++) {
            void *p = hk_zone_alloc(z, (size_t)(16 + i % 200));
            hk_zone_free(z, p);
        }
        break;
    default: break;
    }
    if (c != C_UAF) hk_zone_free(z, a);
    hk_zone_free(z, b);
    hk_zone_free_tags(z, 50, 50);
    hk_zone_destroy(z);
    return 0;
}

/* ---- hunk ------------------------------------------------------------------ */

static void *hunk_alloc_fn(void *h, size_t n) { return hk_hunk_alloc((hk_hunk *)h, n, "leaked"); }

static int run_hunk(int c, long count) {
    hk_hunk_desc d;
    memset(&d, 0, sizeof d);
    d.name = "track-hunk";
    d.size = 1u << 20;
    hk_hunk *h = hk_hunk_create(&d);
    if (!h) return 2;
    hk_hunk_mark m = hk_hunk_low_mark(h);
    unsigned char *a = hk_hunk_alloc(h, 40, "a"), *b = hk_hunk_alloc(h, 40, "b");
    touch_write(a, 0, 40);
    touch_write(b, 0, 40);
    switch (c) {
    case C_UAF: {
        unsigned char *t = hk_hunk_alloc_temp(h, 40);
        hk_hunk_free_temp(h);
        touch_read(t, 8);
        break;
    }
    case C_BULK:
        hk_hunk_free_to_low_mark(h, m);
        touch_read(b, 8);
        break;
    case C_OVERFLOW: touch_write(a, 40, 24); break;
    case C_UNINIT: {
        unsigned char *u = hk_hunk_alloc(h, 16, "u");
        g_sink = (unsigned char)touch_branch(u);
        break;
    }
    case C_LEAK:
        track_leak_block(hunk_alloc_fn, h, 72);
        g_keep = h;
        return 0;
    case C_COUNT:
        for (long i = 0; i < count; i++) {
            hk_hunk_mark mm = hk_hunk_low_mark(h);
            (void)hk_hunk_alloc(h, (size_t)(16 + i % 200), NULL);
            hk_hunk_free_to_low_mark(h, mm);
        }
        break;
    default: break;
    }
    hk_hunk_free_to_low_mark(h, m);
    hk_hunk_destroy(h);
    return 0;
}

/* ---- pool ------------------------------------------------------------------ */

static void *pool_alloc_fn(void *p, size_t n) {
    (void)n;
    void *o = NULL;
    (void)hk_pool_alloc((hk_pool *)p, &o);
    return o;
}

static int run_pool(int c, long count) {
    hk_pool_desc d;
    memset(&d, 0, sizeof d);
    d.name = "track-pool";
    d.elem_size = 40;
    d.capacity = 64;
    hk_pool *p = hk_pool_create(&d);
    if (!p) return 2;
    unsigned char *a = NULL, *b = NULL;
    hk_pool_id ia = hk_pool_alloc(p, (void **)&a), ib = hk_pool_alloc(p, (void **)&b);
    touch_write(a, 0, 40);
    touch_write(b, 0, 40);
    switch (c) {
    case C_UAF:
        hk_pool_free(p, ia, HK_POOL_FREE_SUBTREE);
        touch_read(a, 8);
        break;
    case C_BULK:
        hk_pool_clear(p);
        touch_read(b, 8);
        hk_pool_destroy(p);
        return 0;
    case C_OVERFLOW: touch_write(b, 40, 24); break; /* b's slack, then the next (free) slot */
    case C_UNINIT: {
        unsigned char *u = NULL;
        hk_pool_id iu = hk_pool_alloc(p, (void **)&u);
        g_sink = (unsigned char)touch_branch(u);
        hk_pool_free(p, iu, HK_POOL_FREE_SUBTREE);
        break;
    }
    case C_LEAK:
        track_leak_block(pool_alloc_fn, p, 40);
        g_keep = p;
        return 0;
    case C_COUNT:
        for (long i = 0; i < count; i++) {
            void *o;
            hk_pool_id id = hk_pool_alloc(p, &o);
            hk_pool_free(p, id, HK_POOL_FREE_SUBTREE);
        }
        break;
    default: break;
    }
    if (c != C_UAF) hk_pool_free(p, ia, HK_POOL_FREE_SUBTREE);
    hk_pool_free(p, ib, HK_POOL_FREE_SUBTREE);
    hk_pool_destroy(p);
    return 0;
}

/* ---- cache ----------------------------------------------------------------- */

static void *cache_alloc_fn(void *c, size_t n) {
    hk_cache_handle h = hk_cache_alloc((hk_cache *)c, n, "leaked");
    return hk_cache_deref((hk_cache *)c, h);
}

static int run_cache(int c, long count) {
    hk_cache_desc d;
    memset(&d, 0, sizeof d);
    d.name = "track-cache";
    d.size = 1u << 20;
    hk_cache *k = hk_cache_create(&d);
    if (!k) return 2;
    hk_cache_handle ha = hk_cache_alloc(k, 40, "a"), hb = hk_cache_alloc(k, 40, "b");
    hk_cache_handle hc = hk_cache_alloc(k, 40, "c");
    unsigned char *a = hk_cache_deref(k, ha);
    touch_write(a, 0, 40);
    touch_write(hk_cache_deref(k, hb), 0, 40);
    touch_write(hk_cache_deref(k, hc), 0, 40);
    switch (c) {
    case C_UAF: {
        /* compaction moves c down over a's old place: the old address of c
         * is no block any more */
        unsigned char *old_c = hk_cache_deref(k, hc);
        hk_cache_free(k, ha);
        hk_cache_free(k, hb);
        hk_cache_compact(k);
        if (hk_cache_deref(k, hc) == old_c) return 3; /* nothing moved: the case proves nothing */
        touch_read(old_c, 39);
        hk_cache_free(k, hc);
        hk_cache_destroy(k);
        return 0;
    }
    case C_BULK:
        hk_cache_set_purgeable(k, ha, true);
        hk_cache_set_purgeable(k, hb, true);
        hk_cache_set_purgeable(k, hc, true);
        if (hk_cache_purge_all(k) != 3) return 3; /* every block purged, or the case proves nothing */
        touch_read(a, 39);                        /* past the free list's links, which ASan cannot watch */
        hk_cache_free(k, ha);
        hk_cache_free(k, hb);
        hk_cache_free(k, hc);
        hk_cache_destroy(k);
        return 0;
    case C_OVERFLOW: touch_write(a, 40, 24); break;
    case C_UNINIT: {
        hk_cache_handle hu = hk_cache_alloc(k, 16, "u");
        g_sink = (unsigned char)touch_branch(hk_cache_deref(k, hu));
        hk_cache_free(k, hu);
        break;
    }
    case C_LEAK:
        track_leak_block(cache_alloc_fn, k, 72);
        g_keep = k;
        return 0;
    case C_COUNT:
        for (long i = 0; i < count; i++) {
            hk_cache_handle h = hk_cache_alloc(k, (size_t)(16 + i % 200), NULL);
            hk_cache_free(k, h);
        }
        break;
    default: break;
    }
    hk_cache_free(k, ha);
    hk_cache_compact(k); /* moves b and c: the tools follow */
    touch_read(hk_cache_deref(k, hb), 39);
    hk_cache_free(k, hb);
    hk_cache_free(k, hc);
    hk_cache_destroy(k);
    return 0;
}

/* ---- gc -------------------------------------------------------------------- */

static const hk_gc_type g_type = {.name = "blob", .size = 40};

static void *gc_alloc_fn(void *g, size_t n) {
    hk_gc_obj *o = hk_gc_alloc_size((hk_gc *)g, &g_type, n);
    return hk_gc_data((hk_gc *)g, o);
}

static int run_gc(int c, long count) {
    hk_gc_desc d;
    memset(&d, 0, sizeof d);
    d.name = "track-gc";
    d.flags = HK_GC_IMMEDIATE;
    hk_gc *g = hk_gc_create(&d);
    if (!g) return 2;
    hk_gc_obj *oa = hk_gc_alloc(g, &g_type), *ob = hk_gc_alloc(g, &g_type);
    unsigned char *a = hk_gc_data(g, oa);
    touch_write(a, 0, 40);
    switch (c) {
    case C_UAF:
        hk_gc_release(g, oa); /* the last reference: freed at once (HK_GC_IMMEDIATE) */
        touch_read(a, 8);
        break;
    case C_BULK:
        hk_gc_set_incremental(g, true); /* a release only queues the object */
        hk_gc_release(g, oa);
        hk_gc_collect(g); /* the collection frees it */
        touch_read(a, 8);
        break;
    case C_OVERFLOW: touch_write(a, 40, 24); break;
    case C_UNINIT: break; /* gc data are zeroed: nothing to read uninitialised */
    case C_LEAK:
        track_leak_block(gc_alloc_fn, g, 72);
        g_keep = g;
        return 0;
    case C_COUNT:
        for (long i = 0; i < count; i++) {
            hk_gc_obj *o = hk_gc_alloc_size(g, &g_type, (size_t)(16 + i % 200));
            hk_gc_release(g, o);
        }
        hk_gc_collect(g);
        break;
    default: break;
    }
    if (c != C_UAF && c != C_BULK) hk_gc_release(g, oa);
    hk_gc_release(g, ob);
    hk_gc_collect(g);
    hk_gc_destroy(g);
    return 0;
}

/* ---- guard (count only: heaptrack) ----------------------------------------- */

static int run_guard(int c, long count) {
    if (c != C_COUNT) return 2;
    hk_guard_desc d;
    memset(&d, 0, sizeof d);
    d.name = "track-guard";
    hk_guard *g = hk_guard_create(&d);
    if (!g) return 2;
    for (long i = 0; i < count; i++) {
        void *p = hk_guard_alloc(g, (size_t)(16 + i % 200));
        touch_write(p, 0, 16);
        hk_guard_free(g, p);
    }
    hk_guard_destroy(g);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    static const char *const cases[] = {"clean", "uaf", "overflow", "leak", "uninit", "count", "bulk"};
    int c = -1;
    for (int i = 0; i < 7; i++)
        if (strcmp(argv[2], cases[i]) == 0) c = i;
    if (c < 0) return 2;
    long count = argc > 3 ? strtol(argv[3], NULL, 10) : 0;
    if (strcmp(argv[1], "zone") == 0) return run_zone(c, count);
    if (strcmp(argv[1], "hunk") == 0) return run_hunk(c, count);
    if (strcmp(argv[1], "pool") == 0) return run_pool(c, count);
    if (strcmp(argv[1], "cache") == 0) return run_cache(c, count);
    if (strcmp(argv[1], "gc") == 0) return run_gc(c, count);
    if (strcmp(argv[1], "guard") == 0) return run_guard(c, count);
    return 2;
}

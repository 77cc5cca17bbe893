/*
 * bench/bounds_zone.c - the zone's worst paths (docs/realtime.md), on the
 * zone as a frame uses it: one region of the heap's size from the OS, no
 * growth, no decay by time (decay_ms < 0), small blocks in runs.
 *
 * The heap is filled to 3/4 with blocks of 16 B - 64 KiB (log-uniform,
 * seeded; one byte written per block), then every other block is freed:
 * free lists of every class hold blocks, runs are half full. Counted on
 * that heap: a churn of random frees and allocations (every size class,
 * runs refilled and emptied), frees that merge with both neighbours,
 * realloc in place and moving (the copy: units are bytes copied), aligned
 * and tagged allocations, change_tag, free_tags (units: blocks freed). A
 * second zone, full of purgeable blocks, counts an allocation that must
 * purge (units: blocks purged) and hk_zone_purge; a third, growing, counts
 * the allocation that grows the zone from the OS and hk_zone_trim, which
 * gives pages back (their own lines: the system call is their bound).
 *
 * Invariants: deterministic for the scale (no clock: decay is off); every
 * zone passes check before it is destroyed.
 */
#include "bounds.h"

#include "heapkit/zone.h"

#include <stdbool.h>
#include <string.h>

enum { CHURN = 1500, REPS = 8 };

static size_t rnd_size(uint64_t *r) {
    /* log-uniform in [16, 65536): a uniform exponent of two plus a uniform
     * fraction of that octave */
    unsigned oct = (unsigned)(bd_rand(r) % 12u); /* 2^4 .. 2^15 */
    size_t lo = (size_t)16 << oct;
    return lo + (size_t)(bd_rand(r) % lo);
}

static hk_zone *zone_make(size_t size, size_t grow) {
    hk_zone_desc d;
    memset(&d, 0, sizeof d);
    d.size = size;
    d.grow_size = grow;
    d.decay_ms = -1;
    d.flags = HK_FLAG_QUIET;
    d.name = "bounds";
    hk_zone *z = hk_zone_create(&d);
    BD_REQUIRE(z);
    return z;
}

static void zone_main(int scale) {
    size_t heap = bd_heap(scale);
    hk_zone *z = zone_make(heap, 0);
    size_t cap = heap / 2000 + 4096, nb = 0, live = 0;
    void **blk = calloc(cap, sizeof *blk);
    BD_REQUIRE(blk);
    uint64_t r = 0x5EED0000u + (uint64_t)scale;
    int misses = 0;
    while (live < heap - heap / 4 && nb < cap && misses < 64) {
        size_t n = rnd_size(&r);
        blk[nb] = hk_zone_alloc(z, n);
        if (!blk[nb]) {
            misses++;
            continue;
        }
        ((char *)blk[nb++])[0] = 1;
        live += n;
    }
    BD_REQUIRE(nb > 64);
    for (size_t i = 0; i < nb; i += 2) {
        hk_zone_free(z, blk[i]);
        blk[i] = NULL;
    }
    char lbl[160];
    void *p = NULL;
    ICOUNT_ON();
    /* churn: a random slot freed (when live) or refilled */
    for (int i = 0; i < CHURN; i++) {
        size_t j = (size_t)(bd_rand(&r) % nb);
        if (blk[j]) {
            ICOUNT(hkb_label(lbl, "zone.free", "churn over a fragmented heap", 0), hk_zone_free(z, blk[j]));
            blk[j] = NULL;
        } else {
            size_t n = rnd_size(&r);
            hk_zone_info ia, ib;
            BD_REQUIRE(hk_zone_get_info(z, &ia) == HK_OK);
            ICOUNT(hkb_label(lbl, "zone.alloc", "churn over a fragmented heap", 0), p = hk_zone_alloc(z, n));
            BD_REQUIRE(hk_zone_get_info(z, &ib) == HK_OK);
            /* a small block's class had no free slot left: a new run */
            if (p && ib.runs_made > ia.runs_made)
                ICOUNT_RELABEL(lbl, "zone.alloc",
                               "small block: a new run (a granule; its commit is the OS's)", 0);
            if (!p) { /* the heap is 3/4 full: a large request may not fit */
                ICOUNT_RELABEL(lbl, "zone.alloc", "fails: no fit (purge tried)", 0);
                continue;
            }
            ((char *)p)[0] = 1;
            blk[j] = p;
        }
    }
    /* room for the sections below, also in the 1 MiB heap */
    ICOUNT_OFF();
    for (size_t j = 0; j < nb; j++)
        if (blk[j] && j % 4 == 1) {
            hk_zone_free(z, blk[j]);
            blk[j] = NULL;
        }
    ICOUNT_ON();
    /* a free that merges with both neighbours (large blocks: TLSF) */
    for (int i = 0; i < REPS; i++) {
        void *a = hk_zone_alloc(z, 17000), *b = hk_zone_alloc(z, 17000), *c = hk_zone_alloc(z, 17000);
        BD_REQUIRE(a && b && c);
        hk_zone_free(z, a);
        hk_zone_free(z, c);
        BD_COUNT("zone.free", "merge with both free neighbours", 0, hk_zone_free(z, b));
    }
    /* realloc: in place, and moving (the copy) */
    for (int i = 0; i < REPS; i++) {
        void *a = hk_zone_alloc(z, 30000);
        BD_REQUIRE(a);
        BD_COUNT("zone.realloc", "shrink in place", 0, p = hk_zone_realloc(z, a, 20000));
        BD_REQUIRE(p == a);
        BD_COUNT("zone.realloc", "grow in place (next block free)", 0, p = hk_zone_realloc(z, a, 30000));
        BD_REQUIRE(p);
        void *guard = hk_zone_alloc(z, 30000);
        BD_REQUIRE(guard);
        memset(p, 1, 30000);
        size_t before = hk_zone_usable_size(z, p);
        BD_COUNT("zone.realloc", "move: bytes copied", before, p = hk_zone_realloc(z, p, 40000));
        BD_REQUIRE(p);
        hk_zone_free(z, p);
        hk_zone_free(z, guard);
    }
    for (int i = 0; i < REPS; i++) {
        BD_COUNT("zone.alloc_aligned", "align 4096 (split before and after)", 0,
                 p = hk_zone_alloc_aligned(z, 4096, 5000));
        BD_REQUIRE(p);
        BD_COUNT("zone.free", "aligned block", 0, hk_zone_free(z, p));
    }
    /* the small queries, and calloc (its zeroing: units are bytes) */
    for (int i = 0; i < REPS; i++) {
        size_t u = 0;
        int t = 0;
        bool own = false;
        BD_COUNT("zone.calloc", "zeroed block (units: bytes)", 4000, p = hk_zone_calloc(z, 100, 40));
        BD_REQUIRE(p);
        BD_COUNT("zone.usable_size", "any block", 0, u = hk_zone_usable_size(z, p));
        BD_COUNT("zone.owns", "one region", 0, own = hk_zone_owns(z, p));
        BD_COUNT("zone.tag", "any block", 0, t = hk_zone_tag(z, p));
        BD_REQUIRE(u >= 4000 && own && t == HK_TAG_STATIC);
        hk_zone_free(z, p);
    }
    /* tagged blocks: allocation with an owner, change_tag, free_tags */
    static void *owners[64];
    for (int i = 0; i < 64; i++) {
        BD_COUNT("zone.alloc_tagged", "tracked block with owner and name", 0,
                 p = hk_zone_alloc_tagged(z, 100 + (size_t)i * 37, HK_TAG_LEVEL, &owners[i], "lvl"));
        BD_REQUIRE(p);
        if (i % 8 == 0)
            BD_COUNT("zone.change_tag", "to a purgeable tag (lists moved)", 0,
                     (void)hk_zone_change_tag(z, p, HK_TAG_CACHE));
        if (i % 8 == 0) BD_REQUIRE(hk_zone_change_tag(z, p, HK_TAG_LEVEL) == HK_OK);
    }
    size_t freed = 0;
    BD_COUNT("zone.free_tags", "per block freed (64 tracked blocks of one tag)", 64,
             freed = hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_LEVEL));
    BD_REQUIRE(freed == 64);
    ICOUNT_OFF();
    BD_REQUIRE(hk_zone_check(z) == HK_OK);
    hk_zone_destroy(z);
    free(blk);
}

/* A zone full of purgeable blocks: allocations that must purge first. */
static void zone_purge(int scale) {
    size_t heap = bd_heap(scale);
    hk_zone *z = zone_make(heap, 0);
    size_t nb = heap / (64 << 10) + 64;
    void **own = calloc(nb, sizeof *own);
    BD_REQUIRE(own);
    size_t n = 0;
    while (n < nb && hk_zone_alloc_tagged(z, (64 << 10) - 64, HK_TAG_CACHE, &own[n], "cache")) n++;
    BD_REQUIRE(n > 8);
    void *p = NULL;
    ICOUNT_ON();
    char lbl[160];
    for (int i = 0; i < REPS; i++) {
        hk_zone_info a, b;
        BD_REQUIRE(hk_zone_get_info(z, &a) == HK_OK);
        ICOUNT("zone.alloc|?|0", p = hk_zone_alloc_tagged(z, 256 << 10, HK_TAG_STATIC, NULL, NULL));
        BD_REQUIRE(hk_zone_get_info(z, &b) == HK_OK);
        ICOUNT_RELABEL(lbl, "zone.alloc", "heap full: oldest purgeable blocks purged (units: blocks purged)",
                       b.purge_count - a.purge_count);
        BD_REQUIRE(p);
        hk_zone_free(z, p);
    }
    size_t purged = 0, left = 0;
    for (size_t k = 0; k < n; k++) left += own[k] != NULL;
    BD_COUNT("zone.purge", "every purgeable block (units: blocks purged)", left,
             purged = hk_zone_purge(z, HK_TAG_PURGELEVEL));
    BD_REQUIRE(purged == left);
    ICOUNT_OFF();
    BD_REQUIRE(hk_zone_check(z) == HK_OK);
    hk_zone_destroy(z);
    free(own);
}

/* A growing zone: the allocation that takes memory from the OS, and the
 * trim that gives it back (their own lines; the system call is their bound). */
static void zone_os(int scale) {
    (void)scale;
    hk_zone *z = zone_make((size_t)1 << 20, (size_t)1 << 20);
    enum { N = 80 };
    void *blk[N];
    char lbl[160];
    ICOUNT_ON();
    for (int i = 0; i < N; i++) {
        hk_zone_info a, b;
        BD_REQUIRE(hk_zone_get_info(z, &a) == HK_OK);
        ICOUNT("zone.alloc|?|0", blk[i] = hk_zone_alloc(z, 60000));
        BD_REQUIRE(blk[i] && hk_zone_get_info(z, &b) == HK_OK);
        if (b.grow_count != a.grow_count)
            ICOUNT_RELABEL(lbl, "zone.alloc", "OS growth: commits a chunk (plus mmap/mprotect)", 0);
        else
            ICOUNT_RELABEL(lbl, "zone.alloc", "growing zone, no growth", 0);
    }
    for (int i = 0; i < N; i += 2) hk_zone_free(z, blk[i]);
    size_t back = 0;
    BD_COUNT("zone.trim", "gives free pages back (plus one madvise per range)", 0, back = hk_zone_trim(z));
    ICOUNT_OFF();
    BD_REQUIRE(back > 0);
    for (int i = 1; i < N; i += 2) hk_zone_free(z, blk[i]);
    BD_REQUIRE(hk_zone_check(z) == HK_OK);
    hk_zone_destroy(z);
}

void bd_zone(int scale) {
    zone_main(scale);
    zone_purge(scale);
    zone_os(scale);
}

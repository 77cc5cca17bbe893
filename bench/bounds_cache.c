/*
 * bench/bounds_cache.c - the cache's worst paths (docs/realtime.md).
 *
 * The region (the heap size) is filled to 7/8 with blocks of 256 B - 64 KiB
 * (log-uniform octaves, seeded), then every other block is freed: a
 * fragmented region whose free lists hold blocks of every class. Counted on
 * it: allocations that fit and frees that merge (churn), deref (out of line,
 * inline on an epoch miss, through a reader), lock/unlock, touch,
 * set_purgeable, purge, resize in place; then the incremental compaction
 * with a 64 KiB budget, on the fragmented region and on a region where
 * locked blocks alternate with holes (nothing can move: the step must still
 * stop within its budget); then the allocation that finds no free block
 * large enough and compacts the whole region (units: bytes moved; O(region)
 * by design: a frame keeps it away with compact_step), and one that must
 * purge (units: blocks purged); last the fit's two dearest O(1) paths, each
 * on a region laid out for it (cache_fit_case). The blocks' bytes are never
 * touched beyond their headers and canaries.
 *
 * Invariants: deterministic for the scale; every cache passes check before
 * it is destroyed.
 */
#include "bounds.h"

#include "cache_internal.h" /* CACHE_SCAN_LIMIT */
#include "heapkit/cache.h"

#include <stdbool.h>
#include <string.h>

enum { CHURN = 1000, REPS = 8, BUDGET = 64 << 10 };

static size_t cache_rnd(uint64_t *r) {
    unsigned oct = (unsigned)(bd_rand(r) % 8u); /* 256 B .. 64 KiB */
    size_t lo = (size_t)256 << oct;
    return lo + (size_t)(bd_rand(r) % lo);
}

/* The LRU clock's epoch (heapkit/detail/cache.h): it drops back to 1 when
 * the epochs run out, and that call makes every hot entry cold. */
static uint32_t cache_epoch(hk_cache *c) { return ((const hk__cache_view *)(const void *)c)->epoch; }

static hk_cache *cache_make(size_t heap) {
    hk_cache *c = hk_cache_create(&(hk_cache_desc){.size = heap, .flags = HK_FLAG_QUIET, .name = "bounds"});
    BD_REQUIRE(c);
    return c;
}

/* Fills 7/8 of the region; returns the handles (count in *n). */
static hk_cache_handle *cache_fill(hk_cache *c, size_t heap, uint64_t *r, size_t *n) {
    size_t cap = heap / 256 + 64, k = 0, live = 0;
    hk_cache_handle *h = calloc(cap, sizeof *h);
    BD_REQUIRE(h);
    while (live < heap - heap / 8 && k < cap) {
        size_t sz = cache_rnd(r);
        hk_cache_handle x = hk_cache_alloc(c, sz, "fill");
        if (!x.value) break;
        h[k++] = x;
        live += sz + 64;
    }
    *n = k;
    return h;
}

static void cache_main(int scale) {
    size_t heap = bd_heap(scale), n = 0;
    uint64_t r = 0xCAC4E000u + (uint64_t)scale;
    hk_cache *c = cache_make(heap);
    hk_cache_handle *h = cache_fill(c, heap, &r, &n);
    BD_REQUIRE(n > 32);
    for (size_t i = 0; i < n; i += 2) {
        BD_REQUIRE(hk_cache_free(c, h[i]) == HK_OK);
        h[i].value = 0;
    }
    char lbl[160];
    void *p = NULL;
    hk_cache_info a, b;
    ICOUNT_ON();
    for (int i = 0; i < CHURN; i++) {
        size_t j = (size_t)(bd_rand(&r) % n);
        if (h[j].value) {
            ICOUNT(hkb_label(lbl, "cache.free", "churn: merges with free neighbours", 0),
                   (void)hk_cache_free(c, h[j]));
            h[j].value = 0;
        } else {
            size_t sz = cache_rnd(&r) / 2; /* fits a hole: the fit path */
            BD_REQUIRE(hk_cache_get_info(c, &a) == HK_OK);
            ICOUNT(hkb_label(lbl, "cache.alloc", "churn: a free block fits", 0),
                   h[j] = hk_cache_alloc(c, sz, "churn"));
            BD_REQUIRE(hk_cache_get_info(c, &b) == HK_OK);
            if (b.moved_bytes != a.moved_bytes || b.purge_count != a.purge_count)
                ICOUNT_RELABEL(lbl, "cache.alloc", "churn: compacted or purged",
                               b.moved_bytes - a.moved_bytes);
        }
    }
    /* the O(1) calls on live blocks */
    size_t live[REPS], nl = 0;
    for (size_t j = 1; j < n && nl < REPS; j += 2)
        if (h[j].value) live[nl++] = j;
    BD_REQUIRE(nl == REPS);
    for (int i = 0; i < REPS; i++) {
        hk_cache_handle x = h[live[i]];
        /* purgeable: every use moves it on the purge list (the dearer path) */
        ICOUNT_OFF();
        BD_REQUIRE(hk_cache_set_purgeable(c, x, true) == HK_OK);
        (void)hk_cache_alloc(c, 0, NULL).value; /* another block is the newest */
        ICOUNT_ON();
        BD_COUNT("cache.deref", "live purgeable block (to the end of the purge list)", 0,
                 p = hk_cache_deref(c, x));
        BD_REQUIRE(p);
        hk_cache_reader rd = hk_cache_reader_of(c);
        (void)hk_cache_alloc(c, 0, NULL).value; /* advances the clock: the next inline deref misses */
        BD_COUNT("cache.deref_fast",
                 "epoch miss: the block stamped out of line (purgeable: moved on the list)", 0,
                 p = hk_cache_deref_fast(c, x));
        BD_COUNT("cache.deref_fast", "hit", 0, p = hk_cache_deref_fast(c, x));
        BD_COUNT("cache.reader_deref", "epoch miss", 0, p = hk_cache_reader_deref(&rd, x));
        BD_COUNT("cache.lock", "purgeable block (off the purge list)", 0, (void)hk_cache_lock(c, x));
        BD_COUNT("cache.unlock", "last lock of a purgeable block (back on the purge list, stamped)", 0,
                 (void)hk_cache_unlock(c, x));
        (void)hk_cache_alloc(c, 0, NULL).value;
        BD_COUNT("cache.touch", "purgeable block (to the end of the purge list)", 0,
                 (void)hk_cache_touch(c, x));
        BD_COUNT("cache.set_purgeable", "off (off the purge list)", 0,
                 (void)hk_cache_set_purgeable(c, x, false));
        BD_COUNT("cache.set_purgeable", "on (onto the purge list, stamped)", 0,
                 (void)hk_cache_set_purgeable(c, x, true));
        size_t sz = hk_cache_size(c, x);
        BD_COUNT("cache.resize", "shrink in place: the dropped bytes become canary (units: bytes)",
                 sz - sz / 2, (void)hk_cache_resize(c, x, sz / 2));
        BD_COUNT("cache.resize", "grow in place (next block free)", 0, (void)hk_cache_resize(c, x, sz));
        BD_COUNT("cache.purge", "live purgeable block", 0, (void)hk_cache_purge(c, x));
        BD_COUNT("cache.reallocate", "refill a purged purgeable handle: a fit", 0,
                 (void)hk_cache_reallocate(c, x, sz / 2));
        ICOUNT_OFF();
        BD_REQUIRE(hk_cache_set_purgeable(c, x, false) == HK_OK);
        ICOUNT_ON();
    }
    /* queries, and move_high: it looks for the highest free block above the
     * block that holds it (units: blocks of the region) */
    {
        hk_stats st0 = {.size = sizeof st0};
        BD_REQUIRE(hk_cache_stats(c, &st0) == HK_OK);
        for (int i = 0; i < 4; i++) {
            hk_cache_handle x = h[live[i]];
            size_t sz = 0;
            bool pg = false;
            uint32_t lc = 0;
            BD_COUNT("cache.size", "live block", 0, sz = hk_cache_size(c, x));
            BD_COUNT("cache.is_purged", "live block", 0, pg = hk_cache_is_purged(c, x));
            BD_COUNT("cache.lock_count", "live block", 0, lc = hk_cache_lock_count(c, x));
            BD_REQUIRE(sz && !pg && !lc);
            BD_COUNT("cache.move_high", "the region's blocks scanned (units: blocks)",
                     st0.live_blocks + st0.free_blocks, (void)hk_cache_move_high(c, x));
            BD_COUNT("cache.lock_high", "the region's blocks scanned (units: blocks)",
                     st0.live_blocks + st0.free_blocks, (void)hk_cache_lock_high(c, x));
            BD_REQUIRE(hk_cache_unlock(c, x) == HK_OK);
        }
    }
    /* touch advances the LRU clock: drive it to the end of the epochs, then
     * count the touch after which they start again at 1 (the sweep bounds it) */
    {
        hk_cache_handle x = h[live[0]];
        ICOUNT_OFF();
        uint32_t guard = 0;
        while (cache_epoch(c) != ((const hk__cache_view *)(const void *)c)->epoch_max)
            BD_REQUIRE(hk_cache_touch(c, x) == HK_OK && ++guard < (1u << 26));
        BD_REQUIRE(hk_cache_get_info(c, &a) == HK_OK);
        ICOUNT_ON();
        BD_COUNT("cache.touch", "LRU epochs ran out: they start again at 1 (2 hot entries swept)", 0,
                 (void)hk_cache_touch(c, x));
        BD_REQUIRE(cache_epoch(c) == 1);
    }
    /* incremental compaction of the fragmented region */
    for (int i = 0; i < 16; i++) {
        size_t moved = 0;
        int more = 0;
        ICOUNT(hkb_label(lbl, "cache.compact_step", "fragmented region: blocks slid (units: budget bytes)",
                         BUDGET),
               more = hk_cache_compact_step(c, BUDGET, 0, &moved));
        if (!more) break;
    }
    /* an allocation that fits nowhere: compacts the whole region */
    ICOUNT_OFF();
    for (size_t j = 0; j < n; j++)
        if (h[j].value && j % 3 == 0) {
            hk_cache_free(c, h[j]);
            h[j].value = 0;
        }
    hk_stats st = {.size = sizeof st};
    BD_REQUIRE(hk_cache_stats(c, &st) == HK_OK);
    size_t big = st.largest_free + 4096;
    BD_REQUIRE(st.free > big);
    BD_REQUIRE(hk_cache_get_info(c, &a) == HK_OK);
    ICOUNT_ON();
    hk_cache_handle x;
    ICOUNT("cache.alloc|?|0", x = hk_cache_alloc(c, big, "big"));
    BD_REQUIRE(x.value && hk_cache_get_info(c, &b) == HK_OK);
    ICOUNT_RELABEL(lbl, "cache.alloc", "no free block fits: the whole region compacted (units: bytes moved)",
                   b.moved_bytes - a.moved_bytes);
    ICOUNT_OFF();
    BD_REQUIRE(hk_cache_check(c) == HK_OK);
    hk_cache_destroy(c);
    free(h);
}

/* Locked blocks alternating with holes: a compaction step finds nothing it
 * can move, and must still stop within its budget. */
static void cache_locked(int scale) {
    size_t heap = bd_heap(scale), n = 0;
    uint64_t r = 0x10CCu + (uint64_t)scale;
    hk_cache *c = cache_make(heap);
    size_t cap = heap / 4096 + 64;
    hk_cache_handle *h = calloc(cap, sizeof *h);
    BD_REQUIRE(h);
    while (n < cap) {
        hk_cache_handle x = hk_cache_alloc(c, 4096 - 64, "fill");
        if (!x.value) break;
        h[n++] = x;
    }
    (void)r;
    for (size_t i = 0; i < n; i++) {
        if (i % 2 == 0)
            BD_REQUIRE(hk_cache_lock(c, h[i]) == HK_OK);
        else
            BD_REQUIRE(hk_cache_free(c, h[i]) == HK_OK);
    }
    char lbl[160];
    ICOUNT_ON();
    for (int i = 0; i < 4; i++) {
        size_t moved = 0;
        int more = 0;
        ICOUNT(hkb_label(lbl, "cache.compact_step",
                         "locked blocks between holes: nothing movable (units: budget bytes)", BUDGET),
               more = hk_cache_compact_step(c, BUDGET, 0, &moved));
        if (!more) break;
    }
    ICOUNT_OFF();
    BD_REQUIRE(hk_cache_check(c) == HK_OK);
    hk_cache_destroy(c);
    free(h);
}

/* A region full to the last bytes, every block purgeable in address
 * order (the oldest lowest): an allocation of 1/16 of the heap purges the
 * oldest blocks from the purge list's head until their run holds it, with
 * no compaction (units: blocks purged). Four in a row, each kept: the next
 * one purges the run above the last. */
static void cache_purge(int scale) {
    size_t heap = bd_heap(scale), n = 0;
    uint64_t r = 0x9E7u + (uint64_t)scale;
    hk_cache *c = cache_make(heap);
    size_t cap = heap / 256 + 64;
    hk_cache_handle *h = calloc(cap, sizeof *h);
    BD_REQUIRE(h);
    while (n < cap) {
        hk_cache_handle x = hk_cache_alloc(c, cache_rnd(&r), "fill");
        if (!x.value) break;
        h[n++] = x;
    }
    hk_stats st = {.size = sizeof st};
    BD_REQUIRE(hk_cache_stats(c, &st) == HK_OK);
    if (st.largest_free >= 64 && n < cap) h[n++] = hk_cache_alloc(c, st.largest_free - 24, "last");
    BD_REQUIRE(hk_cache_stats(c, &st) == HK_OK && st.free < 64);
    for (size_t i = 0; i < n; i++) BD_REQUIRE(hk_cache_set_purgeable(c, h[i], true) == HK_OK);
    char lbl[160];
    hk_cache_info a, b;
    ICOUNT_ON();
    for (int i = 0; i < 4; i++) {
        BD_REQUIRE(hk_cache_get_info(c, &a) == HK_OK);
        hk_cache_handle x;
        ICOUNT("cache.alloc|?|0", x = hk_cache_alloc(c, heap / 16, "big"));
        BD_REQUIRE(x.value && hk_cache_get_info(c, &b) == HK_OK);
        if (b.moved_bytes == a.moved_bytes)
            ICOUNT_RELABEL(lbl, "cache.alloc",
                           "region full: the oldest purgeable blocks purged until a free block fits (units: "
                           "blocks purged)",
                           b.purge_count - a.purge_count);
        else
            ICOUNT_RELABEL(
                lbl, "cache.alloc",
                "region full: the oldest purgeable blocks purged, then compacted (units: bytes moved)",
                b.moved_bytes - a.moved_bytes);
    }
    ICOUNT_OFF();
    BD_REQUIRE(hk_cache_check(c) == HK_OK);
    hk_cache_destroy(c);
    free(h);
}

/* The fit's dearest paths (src/cache_region.c, hk__cache_fit). A request of
 * REQ bytes needs 189 units of 16 bytes; its bin holds blocks of 184-191
 * units. Blocks of SMALL bytes (184 units) are in that bin and too small,
 * FITS (190 units) is in it and fits, BIG (314 units) is in a bin of the
 * next power of two. The region is laid out [first][keep][small][keep]
 * [small]..., optionally filled to its last bytes, then `first` is freed
 * and after it (so nearer the head of the bin) the first `nsmall` smalls. */
enum { REQ = 3000, SMALL = 2920, FITS = 3016, BIG = 5000 };

static void cache_fit_case(int scale, size_t first, size_t nsmall, int full, const char *path) {
    size_t heap = bd_heap(scale), n = 0;
    hk_cache *c = cache_make(heap);
    size_t cap = heap / 1024 + 64;
    hk_cache_handle *h = calloc(cap, sizeof *h);
    BD_REQUIRE(h);
    while (n + 2 < cap) {
        hk_cache_handle x = hk_cache_alloc(c, n == 0 ? first : n % 2 ? 64 : SMALL, "fill");
        if (!x.value) break;
        h[n++] = x;
    }
    hk_stats st = {.size = sizeof st};
    BD_REQUIRE(hk_cache_stats(c, &st) == HK_OK);
    if (full && st.largest_free >= 64) h[n++] = hk_cache_alloc(c, st.largest_free - 24, "last");
    BD_REQUIRE(hk_cache_stats(c, &st) == HK_OK && (!full || st.free < 64) && n > 2 * nsmall + 2);
    void *p0 = hk_cache_deref(c, h[0]);
    BD_REQUIRE(hk_cache_free(c, h[0]) == HK_OK); /* the one that fits: last in its list */
    for (size_t i = 2, k = 0; k < nsmall; i += 2, k++) BD_REQUIRE(hk_cache_free(c, h[i]) == HK_OK);
    hk_cache_info a, b;
    BD_REQUIRE(hk_cache_get_info(c, &a) == HK_OK);
    hk_cache_handle x;
    ICOUNT_ON();
    BD_COUNT("cache.alloc", path, 0, x = hk_cache_alloc(c, REQ, "fit"));
    ICOUNT_OFF();
    BD_REQUIRE(x.value && hk_cache_get_info(c, &b) == HK_OK);
    BD_REQUIRE(b.moved_bytes == a.moved_bytes && b.purge_count == a.purge_count); /* a fit */
    BD_REQUIRE(hk_cache_deref(c, x) == p0); /* the block expected, not another */
    BD_REQUIRE(hk_cache_check(c) == HK_OK);
    hk_cache_destroy(c);
    free(h);
}

void bd_cache(int scale) {
    cache_main(scale);
    cache_locked(scale);
    cache_purge(scale);
    /* the head of the request's bin too small: the first non-empty bin of
     * a larger power of two, found by both bitmaps */
    cache_fit_case(scale, BIG, 64, 0,
                   "fit: the head of the request's bin too small, a larger power's bin taken");
    /* nothing larger free: the request's bin looked at, CACHE_SCAN_LIMIT
     * blocks, the last one fits */
    cache_fit_case(scale, FITS, CACHE_SCAN_LIMIT - 1, 1,
                   "fit: nothing larger free, the request's bin looked at (16 blocks, the last fits)");
}

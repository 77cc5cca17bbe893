/* Cache: the free lists and the fit (src/cache_region.c, hk__cache_fit;
 * the bins in src/cache_internal.h). Free blocks sit in two-level bins, 16
 * per power of two of their size in 16-byte units; the fit takes the head
 * of the request's own bin when it holds the request, else the head of the
 * first non-empty bin from the request rounded up to a bin boundary, else
 * (nothing larger free) one of the next blocks of its own bin, at most
 * CACHE_SCAN_LIMIT in all; then the allocation compacts. Each case lays
 * out free blocks of chosen sizes in a region otherwise full, so the block
 * the fit must take is known, and a wrong bin or bitmap takes another. */
#include "cache_internal.h"
#include "cache_test_util.h"
#include "heapkit/hunk.h"

/* A request that needs exactly u units (header 16 and canary 8 included). */
static size_t req_of(uint32_t u) { return (size_t)u * 16u - CACHE_HDR - CACHE_MIN_CANARY; }

enum { MAXB = 40, KEEP = 64 };

typedef struct layout {
    hk_cache *c;
    hk_cache_handle h[MAXB];
    void *at[MAXB]; /* the user address of block i */
    int n;
} layout;

/* A 1 MiB cache holding [u0][keep][u1][keep]...[the rest, used]: nothing is
 * free. Blocks are freed later, in the order the case wants (a bin is a
 * LIFO list: the last one freed is its head). */
static int lay(layout *l, const uint32_t *units, int n) {
    l->c = mk(1u << 20, 0);
    l->n = n;
    if (!l->c) return 0;
    for (int i = 0; i < n; i++) {
        l->h[i] = hk_cache_alloc(l->c, req_of(units[i]), "b");
        l->at[i] = hk_cache_deref(l->c, l->h[i]);
        if (!l->h[i].value || !hk_cache_alloc(l->c, KEEP, "keep").value) return 0;
    }
    hk_stats st = {.size = sizeof st};
    if (hk_cache_stats(l->c, &st) != HK_OK || !hk_cache_alloc(l->c, st.largest_free, "rest").value) return 0;
    return hk_cache_stats(l->c, &st) == HK_OK && st.free == 0 && st.free_blocks == 0;
}

static int lay_free(layout *l, int i) { return hk_cache_free(l->c, l->h[i]) == HK_OK; }

/* Allocates u units; 1 when the block at `want` is given, by a fit (no
 * block moved, none purged). */
static int takes(layout *l, uint32_t u, int want) {
    hk_cache_info a, b;
    if (hk_cache_get_info(l->c, &a) != HK_OK) return 0;
    hk_cache_handle x = hk_cache_alloc(l->c, req_of(u), "fit");
    void *p = hk_cache_deref(l->c, x);
    if (hk_cache_get_info(l->c, &b) != HK_OK) return 0;
    return x.value && p == l->at[want] && ((uintptr_t)p & 15u) == 0 && b.moved_bytes == a.moved_bytes &&
           b.purge_count == a.purge_count && hk_cache_check(l->c) == HK_OK;
}

/* The bins tile the sizes: every size lies in its bin's range, the ranges
 * rise with the index, and the rounded bin is the first whose every block
 * holds the request. */
HKT_TEST(bins_tile_the_sizes) {
    int bad = 0;
    for (uint64_t s = 2; s <= UINT32_MAX; s += s < 70000 ? 1 : (s >> 12) | 1) {
        uint32_t u = (uint32_t)s;
        unsigned i = cache_bin_of(u);
        bad += i >= CACHE_NBINS || cache_bin_min(i) > u;
        if (i + 1 < CACHE_NBINS) bad += cache_bin_min(i + 1) <= u || cache_bin_min(i + 1) <= cache_bin_min(i);
        unsigned j = cache_bin_ceil(u);
        if (j < CACHE_NBINS)
            bad += cache_bin_min(j) < u || (j > 2 && cache_bin_min(j - 1) >= u);
        else
            bad += cache_bin_min(CACHE_NBINS - 1) >= u; /* none: the last bin starts below u */
        /* the sizes around every bin boundary */
        if (s >= 70000 && i + 1 < CACHE_NBINS) {
            uint32_t m = cache_bin_min(i + 1);
            bad += cache_bin_of(m) != i + 1 || cache_bin_of(m - 1) != i || cache_bin_ceil(m) != i + 1 ||
                   cache_bin_ceil(m - 1) != (cache_bin_min(i) == m - 1 ? i : i + 1);
        }
    }
    CHECK_EQ(bad, 0);
    /* one size per bin below 32 units; 16 bins per power of two above */
    CHECK_EQ(cache_bin_of(31), 31u);
    CHECK_EQ(cache_bin_of(32), 32u);
    CHECK_EQ(cache_bin_of(33), 32u);
    CHECK_EQ(cache_bin_of(34), 33u);
    CHECK_EQ(cache_bin_of(UINT32_MAX), (unsigned)CACHE_NBINS - 1u);
    CHECK_EQ(cache_bin_ceil(UINT32_MAX), (unsigned)CACHE_NBINS);
    CHECK_EQ(cache_bin_ceil(1u << 31), cache_bin_of(1u << 31));
}

/* The head of the request's bin holds it: taken, though an exact block and
 * a larger one wait elsewhere. Bin [184, 192): 190 (head) and 186; 189 asked. */
HKT_TEST(head_of_own_bin_taken_when_it_holds) {
    layout l;
    REQUIRE(lay(&l, (const uint32_t[]){186, 190, 400}, 3));
    CHECK(lay_free(&l, 2) && lay_free(&l, 0) && lay_free(&l, 1)); /* head: 190 */
    CHECK(takes(&l, 189, 1));
    CHECK(takes(&l, 186, 0)); /* the next head, an exact size */
    hk_cache_destroy(l.c);
}

/* The head of the request's bin too small: the request rounded up to the
 * next bin boundary (192), and the first non-empty bin from there is taken
 * - the same power's next bins before a larger power's. */
HKT_TEST(rounded_up_to_the_next_bin) {
    layout l;
    REQUIRE(lay(&l, (const uint32_t[]){400, 200, 184, 190, 199}, 5));
    CHECK(lay_free(&l, 0) && lay_free(&l, 4) && lay_free(&l, 1) && lay_free(&l, 3) && lay_free(&l, 2));
    /* bins: [184,192) 184 (head), 190; [192,200) 199; [200,208) 200; 400 */
    CHECK(takes(&l, 189, 4)); /* 199: the first bin from 192, not 190 behind the head */
    CHECK(takes(&l, 189, 1)); /* 200: [192,200) is empty now */
    CHECK(takes(&l, 189, 0)); /* 400: a larger power's bin (the first-level bitmap) */
    hk_cache_destroy(l.c);
}

/* A request exactly at a bin boundary: every block of its bin holds it, so
 * the head is taken and nothing is rounded up; sizes below 32 units have
 * a bin each. */
HKT_TEST(exact_bin_boundaries) {
    layout l;
    REQUIRE(lay(&l, (const uint32_t[]){199, 192, 17, 16, 18, 1000}, 6));
    CHECK(lay_free(&l, 5) && lay_free(&l, 0) && lay_free(&l, 1) && lay_free(&l, 4) && lay_free(&l, 3) &&
          lay_free(&l, 2));
    CHECK(takes(&l, 192, 1)); /* head of [192,200): 192 */
    CHECK(takes(&l, 192, 0)); /* then 199 */
    CHECK(takes(&l, 16, 3));  /* bin 16 holds 16 only */
    CHECK(takes(&l, 17, 2));  /* 17: its own bin, not 18 */
    CHECK(takes(&l, 17, 4));  /* 18: the next bin up */
    CHECK(takes(&l, 17, 5));  /* 1000 */
    hk_cache_destroy(l.c);
}

/* Nothing larger free: the next blocks of the request's bin are looked at,
 * CACHE_SCAN_LIMIT in all. The 16th fits without a move; one more too
 * small ahead of it and the fit fails, so the allocation compacts (and
 * still succeeds: the free total holds it). */
HKT_TEST(own_bin_scanned_a_bounded_number_when_nothing_larger) {
    for (int extra = 0; extra < 2; extra++) {
        uint32_t units[MAXB];
        int n = CACHE_SCAN_LIMIT + extra;
        units[0] = 190;
        for (int i = 1; i < n; i++) units[i] = 184;
        layout l;
        REQUIRE(lay(&l, units, n));
        for (int i = 0; i < n; i++) CHECK(lay_free(&l, i)); /* 190 last in the list */
        if (!extra) {
            CHECK(takes(&l, 189, 0));
        } else {
            hk_cache_info a, b;
            CHECK_EQ(hk_cache_get_info(l.c, &a), HK_OK);
            hk_cache_handle x = hk_cache_alloc(l.c, req_of(189), "fit");
            CHECK(x.value != 0);
            CHECK_EQ(hk_cache_get_info(l.c, &b), HK_OK);
            CHECK(b.moved_bytes > a.moved_bytes); /* the fit failed: compacted */
            CHECK_EQ(hk_cache_check(l.c), HK_OK);
        }
        hk_cache_destroy(l.c);
    }
}

/* The largest sizes: the whole free region in one request, a request one
 * unit larger (compaction cannot help: it fails cleanly), and requests far
 * beyond any bin the cache has (near 2^32 units, and beyond). */
HKT_TEST(largest_sizes) {
    hk_cache *c = mk(1u << 20, 0);
    REQUIRE(c);
    hk_stats st = {.size = sizeof st};
    CHECK_EQ(hk_cache_stats(c, &st), HK_OK);
    size_t all = st.largest_free;
    CHECK(cache_bin_of(cache_need16(all)) < c->nbins);
    CHECK(c->nbins < CACHE_NBINS); /* a 1 MiB region needs no bin for 64 GiB blocks */
    hk_cache_handle big = hk_cache_alloc(c, all + 16, "too big");
    CHECK_EQ(big.value, 0u);
    CHECK_EQ(g_errs.last_kind, HK_EK_NOMEM);
    CHECK_EQ(hk_cache_alloc(c, ((size_t)UINT32_MAX - 2u) * 16u, "huge").value, 0u);
    CHECK_EQ(g_errs.last_kind, HK_EK_NOMEM);
    CHECK_EQ(hk_cache_alloc(c, SIZE_MAX - 8, "overflow").value, 0u);
    CHECK_EQ(g_errs.last_kind, HK_EK_OVERFLOW);
    big = hk_cache_alloc(c, all, "all");
    CHECK(big.value != 0);
    CHECK_EQ(hk_cache_stats(c, &st), HK_OK);
    CHECK_EQ(st.free, 0u);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

/* Every block the fit hands out is 16-byte aligned and its bytes are the
 * caller's: many sizes, freed and refilled in a scrambled order. */
HKT_TEST(blocks_aligned_and_disjoint_through_churn) {
    hk_cache *c = mk(1u << 20, 0);
    REQUIRE(c);
    hk_cache_handle h[256];
    uint64_t r = 0x5eed;
    int bad = 0;
    for (int i = 0; i < 256; i++) h[i].value = 0;
    for (int round = 0; round < 4000; round++) {
        r = r * 6364136223846793005u + 1442695040888963407u;
        int i = (int)((r >> 33) % 256);
        if (h[i].value) {
            bad += !holds(c, h[i], (unsigned char)i);
            bad += hk_cache_free(c, h[i]) != HK_OK;
            h[i].value = 0;
        } else {
            size_t sz = (size_t)((r >> 13) % 6000u);
            h[i] = hk_cache_alloc(c, sz, "churn");
            if (!h[i].value) continue;
            bad += ((uintptr_t)hk_cache_deref(c, h[i]) & 15u) != 0;
            fill(c, h[i], (unsigned char)i);
        }
        if (round % 500 == 0) bad += hk_cache_check(c) != HK_OK;
    }
    for (int i = 0; i < 256; i++)
        if (h[i].value) bad += !holds(c, h[i], (unsigned char)i);
    CHECK_EQ(bad, 0);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

/* check holds the bitmaps to the lists: a second-level bit cleared under a
 * non-empty bin, one set over an empty bin, and a first-level bit that
 * disagrees are each reported. */
HKT_TEST(check_sees_a_wrong_bitmap) {
    layout l;
    REQUIRE(lay(&l, (const uint32_t[]){190, 400}, 2));
    CHECK(lay_free(&l, 0) && lay_free(&l, 1));
    hk_cache *c = l.c;
    unsigned i = cache_bin_of(190), f = i >> CACHE_SL_BITS, s = i & (CACHE_SL - 1u);
    uint16_t keep = c->sl_map[f];
    uint32_t keep_fl = c->fl_map;
    CHECK_EQ(hk_cache_check(c), HK_OK);
    c->sl_map[f] = (uint16_t)(keep & ~(1u << s)); /* bin non-empty, bit clear */
    CHECK_EQ(hk_cache_check(c), HK_ERR_CORRUPT);
    CHECK_EQ(g_errs.last_kind, HK_EK_CORRUPT_STRUCTURE);
    c->sl_map[f] = (uint16_t)(keep | (1u << ((s + 1u) & (CACHE_SL - 1u)))); /* an empty bin's bit set */
    CHECK_EQ(hk_cache_check(c), HK_ERR_CORRUPT);
    c->sl_map[f] = keep;
    c->fl_map = keep_fl | (1u << (f + 3u)); /* a level with no bins */
    CHECK_EQ(hk_cache_check(c), HK_ERR_CORRUPT);
    c->fl_map = keep_fl;
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

/* A cache in a hunk has bins for the largest block the hunk's whole area
 * can hold, not only the middle it starts with: created while the hunk's
 * low end holds most of the area, it gets nearly all of it once the hunk
 * frees to a mark, and a block of nearly that size is placed and indexed. */
HKT_TEST(bins_cover_a_hunks_whole_area) {
    hk_hunk *hk =
        hk_hunk_create(&(hk_hunk_desc){.size = 1u << 20, .on_error = hkt_on_error, .error_user = &g_errs});
    REQUIRE(hk);
    hk_hunk_mark m = hk_hunk_low_mark(hk);
    REQUIRE(hk_hunk_alloc(hk, (1u << 20) - (32u << 10), "level") != NULL);
    hkt_errors_reset(&g_errs);
    hk_cache *c =
        hk_cache_create(&(hk_cache_desc){.hunk = hk, .on_error = hkt_on_error, .error_user = &g_errs});
    REQUIRE(c);
    hk_stats st = {.size = sizeof st};
    CHECK_EQ(hk_cache_stats(c, &st), HK_OK);
    CHECK(st.capacity < (40u << 10)); /* the middle it starts with */
    CHECK(c->nbins > cache_bin_of((uint32_t)((900u << 10) / 16u)));
    CHECK_EQ(hk_hunk_free_to_low_mark(hk, m), HK_OK);
    hk_cache_handle big = hk_cache_alloc(c, 900u << 10, "big");
    CHECK(big.value != 0);
    CHECK_EQ(hk_cache_free(c, big), HK_OK); /* a free block of nearly the whole area, in its bin */
    CHECK_EQ(hk_cache_check(c), HK_OK);
    big = hk_cache_alloc(c, 900u << 10, "again");
    CHECK(big.value != 0);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    CHECK_EQ(g_errs.count, 0);
    hk_cache_destroy(c);
    hk_hunk_destroy(hk);
}

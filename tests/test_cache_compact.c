/* Cache: purging (callbacks, LRU order, locks), the order in which an
 * allocation makes room (compaction before purging, the grow callback),
 * compaction around locked blocks, incremental compaction, move_high,
 * resizing and scramble. Shared helpers: cache_test_util.h. */
#include "cache_test_util.h"
#include "internal.h"

static int g_purged;
static hk_cache_handle g_purged_last;
static unsigned char g_purged_byte;
static void on_purge(hk_cache *c, hk_cache_handle h, void *data, size_t size, void *user) {
    (void)c;
    (void)user;
    g_purged++;
    g_purged_last = h;
    g_purged_byte = size ? *(unsigned char *)data : 0;
}

static hk_cache *mk_purging(size_t size, uint32_t flags) {
    hkt_errors_reset(&g_errs);
    g_purged = 0;
    return hk_cache_create(&(hk_cache_desc){.size = size,
                                            .flags = flags,
                                            .name = "test",
                                            .max_handles = 1024,
                                            .on_error = hkt_on_error,
                                            .error_user = &g_errs,
                                            .on_purge = on_purge});
}

HKT_TEST(purge_keeps_handle_and_reallocate_refills) {
    hk_cache *c = mk_purging(1 << 16, 0);
    hk_cache_handle a = hk_cache_alloc(c, 300, "sound");
    fill(c, a, 0x5A);
    CHECK_EQ(hk_cache_purge(c, a), HK_OK);
    CHECK_EQ(g_purged, 1);
    CHECK_EQ(g_purged_last.value, a.value);
    CHECK_EQ(g_purged_byte, 0x5A);
    CHECK(hk_cache_is_purged(c, a));
    hkt_errors_reset(&g_errs);
    CHECK(hk_cache_deref(c, a) == NULL);
    CHECK(hk_cache_deref_fast(c, a) == NULL);
    CHECK_EQ(g_errs.count, 0); /* empty is not an error */
    CHECK_EQ(hk_cache_size(c, a), 0);
    CHECK_EQ(hk_cache_touch(c, a), HK_OK);
    CHECK_EQ(hk_cache_purge(c, a), HK_OK); /* already empty */
    CHECK_EQ(hk_cache_resize(c, a, 10), HK_ERR_STATE);
    CHECK_EQ(g_errs.last_kind, HK_EK_STATE);
    CHECK_EQ(hk_cache_move_high(c, a), HK_ERR_STATE);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    CHECK_EQ(hk_cache_reallocate(c, a, 500), HK_OK);
    CHECK(!hk_cache_is_purged(c, a));
    CHECK_EQ(hk_cache_size(c, a), 500);
    fill(c, a, 0x33);
    /* reallocate of a resident block replaces it */
    CHECK_EQ(hk_cache_reallocate(c, a, 40), HK_OK);
    CHECK_EQ(hk_cache_size(c, a), 40);
    hk_cache_lock(c, a);
    CHECK_EQ(hk_cache_reallocate(c, a, 40), HK_ERR_LOCKED);
    hk_cache_unlock(c, a);
    /* an empty handle can be locked; it can be freed once unlocked */
    hk_cache_purge(c, a);
    CHECK_EQ(hk_cache_lock(c, a), HK_OK);
    CHECK_EQ(hk_cache_free(c, a), HK_ERR_LOCKED);
    CHECK_EQ(hk_cache_unlock(c, a), HK_OK);
    CHECK_EQ(hk_cache_free(c, a), HK_OK);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

HKT_TEST(purge_all_respects_locks) {
    hk_cache *c = mk_purging(1 << 16, 0);
    hk_cache_handle h[6];
    for (int i = 0; i < 6; i++) {
        h[i] = hk_cache_alloc(c, 100, "p");
        if (i != 5) hk_cache_set_purgeable(c, h[i], true);
    }
    hk_cache_lock(c, h[0]);
    hk_cache_set_purgeable(c, h[1], false);
    CHECK_EQ(hk_cache_purge_all(c), 3);
    CHECK(!hk_cache_is_purged(c, h[0]) && !hk_cache_is_purged(c, h[1]) && !hk_cache_is_purged(c, h[5]));
    CHECK(hk_cache_is_purged(c, h[2]) && hk_cache_is_purged(c, h[3]) && hk_cache_is_purged(c, h[4]));
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

/* Fills a small cache with n blocks of `size` bytes, each filled with its index. */
static int fill_up(hk_cache *c, hk_cache_handle *hs, int max, size_t size) {
    int n = 0;
    hk_cache_space sp;
    while (n < max) {
        hk_cache_max_block(c, &sp);
        if (sp.now < size) break;
        hs[n] = hk_cache_alloc(c, size, "blk");
        if (!hs[n].value) break;
        fill(c, hs[n], (unsigned char)(n + 1));
        n++;
    }
    return n;
}

HKT_TEST(allocation_compacts_before_purging) {
    hk_cache *c = mk_purging(64 * 1024, 0);
    hk_cache_handle hs[512];
    int n = fill_up(c, hs, 512, 1000);
    CHECK(n > 50);
    for (int i = 0; i < n; i++) hk_cache_set_purgeable(c, hs[i], true);
    for (int i = 0; i < n; i += 2) hk_cache_free(c, hs[i]);
    hk_cache_space sp;
    hk_cache_max_block(c, &sp);
    CHECK(sp.now < 3000);
    CHECK(sp.compacted > 20000);
    CHECK(sp.purged > sp.compacted);
    /* a block bigger than any hole: compaction, no purge */
    hk_cache_handle big = hk_cache_alloc(c, 20000, "big");
    CHECK(big.value != 0);
    CHECK_EQ(g_purged, 0);
    for (int i = 1; i < n; i += 2) CHECK(holds(c, hs[i], (unsigned char)(i + 1)));
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

HKT_TEST(allocation_purges_least_recently_used) {
    hk_cache *c = mk_purging(64 * 1024, 0);
    hk_cache_handle hs[512];
    int n = fill_up(c, hs, 512, 1000);
    for (int i = 0; i < n; i++) hk_cache_set_purgeable(c, hs[i], true);
    /* use the first half again: the second half is now least recently used */
    for (int i = 0; i < n / 2; i++) CHECK(hk_cache_deref(c, hs[i]) != NULL);
    hk_cache_touch(c, hs[n - 1]);
    hk_cache_lock(c, hs[n - 2]);
    hk_cache_handle big = hk_cache_alloc(c, 5000, "big");
    CHECK(big.value != 0);
    CHECK(g_purged >= 5 && g_purged <= 7);
    for (int i = 0; i < n / 2; i++) CHECK(holds(c, hs[i], (unsigned char)(i + 1)));
    CHECK(!hk_cache_is_purged(c, hs[n - 1]));
    CHECK(!hk_cache_is_purged(c, hs[n - 2]));
    CHECK(hk_cache_is_purged(c, hs[n / 2]));
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

typedef struct grow_ctx {
    int calls;
    hk_cache_handle victim;
    int give_up;
} grow_ctx;

static size_t grow_cb(hk_cache *c, size_t needed, void *user) {
    grow_ctx *g = (grow_ctx *)user;
    g->calls++;
    (void)needed;
    if (g->give_up || !g->victim.value) return 0;
    CHECK_EQ(hk_cache_free(c, g->victim), HK_OK); /* the callback may call the cache */
    g->victim.value = 0;
    return 1;
}

HKT_TEST(allocation_calls_grow_then_fails_cleanly) {
    grow_ctx g = {0};
    hkt_errors_reset(&g_errs);
    hk_cache *c = hk_cache_create(&(hk_cache_desc){.size = 32 * 1024,
                                                   .grow = grow_cb,
                                                   .grow_user = &g,
                                                   .on_error = hkt_on_error,
                                                   .error_user = &g_errs});
    hk_cache_handle hs[512];
    int n = fill_up(c, hs, 512, 2000);
    CHECK(n > 5);
    g.victim = hs[3];
    hk_cache_handle x = hk_cache_alloc(c, 1500, "x");
    CHECK(x.value != 0);
    CHECK_EQ(g.calls, 1);
    CHECK(hk_cache_deref(c, hs[3]) == NULL); /* freed by the callback: stale now */
    hkt_errors_reset(&g_errs);
    hk_cache_handle y = hk_cache_alloc(c, 10000, "y");
    CHECK_EQ(y.value, 0);
    CHECK_EQ(g.calls, 2);
    CHECK_EQ(g_errs.last_kind, HK_EK_NOMEM);
    CHECK_STR_CONTAINS(g_errs.last_message, "'y'");
    for (int i = 0; i < n; i++)
        if (i != 3) CHECK(holds(c, hs[i], (unsigned char)(i + 1)));
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

HKT_TEST(max_block_reports_now_compacted_purged) {
    hk_cache *c = mk(64 * 1024, 0);
    hk_cache_space sp;
    CHECK_EQ(hk_cache_max_block(c, &sp), HK_OK);
    hk_stats st;
    hk_cache_stats(c, &st);
    CHECK_EQ(sp.now, st.largest_free);
    CHECK(sp.now == sp.compacted && sp.compacted == sp.purged);
    hk_cache_handle h = hk_cache_alloc(c, sp.now, "all");
    CHECK(h.value != 0);
    hk_cache_max_block(c, &sp);
    CHECK_EQ(sp.now, 0);
    hk_cache_free(c, h);
    CHECK_EQ(hk_cache_max_block(c, NULL), HK_ERR_INVALID);
    hk_cache_destroy(c);
}

HKT_TEST(compaction_moves_around_locked_blocks) {
    hk_cache *c = mk(64 * 1024, 0);
    hk_cache_handle hs[512];
    int n = fill_up(c, hs, 512, 700);
    void *pinned = hk_cache_deref(c, hs[n / 2]);
    hk_cache_lock(c, hs[n / 2]);
    for (int i = 0; i < n; i += 3)
        if (i != n / 2) hk_cache_free(c, hs[i]);
    hk_stats before, after;
    hk_cache_stats(c, &before);
    CHECK(before.free_blocks > 10);
    CHECK_EQ(hk_cache_compact(c), HK_OK);
    hk_cache_stats(c, &after);
    CHECK(after.free_blocks <= 2);
    CHECK_EQ(after.free, before.free);
    CHECK(hk_cache_deref(c, hs[n / 2]) == pinned);
    for (int i = 0; i < n; i++)
        if (i % 3 || i == n / 2) CHECK(holds(c, hs[i], (unsigned char)(i + 1)));
    CHECK_EQ(hk_cache_check(c), HK_OK);
    /* compacting a compacted heap moves nothing */
    size_t moved = 0;
    CHECK_EQ(hk_cache_compact_step(c, 0, 0, &moved), 0);
    CHECK_EQ(moved, 0);
    hk_cache_destroy(c);
}

/* Compaction moves runs of adjacent unlocked blocks with one memmove each;
 * runs are cut by holes, locked blocks and the budget. Every block keeps its
 * bytes, the locked ones their address, at every step. */
static void runs_layout(hk_cache *c, hk_cache_handle *hs, int n, void **pinned) {
    for (int i = 0; i < n; i++) {
        hs[i] = hk_cache_alloc(c, 40 + (size_t)(i * 37) % 500, "run");
        REQUIRE(hs[i].value != 0);
        fill(c, hs[i], (unsigned char)(i + 1));
    }
    /* runs of 1..6 blocks between holes of 1..3 blocks; some blocks locked,
     * at the start, the middle and the end of runs */
    for (int i = 0, k = 0; i < n; k++) {
        int run = 1 + k % 6, hole = 1 + k % 3;
        if (k % 4 == 1) hk_cache_lock(c, hs[i]);                              /* first of the run */
        if (k % 5 == 2 && run > 2) hk_cache_lock(c, hs[i + run / 2]);         /* middle */
        if (k % 7 == 3 && i + run - 1 < n) hk_cache_lock(c, hs[i + run - 1]); /* last */
        i += run;
        for (int j = 0; j < hole && i < n; j++, i++) {
            hk_cache_free(c, hs[i]);
            hs[i].value = 0;
        }
    }
    for (int i = 0; i < n; i++)
        pinned[i] = hs[i].value && hk_cache_lock_count(c, hs[i]) ? hk_cache_deref(c, hs[i]) : NULL;
}

static void runs_verify(hk_cache *c, hk_cache_handle *hs, int n, void **pinned) {
    for (int i = 0; i < n; i++) {
        if (!hs[i].value) continue;
        CHECK(holds(c, hs[i], (unsigned char)(i + 1)));
        if (pinned[i]) CHECK(hk_cache_deref(c, hs[i]) == pinned[i]);
    }
    CHECK_EQ(hk_cache_check(c), HK_OK);
}

HKT_TEST(compaction_moves_runs_around_locked_blocks) {
    enum { N = 300 };
    hk_cache_handle hs[N];
    void *pinned[N];
    /* full compaction */
    hk_cache *c = mk(256 * 1024, 0);
    runs_layout(c, hs, N, pinned);
    hk_stats before, after;
    hk_cache_stats(c, &before);
    size_t moved = 0;
    CHECK_EQ(hk_cache_compact_step(c, 0, 0, &moved), 0);
    CHECK(moved > 0);
    hk_cache_stats(c, &after);
    CHECK_EQ(after.free, before.free);
    CHECK(after.free_blocks < before.free_blocks);
    runs_verify(c, hs, N, pinned);
    /* nothing movable is left below a hole: only holes right below locked blocks, and the top */
    moved = 0;
    CHECK_EQ(hk_cache_compact_step(c, 0, 0, &moved), 0);
    CHECK_EQ(moved, 0);
    hk_cache_destroy(c);
    /* the same in slices whose byte budget cuts runs in the middle */
    static const size_t budgets[] = {1, 100, 700, 2000, 5000};
    for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
        c = mk(256 * 1024, 0);
        runs_layout(c, hs, N, pinned);
        size_t total = 0, last = 0;
        int steps = 0;
        while (hk_cache_compact_step(c, budgets[b], 0, &total) && steps < 10000) {
            steps++;
            /* at most the budget, or one block (at most 576 bytes here) when smaller */
            CHECK(total - last <= (budgets[b] > 576 ? budgets[b] : 576));
            last = total;
            runs_verify(c, hs, N, pinned);
        }
        CHECK(steps > 0);
        runs_verify(c, hs, N, pinned);
        moved = 0;
        CHECK_EQ(hk_cache_compact_step(c, 0, 0, &moved), 0);
        CHECK_EQ(moved, 0);
        hk_cache_destroy(c);
    }
    /* with the fill flag, the vacated space holds the freed pattern */
    c = mk(256 * 1024, HK_FLAG_FILL);
    runs_layout(c, hs, N, pinned);
    CHECK_EQ(hk_cache_compact(c), HK_OK);
    runs_verify(c, hs, N, pinned);
    hk_cache_destroy(c);
}

HKT_TEST(incremental_compaction_with_budgets) {
    hk_cache *c = mk(64 * 1024, 0);
    hk_cache_handle hs[512];
    int n = fill_up(c, hs, 512, 500);
    for (int i = 0; i < n; i += 2) hk_cache_free(c, hs[i]);
    hk_cache_lock(c, hs[n / 2 + 1]);
    size_t moved = 0, total = 0;
    int steps = 0;
    while (hk_cache_compact_step(c, 1, 0, &moved)) {
        steps++;
        CHECK(moved - total <= 1024); /* one block per step with a 1-byte budget */
        total = moved;
        CHECK_EQ(hk_cache_check(c), HK_OK);
        /* other calls may run between slices */
        if (steps == 5) {
            hk_cache_handle t = hk_cache_alloc(c, 100, "between");
            CHECK(t.value != 0);
            hk_cache_free(c, t);
        }
        if (steps > 1000) break;
    }
    CHECK(steps > 10);
    hk_stats st;
    hk_cache_stats(c, &st);
    CHECK(st.free_blocks <= 2);
    for (int i = 1; i < n; i += 2) CHECK(holds(c, hs[i], (unsigned char)(i + 1)));
    /* a time budget also ends a slice (1 ns: at least a block per call) */
    for (int i = 1; i < n; i += 4)
        if (i != n / 2 + 1) hk_cache_free(c, hs[i]);
    steps = 0;
    while (hk_cache_compact_step(c, 0, 1, NULL) && steps < 1000) steps++;
    CHECK(steps >= 1);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

/* Locked blocks alternating with holes: nothing can move, yet a slice must
 * end within its budget (every block passed costs 64 bytes of it) instead
 * of walking the whole region; tiny budgets still make progress. */
HKT_TEST(incremental_compaction_over_locked_holes_stays_in_budget) {
    static const size_t budgets[] = {1, 64, 1024, 4096};
    for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
        hk_cache *c = mk(256 * 1024, 0);
        hk_cache_handle hs[1024];
        int n = fill_up(c, hs, 1024, 200);
        CHECK(n > 500);
        for (int i = 0; i < n; i++) {
            if (i % 2 == 0)
                CHECK_EQ(hk_cache_lock(c, hs[i]), HK_OK);
            else
                CHECK_EQ(hk_cache_free(c, hs[i]), HK_OK);
        }
        size_t moved = 0;
        int steps = 0;
        while (hk_cache_compact_step(c, budgets[b], 0, &moved) && steps < 4 * n) {
            steps++;
            CHECK_EQ(hk_cache_check(c), HK_OK);
        }
        CHECK(steps < 4 * n); /* it ends */
        CHECK_EQ(moved, 0);
        /* n blocks to pass, at most budget / 64 + 2 of them per slice */
        size_t per = budgets[b] / 64 + 2;
        CHECK((size_t)steps + 2 >= (size_t)n / per);
        for (int i = 0; i < n; i += 2) CHECK(holds(c, hs[i], (unsigned char)(i + 1)));
        CHECK_EQ(hk_cache_compact_step(c, 0, 0, &moved), 0);
        hk_cache_destroy(c);
    }
}

HKT_TEST(move_high_and_lock_high) {
    hk_cache *c = mk(64 * 1024, 0);
    hk_cache_handle a = hk_cache_alloc(c, 200, "a"), b = hk_cache_alloc(c, 200, "b");
    fill(c, a, 0xA1);
    void *pa = hk_cache_deref(c, a);
    CHECK_EQ(hk_cache_move_high(c, a), HK_OK);
    void *pa2 = hk_cache_deref(c, a);
    CHECK(pa2 > pa);
    CHECK(holds(c, a, 0xA1));
    hk_stats st;
    hk_cache_stats(c, &st);
    CHECK_EQ(hk_cache_move_high(c, a), HK_OK); /* already on top: stays */
    CHECK(hk_cache_deref(c, a) == pa2);
    CHECK_EQ(hk_cache_lock_high(c, b), HK_OK);
    CHECK(hk_cache_deref(c, b) > pa);
    CHECK_EQ(hk_cache_lock_count(c, b), 1);
    CHECK(holds(c, a, 0xA1));
    /* the free space is no longer split by the pinned block */
    hk_cache_space sp;
    hk_cache_max_block(c, &sp);
    CHECK(sp.now > 60000);
    CHECK_EQ(hk_cache_lock_high(c, b), HK_OK); /* already locked: just counts */
    CHECK_EQ(hk_cache_lock_count(c, b), 2);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

HKT_TEST(resize_in_place_and_moving) {
    hk_cache *c = mk(64 * 1024, 0);
    hk_cache_handle a = hk_cache_alloc(c, 100, "a");
    fill(c, a, 0x42);
    void *p = hk_cache_deref(c, a);
    CHECK_EQ(hk_cache_resize(c, a, 1000), HK_OK); /* next block is free: in place */
    CHECK(hk_cache_deref(c, a) == p);
    CHECK_EQ(hk_cache_size(c, a), 1000);
    unsigned char *q = p;
    CHECK(q[0] == 0x42 && q[99] == 0x42);
    hk_cache_handle b = hk_cache_alloc(c, 100, "b");
    fill(c, a, 0x43);
    CHECK_EQ(hk_cache_resize(c, a, 50), HK_OK); /* shrink: in place */
    CHECK(hk_cache_deref(c, a) == p);
    CHECK(holds(c, a, 0x43));
    CHECK_EQ(hk_cache_resize(c, a, 900), HK_OK); /* fits the hole it left */
    CHECK(hk_cache_deref(c, a) == p);
    CHECK_EQ(hk_cache_resize(c, a, 5000), HK_OK); /* must move past b */
    CHECK(hk_cache_deref(c, a) != p);
    q = hk_cache_deref(c, a);
    CHECK(q[0] == 0x43 && q[49] == 0x43);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    /* a locked block grows in place when it can, and refuses otherwise */
    (void)b;
    hk_cache_handle d = hk_cache_alloc(c, 100, "d");
    hk_cache_lock(c, d);
    void *pd = hk_cache_deref(c, d);
    CHECK_EQ(hk_cache_resize(c, d, 700), HK_OK);
    CHECK(hk_cache_deref(c, d) == pd);
    CHECK_EQ(hk_cache_size(c, d), 700);
    hk_cache_handle wall = hk_cache_alloc(c, 64, "wall");
    CHECK(wall.value != 0);
    hkt_errors_reset(&g_errs);
    CHECK_EQ(hk_cache_resize(c, d, 10000), HK_ERR_LOCKED);
    CHECK_EQ(g_errs.last_kind, HK_EK_LOCKED);
    CHECK_STR_CONTAINS(g_errs.last_message, "cannot grow in place");
    CHECK_EQ(hk_cache_size(c, d), 700);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    /* too big for the cache: reported, block unchanged */
    CHECK_EQ(hk_cache_resize(c, a, 1 << 20), HK_ERR_NOMEM);
    CHECK_EQ(hk_cache_size(c, a), 5000);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

HKT_TEST(scramble_catches_a_held_raw_address) {
    hk_cache *c = mk(64 * 1024, HK_CACHE_SCRAMBLE);
    hk_cache_handle a = hk_cache_alloc(c, 256, "mesh");
    fill(c, a, 0x5C);
    unsigned char *raw = hk_cache_deref(c, a); /* held across an allocation: a bug */
    hk_cache_handle b = hk_cache_alloc(c, 256, "other");
    CHECK(b.value != 0);
    unsigned char *now = hk_cache_deref(c, a);
    CHECK(now != raw);
    CHECK(holds(c, a, 0x5C));                                 /* the handle still finds the data */
    CHECK(raw[0] != 0x5C);                                    /* the raw address reads garbage at once */
    if (!hk__asan_enabled()) CHECK_EQ(raw[40], HK_FILL_FREE); /* (under ASan the read itself is reported) */
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
    /* every allocation moves an unlocked block again; a locked block stays */
    c = mk(64 * 1024, HK_CACHE_SCRAMBLE);
    hk_cache_handle l = hk_cache_alloc(c, 128, "locked");
    hk_cache_lock(c, l);
    void *pl = hk_cache_deref(c, l);
    a = hk_cache_alloc(c, 256, "mesh");
    fill(c, a, 0x5D);
    for (int i = 0; i < 6; i++) {
        void *before = hk_cache_deref(c, a);
        hk_cache_handle t = hk_cache_alloc(c, 32, "t");
        CHECK(hk_cache_deref(c, a) != before);
        CHECK(hk_cache_deref(c, l) == pl);
        CHECK(holds(c, a, 0x5D));
        hk_cache_free(c, t);
        CHECK_EQ(hk_cache_check(c), HK_OK);
    }
    /* resize and reallocate scramble too */
    void *before = hk_cache_deref(c, a);
    hk_cache_handle t = hk_cache_alloc(c, 32, "t");
    before = hk_cache_deref(c, a);
    CHECK_EQ(hk_cache_resize(c, t, 3000), HK_OK);
    CHECK(hk_cache_deref(c, a) != before);
    before = hk_cache_deref(c, a);
    CHECK_EQ(hk_cache_reallocate(c, t, 100), HK_OK);
    CHECK(hk_cache_deref(c, a) != before);
    CHECK(holds(c, a, 0x5D));
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

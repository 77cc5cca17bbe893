/* Cache: the bounded LRU machinery (src/cache_handles.c) - the sweep that
 * makes old hot-entry tags cold a few entries per clock value (no call
 * pays for the whole table when the epochs start again), and the purge
 * list that hands out the least recently used purgeable block in O(1):
 * its order, its members through lock / unlock / set_purgeable / purge /
 * reallocate / free, misuse on the way, and check seeing it damaged. */
#include "cache_internal.h"
#include "cache_test_util.h"

/* Hot entries that differ between two snapshots. */
static uint32_t hot_changes(const uint64_t *before, hk_cache *c, uint32_t n) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) k += before[i] != hk__cache_hot_of(c)[i];
    return k;
}

/* A full table of 63 handles (epochs 1..62), every entry tagged in one
 * epoch: when that epoch value comes round again every tag is cold, and no
 * clock step on the way rewrote more than sweep_n (2) entries. */
HKT_TEST(epoch_sweep_is_bounded_and_clears_every_old_tag) {
    hkt_errors_reset(&g_errs);
    hk_cache *c = hk_cache_create(&(hk_cache_desc){
        .size = 1 << 16, .max_handles = 63, .on_error = hkt_on_error, .error_user = &g_errs});
    REQUIRE(c);
    hk__cache_view *v = view_of(c);
    CHECK_EQ(v->epoch_max, 62u);
    CHECK_EQ(c->sweep_n, 2u);
    hk_cache_handle h[63];
    for (int i = 0; i < 63; i++) {
        h[i] = hk_cache_alloc(c, 16, "h");
        REQUIRE(h[i].value);
    }
    hk_cache_touch(c, h[0]); /* one clock value for the whole round of deref_fast */
    for (int i = 0; i < 63; i++) CHECK(hk_cache_deref_fast(c, h[i]) != NULL);
    for (int i = 0; i < 63; i++) CHECK(fast_hits(c, h[i]));
    uint32_t e = v->epoch;
    uint64_t snap[64];
    uint32_t most = 0;
    for (uint32_t step = 0; step < v->epoch_max; step++) {
        memcpy(snap, hk__cache_hot_of(c), sizeof snap);
        CHECK_EQ(hk_cache_touch(c, h[0]), HK_OK); /* touch tags nothing itself */
        uint32_t k = hot_changes(snap, c, 64);
        if (k > most) most = k;
        CHECK_EQ(hk_cache_check(c), HK_OK);
    }
    CHECK(most <= 2u); /* never the whole table in one call */
    CHECK(most >= 1u);
    CHECK_EQ(v->epoch, e);                                   /* the same epoch value again */
    for (int i = 0; i < 63; i++) CHECK(!fast_hits(c, h[i])); /* every old tag swept */
    /* the next access misses and stamps anew: the newest rank */
    CHECK(hk_cache_deref_fast(c, h[5]) != NULL);
    CHECK_EQ(rank_of(c, h[5]), 0);
    CHECK(fast_hits(c, h[5]));
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

/* Many wraps with a churning table: deref_fast always answers as deref and
 * a hit never keeps an old stamp (a handle reached through deref_fast is
 * never purged before one reached earlier). */
HKT_TEST(epoch_sweep_across_many_wraps_keeps_lru_right) {
    hkt_errors_reset(&g_errs);
    hk_cache *c = hk_cache_create(
        &(hk_cache_desc){.size = 1 << 16, .max_handles = 7, .on_error = hkt_on_error, .error_user = &g_errs});
    REQUIRE(c);
    hk_cache_handle h[7];
    for (int i = 0; i < 7; i++) {
        h[i] = hk_cache_alloc(c, 32, "h");
        REQUIRE(h[i].value);
    }
    uint64_t seed = 39;
    for (int step = 0; step < 5000; step++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        int k = (int)((seed >> 33) % 7), j = (int)((seed >> 45) % 7);
        void *want = hk_cache_deref(c, h[k]);
        hk_cache_touch(c, h[j]);
        if (hk_cache_deref_fast(c, h[k]) != want) {
            CHECK(0);
            break;
        }
        /* h[k] was reached last: it is the newest (rank 0) */
        if (rank_of(c, h[k]) != 0) {
            CHECK_EQ(rank_of(c, h[k]), 0);
            break;
        }
    }
    CHECK_EQ(hk_cache_check(c), HK_OK);
    CHECK_EQ(g_errs.count, 0);
    hk_cache_destroy(c);
}

/* The purge list (the handle indices on it, oldest first). */
static int purge_list(hk_cache *c, uint32_t *out, int max) {
    int n = 0;
    for (uint32_t i = cache_lru_head(c); i != c->nslots && n < max; i = cache_lru_next(c, i)) out[n++] = i;
    return n;
}
static uint32_t idx_of(hk_cache *c, hk_cache_handle h) { return h.value & view_of(c)->idx_mask; }

/* Members and order: resident, unlocked, purgeable handles, least recently
 * used first; setting purgeable and the last unlock count as a use; a
 * lock, clearing the flag, a purge and a free take a handle off; a
 * reallocate puts a purgeable handle back as the newest. */
HKT_TEST(purge_list_members_and_order) {
    hk_cache *c = mk(1 << 16, 0);
    REQUIRE(c);
    hk_cache_handle h[5];
    for (int i = 0; i < 5; i++) h[i] = hk_cache_alloc(c, 100, "p");
    uint32_t l[8];
    CHECK_EQ(purge_list(c, l, 8), 0); /* nothing purgeable yet */
    for (int i = 4; i >= 0; i--) CHECK_EQ(hk_cache_set_purgeable(c, h[i], true), HK_OK);
    CHECK_EQ(purge_list(c, l, 8), 5); /* marked 4, 3, 2, 1, 0: that is their age */
    for (int i = 0; i < 5; i++) CHECK_EQ(l[i], idx_of(c, h[4 - i]));
    CHECK_EQ(rank_of(c, h[0]), 0);
    CHECK_EQ(rank_of(c, h[4]), 4);
    CHECK_EQ(hk_cache_set_purgeable(c, h[3], true), HK_OK); /* already on: no change */
    CHECK_EQ(purge_list(c, l, 8), 5);
    CHECK_EQ(l[1], idx_of(c, h[3]));
    hk_cache_touch(c, h[4]); /* oldest becomes newest */
    CHECK_EQ(purge_list(c, l, 8), 5);
    CHECK_EQ(l[0], idx_of(c, h[3]));
    CHECK_EQ(l[4], idx_of(c, h[4]));
    CHECK(hk_cache_deref_fast(c, h[3]) != NULL); /* a deref_fast miss moves it too */
    CHECK_EQ(purge_list(c, l, 8), 5);
    CHECK_EQ(l[0], idx_of(c, h[2]));
    CHECK_EQ(l[4], idx_of(c, h[3]));
    hk_cache_lock(c, h[2]);
    hk_cache_lock(c, h[2]);
    CHECK_EQ(purge_list(c, l, 8), 4);
    CHECK_EQ(l[0], idx_of(c, h[1]));
    hk_cache_unlock(c, h[2]);
    CHECK_EQ(purge_list(c, l, 8), 4); /* still locked once */
    hk_cache_unlock(c, h[2]);
    CHECK_EQ(purge_list(c, l, 8), 5); /* the last unlock: back, as the newest */
    CHECK_EQ(l[4], idx_of(c, h[2]));
    CHECK_EQ(rank_of(c, h[2]), 0);
    hk_cache_set_purgeable(c, h[1], false);
    hk_cache_purge(c, h[0]);
    CHECK_EQ(purge_list(c, l, 8), 3);
    CHECK_EQ(hk_cache_reallocate(c, h[0], 50), HK_OK); /* purgeable, refilled: the newest */
    CHECK_EQ(purge_list(c, l, 8), 4);
    CHECK_EQ(l[3], idx_of(c, h[0]));
    hk_cache_free(c, h[0]);
    CHECK_EQ(purge_list(c, l, 8), 3);
    /* a purgeable handle locked while empty is not on the list when refilled */
    hk_cache_purge(c, h[4]);
    hk_cache_lock(c, h[4]);
    CHECK_EQ(hk_cache_reallocate(c, h[4], 60), HK_OK);
    CHECK_EQ(purge_list(c, l, 8), 2);
    hk_cache_unlock(c, h[4]);
    CHECK_EQ(purge_list(c, l, 8), 3);
    CHECK_EQ(hk_cache_purge_all(c), 3u);
    CHECK_EQ(purge_list(c, l, 8), 0);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

/* Misuse leaves the list as it was (each misuse reported once), and check
 * passes after it. */
HKT_TEST(purge_list_unchanged_by_misuse) {
    hk_cache *c = mk(1 << 16, 0);
    REQUIRE(c);
    hk_cache_handle a = hk_cache_alloc(c, 64, "a"), b = hk_cache_alloc(c, 64, "b");
    hk_cache_set_purgeable(c, a, true);
    hk_cache_set_purgeable(c, b, true);
    hk_cache_handle dead = hk_cache_alloc(c, 64, "dead");
    hk_cache_free(c, dead);
    uint32_t l[4];
    CHECK_EQ(hk_cache_unlock(c, a), HK_ERR_STATE); /* not locked */
    CHECK_EQ(hk_cache_set_purgeable(c, dead, true), HK_ERR_STALE);
    CHECK_EQ(hk_cache_lock(c, dead), HK_ERR_STALE);
    CHECK_EQ(hk_cache_touch(c, (hk_cache_handle){0}), HK_ERR_INVALID);
    CHECK_EQ(hk_cache_purge(c, dead), HK_ERR_STALE);
    CHECK_EQ(g_errs.count, 5);
    CHECK_EQ(purge_list(c, l, 4), 2);
    CHECK_EQ(l[0], idx_of(c, a));
    CHECK_EQ(l[1], idx_of(c, b));
    /* a lock count at its limit: the refused lock changes nothing */
    for (int i = 0; i < 65535; i++) hk_cache_lock(c, a);
    CHECK_EQ(hk_cache_lock(c, a), HK_ERR_OVERFLOW);
    CHECK_EQ(purge_list(c, l, 4), 1);
    for (int i = 0; i < 65535; i++) hk_cache_unlock(c, a);
    CHECK_EQ(purge_list(c, l, 4), 2);
    CHECK_EQ(l[1], idx_of(c, a));
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

/* Space short: the oldest purgeable block goes first, however many
 * handles the table holds; the slot being resized is never taken. */
HKT_TEST(purge_list_feeds_allocation_oldest_first) {
    hkt_errors_reset(&g_errs);
    hk_cache *c = hk_cache_create(&(hk_cache_desc){
        .size = 1 << 15, .max_handles = 1023, .on_error = hkt_on_error, .error_user = &g_errs});
    REQUIRE(c);
    hk_cache_handle h[64];
    int n = 0;
    while (n < 64) {
        hk_cache_handle x = hk_cache_alloc(c, 1000, "blk");
        if (!x.value) break;
        h[n++] = x;
    }
    REQUIRE(n > 16);
    hkt_errors_reset(&g_errs);
    for (int i = n - 1; i >= 0; i--) hk_cache_set_purgeable(c, h[i], true); /* h[n-1] oldest */
    hk_stats st = {.size = sizeof st};
    hk_cache_stats(c, &st);
    /* needs a little more than the free space: the oldest one or two go */
    hk_cache_handle big = hk_cache_alloc(c, st.free + 500, "big");
    REQUIRE(big.value);
    CHECK(hk_cache_is_purged(c, h[n - 1]));
    for (int i = 0; i < n - 3; i++) CHECK(!hk_cache_is_purged(c, h[i]));
    /* resizing the oldest purgeable block itself: it is never purged for its own room */
    uint32_t l[2];
    REQUIRE(purge_list(c, l, 2) == 2);
    hk_cache_handle oldest = {0};
    for (int i = 0; i < n; i++)
        if (idx_of(c, h[i]) == l[0]) oldest = h[i];
    REQUIRE(oldest.value);
    hk_cache_free(c, big);
    hk_cache_stats(c, &st);
    CHECK_EQ(hk_cache_resize(c, oldest, st.free + 1500), HK_OK); /* cannot grow in place */
    CHECK(!hk_cache_is_purged(c, oldest));
    CHECK_EQ(hk_cache_size(c, oldest), st.free + 1500);
    CHECK(hk_cache_is_purged(c, h[n - 3])); /* the next oldest went instead */
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

/* check sees a damaged purge list, a flag that disagrees with it, and a
 * damaged sweep cursor. */
HKT_TEST(check_sees_a_damaged_purge_list_and_sweep) {
    hk_cache *c = mk(1 << 16, 0);
    REQUIRE(c);
    hk_cache_handle a = hk_cache_alloc(c, 64, "a"), b = hk_cache_alloc(c, 64, "b");
    hk_cache_set_purgeable(c, a, true);
    hk_cache_set_purgeable(c, b, true);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    uint32_t ia = idx_of(c, a), ib = idx_of(c, b);
    /* a link broken */
    uint32_t saved = c->lru[2u * ib + 1u];
    c->lru[2u * ib + 1u] = ib;
    CHECK_EQ(hk_cache_check(c), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(g_errs.last_message, "purge list");
    c->lru[2u * ib + 1u] = saved;
    CHECK_EQ(hk_cache_check(c), HK_OK);
    /* the order against the stamps */
    uint32_t st = c->slots[ia].stamp;
    c->slots[ia].stamp = c->slots[ib].stamp + 1u;
    CHECK_EQ(hk_cache_check(c), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(g_errs.last_message, "stamp order");
    c->slots[ia].stamp = st;
    /* a member whose flag was lost */
    c->slots[ia].flags &= (uint16_t)~CACHE_SLOT_LISTED;
    CHECK_EQ(hk_cache_check(c), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(g_errs.last_message, "missing from the purge list");
    c->slots[ia].flags |= CACHE_SLOT_LISTED;
    /* the sweep cursor out of range */
    uint32_t sw = c->sweep;
    c->sweep = c->high_water + 5u;
    CHECK_EQ(hk_cache_check(c), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(g_errs.last_message, "epoch sweep");
    c->sweep = sw;
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

/* The clock wraps with no pass over the table: a block not reached for more
 * than 2^29 stamps has its stamp raised by the sweep (it stays the oldest,
 * sharing that rank with any other such block), no stamp ever looks ahead
 * of the clock, and check passes at every step across the wrap. */
HKT_TEST(clock_wrap_raises_ancient_stamps_one_per_step) {
    hkt_errors_reset(&g_errs);
    hk_cache *c = hk_cache_create(&(hk_cache_desc){
        .size = 1 << 16, .max_handles = 15, .on_error = hkt_on_error, .error_user = &g_errs});
    REQUIRE(c);
    hk_cache_handle old = hk_cache_alloc(c, 32, "old"), older = hk_cache_alloc(c, 32, "older"),
                    x = hk_cache_alloc(c, 32, "x"), y = hk_cache_alloc(c, 32, "y");
    hk_cache_set_purgeable(c, older, true);
    hk_cache_set_purgeable(c, old, true);
    hk_cache_set_purgeable(c, x, true);
    /* test hook: the clock just below its wrap, two blocks far in the past
     * (ages within 2^31, so the state is one the clock can reach) */
    hk__cache_view *v = view_of(c);
    v->tick = 0xFFFFFF00u;
    c->slots[idx_of(c, older)].stamp = v->tick - 0x7F000001u;
    c->slots[idx_of(c, old)].stamp = v->tick - 0x7E000001u;
    c->slots[idx_of(c, x)].stamp = v->tick - 0x11u;
    c->slots[idx_of(c, y)].stamp = v->tick - 0x21u;
    CHECK_EQ(hk_cache_check(c), HK_OK);
    CHECK_EQ(rank_of(c, x), 0);
    CHECK_EQ(rank_of(c, y), 1);
    CHECK_EQ(rank_of(c, old), 2); /* both past the age cap: one rank */
    CHECK_EQ(rank_of(c, older), 2);
    int wrapped = 0;
    for (int i = 0; i < 400; i++) {
        uint32_t before = v->tick;
        hk_cache_touch(c, i % 2 ? x : y);
        wrapped |= v->tick < before;
        CHECK(v->tick != 0u && (v->tick & 1u) == 0u);
        if (hk_cache_check(c) != HK_OK) {
            CHECK(0);
            break;
        }
    }
    CHECK(wrapped);
    /* every stamp was visited: raised to the cap, never ahead of the clock */
    CHECK(v->tick - c->slots[idx_of(c, old)].stamp < 0x41000000u);
    CHECK(v->tick - c->slots[idx_of(c, older)].stamp < 0x41000000u);
    CHECK_EQ(rank_of(c, old), 2);
    CHECK_EQ(rank_of(c, older), 2);
    /* the purge order kept them apart: older goes first, then old */
    uint32_t l[4];
    CHECK_EQ(purge_list(c, l, 4), 3);
    CHECK_EQ(l[0], idx_of(c, older));
    CHECK_EQ(l[1], idx_of(c, old));
    hk_cache_touch(c, older);
    CHECK_EQ(rank_of(c, older), 0);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    /* a stamp ahead of the clock is damage */
    c->slots[idx_of(c, y)].stamp = v->tick + 0x100u;
    CHECK_EQ(hk_cache_check(c), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(g_errs.last_message, "ahead of the clock");
    c->slots[idx_of(c, y)].stamp = v->tick - 1u;
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

/* A slow cache (lock hooks) sweeps no hot entries but still raises old
 * stamps, so its clock wraps the same way. */
static void nop_lock(void *u) { (void)u; }
HKT_TEST(clock_wrap_in_a_slow_cache) {
    hkt_errors_reset(&g_errs);
    hk_cache *c = hk_cache_create(&(hk_cache_desc){.size = 1 << 16,
                                                   .max_handles = 7,
                                                   .on_error = hkt_on_error,
                                                   .error_user = &g_errs,
                                                   .lock = {.lock = nop_lock, .unlock = nop_lock}});
    REQUIRE(c);
    hk_cache_handle a = hk_cache_alloc(c, 32, "a"), b = hk_cache_alloc(c, 32, "b");
    hk__cache_view *v = view_of(c);
    v->tick = 0xFFFFFFF0u;
    c->slots[idx_of(c, a)].stamp = v->tick - 0x7F000001u;
    c->slots[idx_of(c, b)].stamp = v->tick - 1u;
    uint64_t probe = v->probe;
    for (int i = 0; i < 40; i++) {
        hk_cache_touch(c, b);
        CHECK_EQ(hk_cache_check(c), HK_OK);
    }
    CHECK(v->tick < 0x100u);
    CHECK(v->tick - c->slots[idx_of(c, a)].stamp < 0x41000000u);
    CHECK_EQ(v->probe, probe); /* never written after creation */
    CHECK_EQ(rank_of(c, a), 1);
    CHECK(hk_cache_deref_fast(c, a) != NULL);
    CHECK_EQ(rank_of(c, a), 0);
    CHECK_EQ(g_errs.count, 0);
    hk_cache_destroy(c);
}

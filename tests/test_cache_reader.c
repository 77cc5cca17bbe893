/* tests/test_cache_reader.c - hk_cache_reader: deref_fast with the cache's
 * view copied into a local, so loops keep it in registers. Same results,
 * reports and lock as deref_fast; the LRU rank of its hits is the clock it
 * holds, refreshed on every miss. */
#include "cache_test_util.h"

/* Every kind of handle gives what hk_cache_deref gives, with its report. */
HKT_TEST(reader_answers_as_deref) {
    hk_cache *c = mk(1 << 16, 0);
    REQUIRE(c);
    hk_cache_handle a = hk_cache_alloc(c, 64, "a"), b = hk_cache_alloc(c, 64, "b"),
                    d = hk_cache_alloc(c, 64, "d");
    hk_cache_reader r = hk_cache_reader_of(c);
    void *pa = hk_cache_deref(c, a);
    CHECK(hk_cache_reader_deref(&r, a) == pa);
    CHECK(hk_cache_reader_deref(&r, a) == pa);
    CHECK(hk_cache_reader_deref(&r, b) == hk_cache_deref(c, b));
    CHECK_EQ(g_errs.count, 0);
    hk_cache_purge(c, d); /* empty: NULL, no report */
    CHECK(hk_cache_reader_deref(&r, d) == NULL);
    CHECK_EQ(g_errs.count, 0);
    hk_cache_free(c, b);
    CHECK(hk_cache_reader_deref(&r, b) == NULL);
    CHECK_EQ(g_errs.last_kind, HK_EK_STALE);
    CHECK(hk_cache_reader_deref(&r, (hk_cache_handle){0}) == NULL);
    CHECK_EQ(g_errs.last_kind, HK_EK_INVALID_ARG);
    CHECK(hk_cache_reader_deref(&r, (hk_cache_handle){0xFFFFFFFFu}) == NULL);
    CHECK_EQ(g_errs.last_kind, HK_EK_FOREIGN_PTR);
    /* a block moved by compaction: the reader follows it (the entry holds
     * the address, the reader only its base) */
    hk_cache_handle e = hk_cache_alloc(c, 256, "e");
    fill(c, e, 0x5a);
    hk_cache_free(c, a);
    hk_cache_compact(c);
    unsigned char *pe = hk_cache_reader_deref(&r, e);
    CHECK(pe == hk_cache_deref(c, e));
    CHECK(pe && pe[0] == 0x5a && pe[255] == 0x5a);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

/* Hits write nothing; a miss stamps the block with the current clock and
 * the reader takes that clock; a reader made before the clock moved ranks
 * its hits at its own (older) clock until it misses. */
HKT_TEST(reader_lru_follows_its_clock) {
    hk_cache *c = mk(1 << 16, 0);
    REQUIRE(c);
    hk_cache_handle a = hk_cache_alloc(c, 64, "a"), b = hk_cache_alloc(c, 64, "b"),
                    d = hk_cache_alloc(c, 64, "d");
    const hk__cache_view *v = view_of(c);
    hk_cache_reader r = hk_cache_reader_of(c);
    void *pa = hk_cache_reader_deref(&r, a); /* stamped by alloc: a miss */
    CHECK(pa != NULL);
    CHECK(r.epoch == v->epoch);
    uint64_t key = hot_word(c, a);
    for (int i = 0; i < 50; i++) CHECK(hk_cache_reader_deref(&r, a) == pa);
    CHECK(hot_word(c, a) == key); /* repeated hits write nothing */
    CHECK(hk_cache_reader_deref(&r, b) != NULL);
    CHECK_EQ(rank_of(c, a), 0);
    CHECK_EQ(rank_of(c, b), 0);
    CHECK_EQ(rank_of(c, d), 2);
    hk_cache_touch(c, d); /* the clock moves on; r still holds the old value */
    CHECK(r.epoch != v->epoch);
    CHECK(hk_cache_reader_deref(&r, b) != NULL); /* a hit at r's clock: b stays below d */
    CHECK_EQ(rank_of(c, d), 0);
    CHECK_EQ(rank_of(c, b), 1);
    hk_cache_reader fresh = hk_cache_reader_of(c);
    CHECK(hk_cache_reader_deref(&fresh, b) != NULL); /* a miss for a new reader: b newest */
    CHECK_EQ(rank_of(c, b), 0);
    CHECK(fresh.epoch == v->epoch);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

static int g_locks;
static void lk(void *u) {
    (void)u;
    g_locks++;
}
static void ulk(void *u) { (void)u; }

/* With lock hooks every access takes hk_cache_deref and the lock. */
HKT_TEST(reader_with_lock_hooks_always_locks) {
    hk_cache *c = hk_cache_create(&(hk_cache_desc){.size = 1 << 16, .lock = {lk, ulk, NULL}});
    REQUIRE(c);
    hk_cache_handle a = hk_cache_alloc(c, 10, "a");
    hk_cache_reader r = hk_cache_reader_of(c);
    g_locks = 0;
    for (int i = 0; i < 5; i++) CHECK(hk_cache_reader_deref(&r, a) != NULL);
    CHECK_EQ(g_locks, 5);
    hk_cache_destroy(c);
}

/* deref_fast reads the view's base, index mask and epoch; check compares
 * them with the clock and the slow flag. */
HKT_TEST(view_follows_the_clock_and_check_sees_damage) {
    hk_cache *c = mk(1 << 16, 0);
    REQUIRE(c);
    hk__cache_view *v = view_of(c);
    hk_cache_handle a = hk_cache_alloc(c, 64, "a");
    CHECK_EQ(fast_epoch(c), v->epoch);
    void *pa = hk_cache_deref(c, a);
    CHECK((uint64_t)(uintptr_t)pa - v->base < ((uint64_t)1 << 35));
    CHECK(hk_cache_deref_fast(c, a) == pa);
    CHECK(fast_hits(c, a));
    uint32_t e0 = v->epoch;
    hk_cache_touch(c, a);
    CHECK(v->epoch != e0); /* a new clock value, a new epoch */
    CHECK_EQ(fast_epoch(c), v->epoch);
    CHECK(!fast_hits(c, a));
    CHECK_EQ(hk_cache_check(c), HK_OK);
    v->probe ^= (uint64_t)1u << 32; /* another epoch */
    CHECK_EQ(hk_cache_check(c), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(g_errs.last_message, "LRU clock");
    v->probe ^= (uint64_t)1u << 32;
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
    /* a paranoid cache compares an epoch no tag carries: deref_fast always
     * misses (and runs through hk_cache_deref, which stamps and checks) */
    c = mk(1 << 16, HK_FLAG_PARANOID);
    REQUIRE(c);
    v = view_of(c);
    a = hk_cache_alloc(c, 64, "a");
    CHECK_EQ(fast_epoch(c), v->epoch_max + 1u);
    CHECK_EQ((uint32_t)v->probe, v->idx_mask);
    pa = hk_cache_deref(c, a);
    uint32_t before = v->tick;
    CHECK(hk_cache_deref_fast(c, a) == pa);
    CHECK(v->tick != before); /* took hk_cache_deref: the clock moved */
    CHECK(!fast_hits(c, a));
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

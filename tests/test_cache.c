/* Cache: handles, lock/purge, LRU, allocation order, compaction, scramble,
 * introspection and misuse reports. Hunk coexistence: test_cache_hunk.c;
 * randomized model: test_cache_model.c. */
#define _GNU_SOURCE 1 /* open_memstream */
#include "heapkit/cache.h"
#include "hk_test.h"
#include "internal.h"

static hkt_errors g_errs;

static hk_cache *mk(size_t size, uint32_t flags) {
    hkt_errors_reset(&g_errs);
    return hk_cache_create(&(hk_cache_desc){.size = size,
                                            .flags = flags,
                                            .name = "test",
                                            .max_handles = 1024,
                                            .on_error = hkt_on_error,
                                            .error_user = &g_errs});
}

static void fill(hk_cache *c, hk_cache_handle h, unsigned char v) {
    unsigned char *p = hk_cache_deref(c, h);
    memset(p, v, hk_cache_size(c, h));
}

static int holds(hk_cache *c, hk_cache_handle h, unsigned char v) {
    unsigned char *p = hk_cache_deref(c, h);
    size_t n = hk_cache_size(c, h);
    return p && hk_fill_check(p, n, v) == n;
}

HKT_TEST(create_variants) {
    CHECK(hk_cache_create(NULL) == NULL);
    hk_cache *c = hk_cache_create(&(hk_cache_desc){0});
    REQUIRE(c != NULL);
    hk_stats st;
    CHECK_EQ(hk_cache_stats(c, &st), HK_OK);
    CHECK(st.capacity >= ((size_t)16 << 20));
    CHECK_STR_CONTAINS(st.allocator, "cache");
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
    static unsigned char mem[64 * 1024] __attribute__((aligned(16)));
    c = hk_cache_create(&(hk_cache_desc){.memory = mem, .size = sizeof mem, .max_handles = 64});
    REQUIRE(c != NULL);
    CHECK_EQ(hk_cache_stats(c, &st), HK_OK);
    CHECK(st.capacity > 50000 && st.capacity < sizeof mem);
    CHECK(st.free + 16 == st.capacity);
    hk_cache_handle h = hk_cache_alloc(c, 100, "x");
    CHECK(h.value != 0);
    CHECK((unsigned char *)hk_cache_deref(c, h) > mem &&
          (unsigned char *)hk_cache_deref(c, h) < mem + sizeof mem);
    hk_cache_destroy(c);
    CHECK(hk_cache_create(&(hk_cache_desc){.memory = mem, .size = 200}) == NULL); /* table does not fit */
    CHECK(hk_cache_create(&(hk_cache_desc){.max_handles = 1u << 24}) == NULL);
    hk_cache_destroy(NULL);
}

HKT_TEST(alloc_deref_free) {
    hk_cache *c = mk(1 << 20, 0);
    hk_cache_handle a = hk_cache_alloc(c, 100, "a"), b = hk_cache_alloc(c, 0, "zero"),
                    d = hk_cache_alloc(c, 5000, NULL);
    REQUIRE(a.value && b.value && d.value);
    CHECK(a.value != b.value && b.value != d.value);
    void *pa = hk_cache_deref(c, a), *pb = hk_cache_deref(c, b), *pd = hk_cache_deref(c, d);
    CHECK(pa && pb && pd && pa != pb && pb != pd);
    CHECK(((uintptr_t)pa & 15) == 0 && ((uintptr_t)pb & 15) == 0 && ((uintptr_t)pd & 15) == 0);
    CHECK(hk_cache_deref_fast(c, a) == pa);
    CHECK_EQ(hk_cache_size(c, a), 100);
    CHECK_EQ(hk_cache_size(c, b), 0);
    fill(c, a, 0x11);
    fill(c, d, 0x22);
    CHECK(holds(c, a, 0x11) && holds(c, d, 0x22));
    hk_stats st;
    hk_cache_stats(c, &st);
    CHECK_EQ(st.used, 5100);
    CHECK_EQ(st.live_blocks, 3);
    CHECK_EQ(st.alloc_count, 3);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    CHECK_EQ(hk_cache_free(c, a), HK_OK);
    CHECK_EQ(hk_cache_free(c, b), HK_OK);
    CHECK_EQ(hk_cache_free(c, d), HK_OK);
    hk_cache_stats(c, &st);
    CHECK_EQ(st.used, 0);
    CHECK_EQ(st.live_blocks, 0);
    CHECK_EQ(st.free_blocks, 1);
    CHECK_EQ(st.free_count, 3);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

HKT_TEST(zero_and_fill_flags) {
    hk_cache *c = mk(1 << 16, HK_FLAG_FILL);
    hk_cache_handle a = hk_cache_alloc(c, 64, "f");
    CHECK(holds(c, a, HK_FILL_ALLOC));
    hk_cache_destroy(c);
    c = mk(1 << 16, HK_FLAG_ZERO);
    a = hk_cache_alloc(c, 64, "z");
    fill(c, a, 0x77);
    hk_cache_free(c, a);
    a = hk_cache_alloc(c, 64, "z");
    CHECK(holds(c, a, 0));
    CHECK_EQ(hk_cache_resize(c, a, 200), HK_OK);
    CHECK(holds(c, a, 0));
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

HKT_TEST(stale_foreign_and_none_handles) {
    hk_cache *c = mk(1 << 16, 0);
    hk_cache *other = hk_cache_create(&(hk_cache_desc){.size = 1 << 16});
    hk_cache_handle a = hk_cache_alloc(c, 10, "a");
    hk_cache_handle o = hk_cache_alloc(other, 10, "o");
    hk_cache_free(c, a);
    hkt_errors_reset(&g_errs);
    CHECK(hk_cache_deref(c, a) == NULL);
    CHECK_EQ(g_errs.count, 1);
    CHECK_EQ(g_errs.last_kind, HK_EK_STALE);
    CHECK_STR_CONTAINS(g_errs.last_message, "cache 'test'");
    CHECK_STR_CONTAINS(g_errs.last_message, "stale");
    CHECK(hk_cache_deref_fast(c, a) == NULL);
    CHECK_EQ(g_errs.count, 2);
    CHECK_EQ(hk_cache_free(c, a), HK_ERR_DOUBLE_FREE); /* the shared table's verdict */
    CHECK_EQ(g_errs.last_kind, HK_EK_DOUBLE_FREE);
    CHECK_STR_CONTAINS(g_errs.last_message, "already freed");
    CHECK_EQ(hk_cache_lock(c, a), HK_ERR_STALE);
    CHECK_EQ(hk_cache_resize(c, a, 20), HK_ERR_STALE);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hkt_errors_reset(&g_errs);
    CHECK(hk_cache_deref(c, o) == NULL);
    CHECK_EQ(g_errs.last_result, HK_ERR_FOREIGN);
    CHECK_EQ(g_errs.last_kind, HK_EK_FOREIGN_PTR);
    CHECK_STR_CONTAINS(g_errs.last_message, "another instance's handle");
    CHECK_EQ(hk_cache_free(c, (hk_cache_handle){0xFFFFFFFFu}), HK_ERR_FOREIGN);
    CHECK_EQ(hk_cache_free(c, (hk_cache_handle){0}), HK_ERR_INVALID);
    CHECK(hk_cache_deref(c, (hk_cache_handle){0}) == NULL);
    CHECK_EQ(g_errs.last_kind, HK_EK_INVALID_ARG);
    CHECK(!hk_cache_is_purged(c, a));
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_stats st;
    hk_cache_stats(c, &st);
    CHECK(st.error_count >= 6);
    hk_cache_destroy(c);
    hk_cache_destroy(other);
}

HKT_TEST(handle_slots_reused_late_and_never_equal) {
    hkt_errors_reset(&g_errs);
    hk_cache *c = hk_cache_create(
        &(hk_cache_desc){.size = 1 << 16, .max_handles = 8, .on_error = hkt_on_error, .error_user = &g_errs});
    hk_cache_handle first = hk_cache_alloc(c, 8, NULL);
    hk_cache_free(c, first);
    /* the 7 fresh slots are used before the freed one comes back (8 slots:
     * the handle's low 4 bits are the slot index, 0..7) */
    hk_cache_handle hs[8];
    for (int i = 0; i < 7; i++) {
        hs[i] = hk_cache_alloc(c, 8, NULL);
        CHECK((hs[i].value & 0x7) != (first.value & 0x7));
    }
    hs[7] = hk_cache_alloc(c, 8, NULL);
    CHECK((hs[7].value & 0x7) == (first.value & 0x7));
    CHECK(hs[7].value != first.value);
    /* table full: reported */
    hk_cache_handle none = hk_cache_alloc(c, 8, "ninth");
    CHECK_EQ(none.value, 0);
    CHECK_EQ(g_errs.last_kind, HK_EK_NOMEM);
    /* cycling one slot many times never repeats a value */
    hk_cache_free(c, hs[0]);
    uint32_t prev = hs[0].value;
    for (int i = 0; i < 1000; i++) {
        hk_cache_handle h = hk_cache_alloc(c, 8, NULL);
        CHECK(h.value != prev && h.value != 0);
        prev = h.value;
        hk_cache_free(c, h);
    }
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

typedef struct rank_rec {
    uint32_t id[8], rank[8];
    int n;
} rank_rec;

static int rank_cb(const hk_block_info *bi, void *user) {
    rank_rec *r = (rank_rec *)user;
    if ((bi->flags & HK_BLOCK_USED) && r->n < 8) {
        r->id[r->n] = bi->id;
        r->rank[r->n++] = bi->rank;
    }
    return 0;
}

static uint32_t rank_of(hk_cache *c, hk_cache_handle h) {
    rank_rec r = {{0}, {0}, 0};
    hk_cache_walk(c, rank_cb, &r);
    for (int i = 0; i < r.n; i++)
        if (r.id[i] == h.value) return r.rank[i];
    return 999;
}

/* deref_fast: a hit writes nothing; a miss stamps once with the current
 * clock; blocks reached between two clock steps share a rank; empty, stale
 * and none handles go through hk_cache_deref (same results and reports). */
HKT_TEST(deref_fast_stamps_once_per_clock_value) {
    hk_cache *c = mk(1 << 16, 0);
    hk_cache_handle a = hk_cache_alloc(c, 64, "a"), b = hk_cache_alloc(c, 64, "b"),
                    d = hk_cache_alloc(c, 64, "d");
    const hk__cache_view *v = (const hk__cache_view *)(const void *)c;
    const hk__cache_hot *ea = &v->hot[a.value & v->idx_mask];
    CHECK(hk__cache_hot_key(ea) !=
          (v->tick_key | a.value)); /* stamped by alloc (odd): the first deref_fast misses */
    void *pa = hk_cache_deref_fast(c, a);
    CHECK(pa == hk_cache_deref(c, a));
    CHECK(hk_cache_deref_fast(c, a) == pa);
    CHECK(hk__cache_hot_key(ea) == (v->tick_key | a.value)); /* now a hit */
    uint64_t key = hk__cache_hot_key(ea);
    for (int i = 0; i < 100; i++) CHECK(hk_cache_deref_fast(c, a) == pa);
    CHECK(hk__cache_hot_key(ea) == key); /* repeated hits write nothing */
    CHECK(hk_cache_deref_fast(c, b) != NULL);
    CHECK_EQ(rank_of(c, a), 0); /* a and b share the newest rank */
    CHECK_EQ(rank_of(c, b), 0);
    CHECK_EQ(rank_of(c, d), 2);
    hk_cache_touch(c, d); /* the clock moves on */
    CHECK_EQ(rank_of(c, d), 0);
    CHECK(hk_cache_deref_fast(c, b) != NULL);
    CHECK_EQ(rank_of(c, b), 0);
    CHECK_EQ(rank_of(c, d), 1);
    CHECK_EQ(rank_of(c, a), 2);
    /* empty, stale, none: as hk_cache_deref */
    hk_cache_purge(c, d);
    CHECK(hk_cache_deref_fast(c, d) == NULL);
    CHECK_EQ(g_errs.count, 0);
    hk_cache_free(c, b);
    CHECK(hk_cache_deref_fast(c, b) == NULL);
    CHECK_EQ(g_errs.last_kind, HK_EK_STALE);
    CHECK(hk_cache_deref_fast(c, (hk_cache_handle){0}) == NULL);
    CHECK_EQ(g_errs.last_kind, HK_EK_INVALID_ARG);
    CHECK(hk_cache_deref_fast(c, (hk_cache_handle){0xFFFFFFFFu}) == NULL);
    CHECK_EQ(g_errs.last_kind, HK_EK_FOREIGN_PTR);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

/* The 32-bit LRU clock renumbers the stamps before it wraps: the order is
 * kept (ties too) and deref_fast keeps working. */
HKT_TEST(lru_clock_renumbers_before_wrapping) {
    hk_cache *c = mk(1 << 16, 0);
    hk_cache_handle a = hk_cache_alloc(c, 64, "a"), b = hk_cache_alloc(c, 64, "b"),
                    d = hk_cache_alloc(c, 64, "d");
    hk__cache_view *v = (hk__cache_view *)(void *)c;
    /* test hook: move the clock close to the limit (stamps stay older) */
    v->tick_key = ((uint64_t)0xFFFFFE00u << 32) | (uint32_t)v->tick_key;
    hk_cache_touch(c, d);
    hk_cache_deref_fast(c, a);
    hk_cache_deref_fast(c, b);      /* a and b tie, newer than d */
    for (int i = 0; i < 300; i++) { /* the clock passes the limit: renumbered */
        hk_cache_handle t = hk_cache_alloc(c, 16, "t");
        hk_cache_free(c, t);
    }
    CHECK((uint32_t)(v->tick_key >> 32) < 0x1000u);
    CHECK_EQ(rank_of(c, a), 0);
    CHECK_EQ(rank_of(c, b), 0);
    CHECK_EQ(rank_of(c, d), 2);
    void *pd = hk_cache_deref(c, d);
    CHECK(hk_cache_deref_fast(c, d) == pd);
    CHECK(hk_cache_deref_fast(c, d) == pd);
    CHECK_EQ(rank_of(c, d), 0);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

HKT_TEST(handle_table_full_reported) {
    hkt_errors_reset(&g_errs);
    hk_cache *c = hk_cache_create(
        &(hk_cache_desc){.size = 1 << 16, .max_handles = 2, .on_error = hkt_on_error, .error_user = &g_errs});
    CHECK(hk_cache_alloc(c, 8, NULL).value && hk_cache_alloc(c, 8, NULL).value);
    CHECK_EQ(hk_cache_alloc(c, 8, "third").value, 0);
    CHECK_EQ(g_errs.last_kind, HK_EK_NOMEM);
    CHECK_STR_CONTAINS(g_errs.last_message, "handle table is full");
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

HKT_TEST(overflow_sizes_fail_cleanly) {
    hk_cache *c = mk(1 << 16, 0);
    CHECK_EQ(hk_cache_alloc(c, SIZE_MAX, "big").value, 0);
    CHECK_EQ(g_errs.last_kind, HK_EK_OVERFLOW);
    CHECK_EQ(hk_cache_alloc(c, SIZE_MAX - 20, "big").value, 0);
    CHECK_EQ(hk_cache_alloc(c, (size_t)1 << 30, "huge").value, 0);
    CHECK_EQ(g_errs.last_kind, HK_EK_NOMEM);
    hk_cache_handle a = hk_cache_alloc(c, 10, "a");
    CHECK_EQ(hk_cache_resize(c, a, SIZE_MAX), HK_ERR_OVERFLOW);
    CHECK_EQ(hk_cache_reallocate(c, a, SIZE_MAX - 8), HK_ERR_OVERFLOW);
    CHECK_EQ(hk_cache_size(c, a), 10);
    hk_stats st;
    hk_cache_stats(c, &st);
    CHECK_EQ(st.fail_count, 5);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

HKT_TEST(lock_counts_and_misuse) {
    hk_cache *c = mk(1 << 16, 0);
    hk_cache_handle a = hk_cache_alloc(c, 32, "pinned");
    CHECK_EQ(hk_cache_lock(c, a), HK_OK);
    CHECK_EQ(hk_cache_lock(c, a), HK_OK);
    CHECK_EQ(hk_cache_lock_count(c, a), 2);
    hkt_errors_reset(&g_errs);
    CHECK_EQ(hk_cache_free(c, a), HK_ERR_LOCKED);
    CHECK_EQ(g_errs.last_kind, HK_EK_LOCKED);
    CHECK_STR_CONTAINS(g_errs.last_message, "'pinned'");
    CHECK(hk_cache_deref(c, a) != NULL);
    CHECK_EQ(hk_cache_purge(c, a), HK_ERR_LOCKED);
    CHECK_EQ(hk_cache_move_high(c, a), HK_ERR_LOCKED);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    CHECK_EQ(hk_cache_unlock(c, a), HK_OK);
    CHECK_EQ(hk_cache_unlock(c, a), HK_OK);
    hkt_errors_reset(&g_errs);
    CHECK_EQ(hk_cache_unlock(c, a), HK_ERR_STATE);
    CHECK_EQ(g_errs.last_kind, HK_EK_STATE);
    CHECK_STR_CONTAINS(g_errs.last_message, "not locked");
    CHECK_EQ(hk_cache_check(c), HK_OK);
    for (int i = 0; i < 65535; i++) hk_cache_lock(c, a);
    CHECK_EQ(hk_cache_lock(c, a), HK_ERR_OVERFLOW);
    CHECK_EQ(hk_cache_lock_count(c, a), 65535);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

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

typedef struct walk_acc {
    int used, freeb, purged, locked, purgeable;
    uint32_t rank_of_a;
    uint32_t a;
    size_t bytes;
    void *last;
    int ordered;
} walk_acc;

static int walk_cb(const hk_block_info *bi, void *user) {
    walk_acc *w = (walk_acc *)user;
    if (bi->flags & HK_BLOCK_PURGED) {
        w->purged++;
        CHECK(bi->address == NULL);
        return 0;
    }
    if (w->last && bi->address <= w->last) w->ordered = 0;
    w->last = bi->address;
    w->bytes += bi->size + 16;
    if (!(bi->flags & HK_BLOCK_USED)) {
        w->freeb++;
        return 0;
    }
    w->used++;
    if (bi->flags & HK_BLOCK_LOCKED) w->locked++;
    if (bi->flags & HK_BLOCK_PURGEABLE) w->purgeable++;
    if (bi->id == w->a) w->rank_of_a = bi->rank;
    return 0;
}

static int walk_stop(const hk_block_info *bi, void *user) {
    (void)bi;
    return ++*(int *)user == 2 ? 7 : 0;
}

HKT_TEST(walk_where_and_dump) {
    hk_cache *c = mk(64 * 1024, 0);
    hk_cache_handle h[5];
    for (int i = 0; i < 5; i++) h[i] = hk_cache_alloc(c, 100 * (size_t)(i + 1), i == 2 ? "sky" : "thing");
    hk_cache_free(c, h[1]);
    hk_cache_lock(c, h[0]);
    hk_cache_set_purgeable(c, h[3], true);
    hk_cache_purge(c, h[4]);
    hk_cache_deref(c, h[2]); /* most recently used */
    walk_acc w = {0};
    w.a = h[2].value;
    w.rank_of_a = 99;
    w.ordered = 1;
    CHECK_EQ(hk_cache_walk(c, walk_cb, &w), 0);
    CHECK_EQ(w.used, 3);
    CHECK_EQ(w.freeb, 2);
    CHECK_EQ(w.purged, 1);
    CHECK_EQ(w.locked, 1);
    CHECK_EQ(w.purgeable, 1);
    CHECK_EQ(w.rank_of_a, 0);
    CHECK(w.ordered);
    hk_stats st;
    hk_cache_stats(c, &st);
    CHECK_EQ(w.bytes + 16, st.capacity);
    int count = 0;
    CHECK_EQ(hk_cache_walk(c, walk_stop, &count), 7);
    hk_block_info bi;
    unsigned char *p = hk_cache_deref(c, h[2]);
    CHECK_EQ(hk_cache_where(c, p + 150, &bi), HK_OK);
    CHECK(bi.address == p);
    CHECK_EQ(bi.id, h[2].value);
    CHECK_STR_CONTAINS(bi.name, "sky");
    CHECK_EQ(hk_cache_where(c, p - 8, &bi), HK_OK); /* its header */
    CHECK(bi.address == p);
    CHECK_EQ(hk_cache_where(c, &bi, &bi), HK_ERR_FOREIGN);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    hk_cache_dump(c, hk_print_file, f);
    fclose(f);
    CHECK_STR_CONTAINS(buf, "Displaying cache 'test'");
    CHECK_STR_CONTAINS(buf, "sky");
    CHECK_STR_CONTAINS(buf, " R ");
    CHECK_STR_CONTAINS(buf, " F");
    CHECK_STR_CONTAINS(buf, "Empty (purged) handles");
    CHECK_STR_CONTAINS(buf, "Total blocks: 5");
    if (getenv("HKT_VERBOSE")) fputs(buf, stdout);
    free(buf);
    hk_cache_destroy(c);
}

HKT_TEST(check_finds_damage_and_free_reports_canary) {
    hk_cache *c = mk(64 * 1024, 0);
    hk_cache_handle a = hk_cache_alloc(c, 20, "victim"), b = hk_cache_alloc(c, 20, "next");
    unsigned char *p = hk_cache_deref(c, a);
    hk__san_access(p + 20, 4); /* step past ASan's poison: we mean to damage the canary */
    unsigned char saved = p[21];
    p[21] = 0;
    hkt_errors_reset(&g_errs);
    CHECK_EQ(hk_cache_check(c), HK_ERR_CORRUPT);
    CHECK_EQ(g_errs.last_kind, HK_EK_CORRUPT_CANARY);
    CHECK_STR_CONTAINS(g_errs.last_message, "'victim'");
    CHECK_STR_CONTAINS(g_errs.last_message, "1 bytes past the end");
    hk__san_access(p + 20, 4); /* check poisoned the canary again */
    p[21] = saved;
    CHECK_EQ(hk_cache_check(c), HK_OK);
    /* header damage */
    uint32_t *hdr = (uint32_t *)(void *)(p - 16);
    uint32_t m = hdr[0];
    hdr[0] = 0x12345678u;
    CHECK_EQ(hk_cache_check(c), HK_ERR_CORRUPT);
    CHECK_EQ(g_errs.last_kind, HK_EK_CORRUPT_HEADER);
    hdr[0] = m;
    CHECK_EQ(hk_cache_check(c), HK_OK);
    /* free with a damaged canary: reported and freed anyway */
    hk__san_access(p + 20, 4);
    p[20] = 1;
    hkt_errors_reset(&g_errs);
    CHECK_EQ(hk_cache_free(c, a), HK_ERR_CORRUPT);
    CHECK_EQ(g_errs.last_kind, HK_EK_CORRUPT_CANARY);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    CHECK(hk_cache_deref(c, b) != NULL);
    hk_cache_destroy(c);
}

static int g_locks, g_unlocks;
static void lk(void *u) {
    (void)u;
    g_locks++;
}
static void ulk(void *u) {
    (void)u;
    g_unlocks++;
}

HKT_TEST(lock_hooks_wrap_every_call) {
    hk_cache *c = hk_cache_create(&(hk_cache_desc){.size = 1 << 16, .lock = {lk, ulk, NULL}});
    g_locks = g_unlocks = 0;
    hk_cache_handle a = hk_cache_alloc(c, 10, "a");
    CHECK(hk_cache_deref_fast(c, a) != NULL); /* takes the slow path with the lock */
    hk_cache_lock(c, a);
    hk_cache_unlock(c, a);
    hk_cache_compact(c);
    hk_stats st;
    hk_cache_stats(c, &st);
    hk_cache_check(c);
    hk_cache_free(c, a);
    CHECK_EQ(g_locks, 8);
    CHECK_EQ(g_unlocks, 8);
    hk_cache_destroy(c);
}

HKT_TEST(paranoid_mode_checks_each_operation) {
    hk_cache *c = mk(1 << 16, HK_FLAG_PARANOID);
    hk_cache_handle a = hk_cache_alloc(c, 10, "a");
    unsigned char *p = hk_cache_deref(c, a);
    hk__san_access(p + 10, 1);
    p[10] = 0;
    hkt_errors_reset(&g_errs);
    hk_cache_handle b = hk_cache_alloc(c, 10, "b"); /* the check after it notices */
    CHECK(b.value != 0);
    CHECK(g_errs.count >= 1);
    CHECK_EQ(g_errs.last_kind, HK_EK_CORRUPT_CANARY);
    hk__san_access(p + 10, 1);
    p[10] = HK_FILL_PAD;
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

HKT_TEST(null_arguments) {
    hk_cache_handle h = {1};
    CHECK_EQ(hk_cache_alloc(NULL, 1, NULL).value, 0);
    CHECK_EQ(hk_cache_free(NULL, h), HK_ERR_INVALID);
    CHECK(hk_cache_deref(NULL, h) == NULL);
    CHECK_EQ(hk_cache_check(NULL), HK_ERR_INVALID);
    CHECK_EQ(hk_cache_stats(NULL, NULL), HK_ERR_INVALID);
    CHECK_EQ(hk_cache_walk(NULL, walk_cb, NULL), -1);
    CHECK_EQ(hk_cache_compact(NULL), HK_ERR_INVALID);
    CHECK_EQ(hk_cache_compact_step(NULL, 0, 0, NULL), 0);
    CHECK_EQ(hk_cache_purge_all(NULL), 0);
    CHECK(!hk_cache_is_purged(NULL, h));
    hk_cache_dump(NULL, NULL, NULL);
}

/* The instance core validates the lock hooks once: both or neither. */
HKT_TEST(half_set_lock_hooks_are_refused) {
    hkt_errors_reset(&g_errs);
    CHECK(hk_cache_create(&(hk_cache_desc){.size = 1 << 16,
                                           .name = "half",
                                           .lock = {lk, NULL, NULL},
                                           .on_error = hkt_on_error,
                                           .error_user = &g_errs}) == NULL);
    CHECK_EQ(g_errs.count, 1);
    CHECK_EQ(g_errs.last_kind, HK_EK_INVALID_ARG);
    CHECK_STR_CONTAINS(g_errs.last_message, "cache 'half'");
    CHECK_STR_CONTAINS(g_errs.last_message, "unlock is missing");
    hkt_errors_reset(&g_errs);
    CHECK(hk_cache_create(&(hk_cache_desc){
              .size = 1 << 16, .lock = {NULL, ulk, NULL}, .on_error = hkt_on_error, .error_user = &g_errs}) ==
          NULL);
    CHECK_EQ(g_errs.count, 1);
    CHECK_EQ(g_errs.last_result, HK_ERR_INVALID);
    CHECK_STR_CONTAINS(g_errs.last_message, "lock is missing");
}

/* Paranoid: every mutating call ends with the full check, the calls that
 * change only a handle's lock count or flags included. */
HKT_TEST(paranoid_mode_checks_lock_unlock_and_purgeable) {
    hk_cache *c = mk(1 << 16, HK_FLAG_PARANOID);
    hk_cache_handle a = hk_cache_alloc(c, 10, "a"), b = hk_cache_alloc(c, 10, "b");
    unsigned char *p = hk_cache_deref(c, a);
    hk__san_access(p + 10, 1);
    p[10] = 0;
    hkt_errors_reset(&g_errs);
    CHECK_EQ(hk_cache_lock(c, b), HK_OK);
    CHECK_EQ(g_errs.count, 1);
    CHECK_EQ(g_errs.last_kind, HK_EK_CORRUPT_CANARY);
    CHECK_STR_CONTAINS(g_errs.last_message, "'a'");
    CHECK_EQ(hk_cache_unlock(c, b), HK_OK);
    CHECK_EQ(g_errs.count, 2);
    CHECK_EQ(hk_cache_set_purgeable(c, b, true), HK_OK);
    CHECK_EQ(g_errs.count, 3);
    hkt_errors_reset(&g_errs);
    CHECK(hk_cache_size(c, b) == 10); /* not a mutating call: no check */
    CHECK_EQ(g_errs.count, 0);
    hk__san_access(p + 10, 1);
    p[10] = HK_FILL_PAD;
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

HKT_TEST(get_info_counts_handles_purges_and_moves) {
    hk_cache *c = mk(1 << 16, 0);
    hk_cache_info in;
    CHECK_EQ(hk_cache_get_info(c, &in), HK_OK);
    CHECK_EQ(in.max_handles, 1024);
    CHECK_EQ(in.live_handles, 0);
    CHECK(in.table_bytes >= 1024u * 48u);
    hk_stats st;
    hk_cache_stats(c, &st);
    CHECK_EQ(in.region_bytes, st.capacity);
    hk_cache_handle a = hk_cache_alloc(c, 100, "a"), b = hk_cache_alloc(c, 100, "b"),
                    d = hk_cache_alloc(c, 100, "d");
    hk_cache_set_purgeable(c, b, true);
    CHECK_EQ(hk_cache_purge(c, b), HK_OK);
    CHECK_EQ(hk_cache_free(c, a), HK_OK); /* a hole below d */
    CHECK_EQ(hk_cache_compact(c), HK_OK);
    CHECK_EQ(hk_cache_get_info(c, &in), HK_OK);
    CHECK_EQ(in.live_handles, 2);
    CHECK_EQ(in.empty_handles, 1);
    CHECK_EQ(in.retired_handles, 0);
    CHECK_EQ(in.purge_count, 1);
    CHECK(in.moved_bytes >= 128);
    CHECK_EQ(hk_cache_get_info(NULL, &in), HK_ERR_INVALID);
    CHECK_EQ(hk_cache_get_info(c, NULL), HK_ERR_INVALID);
    (void)d;
    hk_cache_destroy(c);
}

typedef struct text_acc {
    char buf[4096];
    size_t len;
    int pieces;
} text_acc;

static void collect(const char *text, void *user) {
    text_acc *t = (text_acc *)user;
    size_t n = strlen(text);
    if (t->len + n < sizeof t->buf) {
        memcpy(t->buf + t->len, text, n + 1);
        t->len += n;
    }
    t->pieces++;
}

HKT_TEST(dump_writes_through_a_print_fn) {
    hk_cache *c = mk(1 << 16, 0);
    hk_cache_handle a = hk_cache_alloc(c, 100, "alpha");
    hk_cache_lock(c, a);
    static text_acc t;
    memset(&t, 0, sizeof t);
    hk_cache_dump(c, collect, &t);
    CHECK(t.pieces >= 4);
    CHECK_STR_CONTAINS(t.buf, "Displaying cache 'test'");
    CHECK_STR_CONTAINS(t.buf, "alpha");
    CHECK_STR_CONTAINS(t.buf, "relocatable 1 (locked 1");
    hk_cache_unlock(c, a);
    hk_cache_destroy(c);
}

/* Misuse of handles: the shared handle table's verdicts (src/handles.h,
 * docs/cache.md), each reported once, and the cache stays consistent. */
HKT_TEST(handle_misuse_table) {
    hk_cache *c = mk(1 << 16, 0);
    hk_cache *other = mk(1 << 16, 0);
    hkt_errors_reset(&g_errs);
    hk_cache_handle a = hk_cache_alloc(c, 10, "a");
    /* none */
    CHECK_EQ(hk_cache_free(c, (hk_cache_handle){0}), HK_ERR_INVALID);
    CHECK_EQ(g_errs.last_kind, HK_EK_INVALID_ARG);
    /* freed, then freed again: double free */
    CHECK_EQ(hk_cache_free(c, a), HK_OK);
    CHECK_EQ(hk_cache_free(c, a), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(g_errs.last_kind, HK_EK_DOUBLE_FREE);
    /* freed, then used: stale */
    CHECK_EQ(hk_cache_touch(c, a), HK_ERR_STALE);
    CHECK_EQ(g_errs.last_kind, HK_EK_STALE);
    CHECK_EQ(hk_cache_size(c, a), 0);
    CHECK_EQ(g_errs.last_kind, HK_EK_STALE);
    /* freed, its slot reused, then freed again: stale, not a double free */
    hk_cache_handle fill[1024];
    int n = 0;
    for (; n < 1024; n++) {
        fill[n] = hk_cache_alloc(c, 0, "f");
        if ((fill[n].value & 0x7FFu) == (a.value & 0x7FFu)) break;
    }
    REQUIRE(n < 1024);
    CHECK(fill[n].value != a.value);
    CHECK_EQ(hk_cache_free(c, a), HK_ERR_STALE);
    CHECK_EQ(g_errs.last_kind, HK_EK_STALE);
    CHECK(hk_cache_deref(c, fill[n]) != NULL); /* the new owner is untouched */
    /* another cache's handle, and one beyond the table: foreign */
    hk_cache_handle o = hk_cache_alloc(other, 10, "o");
    CHECK_EQ(hk_cache_free(c, o), HK_ERR_FOREIGN);
    CHECK_EQ(g_errs.last_kind, HK_EK_FOREIGN_PTR);
    CHECK_EQ(hk_cache_lock(c, (hk_cache_handle){0x7FFu}), HK_ERR_FOREIGN);
    CHECK_EQ(g_errs.last_kind, HK_EK_FOREIGN_PTR);
    CHECK(hk_cache_deref(other, o) != NULL);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    CHECK_EQ(hk_cache_check(other), HK_OK);
    hk_cache_destroy(c);
    hk_cache_destroy(other);
}

/* Caller memory with an absurd size (SIZE_MAX, or running past the end of
 * the address space) is refused and reported before a byte is written. */
HKT_TEST(caller_memory_with_absurd_size_refused) {
    static _Alignas(64) unsigned char buf[1 << 20];
    memset(buf, 0x5a, sizeof buf);
    hkt_errors_reset(&g_errs);
    hk_cache_desc d = {0};
    d.memory = buf;
    d.size = SIZE_MAX;
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    CHECK(hk_cache_create(&d) == NULL);
    CHECK_EQ(g_errs.count, 1);
    CHECK_EQ(g_errs.last_kind, HK_EK_INVALID_ARG);
    d.size = SIZE_MAX - (uintptr_t)buf + 1; /* ends exactly at the top of the address space: wraps to 0 */
    CHECK(hk_cache_create(&d) == NULL);
    CHECK_EQ(g_errs.count, 2);
    size_t untouched = 0;
    for (size_t i = 0; i < sizeof buf; i++) untouched += buf[i] == 0x5a;
    CHECK_EQ(untouched, sizeof buf);
    d.size = sizeof buf; /* and the same memory with its true size works */
    hk_cache *c = hk_cache_create(&d);
    REQUIRE(c != NULL);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

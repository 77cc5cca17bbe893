/* Cache: handles, locks, the LRU clock, introspection and misuse reports.
 * Purging, allocation order, compaction, moving and scramble:
 * test_cache_compact.c; hunk coexistence: test_cache_hunk.c; randomized
 * model: test_cache_model.c. */
#define _GNU_SOURCE 1 /* open_memstream */
#include "cache_test_util.h"
#include "internal.h"

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

/* deref_fast: a hit writes nothing; a miss stamps once with the current
 * clock; blocks reached between two clock steps share a rank; empty, stale
 * and none handles go through hk_cache_deref (same results and reports). */
HKT_TEST(deref_fast_stamps_once_per_clock_value) {
    hk_cache *c = mk(1 << 16, 0);
    hk_cache_handle a = hk_cache_alloc(c, 64, "a"), b = hk_cache_alloc(c, 64, "b"),
                    d = hk_cache_alloc(c, 64, "d");
    CHECK(!fast_hits(c, a)); /* stamped by alloc (odd): the first deref_fast misses */
    void *pa = hk_cache_deref_fast(c, a);
    CHECK(pa == hk_cache_deref(c, a));
    CHECK(hk_cache_deref_fast(c, a) == pa);
    CHECK(fast_hits(c, a)); /* now a hit */
    uint64_t key = hot_word(c, a);
    for (int i = 0; i < 100; i++) CHECK(hk_cache_deref_fast(c, a) == pa);
    CHECK(hot_word(c, a) == key); /* repeated hits write nothing */
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

/* The 32-bit LRU clock wraps: stamps are compared by their age from the
 * tick, so the order is kept (ties too) and deref_fast keeps working. */
HKT_TEST(lru_clock_wraps_keeping_the_order) {
    hk_cache *c = mk(1 << 16, 0);
    hk_cache_handle a = hk_cache_alloc(c, 64, "a"), b = hk_cache_alloc(c, 64, "b"),
                    d = hk_cache_alloc(c, 64, "d");
    hk__cache_view *v = view_of(c);
    /* test hook: move the clock close to the limit (stamps stay older) */
    v->tick = 0xFFFFFE00u;
    hk_cache_touch(c, d);
    hk_cache_deref_fast(c, a);
    hk_cache_deref_fast(c, b);      /* a and b tie, newer than d */
    for (int i = 0; i < 300; i++) { /* the clock wraps */
        hk_cache_handle t = hk_cache_alloc(c, 16, "t");
        hk_cache_free(c, t);
    }
    CHECK(v->tick < 0x1000u);
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

/* tests/test_cache_fast.c - hk_cache_deref_fast and hk_cache_reader_deref
 * on their 8-byte hot entries (heapkit/detail/cache.h): every handle that is
 * not live and resident misses and gets hk_cache_deref's answer, the LRU
 * ranks blocks reached through them as recent, the epochs that tag the
 * entries wrap without a stale tag hitting, and the entries follow blocks
 * that move (compaction, a hunk taking memory back and giving it again). */
#include "cache_test_util.h"
#include "heapkit/hunk.h"

#include <pthread.h>

static hk_cache *mk_small(uint32_t handles, size_t size) {
    hkt_errors_reset(&g_errs);
    return hk_cache_create(&(hk_cache_desc){.size = size,
                                            .max_handles = handles,
                                            .name = "small",
                                            .on_error = hkt_on_error,
                                            .error_user = &g_errs});
}

/* deref_fast and a reader give h's address (or NULL) with the report
 * hk_cache_deref would give; `kind` is the expected report (0: none). */
static int both_answer(hk_cache *c, hk_cache_reader *r, hk_cache_handle h, void *want, hk_error_kind kind) {
    int ok = 1;
    int n0 = g_errs.count;
    ok &= hk_cache_deref_fast(c, h) == want;
    ok &= g_errs.count == n0 + (kind ? 1 : 0);
    if (kind) ok &= g_errs.last_kind == kind;
    ok &= hk_cache_reader_deref(r, h) == want;
    ok &= g_errs.count == n0 + (kind ? 2 : 0);
    if (kind) ok &= g_errs.last_kind == kind;
    return ok;
}

/* A freed handle whose slot is reused: the old handle and the new one land
 * on the same entry; only the new one hits, the old one is stale. */
HKT_TEST(stale_handle_of_a_reused_slot_never_hits) {
    hk_cache *c = mk_small(3, 1 << 16); /* 2 index bits: slots are reused soon */
    REQUIRE(c);
    hk_cache_handle a = hk_cache_alloc(c, 64, "a");
    hk_cache_reader r = hk_cache_reader_of(c);
    void *pa = hk_cache_deref_fast(c, a);
    CHECK(pa != NULL);
    CHECK(fast_hits(c, a));
    CHECK_EQ(hk_cache_free(c, a), HK_OK);
    CHECK(!fast_hits(c, a));
    CHECK(both_answer(c, &r, a, NULL, HK_EK_STALE));
    /* slots 1 and 2 are still fresh; then slot 0 comes back */
    hk_cache_handle b = hk_cache_alloc(c, 64, "b"), d = hk_cache_alloc(c, 64, "d");
    hk_cache_handle n = hk_cache_alloc(c, 64, "n");
    REQUIRE(b.value && d.value && n.value);
    CHECK_EQ(n.value & 3u, a.value & 3u);
    CHECK(n.value != a.value);
    void *pn = hk_cache_deref(c, n);
    CHECK(both_answer(c, &r, n, pn, (hk_error_kind)0));
    CHECK(fast_hits(c, n));
    CHECK(both_answer(c, &r, a, NULL, HK_EK_STALE)); /* still stale: the entry holds n's tag */
    CHECK(hk_cache_deref_fast(c, n) == pn);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

/* A purged block: its entry goes cold, deref_fast and the reader give NULL
 * without a report, and after reallocate they follow the new block. */
HKT_TEST(purged_block_misses_then_follows_its_new_block) {
    hk_cache *c = mk(1 << 16, 0);
    REQUIRE(c);
    hk_cache_handle a = hk_cache_alloc(c, 64, "a");
    hk_cache_set_purgeable(c, a, true);
    hk_cache_reader r = hk_cache_reader_of(c);
    void *pa = hk_cache_deref_fast(c, a);
    CHECK(hk_cache_reader_deref(&r, a) == pa);
    CHECK(fast_hits(c, a));
    CHECK_EQ(hk_cache_purge(c, a), HK_OK);
    CHECK(!fast_hits(c, a));
    CHECK(both_answer(c, &r, a, NULL, (hk_error_kind)0));
    CHECK_EQ(hk_cache_purge_all(c), 0);
    hk_cache_handle big = hk_cache_alloc(c, 200, "big"); /* takes a's old place */
    CHECK_EQ(hk_cache_reallocate(c, a, 96), HK_OK);
    void *na = hk_cache_deref(c, a);
    CHECK(na != NULL && na != pa);
    CHECK(both_answer(c, &r, a, na, (hk_error_kind)0));
    CHECK(hk_cache_deref_fast(c, big) == hk_cache_deref(c, big));
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

/* Freed, none and foreign handles, and handles of generation 0 (never
 * issued) at every index, the entries past the table's slots included:
 * none of them hits; each gets hk_cache_deref's report. */
HKT_TEST(freed_none_foreign_and_forged_handles_miss_with_reports) {
    hk_cache *c = mk_small(5, 1 << 16); /* 5 slots, 8 entries: 5..7 past the table */
    hk_cache *o = mk_small(5, 1 << 16);
    REQUIRE(c && o);
    hk_cache_handle h[5];
    for (int i = 0; i < 5; i++) h[i] = hk_cache_alloc(c, 32, "h");
    for (int i = 0; i < 5; i++) (void)hk_cache_deref_fast(c, h[i]); /* tagged: every entry can hit */
    hk_cache_reader r = hk_cache_reader_of(c);
    for (int i = 0; i < 5; i++) CHECK(fast_hits(c, h[i]));
    CHECK(both_answer(c, &r, (hk_cache_handle){0}, NULL, HK_EK_INVALID_ARG));
    for (uint32_t i = 1; i < 8; i++) CHECK(both_answer(c, &r, (hk_cache_handle){i}, NULL, HK_EK_FOREIGN_PTR));
    hk_cache_handle x = hk_cache_alloc(o, 32, "other");
    CHECK((x.value & 7u) == (h[0].value & 7u) && x.value != h[0].value);
    CHECK(both_answer(c, &r, x, NULL, HK_EK_FOREIGN_PTR));
    /* the next generation of a live slot: never issued yet */
    hk_cache_handle next = {h[1].value + 8u};
    CHECK(both_answer(c, &r, next, NULL, HK_EK_FOREIGN_PTR));
    CHECK_EQ(hk_cache_free(c, h[2]), HK_OK);
    CHECK(both_answer(c, &r, h[2], NULL, HK_EK_STALE));
    CHECK_EQ(hk_cache_free(c, h[2]), HK_ERR_DOUBLE_FREE);
    CHECK(both_answer(c, &r, h[2], NULL, HK_EK_STALE));
    CHECK(hk_cache_deref_fast(c, h[3]) == hk_cache_deref(c, h[3]));
    CHECK_EQ(hk_cache_check(c), HK_OK);
    CHECK_EQ(hk_cache_check(o), HK_OK);
    hk_cache_destroy(c);
    hk_cache_destroy(o);
}

/* Blocks reached with deref_fast (or a fresh reader) rank as the most
 * recent: when space runs out, the purgeable blocks not reached since are
 * purged first. */
HKT_TEST(fast_derefs_keep_blocks_from_being_purged_first) {
    hk_cache *c = mk(8192, 0);
    REQUIRE(c);
    hk_cache_handle h[4];
    for (int i = 0; i < 4; i++) {
        h[i] = hk_cache_alloc(c, 1024, "h");
        REQUIRE(h[i].value);
        hk_cache_set_purgeable(c, h[i], true);
    }
    /* allocation order made h[0] the least recently used; reach 0 and 1 */
    CHECK(hk_cache_deref_fast(c, h[0]) != NULL);
    hk_cache_reader r = hk_cache_reader_of(c);
    CHECK(hk_cache_reader_deref(&r, h[1]) != NULL);
    CHECK(hk_cache_deref_fast(c, h[0]) != NULL); /* a hit: no clock step */
    CHECK_EQ(rank_of(c, h[0]), 0);
    CHECK_EQ(rank_of(c, h[1]), 0);
    CHECK_EQ(rank_of(c, h[3]), 2);
    CHECK_EQ(rank_of(c, h[2]), 3);
    /* room for about two more blocks: h[2] goes first, then h[3] */
    hk_stats st;
    hk_cache_stats(c, &st);
    hk_cache_handle big = hk_cache_alloc(c, st.free + 1024, "big");
    REQUIRE(big.value);
    CHECK(hk_cache_is_purged(c, h[2]));
    CHECK(!hk_cache_is_purged(c, h[0]));
    CHECK(!hk_cache_is_purged(c, h[1]));
    CHECK(hk_cache_deref_fast(c, h[2]) == NULL);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

/* The epochs run out after 2^index_bits - 2 clock values; then every tag
 * goes cold. A block tagged in an epoch and not reached since must not hit
 * when that epoch value comes round again (its stamp is old): it misses and
 * is stamped anew, so it ranks as the most recent. */
HKT_TEST(epoch_wrap_makes_old_tags_miss) {
    hk_cache *c = mk_small(3, 1 << 16); /* epochs 1 and 2 */
    REQUIRE(c);
    hk__cache_view *v = view_of(c);
    CHECK_EQ(v->epoch_max, 2u);
    hk_cache_handle a = hk_cache_alloc(c, 64, "a"), b = hk_cache_alloc(c, 64, "b");
    void *pa = hk_cache_deref_fast(c, a);
    CHECK(fast_hits(c, a));
    uint32_t e = v->epoch;
    for (int k = 0; k < 4; k++) {
        hk_cache_touch(c, b); /* a clock step: b newer than a */
        CHECK_EQ(rank_of(c, a), 1);
        CHECK(v->epoch >= 1u && v->epoch <= v->epoch_max);
    }
    CHECK_EQ(v->epoch, e);   /* the same epoch value again */
    CHECK(!fast_hits(c, a)); /* cold since the wrap */
    CHECK(hk_cache_deref_fast(c, a) == pa);
    CHECK_EQ(rank_of(c, a), 0);
    CHECK_EQ(rank_of(c, b), 1);
    CHECK(fast_hits(c, a));
    /* a reader that holds an old epoch still answers right */
    hk_cache_reader r = hk_cache_reader_of(c);
    for (int k = 0; k < 5; k++) {
        hk_cache_touch(c, b);
        CHECK(hk_cache_reader_deref(&r, a) == pa);
        CHECK(hk_cache_reader_deref(&r, b) == hk_cache_deref(c, b));
        CHECK_EQ(hk_cache_check(c), HK_OK);
    }
    CHECK_EQ(g_errs.count, 0);
    hk_cache_destroy(c);
}

/* Many clock values and slot reuses through a small table: deref_fast and
 * a long-lived reader always answer as hk_cache_deref, and check passes. */
HKT_TEST(small_table_churn_matches_deref) {
    hk_cache *c = mk_small(7, 1 << 16);
    REQUIRE(c);
    hk_cache_reader r = hk_cache_reader_of(c);
    hk_cache_handle live[7] = {{0}}, dead[7] = {{0}};
    uint64_t seed = 7;
    for (int step = 0; step < 3000; step++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        int k = (int)((seed >> 33) % 7), op = (int)((seed >> 40) % 6);
        if (!live[k].value) {
            live[k] = hk_cache_alloc(c, 16 + (size_t)(seed >> 50) % 200, "x");
        } else if (op == 0) {
            hk_cache_free(c, live[k]);
            dead[k] = live[k];
            live[k].value = 0;
        } else if (op == 1) {
            hk_cache_purge(c, live[k]);
        } else if (op == 2) {
            hk_cache_touch(c, live[k]);
        } else if (op == 3 && hk_cache_is_purged(c, live[k])) {
            hk_cache_reallocate(c, live[k], 48);
        } else if (op == 4) {
            hk_cache_compact(c);
        }
        for (int j = 0; j < 7; j++) {
            if (live[j].value) {
                void *want = hk_cache_deref(c, live[j]);
                if (hk_cache_deref_fast(c, live[j]) != want || hk_cache_reader_deref(&r, live[j]) != want) {
                    CHECK(0);
                    step = 3000;
                }
            }
            if (dead[j].value) {
                int n0 = g_errs.count;
                CHECK(hk_cache_deref_fast(c, dead[j]) == NULL);
                CHECK(hk_cache_reader_deref(&r, dead[j]) == NULL);
                CHECK_EQ(g_errs.count, n0 + 2);
            }
        }
    }
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

/* check sees a hot entry that disagrees with its slot: a tag in an epoch
 * that is not the current one for a stamp older than the tick is fine, a
 * tag of another generation or a wrong offset is not. */
HKT_TEST(check_sees_a_damaged_hot_entry) {
    hk_cache *c = mk(1 << 16, 0);
    REQUIRE(c);
    hk_cache_handle a = hk_cache_alloc(c, 64, "a");
    (void)hk_cache_deref_fast(c, a);
    uint64_t *e =
        (uint64_t *)(void *)((unsigned char *)c + HK__CACHE_HOT_OFFSET) + (a.value & view_of(c)->idx_mask);
    uint64_t saved = *e;
    *e = saved + 2u; /* the offset 16 bytes off */
    CHECK_EQ(hk_cache_check(c), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(g_errs.last_message, "hot entry");
    *e = saved ^ ((uint64_t)(view_of(c)->idx_mask + 1u) << 32); /* another generation */
    CHECK_EQ(hk_cache_check(c), HK_ERR_CORRUPT);
    *e = saved;
    CHECK_EQ(hk_cache_check(c), HK_OK);
    /* the stamp of a block tagged in the current epoch is the tick */
    hk_cache_handle b = hk_cache_alloc(c, 64, "b");
    (void)hk_cache_deref_fast(c, b);
    view_of(c)->tick += 2u;
    CHECK_EQ(hk_cache_check(c), HK_ERR_CORRUPT);
    view_of(c)->tick -= 2u;
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

/* A cache in a hunk: blocks move when hunk allocations reach into the
 * middle, and when the hunk frees to a mark the cache takes memory back
 * below where its region started; deref_fast follows them all (the base of
 * the entries' offsets is the hunk's whole block area). */
HKT_TEST(hunk_cache_blocks_below_the_first_middle_are_reached) {
    hk_hunk *hu = hk_hunk_create(&(hk_hunk_desc){.size = 256 * 1024, .name = "main"});
    REQUIRE(hu);
    hk_hunk_mark m = hk_hunk_low_mark(hu);
    void *low = hk_hunk_alloc(hu, 64 * 1024, "level");
    REQUIRE(low);
    hkt_errors_reset(&g_errs);
    hk_cache *c = hk_cache_create(
        &(hk_cache_desc){.hunk = hu, .max_handles = 255, .on_error = hkt_on_error, .error_user = &g_errs});
    REQUIRE(c);
    void *ms;
    size_t mn;
    hk_hunk_free_range(hu, &ms, &mn);
    hk_cache_handle a = hk_cache_alloc(c, 1000, "a");
    memset(hk_cache_deref_fast(c, a), 0x3c, 1000);
    CHECK_EQ(hk_hunk_free_to_low_mark(hu, m), HK_OK);
    /* fill the old middle: the next allocations need the freed low memory */
    hk_cache_handle hs[64];
    int n = 0, below = 0;
    while (n < 64) {
        hs[n] = hk_cache_alloc(c, 4000, "f");
        if (!hs[n].value) break;
        unsigned char *p = hk_cache_deref_fast(c, hs[n]);
        CHECK(p == hk_cache_deref(c, hs[n]));
        if (p < (unsigned char *)ms) below = 1;
        memset(p, n, 4000);
        n++;
    }
    CHECK(below);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_reader r = hk_cache_reader_of(c);
    for (int k = 0; k < 2; k++) /* a miss that tags the entry, then a hit */
        for (int i = 0; i < n; i++) {
            unsigned char *p = hk_cache_reader_deref(&r, hs[i]), *q = hk_cache_deref_fast(c, hs[i]);
            CHECK(p && p == q && p[0] == (unsigned char)i && p[3999] == (unsigned char)i);
        }
    unsigned char *pa = hk_cache_deref_fast(c, a);
    CHECK(pa && pa[0] == 0x3c && pa[999] == 0x3c);
    /* a hunk allocation moves blocks out of its way */
    for (int i = 0; i < n; i += 2) hk_cache_free(c, hs[i]);
    void *again = hk_hunk_alloc(hu, 32 * 1024, "level2");
    CHECK(again != NULL);
    for (int i = 1; i < n; i += 2) {
        unsigned char *p = hk_cache_deref_fast(c, hs[i]);
        CHECK(p == hk_cache_deref(c, hs[i]));
        CHECK(p == NULL || (p[0] == (unsigned char)i && p[3999] == (unsigned char)i));
    }
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
    CHECK_EQ(hk_hunk_check(hu), HK_OK);
    hk_hunk_destroy(hu);
}

/* The 32-bit clock wraps (stamps are compared by their age): deref_fast
 * and a reader made before the wrap still answer right, the blocks they
 * reached keep their order, and the next access after it stamps anew. */
HKT_TEST(tick_wrap_keeps_fast_derefs_and_readers_right) {
    hk_cache *c = mk(1 << 16, 0);
    REQUIRE(c);
    hk_cache_handle a = hk_cache_alloc(c, 64, "a"), b = hk_cache_alloc(c, 64, "b"),
                    d = hk_cache_alloc(c, 64, "d");
    view_of(c)->tick = 0xFFFFFE00u; /* test hook: the clock near its limit (stamps stay older) */
    hk_cache_touch(c, d);
    hk_cache_reader r = hk_cache_reader_of(c);
    void *pa = hk_cache_reader_deref(&r, a), *pb = hk_cache_deref_fast(c, b); /* a and b tie, newer than d */
    CHECK(pa && pb);
    for (int i = 0; i < 300; i++) { /* the clock wraps */
        hk_cache_handle t = hk_cache_alloc(c, 16, "t");
        hk_cache_free(c, t);
    }
    CHECK(view_of(c)->tick < 0x1000u);
    CHECK_EQ(rank_of(c, a), 0);
    CHECK_EQ(rank_of(c, b), 0);
    CHECK_EQ(rank_of(c, d), 2);
    CHECK(hk_cache_reader_deref(&r, a) == pa);
    CHECK(hk_cache_reader_deref(&r, b) == pb);
    CHECK(hk_cache_deref_fast(c, d) == hk_cache_deref(c, d));
    CHECK(hk_cache_deref_fast(c, d) != NULL);
    CHECK_EQ(rank_of(c, d), 0);
    CHECK(hk_cache_reader_deref(&r, a) == pa); /* a hit at r's old epoch: a keeps its rank */
    CHECK_EQ(rank_of(c, a), 1);
    hk_cache_reader r2 = hk_cache_reader_of(c);
    CHECK(hk_cache_reader_deref(&r2, a) == pa); /* a miss for a new reader: stamped now */
    CHECK_EQ(rank_of(c, a), 0);
    CHECK_EQ(rank_of(c, b), 2);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

/* With lock hooks deref_fast reads the cache's words and entries without
 * the lock (and then always takes hk_cache_deref): another thread's calls,
 * under the lock, must not write what it reads. A locked block's address
 * stays put; the other thread steps the clock (epoch wraps every two steps
 * in this table) and reuses a slot. ThreadSanitizer saw a race here when
 * the epoch wrap of a slow cache rewrote its probe and entries. */
static pthread_mutex_t g_cmu = PTHREAD_MUTEX_INITIALIZER;
static void cache_mlock(void *u) {
    (void)u;
    pthread_mutex_lock(&g_cmu);
}
static void cache_munlock(void *u) {
    (void)u;
    pthread_mutex_unlock(&g_cmu);
}

typedef struct fast_job {
    hk_cache *c;
    hk_cache_handle h;
    void *p;
    int bad;
} fast_job;

static void *fast_reader_thread(void *arg) {
    fast_job *j = (fast_job *)arg;
    hk_cache_reader r = hk_cache_reader_of(j->c);
    for (int i = 0; i < 20000; i++) {
        if (hk_cache_deref_fast(j->c, j->h) != j->p) j->bad++;
        if (hk_cache_reader_deref(&r, j->h) != j->p) j->bad++;
    }
    return NULL;
}

HKT_TEST(lock_hooks_deref_fast_races_with_nothing) {
    hkt_errors_reset(&g_errs);
    hk_cache *c = hk_cache_create(&(hk_cache_desc){.size = 1 << 16,
                                                   .max_handles = 3,
                                                   .lock = {cache_mlock, cache_munlock, NULL},
                                                   .on_error = hkt_on_error,
                                                   .error_user = &g_errs});
    REQUIRE(c);
    hk_cache_handle h = hk_cache_alloc(c, 64, "pinned");
    CHECK_EQ(hk_cache_lock(c, h), HK_OK);
    fast_job j = {c, h, hk_cache_deref(c, h), 0};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, fast_reader_thread, &j) == 0);
    for (int i = 0; i < 20000; i++) {
        hk_cache_handle x = hk_cache_alloc(c, 16 + (size_t)(i % 5) * 16, "x");
        hk_cache_touch(c, h);
        hk_cache_free(c, x);
    }
    pthread_join(t, NULL);
    CHECK_EQ(j.bad, 0);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
}

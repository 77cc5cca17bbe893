/* Cache living in the free middle of a hunk (Quake): hunk allocations reach
 * into it, the cache moves blocks out of the way and purges what cannot
 * move; the user only notices through deref. Also the hunk's tenant hook. */
#include "heapkit/cache.h"
#include "heapkit/hunk.h"
#include "hk_test.h"
#include "internal.h"

static hkt_errors g_herrs, g_cerrs;
static int g_purges;

static void on_purge(hk_cache *c, hk_cache_handle h, void *data, size_t size, void *user) {
    (void)c;
    (void)h;
    (void)data;
    (void)size;
    (void)user;
    g_purges++;
}

typedef struct world {
    hk_hunk *h;
    hk_cache *c;
} world;

static world mk_world(size_t size) {
    world w;
    hkt_errors_reset(&g_herrs);
    hkt_errors_reset(&g_cerrs);
    g_purges = 0;
    w.h = hk_hunk_create(
        &(hk_hunk_desc){.size = size, .name = "main", .on_error = hkt_on_error, .error_user = &g_herrs});
    w.c = hk_cache_create(&(hk_cache_desc){.hunk = w.h,
                                           .name = "assets",
                                           .max_handles = 512,
                                           .on_purge = on_purge,
                                           .on_error = hkt_on_error,
                                           .error_user = &g_cerrs});
    return w;
}

static void end_world(world w) {
    hk_cache_destroy(w.c);
    CHECK_EQ(hk_hunk_check(w.h), HK_OK);
    hk_hunk_destroy(w.h);
}

static void fill(hk_cache *c, hk_cache_handle h, unsigned char v) {
    memset(hk_cache_deref(c, h), v, hk_cache_size(c, h));
}
static int holds(hk_cache *c, hk_cache_handle h, unsigned char v) {
    unsigned char *p = hk_cache_deref(c, h);
    size_t n = hk_cache_size(c, h);
    return p && hk_fill_check(p, n, v) == n;
}

static int both_ok(world w) { return hk_cache_check(w.c) == HK_OK && hk_hunk_check(w.h) == HK_OK; }

HKT_TEST(cache_claims_the_free_middle) {
    world w = mk_world(256 * 1024);
    REQUIRE(w.h && w.c);
    void *ms;
    size_t mn;
    hk_hunk_free_range(w.h, &ms, &mn);
    hk_stats st;
    hk_cache_stats(w.c, &st);
    CHECK_EQ(st.capacity, mn);
    hk_cache_handle a = hk_cache_alloc(w.c, 1000, "a");
    unsigned char *p = hk_cache_deref(w.c, a);
    CHECK(p >= (unsigned char *)ms && p < (unsigned char *)ms + mn);
    CHECK(both_ok(w));
    /* one tenant per hunk */
    CHECK(hk_cache_create(&(hk_cache_desc){.hunk = w.h, .on_error = hkt_on_error, .error_user = &g_cerrs}) ==
          NULL);
    CHECK_EQ(g_herrs.last_kind, HK_EK_STATE);
    CHECK(both_ok(w));
    end_world(w);
}

HKT_TEST(hunk_low_growth_moves_cache_blocks) {
    world w = mk_world(256 * 1024);
    hk_cache_handle hs[20];
    for (int i = 0; i < 20; i++) {
        hs[i] = hk_cache_alloc(w.c, 2000, "blk");
        fill(w.c, hs[i], (unsigned char)(i + 1));
    }
    void *first = hk_cache_deref(w.c, hs[0]);
    /* the hunk grows from the bottom right through the first blocks */
    void *lvl = hk_hunk_alloc(w.h, 30000, "level");
    REQUIRE(lvl != NULL);
    memset(lvl, 0x99, 30000);
    CHECK(hk_cache_deref(w.c, hs[0]) != first);
    for (int i = 0; i < 20; i++) CHECK(holds(w.c, hs[i], (unsigned char)(i + 1)));
    CHECK_EQ(g_purges, 0);
    for (int i = 0; i < 20; i++)
        CHECK((unsigned char *)hk_cache_deref(w.c, hs[i]) >= (unsigned char *)lvl + 30000);
    CHECK(both_ok(w));
    /* and from the top */
    void *hi = hk_hunk_alloc_high(w.h, 40000, "video");
    REQUIRE(hi != NULL);
    memset(hi, 0x77, 40000);
    for (int i = 0; i < 20; i++) {
        CHECK(holds(w.c, hs[i], (unsigned char)(i + 1)));
        CHECK((unsigned char *)hk_cache_deref(w.c, hs[i]) < (unsigned char *)hi);
    }
    CHECK(hk_hunk_alloc_temp(w.h, 5000) != NULL);
    for (int i = 0; i < 20; i++) CHECK(holds(w.c, hs[i], (unsigned char)(i + 1)));
    CHECK(both_ok(w));
    CHECK_EQ(g_cerrs.count, 0);
    end_world(w);
}

HKT_TEST(hunk_growth_purges_what_cannot_move) {
    world w = mk_world(128 * 1024);
    hk_cache_handle keep[10], purge[30];
    for (int i = 0; i < 10; i++) {
        keep[i] = hk_cache_alloc(w.c, 1500, "keep");
        fill(w.c, keep[i], 0x10);
    }
    for (int i = 0; i < 30; i++) {
        purge[i] = hk_cache_alloc(w.c, 2000, "sound");
        REQUIRE(purge[i].value != 0);
        hk_cache_set_purgeable(w.c, purge[i], true);
    }
    hk_hunk_info hi;
    REQUIRE(hk_hunk_get_info(w.h, &hi) == HK_OK);
    size_t cap = hi.capacity;
    /* leave room for the keepers only */
    void *big = hk_hunk_alloc(w.h, cap - 24000, "map");
    REQUIRE(big != NULL);
    CHECK(g_purges > 0);
    for (int i = 0; i < 10; i++) CHECK(holds(w.c, keep[i], 0x10));
    int empty = 0;
    for (int i = 0; i < 30; i++) empty += hk_cache_is_purged(w.c, purge[i]);
    CHECK_EQ(empty, g_purges);
    CHECK(both_ok(w));
    /* a hunk allocation that would need a non-purgeable block gone fails cleanly */
    hkt_errors_reset(&g_herrs);
    CHECK(hk_hunk_alloc(w.h, 20000, "too much") == NULL);
    CHECK_EQ(g_herrs.last_kind, HK_EK_NOMEM);
    for (int i = 0; i < 10; i++) CHECK(holds(w.c, keep[i], 0x10));
    CHECK(both_ok(w));
    end_world(w);
}

HKT_TEST(locked_block_blocks_the_hunk) {
    world w = mk_world(128 * 1024);
    hk_cache_handle a = hk_cache_alloc(w.c, 1000, "pinned");
    hk_cache_set_purgeable(w.c, a, true);
    hk_cache_lock(w.c, a);
    void *pa = hk_cache_deref(w.c, a);
    hkt_errors_reset(&g_herrs);
    CHECK(hk_hunk_alloc(w.h, 500, "low") == NULL); /* the pinned block sits at the bottom */
    CHECK_EQ(g_herrs.last_kind, HK_EK_NOMEM);
    CHECK(hk_cache_deref(w.c, a) == pa);
    CHECK(!hk_cache_is_purged(w.c, a));
    CHECK(hk_hunk_alloc_high(w.h, 500, "high") != NULL); /* the top is free */
    CHECK(both_ok(w));
    hk_cache_unlock(w.c, a);
    CHECK(hk_hunk_alloc(w.h, 500, "low") != NULL); /* now it moves */
    CHECK(hk_cache_deref(w.c, a) != pa);
    CHECK(both_ok(w));
    end_world(w);
}

HKT_TEST(cache_takes_the_middle_back_after_free_to_mark) {
    world w = mk_world(128 * 1024);
    hk_hunk_mark m = hk_hunk_low_mark(w.h);
    hk_cache_handle a = hk_cache_alloc(w.c, 5000, "a");
    fill(w.c, a, 0x3C);
    CHECK(hk_hunk_alloc(w.h, 80000, "level") != NULL);
    CHECK(holds(w.c, a, 0x3C));
    hk_cache_space sp;
    hk_cache_max_block(w.c, &sp);
    CHECK(sp.now < 50000);
    CHECK_EQ(hk_hunk_free_to_low_mark(w.h, m), HK_OK);
    CHECK(both_ok(w));
    /* an allocation that does not fit makes the cache take the middle again */
    hk_cache_handle big = hk_cache_alloc(w.c, 90000, "big");
    CHECK(big.value != 0);
    CHECK(holds(w.c, a, 0x3C));
    CHECK(both_ok(w));
    end_world(w);
}

HKT_TEST(hunk_takes_everything_then_gives_back) {
    world w = mk_world(64 * 1024);
    hk_cache_handle a = hk_cache_alloc(w.c, 1000, "a");
    hk_cache_set_purgeable(w.c, a, true);
    hk_hunk_mark m = hk_hunk_low_mark(w.h);
    size_t mn;
    hk_hunk_free_range(w.h, NULL, &mn);
    /* a hunk block of n bytes takes 16 + round16(n + 8): this leaves 32 bytes, less than a cache region */
    void *all = hk_hunk_alloc(w.h, mn - 56, "all");
    REQUIRE(all != NULL);
    CHECK(hk_cache_is_purged(w.c, a));
    hk_stats st;
    hk_cache_stats(w.c, &st);
    CHECK_EQ(st.capacity, 0);
    CHECK(both_ok(w));
    hkt_errors_reset(&g_cerrs);
    CHECK_EQ(hk_cache_alloc(w.c, 10, "x").value, 0);
    CHECK_EQ(g_cerrs.last_kind, HK_EK_NOMEM);
    CHECK_EQ(hk_cache_compact(w.c), HK_OK);
    CHECK(both_ok(w));
    hk_hunk_free_to_low_mark(w.h, m);
    CHECK_EQ(hk_cache_reallocate(w.c, a, 1000), HK_OK);
    CHECK(both_ok(w));
    end_world(w);
}

HKT_TEST(non_purgeable_everything_refuses_the_hunk) {
    world w = mk_world(64 * 1024);
    hk_cache_handle a = hk_cache_alloc(w.c, 1000, "a");
    fill(w.c, a, 0x61);
    size_t mn;
    hk_hunk_free_range(w.h, NULL, &mn);
    CHECK(hk_hunk_alloc(w.h, mn - 200, "all") == NULL);
    CHECK(holds(w.c, a, 0x61));
    CHECK(both_ok(w));
    end_world(w);
}

typedef struct grow_hunk {
    hk_hunk *h;
    hk_hunk_mark mark;
    int calls;
} grow_hunk;

static size_t free_hunk_level(hk_cache *c, size_t needed, void *user) {
    grow_hunk *g = (grow_hunk *)user;
    (void)c;
    (void)needed;
    if (g->calls++) return 0;
    return hk_hunk_free_to_low_mark(g->h, g->mark) == HK_OK;
}

HKT_TEST(grow_callback_frees_hunk_memory) {
    hkt_errors_reset(&g_herrs);
    hk_hunk *h =
        hk_hunk_create(&(hk_hunk_desc){.size = 128 * 1024, .on_error = hkt_on_error, .error_user = &g_herrs});
    grow_hunk g = {h, hk_hunk_low_mark(h), 0};
    CHECK(hk_hunk_alloc(h, 90000, "old level") != NULL);
    hk_cache *c = hk_cache_create(&(hk_cache_desc){.hunk = h, .grow = free_hunk_level, .grow_user = &g});
    REQUIRE(c != NULL);
    hk_cache_handle x = hk_cache_alloc(c, 60000, "big");
    CHECK(x.value != 0);
    CHECK_EQ(g.calls, 1);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_cache_destroy(c);
    hk_hunk_destroy(h);
}

HKT_TEST(tenant_hook_misuse_reported) {
    hkt_errors_reset(&g_herrs);
    hk_hunk *h =
        hk_hunk_create(&(hk_hunk_desc){.size = 64 * 1024, .on_error = hkt_on_error, .error_user = &g_herrs});
    void *ms;
    size_t mn;
    hk_hunk_free_range(h, &ms, &mn);
    CHECK_EQ(hk_hunk_set_tenant_range(h, ms, 64), HK_ERR_STATE);
    CHECK_EQ(g_herrs.last_kind, HK_EK_STATE);
    hk_cache *c = hk_cache_create(&(hk_cache_desc){.hunk = h});
    REQUIRE(c != NULL);
    CHECK_EQ(hk_hunk_set_tenant_range(h, (char *)ms + 8, 64), HK_ERR_INVALID);
    CHECK_EQ(hk_hunk_set_tenant_range(h, ms, mn + 16), HK_ERR_INVALID);
    CHECK_EQ(g_herrs.last_kind, HK_EK_INVALID_ARG);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    CHECK_EQ(hk_cache_check(c), HK_OK);
    hk_cache_destroy(c);
    /* after destroy the hunk has no tenant and all its middle */
    void *all = hk_hunk_alloc(h, mn - 128, "all");
    CHECK(all != NULL);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

/* Quake's pattern over many rounds: levels load on the hunk, assets come and
 * go in the cache, the user re-derefs after every hunk allocation. */
HKT_TEST(level_cycles_with_cache_in_the_middle) {
    world w = mk_world(512 * 1024);
    uint64_t seed = 12345;
    hk_cache_handle hs[64] = {{0}};
    unsigned char tag[64] = {0};
    for (int round = 0; round < 30; round++) {
        hk_hunk_mark m = hk_hunk_low_mark(w.h);
        for (int k = 0; k < 40; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            int i = (int)((seed >> 33) % 64);
            size_t sz = 256 + (size_t)((seed >> 20) % 6000);
            if (hs[i].value && !hk_cache_is_purged(w.c, hs[i])) {
                CHECK(holds(w.c, hs[i], tag[i]));
                hk_cache_free(w.c, hs[i]);
                hs[i].value = 0;
            } else {
                if (hs[i].value) hk_cache_free(w.c, hs[i]);
                hs[i] = hk_cache_alloc(w.c, sz, "asset");
                if (hs[i].value) {
                    tag[i] = (unsigned char)(seed >> 40);
                    fill(w.c, hs[i], tag[i]);
                    if ((seed >> 50) & 1) hk_cache_set_purgeable(w.c, hs[i], true);
                }
            }
            if (k % 10 == 0) {
                void *p = (seed >> 45) & 1 ? hk_hunk_alloc(w.h, 4000 + (size_t)(seed % 20000), "lvl")
                                           : hk_hunk_alloc_temp(w.h, 3000);
                (void)p;
            }
            REQUIRE(both_ok(w));
        }
        for (int i = 0; i < 64; i++)
            if (hs[i].value && !hk_cache_is_purged(w.c, hs[i])) CHECK(holds(w.c, hs[i], tag[i]));
        hk_hunk_free_temp(w.h);
        hk_hunk_free_to_low_mark(w.h, m);
    }
    end_world(w);
}

/* Cache: randomized operation sequences against a shadow model, with
 * hk_cache_check after every step and the contents of every resident block
 * verified (a block that moved must still hold its bytes). Three set-ups:
 * a plain cache, scramble mode, and a cache inside a hunk that grows and
 * shrinks under it. */
#include "heapkit/cache.h"
#include "heapkit/hunk.h"
#include "hk_test.h"
#include "internal.h"

#define MODEL_N 48

typedef struct shadow {
    hk_cache_handle h;
    int live, purged, purgeable;
    unsigned lock;
    size_t size;
    unsigned char tag;
} shadow;

static shadow g_m[MODEL_N];
static hkt_errors g_errs;
static int g_bad_purge;

static shadow *find(hk_cache_handle h) {
    for (int i = 0; i < MODEL_N; i++)
        if (g_m[i].live && g_m[i].h.value == h.value) return &g_m[i];
    return NULL;
}

static void model_on_purge(hk_cache *c, hk_cache_handle h, void *data, size_t size, void *user) {
    (void)c;
    (void)user;
    shadow *s = find(h);
    if (!s || s->purged || s->lock || size != s->size || (size && *(unsigned char *)data != s->tag))
        g_bad_purge++;
    if (s) s->purged = 1;
}

static uint64_t g_seed;
static uint32_t rnd(uint32_t n) {
    g_seed ^= g_seed << 13;
    g_seed ^= g_seed >> 7;
    g_seed ^= g_seed << 17;
    return (uint32_t)(g_seed % n);
}

static size_t rnd_size(void) {
    uint32_t k = rnd(10);
    return k < 6 ? rnd(200) : k < 9 ? 200 + rnd(2000) : 2000 + rnd(9000);
}

static int verify_all(hk_cache *c) {
    int ok = 1;
    for (int i = 0; i < MODEL_N; i++) {
        shadow *s = &g_m[i];
        if (!s->live) continue;
        if (hk_cache_is_purged(c, s->h) != (s->purged != 0)) ok = 0;
        if (s->purged) continue;
        unsigned char *p = hk_cache_deref(c, s->h);
        if (!p || hk_cache_size(c, s->h) != s->size || hk_fill_check(p, s->size, s->tag) != s->size) ok = 0;
        if (hk_cache_lock_count(c, s->h) != s->lock) ok = 0;
    }
    return ok;
}

static void refill(hk_cache *c, shadow *s) {
    s->tag = (unsigned char)(1 + rnd(250));
    if (s->size) memset(hk_cache_deref(c, s->h), s->tag, s->size);
}

/* One random step. `hk` may be NULL. */
static void step(hk_cache *c, hk_hunk *hk, hk_hunk_mark base) {
    shadow *s = &g_m[rnd(MODEL_N)];
    uint32_t op = rnd(hk ? 17 : 15);
    hkt_errors_reset(&g_errs);
    if (!s->live) {
        size_t n = rnd_size();
        hk_cache_handle h = hk_cache_alloc(c, n, "m");
        if (h.value) {
            memset(s, 0, sizeof *s);
            s->h = h;
            s->live = 1;
            s->size = n;
            refill(c, s);
        } else {
            CHECK_EQ(g_errs.last_kind, HK_EK_NOMEM);
        }
        return;
    }
    switch (op) {
    case 0:
    case 1: {
        hk_result r = hk_cache_free(c, s->h);
        if (s->lock) {
            CHECK_EQ(r, HK_ERR_LOCKED);
        } else {
            CHECK_EQ(r, HK_OK);
            hk_cache_handle old = s->h;
            s->live = 0;
            CHECK(hk_cache_deref(c, old) == NULL);
            CHECK_EQ(g_errs.last_kind, HK_EK_STALE);
        }
        break;
    }
    case 2:
    case 3: {
        size_t n = rnd_size();
        hk_result r = hk_cache_resize(c, s->h, n);
        if (s->purged)
            CHECK_EQ(r, HK_ERR_STATE);
        else if (r == HK_OK) {
            size_t keep = n < s->size ? n : s->size;
            unsigned char *p = hk_cache_deref(c, s->h);
            CHECK(hk_fill_check(p, keep, s->tag) == keep);
            s->size = n;
            memset(p, s->tag, n);
        } else {
            CHECK(r == HK_ERR_LOCKED || r == HK_ERR_NOMEM);
            if (r == HK_ERR_LOCKED) CHECK(s->lock > 0);
        }
        break;
    }
    case 4:
        if (s->lock < 3) {
            CHECK_EQ(hk_cache_lock(c, s->h), HK_OK);
            s->lock++;
        }
        break;
    case 5:
    case 6: {
        hk_result r = hk_cache_unlock(c, s->h);
        if (s->lock) {
            CHECK_EQ(r, HK_OK);
            s->lock--;
        } else {
            CHECK_EQ(r, HK_ERR_STATE);
            CHECK_EQ(g_errs.last_kind, HK_EK_STATE);
        }
        break;
    }
    case 7:
        s->purgeable = !s->purgeable;
        CHECK_EQ(hk_cache_set_purgeable(c, s->h, s->purgeable != 0), HK_OK);
        break;
    case 8: {
        hk_result r = hk_cache_purge(c, s->h);
        if (s->lock && !s->purged)
            CHECK_EQ(r, HK_ERR_LOCKED);
        else {
            CHECK_EQ(r, HK_OK);
            s->purged = 1;
        }
        break;
    }
    case 9: {
        size_t n = rnd_size();
        hk_result r = hk_cache_reallocate(c, s->h, n);
        if (s->lock && !s->purged)
            CHECK_EQ(r, HK_ERR_LOCKED);
        else if (r == HK_OK) {
            s->purged = 0;
            s->size = n;
            refill(c, s);
        } else {
            CHECK_EQ(r, HK_ERR_NOMEM);
            s->purged = 1;
        }
        break;
    }
    case 10: {
        void *before = s->purged ? NULL : hk_cache_deref(c, s->h);
        int more = hk_cache_compact_step(c, rnd(2) ? 1 + rnd(8000) : 0, 0, NULL);
        (void)more;
        if (s->lock && before) CHECK(hk_cache_deref(c, s->h) == before);
        break;
    }
    case 11:
        if (rnd(4) == 0)
            CHECK_EQ(hk_cache_compact(c), HK_OK);
        else
            CHECK_EQ(hk_cache_touch(c, s->h), HK_OK);
        break;
    case 12: {
        hk_result r = hk_cache_move_high(c, s->h);
        if (s->purged)
            CHECK_EQ(r, HK_ERR_STATE);
        else if (s->lock)
            CHECK_EQ(r, HK_ERR_LOCKED);
        else
            CHECK_EQ(r, HK_OK);
        break;
    }
    case 13: {
        hk_cache_space sp;
        hk_cache_max_block(c, &sp);
        CHECK(sp.now <= sp.compacted && sp.compacted <= sp.purged);
        if (sp.now) {
            /* what max_block promises without compacting must fit */
            hk_cache_handle t = hk_cache_alloc(c, rnd(2) ? sp.now : sp.now / 2, "probe");
            CHECK(t.value != 0);
            if (t.value) hk_cache_free(c, t);
        }
        break;
    }
    case 14: CHECK(hk_cache_deref_fast(c, s->h) == (s->purged ? NULL : hk_cache_deref(c, s->h))); break;
    case 15:
        if (hk) (void)hk_hunk_alloc(hk, 64 + rnd(9000), "lvl"); /* may fail: fine */
        break;
    case 16:
        if (hk) {
            if (rnd(3) == 0)
                hk_hunk_free_to_low_mark(hk, base);
            else
                (void)hk_hunk_alloc_high(hk, 64 + rnd(6000), "hi");
            if (rnd(3) == 0) hk_hunk_free_to_high_mark(hk, hk_hunk_high_mark(hk));
        }
        break;
    }
}

static void run(hk_cache *c, hk_hunk *hk, int steps) {
    memset(g_m, 0, sizeof g_m);
    g_bad_purge = 0;
    hk_hunk_mark base = hk ? hk_hunk_low_mark(hk) : (hk_hunk_mark){0, 0, 0, 0, 0, 0, 0, 0};
    hk_hunk_mark hbase = hk ? hk_hunk_high_mark(hk) : (hk_hunk_mark){0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < steps; i++) {
        step(c, hk, base);
        if (hk && i % 200 == 199) hk_hunk_free_to_high_mark(hk, hbase);
        if (hk_cache_check(c) != HK_OK) printf("    step %d: %s\n", i, g_errs.last_message);
        REQUIRE(hk_cache_check(c) == HK_OK);
        if (hk) REQUIRE(hk_hunk_check(hk) == HK_OK);
        if (i % 4 == 0 || hk) REQUIRE(verify_all(c));
    }
    CHECK_EQ(g_bad_purge, 0);
    hk_stats st;
    hk_cache_stats(c, &st);
    CHECK(st.alloc_count > (uint64_t)steps / 20);
}

/* HKT_SEED=n replays another sequence (for local hunting). */
static uint64_t seed_or(uint64_t dflt) {
    const char *e = getenv("HKT_SEED");
    return e ? strtoull(e, NULL, 0) * 0x9E3779B97F4A7C15ull + 1 : dflt;
}

static hk_cache *mk(uint32_t flags, hk_hunk *hk, size_t size) {
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    return hk_cache_create(&(hk_cache_desc){.size = size,
                                            .hunk = hk,
                                            .flags = flags | HK_FLAG_QUIET,
                                            .max_handles = 256,
                                            .on_purge = model_on_purge,
                                            .on_error = hkt_on_error,
                                            .error_user = &g_errs});
}

HKT_TEST(model_plain) {
    g_seed = seed_or(0x1234567887654321ull);
    hk_cache *c = mk(0, NULL, 96 * 1024);
    run(c, NULL, 100000);
    hk_cache_destroy(c);
}

HKT_TEST(model_fill_flag) {
    g_seed = seed_or(0xABCDEF0123ull);
    hk_cache *c = mk(HK_FLAG_FILL, NULL, 48 * 1024);
    run(c, NULL, 30000);
    hk_cache_destroy(c);
}

HKT_TEST(model_scramble) {
    g_seed = seed_or(0x5eed5eed5eedull);
    hk_cache *c = mk(HK_CACHE_SCRAMBLE, NULL, 64 * 1024);
    run(c, NULL, 20000);
    hk_cache_destroy(c);
}

HKT_TEST(model_in_hunk) {
    g_seed = seed_or(0x9e3779b97f4a7c15ull);
    hkt_errors herrs = {0};
    herrs.quiet = 1;
    hk_hunk *hk = hk_hunk_create(&(hk_hunk_desc){
        .size = 160 * 1024, .flags = HK_FLAG_QUIET, .on_error = hkt_on_error, .error_user = &herrs});
    hk_cache *c = mk(0, hk, 0);
    REQUIRE(c != NULL);
    run(c, hk, 40000);
    hk_cache_destroy(c);
    CHECK_EQ(hk_hunk_check(hk), HK_OK);
    hk_hunk_destroy(hk);
}

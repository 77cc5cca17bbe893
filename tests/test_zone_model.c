/* Zone: randomized operation sequences (alloc, tagged alloc, alloc_aligned,
 * calloc, realloc, free, change_tag, free_tags, purge) against a shadow
 * model, with hk_zone_check after every step, under several flag sets. */
#include "heapkit/zone.h"
#include "hk_test.h"
#include "internal.h"

#define NSLOT 96

typedef struct slot {
    unsigned char *p;
    size_t size;
    size_t align;
    int plain; /* from hk_zone_alloc / calloc: aligned as its size asks (natural_align) */
    int tag;
    unsigned char pat;
    void *owner; /* the block's owner pointer lives here */
    int owned;
} slot;

static uint64_t rng(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static int intact(const slot *s) {
    for (size_t i = 0; i < s->size; i++)
        if (s->p[i] != (unsigned char)(s->pat + i)) return 0;
    return 1;
}

static void paint(slot *s) {
    for (size_t i = 0; i < s->size; i++) s->p[i] = (unsigned char)(s->pat + i);
}

static size_t rand_size(uint64_t *r) {
    switch (rng(r) % 8) {
    case 0: return 0;
    case 1: return rng(r) % 16;
    case 2:
    case 3: return rng(r) % 128;
    case 4:
    case 5: return rng(r) % 1024;
    case 6: return rng(r) % 4096;
    default: return rng(r) % 20000;
    }
}

static const int k_tags[] = {HK_TAG_STATIC,     HK_TAG_LEVEL, HK_TAG_LEVSPEC, 70,
                             HK_TAG_PURGELEVEL, HK_TAG_CACHE};

/* Slots whose owner was cleared by the zone (purge on exhaustion) are gone. */
static void sync_purged(slot *sl, int *nlive) {
    for (int i = 0; i < NSLOT; i++)
        if (sl[i].p && sl[i].owned && sl[i].owner == NULL) {
            CHECK(sl[i].tag >= HK_TAG_PURGELEVEL);
            sl[i].p = NULL;
            (*nlive)--;
        }
}

/* The alignment hk_zone_alloc promises for n bytes: the largest power of
 * two up to 16 dividing n rounded up to 8 (small blocks), at least. */
static size_t natural_align(size_t n) {
    size_t r = n < 8 ? 8 : (n + 7) & ~(size_t)7;
    size_t low = r & (~r + 1);
    return low < 16 ? low : 16;
}

static void run_model(uint32_t flags, size_t mem_size, size_t grow, uint64_t seed, int steps) {
    hkt_errors errs = {0};
    static unsigned char mem[1 << 20] __attribute__((aligned(64)));
    hk_zone_desc d;
    memset(&d, 0, sizeof d);
    if (!grow) {
        d.memory = mem;
        d.size = mem_size;
    } else {
        d.size = mem_size;
        d.grow_size = grow;
        d.max_size = 4 << 20;
    }
    d.flags = flags;
    d.on_error = hkt_on_error;
    d.error_user = &errs;
    hk_zone *z = hk_zone_create(&d);
    REQUIRE(z != NULL);
    static slot sl[NSLOT];
    memset(sl, 0, sizeof sl);
    int nlive = 0;
    uint64_t r = seed;
    int expected_errors = 0;
    for (int step = 0; step < steps; step++) {
        int i = (int)(rng(&r) % NSLOT);
        slot *s = &sl[i];
        unsigned op = (unsigned)(rng(&r) % 100);
        if (!s->p) {
            size_t n = rand_size(&r);
            s->align = 16;
            s->plain = 0;
            s->owned = 0;
            s->tag = HK_TAG_STATIC;
            s->owner = NULL;
            if (op < 35) {
                s->p = hk_zone_alloc(z, n);
                s->align = natural_align(n);
                s->plain = 1;
            } else if (op < 70) {
                s->tag = k_tags[rng(&r) % 6];
                s->owned = 1;
                s->p = hk_zone_alloc_tagged(z, n, s->tag, &s->owner, "model");
                if (s->p) CHECK(s->owner == s->p);
            } else if (op < 85) {
                s->align = (size_t)1 << (rng(&r) % 13);
                s->p = hk_zone_alloc_aligned(z, s->align, n);
                if (s->p) CHECK(((uintptr_t)s->p & (s->align - 1)) == 0);
            } else {
                size_t cnt = 1 + rng(&r) % 8;
                n /= cnt;
                s->p = hk_zone_calloc(z, cnt, n);
                n *= cnt;
                s->align = natural_align(n);
                s->plain = 1;
                if (s->p)
                    for (size_t k = 0; k < n; k++)
                        if (s->p[k]) {
                            CHECK(s->p[k] == 0);
                            break;
                        }
            }
            sync_purged(sl, &nlive);
            if (s->p) {
                s->size = n;
                s->pat = (unsigned char)rng(&r);
                CHECK(hk_zone_usable_size(z, s->p) >= n);
                paint(s);
                nlive++;
            } else {
                CHECK_EQ(errs.last_kind, HK_EK_NOMEM);
                expected_errors++;
            }
        } else if (op < 45) {
            CHECK(intact(s));
            CHECK_EQ(hk_zone_free(z, s->p), HK_OK);
            if (s->owned) CHECK(s->owner == NULL);
            s->p = NULL;
            nlive--;
        } else if (op < 75) {
            size_t n = rand_size(&r);
            CHECK(intact(s));
            unsigned char *q = hk_zone_realloc(z, s->p, n);
            sync_purged(sl, &nlive);
            if (!s->p) continue; /* cannot happen: realloc never purges its own block */
            if (q) {
                if (s->plain) s->align = natural_align(n);
                CHECK(((uintptr_t)q & (s->align - 1)) == 0);
                if (s->owned) CHECK(s->owner == q);
                size_t keep = n < s->size ? n : s->size;
                for (size_t k = 0; k < keep; k++)
                    if (q[k] != (unsigned char)(s->pat + k)) {
                        CHECK(q[k] == (unsigned char)(s->pat + k));
                        break;
                    }
                s->p = q;
                s->size = n;
                paint(s);
            } else {
                CHECK_EQ(errs.last_kind, HK_EK_NOMEM);
                expected_errors++;
                CHECK(intact(s));
            }
        } else if (op < 85) {
            int t = k_tags[rng(&r) % 6];
            hk_result res = hk_zone_change_tag(z, s->p, t);
            if (t >= HK_TAG_PURGELEVEL && !s->owned) {
                CHECK_EQ(res, HK_ERR_INVALID);
                expected_errors++;
            } else if (res == HK_OK) {
                s->tag = t;
            } else {
                CHECK_EQ(res, HK_ERR_NOMEM); /* untracked block without room */
                expected_errors++;
            }
            CHECK_EQ(hk_zone_tag(z, s->p), s->tag);
        } else if (op < 92) {
            int lo = k_tags[rng(&r) % 6], hi = k_tags[rng(&r) % 6];
            if (lo > hi) {
                int t = lo;
                lo = hi;
                hi = t;
            }
            if (lo == HK_TAG_STATIC && rng(&r) % 4) lo = HK_TAG_LEVEL; /* the walk is rarer */
            size_t expect = 0;
            for (int k = 0; k < NSLOT; k++)
                if (sl[k].p && sl[k].tag >= lo && sl[k].tag <= hi) expect++;
            CHECK_EQ(hk_zone_free_tags(z, lo, hi), expect);
            for (int k = 0; k < NSLOT; k++)
                if (sl[k].p && sl[k].tag >= lo && sl[k].tag <= hi) {
                    if (sl[k].owned) CHECK(sl[k].owner == NULL);
                    sl[k].p = NULL;
                    nlive--;
                }
        } else {
            int level = rng(&r) % 2 ? HK_TAG_CACHE : 0;
            size_t expect = 0;
            for (int k = 0; k < NSLOT; k++)
                if (sl[k].p && sl[k].tag >= (level ? level : HK_TAG_PURGELEVEL)) expect++;
            CHECK_EQ(hk_zone_purge(z, level), expect);
            sync_purged(sl, &nlive);
        }
        if (hk_zone_check(z) != HK_OK) {
            printf("    check failed at step %d: %s\n", step, errs.last_message);
            REQUIRE(0);
        }
        hk_stats st;
        hk_zone_stats(z, &st);
        CHECK_EQ(st.live_blocks, (size_t)nlive);
        if (st.live_blocks != (size_t)nlive) REQUIRE(0);
    }
    for (int k = 0; k < NSLOT; k++)
        if (sl[k].p) {
            CHECK(intact(&sl[k]));
            CHECK_EQ(hk_zone_free(z, sl[k].p), HK_OK);
        }
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_stats st;
    hk_zone_stats(z, &st);
    CHECK_EQ(st.live_blocks, 0);
    CHECK_EQ(st.used, 0);
    CHECK_EQ((int)st.error_count, expected_errors);
    hk_zone_destroy(z);
}

HKT_TEST(model_plain) { run_model(0, 256 << 10, 0, 1, 30000); }
HKT_TEST(model_debug_flags) { run_model(HK_FLAG_FILL | HK_FLAG_CANARY, 256 << 10, 0, 2, 20000); }
HKT_TEST(model_track_all_site) { run_model(HK_ZONE_TRACK_ALL | HK_FLAG_RECORD_SITE, 128 << 10, 0, 3, 20000); }
HKT_TEST(model_tight_memory) { run_model(HK_FLAG_ZERO, 48 << 10, 0, 4, 20000); }
HKT_TEST(model_growing) { run_model(HK_FLAG_FILL, 32 << 10, 32 << 10, 5, 20000); }
HKT_TEST(model_paranoid) { run_model(HK_FLAG_PARANOID | HK_FLAG_CANARY, 64 << 10, 0, 6, 3000); }
HKT_TEST(model_no_runs) { run_model(HK_ZONE_NO_RUNS, 96 << 10, 0, 7, 30000); }
HKT_TEST(model_runs_growing) { run_model(0, 32 << 10, 32 << 10, 8, 20000); }
HKT_TEST(model_runs_large) { run_model(0, 1 << 20, 0, 9, 30000); }

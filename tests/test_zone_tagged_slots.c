/* Zone with HK_ZONE_THREADS: tagged slots. A small block allocated with a
 * kept tag (below the purge level) and neither owner nor name comes from
 * the calling thread's heap, with its tag in its slot header; free_tags
 * frees such slots one by one from the runs that hold them (static slots
 * of the same runs stay), individual frees (owner's and remote) keep each
 * run's count of tagged slots, realloc keeps the tag, change_tag keeps
 * refusing what a slot cannot hold, and check verifies it all. A level of
 * worker threads runs under ThreadSanitizer in `make check-tsan`. No CHECK
 * inside worker threads: they count failures, the main thread checks. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "zone_thr_test_util.h"

#include <pthread.h>

static int is_slot(void *p) { return zone_is_slot(hdr_of(p)); }

static void fill(void *p, size_t n, unsigned char v) { memset(p, v, n); }
static int same(const void *p, size_t n, unsigned char v) {
    for (size_t i = 0; i < n; i++)
        if (((const unsigned char *)p)[i] != v) return 0;
    return 1;
}

HKT_TEST(small_tagged_block_without_owner_or_name_is_a_slot) {
    hkt_errors e;
    hk_zone *z = mk_thr(&e);
    REQUIRE(z != NULL);
    void *p = hk_zone_alloc_tagged(z, 100, HK_TAG_LEVEL, NULL, NULL);
    REQUIRE(p != NULL);
    CHECK(is_slot(p));
    CHECK_EQ(hk_zone_tag(z, p), HK_TAG_LEVEL);
    CHECK_EQ(hk_zone_usable_size(z, p) >= 100, 1);
    /* a name or an owner needs a record: a tracked plain block, as before */
    void *named = hk_zone_alloc_tagged(z, 100, HK_TAG_LEVEL, NULL, "named");
    void *owned = NULL;
    void *q = hk_zone_alloc_tagged(z, 100, HK_TAG_LEVEL, &owned, NULL);
    REQUIRE(named != NULL && q != NULL);
    CHECK(!is_slot(named));
    CHECK(!is_slot(q));
    CHECK(owned == q);
    /* the same through alloc_ex: a slot with no owner, name or alignment */
    void *x = hk_zone_alloc_ex(z, &(hk_zone_alloc_desc){.size = 100, .tag = HK_TAG_LEVEL});
    void *xa = hk_zone_alloc_ex(z, &(hk_zone_alloc_desc){.size = 100, .align = 64, .tag = HK_TAG_LEVEL});
    REQUIRE(x != NULL && xa != NULL);
    CHECK(is_slot(x));
    CHECK(!is_slot(xa));
    CHECK_EQ((uintptr_t)xa % 64, 0);
    CHECK(hk_zone_alloc_ex(z, &(hk_zone_alloc_desc){.size = 100, .align = 3, .tag = HK_TAG_LEVEL}) == NULL);
    CHECK_EQ(e.last_result, HK_ERR_INVALID);
    CHECK_EQ(hk_zone_free(z, x), HK_OK);
    CHECK_EQ(hk_zone_free(z, xa), HK_OK);
    /* larger than a slot: a tracked block */
    void *big = hk_zone_alloc_tagged(z, 20000, HK_TAG_LEVEL, NULL, NULL);
    REQUIRE(big != NULL);
    CHECK(!is_slot(big));
    /* a purgeable tag without an owner is refused, as in any zone */
    CHECK(hk_zone_alloc_tagged(z, 100, HK_TAG_CACHE, NULL, NULL) == NULL);
    CHECK_EQ(e.last_result, HK_ERR_INVALID);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_stats s = stats_of(z);
    CHECK_EQ(s.live_blocks, 4);
    CHECK_EQ(s.used, 3 * 100 + 20000);
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_LEVEL), 4);
    CHECK(owned == NULL);
    s = stats_of(z);
    CHECK_EQ(s.live_blocks, 0);
    CHECK_EQ(s.used, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* Regression: with a purge level above HK_ZONE_TAG_MAX, tag 256 passed the
 * tagged-slot test (below the purge level), went into the header's 8-bit
 * tag as 0 and set a bit past the heap's tag map. It is refused, as on the
 * locked path. */
HKT_TEST(tag_past_the_tag_range_refused_with_a_high_purge_level) {
    hkt_errors e;
    memset(&e, 0, sizeof e);
    e.quiet = 1;
    hk_zone *z = hk_zone_create(&(hk_zone_desc){.size = 1 << 20,
                                                .flags = HK_ZONE_THREADS | HK_FLAG_QUIET,
                                                .purge_level = 300,
                                                .on_error = hkt_on_error,
                                                .error_user = &e});
    REQUIRE(z != NULL);
    CHECK(hk_zone_alloc_tagged(z, 100, 256, NULL, NULL) == NULL);
    CHECK_EQ(e.last_result, HK_ERR_INVALID);
    void *p = hk_zone_alloc_tagged(z, 100, HK_ZONE_TAG_MAX, NULL, NULL);
    REQUIRE(p != NULL);
    CHECK(is_slot(p));
    CHECK_EQ(hk_zone_tag(z, p), HK_ZONE_TAG_MAX);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free_tags(z, HK_ZONE_TAG_MAX, HK_ZONE_TAG_MAX), 1);
    CHECK_EQ(live_of(z), 0);
    CHECK_EQ(e.count, 1);
    hk_zone_destroy(z);
}

HKT_TEST(plain_zone_keeps_tracking_small_tagged_blocks) {
    hkt_errors e;
    memset(&e, 0, sizeof e);
    hk_zone *z = hk_zone_create(&(hk_zone_desc){.size = 1 << 20, .on_error = hkt_on_error, .error_user = &e});
    REQUIRE(z != NULL);
    void *p = hk_zone_alloc_tagged(z, 100, HK_TAG_LEVEL, NULL, NULL);
    REQUIRE(p != NULL);
    CHECK(!is_slot(p));
    CHECK_EQ(hk_zone_change_tag(z, p, HK_TAG_LEVSPEC), HK_OK);
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_LEVSPEC, HK_TAG_LEVSPEC), 1);
    CHECK_EQ(e.count, 0);
    hk_zone_destroy(z);
}

/* Static and tagged blocks of the same sizes, interleaved: they share runs. */
#define MIX 600
HKT_TEST(free_tags_frees_tagged_slots_and_keeps_their_static_neighbours) {
    hkt_errors e;
    hk_zone *z = mk_thr(&e);
    REQUIRE(z != NULL);
    static void *st[MIX], *lv[MIX];
    size_t st_bytes = 0;
    for (int i = 0; i < MIX; i++) {
        size_t n = 16 + (size_t)(i % 40) * 24;
        st[i] = hk_zone_alloc(z, n);
        lv[i] = hk_zone_alloc_tagged(z, n, i % 3 ? HK_TAG_LEVEL : HK_TAG_LEVSPEC, NULL, NULL);
        REQUIRE(st[i] != NULL && lv[i] != NULL);
        CHECK(is_slot(lv[i]));
        fill(st[i], n, (unsigned char)i);
        fill(lv[i], n, 0xA5);
        st_bytes += n;
    }
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* the static range spares the tagged slots */
    size_t levspec = (MIX + 2) / 3;
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_LEVSPEC, HK_TAG_LEVSPEC), levspec);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_LEVEL), (size_t)MIX - levspec);
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_LEVSPEC), 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_stats s = stats_of(z);
    CHECK_EQ(s.live_blocks, MIX);
    CHECK_EQ(s.used, st_bytes);
    int intact = 1;
    for (int i = 0; i < MIX; i++) intact &= same(st[i], 16 + (size_t)(i % 40) * 24, (unsigned char)i);
    CHECK(intact);
    /* the freed slots serve new allocations; then everything goes */
    for (int i = 0; i < MIX; i++) {
        lv[i] = hk_zone_alloc_tagged(z, 16 + (size_t)(i % 40) * 24, HK_TAG_LEVEL, NULL, NULL);
        REQUIRE(lv[i] != NULL);
    }
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_STATIC, HK_TAG_STATIC), (size_t)MIX);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(stats_of(z).live_blocks, MIX);
    CHECK_EQ(hk_zone_tag(z, lv[7]), HK_TAG_LEVEL);
    CHECK_EQ(hk_zone_free_tags(z, 1, HK_ZONE_TAG_MAX), (size_t)MIX);
    s = stats_of(z);
    CHECK_EQ(s.live_blocks, 0);
    CHECK_EQ(s.used, 0);
    CHECK_EQ(s.alloc_count, s.free_count);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(e.count, 0);
    hk_zone_destroy(z);
}

HKT_TEST(tagged_slot_freed_one_by_one_and_twice) {
    hkt_errors e;
    hk_zone *z = mk_thr(&e);
    REQUIRE(z != NULL);
    void *p = hk_zone_alloc_tagged(z, 48, HK_TAG_LEVEL, NULL, NULL);
    void *q = hk_zone_alloc_tagged(z, 48, HK_TAG_LEVEL, NULL, NULL);
    REQUIRE(p != NULL && q != NULL);
    CHECK_EQ(hk_zone_free(z, p), HK_OK);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, p), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(e.last_kind, HK_EK_DOUBLE_FREE);
    CHECK_EQ(e.count, 1);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* interior pointer: reported, nothing freed */
    CHECK(hk_zone_free(z, (char *)q + 16) != HK_OK);
    CHECK_EQ(e.count, 2);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_LEVEL), 1);
    CHECK_EQ(stats_of(z).live_blocks, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(realloc_keeps_a_tagged_slots_tag) {
    hkt_errors e;
    hk_zone *z = mk_thr(&e);
    REQUIRE(z != NULL);
    unsigned char *p = hk_zone_alloc_tagged(z, 200, HK_TAG_LEVEL, NULL, NULL);
    REQUIRE(p != NULL);
    fill(p, 200, 0x3C);
    unsigned char *q = hk_zone_realloc(z, p, 190); /* in place */
    CHECK(q == p);
    CHECK_EQ(hk_zone_tag(z, q), HK_TAG_LEVEL);
    q = hk_zone_realloc(z, q, 900); /* another slot */
    REQUIRE(q != NULL);
    CHECK(is_slot(q));
    CHECK_EQ(hk_zone_tag(z, q), HK_TAG_LEVEL);
    CHECK(same(q, 190, 0x3C));
    q = hk_zone_realloc(z, q, 40000); /* larger than a slot: a tracked block */
    REQUIRE(q != NULL);
    CHECK(!is_slot(q));
    CHECK_EQ(hk_zone_tag(z, q), HK_TAG_LEVEL);
    CHECK(same(q, 190, 0x3C));
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(stats_of(z).live_blocks, 1);
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_LEVEL), 1);
    CHECK_EQ(stats_of(z).live_blocks, 0);
    CHECK_EQ(e.count, 0);
    hk_zone_destroy(z);
}

HKT_TEST(change_tag_of_a_tagged_slot) {
    hkt_errors e;
    hk_zone *z = mk_thr(&e);
    REQUIRE(z != NULL);
    void *p = hk_zone_alloc_tagged(z, 64, HK_TAG_LEVEL, NULL, NULL);
    void *s = hk_zone_alloc(z, 64);
    REQUIRE(p != NULL && s != NULL);
    CHECK_EQ(hk_zone_change_tag(z, p, HK_TAG_LEVEL), HK_OK); /* its own tag: nothing to do */
    CHECK_EQ(hk_zone_change_tag(z, s, HK_TAG_STATIC), HK_OK);
    CHECK_EQ(e.count, 0);
    /* a slot keeps the tag it was allocated with: refused, nothing changed */
    CHECK_EQ(hk_zone_change_tag(z, p, HK_TAG_LEVSPEC), HK_ERR_NOMEM);
    CHECK_EQ(hk_zone_change_tag(z, p, HK_TAG_STATIC), HK_ERR_NOMEM);
    CHECK_EQ(hk_zone_change_tag(z, s, HK_TAG_LEVEL), HK_ERR_NOMEM);
    CHECK_EQ(hk_zone_change_tag(z, p, HK_TAG_CACHE), HK_ERR_INVALID); /* purgeable, no owner */
    CHECK_EQ(e.count, 4);
    CHECK_EQ(hk_zone_tag(z, p), HK_TAG_LEVEL);
    CHECK_EQ(hk_zone_tag(z, s), HK_TAG_STATIC);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_LEVEL), 1);
    CHECK_EQ(hk_zone_free(z, s), HK_OK);
    hk_zone_destroy(z);
}

typedef struct {
    int tags[HK_ZONE_TAG_MAX + 1];
    size_t blocks;
} tag_count;
static int count_tags(const hk_block_info *b, void *user) {
    tag_count *c = (tag_count *)user;
    if (b->flags & HK_BLOCK_USED) {
        c->tags[b->tag]++;
        c->blocks++;
    }
    return 0;
}

HKT_TEST(walk_shows_tagged_slots_with_their_tag_and_check_sees_damage) {
    hkt_errors e;
    hk_zone *z = mk_thr(&e);
    REQUIRE(z != NULL);
    void *p[10];
    for (int i = 0; i < 10; i++)
        REQUIRE((p[i] = hk_zone_alloc_tagged(z, 80, HK_TAG_LEVEL, NULL, NULL)) != NULL);
    void *s = hk_zone_alloc(z, 80);
    REQUIRE(s != NULL);
    tag_count c;
    memset(&c, 0, sizeof c);
    CHECK_EQ(hk_zone_walk(z, count_tags, &c), 0);
    CHECK_EQ(c.tags[HK_TAG_LEVEL], 10);
    CHECK_EQ(c.tags[HK_TAG_STATIC], 1);
    /* the run's count of tagged slots is verified */
    zone_run *r = run_of(p[0]);
    CHECK_EQ(r->ntag, 10);
    r->ntag--;
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    r->ntag++;
    /* and so is the heap's map of the tags it made slots of */
    zone_heap *h = zone_run_ext(r)->heap;
    REQUIRE(h != NULL);
    uint64_t saved = h->tagmap[HK_TAG_LEVEL >> 6];
    h->tagmap[HK_TAG_LEVEL >> 6] = 0;
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    h->tagmap[HK_TAG_LEVEL >> 6] = saved;
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free_tags(z, 1, HK_ZONE_TAG_MAX), 11);
    hk_zone_destroy(z);
}

/* A busy class of large slots: its runs double on to ZONE_RUN_BUSY_X slots,
 * so a heap takes the zone lock once per 32 such allocations, not 4. */
HKT_TEST(busy_class_of_large_slots_gets_runs_of_32) {
    hkt_errors e;
    hk_zone *z = mk_thr(&e);
    REQUIRE(z != NULL);
    static void *p[200];
    uint32_t most = 0;
    for (int i = 0; i < 200; i++) {
        REQUIRE((p[i] = hk_zone_alloc_tagged(z, 8000, HK_TAG_LEVEL, NULL, NULL)) != NULL);
        zone_run *r = run_of(p[i]);
        if (r->nslots > most) most = r->nslots;
    }
    CHECK_EQ(most, ZONE_RUN_BUSY_X);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_LEVEL), 200);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* the emptied runs went back to the core (a class keeps one current
     * and one spare run) */
    hk_stats s = stats_of(z);
    CHECK_EQ(s.used, 0);
    CHECK(s.free + 2 * 32 * 8192 + (1 << 16) >= s.capacity);
    hk_zone_destroy(z);
}

/* The owner's alloc of a tagged slot turns the free header into the used
 * one by one xor (zone_w_use_delta_tag), and a remote free turns it into
 * the remote one by another (ZONE_W_REMOTE_K): for every kept tag, class
 * and slack the xor must give exactly zone_hdr_make's header. */
HKT_TEST(tagged_slot_header_xor_matches_full_header) {
    static zone_blk slots[64] __attribute__((aligned(16)));
    int bad = 0, tried = 0;
    for (unsigned tag = HK_TAG_STATIC; tag < HK_TAG_PURGELEVEL; tag += 7)
        for (size_t n = 0; n <= ZONE_RUN_MAX_REQ; n += 1 + n / 16) {
            unsigned cls = zone_cls_of(n);
            uint32_t slack = zone_cls_stride(cls) - ZONE_OVERLAP - (uint32_t)n;
            uint32_t idx = (uint32_t)(n * 31 + tag) & 4095u;
            const zone_blk *b = &slots[(idx + cls) & 63];
            uint32_t word = zone_slot_word(idx, cls, 0);
            uint64_t freew = zone_hdr_make(b, word, 0, ZB_SLOT_FREE);
            uint64_t usedw = zone_hdr_make(b, word | (slack << 19), tag, ZB_SLOT_USED);
            bad += (freew ^ zone_w_use_delta_tag(slack, tag)) != usedw;
            bad += (usedw ^ ZONE_W_REMOTE_K) != zone_hdr_make(b, word | (slack << 19), tag, ZB_SLOT_REMOTE);
            tried++;
        }
    CHECK(tried > 1000);
    CHECK_EQ(bad, 0);
}

/* A run whose used slots are all tagged, in a heap that made slots of no
 * tag outside the range, is emptied by free_tags without reading its
 * slots (uncarved: its next allocations carve it again); a run that also
 * holds a static slot is freed slot by slot. Stale pointers into either
 * are reported, and check passes. */
HKT_TEST(free_tags_empties_a_run_of_level_slots_at_once) {
    hkt_errors e;
    hk_zone *z = mk_thr(&e);
    REQUIRE(z != NULL);
    enum { N = 40 };
    void *lv[N], *mixed[N];
    for (int i = 0; i < N; i++)
        REQUIRE((lv[i] = hk_zone_alloc_tagged(z, 3000, HK_TAG_LEVEL, NULL, NULL)) != NULL);
    for (int i = 0; i < N; i++)
        REQUIRE((mixed[i] = hk_zone_alloc_tagged(z, 100, HK_TAG_LEVEL, NULL, NULL)) != NULL);
    void *st = hk_zone_alloc(z, 100); /* in the run of the last 100-byte slots */
    REQUIRE(st != NULL);
    zone_run *pure = run_of(lv[N - 1]), *mix = run_of(st);
    REQUIRE(mix == run_of(mixed[N - 1]));
    uint32_t mix_bump = mix->bump;
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_LEVEL), (size_t)2 * N);
    CHECK_EQ(pure->used, 0u);
    CHECK_EQ(pure->bump, 0u); /* emptied at once */
    CHECK_EQ(mix->used, 1u);
    CHECK_EQ(mix->bump, mix_bump); /* slot by slot */
    CHECK_EQ(live_of(z), 1);
    CHECK_EQ(stats_of(z).used, 100);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK(hk_zone_free(z, lv[N - 1]) != HK_OK); /* stale */
    CHECK(hk_zone_free(z, mixed[0]) != HK_OK);
    CHECK_EQ(e.count, 2);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* the emptied run serves the next level */
    void *again = hk_zone_alloc_tagged(z, 3000, HK_TAG_LEVEL, NULL, NULL);
    REQUIRE(again != NULL);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* a heap that made slots of a tag outside the range: slot by slot */
    void *spec = hk_zone_alloc_tagged(z, 3000, HK_TAG_LEVSPEC, NULL, NULL);
    REQUIRE(spec != NULL);
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_LEVEL), 1);
    CHECK_EQ(hk_zone_tag(z, spec), HK_TAG_LEVSPEC);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free_tags(z, 1, HK_ZONE_TAG_MAX), 2);
    CHECK_EQ(live_of(z), 0);
    CHECK_EQ(stats_of(z).used, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* ---- a level made by worker threads --------------------------------------- */

#define WT     4
#define JOBS   64
#define LEVELS 4

typedef struct wctx {
    hk_zone *z;
    pthread_barrier_t *bar;
    unsigned id;
    int bad;
    size_t made;         /* tagged slots made this level (read by main after the barrier) */
    void *give[JOBS];    /* tagged slots the next worker frees (remote frees) */
    void *keep_at_exit;  /* a tagged slot left live when the thread exits */
    struct wctx *others; /* the array of all workers */
} wctx;

static uint32_t xs(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static void *worker(void *arg) {
    wctx *c = (wctx *)arg;
    wctx *all = (wctx *)c->others;
    uint32_t seed = 0x9E3779B9u * (c->id + 1);
    for (int L = 0; L < LEVELS; L++) {
        c->made = 0;
        for (int j = 0; j < JOBS; j++) {
            void *scratch[8];
            for (int i = 0; i < 8; i++)
                if (!(scratch[i] = hk_zone_alloc(c->z, 16 + xs(&seed) % 2000))) c->bad++;
            for (int i = 0; i < 4; i++) {
                size_t n = 64 + xs(&seed) % 8000;
                unsigned char *p =
                    hk_zone_alloc_tagged(c->z, n, i & 1 ? HK_TAG_LEVEL : HK_TAG_LEVSPEC, NULL, NULL);
                if (!p) {
                    c->bad++;
                    continue;
                }
                p[0] = p[n - 1] = (unsigned char)c->id;
                c->made++;
            }
            unsigned char *g = hk_zone_alloc_tagged(c->z, 32 + xs(&seed) % 500, HK_TAG_LEVEL, NULL, NULL);
            if (!g) c->bad++;
            c->give[j] = g;
            for (int i = 7; i >= 0; i--)
                if (hk_zone_free(c->z, scratch[i]) != HK_OK) c->bad++;
        }
        pthread_barrier_wait(c->bar); /* everyone's gifts are made */
        wctx *prev = &all[(c->id + WT - 1) % WT];
        for (int j = 0; j < JOBS; j++)
            if (prev->give[j] && hk_zone_free(c->z, prev->give[j]) != HK_OK) c->bad++; /* remote */
        pthread_barrier_wait(c->bar); /* the level is made: main frees it */
        pthread_barrier_wait(c->bar); /* main is done */
    }
    c->keep_at_exit = hk_zone_alloc_tagged(c->z, 300, HK_TAG_LEVEL, NULL, NULL);
    if (!c->keep_at_exit) c->bad++;
    return NULL;
}

HKT_TEST(workers_make_a_level_of_tagged_slots_main_frees_it) {
    hkt_errors e;
    hk_zone *z = mk_thr(&e);
    REQUIRE(z != NULL);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, WT + 1);
    wctx c[WT];
    pthread_t th[WT];
    memset(c, 0, sizeof c);
    for (unsigned i = 0; i < WT; i++) {
        c[i].z = z;
        c[i].bar = &bar;
        c[i].id = i;
        c[i].others = (struct wctx *)c;
        REQUIRE(pthread_create(&th[i], NULL, worker, &c[i]) == 0);
    }
    int ok = 1;
    for (int L = 0; L < LEVELS; L++) {
        pthread_barrier_wait(&bar);
        pthread_barrier_wait(&bar);
        /* workers quiescent: the level goes at once */
        size_t made = 0;
        for (unsigned i = 0; i < WT; i++) made += c[i].made;
        ok &= hk_zone_check(z) == HK_OK;
        ok &= hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_LEVSPEC) == made;
        ok &= hk_zone_check(z) == HK_OK;
        hk_stats s = stats_of(z);
        ok &= s.live_blocks == 0 && s.used == 0;
        pthread_barrier_wait(&bar);
    }
    for (unsigned i = 0; i < WT; i++) pthread_join(th[i], NULL);
    CHECK(ok);
    for (unsigned i = 0; i < WT; i++) CHECK_EQ(c[i].bad, 0);
    CHECK_EQ(e.count, 0);
    /* the exited threads' heaps are abandoned with a tagged slot each */
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(stats_of(z).live_blocks, WT);
    CHECK_EQ(hk_zone_tag(z, c[1].keep_at_exit), HK_TAG_LEVEL);
    CHECK_EQ(hk_zone_free(z, c[2].keep_at_exit), HK_OK); /* a remote free into an abandoned heap */
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_LEVEL), WT - 1);
    hk_stats s = stats_of(z);
    CHECK_EQ(s.live_blocks, 0);
    CHECK_EQ(s.alloc_count, s.free_count);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    pthread_barrier_destroy(&bar);
    hk_zone_destroy(z);
}

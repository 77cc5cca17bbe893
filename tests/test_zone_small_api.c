/*
 * tests/test_zone_small_api.c - the zone's small blocks (up to 16 KiB,
 * headerless, src/zone_small.*) through the public API: every size, its
 * alignment and usable size; every misuse of a free reported with the heap
 * intact; realloc, tags, free_tags, walk, where, stats, trim; the zones that
 * keep every block in the TLSF core.
 */
#include "hk_test.h"
#include "heapkit/zone.h"

#include <stdint.h>

enum { SMALL_MAX = 16384 }; /* the largest small request (zone.h) */

/* The test that reads a freed block on purpose tells AddressSanitizer so. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(TEST_ASAN)
#define TEST_ASAN 1
#endif
#ifdef TEST_ASAN
#include <sanitizer/asan_interface.h>
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

static hk_zone *mk_os(hkt_errors *errs, uint32_t flags) {
    hkt_errors_reset(errs);
    errs->quiet = 1;
    return hk_zone_create(&(hk_zone_desc){.size = 1 << 20,
                                          .grow_size = 1 << 20,
                                          .flags = flags,
                                          .name = "small",
                                          .on_error = hkt_on_error,
                                          .error_user = errs});
}

/* The alignment hk_zone_alloc promises n bytes (zone.h). */
static size_t natural_align(size_t n) {
    size_t r = n < 8 ? 8 : (n + 7) & ~(size_t)7;
    size_t low = r & (~r + 1);
    return low < 16 ? low : 16;
}

static size_t runs_of(hk_zone *z) {
    hk_zone_info info;
    hk_zone_get_info(z, &info);
    return info.runs;
}

HKT_TEST(every_size_aligned_and_headerless) {
    hkt_errors errs = {0};
    hk_zone *z = mk_os(&errs, 0);
    REQUIRE(z != NULL);
    static unsigned char *ps[SMALL_MAX + 1];
    size_t total = 0;
    for (size_t n = 0; n <= SMALL_MAX; n++) {
        unsigned char *p = hk_zone_alloc(z, n);
        REQUIRE(p != NULL);
        CHECK_EQ((uintptr_t)p % natural_align(n), 0);
        size_t u = hk_zone_usable_size(z, p);
        CHECK(u >= n && u <= n + n / 8 + 8); /* classes at most 12.5% (or 8 bytes) apart */
        hk_block_info bi;
        CHECK_EQ(hk_zone_where(z, p, &bi), HK_OK);
        CHECK(bi.address == p && bi.size == u && (bi.flags & HK_BLOCK_USED));
        CHECK_EQ(bi.overhead, 0); /* no header */
        memset(p, (int)(n & 0xff), n);
        ps[n] = p;
        total += u;
    }
    hk_stats st;
    CHECK_EQ(hk_zone_stats(z, &st), HK_OK);
    CHECK_EQ(st.live_blocks, SMALL_MAX + 1);
    CHECK_EQ(st.used, total); /* a small block counts its slot */
    CHECK(runs_of(z) >= 64);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    int bad = 0;
    for (size_t n = 0; n <= SMALL_MAX; n++) {
        for (size_t k = 0; k < n; k++) bad += ps[n][k] != (unsigned char)(n & 0xff);
        CHECK_EQ(hk_zone_free(z, ps[n]), HK_OK);
    }
    CHECK_EQ(bad, 0);
    /* one byte more is a TLSF block, with its header */
    unsigned char *big = hk_zone_alloc(z, SMALL_MAX + 1);
    REQUIRE(big != NULL);
    hk_block_info bb;
    CHECK_EQ(hk_zone_where(z, big, &bb), HK_OK);
    CHECK(bb.overhead > 0);
    CHECK_EQ(hk_zone_free(z, big), HK_OK);
    CHECK_EQ(hk_zone_stats(z, &st), HK_OK);
    CHECK_EQ(st.live_blocks, 0);
    CHECK_EQ(st.used, 0);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* The four misuses of a free (double, interior, foreign, never allocated)
 * and a pointer into a run's header: each reported in one line naming the
 * pointer, nothing freed, check passes, and the heap goes on. */
HKT_TEST(misuse_reported_and_heap_intact) {
    hkt_errors errs = {0};
    hk_zone *z = mk_os(&errs, 0);
    REQUIRE(z != NULL);
    unsigned char *a = hk_zone_alloc(z, 48), *b = hk_zone_alloc(z, 48);
    REQUIRE(a && b);
    memset(b, 0x5b, 48);
    CHECK_EQ(hk_zone_free(z, a), HK_OK);
    CHECK_EQ(hk_zone_free(z, a), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(errs.last_kind, HK_EK_DOUBLE_FREE);
    CHECK_STR_CONTAINS(errs.last_message, "is already free");
    CHECK_STR_CONTAINS(errs.last_message, "zone 'small'");
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, b + 16), HK_ERR_INVALID);
    CHECK_EQ(errs.last_kind, HK_EK_INTERIOR_PTR);
    CHECK_STR_CONTAINS(errs.last_message, "16 bytes into block");
    CHECK_EQ(hk_zone_check(z), HK_OK);
    static char stat[64];
    CHECK_EQ(hk_zone_free(z, stat), HK_ERR_FOREIGN);
    CHECK_EQ(errs.last_kind, HK_EK_FOREIGN_PTR);
    unsigned char *run = (unsigned char *)((uintptr_t)b & ~(uintptr_t)0xffff);
    CHECK_EQ(hk_zone_free(z, run + 64), HK_ERR_INVALID);
    CHECK_STR_CONTAINS(errs.last_message, "header of small-block run");
    CHECK_EQ(hk_zone_free(z, b + 48 * 100), HK_ERR_DOUBLE_FREE); /* a slot not handed out yet */
    CHECK_STR_CONTAINS(errs.last_message, "never allocated");
    CHECK_EQ(errs.count, 5);
    hk_stats st;
    CHECK_EQ(hk_zone_stats(z, &st), HK_OK);
    CHECK_EQ(st.error_count, 5);
    CHECK_EQ(st.live_blocks, 1);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* the heap goes on: a's slot comes back once, b is untouched */
    unsigned char *c = hk_zone_alloc(z, 48), *d = hk_zone_alloc(z, 48);
    CHECK(c == a && d != a && d != b);
    for (int k = 0; k < 48; k++) CHECK_EQ(b[k], 0x5b);
    CHECK_EQ(hk_zone_free(z, b), HK_OK);
    CHECK_EQ(hk_zone_free(z, c), HK_OK);
    CHECK_EQ(hk_zone_free(z, d), HK_OK);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* A block whose first word holds what a free-list link looks like is
 * freed normally (the list is searched to tell). */
HKT_TEST(first_word_of_any_value_frees) {
    hkt_errors errs = {0};
    hk_zone *z = mk_os(&errs, 0);
    REQUIRE(z != NULL);
    unsigned char *a = hk_zone_alloc(z, 64), *b = hk_zone_alloc(z, 64);
    REQUIRE(a && b);
    CHECK_EQ(hk_zone_free(z, a), HK_OK);
    uint64_t link;
    UNPOISON(a, sizeof link);
    memcpy(&link, a, sizeof link); /* read after free, on purpose: the encoded link */
    memcpy(b, &link, sizeof link);
    CHECK_EQ(hk_zone_free(z, b), HK_OK);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(realloc_in_place_moved_and_misused) {
    hkt_errors errs = {0};
    hk_zone *z = mk_os(&errs, 0);
    REQUIRE(z != NULL);
    unsigned char *p = hk_zone_alloc(z, 100);
    REQUIRE(p);
    for (int k = 0; k < 100; k++) p[k] = (unsigned char)k;
    CHECK(hk_zone_realloc(z, p, 104) == p); /* the same class */
    CHECK(hk_zone_realloc(z, p, 85) == p);  /* wastes less than half, asks 8-byte alignment */
    p = hk_zone_realloc(z, p, 60);          /* asks 16-byte alignment: the 104-byte slot has 8 */
    REQUIRE(p);
    CHECK_EQ((uintptr_t)p % 16, 0);
    unsigned char *q = hk_zone_realloc(z, p, 500);
    REQUIRE(q && q != p);
    for (int k = 0; k < 60; k++) CHECK_EQ(q[k], k);
    CHECK_EQ(errs.count, 0);
    unsigned char *big = hk_zone_realloc(z, q, SMALL_MAX + 1000); /* to a TLSF block */
    REQUIRE(big);
    hk_block_info bi;
    CHECK_EQ(hk_zone_where(z, big, &bi), HK_OK);
    CHECK(bi.overhead > 0); /* a header: TLSF */
    for (int k = 0; k < 60; k++) CHECK_EQ(big[k], k);
    unsigned char *back = hk_zone_realloc(z, big, 24); /* a TLSF block shrinks in place */
    REQUIRE(back);
    CHECK(back == big);
    for (int k = 0; k < 24; k++) CHECK_EQ(back[k], k);
    /* realloc of a freed small block: reported, NULL, nothing changed */
    unsigned char *f = hk_zone_alloc(z, 32);
    REQUIRE(f);
    CHECK_EQ(hk_zone_free(z, f), HK_OK);
    CHECK(hk_zone_realloc(z, f, 64) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_DOUBLE_FREE);
    CHECK_STR_CONTAINS(errs.last_message, "realloc(");
    /* growing a 24-byte block (8-aligned) to 16 bytes moves it to a 16-aligned one */
    unsigned char *g = hk_zone_alloc(z, 24);
    REQUIRE(g);
    unsigned char *g2 = hk_zone_realloc(z, g, 16);
    REQUIRE(g2);
    CHECK_EQ((uintptr_t)g2 % 16, 0);
    CHECK_EQ(hk_zone_free(z, g2), HK_OK);
    CHECK_EQ(hk_zone_free(z, back), HK_OK);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(tags_owns_and_free_tags) {
    hkt_errors errs = {0};
    hk_zone *z = mk_os(&errs, 0);
    REQUIRE(z != NULL);
    void *s[50];
    for (int i = 0; i < 50; i++) REQUIRE((s[i] = hk_zone_alloc(z, (size_t)(8 + i * 20))) != NULL);
    void *owner = NULL;
    void *lvl = hk_zone_alloc_tagged(z, 40, HK_TAG_LEVEL, NULL, "level"); /* tagged: a TLSF block */
    void *cached = hk_zone_alloc_tagged(z, 40, HK_TAG_CACHE, &owner, "cache");
    REQUIRE(lvl && cached);
    CHECK_EQ(hk_zone_tag(z, s[3]), HK_TAG_STATIC);
    CHECK_EQ(hk_zone_tag(z, lvl), HK_TAG_LEVEL);
    CHECK(hk_zone_owns(z, s[7]));
    CHECK(!hk_zone_owns(z, (unsigned char *)s[7] + 8));
    CHECK_EQ(hk_zone_change_tag(z, s[3], HK_TAG_STATIC), HK_OK);
    CHECK_EQ(hk_zone_change_tag(z, s[3], HK_TAG_LEVEL), HK_ERR_NOMEM);
    CHECK_STR_CONTAINS(errs.last_message, "small block");
    CHECK_EQ(hk_zone_change_tag(z, s[3], HK_TAG_CACHE), HK_ERR_INVALID); /* purgeable needs an owner */
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_LEVEL), 1);
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_STATIC, HK_TAG_STATIC), 50);
    hk_stats st;
    hk_zone_stats(z, &st);
    CHECK_EQ(st.live_blocks, 1);
    CHECK(owner == cached);
    CHECK_EQ(hk_zone_free(z, s[0]), HK_ERR_DOUBLE_FREE); /* its run was given back */
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* and small blocks come again */
    void *again = hk_zone_alloc(z, 30);
    CHECK(again != NULL);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

typedef struct walk_acc {
    size_t n, bytes;
} walk_acc;
static int walk_used(const hk_block_info *bi, void *user) {
    walk_acc *w = user;
    if (bi->flags & HK_BLOCK_USED) {
        w->n++;
        w->bytes += bi->size;
    }
    return 0;
}

HKT_TEST(walk_and_stats_agree) {
    hkt_errors errs = {0};
    hk_zone *z = mk_os(&errs, 0);
    REQUIRE(z != NULL);
    void *p[300];
    for (int i = 0; i < 300; i++) REQUIRE((p[i] = hk_zone_alloc(z, (size_t)(i * 7 % 1500))) != NULL);
    for (int i = 0; i < 300; i += 3) CHECK_EQ(hk_zone_free(z, p[i]), HK_OK);
    walk_acc w = {0, 0};
    CHECK_EQ(hk_zone_walk(z, walk_used, &w), 0);
    hk_stats st;
    hk_zone_stats(z, &st);
    CHECK_EQ(w.n, st.live_blocks);
    CHECK_EQ(w.n, 200);
    for (int i = 1; i < 300; i++)
        if (i % 3) CHECK_EQ(hk_zone_free(z, p[i]), HK_OK);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* Emptied runs become free granules; trim gives their pages back. */
HKT_TEST(trim_gives_runs_back) {
    hkt_errors errs = {0};
    hk_zone *z = mk_os(&errs, 0);
    REQUIRE(z != NULL);
    enum { N = 20000 };
    static void *p[N];
    for (int i = 0; i < N; i++) REQUIRE((p[i] = hk_zone_alloc(z, 200)) != NULL);
    size_t peak = runs_of(z);
    CHECK(peak >= 60);
    for (int i = 0; i < N; i++) CHECK_EQ(hk_zone_free(z, p[i]), HK_OK);
    CHECK(runs_of(z) <= 5); /* the current run and the heap's spares (4) */
    CHECK(hk_zone_trim(z) > 0);
    hk_zone_info info;
    hk_zone_get_info(z, &info);
    CHECK(info.decommitted_bytes >= (size_t)(peak - 3) * (60u << 10));
    CHECK_EQ(hk_zone_check(z), HK_OK);
    for (int i = 0; i < N; i++) REQUIRE((p[i] = hk_zone_alloc(z, 200)) != NULL); /* reused */
    for (int i = 0; i < N; i++) CHECK_EQ(hk_zone_free(z, p[i]), HK_OK);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* A new run takes a free granule its own class used last (its pages are
 * the ones that class touches): here the 16-byte granules, though the
 * 1000-byte ones were given back after them. */
HKT_TEST(new_run_reuses_its_class_granule) {
    hkt_errors errs = {0};
    hkt_errors_reset(&errs);
    errs.quiet = 1;
    hk_zone *z = hk_zone_create(&(hk_zone_desc){.size = 1 << 20,
                                                .grow_size = 1 << 20,
                                                .name = "small",
                                                .decay_ms = -1, /* nothing cleaned meanwhile */
                                                .on_error = hkt_on_error,
                                                .error_user = &errs});
    REQUIRE(z != NULL);
    enum { N = 12000, M = 400 };
    static void *small[N], *big[M];
    uintptr_t gran[16];
    int ng = 0;
    for (int i = 0; i < N; i++) REQUIRE((small[i] = hk_zone_alloc(z, 16)) != NULL);
    for (int i = 0; i < M; i++) REQUIRE((big[i] = hk_zone_alloc(z, 1000)) != NULL);
    for (int i = 0; i < N; i++) {
        uintptr_t g = (uintptr_t)small[i] >> 16;
        int k = 0;
        while (k < ng && gran[k] != g) k++;
        if (k == ng) {
            REQUIRE(ng < 16);
            gran[ng++] = g;
        }
    }
    CHECK(ng >= 3); /* several runs of the class */
    for (int i = 0; i < N; i++) CHECK_EQ(hk_zone_free(z, small[i]), HK_OK);
    for (int i = 0; i < M; i++) CHECK_EQ(hk_zone_free(z, big[i]), HK_OK);
    /* the current 16-byte run is still its class's: fill it, then one more */
    int found = 0;
    for (int i = 0; i < N; i++) {
        REQUIRE((small[i] = hk_zone_alloc(z, 16)) != NULL);
        uintptr_t g = (uintptr_t)small[i] >> 16;
        int was = 0;
        for (int k = 0; k < ng && !was; k++) was = gran[k] == g;
        CHECK(was);
        found += was;
    }
    CHECK_EQ(found, N);
    for (int i = 0; i < N; i++) CHECK_EQ(hk_zone_free(z, small[i]), HK_OK);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(errs.count, 0);
    hk_zone_destroy(z);
}

/* Zones that keep every block in the TLSF core: HK_ZONE_NO_RUNS, a debug
 * flag, caller memory without growth (no OS memory for the space). */
static uint64_t runs_made(hk_zone *z) {
    hk_zone_info info;
    return hk_zone_get_info(z, &info) == HK_OK ? info.runs_made : UINT64_MAX;
}

/* runs_made counts the runs laid out: one per class at first, one more
 * each time a class's runs are full, none when a slot comes back. */
HKT_TEST(runs_made_counts_new_runs) {
    hkt_errors errs = {0};
    hk_zone *z = mk_os(&errs, 0);
    REQUIRE(z != NULL);
    CHECK_EQ(runs_made(z), 0);
    void *a = hk_zone_alloc(z, 16);
    REQUIRE(a != NULL);
    CHECK_EQ(runs_made(z), 1);
    void *big[4]; /* a 16 KiB run holds 3 */
    for (int i = 0; i < 4; i++) REQUIRE((big[i] = hk_zone_alloc(z, SMALL_MAX)) != NULL);
    CHECK_EQ(runs_made(z), 3);
    for (int i = 0; i < 4; i++) CHECK_EQ(hk_zone_free(z, big[i]), HK_OK);
    void *again = hk_zone_alloc(z, SMALL_MAX); /* from the current run kept */
    REQUIRE(again != NULL);
    CHECK_EQ(runs_made(z), 3);
    CHECK_EQ(hk_zone_free(z, again), HK_OK);
    CHECK_EQ(hk_zone_free(z, a), HK_OK);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* The first block of a fresh run is its slot 0, which starts at a
 * different line of the page in each of the zone's first runs (their
 * colours), so that runs' first slots share no cache set. */
HKT_TEST(runs_first_slots_on_different_lines) {
    hkt_errors errs = {0};
    hk_zone *z = mk_os(&errs, 0);
    REQUIRE(z != NULL);
    enum { N = 8 };
    static const size_t sizes[N] = {16, 48, 96, 200, 400, 900, 3000, 12000};
    void *p[N];
    for (int i = 0; i < N; i++) REQUIRE((p[i] = hk_zone_alloc(z, sizes[i])) != NULL);
    for (int i = 0; i < N; i++) {
        CHECK_EQ((uintptr_t)p[i] % 64u, 0);
        for (int j = 0; j < i; j++) CHECK((uintptr_t)p[i] % 4096u != (uintptr_t)p[j] % 4096u);
    }
    for (int i = 0; i < N; i++) CHECK_EQ(hk_zone_free(z, p[i]), HK_OK);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(off_where_asked_or_impossible) {
    hkt_errors errs = {0};
    uint32_t flags[2] = {HK_ZONE_NO_RUNS, HK_FLAG_CANARY};
    for (int i = 0; i < 2; i++) {
        hk_zone *z = mk_os(&errs, flags[i]);
        REQUIRE(z != NULL);
        void *p = hk_zone_alloc(z, 24);
        REQUIRE(p);
        CHECK_EQ((uintptr_t)p % 16, 0);
        CHECK_EQ(runs_of(z), 0);
        CHECK_EQ(hk_zone_free(z, p), HK_OK);
        hk_zone_destroy(z);
    }
    static unsigned char mem[256 << 10] __attribute__((aligned(64)));
    hk_zone *z = hk_zone_create(&(hk_zone_desc){.memory = mem, .size = sizeof mem});
    REQUIRE(z != NULL);
    void *p = hk_zone_alloc(z, 24);
    REQUIRE(p);
    CHECK((unsigned char *)p > mem && (unsigned char *)p < mem + sizeof mem);
    CHECK_EQ(runs_of(z), 0);
    CHECK_EQ(hk_zone_free(z, p), HK_OK);
    hk_zone_destroy(z);
}

/* With lock hooks, small blocks are served under the lock. */
HKT_TEST(under_lock_hooks) {
    hkt_errors errs = {0};
    hkt_errors_reset(&errs);
    hk_zone *z = hk_zone_create(
        &(hk_zone_desc){.lock = {hkt_lock, hkt_unlock, NULL}, .on_error = hkt_on_error, .error_user = &errs});
    REQUIRE(z != NULL);
    int calls = hkt_lock_calls;
    void *p = hk_zone_alloc(z, 40);
    REQUIRE(p);
    CHECK(hkt_lock_calls > calls);
    CHECK(runs_of(z) >= 1);
    calls = hkt_lock_calls;
    CHECK_EQ(hk_zone_free(z, p), HK_OK);
    CHECK(hkt_lock_calls > calls);
    CHECK_EQ(hkt_lock_depth, 0);
    CHECK_EQ(hk_zone_free(z, p), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(hkt_lock_depth, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

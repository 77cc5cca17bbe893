/* Zone: small-block runs in zones of every shape: without runs (the
 * HK_ZONE_NO_RUNS flag and the debug flags), growing from the OS, tiny
 * fixed zones, and two regions freed alternately. */
#define _GNU_SOURCE 1 /* open_memstream */
#include "zone_runs.h"
#include "zone_runs_test_util.h"

static void runs_off_with(uint32_t flags) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, flags);
    REQUIRE(z != NULL);
    void *p = hk_zone_alloc(z, 40); /* the first block of an empty zone: the free rest follows it */
    REQUIRE(p != NULL);
    void *more[20];
    for (int i = 0; i < 20; i++) more[i] = hk_zone_alloc(z, (size_t)i * 50);
    for (int i = 0; i < 20; i++) CHECK_EQ(hk_zone_free(z, more[i]), HK_OK);
    void *q = hk_zone_alloc(z, 40);
    REQUIRE(q != NULL);
    size_t runs = 99;
    char *d = dump_str(z, &runs);
    CHECK(d != NULL && strstr(d, "run of") == NULL);
    CHECK_EQ(runs, 0);
    free(d);
    hk_block_info info;
    CHECK_EQ(hk_zone_where(z, (unsigned char *)p - 8, &info), HK_OK);
    CHECK(info.name == NULL);
    CHECK_EQ(hk_zone_free(z, q), HK_OK);
    if (flags & HK_ZONE_NO_RUNS) {
        /* a small untracked block takes its tag record from the free block after it */
        CHECK_EQ(hk_zone_change_tag(z, p, HK_TAG_LEVEL), HK_OK);
        CHECK_EQ(hk_zone_tag(z, p), HK_TAG_LEVEL);
    }
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, p), HK_OK);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(runs_off_no_runs_and_debug_flags) {
    runs_off_with(HK_ZONE_NO_RUNS);
    runs_off_with(HK_FLAG_FILL);
    runs_off_with(HK_ZONE_TRACK_ALL);
    /* with runs on, the same block is a slot and cannot take a record */
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    void *p = hk_zone_alloc(z, 40);
    CHECK_EQ(hk_zone_change_tag(z, p, HK_TAG_LEVEL), HK_ERR_NOMEM);
    /* tagged, ex and memalign allocations never come from runs */
    void *owner = NULL;
    void *t = hk_zone_alloc_tagged(z, 40, HK_TAG_STATIC, &owner, NULL);
    void *e = hk_zone_alloc_ex(z, &(hk_zone_alloc_desc){.size = 40});
    REQUIRE(t && e);
    /* e is a TLSF block with the free rest of the zone after it: it can take a record */
    CHECK_EQ(hk_zone_change_tag(z, e, HK_TAG_LEVEL), HK_OK);
    CHECK_EQ(hk_zone_change_tag(z, t, HK_TAG_LEVEL), HK_OK);
    void *m = hk_zone_alloc_aligned(z, 64, 40);
    REQUIRE(m != NULL);
    CHECK_EQ(count_runs(z), 1); /* only p's */
    CHECK_EQ(errs.count, 1);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(runs_growing_zone) {
    hkt_errors errs = {0};
    hk_zone *z = hk_zone_create(&(hk_zone_desc){.size = 64 << 10,
                                                .grow_size = 64 << 10,
                                                .name = "grow",
                                                .on_error = hkt_on_error,
                                                .error_user = &errs});
    REQUIRE(z != NULL);
    hk_stats s0, s;
    hk_zone_stats(z, &s0);
    enum { K = 14, N = 200 };
    static unsigned char *ps[K][N];
    size_t asked = 0;
    for (int k = 0; k < K; k++) {
        unsigned c = k == K - 1 ? ZONE_NCLS - 1 : (unsigned)k * 5; /* classes 0, 5, ..., 60, 62 */
        size_t n = zone_cls_stride(c) - 8 - (size_t)k;
        REQUIRE(zone_cls_of(n) == c);
        for (int i = 0; i < N; i++) {
            ps[k][i] = hk_zone_alloc(z, n);
            REQUIRE(ps[k][i] != NULL);
            CHECK_EQ(hk_zone_usable_size(z, ps[k][i]), zone_cls_stride(c) - 8);
            ps[k][i][0] = (unsigned char)k;
            ps[k][i][n - 1] = (unsigned char)i;
        }
        asked += N * n;
    }
    hk_zone_stats(z, &s);
    CHECK(s.capacity > s0.capacity);
    CHECK_EQ(s.live_blocks, K * N);
    CHECK_EQ(s.used, asked);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    size_t runs = count_runs(z);
    CHECK(runs >= K);
    size_t damaged = 0;
    for (int k = K - 1; k >= 0; k--) {
        unsigned c = k == K - 1 ? ZONE_NCLS - 1 : (unsigned)k * 5;
        size_t n = zone_cls_stride(c) - 8 - (size_t)k;
        for (int i = 0; i < N; i++) {
            if (ps[k][i][0] != (unsigned char)k || ps[k][i][n - 1] != (unsigned char)i) damaged++;
            CHECK_EQ(hk_zone_free(z, ps[k][i]), HK_OK);
        }
        if (k % 4 == 0) CHECK_EQ(hk_zone_check(z), HK_OK);
    }
    CHECK_EQ(damaged, 0);
    end_empty(z, &errs);
}

HKT_TEST(runs_small_fixed_zone) {
    hkt_errors errs = {0};
    static unsigned char mem[(sizeof(hk_zone) + 63) / 64 * 64 + (16 << 10)] __attribute__((aligned(64)));
    /* 16 KiB of caller memory cannot even hold the control block */
    CHECK(mk_in(&errs, mem, 16 << 10, 0) == NULL);
    hk_zone *z = mk_in(&errs, mem, sizeof mem, 0); /* a 16 KiB heap */
    REQUIRE(z != NULL);
    hk_stats s;
    hk_zone_stats(z, &s);
    CHECK(s.capacity > (15 << 10) && s.capacity <= (16 << 10));
    enum { MAXP = 2000 };
    static void *ps[MAXP];
    size_t np = 0, bigs = 0, smalls = 0;
    /* a few small ones (runs of small classes only: a run takes at most
     * 1/16 of the capacity), then 4 KiB blocks until none fits */
    for (int i = 0; i < 10; i++) {
        ps[np] = hk_zone_alloc(z, 24 + (size_t)i % 3 * 40);
        REQUIRE(ps[np] != NULL);
        np++;
    }
    CHECK(count_runs(z) >= 1);
    void *p300 = hk_zone_alloc(z, 300); /* its class's run would exceed 1/16: a TLSF block */
    REQUIRE(p300 != NULL);
    CHECK_EQ(hk_zone_usable_size(z, p300), 312);
    CHECK_EQ(count_runs(z), 3);
    CHECK_EQ(errs.count, 0);
    while (np < MAXP && (ps[np] = hk_zone_alloc(z, 4096)) != NULL) np++, bigs++;
    CHECK(bigs >= 2);
    CHECK_EQ(errs.count, 1);
    CHECK_EQ(errs.last_kind, HK_EK_NOMEM);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    while (np < MAXP && (ps[np] = hk_zone_alloc(z, 24)) != NULL) np++, smalls++;
    CHECK(np < MAXP);
    CHECK(smalls >= 1);
    CHECK_EQ(errs.count, 2);
    CHECK_EQ(errs.last_kind, HK_EK_NOMEM);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    for (size_t i = 0; i < np; i++) CHECK_EQ(hk_zone_free(z, ps[i]), HK_OK);
    CHECK_EQ(hk_zone_free(z, p300), HK_OK);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* everything back: the kept empty runs are trimmed for a block of
     * nearly the whole heap */
    CHECK(count_runs(z) >= 1);
    void *x = hk_zone_alloc(z, s.capacity - 64);
    CHECK(x != NULL);
    CHECK_EQ(count_runs(z), 0);
    CHECK_EQ(errs.count, 2);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* Regression: shrinking a slot of the smallest class to a size of the same
 * class stays in place (it used to move, copying for nothing). */
HKT_TEST(runs_realloc_same_class_stays) {
    hkt_errors errs = {0};
    static unsigned char mem[256 << 10] __attribute__((aligned(64)));
    hk_zone *z = hk_zone_create(
        &(hk_zone_desc){.memory = mem, .size = sizeof mem, .on_error = hkt_on_error, .error_user = &errs});
    REQUIRE(z != NULL);
    unsigned char *p = hk_zone_alloc(z, 20);
    REQUIRE(p != NULL);
    memcpy(p, "abcde", 5);
    unsigned char *q = hk_zone_realloc(z, p, 5);
    CHECK(q == p);
    CHECK_EQ(memcmp(q, "abcde", 5), 0);
    hk_stats s;
    hk_zone_stats(z, &s);
    CHECK_EQ(s.used, 5);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(errs.count, 0);
    hk_zone_destroy(z);
}

/* A zone of two caller regions of 1 MiB in g_mem, at 0 and at rb (2 MiB
 * in), with a gap between them (the second region is added; NULL when the
 * zone or the region is refused). */
static hk_zone *mk_two_regions(hkt_errors *errs, unsigned char *rb) {
    hk_zone *z = mk_in(errs, g_mem, 1 << 20, 0);
    if (!z) return NULL;
    memset(rb, 0, 1 << 20);
    if (hk_zone_add_region(z, rb, 1 << 20) != HK_OK) {
        hk_zone_destroy(z);
        return NULL;
    }
    return z;
}

/* Slots in a zone of two caller regions with a gap between them: frees
 * that alternate between the regions all succeed (the free path moves its
 * region hint), and misuse in the other region or in the gap is still
 * reported as such. */
HKT_TEST(runs_two_regions_alternating_frees) {
    hkt_errors errs = {.quiet = 1};
    unsigned char *rb = g_mem + (2 << 20), *gap = g_mem + (3 << 19);
    hk_zone *z = mk_two_regions(&errs, rb);
    REQUIRE(z != NULL);
    enum { N = 40000 };
    static unsigned char *p[N];
    size_t na = 0, nb = 0, n = 0;
    while (n < N) {
        size_t sz = 16 + rnd() % 200;
        unsigned char *q = hk_zone_alloc(z, sz);
        if (!q) break;
        if (q < rb)
            na++;
        else
            nb++;
        p[n++] = q;
        if (nb > 1000) break;
    }
    REQUIRE(na > 1000 && nb > 1000);
    /* one slot of each region, in turn */
    size_t ia = 0, ib = 0, misuses = 0;
    while (ia < n || ib < n) {
        while (ia < n && (!p[ia] || p[ia] >= rb)) ia++;
        if (ia < n) {
            CHECK_EQ(hk_zone_free(z, p[ia]), HK_OK);
            p[ia] = NULL;
        }
        while (ib < n && (!p[ib] || p[ib] < rb)) ib++;
        if (ib < n) {
            unsigned char *q = p[ib];
            CHECK_EQ(hk_zone_free(z, q), HK_OK);
            p[ib] = NULL;
            if (ib + 1 >= n || errs.count) continue;
            /* a double free in region b right after a free in region a */
            while (ia < n && (!p[ia] || p[ia] >= rb)) ia++;
            if (ia < n && (ib & 255) == 0) {
                CHECK_EQ(hk_zone_free(z, p[ia]), HK_OK);
                p[ia] = NULL;
                CHECK_EQ(hk_zone_free(z, q), HK_ERR_DOUBLE_FREE);
                CHECK_EQ(errs.last_kind, HK_EK_DOUBLE_FREE);
                /* a pointer into the gap between the regions */
                CHECK_EQ(hk_zone_free(z, gap), HK_ERR_FOREIGN);
                CHECK_EQ(errs.last_kind, HK_EK_FOREIGN_PTR);
                CHECK_EQ(hk_zone_check(z), HK_OK);
                hkt_errors_reset(&errs);
                misuses++;
            }
        }
    }
    CHECK(misuses > 3);
    end_empty(z, &errs);
}

/* The lock-free realloc of a slot (a zone without lock hooks) in a zone
 * of two regions: in place when the size fits the slot (the bytes, the
 * pointer and `used` follow), moved when it does not (the bytes copied,
 * the old slot freed: freeing it again is a reported double free), with
 * the region hint moving between the regions on every call; a freed slot,
 * an interior pointer and a pointer into the gap are reported and change
 * nothing. */
HKT_TEST(runs_realloc_fast_path_two_regions) {
    hkt_errors errs = {.quiet = 1};
    unsigned char *rb = g_mem + (2 << 20), *gap = g_mem + (3 << 19);
    hk_zone *z = mk_two_regions(&errs, rb);
    REQUIRE(z != NULL);
    /* fill region a until slots come from region b */
    enum { N = 20000 };
    static unsigned char *p[N];
    size_t n = 0, ib = N;
    while (n < N) {
        p[n] = hk_zone_alloc(z, 100);
        REQUIRE(p[n] != NULL);
        memset(p[n], (int)(n & 0xff), 100);
        if (p[n++] >= rb) {
            ib = n - 1;
            break;
        }
    }
    REQUIRE(ib < N && ib > 0);
    unsigned char *a = p[0], *b = p[ib];
    hk_stats s0, s;
    hk_zone_stats(z, &s0);
    for (int k = 0; k < 100; k++) {
        /* in place: 100 -> 90 -> 100 bytes, alternating regions */
        size_t sz = k & 1 ? 100 : 90;
        CHECK(hk_zone_realloc(z, a, sz) == a);
        CHECK(hk_zone_realloc(z, b, sz) == b);
    }
    hk_zone_stats(z, &s);
    CHECK_EQ(s.used, s0.used);
    CHECK_EQ(a[99], 0);
    CHECK_EQ(b[99], (unsigned char)(ib & 0xff));
    /* moved: a larger class */
    unsigned char *b2 = hk_zone_realloc(z, b, 1000);
    REQUIRE(b2 != NULL && b2 != b);
    CHECK_EQ(b2[0], (unsigned char)(ib & 0xff));
    CHECK_EQ(b2[99], (unsigned char)(ib & 0xff));
    hk_zone_stats(z, &s);
    CHECK_EQ(s.used, s0.used + 900);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_zone_free(z, b), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(errs.last_kind, HK_EK_DOUBLE_FREE);
    /* misuse through realloc: reported, nothing changes */
    hkt_errors_reset(&errs);
    CHECK(hk_zone_realloc(z, b, 50) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_DOUBLE_FREE);
    CHECK(hk_zone_realloc(z, raw(a) + 16, 50) == NULL);
    CHECK_EQ(errs.count, 2);
    CHECK(hk_zone_realloc(z, gap, 50) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_FOREIGN_PTR);
    hk_zone_stats(z, &s);
    CHECK_EQ(s.used, s0.used + 900);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hkt_errors_reset(&errs);
    p[ib] = b2;
    for (size_t i = 0; i < n; i++) CHECK_EQ(hk_zone_free(z, p[i]), HK_OK);
    end_empty(z, &errs);
}

/* The slots zone_runs.c gives a run of `stride`-byte slots that replaces
 * a full one of `prev` slots (0: the class's first), its owner holding
 * `owned` bytes of runs: the rule docs/zone.md states. */
static size_t expected_slots(size_t stride, size_t prev, size_t owned) {
    size_t bytes = prev ? prev * stride * 2 : ZONE_RUN_FIRST, target = owned / 64;
    if (target < ZONE_RUN_TARGET) target = ZONE_RUN_TARGET;
    if (target > ZONE_RUN_TARGET_MAX) target = ZONE_RUN_TARGET_MAX;
    if (bytes > target) bytes = target;
    size_t n = bytes / stride;
    return n > ZONE_RUN_CAP_SLOTS ? ZONE_RUN_CAP_SLOTS : n < ZONE_RUN_MIN_SLOTS ? ZONE_RUN_MIN_SLOTS : n;
}

/* The bytes of runs the calling thread's allocations come from: the
 * thread's heap in a threads zone, else the zone's. */
static size_t owner_run_bytes(const hk_zone *z) {
    if (!z->threads) return z->runs.run_bytes;
    return z->heaps ? z->heaps->run_bytes : 0; /* the heap comes with the thread's first allocation */
}

/* Allocates 1000-byte blocks (1 KiB slots) into ps[*n..] until `want`
 * new runs of them are seen or one of `stop` slots (*curp: the class's
 * current run, NULL for none), checking each new run's
 * slot count against the rule with the owner's run bytes from just before
 * it was made; returns the largest run's slots. */
static size_t grow_class(hk_zone *z, zone_run **curp, unsigned char **ps, size_t *n, size_t cap, size_t want,
                         size_t stop) {
    zone_run *cur = *curp;
    size_t seen = 0, largest = 0, bad = 0;
    while (seen < want && (!stop || largest < stop) && *n < cap) {
        size_t owned = owner_run_bytes(z);
        unsigned char *p = hk_zone_alloc(z, 1000);
        REQUIRE(p != NULL);
        p[0] = (unsigned char)*n;
        ps[(*n)++] = p;
        zone_run *r = zone_run_of_slot(zone_from_user(raw(p)));
        if (r == cur) continue;
        size_t e = expected_slots(1024, cur ? cur->nslots : 0, owned);
        if (r->nslots != e && bad++ == 0)
            printf("    run %zu: %u slots, the rule says %zu (owner held %zu bytes)\n", seen, r->nslots, e,
                   owned);
        if (r->nslots > largest) largest = r->nslots;
        cur = r;
        seen++;
    }
    *curp = cur;
    CHECK_EQ(bad, 0);
    return largest;
}

/* A run that replaces a full one gets twice its bytes up to 32 KiB, or up
 * to 1/64 of the bytes of runs its owner holds (the zone; in a threads
 * zone, the calling thread's heap) when that is more, up to 128 KiB; once
 * everything is freed and trimmed the owner holds at most one run and new
 * runs are small again. The heaps' byte counts are verified by hk_zone_check. */
static void runs_grow_with_owner(uint32_t flags) {
    hkt_errors errs = {0};
    hk_zone *z = hk_zone_create(&(hk_zone_desc){.size = 1 << 20,
                                                .grow_size = 1 << 20,
                                                .flags = flags,
                                                .name = "owner",
                                                .on_error = hkt_on_error,
                                                .error_user = &errs});
    REQUIRE(z != NULL);
    REQUIRE(zone_cls_stride(zone_cls_of(1000)) == 1024);
    enum { CAP = 12000 };
    static unsigned char *ps[CAP];
    size_t n = 0;
    zone_run *cur = NULL;
    /* 32 slots of 1 KiB up to 2 MiB of runs, then more, up to 128 slots
     * (8 MiB of runs make the target 128 KiB) */
    CHECK_EQ(grow_class(z, &cur, ps, &n, CAP, 64, 0), ZONE_RUN_TARGET / 1024);
    CHECK(owner_run_bytes(z) < (size_t)2 << 20);
    CHECK_EQ(grow_class(z, &cur, ps, &n, CAP, SIZE_MAX, ZONE_RUN_TARGET_MAX / 1024),
             ZONE_RUN_TARGET_MAX / 1024);
    CHECK(owner_run_bytes(z) >= (size_t)8 << 20);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    g_rng = 99;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = rnd() % (i + 1);
        unsigned char *t = ps[i];
        ps[i] = ps[j], ps[j] = t;
    }
    for (size_t i = 0; i < n; i++) CHECK_EQ(hk_zone_free(z, ps[i]), HK_OK);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_trim(z);
    /* a plain zone gives every empty run back; a thread's heap keeps the
     * class's current run (its owner may be allocating from it), whose
     * slots the next allocations take */
    zone_run *kept = z->threads ? z->heaps->cls[zone_cls_of(1000)].cur : NULL;
    CHECK_EQ(owner_run_bytes(z), kept ? zone_bsize(zone_run_block(kept)) : 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* a small owner again: runs of 32 slots (after a first of 16 when
     * none was kept) */
    n = 0;
    cur = kept; /* a new run may have a released one's address */
    CHECK_EQ(grow_class(z, &cur, ps, &n, CAP, 4, 0), ZONE_RUN_TARGET / 1024);
    for (size_t i = 0; i < n; i++) CHECK_EQ(hk_zone_free(z, ps[i]), HK_OK);
    end_empty(z, &errs);
}
HKT_TEST(runs_grow_with_their_owner_zone) { runs_grow_with_owner(0); }
HKT_TEST(runs_grow_with_their_owner_heap) { runs_grow_with_owner(HK_ZONE_THREADS); }

/* hk_zone_check adds up the heaps' counts of their runs' bytes: one that
 * is off is reported, and the zone is sound again once it is put back. */
HKT_TEST(runs_check_catches_a_heap_run_bytes_count_off) {
    hkt_errors errs = {0};
    hk_zone *z = hk_zone_create(&(hk_zone_desc){.size = 1 << 20,
                                                .flags = HK_ZONE_THREADS,
                                                .name = "count",
                                                .on_error = hkt_on_error,
                                                .error_user = &errs});
    REQUIRE(z != NULL);
    void *p = hk_zone_alloc(z, 100);
    REQUIRE(p != NULL);
    REQUIRE(z->heaps != NULL && z->heaps->run_bytes > 0);
    errs.quiet = 1;
    z->heaps->run_bytes += 64;
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    CHECK_EQ(errs.last_kind, HK_EK_CORRUPT_STRUCTURE);
    CHECK_STR_CONTAINS(errs.last_message, "bytes of runs");
    z->heaps->run_bytes -= 64;
    errs.quiet = 0;
    hkt_errors_reset(&errs);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, p), HK_OK);
    end_empty(z, &errs);
}

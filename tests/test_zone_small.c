/*
 * tests/test_zone_small.c - the headerless small-block layer (src/zone_small.*):
 * its classes and alignment, runs made and given back, every misuse of a
 * free (interior, header, never allocated, double, double across threads)
 * reported with the layer left consistent, remote frees collected, walk.
 */
#include "hk_test.h"
#include "zone_small.h"

#include <pthread.h>

typedef struct zs_fix {
    zs_space sp;
    zs_heap h;
    hk__reporter rep;
    hkt_errors errs;
} zs_fix;

static void fix_init(zs_fix *f, size_t span) {
    memset(f, 0, sizeof *f);
    f->errs.quiet = 1;
    hk__reporter_init(&f->rep, "zone", "small", hkt_on_error, &f->errs, 0);
    hk__zs_init_tables();
    REQUIRE(hk__zs_space_init(&f->sp, span, &f->rep) == HK_OK);
    hk__zs_heap_init(&f->h, &f->sp);
}

static hk_result fix_check(zs_fix *f) {
    zs_heap *hs[1] = {&f->h};
    return hk__zs_check(hs, 1, &f->rep);
}

/* Used slots of the space's runs (remote frees not collected yet count as
 * freed), and their bytes. */
static uint64_t fix_live(zs_fix *f, uint64_t *bytes) {
    uint64_t n, b;
    hk__zs_sum_runs(&f->sp, &n, &b);
    if (bytes) *bytes = b;
    return n;
}

static hk_result fix_free(zs_fix *f, zs_heap *h, void *p) {
    zs_run *r = zs_run_of(&f->sp, p);
    if (!r) return HK_ERR_FOREIGN;
    return zs_free(&f->sp, h, r, p, "free");
}

/* The end of a test that freed every block: no misuse reported, no slot
 * left used, every granule back in the space once the heap is done, and
 * the space released. */
static void fix_done(zs_fix *f) {
    CHECK_EQ(f->errs.count, 0);
    CHECK_EQ(hk__zs_heap_fini(&f->h), 0);
    CHECK_EQ(f->sp.runs, 0);
    hk__zs_space_fini(&f->sp);
}

HKT_TEST(zone_small_classes_dense_and_aligned) {
    hk__zs_init_tables();
    for (size_t n = 1; n <= ZS_MAX; n++) {
        unsigned c = zs_cls_of(n);
        REQUIRE(c < ZS_NCLS);
        CHECK(zs_stride_tab[c] >= n);
        if (c > 0) CHECK(zs_stride_tab[c - 1] < n);
    }
    for (unsigned c = 1; c < ZS_NCLS; c++) {
        unsigned s = zs_stride_tab[c], p = zs_stride_tab[c - 1];
        if (s <= 64)
            CHECK_EQ(s - p, 8);
        else
            CHECK((s - p) * 8u <= p); /* a step of at most 12.5% */
    }
    CHECK_EQ(zs_cls_of(0), 0);
    CHECK_EQ(zs_stride_tab[ZS_NCLS - 1], ZS_MAX);
}

HKT_TEST(zone_small_alloc_free_every_class) {
    zs_fix f;
    fix_init(&f, (size_t)64 << 20);
    void *ps[ZS_NCLS][50];
    for (unsigned c = 0; c < ZS_NCLS; c++) {
        size_t n = zs_stride_tab[c];
        size_t align = n & (~n + 1);
        if (align > 16) align = 16;
        for (int k = 0; k < 50; k++) {
            unsigned char *p = zs_alloc(&f.h, n - (size_t)(k % 8));
            REQUIRE(p != NULL);
            CHECK_EQ((uintptr_t)p % align, 0);
            memset(p, 0xA5, n);
            ps[c][k] = p;
            CHECK(zs_run_of(&f.sp, p) != NULL);
            CHECK_EQ(hk__zs_usable(&f.h, zs_run_of(&f.sp, p), p), n);
        }
    }
    CHECK_EQ(fix_check(&f), HK_OK);
    CHECK_EQ(zs_alloc_count(&f.h), ZS_NCLS * 50);
    uint64_t bytes, want = 0;
    for (unsigned c = 0; c < ZS_NCLS; c++) want += 50u * zs_stride_tab[c];
    CHECK_EQ(fix_live(&f, &bytes), ZS_NCLS * 50);
    CHECK_EQ(bytes, want);
    for (unsigned c = 0; c < ZS_NCLS; c++)
        for (int k = 49; k >= 0; k--) CHECK_EQ(fix_free(&f, &f.h, ps[c][k]), HK_OK);
    CHECK_EQ(fix_live(&f, &bytes), 0);
    CHECK_EQ(bytes, 0);
    CHECK_EQ(fix_check(&f), HK_OK);
    fix_done(&f);
}

/* Many runs of one class: full runs become partial when a slot comes back,
 * empty ones go back to the space, and their granules are reused. */
HKT_TEST(zone_small_runs_fill_and_return) {
    zs_fix f;
    fix_init(&f, (size_t)64 << 20);
    enum { N = 40000 };
    void **ps = malloc(N * sizeof *ps);
    REQUIRE(ps != NULL);
    for (int k = 0; k < N; k++) REQUIRE((ps[k] = zs_alloc(&f.h, 24)) != NULL);
    size_t runs = f.sp.runs;
    CHECK(runs >= 15);
    CHECK_EQ(fix_check(&f), HK_OK);
    /* free every other block: every run partial, none given back */
    for (int k = 0; k < N; k += 2) CHECK_EQ(fix_free(&f, &f.h, ps[k]), HK_OK);
    CHECK_EQ(f.sp.runs, runs);
    CHECK_EQ(fix_check(&f), HK_OK);
    for (int k = 0; k < N; k += 2) REQUIRE((ps[k] = zs_alloc(&f.h, 20)) != NULL);
    CHECK_EQ(f.sp.runs, runs); /* the freed slots were reused first */
    for (int k = 0; k < N; k++) CHECK_EQ(fix_free(&f, &f.h, ps[k]), HK_OK);
    CHECK(f.sp.runs <= 1 + ZS_SPARES); /* only the current run and the spares stay */
    CHECK_EQ(fix_check(&f), HK_OK);
    for (int k = 0; k < N; k++) REQUIRE((ps[k] = zs_alloc(&f.h, 24)) != NULL);
    CHECK_EQ(f.sp.bump, runs); /* granules reused, none new */
    for (int k = 0; k < N; k++) CHECK_EQ(fix_free(&f, &f.h, ps[k]), HK_OK);
    CHECK_EQ(hk__zs_heap_fini(&f.h), 0);
    free(ps);
    hk__zs_space_fini(&f.sp);
}

HKT_TEST(zone_small_misuse_reported_and_heap_intact) {
    zs_fix f;
    fix_init(&f, (size_t)16 << 20);
    unsigned char *a = zs_alloc(&f.h, 100), *b = zs_alloc(&f.h, 100);
    REQUIRE(a && b);
    zs_run *r = zs_run_of(&f.sp, a);
    /* interior */
    CHECK_EQ(fix_free(&f, &f.h, a + 8), HK_ERR_INVALID);
    CHECK_EQ(f.errs.last_kind, HK_EK_INTERIOR_PTR);
    CHECK_STR_CONTAINS(f.errs.last_message, "8 bytes into block");
    CHECK_EQ(fix_check(&f), HK_OK);
    /* the run's header */
    CHECK_EQ(fix_free(&f, &f.h, r->base + 16), HK_ERR_INVALID); /* the granule's remote bitmap */
    CHECK_STR_CONTAINS(f.errs.last_message, "header of small-block run");
    /* a slot never handed out */
    CHECK_EQ(fix_free(&f, &f.h, zs_slot(r, r->nslots - 1)), HK_ERR_DOUBLE_FREE);
    CHECK_STR_CONTAINS(f.errs.last_message, "never allocated");
    /* double free */
    CHECK_EQ(fix_free(&f, &f.h, a), HK_OK);
    CHECK_EQ(fix_free(&f, &f.h, a), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(f.errs.last_kind, HK_EK_DOUBLE_FREE);
    CHECK_STR_CONTAINS(f.errs.last_message, "is already free");
    CHECK_EQ(fix_check(&f), HK_OK);
    /* foreign: not in the space at all */
    static char stat[64];
    CHECK(zs_run_of(&f.sp, stat) == NULL);
    CHECK(zs_run_of(&f.sp, (void *)(f.sp.lo + f.sp.span - 16)) == NULL); /* no run there */
    CHECK_EQ(f.errs.count, 4);
    /* the heap goes on: a's slot is handed out once, b still used */
    unsigned char *c = zs_alloc(&f.h, 100);
    CHECK(c == a);
    CHECK(zs_alloc(&f.h, 100) != a);
    CHECK_EQ(fix_check(&f), HK_OK);
    hk__zs_space_fini(&f.sp);
}

/* Check finds damage: a used count off by one, a free slot's link
 * overwritten (a write after free), a changed stride. */
HKT_TEST(zone_small_check_finds_damage) {
    zs_fix f;
    fix_init(&f, (size_t)16 << 20);
    unsigned char *a = zs_alloc(&f.h, 40), *b = zs_alloc(&f.h, 40);
    REQUIRE(a && b);
    zs_run *r = zs_run_of(&f.sp, a);
    r->used++;
    CHECK_EQ(fix_check(&f), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(f.errs.last_message, "used count");
    r->used--;
    CHECK_EQ(fix_check(&f), HK_OK);
    CHECK_EQ(fix_free(&f, &f.h, a), HK_OK);
    uint64_t save = zs_word(a);
    zs_link(a, 0x4141414141414141ull);
    CHECK_EQ(fix_check(&f), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(f.errs.last_message, "free list leaves");
    zs_link(a, save);
    CHECK_EQ(fix_check(&f), HK_OK);
    r->stride = 48;
    CHECK_EQ(fix_check(&f), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(f.errs.last_message, "damaged fixed fields");
    r->stride = 40;
    CHECK_EQ(fix_check(&f), HK_OK);
    hk__zs_space_fini(&f.sp);
}

/* A used block whose first word happens to look like a free-list link (it
 * holds the run's secret) is freed all the same, after the list search. */
HKT_TEST(zone_small_link_lookalike_freed) {
    zs_fix f;
    fix_init(&f, (size_t)16 << 20);
    unsigned char *a = zs_alloc(&f.h, 64), *b = zs_alloc(&f.h, 64);
    REQUIRE(a && b);
    zs_run *r = zs_run_of(&f.sp, a);
    uint64_t look = r->secret | 0x100u;
    memcpy(a, &look, sizeof look);
    CHECK(zs_maybe_link(r, look));
    CHECK_EQ(fix_free(&f, &f.h, a), HK_OK);
    CHECK_EQ(f.errs.count, 0);
    CHECK_EQ(fix_check(&f), HK_OK);
    CHECK_EQ(fix_free(&f, &f.h, a), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(fix_check(&f), HK_OK);
    hk__zs_space_fini(&f.sp);
}

/* A second heap's frees of the first heap's blocks set remote bits and
 * queue the runs; the owner collects them when its class runs dry; a
 * second remote free of the same block, and the owner's free of a block
 * already freed remotely, are double frees. */
HKT_TEST(zone_small_remote_free_collected) {
    zs_fix f;
    fix_init(&f, (size_t)16 << 20);
    zs_heap other;
    hk__zs_heap_init(&other, &f.sp);
    void *ps[300];
    for (int k = 0; k < 300; k++) REQUIRE((ps[k] = zs_alloc(&f.h, 64)) != NULL);
    for (int k = 0; k < 200; k++) CHECK_EQ(fix_free(&f, &other, ps[k]), HK_OK);
    CHECK(f.h.rstack != NULL);
    CHECK_EQ(fix_live(&f, NULL), 100); /* the waiting frees count as frees (their bits) */
    CHECK_EQ(fix_free(&f, &other, ps[5]), HK_ERR_DOUBLE_FREE);
    CHECK_STR_CONTAINS(f.errs.last_message, "freed by another thread");
    CHECK_EQ(fix_free(&f, &f.h, ps[6]), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(fix_check(&f), HK_OK);
    CHECK_EQ(hk__zs_collect(&f.h), 200);
    CHECK_EQ(fix_live(&f, NULL), 100);
    CHECK(f.h.rstack == NULL);
    CHECK_EQ(fix_check(&f), HK_OK);
    /* and again, now that the runs were unqueued */
    for (int k = 200; k < 300; k++) CHECK_EQ(fix_free(&f, &other, ps[k]), HK_OK);
    CHECK_EQ(hk__zs_heap_fini(&f.h), 0);
    CHECK_EQ(f.errs.count, 2);
    CHECK_EQ(hk__zs_heap_fini(&other), 0);
    CHECK_EQ(f.sp.runs, 0);
    hk__zs_space_fini(&f.sp);
}

/* The slot of p in its run (for the tests below). */
static zs_run *fix_run(zs_fix *f, const void *p) { return zs_run_of(&f->sp, p); }

/* Remote frees are collected lazily: a dry current run takes back its own
 * (staying queued); the stack is collected only when the class has no
 * partial run to go on with, so a run freed into meanwhile stays queued and
 * its later remote frees find it so; what was collected is reused before
 * any new run is made. */
HKT_TEST(zone_small_collection_waits_for_a_dry_class) {
    zs_fix f;
    fix_init(&f, (size_t)16 << 20);
    zs_heap other;
    hk__zs_heap_init(&other, &f.sp);
    /* three full runs (their slot counts vary with their colour), the last
     * the current one */
    enum { NMAX = 3 * ZS_SLOTS };
    void **ps = malloc(NMAX * sizeof *ps);
    REQUIRE(ps != NULL);
    int N = 0, nruns = 0;
    zs_run *last = NULL;
    while (nruns < 3 || last->bump < last->nslots || last->free != last->base) {
        REQUIRE(N < NMAX && (ps[N] = zs_alloc(&f.h, 64)) != NULL);
        if (fix_run(&f, ps[N]) != last) last = fix_run(&f, ps[N]), nruns++;
        N++;
    }
    REQUIRE(nruns == 3);
    zs_run *r0 = fix_run(&f, ps[0]), *cur = f.h.cls[zs_cls_of(64)].cur;
    REQUIRE(cur == last && r0 != cur);
    (void)hk__zs_collect(&f.h); /* ZS_COLLECT_GAP allocations from here on */
    /* the owner frees one block of r0 (partial now); another heap frees
     * ten others of r0 and five of the current run */
    CHECK_EQ(fix_free(&f, &f.h, ps[0]), HK_OK);
    ps[0] = NULL;
    for (int k = 1; k <= 10; k++) CHECK_EQ(fix_free(&f, &other, ps[k]), HK_OK);
    int freed_cur = 0;
    for (int k = N - 1; k >= 0 && freed_cur < 5; k--)
        if (ps[k] && fix_run(&f, ps[k]) == cur) {
            CHECK_EQ(fix_free(&f, &other, ps[k]), HK_OK);
            ps[k] = NULL;
            freed_cur++;
        }
    for (int k = 1; k <= 10; k++) ps[k] = NULL;
    CHECK(f.h.rstack != NULL);
    uint64_t made = f.sp.made;
    /* use up the current run (its own five) */
    static void *got[ZS_SLOTS + 1];
    int ng = 0;
    while (ng < (int)ZS_SLOTS + 1) {
        void *q = zs_alloc(&f.h, 64);
        REQUIRE(q != NULL);
        got[ng++] = q;
        if (fix_run(&f, q) != cur) break;
    }
    /* the first block not from the current run is r0's one partial slot,
     * taken without collecting the stack */
    CHECK(fix_run(&f, got[ng - 1]) == r0);
    CHECK(f.h.rstack != NULL);
    CHECK_EQ(f.sp.made, made);
    CHECK_EQ(fix_check(&f), HK_OK);
    /* r0, current now, dry again: its own ten come back (it stays queued) */
    for (int k = 0; k < 10; k++) {
        void *q = zs_alloc(&f.h, 64);
        REQUIRE(q != NULL);
        CHECK(fix_run(&f, q) == r0);
        ps[1 + k] = q;
    }
    CHECK(f.h.rstack != NULL);
    CHECK_EQ(f.sp.made, made);
    CHECK_EQ(fix_check(&f), HK_OK);
    /* three frees into the old current run (full): r0 dry with no partial
     * run left collects the stack, and they come back before a new run */
    for (int k = 0; k < 3; k++) CHECK_EQ(fix_free(&f, &other, got[k]), HK_OK);
    for (int k = 0; k < 3; k++) {
        void *q = zs_alloc(&f.h, 64);
        REQUIRE(q != NULL);
        CHECK(fix_run(&f, q) == cur);
        got[k] = q;
    }
    CHECK(f.h.rstack == NULL);
    CHECK_EQ(f.sp.made, made);
    CHECK_EQ(fix_check(&f), HK_OK);
    for (int k = 0; k < ng; k++) CHECK_EQ(fix_free(&f, &f.h, got[k]), HK_OK);
    for (int k = 0; k < N; k++)
        if (ps[k]) CHECK_EQ(fix_free(&f, &f.h, ps[k]), HK_OK);
    CHECK_EQ(f.errs.count, 0);
    CHECK_EQ(hk__zs_heap_fini(&f.h), 0);
    CHECK_EQ(hk__zs_heap_fini(&other), 0);
    free(ps);
    hk__zs_space_fini(&f.sp);
}

static uint32_t fix_poll_64(void *user, zs_heap *h) {
    (void)user;
    (void)h;
    return 64;
}

/* Remote frees into a class the owner no longer uses wait at most
 * ZS_COLLECT_GAP allocations: the poll collects them then, and the run they
 * emptied goes back to the space. */
HKT_TEST(zone_small_collection_at_the_poll_after_the_gap) {
    zs_fix f;
    fix_init(&f, (size_t)16 << 20);
    f.sp.poll = fix_poll_64;
    zs_heap other;
    hk__zs_heap_init(&other, &f.sp);
    enum { N = 2000 };
    void **ps = malloc(N * sizeof *ps);
    REQUIRE(ps != NULL);
    for (int k = 0; k < N; k++) REQUIRE((ps[k] = zs_alloc(&f.h, 256)) != NULL);
    size_t runs = f.sp.runs;
    /* the 16-byte class's run, made now: a class with no run collects */
    void *small[ZS_COLLECT_GAP + 128];
    int n = 0;
    REQUIRE((small[n++] = zs_alloc(&f.h, 16)) != NULL);
    (void)hk__zs_collect(&f.h); /* the gap counts from here */
    for (int k = 0; k < N; k++) CHECK_EQ(fix_free(&f, &other, ps[k]), HK_OK);
    CHECK(f.h.rstack != NULL);
    for (; n < (int)ZS_COLLECT_GAP - 128; n++) REQUIRE((small[n] = zs_alloc(&f.h, 16)) != NULL);
    CHECK(f.h.rstack != NULL); /* not yet */
    for (; n < (int)ZS_COLLECT_GAP + 128; n++) REQUIRE((small[n] = zs_alloc(&f.h, 16)) != NULL);
    CHECK(f.h.rstack == NULL);
    CHECK(runs >= 8);
    /* the 256-byte runs emptied went back, but for the current ones and the spares */
    CHECK(f.sp.runs <= 2 + ZS_SPARES);
    CHECK_EQ(fix_live(&f, NULL), (uint64_t)n);
    CHECK_EQ(fix_check(&f), HK_OK);
    for (int k = 0; k < n; k++) CHECK_EQ(fix_free(&f, &f.h, small[k]), HK_OK);
    CHECK_EQ(f.errs.count, 0);
    CHECK_EQ(hk__zs_heap_fini(&f.h), 0);
    CHECK_EQ(hk__zs_heap_fini(&other), 0);
    free(ps);
    hk__zs_space_fini(&f.sp);
}

/* When the current run's list runs dry, a partial run's freed slots are
 * handed out before the current run is carved further: freed pages are
 * reused before fresh ones are touched. */
HKT_TEST(zone_small_partial_slots_before_fresh_ones) {
    zs_fix f;
    fix_init(&f, (size_t)16 << 20);
    enum { NMAX = 2 * ZS_SLOTS };
    static void *ps[NMAX];
    int n = 0;
    /* one full run and a second, current, run that has slots left to carve */
    while (n < 2 || fix_run(&f, ps[n - 1]) == fix_run(&f, ps[0]))
        REQUIRE((ps[n++] = zs_alloc(&f.h, 256)) != NULL);
    zs_run *full = fix_run(&f, ps[0]), *cur = f.h.cls[zs_cls_of(256)].cur;
    REQUIRE(cur == fix_run(&f, ps[n - 1]) && cur->bump < cur->nslots);
    for (int k = 0; k < 20; k++) CHECK_EQ(fix_free(&f, &f.h, ps[k]), HK_OK);
    while (cur->free != cur->base) REQUIRE((ps[n++] = zs_alloc(&f.h, 256)) != NULL);
    uint32_t bump = cur->bump;
    for (int k = 0; k < 20; k++) {
        REQUIRE((ps[k] = zs_alloc(&f.h, 256)) != NULL);
        CHECK(fix_run(&f, ps[k]) == full);
    }
    CHECK_EQ(cur->bump, bump);
    CHECK(f.h.cls[zs_cls_of(256)].cur == full);
    CHECK_EQ(fix_check(&f), HK_OK);
    /* the full run used up again: the old current run is carved */
    REQUIRE((ps[n++] = zs_alloc(&f.h, 256)) != NULL);
    CHECK(fix_run(&f, ps[n - 1]) == cur);
    CHECK(cur->bump > bump);
    CHECK_EQ(fix_check(&f), HK_OK);
    for (int k = 0; k < n; k++) CHECK_EQ(fix_free(&f, &f.h, ps[k]), HK_OK);
    fix_done(&f);
}

/* Makes class `size`'s first run of h empty while a second one is current:
 * the first goes to h's spares. Returns it; *live gets the second run's
 * blocks (at most ZS_SLOTS). */
static zs_run *fix_spare_of(zs_fix *f, size_t size, void **live, int *nlive) {
    static void *ps[2 * ZS_SLOTS];
    int n = 0;
    while (n < 2 || fix_run(f, ps[n - 1]) == fix_run(f, ps[0]))
        REQUIRE((ps[n++] = zs_alloc(&f->h, size)) != NULL);
    zs_run *first = fix_run(f, ps[0]);
    *nlive = 0;
    for (int k = 0; k < n; k++) {
        if (fix_run(f, ps[k]) == first)
            CHECK_EQ(fix_free(f, &f->h, ps[k]), HK_OK);
        else
            live[(*nlive)++] = ps[k];
    }
    return first;
}

/* Spares of a heap: the emptied runs of the last ZS_SPARES classes to let
 * one go; a new run of such a class takes its spare without the space (the
 * space's free granules are unchanged), one of a class that has none takes
 * a free granule of the space (the oldest spare went there). */
HKT_TEST(zone_small_spares_keep_their_class) {
    zs_fix f;
    fix_init(&f, (size_t)64 << 20);
    static const size_t sizes[ZS_SPARES + 1] = {512, 1024, 2048, 4096, 8192};
    static void *live[ZS_SPARES + 1][ZS_SLOTS];
    int nlive[ZS_SPARES + 1];
    zs_run *sp[ZS_SPARES + 1];
    for (unsigned k = 0; k <= ZS_SPARES; k++) sp[k] = fix_spare_of(&f, sizes[k], live[k], &nlive[k]);
    CHECK_EQ(f.sp.ndirty, 1); /* the first, evicted by the last */
    for (unsigned k = 1; k <= ZS_SPARES; k++) {
        int found = 0;
        for (unsigned i = 0; i < ZS_SPARES; i++)
            if (f.h.spare[i] == sp[k]) {
                found++;
                CHECK_EQ(f.h.spare_tag[i] & 0xffu, zs_cls_of(sizes[k]));
            }
        CHECK_EQ(found, 1);
    }
    CHECK_EQ(fix_check(&f), HK_OK);
    /* class 1's current run used up: its next run is its spare */
    uint64_t made = f.sp.made;
    unsigned c1 = zs_cls_of(sizes[1]);
    static void *more[2 * ZS_SLOTS];
    int nm = 0;
    while (f.h.cls[c1].cur == fix_run(&f, live[1][0]))
        REQUIRE((more[nm++] = zs_alloc(&f.h, sizes[1])) != NULL);
    CHECK(f.h.cls[c1].cur == sp[1]);
    CHECK_EQ(f.sp.made, made + 1);
    CHECK_EQ(f.sp.ndirty, 1);
    for (unsigned i = 0; i < ZS_SPARES; i++) CHECK(f.h.spare[i] != sp[1]);
    /* class 0's: from the space's free granules */
    unsigned c0 = zs_cls_of(sizes[0]);
    while (f.h.cls[c0].cur == fix_run(&f, live[0][0]))
        REQUIRE((more[nm++] = zs_alloc(&f.h, sizes[0])) != NULL);
    CHECK_EQ(f.sp.made, made + 2);
    CHECK_EQ(f.sp.ndirty, 0);
    CHECK_EQ(fix_check(&f), HK_OK);
    for (int k = 0; k < nm; k++) CHECK_EQ(fix_free(&f, &f.h, more[k]), HK_OK);
    for (unsigned k = 0; k <= ZS_SPARES; k++)
        for (int j = 0; j < nlive[k]; j++) CHECK_EQ(fix_free(&f, &f.h, live[k][j]), HK_OK);
    fix_done(&f);
}

/* A spare no run has taken for ZS_SPARE_AGE allocations goes back to the
 * space at the heap's poll (where the decay clock can give its pages back). */
HKT_TEST(zone_small_spares_age_at_the_poll) {
    zs_fix f;
    fix_init(&f, (size_t)64 << 20);
    f.sp.poll = fix_poll_64;
    static void *live[ZS_SLOTS];
    int nlive;
    zs_run *s = fix_spare_of(&f, 1024, live, &nlive);
    void *q[8] = {0};
    REQUIRE((q[0] = zs_alloc(&f.h, 16)) != NULL); /* its class's run */
    size_t runs = f.sp.runs;
    long k = 1;
    for (; k < (long)ZS_SPARE_AGE - 512; k++) {
        if (q[k & 7]) CHECK_EQ(fix_free(&f, &f.h, q[k & 7]), HK_OK);
        REQUIRE((q[k & 7] = zs_alloc(&f.h, 16)) != NULL);
    }
    int kept = 0;
    for (unsigned i = 0; i < ZS_SPARES; i++) kept += f.h.spare[i] == s;
    CHECK_EQ(kept, 1); /* not yet */
    for (; k < (long)ZS_SPARE_AGE + 512; k++) {
        CHECK_EQ(fix_free(&f, &f.h, q[k & 7]), HK_OK);
        REQUIRE((q[k & 7] = zs_alloc(&f.h, 16)) != NULL);
    }
    for (unsigned i = 0; i < ZS_SPARES; i++) CHECK(f.h.spare[i] == NULL);
    CHECK_EQ(f.sp.runs, runs - 1);
    CHECK_EQ(f.sp.ndirty, 1);
    CHECK_EQ(fix_check(&f), HK_OK);
    for (int j = 0; j < 8; j++) CHECK_EQ(fix_free(&f, &f.h, q[j]), HK_OK);
    for (int j = 0; j < nlive; j++) CHECK_EQ(fix_free(&f, &f.h, live[j]), HK_OK);
    CHECK_EQ(hk__zs_heap_fini(&f.h), 0);
    hk__zs_space_fini(&f.sp);
}

/* With the space used up, a new run takes a spare of another class. */
HKT_TEST(zone_small_spare_of_another_class_when_space_full) {
    zs_fix f;
    fix_init(&f, 3 * ZS_RUN);
    static void *live[ZS_SLOTS];
    int nlive;
    (void)fix_spare_of(&f, 1024, live, &nlive); /* two granules */
    void *a = zs_alloc(&f.h, 2048);             /* the third */
    REQUIRE(a != NULL);
    CHECK_EQ(f.sp.bump, 3);
    void *b = zs_alloc(&f.h, 4096); /* none left but the spare */
    CHECK(b != NULL);
    CHECK_EQ(fix_check(&f), HK_OK);
    CHECK(zs_alloc(&f.h, 8192) == NULL); /* nothing at all left */
    CHECK_EQ(fix_check(&f), HK_OK);
    CHECK_EQ(fix_free(&f, &f.h, a), HK_OK);
    if (b) CHECK_EQ(fix_free(&f, &f.h, b), HK_OK);
    for (int j = 0; j < nlive; j++) CHECK_EQ(fix_free(&f, &f.h, live[j]), HK_OK);
    fix_done(&f);
}

/* A remote free cut short by a fork (its thread gone in the child): one
 * with its bit set, the run's flag set and its in-flight count taken, but
 * the run never pushed. The child's reset collects the block and lets the
 * run go back. */
HKT_TEST(zone_small_fork_reset_after_cut_remote_free) {
    zs_fix f;
    fix_init(&f, (size_t)16 << 20);
    void *ps[2];
    for (int k = 0; k < 2; k++) REQUIRE((ps[k] = zs_alloc(&f.h, 64)) != NULL);
    CHECK_EQ(fix_free(&f, &f.h, ps[1]), HK_OK);
    zs_run *r = zs_run_of(&f.sp, ps[0]);
    REQUIRE(r != NULL);
    uint32_t i = (uint32_t)(((unsigned char *)ps[0] - r->base - zs_first(r)) / r->stride);
    zs_rbits(r)[i >> 6] |= (uint64_t)1 << (i & 63u);
    r->rpend = ZS_RQUEUED;
    CHECK(f.h.rstack == NULL);
    CHECK_EQ(fix_check(&f), HK_ERR_CORRUPT); /* flagged, nobody in flight, not on the stack */
    r->rpend = ZS_RQUEUED + 1;               /* the freer cut by the fork between the flag and its push */
    CHECK_EQ(fix_check(&f), HK_OK);
    hk__zs_heap_fork_reset(&f.h);
    CHECK_EQ(r->rpend, 0);
    CHECK_EQ(fix_live(&f, NULL), 0);
    CHECK_EQ(fix_check(&f), HK_OK);
    CHECK(hk__zs_heap_shrink(&f.h) >= 1); /* the run goes back: nothing holds it */
    CHECK_EQ(f.sp.runs, 0);
    CHECK_EQ(f.errs.count, 1); /* check's report above only */
    CHECK_EQ(hk__zs_heap_fini(&f.h), 0);
    hk__zs_space_fini(&f.sp);
}

typedef struct walk_acc {
    int n;
    size_t bytes;
} walk_acc;
static int walk_count(const hk_block_info *bi, void *user) {
    walk_acc *w = user;
    w->n++;
    w->bytes += bi->size;
    return 0;
}

/* A free into a run that was given back (all its blocks freed, another
 * class's run not yet made there) is a double free, reported. */
HKT_TEST(zone_small_free_into_given_back_run) {
    zs_fix f;
    fix_init(&f, (size_t)16 << 20);
    void *ps[2000];
    for (int k = 0; k < 2000; k++) REQUIRE((ps[k] = zs_alloc(&f.h, 200)) != NULL);
    zs_run *first = zs_run_of(&f.sp, ps[0]);
    CHECK(zs_run_of(&f.sp, ps[1999]) != first);
    for (int k = 0; k < 2000; k++) CHECK_EQ(fix_free(&f, &f.h, ps[k]), HK_OK);
    CHECK(first->heap == NULL); /* given back: not the current run */
    CHECK_EQ(fix_free(&f, &f.h, ps[0]), HK_ERR_DOUBLE_FREE);
    CHECK_STR_CONTAINS(f.errs.last_message, "given back");
    CHECK_EQ(fix_check(&f), HK_OK);
    CHECK_EQ(f.errs.count, 1);
    hk__zs_space_fini(&f.sp);
}

HKT_TEST(zone_small_walk_lists_used_slots) {
    zs_fix f;
    fix_init(&f, (size_t)16 << 20);
    void *a = zs_alloc(&f.h, 10), *b = zs_alloc(&f.h, 500), *c = zs_alloc(&f.h, 10);
    REQUIRE(a && b && c);
    CHECK_EQ(fix_free(&f, &f.h, c), HK_OK);
    walk_acc acc = {0, 0};
    CHECK_EQ(hk__zs_walk(&f.h, walk_count, &acc), 0);
    CHECK_EQ(acc.n, 2);
    CHECK_EQ(acc.bytes, 16 + 512);
    uint64_t bytes;
    CHECK_EQ(fix_live(&f, &bytes), 2);
    CHECK_EQ(acc.bytes, bytes);
    hk__zs_space_fini(&f.sp);
}

/* A freed slot is poisoned, a used one is not (ASan builds; elsewhere
 * there is nothing to see). */
HKT_TEST(zone_small_asan_poisons_free_slots) {
#ifdef HK__ASAN
    zs_fix f;
    fix_init(&f, (size_t)16 << 20);
    unsigned char *a = zs_alloc(&f.h, 32);
    REQUIRE(a != NULL);
    CHECK(!__asan_region_is_poisoned(a, 32));
    CHECK_EQ(fix_free(&f, &f.h, a), HK_OK);
    CHECK(__asan_address_is_poisoned(a));
    CHECK(__asan_address_is_poisoned(a + 31));
    hk__zs_space_fini(&f.sp);
#endif
}

/* ---- threads ------------------------------------------------------------------- */

enum { ZT_THREADS = 4, ZT_ROUNDS = 200, ZT_BATCH = 64 };
typedef struct zt_mail {
    void *volatile slot[ZT_BATCH];
    volatile int full; /* atomic */
} zt_mail;
typedef struct zt_arg {
    zs_fix *f;
    zs_heap h;
    zt_mail *in, *out;
    int errors;
} zt_arg;

/* Each thread allocates a batch, mails it to its neighbour, and frees the
 * batch its other neighbour mailed it: every free is a remote one. */
static void *zt_main(void *v) {
    zt_arg *a = v;
    for (int round = 0; round < ZT_ROUNDS; round++) {
        while (__atomic_load_n(&a->out->full, __ATOMIC_ACQUIRE)) hk__zs_collect(&a->h);
        for (int k = 0; k < ZT_BATCH; k++) {
            size_t n = (size_t)(8 + (round * 7 + k * 13) % 1000);
            unsigned char *p = zs_alloc(&a->h, n);
            if (!p) {
                a->errors++;
                continue;
            }
            p[0] = (unsigned char)k;
            a->out->slot[k] = p;
        }
        __atomic_store_n(&a->out->full, 1, __ATOMIC_RELEASE);
        while (!__atomic_load_n(&a->in->full, __ATOMIC_ACQUIRE)) hk__zs_collect(&a->h);
        for (int k = 0; k < ZT_BATCH; k++) {
            void *p = a->in->slot[k];
            if (p && fix_free(a->f, &a->h, p) != HK_OK) a->errors++;
        }
        __atomic_store_n(&a->in->full, 0, __ATOMIC_RELEASE);
    }
    return NULL;
}

HKT_TEST(zone_small_threads_remote_frees) {
    zs_fix f;
    fix_init(&f, (size_t)256 << 20);
    static zt_mail mail[ZT_THREADS];
    static zt_arg args[ZT_THREADS];
    pthread_t t[ZT_THREADS];
    memset(mail, 0, sizeof mail);
    for (int i = 0; i < ZT_THREADS; i++) {
        args[i].f = &f;
        hk__zs_heap_init(&args[i].h, &f.sp);
        args[i].in = &mail[(i + ZT_THREADS - 1) % ZT_THREADS];
        args[i].out = &mail[i];
        args[i].errors = 0;
    }
    for (int i = 0; i < ZT_THREADS; i++) REQUIRE(pthread_create(&t[i], NULL, zt_main, &args[i]) == 0);
    for (int i = 0; i < ZT_THREADS; i++) pthread_join(t[i], NULL);
    zs_heap *hs[ZT_THREADS];
    for (int i = 0; i < ZT_THREADS; i++) {
        CHECK_EQ(args[i].errors, 0);
        hk__zs_collect(&args[i].h);
        hs[i] = &args[i].h;
    }
    CHECK_EQ(hk__zs_check(hs, ZT_THREADS, &f.rep), HK_OK);
    CHECK_EQ(f.errs.count, 0);
    for (int i = 0; i < ZT_THREADS; i++) CHECK_EQ(hk__zs_heap_fini(&args[i].h), 0);
    CHECK_EQ(f.sp.runs, 0);
    hk__zs_space_fini(&f.sp);
}

/* gc: reference counting, steps, cascades, cycles, modes, misuse, stats and
 * introspection (the randomized model runs are tests/test_gc_model.c, the
 * references' handle-table behaviour tests/test_gc_handles.c). */
#include "heapkit/gc.h"
#include "hk_test.h"
#include "gc_test_util.h"
#include "internal.h"

/* ---- test types ---------------------------------------------------------- */

/* node, k_node, g_finalized: gc_test_util.h */

/* An array of references (variable size). */
static void array_trace(void *data, size_t size, hk_gc_visit_fn visit, void *ctx, void *user) {
    (void)user;
    hk_gc_obj **v = (hk_gc_obj **)data;
    for (size_t i = 0; i < size / sizeof *v; i++) visit(v[i], ctx);
}
static const hk_gc_type k_array = {"array", 0, array_trace, NULL, NULL};
static const hk_gc_type k_leaf = {"leaf", 16, NULL, NULL, NULL};

/* A simulated clock: every read advances time by `tick` ns. */
typedef struct fake_clock {
    uint64_t now, tick, reads;
} fake_clock;
static uint64_t fake_now(void *u) {
    fake_clock *c = (fake_clock *)u;
    c->reads++;
    c->now += c->tick;
    return c->now;
}

static hkt_errors g_errs;

static hk_gc *mk(uint32_t flags) {
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    hk_gc_desc d = {0};
    d.flags = flags;
    d.name = "test";
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    return hk_gc_create(&d);
}

static node *N(hk_gc *gc, hk_gc_obj *o) { return (node *)hk_gc_data(gc, o); }

static hk_gc_info info(hk_gc *gc) {
    hk_gc_info i;
    hk_gc_get_info(gc, &i);
    return i;
}

/* ---- basics -------------------------------------------------------------- */

HKT_TEST(gc_create_destroy_defaults) {
    CHECK(hk_gc_create(NULL) == NULL);
    hk_gc_desc bad = {0};
    bad.flags = HK_FLAG_QUIET; /* refused with a report; keep the output clean */
    bad.backing.alloc = NULL;
    bad.backing.free = (void (*)(void *, size_t, void *))1;
    CHECK(hk_gc_create(&bad) == NULL);
    hk_gc *gc = mk(0);
    REQUIRE(gc);
    CHECK(hk_gc_incremental(gc));
    hk_stats s;
    CHECK_EQ(hk_gc_stats(gc, &s), HK_OK);
    CHECK(strcmp(s.allocator, "gc") == 0);
    CHECK_EQ(s.live_blocks, 0);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
    hk_gc_destroy(NULL);
    hk_gc *im = mk(HK_GC_IMMEDIATE);
    CHECK(!hk_gc_incremental(im));
    hk_gc_destroy(im);
}

HKT_TEST(gc_alloc_data_zeroed_and_counted) {
    hk_gc *gc = mk(0);
    hk_gc_obj *a = hk_gc_alloc(gc, &k_node);
    REQUIRE(a);
    node *n = N(gc, a);
    REQUIRE(n);
    CHECK(n->ref[0] == NULL && n->ref[1] == NULL && n->value == 0);
    CHECK_EQ(hk_gc_refcount(gc, a), 1);
    CHECK_EQ(hk_gc_size(gc, a), sizeof(node));
    CHECK(hk_gc_type_of(gc, a) == &k_node);
    hk_gc_obj *z = hk_gc_alloc_size(gc, &k_array, 0);
    REQUIRE(z);
    CHECK(hk_gc_data(gc, z) == NULL);
    hk_gc_obj *arr = hk_gc_alloc_array(gc, &k_array, 5, sizeof(hk_gc_obj *));
    REQUIRE(arr);
    CHECK_EQ(hk_gc_size(gc, arr), 5 * sizeof(hk_gc_obj *));
    hk_gc_info i = info(gc);
    CHECK_EQ(i.objects, 3);
    CHECK_EQ(i.live, 3);
    CHECK_EQ(i.backlog, 0);
    CHECK_EQ(i.data_bytes, sizeof(node) + 5 * sizeof(hk_gc_obj *));
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    CHECK_EQ(g_errs.count, 0);
    hk_gc_destroy(gc);
}

HKT_TEST(gc_alloc_failures) {
    hk_gc *gc = mk(0);
    CHECK(hk_gc_alloc_size(gc, &k_leaf, SIZE_MAX) == NULL);
    CHECK_EQ(g_errs.last_kind, HK_EK_OVERFLOW);
    CHECK(hk_gc_alloc_array(gc, &k_array, SIZE_MAX / 2, 4) == NULL);
    CHECK_EQ(g_errs.last_kind, HK_EK_OVERFLOW);
    CHECK(hk_gc_alloc_size(gc, &k_leaf, SIZE_MAX - 4096) == NULL); /* past PTRDIFF_MAX */
    CHECK_EQ(g_errs.last_kind, HK_EK_OVERFLOW);
    CHECK(hk_gc_alloc(gc, NULL) == NULL);
    CHECK_EQ(g_errs.last_kind, HK_EK_INVALID_ARG);
    hk_stats s;
    hk_gc_stats(gc, &s);
    CHECK_EQ(s.fail_count, 4);
    CHECK_EQ(s.error_count, 4);
    CHECK_EQ(s.live_blocks, 0);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

/* Out-of-memory injection: fail the Nth hook allocation for N = 1, 2, ...
 * until a whole scenario succeeds; the collector stays consistent. */
typedef struct oom_ctx {
    int fail_at, calls;
} oom_ctx;
static void *oom_alloc(size_t n, void *u) {
    oom_ctx *c = (oom_ctx *)u;
    if (++c->calls == c->fail_at) return NULL;
    return malloc(n);
}
static void oom_free(void *p, size_t n, void *u) {
    (void)n;
    (void)u;
    free(p);
}

HKT_TEST(gc_oom_injection) {
    int completed = 0;
    for (int fail = 1; fail < 40 && !completed; fail++) {
        oom_ctx c = {fail, 0};
        hkt_errors e = {0};
        e.quiet = 1;
        hk_gc_desc d = {0};
        d.backing = (hk_alloc_hooks){oom_alloc, oom_free, &c};
        d.on_error = hkt_on_error;
        d.error_user = &e;
        hk_gc *gc = hk_gc_create(&d);
        if (!gc) continue; /* the control block itself failed */
        int ok = 1;
        hk_gc_obj *keep[20];
        int nk = 0;
        for (int i = 0; i < 20; i++) {
            hk_gc_obj *o = hk_gc_alloc(gc, &k_node);
            if (!o) {
                ok = 0;
                CHECK_EQ(e.last_kind, HK_EK_NOMEM);
                continue;
            }
            keep[nk++] = o;
        }
        CHECK_EQ(hk_gc_check(gc), HK_OK);
        for (int i = 0; i < nk; i++) hk_gc_release(gc, keep[i]);
        CHECK_EQ(hk_gc_collect(gc), (size_t)nk);
        CHECK_EQ(hk_gc_check(gc), HK_OK);
        if (ok) completed = 1;
        hk_gc_destroy(gc);
    }
    CHECK(completed);
}

/* ---- incremental reclamation -------------------------------------------- */

HKT_TEST(gc_release_queues_then_step_reclaims) {
    hk_gc *gc = mk(0);
    g_finalized = 0;
    hk_gc_obj *o[10];
    for (int i = 0; i < 10; i++) o[i] = hk_gc_alloc(gc, &k_node);
    for (int i = 0; i < 10; i++) CHECK_EQ(hk_gc_release(gc, o[i]), HK_OK);
    hk_gc_info i = info(gc);
    CHECK_EQ(i.backlog, 10);
    CHECK_EQ(i.live, 0);
    CHECK_EQ(g_finalized, 0);
    /* Garbage awaiting reclamation is still readable. */
    CHECK(hk_gc_data(gc, o[3]) != NULL);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    CHECK_EQ(hk_gc_step(gc, UINT64_MAX), 10);
    i = info(gc);
    CHECK_EQ(i.backlog, 0);
    CHECK_EQ(i.objects, 0);
    CHECK_EQ(i.freed, 10);
    CHECK_EQ(g_finalized, 10);
    CHECK_EQ(hk_gc_step(gc, UINT64_MAX), 0);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    CHECK_EQ(g_errs.count, 0);
    hk_gc_destroy(gc);
}

HKT_TEST(gc_step_budget_with_simulated_clock) {
    fake_clock fc = {0, 100, 0};
    hk_gc_desc d = {0};
    d.clock = fake_now;
    d.clock_user = &fc;
    hk_gc *gc = hk_gc_create(&d);
    for (int i = 0; i < 1000; i++) hk_gc_release(gc, hk_gc_alloc(gc, &k_leaf));
    /* Each object costs one clock read (100 ns). With a 1000 ns budget the
     * step stops after 9: a tenth of average cost would reach the deadline. */
    CHECK_EQ(hk_gc_step(gc, 1000), 9);
    CHECK_EQ(info(gc).backlog, 991);
    CHECK_EQ(info(gc).step_last_ns, 900);
    /* Budget 0 still examines one object: the cursor always advances. */
    CHECK_EQ(hk_gc_step(gc, 0), 1);
    CHECK_EQ(info(gc).backlog, 990);
    /* A clock that jumped far ahead (or stands still) still advances. */
    fc.tick = 0;
    fc.now = UINT64_MAX - 5;
    CHECK_EQ(hk_gc_step(gc, 1000), 990);
    CHECK_EQ(info(gc).backlog, 0);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

HKT_TEST(gc_step_object_cap) {
    fake_clock fc = {0, 0, 0}; /* time never passes: only the cap stops the step */
    hk_gc_desc d = {0};
    d.clock = fake_now;
    d.clock_user = &fc;
    d.step_max_objects = 7;
    hk_gc *gc = hk_gc_create(&d);
    for (int i = 0; i < 20; i++) hk_gc_release(gc, hk_gc_alloc(gc, &k_leaf));
    CHECK_EQ(hk_gc_step(gc, 1000000), 7);
    CHECK_EQ(hk_gc_step(gc, 1000000), 7);
    CHECK_EQ(hk_gc_step(gc, 1000000), 6);
    CHECK_EQ(info(gc).step_objects, 20);
    CHECK_EQ(info(gc).steps, 3);
    hk_gc_destroy(gc);
    /* Default cap. */
    gc = mk(0);
    for (unsigned i = 0; i < HK_GC_DEFAULT_STEP_OBJECTS + 10; i++)
        hk_gc_release(gc, hk_gc_alloc(gc, &k_leaf));
    CHECK_EQ(hk_gc_step(gc, UINT64_MAX), HK_GC_DEFAULT_STEP_OBJECTS);
    CHECK_EQ(hk_gc_step(gc, UINT64_MAX), 10);
    hk_gc_destroy(gc);
}

/* A chain a -> b -> c -> ...: releasing the head cascades through a worklist. */
HKT_TEST(gc_cascade_in_one_pass) {
    hk_gc *gc = mk(0);
    g_finalized = 0;
    enum { LEN = 50 };
    hk_gc_obj *o[LEN];
    for (int i = 0; i < LEN; i++) o[i] = hk_gc_alloc(gc, &k_node);
    for (int i = 0; i + 1 < LEN; i++) {
        CHECK_EQ(hk_gc_assign(gc, &N(gc, o[i])->ref[0], o[i + 1]), HK_OK);
        hk_gc_release(gc, o[i + 1]); /* now only the parent holds it */
    }
    CHECK_EQ(info(gc).live, LEN);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_release(gc, o[0]);
    CHECK_EQ(info(gc).backlog, 1);
    /* One step with room for everything reclaims the whole chain. */
    CHECK_EQ(hk_gc_step(gc, UINT64_MAX), LEN);
    CHECK_EQ(info(gc).objects, 0);
    CHECK_EQ(g_finalized, LEN);
    /* A tree: root with two subtrees; partial steps walk the worklist. */
    hk_gc_obj *root = hk_gc_alloc(gc, &k_node), *l = hk_gc_alloc(gc, &k_node), *r = hk_gc_alloc(gc, &k_node);
    hk_gc_assign(gc, &N(gc, root)->ref[0], l);
    hk_gc_assign(gc, &N(gc, root)->ref[1], r);
    hk_gc_assign(gc, &N(gc, l)->ref[0], r); /* r is shared: count 2 */
    hk_gc_release(gc, l);
    hk_gc_release(gc, r);
    CHECK_EQ(hk_gc_refcount(gc, r), 2);
    hk_gc_release(gc, root);
    CHECK_EQ(hk_gc_step(gc, 0), 1); /* root: l reaches zero, r drops to 1 */
    CHECK_EQ(hk_gc_refcount(gc, r), 1);
    CHECK_EQ(info(gc).backlog, 1);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    CHECK_EQ(hk_gc_step(gc, 0), 1); /* l: r reaches zero */
    CHECK_EQ(hk_gc_step(gc, 0), 1); /* r */
    CHECK_EQ(info(gc).objects, 0);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    CHECK_EQ(g_errs.count, 0);
    hk_gc_destroy(gc);
}

/* A 200k-long chain reclaimed without recursion (no stack overflow). */
HKT_TEST(gc_long_chain_no_recursion) {
    hk_gc *gc = mk(HK_GC_IMMEDIATE);
    enum { LEN = 200000 };
    hk_gc_obj *head = hk_gc_alloc(gc, &k_node), *cur = head;
    for (int i = 1; i < LEN; i++) {
        hk_gc_obj *nx = hk_gc_alloc(gc, &k_node);
        N(gc, cur)->ref[0] = nx; /* ownership of nx's reference moves into the field */
        cur = nx;
    }
    CHECK_EQ(info(gc).objects, LEN);
    hk_gc_release(gc, head);
    CHECK_EQ(info(gc).objects, 0);
    /* The same as a cycle: the tail points back to the head. */
    head = hk_gc_alloc(gc, &k_node);
    cur = head;
    for (int i = 1; i < LEN; i++) {
        hk_gc_obj *nx = hk_gc_alloc(gc, &k_node);
        N(gc, cur)->ref[0] = nx;
        cur = nx;
    }
    hk_gc_assign(gc, &N(gc, cur)->ref[0], head);
    hk_gc_release(gc, head);
    CHECK_EQ(info(gc).objects, LEN);
    CHECK_EQ(info(gc).candidates, 1);
    CHECK_EQ(hk_gc_collect(gc), LEN);
    CHECK_EQ(info(gc).objects, 0);
    CHECK_EQ(info(gc).freed_cycles, LEN);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

/* ---- cycles -------------------------------------------------------------- */

HKT_TEST(gc_cycles_trial_deletion) {
    hk_gc *gc = mk(0);
    g_finalized = 0;
    /* a <-> b, released: plain counting would leak them. */
    hk_gc_obj *a = hk_gc_alloc(gc, &k_node), *b = hk_gc_alloc(gc, &k_node);
    hk_gc_assign(gc, &N(gc, a)->ref[0], b);
    hk_gc_assign(gc, &N(gc, b)->ref[0], a);
    hk_gc_release(gc, a);
    hk_gc_release(gc, b);
    CHECK_EQ(hk_gc_step(gc, UINT64_MAX), 0);
    CHECK_EQ(info(gc).objects, 2);
    CHECK_EQ(info(gc).candidates, 2);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    CHECK_EQ(hk_gc_collect(gc), 2);
    CHECK_EQ(info(gc).objects, 0);
    CHECK_EQ(info(gc).freed_cycles, 2);
    CHECK_EQ(g_finalized, 2);
    /* Self-reference. */
    hk_gc_obj *s = hk_gc_alloc(gc, &k_node);
    hk_gc_assign(gc, &N(gc, s)->ref[0], s);
    hk_gc_release(gc, s);
    CHECK_EQ(hk_gc_collect(gc), 1);
    /* A cycle still held from outside survives, with its counts restored. */
    hk_gc_obj *x = hk_gc_alloc(gc, &k_node), *y = hk_gc_alloc(gc, &k_node), *leaf = hk_gc_alloc(gc, &k_leaf);
    hk_gc_assign(gc, &N(gc, x)->ref[0], y);
    hk_gc_assign(gc, &N(gc, y)->ref[0], x);
    hk_gc_assign(gc, &N(gc, y)->ref[1], leaf);
    hk_gc_release(gc, y);
    hk_gc_release(gc, leaf);
    CHECK_EQ(hk_gc_collect(gc), 0);
    CHECK_EQ(hk_gc_refcount(gc, x), 2);
    CHECK_EQ(hk_gc_refcount(gc, y), 1);
    CHECK_EQ(hk_gc_refcount(gc, leaf), 1);
    CHECK_EQ(info(gc).candidates, 0);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    /* Dropping the outside reference: the cycle and what it holds go. */
    hk_gc_release(gc, x);
    CHECK_EQ(hk_gc_collect(gc), 3);
    CHECK_EQ(info(gc).objects, 0);
    /* A garbage cycle that references a live object: the live one survives
     * with the right count, and garbage hanging off the cycle goes too. */
    hk_gc_obj *live = hk_gc_alloc(gc, &k_node);
    hk_gc_obj *p = hk_gc_alloc(gc, &k_node), *q = hk_gc_alloc(gc, &k_node);
    hk_gc_assign(gc, &N(gc, p)->ref[0], q);
    hk_gc_assign(gc, &N(gc, q)->ref[0], p);
    hk_gc_assign(gc, &N(gc, q)->ref[1], live);
    CHECK_EQ(hk_gc_refcount(gc, live), 2);
    hk_gc_release(gc, p);
    hk_gc_release(gc, q);
    CHECK_EQ(hk_gc_collect(gc), 2);
    CHECK_EQ(hk_gc_refcount(gc, live), 1);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_release(gc, live);
    CHECK_EQ(hk_gc_collect(gc), 1);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    CHECK_EQ(g_errs.count, 0);
    hk_gc_destroy(gc);
}

/* Two cycles joined, candidates reached from other candidates, a live
 * object pointing into a garbage-looking structure. */
HKT_TEST(gc_cycles_shared_structure) {
    hk_gc *gc = mk(0);
    hk_gc_obj *o[6];
    for (int i = 0; i < 6; i++) o[i] = hk_gc_alloc(gc, &k_node);
    /* ring 0->1->2->0 and ring 3->4->5->3, joined 2->3 */
    hk_gc_assign(gc, &N(gc, o[0])->ref[0], o[1]);
    hk_gc_assign(gc, &N(gc, o[1])->ref[0], o[2]);
    hk_gc_assign(gc, &N(gc, o[2])->ref[0], o[0]);
    hk_gc_assign(gc, &N(gc, o[3])->ref[0], o[4]);
    hk_gc_assign(gc, &N(gc, o[4])->ref[0], o[5]);
    hk_gc_assign(gc, &N(gc, o[5])->ref[0], o[3]);
    hk_gc_assign(gc, &N(gc, o[2])->ref[1], o[3]);
    for (int i = 0; i < 6; i++)
        if (i != 4) hk_gc_release(gc, o[i]);
    /* o[4] is still held: ring 3-4-5 survives, ring 0-1-2 goes. */
    CHECK_EQ(hk_gc_collect(gc), 3);
    CHECK_EQ(hk_gc_refcount(gc, o[3]), 1);
    CHECK_EQ(hk_gc_refcount(gc, o[4]), 2);
    CHECK_EQ(hk_gc_refcount(gc, o[5]), 1);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_release(gc, o[4]);
    CHECK_EQ(hk_gc_collect(gc), 3);
    CHECK_EQ(info(gc).objects, 0);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

/* ---- full pass ----------------------------------------------------------- */

HKT_TEST(gc_collect_drains_backlog_and_cycles) {
    hk_gc *gc = mk(0);
    /* 1000 arrays each holding 3 leaves, plus 100 two-cycles. */
    for (int i = 0; i < 1000; i++) {
        hk_gc_obj *arr = hk_gc_alloc_array(gc, &k_array, 3, sizeof(hk_gc_obj *));
        hk_gc_obj **v = (hk_gc_obj **)hk_gc_data(gc, arr);
        for (int k = 0; k < 3; k++) v[k] = hk_gc_alloc(gc, &k_leaf);
        hk_gc_release(gc, arr);
    }
    for (int i = 0; i < 100; i++) {
        hk_gc_obj *a = hk_gc_alloc(gc, &k_node), *b = hk_gc_alloc(gc, &k_node);
        hk_gc_assign(gc, &N(gc, a)->ref[0], b);
        hk_gc_assign(gc, &N(gc, b)->ref[0], a);
        hk_gc_release(gc, a);
        hk_gc_release(gc, b);
    }
    CHECK_EQ(info(gc).backlog, 1000);
    CHECK_EQ(hk_gc_collect(gc), 4200);
    hk_gc_info i = info(gc);
    CHECK_EQ(i.objects, 0);
    CHECK_EQ(i.collects, 1);
    CHECK_EQ(i.freed, 4200);
    CHECK_EQ(i.freed_cycles, 200);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

/* ---- modes ------------------------------------------------------------------ */

HKT_TEST(gc_switch_modes_at_run_time) {
    hk_gc *gc = mk(0);
    g_finalized = 0;
    hk_gc_obj *a = hk_gc_alloc(gc, &k_node), *b = hk_gc_alloc(gc, &k_node);
    hk_gc_assign(gc, &N(gc, a)->ref[0], b);
    hk_gc_release(gc, b);
    hk_gc_release(gc, a);
    CHECK_EQ(info(gc).backlog, 1);
    CHECK_EQ(hk_gc_set_incremental(gc, false), HK_OK);
    CHECK(!hk_gc_incremental(gc));
    CHECK(!info(gc).incremental);
    CHECK_EQ(info(gc).backlog, 1); /* switching does not drain by itself */
    /* Immediate mode: a release to zero reclaims at once, with the cascade
     * (and the backlog left from incremental mode). */
    hk_gc_obj *c = hk_gc_alloc(gc, &k_node), *d = hk_gc_alloc(gc, &k_node);
    hk_gc_assign(gc, &N(gc, c)->ref[0], d);
    hk_gc_release(gc, d);
    hk_gc_release(gc, c);
    CHECK_EQ(info(gc).objects, 0);
    CHECK_EQ(g_finalized, 4);
    /* A step in immediate mode drains everything, ignoring the cap. */
    CHECK_EQ(hk_gc_set_incremental(gc, true), HK_OK);
    for (int i = 0; i < 5000; i++) hk_gc_release(gc, hk_gc_alloc(gc, &k_leaf));
    CHECK_EQ(info(gc).backlog, 5000);
    hk_gc_set_incremental(gc, false);
    CHECK_EQ(hk_gc_step(gc, 0), 5000);
    CHECK_EQ(info(gc).backlog, 0);
    hk_gc_set_incremental(gc, true);
    hk_gc_release(gc, hk_gc_alloc(gc, &k_leaf));
    CHECK_EQ(info(gc).backlog, 1);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

HKT_TEST(gc_pacing_by_allocation_debt) {
    hk_gc_desc d = {0};
    d.pace_bytes = 4096;
    hk_gc *gc = hk_gc_create(&d);
    /* Allocate-and-drop without ever stepping: pacing alone bounds the backlog. */
    size_t max_backlog = 0;
    for (int i = 0; i < 100000; i++) {
        hk_gc_release(gc, hk_gc_alloc(gc, &k_leaf));
        size_t b = info(gc).backlog;
        if (b > max_backlog) max_backlog = b;
    }
    hk_gc_info i = info(gc);
    CHECK(i.paced_steps > 0);
    CHECK(i.paced_objects > 90000);
    CHECK(max_backlog < 200);
    CHECK_EQ(i.steps, 0);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    /* Without pacing the same loop leaves everything in the backlog. */
    hk_gc *np = mk(0);
    for (int k = 0; k < 10000; k++) hk_gc_release(np, hk_gc_alloc(np, &k_leaf));
    CHECK_EQ(info(np).backlog, 10000);
    CHECK_EQ(info(np).paced_steps, 0);
    /* Pacing is off in immediate mode (nothing to pace). */
    hk_gc_set_incremental(gc, false);
    uint64_t before = info(gc).paced_steps;
    for (int k = 0; k < 1000; k++) hk_gc_release(gc, hk_gc_alloc(gc, &k_leaf));
    CHECK_EQ(info(gc).paced_steps, before);
    CHECK_EQ(info(gc).backlog, 0);
    hk_gc_destroy(np);
    hk_gc_destroy(gc);
}

/* ---- statistics -------------------------------------------------------------- */

HKT_TEST(gc_step_statistics) {
    fake_clock fc = {0, 0, 0};
    hk_gc_desc d = {0};
    d.clock = fake_now;
    d.clock_user = &fc;
    hk_gc *gc = hk_gc_create(&d);
    for (int i = 0; i < 400; i++) hk_gc_release(gc, hk_gc_alloc(gc, &k_leaf));
    /* 99 steps of 1 object at 10 ns per read (2 reads: 10 ns), one of 99 objects (990 ns). */
    fc.tick = 10;
    for (int i = 0; i < 99; i++) hk_gc_step(gc, 0);
    fc.tick = 10;
    hk_gc_step(gc, 1000);
    hk_gc_info i = info(gc);
    CHECK_EQ(i.steps, 100);
    CHECK_EQ(i.step_last_ns, 990);
    CHECK_EQ(i.step_max_ns, 990);
    CHECK_EQ(i.step_p50_ns, 10);
    CHECK(i.step_p99_ns >= 10 && i.step_p99_ns <= 12);
    CHECK_EQ(i.step_total_ns, 99 * 10 + 990);
    /* One more long step moves the p99 to it (bucket bound, within 12.5%). */
    hk_gc_step(gc, 500);
    hk_gc_step(gc, 500);
    i = info(gc);
    CHECK(i.step_p99_ns >= 490 && i.step_p99_ns <= 990);
    fc.tick = 7;
    hk_gc_collect(gc);
    i = info(gc);
    CHECK_EQ(i.collects, 1);
    CHECK_EQ(i.collect_last_ns, 7);
    CHECK_EQ(i.collect_max_ns, 7);
    hk_gc_reset_timing(gc);
    i = info(gc);
    CHECK_EQ(i.steps, 0);
    CHECK_EQ(i.step_max_ns, 0);
    CHECK_EQ(i.step_p99_ns, 0);
    CHECK_EQ(i.freed, 400);
    CHECK_EQ(hk_gc_get_info(NULL, &i), HK_ERR_INVALID);
    hk_gc_destroy(gc);
}

/* ---- misuse --------------------------------------------------------------- */

HKT_TEST(gc_misuse_release_below_zero) {
    hk_gc *gc = mk(0);
    hk_gc_obj *a = hk_gc_alloc(gc, &k_node);
    hk_gc_release(gc, a);
    CHECK_EQ(hk_gc_release(gc, a), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(g_errs.count, 1);
    CHECK_EQ(g_errs.last_kind, HK_EK_DOUBLE_FREE);
    CHECK(g_errs.last_address == a);
    CHECK_STR_CONTAINS(g_errs.last_message, "gc 'test'");
    CHECK_STR_CONTAINS(g_errs.last_message, "release below zero");
    CHECK_STR_CONTAINS(g_errs.last_message, "(node)");
    CHECK_EQ(info(gc).backlog, 1);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    /* Retaining garbage awaiting reclamation is refused too. */
    CHECK_EQ(hk_gc_retain(gc, a), HK_ERR_STALE);
    CHECK_STR_CONTAINS(g_errs.last_message, "garbage awaiting reclamation");
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_step(gc, UINT64_MAX);
    /* After reclamation: released again, the reference its slot gave out
     * last: still a release below zero (a double free). */
    CHECK_EQ(hk_gc_release(gc, a), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(g_errs.last_kind, HK_EK_DOUBLE_FREE);
    CHECK_STR_CONTAINS(g_errs.last_message, "release of reference");
    CHECK_STR_CONTAINS(g_errs.last_message, "it was already freed");
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    CHECK_EQ(info(gc).freed, 1);
    hk_gc_destroy(gc);
}

HKT_TEST(gc_misuse_retain_of_freed) {
    hk_gc *gc = mk(HK_GC_IMMEDIATE);
    hk_gc_obj *a = hk_gc_alloc(gc, &k_leaf);
    hk_gc_release(gc, a);
    CHECK_EQ(hk_gc_retain(gc, a), HK_ERR_STALE);
    CHECK_EQ(g_errs.last_kind, HK_EK_STALE);
    CHECK_STR_CONTAINS(g_errs.last_message, "retain of stale reference");
    CHECK_STR_CONTAINS(g_errs.last_message, "it was freed");
    CHECK(hk_gc_data(gc, a) == NULL);
    CHECK_STR_CONTAINS(g_errs.last_message, "data access of stale reference");
    CHECK_EQ(hk_gc_refcount(gc, a), 0);
    CHECK_EQ(hk_gc_size(gc, a), 0);
    CHECK(hk_gc_type_of(gc, a) == NULL);
    hk_gc_obj *field = NULL;
    CHECK_EQ(hk_gc_assign(gc, &field, a), HK_ERR_STALE);
    CHECK(field == NULL);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    /* Freed slots are reused last (FIFO): a thousand allocations later the
     * stale reference is still caught; and after its slot was reused too
     * (generations): a release of it is then stale, not a double free. */
    hk_gc_obj *keep[1100];
    for (int i = 0; i < 1000; i++) keep[i] = hk_gc_alloc(gc, &k_leaf);
    CHECK_EQ(hk_gc_retain(gc, a), HK_ERR_STALE);
    for (int i = 1000; i < 1100; i++) keep[i] = hk_gc_alloc(gc, &k_leaf); /* a's slot is reused */
    CHECK(hk_gc_data(gc, a) == NULL);
    CHECK_EQ(hk_gc_release(gc, a), HK_ERR_STALE);
    CHECK_EQ(g_errs.last_kind, HK_EK_STALE);
    for (int i = 0; i < 1100; i++) CHECK_EQ(hk_gc_refcount(gc, keep[i]), 1);
    for (int i = 0; i < 1100; i++) hk_gc_release(gc, keep[i]);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

HKT_TEST(gc_misuse_foreign_objects) {
    hk_gc *gc = mk(0);
    hkt_errors other_errs = {0};
    hk_gc_desc d2 = {0};
    d2.on_error = hkt_on_error;
    d2.error_user = &other_errs;
    hk_gc *other = hk_gc_create(&d2);
    hk_gc_obj *mine = hk_gc_alloc(gc, &k_node);
    hk_gc_obj *theirs = hk_gc_alloc(other, &k_node);
    CHECK_EQ(hk_gc_retain(gc, theirs), HK_ERR_FOREIGN);
    CHECK_EQ(g_errs.last_kind, HK_EK_FOREIGN_PTR);
    CHECK_STR_CONTAINS(g_errs.last_message, "foreign reference");
    CHECK_STR_CONTAINS(g_errs.last_message, "another instance's reference");
    CHECK_EQ(hk_gc_release(gc, theirs), HK_ERR_FOREIGN);
    CHECK_EQ(g_errs.last_kind, HK_EK_FOREIGN_PTR);
    CHECK_EQ(hk_gc_refcount(other, theirs), 1);
    /* A forged reference (a slot never used), a real pointer, NULL. */
    CHECK_EQ(hk_gc_retain(gc, (hk_gc_obj *)((char *)mine + 8)), HK_ERR_FOREIGN);
    CHECK_EQ(g_errs.last_kind, HK_EK_FOREIGN_PTR);
    int local;
    CHECK_EQ(hk_gc_release(gc, (hk_gc_obj *)(void *)&local), HK_ERR_FOREIGN);
    CHECK_EQ(g_errs.last_kind, HK_EK_FOREIGN_PTR);
    CHECK_EQ(hk_gc_retain(gc, NULL), HK_ERR_INVALID);
    CHECK_EQ(hk_gc_release(gc, NULL), HK_ERR_INVALID);
    CHECK_EQ(hk_gc_assign(gc, NULL, mine), HK_ERR_INVALID);
    CHECK_EQ(g_errs.count, 7);
    CHECK_EQ(other_errs.count, 0);
    CHECK_EQ(hk_gc_refcount(gc, mine), 1);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    CHECK_EQ(hk_gc_check(other), HK_OK);
    hk_stats s;
    hk_gc_stats(gc, &s);
    CHECK_EQ(s.error_count, 7);
    hk_gc_destroy(other);
    hk_gc_destroy(gc);
}

/* Calls into the collector from callbacks are refused. */
static hk_gc *g_cb_gc;
static hk_gc_obj *g_cb_obj;
static hk_result g_cb_result;
static void reentrant_finalize(void *data, size_t size, void *user) {
    (void)data;
    (void)size;
    (void)user;
    g_cb_result = hk_gc_release(g_cb_gc, g_cb_obj);
    CHECK(hk_gc_alloc(g_cb_gc, &k_leaf) == NULL);
    CHECK_EQ(hk_gc_step(g_cb_gc, 0), 0);
    CHECK_EQ(hk_gc_collect(g_cb_gc), 0);
    CHECK(hk_gc_data(g_cb_gc, g_cb_obj) != NULL); /* queries are fine */
}
static const hk_gc_type k_reentrant = {"reentrant", 8, NULL, reentrant_finalize, NULL};

static int walk_reenter(const hk_block_info *bi, void *u) {
    (void)bi;
    (void)u;
    CHECK_EQ(hk_gc_retain(g_cb_gc, g_cb_obj), HK_ERR_STATE);
    CHECK_EQ(hk_gc_set_incremental(g_cb_gc, false), HK_ERR_STATE);
    CHECK_EQ(hk_gc_check(g_cb_gc), HK_ERR_STATE);
    return 0;
}

HKT_TEST(gc_misuse_reentry_from_callbacks) {
    hk_gc *gc = mk(0);
    g_cb_gc = gc;
    g_cb_obj = hk_gc_alloc(gc, &k_leaf);
    hk_gc_obj *r = hk_gc_alloc(gc, &k_reentrant);
    hk_gc_release(gc, r);
    hk_gc_step(gc, UINT64_MAX);
    CHECK_EQ(g_cb_result, HK_ERR_STATE);
    CHECK_EQ(g_errs.last_kind, HK_EK_STATE);
    CHECK_STR_CONTAINS(g_errs.last_message, "callback");
    CHECK_EQ(hk_gc_refcount(gc, g_cb_obj), 1);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    int errs_before = g_errs.count;
    hk_gc_walk(gc, walk_reenter, NULL);
    CHECK_EQ(g_errs.count, errs_before + 3);
    CHECK(hk_gc_incremental(gc));
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

/* A reference that was never counted: the user stored b in a's field without
 * retaining it, then released b. check finds it; reclaiming a reports it and
 * goes on. */
HKT_TEST(gc_corrupt_counts_detected) {
    hk_gc *gc = mk(HK_GC_IMMEDIATE);
    hk_gc_obj *a = hk_gc_alloc(gc, &k_node), *b = hk_gc_alloc(gc, &k_node);
    N(gc, a)->ref[0] = b; /* uncounted */
    hk_gc_obj *c = hk_gc_alloc(gc, &k_node);
    N(gc, a)->ref[1] = c; /* uncounted, c still held by us: count 1 == refs 1 */
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_retain(gc, b); /* now count 2 */
    N(gc, c)->ref[0] = b;
    N(gc, c)->ref[1] = b; /* three references, count 2 */
    CHECK_EQ(hk_gc_check(gc), HK_ERR_CORRUPT);
    CHECK_EQ(g_errs.last_kind, HK_EK_CORRUPT_STRUCTURE);
    CHECK_STR_CONTAINS(g_errs.last_message, "lower than the 3 references");
    N(gc, c)->ref[0] = N(gc, c)->ref[1] = NULL;
    hk_gc_release(gc, b);
    hk_gc_release(gc, b); /* b reclaimed while a still points to it */
    CHECK_EQ(hk_gc_check(gc), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(g_errs.last_message, "which is a reclaimed object");
    int before = g_errs.count;
    N(gc, a)->ref[1] = NULL;
    hk_gc_release(gc, a); /* the stale reference is reported and ignored */
    CHECK_EQ(g_errs.count, before + 1);
    CHECK_STR_CONTAINS(g_errs.last_message, "references");
    CHECK_STR_CONTAINS(g_errs.last_message, "reference ignored");
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_release(gc, c);
    CHECK_EQ(info(gc).objects, 0);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

HKT_TEST(gc_paranoid_mode_runs_check) {
    hk_gc *gc = mk(HK_FLAG_PARANOID);
    hk_gc_obj *a = hk_gc_alloc(gc, &k_node), *b = hk_gc_alloc(gc, &k_node);
    N(gc, a)->ref[0] = b;
    N(gc, a)->ref[1] = b; /* two references, count 1 */
    hk_gc_retain(gc, a);  /* paranoid check after the call reports */
    CHECK(g_errs.count >= 1);
    CHECK_EQ(g_errs.last_kind, HK_EK_CORRUPT_STRUCTURE);
    N(gc, a)->ref[0] = N(gc, a)->ref[1] = NULL;
    hkt_errors_reset(&g_errs);
    hk_gc_release(gc, a);
    hk_gc_release(gc, a);
    hk_gc_release(gc, b);
    hk_gc_collect(gc);
    CHECK_EQ(g_errs.count, 0);
    hk_gc_destroy(gc);
}

/* ---- introspection ------------------------------------------------------------ */

typedef struct walk_acc {
    int n, pending;
    size_t bytes;
    uint32_t rc_sum;
} walk_acc;
static int walk_count(const hk_block_info *bi, void *u) {
    walk_acc *a = (walk_acc *)u;
    a->n++;
    if (bi->flags & HK_BLOCK_PURGEABLE) a->pending++;
    a->bytes += bi->size;
    a->rc_sum += bi->lock_count;
    CHECK(bi->flags & HK_BLOCK_USED);
    CHECK(bi->name != NULL);
    return a->n == 1000 ? 1 : 0;
}

HKT_TEST(gc_walk_where_stats) {
    hk_gc *gc = mk(0);
    hk_gc_obj *a = hk_gc_alloc(gc, &k_node), *b = hk_gc_alloc(gc, &k_leaf), *c = hk_gc_alloc(gc, &k_leaf);
    hk_gc_retain(gc, a);
    hk_gc_release(gc, c);
    walk_acc acc = {0};
    CHECK_EQ(hk_gc_walk(gc, walk_count, &acc), 0);
    CHECK_EQ(acc.n, 3);
    CHECK_EQ(acc.pending, 1);
    CHECK_EQ(acc.bytes, sizeof(node) + 32);
    CHECK_EQ(acc.rc_sum, 3);
    hk_block_info bi;
    CHECK_EQ(hk_gc_where(gc, a, &bi), HK_OK);
    CHECK(bi.owner == (void *)a);
    CHECK_EQ(bi.lock_count, 2);
    CHECK(strcmp(bi.name, "node") == 0);
    CHECK_EQ(hk_gc_where(gc, (char *)hk_gc_data(gc, b) + 5, &bi), HK_OK);
    CHECK(bi.owner == (void *)b);
    CHECK_EQ(bi.size, 16);
    CHECK(bi.flags & HK_BLOCK_USED);
    int local;
    CHECK_EQ(hk_gc_where(gc, &local, &bi), HK_ERR_FOREIGN);
    hk_gc_step(gc, UINT64_MAX);
    CHECK_EQ(hk_gc_where(gc, c, &bi), HK_OK); /* a free slot: the last reference it gave out */
    CHECK_EQ(bi.flags, 0);
    CHECK(bi.owner == (void *)c);
    CHECK_EQ(hk_gc_where(gc, (char *)c + (1u << 22), &bi), HK_ERR_FOREIGN); /* its next generation */
    hk_stats s;
    CHECK_EQ(hk_gc_stats(gc, &s), HK_OK);
    CHECK_EQ(s.live_blocks, 2);
    CHECK_EQ(s.used, sizeof(node) + 16);
    CHECK_EQ(s.alloc_count, 3);
    CHECK_EQ(s.free_count, 1);
    CHECK_EQ(s.free_blocks, HK_GC_GROW_OBJECTS - 2); /* slots are made free 64 at a time */
    CHECK(s.overhead >= HK_GC_CHUNK_OBJECTS * 64);
    CHECK_EQ(s.peak_used, sizeof(node) + 32);
    /* The walk stops when the callback says so. */
    for (int i = 0; i < 2000; i++) hk_gc_alloc(gc, &k_leaf);
    walk_acc acc2 = {0};
    CHECK_EQ(hk_gc_walk(gc, walk_count, &acc2), 1);
    CHECK_EQ(acc2.n, 1000);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc); /* live objects are finalized and freed (ASan checks leaks) */
}

HKT_TEST(gc_destroy_finalizes_everything) {
    hk_gc *gc = mk(0);
    g_finalized = 0;
    hk_gc_obj *a = hk_gc_alloc(gc, &k_node), *b = hk_gc_alloc(gc, &k_node);
    hk_gc_assign(gc, &N(gc, a)->ref[0], b);
    hk_gc_assign(gc, &N(gc, b)->ref[0], a);
    hk_gc_release(gc, b);
    hk_gc_obj *c = hk_gc_alloc(gc, &k_node);
    hk_gc_release(gc, c);
    hk_gc_destroy(gc);
    CHECK_EQ(g_finalized, 3);
}

HKT_TEST(gc_fill_freed_data) {
    /* The free hook sees the data filled with HK_FILL_FREE. */
    hk_gc *gc = mk(HK_FLAG_FILL | HK_GC_IMMEDIATE);
    hk_gc_obj *a = hk_gc_alloc(gc, &k_leaf);
    memset(hk_gc_data(gc, a), 0x11, 16);
    hk_gc_release(gc, a);
    CHECK_EQ(info(gc).objects, 0);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

/* ---- lock hooks ---------------------------------------------------------------- */

HKT_TEST(gc_lock_hooks_balanced) {
    hk_gc_desc d = {0};
    d.lock.lock = hkt_lock;
    d.lock.unlock = hkt_unlock;
    hkt_lock_depth = hkt_lock_calls = 0;
    hk_gc *gc = hk_gc_create(&d);
    hk_gc_obj *a = hk_gc_alloc(gc, &k_node);
    hk_gc_retain(gc, a);
    hk_gc_release(gc, a);
    hk_gc_release(gc, a);
    hk_gc_step(gc, 100);
    hk_gc_collect(gc);
    hk_gc_check(gc);
    hk_stats s;
    hk_gc_stats(gc, &s);
    CHECK_EQ(hkt_lock_depth, 0);
    CHECK(hkt_lock_calls >= 8);
    hk_gc_destroy(gc);
    CHECK_EQ(hkt_lock_depth, 0);
    hk_gc_desc half = {0};
    half.lock.lock = hkt_lock;
    half.flags = HK_FLAG_QUIET;
    CHECK(hk_gc_create(&half) == NULL);
}

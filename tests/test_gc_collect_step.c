/* gc: cycle collection in budgeted slices (hk_gc_collect_step): garbage
 * cycles are reclaimed a subgraph at a time within the budget, live
 * structures and externally held cycles are left intact with their counts,
 * a subgraph larger than a step is left for hk_gc_collect, and the
 * collector passes check after every slice. */
#include "heapkit/gc.h"
#include "hk_test.h"
#include "gc_test_util.h"

static hkt_errors g_errs;

static hk_gc *mk(void) {
    hkt_errors_reset(&g_errs);
    hk_gc_desc d = {0};
    d.name = "test";
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    return hk_gc_create(&d);
}

static node *N(hk_gc *gc, hk_gc_obj *o) { return (node *)hk_gc_data(gc, o); }

static size_t objects(hk_gc *gc) {
    hk_gc_info i;
    hk_gc_get_info(gc, &i);
    return i.objects;
}

/* A ring of `len` objects; the caller's references to all of them are
 * released, so the ring is garbage (its first object stays a candidate). */
static hk_gc_obj *ring(hk_gc *gc, int len, int keep_first) {
    hk_gc_obj *first = hk_gc_alloc(gc, &k_node), *cur = first;
    for (int i = 1; i < len; i++) {
        hk_gc_obj *nx = hk_gc_alloc(gc, &k_node);
        hk_gc_assign(gc, &N(gc, cur)->ref[0], nx);
        hk_gc_release(gc, nx);
        cur = nx;
    }
    hk_gc_assign(gc, &N(gc, cur)->ref[0], first);
    if (!keep_first) hk_gc_release(gc, first);
    return first;
}

HKT_TEST(collect_step_reclaims_small_cycles_within_budget) {
    hk_gc *gc = mk();
    g_finalized = 0;
    for (int k = 0; k < 50; k++) (void)ring(gc, 4, 0);
    CHECK_EQ(objects(gc), 200);
    /* 10 objects a step: two rings of 4 fit, the third does not */
    int more = 0, steps = 0;
    size_t total = 0;
    do {
        size_t got = hk_gc_collect_step(gc, 10, &more);
        CHECK(got <= 8);
        total += got;
        steps++;
        CHECK_EQ(hk_gc_check(gc), HK_OK);
    } while (more && steps < 1000);
    CHECK_EQ(total, 200);
    CHECK_EQ(objects(gc), 0);
    CHECK_EQ(g_finalized, 200);
    CHECK(steps >= 25);
    hk_gc_destroy(gc);
}

HKT_TEST(collect_step_keeps_live_structures_and_counts) {
    hk_gc *gc = mk();
    g_finalized = 0;
    /* a ring the program still holds (its first object), and a chain hanging
     * off a live root that was a candidate once */
    hk_gc_obj *held = ring(gc, 5, 1);
    hk_gc_obj *root = hk_gc_alloc(gc, &k_node), *child = hk_gc_alloc(gc, &k_node);
    hk_gc_assign(gc, &N(gc, root)->ref[0], child);
    hk_gc_retain(gc, root);
    hk_gc_release(gc, root); /* candidate, count 1 */
    hk_gc_release(gc, child);
    (void)ring(gc, 3, 0); /* garbage */
    int more = 1, steps = 0;
    while (more && steps++ < 100) (void)hk_gc_collect_step(gc, 64, &more);
    CHECK_EQ(g_finalized, 3);
    CHECK_EQ(objects(gc), 7);
    CHECK_EQ(hk_gc_refcount(gc, held), 2); /* the program's and the ring's */
    CHECK_EQ(hk_gc_refcount(gc, root), 1);
    CHECK_EQ(hk_gc_refcount(gc, child), 1);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    /* let the held ring go: the next slices reclaim it */
    hk_gc_release(gc, held);
    more = 1;
    steps = 0;
    while (more && steps++ < 100) (void)hk_gc_collect_step(gc, 64, &more);
    CHECK_EQ(g_finalized, 8);
    CHECK_EQ(objects(gc), 2);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_release(gc, root);
    CHECK_EQ(hk_gc_collect(gc), 2);
    CHECK_EQ(objects(gc), 0);
    hk_gc_destroy(gc);
}

HKT_TEST(collect_step_leaves_large_subgraphs_to_collect) {
    hk_gc *gc = mk();
    g_finalized = 0;
    (void)ring(gc, 100, 0); /* larger than a step */
    (void)ring(gc, 3, 0);   /* behind it: still reached */
    /* every ring member is a candidate; each step counts 17 of the big
     * ring's objects, finds the subgraph too large and sends the candidates
     * it saw to the back, until the small ring comes first */
    int more = 0, steps = 0;
    size_t got = 0;
    while (!got && steps++ < 20) {
        got = hk_gc_collect_step(gc, 16, &more);
        CHECK(more);
        CHECK_EQ(hk_gc_check(gc), HK_OK);
    }
    CHECK_EQ(got, 3);
    CHECK(steps >= 5);
    CHECK(more); /* the big ring's candidates remain */
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    CHECK_EQ(objects(gc), 100);
    CHECK_EQ(hk_gc_collect(gc), 100);
    CHECK_EQ(objects(gc), 0);
    CHECK_EQ(g_finalized, 103);
    hk_gc_destroy(gc);
}

HKT_TEST(collect_step_misuse_and_defaults) {
    int more = 7;
    CHECK_EQ(hk_gc_collect_step(NULL, 10, &more), 0);
    CHECK_EQ(more, 0);
    hk_gc *gc = mk();
    (void)ring(gc, 2, 0);
    CHECK_EQ(hk_gc_collect_step(gc, 0, NULL), 2); /* 0: the desc's per-step cap */
    CHECK_EQ(hk_gc_collect_step(gc, 0, &more), 0);
    CHECK_EQ(more, 0);
    hk_gc_destroy(gc);
}

/* tests/test_pool_release.c - the release pass at the end of a defer
 * scope: the dense copy of the pending queue (pend[]) that it reads, the
 * free order it keeps, and check's comparison of the copy with the queue.
 * Looks inside the pool (src/pool_internal.h). */
#include "hk_test.h"
#include "pool_internal.h"

static hkt_errors g_errs;

static hk_pool *mk(uint32_t cap, uint32_t flags) {
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    hk_pool_desc d = {0};
    d.elem_size = 64;
    d.capacity = cap;
    d.flags = flags;
    d.name = "rel";
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    return hk_pool_create(&d);
}

/* ---- the release pass and its dense copy of the pending queue ------------- */

/* Slots go back to the free ring in the order their objects were freed,
 * through the dense copy (only fast slots pending) or the queue itself (an
 * overflow object pending too). */
HKT_TEST(release_keeps_the_free_order) {
    for (int with_overflow = 0; with_overflow < 2; with_overflow++) {
        hk_pool *p = mk(4, 0);
        REQUIRE(p);
        void *o[6];
        hk_pool_id ids[6];
        int n = with_overflow ? 6 : 4;
        for (int i = 0; i < n; i++) ids[i] = hk_pool_alloc(p, &o[i]);
        hk_pool_defer_begin(p);
        hk_pool_free(p, ids[2], HK_POOL_FREE_SUBTREE);
        if (with_overflow) hk_pool_free(p, ids[5], HK_POOL_FREE_SUBTREE);
        hk_pool_free(p, ids[0], HK_POOL_FREE_SUBTREE);
        hk_pool_free(p, ids[3], HK_POOL_FREE_SUBTREE);
        CHECK_EQ(p->pend_ok, !with_overflow);
        CHECK_EQ(hk_pool_check(p), HK_OK);
        CHECK_EQ(hk_pool_defer_end(p), HK_OK);
        void *a, *b, *c;
        hk_pool_alloc(p, &a);
        hk_pool_alloc(p, &b);
        hk_pool_alloc(p, &c);
        CHECK(a == o[2]);
        CHECK(b == o[0]);
        CHECK(c == o[3]);
        CHECK_EQ(p->npend, 0);
        CHECK_EQ(p->pend_ok, 1);
        CHECK_EQ(hk_pool_check(p), HK_OK);
        hk_pool_destroy(p);
    }
}

/* check compares the dense copy with the queue. */
HKT_TEST(check_finds_a_damaged_pending_copy) {
    hk_pool *p = mk(16, 0);
    REQUIRE(p);
    hk_pool_id ids[4];
    for (int i = 0; i < 4; i++) ids[i] = hk_pool_alloc(p, NULL);
    hk_pool_defer_begin(p);
    for (int i = 0; i < 3; i++) hk_pool_free(p, ids[i], HK_POOL_FREE_SUBTREE);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    uint32_t saved = p->pend[1];
    p->pend[1] = p->pend[2];
    CHECK_EQ(hk_pool_check(p), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(g_errs.last_message, "dense copy");
    p->pend[1] = saved;
    p->npend--;
    CHECK_EQ(hk_pool_check(p), HK_ERR_CORRUPT);
    p->npend++;
    CHECK_EQ(hk_pool_check(p), HK_OK);
    CHECK_EQ(hk_pool_defer_end(p), HK_OK);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

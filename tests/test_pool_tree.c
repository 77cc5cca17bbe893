/* Pool parent / child trees: navigation, reparenting with the cycle check,
 * freeing a subtree or detaching the children, deep trees without recursion. */
#include "internal.h"
#include "pool_test_util.h"

/* ---- parent / child ----------------------------------------------------------- */

HKT_TEST(pool_tree_basic) {
    hk_pool *p = mk(32, 0);
    hk_pool_id root = hk_pool_alloc(p, NULL);
    hk_pool_id c1 = hk_pool_alloc_child(p, root, NULL);
    hk_pool_id c2 = hk_pool_alloc_child(p, root, NULL);
    hk_pool_id g1 = hk_pool_alloc_child(p, c1, NULL);
    CHECK_EQ(hk_pool_parent(p, c1).value, root.value);
    CHECK_EQ(hk_pool_parent(p, root).value, 0);
    CHECK_EQ(hk_pool_first_child(p, root).value, c1.value);
    CHECK_EQ(hk_pool_next_sibling(p, c1).value, c2.value);
    CHECK_EQ(hk_pool_next_sibling(p, c2).value, 0);
    CHECK_EQ(hk_pool_child_count(p, root), 2);
    CHECK_EQ(hk_pool_child_count(p, c1), 1);
    /* reparent */
    CHECK_EQ(hk_pool_set_parent(p, g1, c2), HK_OK);
    CHECK_EQ(hk_pool_child_count(p, c1), 0);
    CHECK_EQ(hk_pool_first_child(p, c2).value, g1.value);
    /* cycles refused */
    CHECK_EQ(hk_pool_set_parent(p, root, g1), HK_ERR_INVALID);
    CHECK_STR_CONTAINS(g_errs.last_message, "cycle");
    CHECK_EQ(hk_pool_set_parent(p, root, root), HK_ERR_INVALID);
    CHECK_STR_CONTAINS(g_errs.last_message, "itself");
    CHECK_EQ(hk_pool_check(p), HK_OK);
    /* detach with the none ID */
    CHECK_EQ(hk_pool_set_parent(p, c2, (hk_pool_id){0}), HK_OK);
    CHECK_EQ(hk_pool_parent(p, c2).value, 0);
    CHECK_EQ(hk_pool_child_count(p, root), 1);
    /* bad parent for alloc_child */
    hk_pool_id dead = hk_pool_alloc(p, NULL);
    hk_pool_free(p, dead, HK_POOL_FREE_SUBTREE);
    CHECK_EQ(hk_pool_alloc_child(p, dead, NULL).value, 0);
    CHECK_EQ(g_errs.last_kind, HK_EK_STALE);
    CHECK_EQ(hk_pool_set_parent(p, c1, dead), HK_ERR_STALE);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

HKT_TEST(pool_tree_free_subtree_and_detach) {
    hk_pool *p = mk(32, 0);
    hk_pool_id root = hk_pool_alloc(p, NULL);
    hk_pool_id a = hk_pool_alloc_child(p, root, NULL), b = hk_pool_alloc_child(p, root, NULL);
    hk_pool_id aa = hk_pool_alloc_child(p, a, NULL), ab = hk_pool_alloc_child(p, a, NULL);
    hk_pool_id aaa = hk_pool_alloc_child(p, aa, NULL);
    /* detach: a goes, its children become roots */
    CHECK_EQ(hk_pool_free(p, a, HK_POOL_DETACH), HK_OK);
    CHECK(!hk_pool_is_alive(p, a));
    CHECK(hk_pool_is_alive(p, aa) && hk_pool_is_alive(p, ab) && hk_pool_is_alive(p, aaa));
    CHECK_EQ(hk_pool_parent(p, aa).value, 0);
    CHECK_EQ(hk_pool_parent(p, aaa).value, aa.value);
    CHECK_EQ(hk_pool_child_count(p, root), 1);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    /* subtree */
    hk_pool_set_parent(p, aa, b);
    CHECK_EQ(hk_pool_free(p, root, HK_POOL_FREE_SUBTREE), HK_OK);
    CHECK(!hk_pool_is_alive(p, root) && !hk_pool_is_alive(p, b) && !hk_pool_is_alive(p, aa) &&
          !hk_pool_is_alive(p, aaa));
    CHECK(hk_pool_is_alive(p, ab));
    hk_pool_info info;
    hk_pool_get_info(p, &info);
    CHECK_EQ(info.live, 1);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

HKT_TEST(pool_tree_free_deep_no_recursion) {
    hk_pool *p = mk(0, 0);
    hk_pool_id root = hk_pool_alloc(p, NULL), x = root;
    for (int i = 0; i < 20000; i++) x = hk_pool_alloc_child(p, x, NULL); /* also spills to overflow */
    hk_pool_info info;
    hk_pool_get_info(p, &info);
    CHECK_EQ(info.live, 20001);
    CHECK(info.overflow_live > 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    CHECK_EQ(hk_pool_free(p, root, HK_POOL_FREE_SUBTREE), HK_OK);
    hk_pool_get_info(p, &info);
    CHECK_EQ(info.live, 0);
    CHECK_EQ(info.overflow_live, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

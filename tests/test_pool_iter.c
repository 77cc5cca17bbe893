/* tests/test_pool_iter.c - the inline list iterator (hk_pool_iter): what it
 * visits, its defer scope, removal and frees during the loop, early exit,
 * overflow members, locked pools; and freeing subtrees without recursion
 * or revisiting (every object released once, parents first). */
#include "pool_test_util.h"

#include <stdlib.h>
#include <string.h>

/* A list of n fresh objects numbered 0..n-1 (obj.n). */
static hk_pool_list filled(hk_pool *p, hk_pool_id *ids, int n) {
    hk_pool_list l = hk_pool_list_create(p, 0, "l");
    for (int i = 0; i < n; i++) {
        obj *o;
        ids[i] = hk_pool_alloc(p, (void **)&o);
        o->magic = 0x0b1ec7u;
        o->n = (uint32_t)i;
        hk_pool_list_push_back(p, l, ids[i]);
    }
    return l;
}

HKT_TEST(iter_visits_members_in_order) {
    hk_pool *p = mk(64, 0);
    hk_pool_id ids[20];
    hk_pool_list l = filled(p, ids, 20);
    int k = 0;
    obj *o;
    hk_pool_iter it;
    for (it = hk_pool_iter_begin(p, l); (o = (obj *)hk_pool_iter_next(&it)) != NULL; k++) {
        CHECK_EQ(o->n, (uint32_t)k);
        CHECK_EQ(it.id.value, ids[k].value);
        CHECK(it.obj == o);
        CHECK(hk_pool_get(p, it.id) == o);
        CHECK_EQ(depth_of(p), 1); /* inside a defer scope */
    }
    CHECK_EQ(k, 20);
    CHECK_EQ(depth_of(p), 0);
    CHECK(hk_pool_iter_next(&it) == NULL); /* again after the end */
    /* an empty list: nothing, and the scope closes */
    hk_pool_list e = hk_pool_list_create(p, 1, "empty");
    for (it = hk_pool_iter_begin(p, e); hk_pool_iter_next(&it) != NULL;) k++;
    CHECK_EQ(k, 20);
    CHECK_EQ(depth_of(p), 0);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* Freeing the current object inside the loop: dead at once, memory valid
 * and the slot unused until the loop ends, released then. */
HKT_TEST(iter_free_current_is_deferred) {
    hk_pool *p = mk(64, 0);
    hk_pool_id ids[10];
    hk_pool_list l = filled(p, ids, 10);
    int visited = 0;
    obj *o;
    for (hk_pool_iter it = hk_pool_iter_begin(p, l); (o = (obj *)hk_pool_iter_next(&it)) != NULL;) {
        visited++;
        if (o->n % 2 == 0) {
            CHECK_EQ(hk_pool_free(p, it.id, HK_POOL_FREE_SUBTREE), HK_OK);
            CHECK(hk_pool_get(p, it.id) == NULL);
            CHECK_EQ(o->magic, 0x0b1ec7u); /* still readable */
            /* a new object never takes the slot of one pending release */
            void *fresh;
            hk_pool_id nid = hk_pool_alloc(p, &fresh);
            CHECK(fresh != (void *)o);
            hk_pool_free(p, nid, HK_POOL_FREE_SUBTREE);
            hk_pool_info in;
            hk_pool_get_info(p, &in);
            CHECK(in.pending >= 1);
        }
    }
    CHECK_EQ(visited, 10);
    hk_pool_info in;
    hk_pool_get_info(p, &in);
    CHECK_EQ(in.pending, 0);
    CHECK_EQ(in.live, 5);
    CHECK_EQ(hk_pool_list_count(p, l), 5);
    for (int i = 0; i < 10; i++) CHECK_EQ(hk_pool_is_alive(p, ids[i]), i % 2 == 1);
    /* the IDs freed in the loop are now double frees, not stale */
    CHECK_EQ(hk_pool_free(p, ids[0], HK_POOL_FREE_SUBTREE), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* Freeing or removing members ahead of the cursor: they are not visited. */
HKT_TEST(iter_free_and_remove_ahead) {
    hk_pool *p = mk(64, 0);
    hk_pool_id ids[12];
    hk_pool_list l = filled(p, ids, 12);
    int seen[12] = {0};
    obj *o;
    for (hk_pool_iter it = hk_pool_iter_begin(p, l); (o = (obj *)hk_pool_iter_next(&it)) != NULL;) {
        seen[o->n]++;
        if (o->n == 0) {
            hk_pool_free(p, ids[1], HK_POOL_FREE_SUBTREE); /* the next one */
            hk_pool_list_remove(p, l, ids[2]);
            hk_pool_free(p, ids[11], HK_POOL_FREE_SUBTREE); /* the last one */
        }
        if (o->n == 5) hk_pool_list_remove(p, l, ids[6]);
    }
    for (int i = 0; i < 12; i++) CHECK_EQ(seen[i], (i == 1 || i == 2 || i == 6 || i == 11) ? 0 : 1);
    CHECK_EQ(hk_pool_is_alive(p, ids[2]), 1);
    CHECK_EQ(hk_pool_is_alive(p, ids[6]), 1);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* Objects added or moved to the back during the loop are not visited, so
 * the loop always ends. */
HKT_TEST(iter_additions_not_visited) {
    hk_pool *p = mk(256, 0);
    hk_pool_id ids[8];
    hk_pool_list l = filled(p, ids, 8);
    int visited = 0;
    for (hk_pool_iter it = hk_pool_iter_begin(p, l); hk_pool_iter_next(&it) != NULL;) {
        visited++;
        hk_pool_list_push_back(p, l, hk_pool_alloc(p, NULL));
    }
    CHECK_EQ(visited, 8);
    CHECK_EQ(hk_pool_list_count(p, l), 16);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* Leaving early needs hk_pool_iter_end, which closes the scope and
 * releases what was freed; ending twice or ending a finished iteration is
 * harmless. */
HKT_TEST(iter_break_then_end) {
    hk_pool *p = mk(64, 0);
    hk_pool_id ids[10];
    hk_pool_list l = filled(p, ids, 10);
    hk_pool_iter it;
    obj *o;
    for (it = hk_pool_iter_begin(p, l); (o = (obj *)hk_pool_iter_next(&it)) != NULL;) {
        hk_pool_free(p, it.id, HK_POOL_FREE_SUBTREE);
        if (o->n == 3) break;
    }
    CHECK_EQ(depth_of(p), 1);
    hk_pool_info in;
    hk_pool_get_info(p, &in);
    CHECK_EQ(in.pending, 4);
    hk_pool_iter_end(&it);
    CHECK_EQ(depth_of(p), 0);
    hk_pool_get_info(p, &in);
    CHECK_EQ(in.pending, 0);
    CHECK_EQ(in.live, 6);
    hk_pool_iter_end(&it);
    CHECK(hk_pool_iter_next(&it) == NULL);
    /* never started: end does nothing to the pool */
    hk_pool_iter idle = hk_pool_iter_begin(p, l);
    hk_pool_iter_end(&idle);
    CHECK(hk_pool_iter_next(&idle) == NULL);
    CHECK_EQ(depth_of(p), 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* Two iterations of the same list, one inside the other, each fixed up;
 * and two of different lists that end in the order they began. */
HKT_TEST(iter_nested_and_interleaved) {
    hk_pool *p = mk(64, 0);
    hk_pool_id ids[6];
    hk_pool_list l = filled(p, ids, 6);
    int outer = 0, inner = 0;
    obj *o;
    for (hk_pool_iter a = hk_pool_iter_begin(p, l); (o = (obj *)hk_pool_iter_next(&a)) != NULL;) {
        outer++;
        for (hk_pool_iter b = hk_pool_iter_begin(p, l); hk_pool_iter_next(&b) != NULL;) inner++;
        if (o->n == 0) hk_pool_free(p, ids[1], HK_POOL_FREE_SUBTREE); /* ahead of the outer cursor */
    }
    CHECK_EQ(outer, 5);
    CHECK_EQ(inner, 6 + 5 * 4);
    hk_pool_list m = hk_pool_list_create(p, 1, "m");
    hk_pool_list_push_back(p, m, ids[0]);
    hk_pool_list_push_back(p, m, ids[2]);
    hk_pool_iter x = hk_pool_iter_begin(p, l), y = hk_pool_iter_begin(p, m);
    CHECK(hk_pool_iter_next(&x) != NULL);
    CHECK(hk_pool_iter_next(&y) != NULL);
    hk_pool_iter_end(&x);              /* the older one first */
    hk_pool_list_remove(p, m, ids[2]); /* y is still fixed up */
    CHECK(hk_pool_iter_next(&y) == NULL);
    CHECK_EQ(depth_of(p), 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* A bad list is reported and visits nothing; a list destroyed before the
 * first step, or during the loop, ends the iteration. */
HKT_TEST(iter_bad_or_destroyed_list) {
    hk_pool *p = mk(64, 0);
    hk_pool_iter it = hk_pool_iter_begin(p, (hk_pool_list){12345});
    CHECK(hk_pool_iter_next(&it) == NULL);
    CHECK_EQ(g_errs.count, 1);
    CHECK_EQ(g_errs.last_result, HK_ERR_INVALID);
    it = hk_pool_iter_begin(NULL, (hk_pool_list){1});
    CHECK(hk_pool_iter_next(&it) == NULL);
    hk_pool_id ids[5];
    hk_pool_list l = filled(p, ids, 5);
    it = hk_pool_iter_begin(p, l);
    hk_pool_list_destroy(p, l);
    CHECK(hk_pool_iter_next(&it) == NULL);
    CHECK_EQ(g_errs.last_result, HK_ERR_STALE);
    CHECK_EQ(depth_of(p), 0);
    l = hk_pool_list_create(p, 0, "again");
    for (int i = 0; i < 5; i++) hk_pool_list_push_back(p, l, ids[i]);
    int visited = 0;
    for (it = hk_pool_iter_begin(p, l); hk_pool_iter_next(&it) != NULL;) {
        visited++;
        hk_pool_list_destroy(p, l);
    }
    CHECK_EQ(visited, 1);
    CHECK_EQ(depth_of(p), 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* Overflow objects (the fast slots full) are visited too, out of line. */
HKT_TEST(iter_overflow_members) {
    hk_pool *p = mk(4, 0);
    hk_pool_id ids[10];
    hk_pool_list l = filled(p, ids, 10);
    hk_pool_info in;
    hk_pool_get_info(p, &in);
    CHECK_EQ(in.overflow_live, 6);
    uint32_t got[10], k = 0;
    obj *o;
    for (hk_pool_iter it = hk_pool_iter_begin(p, l); (o = (obj *)hk_pool_iter_next(&it)) != NULL;) {
        CHECK_EQ(it.id.value, ids[o->n].value);
        if (k < 10) got[k++] = o->n;
        if (o->n == 4) hk_pool_free(p, ids[5], HK_POOL_FREE_SUBTREE); /* an overflow object ahead */
    }
    static const uint32_t want[9] = {0, 1, 2, 3, 4, 6, 7, 8, 9};
    CHECK_EQ(k, 9);
    for (uint32_t i = 0; i < 9 && i < k; i++) CHECK_EQ(got[i], want[i]);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* With lock hooks every step goes out of line and takes the lock. */
HKT_TEST(iter_locked_pool_takes_the_lock_per_step) {
    hk_pool *p = mk_counting_locked(16);
    REQUIRE(p);
    hk_pool_id ids[5];
    hk_pool_list l = filled(p, ids, 5);
    g_locks = 0;
    int k = 0;
    for (hk_pool_iter it = hk_pool_iter_begin(p, l); hk_pool_iter_next(&it) != NULL;) k++;
    CHECK_EQ(k, 5);
    CHECK_EQ(g_locks, 1 + 6); /* begin, then five steps and the last */
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* Freeing a parent during the loop takes its children off the list: they
 * are not visited. */
HKT_TEST(iter_free_subtree_skips_children) {
    hk_pool *p = mk(64, 0);
    hk_pool_list l = hk_pool_list_create(p, 0, "l");
    hk_pool_id par = hk_pool_alloc(p, NULL);
    hk_pool_list_push_back(p, l, par);
    for (int i = 0; i < 3; i++) hk_pool_list_push_back(p, l, hk_pool_alloc_child(p, par, NULL));
    hk_pool_id other = hk_pool_alloc(p, NULL);
    hk_pool_list_push_back(p, l, other);
    int visited = 0;
    for (hk_pool_iter it = hk_pool_iter_begin(p, l); hk_pool_iter_next(&it) != NULL;) {
        visited++;
        if (it.id.value == par.value) hk_pool_free(p, par, HK_POOL_FREE_SUBTREE);
    }
    CHECK_EQ(visited, 2);
    hk_pool_info in;
    hk_pool_get_info(p, &in);
    CHECK_EQ(in.live, 1);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* ---- cascades --------------------------------------------------------------- */

typedef struct rel_log {
    int count;
    int order_ok;
    unsigned char *seen; /* by slot index + overflow: indexed by obj.n */
} rel_log;

static void on_release(hk_pool *p, hk_pool_id id, void *o, void *user) {
    rel_log *r = (rel_log *)user;
    obj *x = (obj *)o;
    (void)p;
    (void)id;
    r->count++;
    r->seen[x->n]++;
    /* parents first: an object numbered n has its parent numbered below n */
    if (x->n > 0 && !r->seen[x->magic]) r->order_ok = 0;
}

/* A deep chain with a bushy top: one free releases every object exactly
 * once, each after its parent, with no recursion (a chain of 200,000 would
 * overflow the stack of a recursive walk). */
HKT_TEST(cascade_releases_each_once_parents_first) {
    enum { CHAIN = 200000, BUSH = 1000 };
    rel_log r = {0, 1, NULL};
    r.seen = calloc(CHAIN + BUSH + 1, 1);
    REQUIRE(r.seen);
    hkt_errors_reset(&g_errs);
    hk_pool_desc d = {0};
    d.elem_size = sizeof(obj);
    d.capacity = 4096; /* most of the chain on the overflow path */
    d.on_destroy = on_release;
    d.destroy_user = &r;
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    hk_pool *p = hk_pool_create(&d);
    REQUIRE(p);
    obj *o;
    hk_pool_id root = hk_pool_alloc(p, (void **)&o), x = root;
    o->n = 0;
    o->magic = 0;
    uint32_t n = 1;
    for (int i = 0; i < BUSH; i++) { /* children of the root */
        hk_pool_id c = hk_pool_alloc_child(p, root, (void **)&o);
        o->n = n++;
        o->magic = 0; /* parent's number */
        (void)c;
    }
    uint32_t pn = 0;
    for (int i = 0; i < CHAIN; i++) {
        x = hk_pool_alloc_child(p, x, (void **)&o);
        REQUIRE(x.value);
        o->magic = pn;
        o->n = n;
        pn = n++;
    }
    CHECK_EQ(hk_pool_check(p), HK_OK);
    CHECK_EQ(hk_pool_free(p, root, HK_POOL_FREE_SUBTREE), HK_OK);
    CHECK_EQ(r.count, (int)n);
    int once = 1;
    for (uint32_t i = 0; i < n; i++) once &= r.seen[i] == 1;
    CHECK(once);
    CHECK(r.order_ok);
    hk_pool_info in;
    hk_pool_get_info(p, &in);
    CHECK_EQ(in.live, 0);
    CHECK_EQ(in.pending, 0);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
    free(r.seen);
}

/* The same cascade inside an iteration: deferred to the loop's end, then
 * released once each. */
HKT_TEST(cascade_inside_iteration_is_deferred) {
    hk_pool *p = mk(0, 0);
    hk_pool_list l = hk_pool_list_create(p, 0, "l");
    hk_pool_id root = hk_pool_alloc(p, NULL), x = root;
    hk_pool_list_push_back(p, l, root);
    for (int i = 0; i < 30000; i++) {
        x = hk_pool_alloc_child(p, x, NULL);
        if (i % 100 == 0) hk_pool_list_push_back(p, l, x);
    }
    int visited = 0;
    for (hk_pool_iter it = hk_pool_iter_begin(p, l); hk_pool_iter_next(&it) != NULL;) {
        visited++;
        hk_pool_free(p, it.id, HK_POOL_FREE_SUBTREE);
        hk_pool_info in;
        hk_pool_get_info(p, &in);
        CHECK_EQ(in.pending, 30001);
        CHECK_EQ(in.live, 0);
    }
    CHECK_EQ(visited, 1); /* the rest of the list died with the root */
    hk_pool_info in;
    hk_pool_get_info(p, &in);
    CHECK_EQ(in.pending, 0);
    CHECK_EQ(hk_pool_list_count(p, l), 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* Pool lists: membership on several link slots, moves, clear and destroy,
 * exhaustion, and iteration while the callback frees, removes, adds or
 * moves objects (nested iterations included). */
#include "internal.h"
#include "pool_test_util.h"

/* ---- lists ---------------------------------------------------------------- */

static int collect_fn(hk_pool *p, hk_pool_id id, void *o, void *user) {
    (void)p;
    (void)o;
    uint32_t *out = (uint32_t *)user;
    out[++out[0]] = id.value;
    return 0;
}

static int list_equals(hk_pool *p, hk_pool_list l, const hk_pool_id *ids, int n) {
    uint32_t got[64] = {0};
    hk_pool_list_each(p, l, collect_fn, got);
    if (got[0] != (uint32_t)n || hk_pool_list_count(p, l) != (size_t)n) return 0;
    for (int i = 0; i < n; i++)
        if (got[i + 1] != ids[i].value) return 0;
    /* the plain walk agrees */
    hk_pool_id x = hk_pool_list_first(p, l);
    for (int i = 0; i < n; i++, x = hk_pool_list_next(p, l, x))
        if (x.value != ids[i].value) return 0;
    return x.value == 0;
}

HKT_TEST(pool_lists_basic) {
    hk_pool *p = mk(16, 0);
    hk_pool_list tick = hk_pool_list_create(p, 0, "tick");
    hk_pool_list layer1 = hk_pool_list_create(p, 1, "layer1");
    hk_pool_list layer2 = hk_pool_list_create(p, 1, "layer2");
    CHECK(tick.value && layer1.value && layer2.value);
    hk_pool_id a = hk_pool_alloc(p, NULL), b = hk_pool_alloc(p, NULL), c = hk_pool_alloc(p, NULL);
    CHECK_EQ(hk_pool_list_push_back(p, tick, a), HK_OK);
    CHECK_EQ(hk_pool_list_push_back(p, tick, b), HK_OK);
    CHECK_EQ(hk_pool_list_push_front(p, tick, c), HK_OK);
    CHECK(list_equals(p, tick, (hk_pool_id[]){c, a, b}, 3));
    /* on two lists at once (different link slots) */
    hk_pool_list_push_back(p, layer1, a);
    hk_pool_list_push_back(p, layer1, b);
    CHECK_EQ(hk_pool_list_of(p, a, 0).value, tick.value);
    CHECK_EQ(hk_pool_list_of(p, a, 1).value, layer1.value);
    CHECK_EQ(hk_pool_list_of(p, c, 1).value, 0);
    /* moving between lists of the same link */
    CHECK_EQ(hk_pool_list_push_back(p, layer2, a), HK_OK);
    CHECK(list_equals(p, layer1, (hk_pool_id[]){b}, 1));
    CHECK(list_equals(p, layer2, (hk_pool_id[]){a}, 1));
    CHECK(list_equals(p, tick, (hk_pool_id[]){c, a, b}, 3));
    /* removal in the middle */
    CHECK_EQ(hk_pool_list_remove(p, tick, a), HK_OK);
    CHECK(list_equals(p, tick, (hk_pool_id[]){c, b}, 2));
    /* not a member */
    CHECK_EQ(hk_pool_list_remove(p, tick, a), HK_ERR_INVALID);
    CHECK_STR_CONTAINS(g_errs.last_message, "is not on list 'tick'");
    CHECK_EQ(hk_pool_check(p), HK_OK);
    /* freeing takes an object off every list at once */
    hk_pool_free(p, b, HK_POOL_FREE_SUBTREE);
    CHECK(list_equals(p, tick, (hk_pool_id[]){c}, 1));
    CHECK(list_equals(p, layer1, NULL, 0));
    /* dead IDs cannot be added (a use of a freed ID: stale) */
    CHECK_EQ(hk_pool_list_push_back(p, tick, b), HK_ERR_STALE);
    CHECK_EQ(g_errs.last_kind, HK_EK_STALE);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    /* clear and destroy */
    hk_pool_list_push_back(p, tick, a);
    CHECK_EQ(hk_pool_list_clear(p, tick), HK_OK);
    CHECK_EQ(hk_pool_list_count(p, tick), 0);
    CHECK(hk_pool_is_alive(p, a));
    hk_pool_list_push_back(p, tick, a);
    CHECK_EQ(hk_pool_list_destroy(p, tick), HK_OK);
    CHECK_EQ(hk_pool_list_of(p, a, 0).value, 0);
    CHECK_EQ(hk_pool_list_push_back(p, tick, a), HK_ERR_STALE);
    CHECK_STR_CONTAINS(g_errs.last_message, "stale");
    CHECK_EQ(hk_pool_list_count(p, tick), 0);
    CHECK_EQ(hk_pool_list_push_back(p, (hk_pool_list){0}, a), HK_ERR_INVALID);
    hk_pool_list again = hk_pool_list_create(p, 0, "again"); /* reuses the entry, new handle */
    CHECK(again.value != tick.value);
    CHECK_EQ(hk_pool_list_destroy(p, tick), HK_ERR_STALE);
    /* bad link slot */
    CHECK_EQ(hk_pool_list_create(p, 2, "bad").value, 0);
    CHECK_STR_CONTAINS(g_errs.last_message, "link slot 2 out of range");
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

HKT_TEST(pool_lists_exhausted) {
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    hk_pool_desc d = {0};
    d.elem_size = 8;
    d.capacity = 4;
    d.max_lists = 3;
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    hk_pool *p = hk_pool_create(&d);
    for (int i = 0; i < 3; i++) CHECK(hk_pool_list_create(p, 0, "l").value != 0);
    CHECK_EQ(hk_pool_list_create(p, 0, "l").value, 0);
    CHECK_EQ(g_errs.last_kind, HK_EK_NOMEM);
    hk_pool_info info;
    hk_pool_get_info(p, &info);
    CHECK_EQ(info.lists, 3);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* ---- iteration under removal ------------------------------------------------ */

typedef struct iter_ctx {
    hk_pool_list list;
    hk_pool_id ids[16];
    int visits[16];
    int mode;
    int calls;
} iter_ctx;

static int which(iter_ctx *c, hk_pool_id id) {
    for (int i = 0; i < 16; i++)
        if (c->ids[i].value == id.value) return i;
    return -1;
}

static int iter_fn(hk_pool *p, hk_pool_id id, void *o, void *user) {
    iter_ctx *c = (iter_ctx *)user;
    int i = which(c, id);
    c->calls++;
    if (i < 0) return 1;
    c->visits[i]++;
    ((obj *)o)->n++; /* the memory is valid */
    switch (c->mode) {
    case 0: /* free the current object */
        hk_pool_free(p, id, HK_POOL_FREE_SUBTREE);
        ((obj *)o)->n++; /* still valid: release is deferred */
        CHECK(hk_pool_get(p, id) == NULL);
        break;
    case 1: /* free the next one */
        if (i + 1 < 8) hk_pool_free(p, c->ids[i + 1], HK_POOL_FREE_SUBTREE);
        break;
    case 2: /* remove current and next from the list, and move one to the back */
        hk_pool_list_remove(p, c->list, id);
        if (i + 1 < 8 && hk_pool_list_of(p, c->ids[i + 1], 0).value)
            hk_pool_list_remove(p, c->list, c->ids[i + 1]);
        break;
    case 3: /* add new objects and move the current one to the back */
        hk_pool_list_push_back(p, c->list, hk_pool_alloc(p, NULL));
        hk_pool_list_push_back(p, c->list, id);
        break;
    case 4: /* free the last member first */
        if (i == 0) hk_pool_free(p, c->ids[7], HK_POOL_FREE_SUBTREE);
        if (i == 1) hk_pool_list_remove(p, c->list, c->ids[6]);
        break;
    case 5: /* stop early */ return i == 2 ? 42 : 0;
    case 6: /* destroy the list itself */
        if (i == 1) hk_pool_list_destroy(p, c->list);
        break;
    }
    return 0;
}

static void iter_setup(hk_pool **pp, iter_ctx *c, int mode) {
    *pp = mk(64, 0);
    memset(c, 0, sizeof *c);
    c->mode = mode;
    c->list = hk_pool_list_create(*pp, 0, "tick");
    for (int i = 0; i < 8; i++) {
        c->ids[i] = hk_pool_alloc(*pp, NULL);
        hk_pool_list_push_back(*pp, c->list, c->ids[i]);
    }
}

HKT_TEST(pool_lists_iterate_free_current) {
    hk_pool *p;
    iter_ctx c;
    iter_setup(&p, &c, 0);
    CHECK_EQ(hk_pool_list_each(p, c.list, iter_fn, &c), 0);
    for (int i = 0; i < 8; i++) CHECK_EQ(c.visits[i], 1);
    CHECK_EQ(hk_pool_list_count(p, c.list), 0);
    hk_pool_info info;
    hk_pool_get_info(p, &info);
    CHECK_EQ(info.live, 0);
    CHECK_EQ(info.pending, 0);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

HKT_TEST(pool_lists_iterate_free_next) {
    hk_pool *p;
    iter_ctx c;
    iter_setup(&p, &c, 1);
    hk_pool_list_each(p, c.list, iter_fn, &c);
    /* 0 frees 1, 2 frees 3, ... */
    for (int i = 0; i < 8; i++) CHECK_EQ(c.visits[i], i % 2 == 0 ? 1 : 0);
    CHECK_EQ(hk_pool_list_count(p, c.list), 4);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

HKT_TEST(pool_lists_iterate_remove_current_and_next) {
    hk_pool *p;
    iter_ctx c;
    iter_setup(&p, &c, 2);
    hk_pool_list_each(p, c.list, iter_fn, &c);
    for (int i = 0; i < 8; i++) CHECK_EQ(c.visits[i], i % 2 == 0 ? 1 : 0);
    CHECK_EQ(hk_pool_list_count(p, c.list), 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

HKT_TEST(pool_lists_iterate_additions_not_visited) {
    hk_pool *p;
    iter_ctx c;
    iter_setup(&p, &c, 3);
    hk_pool_list_each(p, c.list, iter_fn, &c);
    CHECK_EQ(c.calls, 8); /* ends: new and moved objects are not visited again */
    for (int i = 0; i < 8; i++) CHECK_EQ(c.visits[i], 1);
    CHECK_EQ(hk_pool_list_count(p, c.list), 16);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

HKT_TEST(pool_lists_iterate_remove_last) {
    hk_pool *p;
    iter_ctx c;
    iter_setup(&p, &c, 4);
    hk_pool_list_each(p, c.list, iter_fn, &c);
    CHECK_EQ(c.visits[7], 0);
    CHECK_EQ(c.visits[6], 0);
    CHECK_EQ(c.visits[5], 1);
    CHECK_EQ(c.calls, 6);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

HKT_TEST(pool_lists_iterate_stop_and_destroy_list) {
    hk_pool *p;
    iter_ctx c;
    iter_setup(&p, &c, 5);
    CHECK_EQ(hk_pool_list_each(p, c.list, iter_fn, &c), 42);
    CHECK_EQ(c.calls, 3);
    hk_pool_destroy(p);
    iter_setup(&p, &c, 6);
    CHECK_EQ(hk_pool_list_each(p, c.list, iter_fn, &c), 0);
    CHECK_EQ(c.calls, 2);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    CHECK_EQ(hk_pool_list_each(p, c.list, iter_fn, &c), -1); /* stale list, reported */
    CHECK_EQ(g_errs.last_kind, HK_EK_STALE);
    hk_pool_destroy(p);
}

typedef struct nest_ctx {
    hk_pool_list list;
    int outer, inner;
    hk_pool_id victim;
} nest_ctx;

static int nest_inner(hk_pool *p, hk_pool_id id, void *o, void *user) {
    nest_ctx *c = (nest_ctx *)user;
    (void)o;
    c->inner++;
    if (id.value == c->victim.value) hk_pool_free(p, id, HK_POOL_FREE_SUBTREE);
    return 0;
}
static int nest_outer(hk_pool *p, hk_pool_id id, void *o, void *user) {
    nest_ctx *c = (nest_ctx *)user;
    (void)o;
    (void)id;
    c->outer++;
    if (c->outer == 1) hk_pool_list_each(p, c->list, nest_inner, c);
    return 0;
}

HKT_TEST(pool_lists_iterate_nested) {
    hk_pool *p = mk(16, 0);
    nest_ctx c = {hk_pool_list_create(p, 0, "l"), 0, 0, {0}};
    hk_pool_id ids[5];
    for (int i = 0; i < 5; i++) {
        ids[i] = hk_pool_alloc(p, NULL);
        hk_pool_list_push_back(p, c.list, ids[i]);
    }
    c.victim = ids[3];
    hk_pool_list_each(p, c.list, nest_outer, &c);
    CHECK_EQ(c.inner, 5);
    CHECK_EQ(c.outer, 4); /* the inner loop freed ids[3] before the outer reached it */
    CHECK(!hk_pool_is_alive(p, ids[3]));
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

static int each_free_odd(hk_pool *p, hk_pool_id id, void *o, void *user) {
    int *n = (int *)user;
    (*n)++;
    if (((obj *)o)->n % 2) hk_pool_free(p, id, HK_POOL_FREE_SUBTREE);
    return 0;
}

HKT_TEST(pool_lists_each_all_objects) {
    hk_pool *p = mk(8, 0);
    for (uint32_t i = 0; i < 20; i++) { /* 12 on the overflow path */
        obj *o;
        hk_pool_alloc(p, (void **)&o);
        o->n = i;
    }
    int n = 0;
    CHECK_EQ(hk_pool_each(p, each_free_odd, &n), 0);
    CHECK_EQ(n, 20);
    hk_pool_info info;
    hk_pool_get_info(p, &info);
    CHECK_EQ(info.live, 10);
    n = 0;
    hk_pool_each(p, each_free_odd, &n);
    CHECK_EQ(n, 10);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

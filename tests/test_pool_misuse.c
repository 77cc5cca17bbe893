/*
 * tests/test_pool_misuse.c - the pool's answer to every misuse of an ID, row
 * by row of the table in heapkit/pool.h (the same answers the cache and the
 * gc give, from the shared handle table), on fast and overflow IDs; the
 * paranoid after-op check; lock hooks through the instance core.
 */
#include "hk_test.h"
#include "internal.h"

#include "heapkit/pool.h"

static hkt_errors g_errs;

static hk_pool *mk(uint32_t cap, uint32_t index_bits, uint32_t flags) {
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    hk_pool_desc d = {0};
    d.elem_size = 32;
    d.capacity = cap;
    d.index_bits = index_bits;
    d.flags = flags;
    d.name = "m";
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    return hk_pool_create(&d);
}

#define EXPECT(call, res, kind)                                                                              \
    do {                                                                                                     \
        int n_ = g_errs.count;                                                                               \
        CHECK_EQ((call), (res));                                                                             \
        CHECK_EQ(g_errs.count, n_ + 1);                                                                      \
        CHECK_EQ(g_errs.last_kind, (kind));                                                                  \
        CHECK_EQ(g_errs.last_result, (res));                                                                 \
    } while (0)

HKT_TEST(pool_misuse_table_fast_ids) {
    hk_pool *p = mk(4, 0, HK_POOL_NO_OVERFLOW);
    REQUIRE(p != NULL);
    hk_pool_list l = hk_pool_list_create(p, 0, "l");
    hk_pool_id a = hk_pool_alloc(p, NULL);
    /* the none ID */
    EXPECT(hk_pool_free(p, (hk_pool_id){0}, HK_POOL_FREE_SUBTREE), HK_ERR_INVALID, HK_EK_INVALID_ARG);
    EXPECT(hk_pool_list_push_back(p, l, (hk_pool_id){0}), HK_ERR_INVALID, HK_EK_INVALID_ARG);
    /* never issued: beyond the capacity, generation 0, a generation ahead */
    EXPECT(hk_pool_free(p, (hk_pool_id){(a.value & ~0x3FFFu) | 7u}, HK_POOL_FREE_SUBTREE), HK_ERR_FOREIGN,
           HK_EK_FOREIGN_PTR);
    EXPECT(hk_pool_free(p, (hk_pool_id){1u}, HK_POOL_FREE_SUBTREE), HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR);
    EXPECT(hk_pool_set_parent(p, (hk_pool_id){a.value + (1u << 14)}, (hk_pool_id){0}), HK_ERR_FOREIGN,
           HK_EK_FOREIGN_PTR);
    /* another pool's ID */
    hk_pool *q = mk(4, 0, 0);
    hk_pool_id other = hk_pool_alloc(q, NULL);
    g_errs.count = 0;
    EXPECT(hk_pool_free(p, other, HK_POOL_FREE_SUBTREE), HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR);
    CHECK_STR_CONTAINS(g_errs.last_message, "another instance's ID");
    CHECK(hk_pool_get(q, other) != NULL);
    hk_pool_destroy(q);
    /* freed: a second free is a double free, any other use is stale */
    CHECK_EQ(hk_pool_free(p, a, HK_POOL_FREE_SUBTREE), HK_OK);
    EXPECT(hk_pool_free(p, a, HK_POOL_FREE_SUBTREE), HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE);
    EXPECT(hk_pool_free(p, a, HK_POOL_DETACH), HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE);
    EXPECT(hk_pool_list_push_back(p, l, a), HK_ERR_STALE, HK_EK_STALE);
    EXPECT(hk_pool_set_parent(p, a, (hk_pool_id){0}), HK_ERR_STALE, HK_EK_STALE);
    CHECK_STR_CONTAINS(g_errs.last_message, "stale ID");
    CHECK(hk_pool_get(p, a) == NULL); /* lookups never report */
    /* pending (freed inside a defer scope): the same answers */
    hk_pool_id b = hk_pool_alloc(p, NULL);
    hk_pool_defer_begin(p);
    CHECK_EQ(hk_pool_free(p, b, HK_POOL_FREE_SUBTREE), HK_OK);
    EXPECT(hk_pool_free(p, b, HK_POOL_FREE_SUBTREE), HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE);
    CHECK_STR_CONTAINS(g_errs.last_message, "release pending");
    EXPECT(hk_pool_list_push_front(p, l, b), HK_ERR_STALE, HK_EK_STALE);
    CHECK_EQ(hk_pool_defer_end(p), HK_OK);
    /* the slot reused (FIFO: slots 2, 3, 0, 1): the old ID is stale for a free too */
    hk_pool_id c[4];
    for (int i = 0; i < 4; i++) c[i] = hk_pool_alloc(p, NULL);
    CHECK_EQ(hk_pool_id_index(p, c[2]), hk_pool_id_index(p, a));
    EXPECT(hk_pool_free(p, a, HK_POOL_FREE_SUBTREE), HK_ERR_STALE, HK_EK_STALE);
    CHECK(hk_pool_get(p, c[2]) != NULL);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

HKT_TEST(pool_misuse_double_free_of_retired_slot) {
    hk_pool *p = mk(1, 24, HK_POOL_NO_OVERFLOW); /* 255 generations */
    REQUIRE(p != NULL);
    hk_pool_id first = {0}, last = {0};
    for (int i = 0; i < 255; i++) {
        hk_pool_id x = hk_pool_alloc(p, NULL);
        REQUIRE(x.value != 0);
        if (!i) first = x;
        last = x;
        CHECK_EQ(hk_pool_free(p, x, HK_POOL_FREE_SUBTREE), HK_OK);
    }
    hk_pool_info info;
    hk_pool_get_info(p, &info);
    CHECK_EQ(info.retired_slots, 1);
    EXPECT(hk_pool_free(p, last, HK_POOL_FREE_SUBTREE), HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE);
    CHECK_STR_CONTAINS(g_errs.last_message, "retired");
    /* every generation of the slot was issued: an old one is stale, not foreign */
    EXPECT(hk_pool_free(p, first, HK_POOL_FREE_SUBTREE), HK_ERR_STALE, HK_EK_STALE);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

HKT_TEST(pool_misuse_table_overflow_ids) {
    hk_pool *p = mk(1, 0, 0);
    REQUIRE(p != NULL);
    hk_pool_id fast = hk_pool_alloc(p, NULL);
    hk_pool_id a = hk_pool_alloc(p, NULL), b = hk_pool_alloc(p, NULL);
    REQUIRE(hk_pool_id_index(p, a) == 16383 && hk_pool_id_index(p, b) == 16383);
    /* an overflow key never issued, and key 0 */
    EXPECT(hk_pool_free(p, (hk_pool_id){b.value + (1000u << 14)}, HK_POOL_FREE_SUBTREE), HK_ERR_FOREIGN,
           HK_EK_FOREIGN_PTR);
    EXPECT(hk_pool_free(p, (hk_pool_id){16383u}, HK_POOL_FREE_SUBTREE), HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR);
    /* pending, then released: double free while its overflow slot names it */
    hk_pool_defer_begin(p);
    CHECK_EQ(hk_pool_free(p, a, HK_POOL_FREE_SUBTREE), HK_OK);
    EXPECT(hk_pool_free(p, a, HK_POOL_FREE_SUBTREE), HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE);
    EXPECT(hk_pool_set_parent(p, a, fast), HK_ERR_STALE, HK_EK_STALE);
    CHECK_EQ(hk_pool_defer_end(p), HK_OK);
    EXPECT(hk_pool_free(p, a, HK_POOL_FREE_SUBTREE), HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE);
    EXPECT(hk_pool_set_parent(p, a, fast), HK_ERR_STALE, HK_EK_STALE);
    /* its overflow slot reused by a new object: stale */
    hk_pool_id c = hk_pool_alloc(p, NULL);
    REQUIRE(c.value != 0 && c.value != a.value);
    EXPECT(hk_pool_free(p, a, HK_POOL_FREE_SUBTREE), HK_ERR_STALE, HK_EK_STALE);
    CHECK(hk_pool_get(p, c) != NULL);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* HK_FLAG_PARANOID: the check runs after every mutating call, so damage
 * done behind the pool's back is reported by the next call. */
HKT_TEST(pool_paranoid_reports_damage_on_next_call) {
    static uint32_t mem[8192];
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    hk_pool_desc d = {0};
    d.elem_size = 16;
    d.capacity = 8;
    d.memory = mem;
    d.size = sizeof mem;
    d.flags = HK_FLAG_PARANOID;
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    hk_pool *p = hk_pool_create(&d);
    REQUIRE(p != NULL);
    hk_pool_id a = hk_pool_alloc(p, NULL);
    hk_pool_id b = hk_pool_alloc(p, NULL);
    CHECK_EQ(g_errs.count, 0);
    size_t i = 0;
    while (i < sizeof mem / 4 && mem[i] != b.value) i++;
    REQUIRE(i < sizeof mem / 4);
    mem[i] ^= 0x4u; /* the ID word of b now names slot 5 */
    CHECK_EQ(hk_pool_free(p, a, HK_POOL_FREE_SUBTREE), HK_OK);
    CHECK(g_errs.count >= 1);
    CHECK_EQ(g_errs.last_result, HK_ERR_CORRUPT);
    CHECK_EQ(g_errs.last_kind, HK_EK_CORRUPT_STRUCTURE);
    CHECK_STR_CONTAINS(g_errs.last_message, "slot 1");
    mem[i] ^= 0x4u;
    int n = g_errs.count;
    hk_pool_alloc(p, NULL);
    CHECK_EQ(g_errs.count, n);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* Lock hooks go through the instance core: every call takes the lock and
 * releases it, the inline lookup included (it defers to the full path). */
HKT_TEST(pool_lock_hooks_via_core) {
    hkt_errors_reset(&g_errs);
    hk_pool_desc d = {0};
    d.elem_size = 16;
    d.capacity = 4;
    d.lock.lock = hkt_lock;
    d.lock.unlock = hkt_unlock;
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    hk_pool *p = hk_pool_create(&d);
    REQUIRE(p != NULL);
    hkt_lock_calls = 0;
    hkt_lock_max = 0;
    hk_pool_id a = hk_pool_alloc(p, NULL);
    CHECK(hk_pool_get(p, a) != NULL);
    hk_pool_list l = hk_pool_list_create(p, 0, "l");
    CHECK_EQ(hk_pool_list_push_back(p, l, a), HK_OK);
    CHECK_EQ(hk_pool_free(p, a, HK_POOL_FREE_SUBTREE), HK_OK);
    CHECK_EQ(hkt_lock_calls, 5);
    CHECK_EQ(hkt_lock_max, 1);
    CHECK_EQ(hkt_lock_depth, 0);
    hk_pool_destroy(p);
    CHECK_EQ(hkt_lock_depth, 0);
    /* half-set hooks are refused with a report */
    d.lock.unlock = NULL;
    CHECK(hk_pool_create(&d) == NULL);
    CHECK_EQ(g_errs.last_kind, HK_EK_INVALID_ARG);
}

/* A children mode that is neither FREE_SUBTREE nor DETACH is refused and
 * reported, on the inline fast path (an object with no tree, no list) and
 * on the full path (a parent with a child), overflow IDs included; nothing
 * is freed. */
HKT_TEST(pool_misuse_free_with_invalid_children_mode) {
    hk_pool *p = mk(4, 0, 0);
    REQUIRE(p != NULL);
    hk_pool_id lone = hk_pool_alloc(p, NULL), parent = hk_pool_alloc(p, NULL), child = hk_pool_alloc(p, NULL);
    hk_pool_id over[4];
    for (int i = 0; i < 4; i++) over[i] = hk_pool_alloc(p, NULL); /* past the capacity: overflow IDs */
    REQUIRE(hk_pool_set_parent(p, child, parent) == HK_OK);
    const unsigned modes[] = {2, 7, 0x80000000u, 0xffffffffu};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        hk_pool_children m = (hk_pool_children)modes[i];
        EXPECT(hk_pool_free(p, lone, m), HK_ERR_INVALID, HK_EK_INVALID_ARG);
        EXPECT(hk_pool_free(p, parent, m), HK_ERR_INVALID, HK_EK_INVALID_ARG);
        EXPECT(hk_pool_free(p, over[3], m), HK_ERR_INVALID, HK_EK_INVALID_ARG);
    }
    CHECK_STR_CONTAINS(g_errs.last_message, "children mode");
    CHECK(hk_pool_get(p, lone) != NULL);
    CHECK(hk_pool_get(p, parent) != NULL);
    CHECK(hk_pool_get(p, child) != NULL);
    for (int i = 0; i < 4; i++) CHECK(hk_pool_get(p, over[i]) != NULL);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    CHECK_EQ(hk_pool_free(p, parent, HK_POOL_DETACH), HK_OK);
    CHECK(hk_pool_get(p, child) != NULL);
    CHECK_EQ(hk_pool_free(p, lone, HK_POOL_FREE_SUBTREE), HK_OK);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

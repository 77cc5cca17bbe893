/* Pool deferred destruction: frees inside a scope keep memory valid until
 * the outermost scope ends; on_destroy runs for each object (parents before
 * children) and may free more; destroy runs every destructor. */
#include "hk_test.h"
#include "internal.h"

#include "heapkit/pool.h"

typedef struct obj {
    uint32_t magic;
    uint32_t n;
    char pad[56];
} obj;

static hkt_errors g_errs;

/* ---- deferred free and on_destroy ------------------------------------------------ */

typedef struct destroy_log {
    uint32_t ids[64];
    int n;
    hk_pool_id chain; /* freed from inside the hook */
    int bad_memory;
} destroy_log;

static void on_destroy(hk_pool *p, hk_pool_id id, void *o, void *user) {
    destroy_log *l = (destroy_log *)user;
    if (((obj *)o)->magic != 0xA11Eu) l->bad_memory++;
    ((obj *)o)->magic = 0xDEADu;
    if (l->n < 64) l->ids[l->n++] = id.value;
    CHECK(hk_pool_get(p, id) == NULL);
    if (l->chain.value) {
        hk_pool_id c = l->chain;
        l->chain.value = 0;
        CHECK_EQ(hk_pool_free(p, c, HK_POOL_FREE_SUBTREE), HK_OK);
    }
}

static hk_pool *mk_destroy(destroy_log *log) {
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    memset(log, 0, sizeof *log);
    hk_pool_desc d = {0};
    d.elem_size = sizeof(obj);
    d.capacity = 4;
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    d.on_destroy = on_destroy;
    d.destroy_user = log;
    return hk_pool_create(&d);
}

static hk_pool_id alloc_magic(hk_pool *p, hk_pool_id parent) {
    obj *o;
    hk_pool_id id =
        parent.value ? hk_pool_alloc_child(p, parent, (void **)&o) : hk_pool_alloc(p, (void **)&o);
    o->magic = 0xA11Eu;
    return id;
}

HKT_TEST(pool_defer_free_keeps_memory) {
    destroy_log log;
    hk_pool *p = mk_destroy(&log);
    hk_pool_id root = alloc_magic(p, (hk_pool_id){0});
    hk_pool_id kid = alloc_magic(p, root);
    obj *ko = (obj *)hk_pool_get(p, kid);
    hk_pool_defer_begin(p);
    hk_pool_defer_begin(p); /* nested */
    CHECK_EQ(hk_pool_free(p, root, HK_POOL_FREE_SUBTREE), HK_OK);
    CHECK(!hk_pool_is_alive(p, root) && !hk_pool_is_alive(p, kid));
    CHECK_EQ(log.n, 0);
    hk_pool_info info;
    hk_pool_get_info(p, &info);
    CHECK_EQ(info.pending, 2);
    CHECK_EQ(info.defer_depth, 2);
    CHECK_EQ(ko->magic, 0xA11Eu);              /* memory valid until the scope ends */
    hk_pool_id fresh = hk_pool_alloc(p, NULL); /* does not reuse the pending slots */
    CHECK(hk_pool_id_index(p, fresh) >= 2);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_defer_end(p);
    CHECK_EQ(log.n, 0);
    hk_pool_defer_end(p);
    CHECK_EQ(log.n, 2);
    CHECK_EQ(log.ids[0], root.value); /* parents before their children */
    CHECK_EQ(log.ids[1], kid.value);
    CHECK_EQ(log.bad_memory, 0);
    hk_pool_get_info(p, &info);
    CHECK_EQ(info.pending, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

HKT_TEST(pool_defer_on_destroy_may_free_more) {
    destroy_log log;
    hk_pool *p = mk_destroy(&log);
    hk_pool_id a = alloc_magic(p, (hk_pool_id){0});
    hk_pool_id b = alloc_magic(p, (hk_pool_id){0});
    hk_pool_id bc = alloc_magic(p, b);
    log.chain = b; /* a's destructor frees b (and its child) */
    CHECK_EQ(hk_pool_free(p, a, HK_POOL_FREE_SUBTREE), HK_OK);
    CHECK_EQ(log.n, 3);
    CHECK_EQ(log.ids[1], b.value);
    CHECK_EQ(log.ids[2], bc.value);
    CHECK(!hk_pool_is_alive(p, b) && !hk_pool_is_alive(p, bc));
    CHECK_EQ(log.bad_memory, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

HKT_TEST(pool_defer_destroy_runs_destructors) {
    destroy_log log;
    hk_pool *p = mk_destroy(&log);
    hk_pool_id r = alloc_magic(p, (hk_pool_id){0});
    for (int i = 0; i < 10; i++) alloc_magic(p, r); /* 7 on the overflow path */
    alloc_magic(p, (hk_pool_id){0});
    hk_pool_clear(p);
    CHECK_EQ(log.n, 12);
    CHECK_EQ(log.ids[0], r.value);
    CHECK_EQ(log.bad_memory, 0);
    hk_pool_info info;
    hk_pool_get_info(p, &info);
    CHECK_EQ(info.live, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    for (int i = 0; i < 6; i++) alloc_magic(p, (hk_pool_id){0});
    log.n = 0;
    hk_pool_destroy(p);
    CHECK_EQ(log.n, 6);
    CHECK_EQ(log.bad_memory, 0);
}

/* ---- HK_POOL_HOT_REUSE: the release pass's slots are reused first -------------- */

static hk_pool *mk_reuse(uint32_t cap, uint32_t index_bits, uint32_t flags) {
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    hk_pool_desc d = {0};
    d.elem_size = sizeof(obj);
    d.capacity = cap;
    d.index_bits = index_bits;
    d.flags = flags;
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    return hk_pool_create(&d);
}

/* Three objects freed inside a scope come back last-freed first when the
 * scope ends; their old IDs stay dead (free of one: stale); without the
 * flag the oldest free slot comes first. */
HKT_TEST(pool_defer_hot_reuse_is_lifo) {
    for (int hot = 0; hot < 2; hot++) {
        hk_pool *p = mk_reuse(16, 0, hot ? HK_POOL_HOT_REUSE : 0);
        REQUIRE(p);
        hk_pool_id ids[8];
        for (int i = 0; i < 8; i++) ids[i] = hk_pool_alloc(p, NULL);
        hk_pool_defer_begin(p);
        for (int i = 2; i < 5; i++) CHECK_EQ(hk_pool_free(p, ids[i], HK_POOL_FREE_SUBTREE), HK_OK);
        CHECK_EQ(hk_pool_defer_end(p), HK_OK);
        hk_pool_id n[3];
        for (int i = 0; i < 3; i++) n[i] = hk_pool_alloc(p, NULL);
        for (int i = 0; i < 3; i++) {
            uint32_t want =
                hot ? hk_pool_id_index(p, ids[4 - i]) : 8u + (uint32_t)i; /* FIFO: slots 8, 9, 10 */
            CHECK_EQ(hk_pool_id_index(p, n[i]), want);
        }
        for (int i = 2; i < 5; i++) CHECK(hk_pool_get(p, ids[i]) == NULL);
        if (hot) {
            CHECK_EQ(hk_pool_free(p, ids[4], HK_POOL_FREE_SUBTREE), HK_ERR_STALE); /* slot reused */
            CHECK_EQ(g_errs.last_kind, HK_EK_STALE);
        }
        /* counters: 11 allocations, 3 frees */
        hk_stats st;
        hk_pool_stats(p, &st);
        CHECK_EQ(st.alloc_count, 11u);
        CHECK_EQ(st.free_count, 3u);
        CHECK_EQ(st.live_blocks, 8u);
        CHECK_EQ(hk_pool_check(p), HK_OK);
        hk_pool_destroy(p);
    }
}

/* A free outside any scope (the inline path) stays FIFO with the flag. */
HKT_TEST(pool_defer_hot_reuse_plain_free_stays_fifo) {
    hk_pool *p = mk_reuse(16, 0, HK_POOL_HOT_REUSE);
    REQUIRE(p);
    hk_pool_id a = hk_pool_alloc(p, NULL);
    CHECK_EQ(hk_pool_free(p, a, HK_POOL_FREE_SUBTREE), HK_OK);
    hk_pool_id b = hk_pool_alloc(p, NULL);
    CHECK_EQ(hk_pool_id_index(p, b), 1u);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* With 8-bit generations the one slot that churns through the release
 * pass (every allocation takes it back) retires after its 255th use, as
 * without the flag: no ID of it is issued twice, and then the allocations
 * move on to the other slots. */
HKT_TEST(pool_defer_hot_reuse_retires) {
    hk_pool *p = mk_reuse(4, 24, HK_POOL_HOT_REUSE | HK_POOL_NO_OVERFLOW);
    REQUIRE(p);
    unsigned char seen[256] = {0};
    for (int i = 0; i < 255; i++) {
        hk_pool_id id = hk_pool_alloc(p, NULL);
        REQUIRE(id.value);
        CHECK_EQ(hk_pool_id_index(p, id), 0u);
        uint32_t g = hk_pool_id_generation(p, id);
        CHECK(!seen[g]);
        seen[g] = 1;
        hk_pool_defer_begin(p);
        CHECK_EQ(hk_pool_free(p, id, HK_POOL_FREE_SUBTREE), HK_OK);
        hk_pool_defer_end(p);
    }
    hk_pool_info info;
    hk_pool_get_info(p, &info);
    CHECK_EQ(info.retired_slots, 1u);
    CHECK_EQ(info.free_slots, 3u);
    hk_pool_id next = hk_pool_alloc(p, NULL);
    CHECK_EQ(hk_pool_id_index(p, next), 1u);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_stats st;
    hk_pool_stats(p, &st);
    CHECK_EQ(st.alloc_count, 256u);
    CHECK_EQ(st.free_count, 255u);
    hk_pool_destroy(p);
}

/* Under HK_POOL_WRAP the slot's sequence wraps instead: at the wrap the
 * slot goes to the back of the queue (the other free slots come first),
 * and the allocation count stays exact. */
HKT_TEST(pool_defer_hot_reuse_wraps) {
    hk_pool *p = mk_reuse(4, 24, HK_POOL_HOT_REUSE | HK_POOL_WRAP | HK_POOL_NO_OVERFLOW);
    REQUIRE(p);
    int moved = 0;
    for (int i = 0; i < 300; i++) {
        hk_pool_id id = hk_pool_alloc(p, NULL);
        REQUIRE(id.value);
        moved += hk_pool_id_index(p, id) != 0;
        hk_pool_defer_begin(p);
        CHECK_EQ(hk_pool_free(p, id, HK_POOL_FREE_SUBTREE), HK_OK);
        hk_pool_defer_end(p);
    }
    CHECK(moved > 0); /* slot 0 wrapped once: the next allocation took slot 1 */
    hk_pool_info info;
    hk_pool_get_info(p, &info);
    CHECK_EQ(info.retired_slots, 0u);
    CHECK_EQ(info.free_slots, 4u);
    hk_stats st;
    hk_pool_stats(p, &st);
    CHECK_EQ(st.alloc_count, 300u);
    CHECK_EQ(st.free_count, 300u);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

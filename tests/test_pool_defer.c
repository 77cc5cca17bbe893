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

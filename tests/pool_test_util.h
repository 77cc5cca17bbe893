/* tests/pool_test_util.h - what the pool's test files share: a 64-byte
 * object, a pool of them reporting (quietly) into g_errs, the defer-scope
 * depth, and a pool whose lock hooks count their calls. */
#ifndef HK_POOL_TEST_UTIL_H
#define HK_POOL_TEST_UTIL_H

#include "heapkit/pool.h"
#include "hk_test.h"

typedef struct obj {
    uint32_t magic;
    uint32_t n;
    char pad[56];
} obj;

static hkt_errors g_errs;

static inline hk_pool *mk(uint32_t cap, uint32_t flags) {
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    hk_pool_desc d = {0};
    d.elem_size = sizeof(obj);
    d.capacity = cap;
    d.flags = flags;
    d.name = "vms";
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    return hk_pool_create(&d);
}

/* The pool's defer-scope depth. */
static inline uint32_t depth_of(hk_pool *p) {
    hk_pool_info in;
    hk_pool_get_info(p, &in);
    return in.defer_depth;
}

/* Lock hooks that count their lock calls in g_locks. */
__attribute__((unused)) static int g_locks;
static inline void count_lock(void *u) {
    (void)u;
    g_locks++;
}
static inline void count_unlock(void *u) { (void)u; }

/* A pool of cap 64-byte objects whose lock hooks count (g_locks), with no
 * error hook. */
static inline hk_pool *mk_counting_locked(uint32_t cap) {
    hkt_errors_reset(&g_errs);
    hk_pool_desc d = {0};
    d.elem_size = sizeof(obj);
    d.capacity = cap;
    d.lock.lock = count_lock;
    d.lock.unlock = count_unlock;
    return hk_pool_create(&d);
}

#endif /* HK_POOL_TEST_UTIL_H */

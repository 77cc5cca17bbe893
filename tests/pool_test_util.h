/* tests/pool_test_util.h - what the pool's test files share: a 64-byte
 * object and a pool of them reporting (quietly) into g_errs. */
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

#endif /* HK_POOL_TEST_UTIL_H */

/* tests/cache_test_util.h - what the cache's test files share: a cache
 * reporting into g_errs, and filling / checking a block's bytes. */
#ifndef HK_CACHE_TEST_UTIL_H
#define HK_CACHE_TEST_UTIL_H

#include "heapkit/cache.h"
#include "hk_test.h"

static hkt_errors g_errs;

static inline hk_cache *mk(size_t size, uint32_t flags) {
    hkt_errors_reset(&g_errs);
    return hk_cache_create(&(hk_cache_desc){.size = size,
                                            .flags = flags,
                                            .name = "test",
                                            .max_handles = 1024,
                                            .on_error = hkt_on_error,
                                            .error_user = &g_errs});
}

static inline void fill(hk_cache *c, hk_cache_handle h, unsigned char v) {
    unsigned char *p = hk_cache_deref(c, h);
    memset(p, v, hk_cache_size(c, h));
}

static inline int holds(hk_cache *c, hk_cache_handle h, unsigned char v) {
    unsigned char *p = hk_cache_deref(c, h);
    size_t n = hk_cache_size(c, h);
    return p && hk_fill_check(p, n, v) == n;
}

#endif /* HK_CACHE_TEST_UTIL_H */

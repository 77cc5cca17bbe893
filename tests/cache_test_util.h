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

/* The LRU rank of handle h's block as walk reports it (999: not found;
 * the first 8 used blocks only). */
typedef struct rank_rec {
    uint32_t id[8], rank[8];
    int n;
} rank_rec;

static inline int rank_cb(const hk_block_info *bi, void *user) {
    rank_rec *r = (rank_rec *)user;
    if ((bi->flags & HK_BLOCK_USED) && r->n < 8) {
        r->id[r->n] = bi->id;
        r->rank[r->n++] = bi->rank;
    }
    return 0;
}

static inline uint32_t rank_of(hk_cache *c, hk_cache_handle h) {
    rank_rec r = {{0}, {0}, 0};
    hk_cache_walk(c, rank_cb, &r);
    for (int i = 0; i < r.n; i++)
        if (r.id[i] == h.value) return r.rank[i];
    return 999;
}

/* deref_fast's view of the cache (heapkit/detail/cache.h): the hot entry
 * of handle h, and whether deref_fast would return at once for it. */
static inline hk__cache_view *view_of(hk_cache *c) { return (hk__cache_view *)(void *)c; }
static inline uint64_t hot_word(hk_cache *c, hk_cache_handle h) {
    return hk__cache_hot_of(c)[h.value & view_of(c)->idx_mask];
}
static inline uint32_t fast_epoch(hk_cache *c) { return (uint32_t)(view_of(c)->probe >> 32); }
static inline int fast_hits(hk_cache *c, hk_cache_handle h) {
    return (uint32_t)(hot_word(c, h) >> 32) == (h.value ^ fast_epoch(c));
}

#endif /* HK_CACHE_TEST_UTIL_H */

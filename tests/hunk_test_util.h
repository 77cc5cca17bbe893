/* tests/hunk_test_util.h - what the hunk's test files share: a hunk
 * reporting into g_errs, its counters one at a time, and a way to hide a
 * block's bounds from the compiler. */
#ifndef HK_HUNK_TEST_UTIL_H
#define HK_HUNK_TEST_UTIL_H

#include "heapkit/hunk.h"
#include "hk_test.h"

static hkt_errors g_errs;

/* hk_hunk_get_info's fields, one at a time. */
static inline hk_hunk_info info_of(const hk_hunk *h) {
    hk_hunk_info i;
    memset(&i, 0, sizeof i);
    (void)hk_hunk_get_info(h, &i);
    return i;
}
static inline size_t low_used(const hk_hunk *h) { return info_of(h).low_used; }
static inline size_t high_used(const hk_hunk *h) { return info_of(h).high_used; }
static inline size_t capacity(const hk_hunk *h) { return info_of(h).capacity; }

/* The hunk's allocators carry HK_ALLOC_SIZE, so the compiler knows a block's
 * bounds; the tests that damage a block on purpose take its address through
 * this, which hides them. */
static inline unsigned char *unbounded(void *p) {
    __asm__ volatile("" : "+r"(p));
    return (unsigned char *)p;
}

static inline hk_hunk *make(size_t size, uint32_t flags) {
    hkt_errors_reset(&g_errs);
    hk_hunk_desc d = {0};
    d.size = size;
    d.flags = flags;
    d.name = "test";
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    return hk_hunk_create(&d);
}

/* A tenant's reclaim callback that gives nothing back. */
static inline size_t no_reclaim(void *user, int high, size_t bytes) {
    (void)user;
    (void)high;
    (void)bytes;
    return 0;
}

#endif /* HK_HUNK_TEST_UTIL_H */

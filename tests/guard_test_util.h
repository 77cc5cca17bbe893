/* tests/guard_test_util.h - what the guard heap's test files share: a
 * quiet error sink, a guard heap maker with a 1 GiB reservation, the page
 * size, and a deliberate out-of-bounds write. Included by test_guard.c and
 * test_guard_model.c. */
#ifndef HEAPKIT_GUARD_TEST_UTIL_H
#define HEAPKIT_GUARD_TEST_UTIL_H

#include "hk_test.h"

/* These tests write past blocks and ask for absurd sizes on purpose; the
 * allocation attributes of heapkit/guard.h (HK_ALLOC_SIZE) let the compiler
 * see that. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#pragma GCC diagnostic ignored "-Walloc-size-larger-than="
#endif
#include "internal.h"
#include "guard_internal.h"
#include "heapkit/guard.h"

#include <pthread.h>

static hkt_errors errs = {.quiet = 1};

static HK__UNUSED hk_guard *mk(hk_guard_desc d) {
    if (!d.on_error) {
        d.on_error = hkt_on_error;
        d.error_user = &errs;
    }
    if (!d.reserve) d.reserve = (size_t)1 << 30;
    hkt_errors_reset(&errs);
    return hk_guard_create(&d);
}

static HK__UNUSED size_t pg(void) { return hk_page_size(); }

/* A deliberate out-of-bounds write, through a volatile access: the
 * compiler knows the block's size (HK_ALLOC_SIZE) and would be free to
 * drop a plain store it can prove never read. */
static HK__UNUSED void poke(void *p, ptrdiff_t i, unsigned v) {
    ((volatile unsigned char *)p)[i] = (unsigned char)v;
}
static HK__UNUSED int page_aligned(const void *p) { return ((uintptr_t)p & (pg() - 1)) == 0; }

#endif /* HEAPKIT_GUARD_TEST_UTIL_H */

/*
 * shim/malloc_compat.h - the rules by which heapkit's preload libraries
 * behave like the glibc malloc they replace, at the edges where C, POSIX
 * and glibc leave room: alignments that are 0 or not powers of two, sizes
 * that cannot be had, realloc to 0. Static inline helpers with no state,
 * used by shim/override.inc; tests/malloc_compat_prog.c prints every case
 * and tests/malloc_compat.sh compares the preload with this machine's glibc.
 *
 * glibc (2.36, malloc/malloc.c: _mid_memalign, posix_memalign, realloc):
 *  - memalign, aligned_alloc and valloc share one rule: an alignment up to
 *    16 (0 included) is plain malloc; above, one that is not a power of two
 *    is rounded up to the next (from 32); one above SIZE_MAX / 2 + 1 fails
 *    with EINVAL. aligned_alloc checks nothing else (the size need not be a
 *    multiple of the alignment).
 *  - posix_memalign returns EINVAL unless the alignment is a power of two
 *    multiple of sizeof(void *) (errno kept), ENOMEM when memory cannot be
 *    had (errno then ENOMEM too), and leaves *out alone on failure.
 *  - every failure to get memory sets errno to ENOMEM; a failed realloc
 *    keeps the old block.
 *  - realloc(p, 0) with p not NULL frees p and returns NULL (errno kept).
 * Where glibc has a plain bug, heapkit does what its manual says instead:
 * pvalloc rounds the size up to whole pages (glibc 2.36 masks with
 * -(pagesize - 1), so pvalloc(0) gives a small block).
 */
#ifndef HEAPKIT_SHIM_MALLOC_COMPAT_H
#define HEAPKIT_SHIM_MALLOC_COMPAT_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#define HK_COMPAT_MALLOC_ALIGN 16u /* what malloc always gives */

/* The alignment a memalign / aligned_alloc / valloc request is served with:
 * 0 when it is plain malloc (align <= 16), else a power of two >= 32. Sets
 * *err and returns SIZE_MAX when the request must fail: EINVAL for an
 * alignment above SIZE_MAX / 2 + 1, ENOMEM for one above `backend_max` (the
 * most the backend can align to: memory so aligned cannot be had). */
static inline size_t hk_compat_memalign_align(size_t align, size_t backend_max, int *err) {
    if (align <= HK_COMPAT_MALLOC_ALIGN) return 0;
    if (align > SIZE_MAX / 2 + 1) {
        *err = EINVAL;
        return SIZE_MAX;
    }
    size_t a = 2 * HK_COMPAT_MALLOC_ALIGN;
    while (a < align) a <<= 1; /* cannot overflow: align <= SIZE_MAX / 2 + 1 */
    if (a > backend_max) {
        *err = ENOMEM;
        return SIZE_MAX;
    }
    return a;
}

/* posix_memalign's argument check: 0 when the alignment is a power of two
 * multiple of sizeof(void *), else EINVAL. */
static inline int hk_compat_posix_memalign_check(size_t align) {
    if (align == 0 || align % sizeof(void *) != 0) return EINVAL;
    size_t q = align / sizeof(void *);
    return (q & (q - 1)) == 0 ? 0 : EINVAL;
}

/* realloc(p, n) with p not NULL: true when it is a free (n == 0). */
static inline int hk_compat_realloc_frees(size_t n) { return n == 0; }

#endif /* HEAPKIT_SHIM_MALLOC_COMPAT_H */

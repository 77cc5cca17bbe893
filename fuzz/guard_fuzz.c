/*
 * fuzz/guard_fuzz.c - random operation sequences on a guard heap, at the
 * API level, decoded from the input (3 bytes an operation), against a
 * model: every live block with its size, alignment and fill byte.
 * The harness only ever touches bytes inside live blocks, so no fault is
 * an expected outcome here: a fault is a failure.
 * After every operation: every live block holds its bytes, owns() and
 * usable_size() agree with the model, stats count the live blocks, and
 * hk_guard_check passes.
 * Misuse fed on purpose: double frees, interior pointers, pointers into
 * guard pages, wild addresses, realloc of freed blocks, alignments that
 * are no powers of two, sizes near SIZE_MAX. Each must be refused and
 * reported, changing nothing.
 */
#include "heapkit/guard.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GF_MAX_OPS 60
#define GF_SLOTS   24

typedef struct gf_blk {
    unsigned char *p;
    size_t n;
    size_t align;
    unsigned char fill;
} gf_blk;

static int gf_reports;
static void gf_on_error(const hk_error *e, void *user) {
    (void)e;
    (void)user;
    gf_reports++;
}

static void gf_fail(const char *what, int op) {
    fprintf(stderr, "guard_fuzz: %s (operation %d)\n", what, op);
    abort();
}

static size_t gf_opaque(size_t n) {
    __asm__ volatile("" : "+r"(n));
    return n;
}
static void *gf_hide(void *p) {
    __asm__ volatile("" : "+r"(p));
    return p;
}

static void gf_paint(gf_blk *b) {
    for (size_t i = 0; i < b->n; i++) b->p[i] = (unsigned char)(b->fill + i);
}
static int gf_intact(const gf_blk *b, const unsigned char *p) {
    for (size_t i = 0; i < b->n; i++)
        if (p[i] != (unsigned char)(b->fill + i)) return 0;
    return 1;
}

/* The guard serves what it cannot guard (alignments above a page) from the
 * C library, which under AddressSanitizer and ThreadSanitizer aborts on
 * absurd sizes unless told to return NULL as a malloc must. */
const char *__asan_default_options(void);
const char *__tsan_default_options(void);
__attribute__((used)) const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
__attribute__((used)) const char *__tsan_default_options(void) { return "allocator_may_return_null=1"; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static gf_blk s[GF_SLOTS];
    static void *freed[8];
    if (size < 1) return 0;
    hk_guard_desc d;
    memset(&d, 0, sizeof d);
    d.reserve = (size_t)64 << 20;
    d.on_error = gf_on_error;
    d.quarantine_blocks = data[0] & 7;
    d.side = (hk_guard_side)((data[0] >> 3) % 3);
    d.align = (data[0] & 0x40) ? 1 : 16;
    d.flags = (data[0] & 0x80) ? HK_FLAG_ZERO : 0;
    d.frames = 4;
    hk_guard *g = hk_guard_create(&d);
    if (!g) gf_fail("create failed", -1);
    memset(s, 0, sizeof s);
    memset(freed, 0, sizeof freed);
    int nfreed = 0;
    if (size > 1 + 3 * GF_MAX_OPS) size = 1 + 3 * GF_MAX_OPS;
    int op = 0;
    for (size_t i = 1; i + 3 <= size; i += 3, op++) {
        unsigned kind = data[i] % 16, a = data[i + 1], b = data[i + 2];
        gf_blk *x = &s[a % GF_SLOTS];
        size_t n = (size_t)b * ((a & 0x80) ? 97u : 1u);
        int before = gf_reports;
        if (!x->p && kind < 10) { /* allocate */
            size_t align = 0;
            void *p;
            if (kind >= 7) {
                static const size_t aligns[8] = {1, 8, 32, 64, 256, 4096, 8192, 48};
                align = aligns[b & 7];
                p = hk_guard_alloc_aligned(g, align, n);
                if (align == 48) {
                    if (p || gf_reports == before) gf_fail("bad alignment accepted or not reported", op);
                    continue;
                }
            } else {
                p = hk_guard_alloc(g, n);
            }
            if (!p) {
                if (gf_reports == before) gf_fail("failed allocation not reported", op);
            } else {
                x->p = (unsigned char *)p;
                x->n = n;
                x->align = align;
                x->fill = (unsigned char)(a ^ b);
                if (align > 1 && ((uintptr_t)p & (align - 1))) gf_fail("misaligned", op);
                if (d.flags & HK_FLAG_ZERO)
                    for (size_t k = 0; k < n; k++)
                        if (x->p[k]) gf_fail("HK_FLAG_ZERO block not zero", op);
                gf_paint(x);
            }
        } else if (kind < 10) {
            switch (kind) {
            case 0:
            case 1:
            case 2: /* free */
                if (hk_guard_free(g, x->p) != HK_OK) gf_fail("free failed", op);
                freed[nfreed++ % 8] = x->p;
                x->p = NULL;
                break;
            case 3:
            case 4: { /* realloc */
                unsigned char *q = (unsigned char *)hk_guard_realloc(g, x->p, n);
                if (!q) {
                    if (n == 0) gf_fail("realloc to 0 gave NULL", op);
                    if (gf_reports == before) gf_fail("failed realloc not reported", op);
                    break;
                }
                size_t keep = n < x->n ? n : x->n;
                gf_blk old = *x;
                old.n = keep;
                if (!gf_intact(&old, q)) gf_fail("realloc lost bytes", op);
                if (q != x->p) freed[nfreed++ % 8] = x->p;
                x->p = q;
                x->n = n;
                gf_paint(x);
                break;
            }
            case 5: { /* misuse: interior pointer (or one past a zero-size block's start) */
                if (x->n < 2) break;
                unsigned char *in = (unsigned char *)gf_hide(x->p) + 1 + (size_t)b % (x->n - 1);
                if (hk_guard_free(g, in) == HK_OK || gf_reports == before)
                    gf_fail("interior free accepted", op);
                if (hk_guard_owns(g, in)) gf_fail("owns() an interior pointer", op);
                break;
            }
            case 6: { /* where and usable_size */
                hk_block_info info;
                if (x->n && hk_guard_where(g, x->p + (size_t)b % x->n, &info) == HK_OK &&
                    info.address != x->p)
                    gf_fail("where() names another block", op);
                break;
            }
            default: /* rewrite the bytes */
                x->fill = (unsigned char)b;
                gf_paint(x);
                break;
            }
        } else if (kind == 10 || kind == 11) { /* misuse: a freed block, freed again or reallocated */
            void *f = freed[a % 8];
            if (!f) continue;
            int live = 0;
            for (int k = 0; k < GF_SLOTS; k++) live |= s[k].p == f;
            if (live) continue; /* its address was given out again */
            if (kind == 10) {
                if (hk_guard_free(g, f) == HK_OK || gf_reports == before) gf_fail("double free accepted", op);
            } else {
                if (hk_guard_realloc(g, f, 10) || gf_reports == before)
                    gf_fail("realloc of a freed block", op);
            }
        } else if (kind == 12) { /* misuse: wild addresses */
            /* Including pointers into unmapped pages whose 16 bytes below
             * lie on the same page (0x12345670, UINTPTR_MAX - 15): the header
             * read below them is probed, never faulting (issue 21, fixed). */
            static const uintptr_t wild[8] = {
                1, 4096, 0x12345000, 0x12345677, 0x12345670, UINTPTR_MAX - 15, UINTPTR_MAX - 7, 16};
            void *w = (void *)wild[a & 7];
            if (hk_guard_free(g, w) == HK_OK || gf_reports == before) gf_fail("wild free accepted", op);
            if (hk_guard_owns(g, w)) gf_fail("owns() a wild address", op);
            if (hk_guard_usable_size(g, w) != 0) gf_fail("usable_size of a wild address", op);
        } else if (kind == 13) { /* absurd sizes */
            void *p = hk_guard_alloc(g, gf_opaque(SIZE_MAX - b));
            if (p || gf_reports == before) gf_fail("absurd size accepted or not reported", op);
            p = hk_guard_alloc_aligned(g, 64, gf_opaque(SIZE_MAX / 2 + b));
            if (p) gf_fail("absurd aligned size accepted", op);
        } else if (kind == 14) { /* a pointer into the guard page before a block */
            if (!x->p || !x->n) continue;
            uintptr_t page = ((uintptr_t)x->p & ~(uintptr_t)4095) - 1;
            int other = 0;
            for (int k = 0; k < GF_SLOTS; k++)
                other |= s[k].p && (uintptr_t)s[k].p <= page && page < (uintptr_t)s[k].p + s[k].n;
            if (other) continue;
            if (hk_guard_free(g, (void *)page) == HK_OK) gf_fail("free of a guard page accepted", op);
        } else { /* leaks in the ALL mode: every live guarded block */
            hk_guard_info in;
            hk_guard_get_info(g, &in);
            size_t bytes = 0;
            if (hk_guard_leaks(g, HK_GUARD_LEAKS_ALL, &bytes) != in.live_guarded) gf_fail("leak count", op);
        }
        size_t live = 0;
        for (int k = 0; k < GF_SLOTS; k++) {
            if (!s[k].p) continue;
            live++;
            if (!gf_intact(&s[k], s[k].p)) gf_fail("block contents changed", op);
            if (!hk_guard_owns(g, s[k].p)) gf_fail("owns() denies a live block", op);
            if (hk_guard_usable_size(g, s[k].p) < s[k].n) gf_fail("usable size too small", op);
        }
        hk_stats st;
        hk_guard_stats(g, &st);
        if (st.live_blocks != live) gf_fail("stats: live blocks differ from the model", op);
        if (hk_guard_check(g) != HK_OK) gf_fail("check failed", op);
    }
    for (int k = 0; k < GF_SLOTS; k++)
        if (s[k].p && hk_guard_free(g, s[k].p) != HK_OK) gf_fail("final free failed", op);
    if (hk_guard_check(g) != HK_OK) gf_fail("final check failed", op);
    hk_guard_destroy(g);
    return 0;
}

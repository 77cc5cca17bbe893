/*
 * bench/bounds_glibc.c - glibc malloc's worst paths counted the same way,
 * the peer of docs/realtime.md's bounds.
 *
 * The process heap is filled to 3/4 of the scale's size with blocks of
 * 16 B - 64 KiB (as the zone's driver, same seed schedule), every other
 * block freed, then: a churn of frees and mallocs over it; a malloc of a
 * large-bin size while the fast bins hold small free chunks (a sixteenth
 * of the heap in 32-128 byte chunks): glibc consolidates every fast chunk
 * first (malloc_consolidate: O(fast chunks)); a free that makes a chunk of
 * 64 KiB or more (FASTBIN_CONSOLIDATION_THRESHOLD), which consolidates the
 * fast bins too; a realloc that moves (the copy). glibc's own tunables are
 * left at their defaults (tcache of 7 chunks per size, mmap threshold
 * 128 KiB at the start).
 *
 * Invariants: deterministic for the scale apart from glibc's own state
 * (this program's few other allocations); every block is freed at the end.
 */
#include "bounds.h"

#include <string.h>

enum { CHURN = 1500, REPS = 8 };

static size_t glibc_rnd(uint64_t *r) {
    unsigned oct = (unsigned)(bd_rand(r) % 12u);
    size_t lo = (size_t)16 << oct;
    return lo + (size_t)(bd_rand(r) % lo);
}

void bd_glibc(int scale) {
    size_t heap = bd_heap(scale), cap = heap / 2000 + 4096, nb = 0, live = 0;
    void **blk = calloc(cap, sizeof *blk);
    BD_REQUIRE(blk);
    uint64_t r = 0x5EED0000u + (uint64_t)scale;
    while (live < heap - heap / 4 && nb < cap) {
        size_t n = glibc_rnd(&r);
        blk[nb] = malloc(n);
        BD_REQUIRE(blk[nb]);
        ((char *)blk[nb++])[0] = 1;
        live += n;
    }
    for (size_t i = 0; i < nb; i += 2) {
        free(blk[i]);
        blk[i] = NULL;
    }
    char lbl[160];
    void *p = NULL;
    ICOUNT_ON();
    for (int i = 0; i < CHURN; i++) {
        size_t j = (size_t)(bd_rand(&r) % nb);
        if (blk[j]) {
            ICOUNT(hkb_label(lbl, "glibc.free", "churn over a fragmented heap", 0), free(blk[j]));
            blk[j] = NULL;
        } else {
            size_t n = glibc_rnd(&r);
            ICOUNT(hkb_label(lbl, "glibc.malloc", "churn over a fragmented heap", 0), p = malloc(n));
            BD_REQUIRE(p);
            ((char *)p)[0] = 1;
            blk[j] = p;
        }
    }
    for (int i = 0; i < REPS; i++) {
        void *a = malloc(30000), *g = malloc(30000);
        BD_REQUIRE(a && g);
        memset(a, 1, 30000);
        BD_COUNT("glibc.realloc", "move: bytes copied", 30000, p = realloc(a, 60000));
        BD_REQUIRE(p);
        free(p);
        free(g);
    }
    /* small chunks in the fast bins, a sixteenth of the heap: each freed
     * chunk sits between two kept ones, so that nothing merges on free */
    ICOUNT_OFF();
    size_t nsmall = heap / 16 / 96;
    void **sm = calloc(nsmall * 2, sizeof *sm);
    BD_REQUIRE(sm);
    for (size_t i = 0; i < nsmall * 2; i++) BD_REQUIRE((sm[i] = malloc(24 + (i / 2 % 4) * 32)) != NULL);
    for (int k = 0; k < 2; k++) {
        ICOUNT_OFF();
        for (size_t i = (size_t)k % 2; i < nsmall * 2; i += 2) {
            free(sm[i]);
            sm[i] = NULL;
        }
        ICOUNT_ON();
        BD_COUNT("glibc.malloc", "large-bin request, fast bins full: malloc_consolidate (units: fast chunks)",
                 nsmall, p = malloc(2000));
        BD_REQUIRE(p);
        free(p);
        ICOUNT_OFF();
        for (size_t i = (size_t)k % 2; i < nsmall * 2; i += 2)
            BD_REQUIRE((sm[i] = malloc(24 + (i / 2 % 4) * 32)) != NULL);
    }
    /* a free making a chunk of 64 KiB or more with fast chunks present */
    for (int k = 0; k < 1; k++) {
        /* the big chunk first: a large-bin malloc would consolidate */
        void *big = malloc(100000), *guard = malloc(64);
        BD_REQUIRE(big && guard);
        for (size_t i = 0; i < nsmall * 2; i += 2) {
            free(sm[i]);
            sm[i] = NULL;
        }
        ICOUNT_ON();
        BD_COUNT("glibc.free",
                 "a chunk of 64 KiB or more freed, fast bins full: consolidation (units: fast chunks)",
                 nsmall, free(big));
        ICOUNT_OFF();
        free(guard);
        for (size_t i = 0; i < nsmall * 2; i += 2)
            BD_REQUIRE((sm[i] = malloc(24 + (i / 2 % 4) * 32)) != NULL);
    }
    for (size_t i = 0; i < nsmall * 2; i++) free(sm[i]);
    for (size_t i = 0; i < nb; i++) free(blk[i]);
    free(sm);
    free(blk);
}

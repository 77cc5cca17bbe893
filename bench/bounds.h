/*
 * bench/bounds.h - what the worst-case drivers share (heapkit-bounds, run
 * by bench/bounds.sh under callgrind; docs/realtime.md).
 *
 * A driver puts one allocator into the worst state for a call at one scale
 * (heap sizes 1, 16, 256, 1024 MiB for hunk, zone, cache and glibc; 10^3 ..
 * 10^6 objects for pool and gc), natively, then counts a few calls each on
 * its worst path with BD_COUNT (bench/icount.h), the instrumentation on only
 * around the counted part.
 *
 * Invariants: every driver is deterministic for its scale (seeded, no clock
 * in a counted path: the gc gets a simulated clock); every driver leaves its
 * allocator passing check and destroys it; a driver run natively (no
 * valgrind) does the same work and counts nothing, so CTest runs them all
 * at the first scale as a smoke test.
 */
#ifndef HEAPKIT_BENCH_BOUNDS_H
#define HEAPKIT_BENCH_BOUNDS_H

#include "icount.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Heap bytes at scale 1..4: 1 MiB, 16 MiB, 256 MiB, 1 GiB. */
static inline size_t bd_heap(int scale) {
    static const size_t mib[4] = {1, 16, 256, 1024};
    return mib[scale - 1] << 20;
}
/* Objects at scale 1..4: 10^3 .. 10^6. */
static inline uint32_t bd_objects(int scale) {
    uint32_t n = 1000;
    for (int i = 1; i < scale; i++) n *= 10;
    return n;
}

static inline uint64_t bd_rand(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Fails the driver (exit 1) with a message: setup must never fail. */
#define BD_REQUIRE(cond)                                                                                     \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            fprintf(stderr, "heapkit-bounds: %s:%d: %s failed\n", __FILE__, __LINE__, #cond);                \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

/* Counts `stmt` as one call of `call` on path `path` with `units` work units. */
#define BD_COUNT(call, path, units, stmt)                                                                    \
    do {                                                                                                     \
        char bd_lbl_[160];                                                                                   \
        ICOUNT(hkb_label(bd_lbl_, call, path, (size_t)(units)), stmt);                                       \
    } while (0)

/* The drivers: each takes the scale (1..4). */
void bd_hunk(int scale);
void bd_zone(int scale);
void bd_cache(int scale);
void bd_pool(int scale);
void bd_gc(int scale);
void bd_glibc(int scale);

#endif /* HEAPKIT_BENCH_BOUNDS_H */

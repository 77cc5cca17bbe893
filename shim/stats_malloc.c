/*
 * shim/stats_malloc.c - libheapkit-stats.so: counts the sizes a program asks
 * for and forwards every call to the next allocator (for `heapkit stats`,
 * libheapkit-malloc.so, which prints its zone's statistics at exit); at exit
 * prints the size histogram to stderr:
 *
 *   LD_PRELOAD=libheapkit-stats.so:libheapkit-malloc.so HEAPKIT_STATS=1 prog
 *
 * Invariants: never allocates (the report is formatted on the stack and
 * written with write(2)); counters are updated with relaxed atomic adds, so
 * threads lose no counts; a size's bucket is the bit length of the size
 * (bucket b holds sizes in [2^(b-1), 2^b), bucket 0 the size 0).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "next_malloc.inc"

#define HK_EXPORT      __attribute__((visibility("default")))
#define STATS_BUCKETS  48
enum { ST_MALLOC, ST_CALLOC, ST_REALLOC, ST_ALIGNED, ST_FREE, ST_NCALLS };

static uint64_t g_hist[STATS_BUCKETS];
static uint64_t g_bytes[STATS_BUCKETS];
static uint64_t g_calls[ST_NCALLS];

static inline void count(int call, size_t n) {
    unsigned b = n ? 64u - (unsigned)__builtin_clzll((unsigned long long)n) : 0;
    if (b >= STATS_BUCKETS) b = STATS_BUCKETS - 1;
    __atomic_fetch_add(&g_hist[b], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&g_bytes[b], n, __ATOMIC_RELAXED);
    __atomic_fetch_add(&g_calls[call], 1, __ATOMIC_RELAXED);
}

HK_EXPORT void *malloc(size_t n) {
    if (!next_ready()) return next_boot_alloc(n);
    count(ST_MALLOC, n);
    return g_next.malloc(n);
}
HK_EXPORT void *calloc(size_t c, size_t n) {
    size_t b;
    if (__builtin_mul_overflow(c, n, &b)) b = SIZE_MAX;
    if (!next_ready()) return b == SIZE_MAX ? NULL : next_boot_alloc(b);
    count(ST_CALLOC, b);
    return g_next.calloc(c, n);
}
HK_EXPORT void *realloc(void *p, size_t n) {
    if (!next_ready()) return NULL;
    if (p && next_is_boot(p)) {
        void *q = g_next.malloc(n);
        if (q) {
            size_t room = (size_t)(g_next_boot + sizeof g_next_boot - (unsigned char *)p);
            memcpy(q, p, n < room ? n : room);
        }
        return q;
    }
    count(ST_REALLOC, n);
    return g_next.realloc(p, n);
}
HK_EXPORT void *reallocarray(void *p, size_t c, size_t n) {
    size_t b;
    if (__builtin_mul_overflow(c, n, &b)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, b);
}
HK_EXPORT void free(void *p) {
    if (!p || next_is_boot(p) || !next_ready()) return;
    __atomic_fetch_add(&g_calls[ST_FREE], 1, __ATOMIC_RELAXED);
    g_next.free(p);
}
HK_EXPORT void *memalign(size_t a, size_t n) {
    if (!next_ready()) return NULL;
    count(ST_ALIGNED, n);
    return g_next.memalign(a, n);
}
HK_EXPORT void *aligned_alloc(size_t a, size_t n) {
    if (!next_ready()) return NULL;
    count(ST_ALIGNED, n);
    return g_next.aligned_alloc(a, n);
}
HK_EXPORT int posix_memalign(void **out, size_t a, size_t n) {
    if (!next_ready()) return ENOMEM;
    count(ST_ALIGNED, n);
    return g_next.posix_memalign(out, a, n);
}
HK_EXPORT void *valloc(size_t n) {
    if (!next_ready()) return NULL;
    count(ST_ALIGNED, n);
    return g_next.valloc(n);
}
HK_EXPORT void *pvalloc(size_t n) {
    if (!next_ready()) return NULL;
    count(ST_ALIGNED, n);
    return g_next.pvalloc(n);
}
HK_EXPORT size_t malloc_usable_size(void *p) {
    if (!p || next_is_boot(p) || !next_ready() || !g_next.usable_size) return 0;
    return g_next.usable_size(p);
}

static void put(const char *s, int n) {
    while (n > 0) {
        ssize_t w = write(2, s, (size_t)n);
        if (w <= 0) return;
        s += w;
        n -= (int)w;
    }
}

static const char *human(uint64_t n, char *buf, size_t bn) { /* exact units only: 1 KiB, 1023 B */
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int k = 0;
    uint64_t v = n;
    while (v >= 1024 && k < 4 && v % 1024 == 0) {
        v /= 1024;
        k++;
    }
    snprintf(buf, bn, "%llu %s", (unsigned long long)v, u[k]);
    return buf;
}

__attribute__((destructor)) static void stats_report(void) {
    uint64_t total = 0, max = 0;
    for (int i = 0; i < STATS_BUCKETS; i++) {
        total += g_hist[i];
        if (g_hist[i] > max) max = g_hist[i];
    }
    char line[256];
    int n = snprintf(line, sizeof line,
                     "heapkit: %llu allocation calls (%llu malloc, %llu calloc, %llu realloc, %llu aligned), %llu "
                     "frees; requested sizes:\n",
                     (unsigned long long)total, (unsigned long long)g_calls[ST_MALLOC],
                     (unsigned long long)g_calls[ST_CALLOC], (unsigned long long)g_calls[ST_REALLOC],
                     (unsigned long long)g_calls[ST_ALIGNED], (unsigned long long)g_calls[ST_FREE]);
    put(line, n);
    if (!total) return;
    for (int i = 0; i < STATS_BUCKETS; i++) {
        if (!g_hist[i]) continue;
        char lo[32], hi[32], bar[41];
        int w = (int)(40 * g_hist[i] / max);
        if (w == 0) w = 1;
        for (int k = 0; k < w; k++) bar[k] = '#';
        bar[w] = 0;
        if (i == 0)
            snprintf(lo, sizeof lo, "0"), snprintf(hi, sizeof hi, "0 B");
        else
            human(1ull << (i - 1), lo, sizeof lo), human((1ull << i) - 1, hi, sizeof hi);
        n = snprintf(line, sizeof line, "heapkit:   %9s .. %-11s %12llu %5.1f%%  %s\n", lo, i == 0 ? "" : hi,
                     (unsigned long long)g_hist[i], 100.0 * (double)g_hist[i] / (double)total, bar);
        put(line, n);
    }
}

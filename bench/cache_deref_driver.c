/*
 * bench/cache_deref_driver.c - suite cache's deref loops measured quietly
 * (docs/cache.md, "Issue 18"): 4096 64-byte blocks of one cache, each loop
 * summing the eight words of every block ROUNDS times, every loop in every
 * trial, and the minimum over the trials (the least disturbed run of each
 * loop on a shared machine). Sequential order, then a random order (the
 * same for every loop).
 *
 * Loops: the raw pointers; a table of raw pointers indexed by the handle's
 * index, without any check (the floor of any handle table: its one extra
 * dependent load); hk_cache_deref_fast; hk_cache_reader_deref. Every loop
 * has the same shape: an index from order[], an element of a per-block
 * array (pointer or handle), the block's words.
 *
 *   heapkit-cache-deref [TRIALS]     (default 200)
 */
#define _POSIX_C_SOURCE 200809L
#include "heapkit/cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N      4096
#define ROUNDS 50

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static inline uint64_t sum64(const uint64_t *p) {
    return p[0] + p[1] + p[2] + p[3] + p[4] + p[5] + p[6] + p[7];
}

static void quiet(const hk_error *e, void *u) {
    (void)e;
    (void)u;
}

/* The empty asm after each round keeps the compiler from folding rounds
 * together (the sums do not change between rounds). */
#define ROUND_END(a) __asm__ volatile("" : "+r"(a) : : "memory")

__attribute__((noinline)) static uint64_t loop_raw(uint64_t *const *ptrs, const uint32_t *order) {
    uint64_t a = 0;
    for (int k = 0; k < ROUNDS; k++) {
        for (int i = 0; i < N; i++) a += sum64(ptrs[order[i]]);
        ROUND_END(a);
    }
    return a;
}

__attribute__((noinline)) static uint64_t loop_table(uint64_t *const *table, uint32_t mask,
                                                     const hk_cache_handle *hs, const uint32_t *order) {
    uint64_t a = 0;
    for (int k = 0; k < ROUNDS; k++) {
        for (int i = 0; i < N; i++) a += sum64(table[hs[order[i]].value & mask]);
        ROUND_END(a);
    }
    return a;
}

__attribute__((noinline)) static uint64_t loop_fast(hk_cache *c, const hk_cache_handle *hs,
                                                    const uint32_t *order) {
    uint64_t a = 0;
    for (int k = 0; k < ROUNDS; k++) {
        for (int i = 0; i < N; i++) a += sum64(hk_cache_deref_fast(c, hs[order[i]]));
        ROUND_END(a);
    }
    return a;
}

__attribute__((noinline)) static uint64_t loop_reader(hk_cache *c, const hk_cache_handle *hs,
                                                      const uint32_t *order) {
    uint64_t a = 0;
    hk_cache_reader r = hk_cache_reader_of(c);
    for (int k = 0; k < ROUNDS; k++) {
        for (int i = 0; i < N; i++) a += sum64(hk_cache_reader_deref(&r, hs[order[i]]));
        ROUND_END(a);
    }
    return a;
}

int main(int argc, char **argv) {
    int trials = argc > 1 ? atoi(argv[1]) : 200;
    if (trials < 1) trials = 1;
    hk_cache *c = hk_cache_create(
        &(hk_cache_desc){.size = 4u << 20, .max_handles = N, .flags = HK_FLAG_QUIET, .on_error = quiet});
    hk_cache_handle *hs = malloc(N * sizeof *hs);
    uint64_t **ptrs = malloc(N * sizeof *ptrs), **table = calloc(2 * N, sizeof *table);
    uint32_t *order = malloc(N * sizeof *order);
    if (!c || !hs || !ptrs || !table || !order) return 1;
    for (int i = 0; i < N; i++) {
        hs[i] = hk_cache_alloc(c, 64, "d");
        ptrs[i] = hk_cache_deref(c, hs[i]);
        if (!ptrs[i]) return 1;
        for (int k = 0; k < 8; k++) ptrs[i][k] = (uint64_t)(i + k);
        table[hs[i].value & (2 * N - 1)] = ptrs[i];
        order[i] = (uint32_t)i;
    }
    uint64_t seed = 12345, sink = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass)
            for (int i = N - 1; i > 0; i--) {
                seed = seed * 6364136223846793005u + 1442695040888963407u;
                uint32_t j = (uint32_t)((seed >> 33) % (uint64_t)(i + 1)), t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
        double best[4] = {1e9, 1e9, 1e9, 1e9};
        for (int t = 0; t < trials; t++) {
            uint64_t t0 = now_ns();
            sink += loop_raw(ptrs, order);
            uint64_t t1 = now_ns();
            sink += loop_table(table, 2 * N - 1, hs, order);
            uint64_t t2 = now_ns();
            sink += loop_fast(c, hs, order);
            uint64_t t3 = now_ns();
            sink += loop_reader(c, hs, order);
            uint64_t t4 = now_ns();
            double n = (double)ROUNDS * N, d[4] = {(double)(t1 - t0) / n, (double)(t2 - t1) / n,
                                                   (double)(t3 - t2) / n, (double)(t4 - t3) / n};
            for (int k = 0; k < 4; k++)
                if (d[k] < best[k]) best[k] = d[k];
        }
        printf(
            "%-10s raw %.3f  table-no-check %.3f (%.2fx)  deref_fast %.3f (%.2fx)  reader %.3f (%.2fx)  ns\n",
            pass ? "random" : "sequential", best[0], best[1], best[1] / best[0], best[2], best[2] / best[0],
            best[3], best[3] / best[0]);
    }
    int ok = hk_cache_check(c) == HK_OK && sink != 0;
    hk_cache_destroy(c);
    free(hs);
    free(ptrs);
    free(table);
    free(order);
    return ok ? 0 : 1;
}

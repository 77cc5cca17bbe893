/*
 * bench/rss_scenario.h - the "memory given back" scenario of issue 21 §4,
 * with plain malloc/free, for whatever malloc the process has (run it under
 * LD_PRELOAD): allocate `count` blocks of `size` bytes (each written),
 * free them all, then idle for `idle_ms` while making one small
 * malloc/free every 50 ms; then call malloc_trim(0); then place four
 * `big`-byte blocks (each written whole). Resident memory (VmRSS) is read
 * at each step. Used by suite trim (bench/suite_trim.c) and by the preload
 * test (tests/zone_trim_prog.c), so both measure exactly the same thing.
 *
 * Header-only (static functions); needs glibc's malloc_trim declaration.
 */
#ifndef HEAPKIT_BENCH_RSS_SCENARIO_H
#define HEAPKIT_BENCH_RSS_SCENARIO_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* nanosleep, malloc_trim: include this header first */
#endif

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proc_mem.h"

typedef struct rss_params {
    size_t count, size; /* the small blocks */
    unsigned idle_ms;   /* idle time after freeing them */
    size_t big;         /* the size of each of the four large blocks */
} rss_params;

typedef struct rss_result {
    double base_kib; /* resident before the small blocks */
    double peak_kib; /* with every small block live */
    double idle_kib; /* after freeing them and idling */
    double trim_kib; /* after malloc_trim(0) */
    double big_kib;  /* with the four large blocks placed and written */
    double idle_pct; /* idle_kib / peak_kib, in percent */
    double trim_pct; /* trim_kib / peak_kib */
    double big_pct;  /* big_kib / peak_kib (<= 100: they fit without growing past the peak) */
    int ok;          /* every allocation succeeded */
} rss_result;

/* Resident memory of this process in KiB, or -1. */
static double rss_kib(void) { return (double)hkb_proc_kib("VmRSS:"); }

static void rss_sleep_ms(unsigned ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Runs the scenario; fills *out. The pointer table itself is allocated
 * with the small blocks (and freed with them). */
static void rss_scenario(const rss_params *p, rss_result *out) {
    memset(out, 0, sizeof *out);
    out->base_kib = rss_kib();
    void **tab = (void **)malloc(p->count * sizeof *tab);
    if (!tab) return;
    for (size_t i = 0; i < p->count; i++) {
        tab[i] = malloc(p->size);
        if (!tab[i]) return;
        memset(tab[i], (int)(i & 0xff), p->size);
    }
    out->peak_kib = rss_kib();
    for (size_t i = 0; i < p->count; i++) free(tab[i]);
    free(tab);
    for (unsigned t = 0; t < p->idle_ms; t += 50) {
        rss_sleep_ms(50);
        volatile char *s = (volatile char *)malloc(48);
        if (!s) return;
        s[0] = 1;
        free((void *)s);
    }
    out->idle_kib = rss_kib();
    malloc_trim(0);
    out->trim_kib = rss_kib();
    void *big[4];
    for (int i = 0; i < 4; i++) {
        big[i] = malloc(p->big);
        if (!big[i]) return;
        memset(big[i], 0x5a, p->big);
    }
    out->big_kib = rss_kib();
    for (int i = 0; i < 4; i++) free(big[i]);
    out->idle_pct = 100.0 * out->idle_kib / out->peak_kib;
    out->trim_pct = 100.0 * out->trim_kib / out->peak_kib;
    out->big_pct = 100.0 * out->big_kib / out->peak_kib;
    out->ok = out->base_kib > 0 && out->peak_kib > 0;
}

#endif /* HEAPKIT_BENCH_RSS_SCENARIO_H */

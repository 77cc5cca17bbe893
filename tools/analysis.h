/*
 * tools/analysis.h - what a trace says about a program's memory: totals,
 * peak, live bytes over time (total and per allocation site), per-site
 * figures, size and lifetime histograms, blocks still live at the end.
 * Used by `heapkit record` (its summary), `report`, `map` and the tests.
 */
#ifndef HEAPKIT_TOOLS_ANALYSIS_H
#define HEAPKIT_TOOLS_ANALYSIS_H

#include "trace.h"

#define HKA_SIZE_BUCKETS 48 /* bucket b: sizes in [2^(b-1), 2^b), bucket 0: size 0 */
#define HKA_LIFE_BUCKETS 12 /* bucket b: lifetimes in [10^b, 10^(b+1)) ns; last: never freed */
#define HKA_CURVE_POINTS 600
#define HKA_TOP_CURVES   5

/* Figures of one allocation site (one distinct stack). */
typedef struct hka_site {
    uint32_t stack;
    uint64_t allocs;      /* blocks allocated here (realloc results included) */
    uint64_t bytes;       /* bytes requested here in total */
    uint64_t live, peak;  /* live bytes now (during the scan) and their maximum */
    uint64_t temporary;   /* blocks freed before their thread's next allocation */
    uint64_t leaked;      /* bytes still live at the end */
    uint64_t leaked_blocks;
    uint64_t at_peak;     /* live bytes of this site at the trace's peak */
} hka_site;

typedef struct hka {
    uint64_t allocs, frees, reallocs, bytes_allocated;
    uint64_t peak_live, peak_blocks; /* the trace's peak live bytes, and blocks live then */
    uint64_t peak_ts;
    size_t peak_event;               /* index of the event that reached the peak */
    uint64_t end_live, end_blocks;   /* still live after the last event */
    uint64_t temporary;
    uint64_t size_hist[HKA_SIZE_BUCKETS];
    uint64_t life_hist[HKA_LIFE_BUCKETS];
    /* live bytes over time: HKA_CURVE_POINTS buckets of equal time, each the
     * maximum in its bucket; for the total and the top sites by peak */
    uint64_t curve_t[HKA_CURVE_POINTS];
    uint64_t curve[HKA_CURVE_POINTS];
    uint64_t site_curve[HKA_TOP_CURVES][HKA_CURVE_POINTS];
    uint32_t curve_sites[HKA_TOP_CURVES]; /* index into sites; count in ncurve_sites */
    int ncurve_sites;
    hka_site *sites; /* one per stack: sites[i].stack == i */
    uint32_t nsites;
} hka;

/* Scans the trace. Returns 0, or -1 when out of memory. */
int hka_analyze(const hkt_trace *t, hka *out);
void hka_free(hka *a);

/* Site indices sorted by a figure, largest first (at most max; returns the count). */
typedef enum hka_order { HKA_BY_PEAK, HKA_BY_COUNT, HKA_BY_TEMPORARY, HKA_BY_LEAKED } hka_order;
size_t hka_top_sites(const hka *a, hka_order by, uint32_t *out, size_t max);

/* "1.5 MiB", "312 B": bytes for people. */
const char *hka_bytes(uint64_t n, char *buf, size_t bufn);

#endif /* HEAPKIT_TOOLS_ANALYSIS_H */

/*
 * bench/harness.h - the benchmark driver's shared machinery.
 *
 * A suite is one file bench/suite_<name>.c defining
 *     void hkb_suite_<name>(hkb_ctx *ctx);
 * CMake finds the file and registers the suite; `heapkit-bench` runs every
 * suite (or those named with --suite) and writes results.json.
 *
 * Rules every suite follows:
 *  - time with hkb_now_ns() over ctx->reps repetitions and record the
 *    median (hkb_median);
 *  - run the peers from hkb_peers() in the same process; a peer that is not
 *    installed is reported with hkb_skip(), never left out silently;
 *  - record every figure with hkb_record(), and ratios as metric "ratio_vs_X";
 *  - keep each suite's default run under about a minute; --quick shrinks it.
 */
#ifndef HEAPKIT_BENCH_HARNESS_H
#define HEAPKIT_BENCH_HARNESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct hkb_ctx {
    int reps;      /* repetitions per measurement (median taken); default 5, quick 3 */
    int quick;     /* 1: smaller workloads (CI smoke run) */
    uint64_t seed; /* random seed for workloads */
} hkb_ctx;

/* A malloc-compatible allocator under test. `memalign` and `usable_size`
 * may be NULL when the allocator has none. */
typedef struct hkb_allocator {
    const char *name;
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*realloc)(void *, size_t);
    void *(*memalign)(size_t align, size_t size);
    size_t (*usable_size)(void *);
} hkb_allocator;

/* The allocators every suite compares against: glibc first, then mimalloc,
 * jemalloc and tcmalloc when their shared libraries load with dlopen.
 * Returns the count; *out points to static storage. */
int hkb_peers(const hkb_allocator **out);

/* Runs this bench again as a child (execv of /proc/self/exe with argv, its
 * stdout sent to /dev/null, LD_PRELOAD set to `preload` unless NULL) that
 * writes n bytes of result to the pipe pfd[1]; reads them into out. Closes
 * both ends of pfd. 1 when the child sent all n bytes and exited 0. */
int hkb_run_child(char **argv, int pfd[2], const char *preload, void *out, size_t n);

/* The peers that could not be loaded, with the reason (for hkb_skip). */
int hkb_missing_peers(const char ***names, const char ***reasons);

/* Records the missing peers as skipped for (suite, workload). */
void hkb_skip_missing(const char *suite, const char *workload);

/* The path of libheapkit-malloc.so for the suites that preload it: the
 * HKB_HEAPKIT_MALLOC environment variable, else the one built with the
 * bench, else NULL. */
const char *hkb_shim_path(void);

uint64_t hkb_now_ns(void);
double hkb_median(double *values, int n);                  /* sorts values in place */
double hkb_percentile(double *values, size_t n, double p); /* sorts in place; p in [0,100] */

/* Records one figure: printed as a table row and written to results.json. */
void hkb_record(const char *suite, const char *workload, const char *allocator, const char *metric,
                double value, const char *unit);

/* Records that an allocator was not measured for a workload, and why. */
void hkb_skip(const char *suite, const char *workload, const char *allocator, const char *why);

/* Prints a heading for a workload's table. */
void hkb_section(const char *suite, const char *workload, const char *what);

/* xorshift64* random numbers for workloads (deterministic from the seed). */
static inline uint64_t hkb_rand(uint64_t *s) {
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* Keeps the optimizer from deleting a computation. */
static inline void hkb_sink(void *p) { __asm__ volatile("" : : "g"(p) : "memory"); }

#endif /* HEAPKIT_BENCH_HARNESS_H */

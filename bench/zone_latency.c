/*
 * bench/zone_latency.c - suite zone's latency workload: per-operation time at
 * heap sizes 1 MiB .. 1 GiB, each allocator in a process of its own.
 *
 * Latency, the noise filter. On a shared machine every allocator's raw max
 * is tens to hundreds of us: timer interrupts and preemption, not the
 * allocator. So each allocator runs the same deterministic sequence (same
 * seed, fill, warm-up and timed churn; the warm-up length the first replay
 * reached within its time budget is repeated exactly) R times on one
 * instance of the subject, in a process of its own (this program started
 * again for that allocator and heap size: no allocator inherits the state
 * that earlier workloads left in glibc's heap, which the whole bench
 * shares): R = 5 at heaps up to 16 MiB, 3 at 256 MiB and
 * 1 GiB, 3 with --quick. Each timed operation's time is kept per replay
 * (free and malloc separately) and the filtered series is, per operation
 * index, the minimum over the R replays: an interrupt or a preemption hits
 * a random operation and drops out, a cost the allocator pays at the same
 * operation every time (a syscall, a page fault, a long merge, a trim)
 * stays. filtered_p99, filtered_p99.99 and filtered_max come from that
 * series; only the operations reached in every replay take part
 * (filtered_samples; the 4 s budget can stop the rover early). Every
 * replay frees all it allocated, and the next one reuses the same instance
 * (the zone, the rover, or a peer's process-wide heap), so page faults an
 * allocator takes only while first reaching its footprint drop out of the
 * filtered figures, for every allocator alike (filtered_faulting_ops counts
 * the ops that faulted in every replay; filtered_nofault_* leaves those
 * out). The raw
 * figures (p99, max, nofault_*) are medians over the first min(reps, 3)
 * replays (1 at 256 MiB and 1 GiB), as before the filter was added.
 * Operations are timed with rdtscp (calibrated against clock_gettime over
 * 20 ms) where the TSC is invariant, else with hkb_now_ns; every figure
 * includes one timer read, whose cost is recorded as timer_overhead.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "zone_bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#define HKB_HAVE_TSC 1
#endif

#define SUITE "zone"

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The per-operation timer. clock_gettime costs some 20 ns here; on x86 with
 * rdtscp and an invariant TSC the time-stamp counter is read instead (rdtscp
 * waits for the operation before it to finish, the lfence after it keeps the
 * next one from starting early), converted to ns with a rate calibrated
 * against hkb_now_ns over 20 ms. Elsewhere, or when the two 10 ms halves of
 * the calibration disagree, hkb_now_ns is the timer. */
static double g_tick_ns;        /* ns per tick: 0 until lat_timer_init, 1 for hkb_now_ns */
static int g_tsc;               /* 1: the TSC is the timer */
static double g_timer_overhead; /* ns: median of back-to-back reads */

static inline uint64_t lat_ticks(void) {
#ifdef HKB_HAVE_TSC
    if (g_tsc) {
        unsigned aux;
        uint64_t t = __rdtscp(&aux);
        _mm_lfence();
        return t;
    }
#endif
    return hkb_now_ns();
}

/* ns between two lat_ticks() readings. */
static inline double lat_ns(uint64_t t0, uint64_t t1) { return (double)(t1 - t0) * g_tick_ns; }

#ifdef HKB_HAVE_TSC
/* A TSC reading and the hkb_now_ns reading taken in the middle of the
 * tightest of a few brackets (a preemption inside a bracket is left out). */
static void tsc_pair(uint64_t *tsc, uint64_t *ns) {
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 9; i++) {
        unsigned aux;
        uint64_t a = __rdtscp(&aux);
        uint64_t n = hkb_now_ns();
        uint64_t b = __rdtscp(&aux);
        if (b - a < best) {
            best = b - a;
            *tsc = a + (b - a) / 2;
            *ns = n;
        }
    }
}
#endif

static void lat_timer_init(void) {
    if (g_tick_ns > 0) return;
    g_tick_ns = 1;
#ifdef HKB_HAVE_TSC
    unsigned a, b, c, e;
    if (__get_cpuid(0x80000001, &a, &b, &c, &e) && (e & (1u << 27)) && /* rdtscp */
        __get_cpuid(0x80000007, &a, &b, &c, &e) && (e & (1u << 8))) {  /* invariant TSC */
        uint64_t c0 = 0, n0 = 0, c1 = 0, n1 = 0, c2 = 0, n2 = 0;
        tsc_pair(&c0, &n0);
        while (hkb_now_ns() < n0 + 10000000u) continue;
        tsc_pair(&c1, &n1);
        while (hkb_now_ns() < n1 + 10000000u) continue;
        tsc_pair(&c2, &n2);
        double r1 = (double)(n1 - n0) / (double)(c1 - c0), r2 = (double)(n2 - n1) / (double)(c2 - c1);
        if (c1 > c0 && c2 > c1 && fabs(r1 - r2) <= 0.002 * r2) {
            g_tick_ns = (double)(n2 - n0) / (double)(c2 - c0);
            g_tsc = 1;
        }
    }
#endif
    double d[1001];
    for (int i = 0; i < 1001; i++) {
        uint64_t t0 = lat_ticks();
        uint64_t t1 = lat_ticks();
        d[i] = lat_ns(t0, t1);
    }
    g_timer_overhead = hkb_median(d, 1001);
}

/* Writes one byte in every page of the n-byte block p, as a program that
 * uses its memory does. Touching only the first byte would leave the
 * inside of big blocks unfaulted, and an allocator whose placement differs
 * from one replay to the next would then keep finding fresh pages inside
 * its own footprint in every replay. */
static void lat_touch(void *p, size_t n) {
    unsigned char *c = p;
    size_t page = hk_page_size();
    for (size_t o = 0; o < n; o += page) c[o] = 1;
    c[n - 1] = 1;
}

/* One replay of the latency sequence on the open subject: fill to
 * `heap` live bytes (blocks of 16 B - 64 KiB), untimed warm-up churn, then
 * up to `limit` timed operations: free a random block, allocate a random
 * size. lat[i] gets operation i's time (ns; even i a malloc, odd i the free
 * before it) and faulted[i] whether a page fault happened inside the call.
 * *warm is the number of warm-up iterations: 0 on entry means as many as
 * the 2 s budget allows (the rover can take long) and is set to the number
 * done, so that the next replays repeat exactly the same sequence. Returns
 * the number of operations timed (fewer than `limit` when the 4 s budget ran
 * out). */
static size_t lat_replay(const subject *s, size_t heap, uint64_t seed, void **blk, size_t maxblocks,
                         size_t warm_max, size_t *warm, size_t limit, double *lat, unsigned char *faulted) {
    uint64_t r = seed;
    const hkb_allocator *a = &s->a;
    size_t nb = 0, live = 0;
    while (live < heap && nb < maxblocks) {
        size_t n = (size_t)rnd_logu(&r, 16, 65536);
        blk[nb] = a->malloc(n);
        if (!blk[nb]) exit(1);
        lat_touch(blk[nb++], n);
        live += n;
    }
    /* warm-up churn (untimed) so that every allocator runs on memory it
     * already has from the OS */
    size_t nwarm = *warm ? *warm : warm_max;
    uint64_t budget = hkb_now_ns() + (uint64_t)2e9;
    for (size_t w = 0; w < nwarm; w++) {
        size_t j = (size_t)(hkb_rand(&r) % nb);
        a->free(blk[j]);
        size_t n = (size_t)rnd_logu(&r, 16, 65536);
        blk[j] = a->malloc(n);
        if (!blk[j]) exit(1);
        lat_touch(blk[j], n);
        if (!*warm && (w & 1023) == 0 && hkb_now_ns() > budget) nwarm = w + 1;
    }
    *warm = nwarm;
    /* Each operation's page faults are counted (outside the timed window)
     * so that the figures can also be given without the operations that
     * took one: a first touch of fresh memory costs the same whichever
     * allocator asked for it. */
    budget = hkb_now_ns() + (uint64_t)4e9;
    size_t i;
    long f0 = lat_faults();
    for (i = 0; i < limit; i++) {
        size_t j = (size_t)(hkb_rand(&r) % nb);
        size_t n = (size_t)rnd_logu(&r, 16, 65536);
        uint64_t t0 = lat_ticks();
        a->free(blk[j]);
        uint64_t t1 = lat_ticks();
        long f1 = lat_faults();
        uint64_t t2 = lat_ticks();
        void *p = a->malloc(n);
        uint64_t t3 = lat_ticks();
        long f2 = lat_faults();
        if (!p) exit(1);
        lat_touch(p, n); /* a fault here is the program's, not the allocator's */
        blk[j] = p;
        lat[i] = lat_ns(t2, t3);
        faulted[i] = f2 != f1;
        if (i + 1 < limit) {
            lat[++i] = lat_ns(t0, t1);
            faulted[i] = f1 != f0;
        }
        f0 = lat_faults();
        if (((i + 1) & 1023) == 0 && hkb_now_ns() > budget) {
            i++;
            break;
        }
    }
    for (size_t q = 0; q < nb; q++) a->free(blk[q]);
    return i;
}

/* p99, p99.99 and max of v[0..n) (sorted in place), as in the raw figures. */
static void lat_stats(double *v, size_t n, double *p99, double *p9999, double *mx) {
    qsort(v, n, sizeof(double), cmp_dbl);
    *p99 = v[(size_t)(0.99 * (double)(n - 1))];
    *p9999 = v[(size_t)(0.9999 * (double)(n - 1))];
    *mx = v[n - 1];
}

/* What one allocator's latency replays at one heap size give (computed in
 * the process that ran them, read by the parent). */
typedef struct lat_out {
    double p99[3], p9999[3], mx[3], c99[3], c9999[3], cmx[3], faulted[3];
    double fp99, fp9999, fmx, fn99, fn9999, fnmx;
    size_t rawtaken, common, nall;
    int ok;
} lat_out;

/* Runs R replays of the latency sequence on subject s at `heap` live
 * bytes (one instance for all of them) and computes the raw figures over
 * the first `reps` and the filtered ones over all R. */
static void lat_subject(const subject *s, size_t heap, uint64_t seed, size_t samples, int R, int reps,
                        lat_out *o) {
    memset(o, 0, sizeof *o);
    double *lat = malloc((size_t)R * samples * sizeof(double)); /* one row per replay */
    unsigned char *fl = malloc(samples), *flall = malloc(samples);
    double *work = malloc(samples * sizeof(double)), *clean = malloc(samples * sizeof(double));
    size_t maxblocks = ((size_t)1 << 30) / 4000 + 1000;
    void **blk = malloc(maxblocks * sizeof(void *));
    if (!lat || !fl || !flall || !work || !clean || !blk) exit(1);
    size_t warm = 0, common = samples, rawtaken = samples;
    /* one instance for all R replays (each ends with no live block): from
     * the second replay on, every allocator works on memory it already
     * has, as the peers' process-wide heaps do */
    subject_open(s, heap * 2 + ((size_t)64 << 20));
    for (int k = 0; k < R; k++) {
        double *lk = lat + (size_t)k * samples;
        size_t taken =
            lat_replay(s, heap, seed, blk, maxblocks, samples / 2, &warm, common, lk, k ? fl : flall);
        if (taken < common) common = taken;
        if (k) {
            for (size_t i = 0; i < common; i++) flall[i] &= fl[i];
        }
        if (k < reps) {
            const unsigned char *fk = k ? fl : flall;
            size_t nf = 0;
            if (taken < rawtaken) rawtaken = taken;
            for (size_t i = 0; i < taken; i++) {
                work[i] = lk[i];
                if (!fk[i]) clean[nf++] = lk[i];
            }
            lat_stats(work, taken, &o->p99[k], &o->p9999[k], &o->mx[k]);
            o->faulted[k] = (double)(taken - nf);
            if (nf) lat_stats(clean, nf, &o->c99[k], &o->c9999[k], &o->cmx[k]);
        }
    }
    subject_close(s);
    /* the filtered figures: each operation's minimum over the R replays */
    size_t nall = 0;
    for (size_t i = 0; i < common; i++) {
        double m = lat[i];
        for (int k = 1; k < R; k++)
            if (lat[(size_t)k * samples + i] < m) m = lat[(size_t)k * samples + i];
        work[i] = m;
        nall += flall[i];
    }
    /* and without the ops that took a page fault in every replay */
    size_t ncl = 0;
    for (size_t i = 0; i < common; i++)
        if (!flall[i]) clean[ncl++] = work[i];
    lat_stats(work, common, &o->fp99, &o->fp9999, &o->fmx);
    if (ncl) lat_stats(clean, ncl, &o->fn99, &o->fn9999, &o->fnmx);
    o->rawtaken = rawtaken;
    o->common = common;
    o->nall = nall;
    o->ok = 1;
    free(clean);
    free(work);
    free(flall);
    free(fl);
    free(lat);
    free(blk);
}

/* Each allocator's replays run in a fresh process (this program run again
 * with --zone-latency-child), so that no allocator's state depends on what
 * ran before it: glibc, whose heap the rest of the bench shares, behaves
 * differently in a process that has already allocated and freed other
 * memory (see docs/zone.md). The timer calibration is passed along so that
 * every process converts ticks alike. Returns 0 when the child could not be
 * run (the caller then measures in this process and says so). */
static int lat_subject_fresh(const subject *s, size_t heap, uint64_t seed, size_t samples, int R, int reps,
                             lat_out *o) {
    int pfd[2];
    if (pipe(pfd) != 0) return 0;
    char a_fd[16], a_heap[32], a_seed[32], a_samples[32], a_r[16], a_reps[16], a_tick[64], a_tsc[8];
    snprintf(a_fd, sizeof a_fd, "%d", pfd[1]);
    snprintf(a_heap, sizeof a_heap, "%zu", heap);
    snprintf(a_seed, sizeof a_seed, "%llu", (unsigned long long)seed);
    snprintf(a_samples, sizeof a_samples, "%zu", samples);
    snprintf(a_r, sizeof a_r, "%d", R);
    snprintf(a_reps, sizeof a_reps, "%d", reps);
    snprintf(a_tick, sizeof a_tick, "%a", g_tick_ns);
    snprintf(a_tsc, sizeof a_tsc, "%d", g_tsc);
    char *argv[] = {"heapkit-bench",
                    "--zone-latency-child",
                    a_fd,
                    (char *)s->a.name,
                    a_heap,
                    a_seed,
                    a_samples,
                    a_r,
                    a_reps,
                    a_tick,
                    a_tsc,
                    NULL};
    return hkb_run_child(argv, pfd, NULL, o, sizeof *o) && o->ok;
}

int hkb_zone_latency_child(int argc, char **argv);
int hkb_zone_latency_child(int argc, char **argv) {
    if (argc != 11) return 2;
    int fd = atoi(argv[2]);
    const char *name = argv[3];
    size_t heap = (size_t)strtoull(argv[4], NULL, 10);
    uint64_t seed = strtoull(argv[5], NULL, 10);
    size_t samples = (size_t)strtoull(argv[6], NULL, 10);
    int R = atoi(argv[7]), reps = atoi(argv[8]);
    g_tick_ns = strtod(argv[9], NULL);
    g_tsc = atoi(argv[10]);
    if (R < 1 || R > 5 || reps < 1 || reps > 3 || !samples || !(g_tick_ns > 0)) return 2;
    subject subj[10];
    int nsub = subjects(subj, SUBJ_SET_LATENCY);
    for (int s = 0; s < nsub; s++) {
        if (strcmp(subj[s].a.name, name)) continue;
        lat_out o;
        lat_subject(&subj[s], heap, seed, samples, R, reps, &o);
        size_t put = 0;
        while (put < sizeof o) {
            ssize_t n = write(fd, (const char *)&o + put, sizeof o - put);
            if (n <= 0) return 1;
            put += (size_t)n;
        }
        return 0;
    }
    fprintf(stderr, "heapkit-bench: no latency subject named %s\n", name);
    return 1;
}

void workload_latency(hkb_ctx *ctx) {
    hkb_section(SUITE, "latency",
                "per-operation time at heap sizes 1 MiB .. 1 GiB (ns; timer overhead included); "
                "filtered_*: each op's minimum over 3-5 replays of the same sequence (drops interrupts); "
                "each allocator in a fresh process");
    lat_timer_init();
    hkb_record(SUITE, "latency", "timer", "timer_overhead", g_timer_overhead,
               g_tsc ? "ns (rdtscp; median back-to-back, in every figure)"
                     : "ns (clock_gettime; median back-to-back, in every figure)");
    if (g_tsc)
        hkb_record(SUITE, "latency", "timer", "tsc_GHz", 1.0 / g_tick_ns,
                   "GHz (calibrated vs clock_gettime)");
    size_t heaps[] = {(size_t)1 << 20, (size_t)16 << 20, (size_t)256 << 20, (size_t)1 << 30};
    int nheaps = ctx->quick ? 2 : 4;
    subject subj[10];
    int nsub = subjects(subj, SUBJ_SET_LATENCY);
    size_t samples = ctx->quick ? 20000 : 100000;
    double zmax[4] = {0, 0, 0, 0}, znmax[4] = {0, 0, 0, 0};
    double fmax[10][4], f99[10][4];
    for (int h = 0; h < nheaps; h++) {
        double gmax = 0, gnmax = 0, gfmax = 0, zfmax = 0;
        int big = heaps[h] >= ((size_t)256 << 20);
        for (int s = 0; s < nsub; s++) {
            /* the raw figures: medians over the first `reps` replays (as before
             * the filtered figures were added); the filtered ones: all R */
            int reps = ctx->reps < 3 ? ctx->reps : 3;
            if (big) reps = 1;
            int R = big || ctx->quick ? 3 : 5;
            if (R < reps) R = reps;
            uint64_t seed = ctx->seed + (uint64_t)h * 7919;
            lat_out o;
            char wl[48];
            snprintf(wl, sizeof wl, "latency_%zuMiB", heaps[h] >> 20);
            if (!lat_subject_fresh(&subj[s], heaps[h], seed, samples, R, reps, &o)) {
                printf("zone: %s at %s could not run in a fresh process; measured in this one\n",
                       subj[s].a.name, wl);
                lat_subject(&subj[s], heaps[h], seed, samples, R, reps, &o);
                hkb_record(SUITE, wl, subj[s].a.name, "in_bench_process", 1, "(not a fresh process)");
            }
            double m99 = hkb_median(o.p99, reps), m9999 = hkb_median(o.p9999, reps),
                   mmax = hkb_median(o.mx, reps);
            hkb_record(SUITE, wl, subj[s].a.name, "p99", m99, "ns");
            hkb_record(SUITE, wl, subj[s].a.name, "p99.99", m9999, "ns");
            hkb_record(SUITE, wl, subj[s].a.name, "max", mmax, "ns");
            double n99 = hkb_median(o.c99, reps), n9999 = hkb_median(o.c9999, reps),
                   nmax = hkb_median(o.cmx, reps);
            hkb_record(SUITE, wl, subj[s].a.name, "faulting_ops", hkb_median(o.faulted, reps),
                       "ops with a page fault inside the allocator call");
            hkb_record(SUITE, wl, subj[s].a.name, "nofault_p99", n99, "ns (ops without a page fault)");
            hkb_record(SUITE, wl, subj[s].a.name, "nofault_p99.99", n9999, "ns");
            hkb_record(SUITE, wl, subj[s].a.name, "nofault_max", nmax, "ns");
            if (o.rawtaken < samples)
                hkb_record(SUITE, wl, subj[s].a.name, "samples", (double)o.rawtaken, "ops (time budget)");
            char unit[64];
            snprintf(unit, sizeof unit, "ns (per-op minimum over %d replays)", R);
            hkb_record(SUITE, wl, subj[s].a.name, "filtered_p99", o.fp99, unit);
            hkb_record(SUITE, wl, subj[s].a.name, "filtered_p99.99", o.fp9999, unit);
            hkb_record(SUITE, wl, subj[s].a.name, "filtered_max", o.fmx, unit);
            hkb_record(SUITE, wl, subj[s].a.name, "filtered_samples", (double)o.common,
                       "ops timed in every replay");
            hkb_record(SUITE, wl, subj[s].a.name, "filtered_faulting_ops", (double)o.nall,
                       "ops with a page fault in every replay");
            hkb_record(SUITE, wl, subj[s].a.name, "filtered_nofault_p99", o.fn99,
                       "ns (filtered, ops faulting in every replay left out)");
            hkb_record(SUITE, wl, subj[s].a.name, "filtered_nofault_max", o.fnmx, "ns");
            fmax[s][h] = o.fmx;
            f99[s][h] = o.fp99;
            if (subj[s].kind == SUBJ_ZONE) {
                zmax[h] = mmax;
                znmax[h] = nmax;
                zfmax = o.fmx;
            }
            if (!strcmp(subj[s].a.name, "glibc")) {
                gmax = mmax;
                gnmax = nmax;
                gfmax = o.fmx;
            }
        }
        char wl[48];
        snprintf(wl, sizeof wl, "latency_%zuMiB", heaps[h] >> 20);
        if (gmax > 0)
            hkb_record(SUITE, wl, "zone", "max_ratio_vs_glibc", gmax / zmax[h], "x (glibc max / zone max)");
        if (gnmax > 0 && znmax[h] > 0)
            hkb_record(SUITE, wl, "zone", "nofault_max_ratio_vs_glibc", gnmax / znmax[h],
                       "x (glibc max / zone max, ops without a page fault)");
        if (gfmax > 0 && zfmax > 0)
            hkb_record(SUITE, wl, "zone", "filtered_max_ratio_vs_glibc", gfmax / zfmax,
                       "x (glibc filtered max / zone filtered max)");
        hkb_skip_missing(SUITE, wl);
    }
    if (nheaps > 1 && zmax[0] > 0)
        hkb_record(SUITE, "latency", "zone", "max_growth_largest_vs_1MiB", zmax[nheaps - 1] / zmax[0],
                   "x (zone max at the largest heap / at 1 MiB)");
    if (nheaps > 1 && znmax[0] > 0)
        hkb_record(SUITE, "latency", "zone", "nofault_max_growth_largest_vs_1MiB",
                   znmax[nheaps - 1] / znmax[0], "x (same, ops without a page fault)");
    for (int s = 0; nheaps > 1 && s < nsub; s++) {
        if (fmax[s][0] > 0)
            hkb_record(SUITE, "latency", subj[s].a.name, "filtered_max_growth_largest_vs_1MiB",
                       fmax[s][nheaps - 1] / fmax[s][0], "x (filtered max at the largest heap / at 1 MiB)");
        if (f99[s][0] > 0)
            hkb_record(SUITE, "latency", subj[s].a.name, "filtered_p99_growth_largest_vs_1MiB",
                       f99[s][nheaps - 1] / f99[s][0], "x (filtered p99 at the largest heap / at 1 MiB)");
    }
}

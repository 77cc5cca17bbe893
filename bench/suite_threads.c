/*
 * bench/suite_threads.c - allocators under threads: 1, 2 and 4 threads, the
 * zone beside glibc, mimalloc, jemalloc, tcmalloc and libheapkit-malloc.so.
 *
 *  churn     per-thread churn: each thread frees a random one of its own
 *            1024 slots and allocates 16 B - 1 KiB in its place
 *  server    server churn: one table of 1024 slots per thread shared by all;
 *            a thread puts a fresh block in a random slot (atomic exchange)
 *            and frees the block it took out, which a random thread made
 *  prodcons  producer/consumer ring: thread i allocates batches of 64 blocks
 *            for thread i+1, which frees them (every free cross-thread from
 *            2 threads on; 1 thread consumes its own batches)
 *  jobframe  a job-system frame: per frame 256 jobs taken from a shared
 *            counter; each job allocates and frees 32 scratch blocks
 *            (16 B - 2 KiB) and allocates 4 level blocks (64 B - 8 KiB); a
 *            barrier ends each frame; at level end (every
 *            `frames` frames) the main thread (thread 0) frees the level.
 *            The zone allocates level data tagged HK_TAG_LEVEL and frees it
 *            with hk_zone_free_tags; every other allocator frees it block
 *            by block (cross-thread for blocks other workers made)
 *
 * Three classic benchmarks, in versions written here:
 *  larson    Larson's server idea: each thread owns 1024 slots filled with
 *            16 B - 1000 B blocks and replaces a random one (free +
 *            malloc); after every eighth of its rounds it starts a new
 *            thread, hands it the slots and exits, so blocks made by one
 *            thread are freed by its successor (ops: allocs + frees)
 *  xmalloc   every block freed by another thread: threads in pairs, the
 *            even one only allocates batches of 64 blocks of 16 - 128 B
 *            and queues them, the odd one only frees them (ops: frees; a
 *            thread without a partner, as at 1 thread, frees its own
 *            batches, half as many so its work is that of one of a pair)
 *  glibcthread  glibc's bench-malloc-thread idea: each thread replaces a
 *            random one of 1024 slots with a block of 1 B - 4 KiB (every
 *            power-of-two range 1-8 .. 1-4096 equally likely: most are
 *            small), freeing the block it displaces (ops: iterations)
 *
 * Invariants of this file:
 *  - every (allocator, workload, threads) run is a process of its own (this
 *    program run again with --threads-child), so each allocator's peak RSS
 *    is its own (VmHWM minus VmRSS before the workload) and no allocator
 *    inherits another's heap; the repetitions are interleaved (rep k of
 *    every allocator, then rep k+1) and the medians recorded;
 *  - the work per thread is fixed (weak scaling): the ideal per-thread
 *    throughput is flat and the ideal scaling is min(threads, cores);
 *  - "heapkit-malloc.so" runs with LD_PRELOAD=libheapkit-malloc.so and plain
 *    malloc/free (the child checks that malloc really is the preload's);
 *  - the zone row is the zone API on one shared zone: with HK_ZONE_THREADS
 *    ("zone+threads") when the library has it, else with lock hooks around
 *    a pthread mutex ("zone+mutex", what libheapkit-malloc.so does today);
 *  - every run ends with every block freed (the zone row's run fails when
 *    its stats still count a live block); sizes and choices come from
 *    per-thread xorshift streams seeded from ctx->seed.
 *
 * Ratios: throughput_vs_X = heapkit's ops/s / X's (> 1: heapkit faster);
 * rss_vs_X = heapkit's peak RSS growth / X's (< 1: heapkit smaller).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "harness.h"
#include "proc_mem.h"
#include "heapkit/zone.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SUITE "threads"

#if defined(HK_ZONE_THREADS) || defined(HKB_HAVE_ZONE_THREADS)
#define HKB_ZONE_FLAGS ((uint32_t)HK_ZONE_THREADS)
#define HKB_ZONE_NAME  "zone+threads"
#else
#define HKB_ZONE_FLAGS 0u
#define HKB_ZONE_NAME  "zone+mutex"
#endif
#define HKB_SHIM_NAME "heapkit-malloc.so"

enum { W_CHURN, W_SERVER, W_PRODCONS, W_JOBFRAME, W_LARSON, W_XMALLOC, W_GLIBCTHREAD, W_COUNT };
static const char *const k_wl[W_COUNT] = {"churn",  "server",  "prodcons",   "jobframe",
                                          "larson", "xmalloc", "glibcthread"};
static const char *const k_wl_what[W_COUNT] = {
    "per-thread churn of 16 B - 1 KiB blocks",
    "server churn: blocks freed by a random other thread",
    "producer/consumer ring: every free cross-thread (from 2 threads)",
    "job-system frame: shared zone, level freed by the main thread (zone: free_tags)",
    "larson: slots handed to a new thread 8 times, blocks freed by the successor",
    "xmalloc: allocator/freer pairs, every free cross-thread (from 2 threads)",
    "glibc-style thread loop: 1024 slots, 1 B - 4 KiB biased small"};
/* what Mops_per_s counts for each workload */
static const char *const k_wl_unit[W_COUNT] = {"M allocs+frees per second, all threads",
                                               "M allocs+frees per second, all threads",
                                               "M allocs+frees per second, all threads",
                                               "M allocs+frees per second, all threads",
                                               "M allocs+frees per second, all threads",
                                               "M frees per second, all threads",
                                               "M iterations (free + malloc) per second, all threads"};

/* ---- the allocator a child runs -------------------------------------------------- */

static hk_zone *g_tz;
static int g_is_zone;
static void *(*g_malloc)(size_t);
static void (*g_free)(void *);

static pthread_mutex_t g_tz_mutex = PTHREAD_MUTEX_INITIALIZER;
static void tz_lock(void *u) {
    (void)u;
    pthread_mutex_lock(&g_tz_mutex);
}
static void tz_unlock(void *u) {
    (void)u;
    pthread_mutex_unlock(&g_tz_mutex);
}
static void *tz_malloc(size_t n) { return hk_zone_alloc(g_tz, n); }
static void tz_free(void *p) { hk_zone_free(g_tz, p); }

/* Level data: tagged in the zone, plain elsewhere. */
static void *level_alloc(size_t n) {
    return g_is_zone ? hk_zone_alloc_tagged(g_tz, n, HK_TAG_LEVEL, NULL, NULL) : g_malloc(n);
}

static void touch(void *p, size_t n) {
    unsigned char *c = p;
    c[0] = 1;
    c[n - 1] = 2;
}

static void die(const char *what) {
    fprintf(stderr, "threads bench: %s\n", what);
    exit(1);
}

static void *xalloc(size_t n) {
    void *p = g_malloc(n);
    if (!p) die("allocation failed");
    touch(p, n);
    return p;
}

/* ---- workloads ------------------------------------------------------------------------ */

typedef struct shared {
    int nthreads;
    long iters; /* per thread: churn/server iterations, prodcons batches, jobframe frames per level */
    int levels;
    uint64_t seed;
    pthread_barrier_t start, frame;
    /* server */
    _Atomic(void *) *slots;
    size_t nslots;
    /* prodcons: one ring per thread (its producer is the thread, its consumer the next) */
    struct ring *rings;
    /* jobframe */
    atomic_int next_job;
    void ***level; /* per thread: level blocks made this level */
    size_t *nlevel;
    double unload_ns; /* total time thread 0 spent freeing levels */
} shared;

/* One per thread, each on cache lines of its own: `ops` is written on
 * every operation, and neighbours sharing a line would make every
 * allocator pay for the bench's own false sharing. */
enum { CHURN_SLOTS = 1024, BATCH = 64, RING_CAP = 16, JOBS = 256, SCRATCH = 32, LEVEL_PER_JOB = 4 };
enum { LARSON_SLOTS = 1024, LARSON_GENS = 8, GT_SLOTS = 1024 };

typedef struct worker {
    _Alignas(128) shared *sh;
    int id;
    long ops;
    /* larson: the slots, the stream and the generation travel from thread
     * to thread; chain[g] is generation g's thread, written by generation
     * g-1 (the main thread reads it after joining g-1) */
    void **arr;
    uint64_t rng;
    int gen;
    pthread_t chain[LARSON_GENS];
} worker;

static size_t small_size(uint64_t *r) { return 16 + (size_t)(hkb_rand(r) % 1009); /* 16 .. 1024 */ }

static void run_churn(worker *w) {
    uint64_t r = w->sh->seed + (uint64_t)w->id * 0x9E3779B97F4A7C15ull;
    void *slot[CHURN_SLOTS] = {0};
    for (long i = 0; i < w->sh->iters; i++) {
        size_t k = (size_t)(hkb_rand(&r) % CHURN_SLOTS);
        if (slot[k]) {
            g_free(slot[k]);
            w->ops++;
        }
        slot[k] = xalloc(small_size(&r));
        w->ops++;
    }
    for (int k = 0; k < CHURN_SLOTS; k++)
        if (slot[k]) {
            g_free(slot[k]);
            w->ops++;
        }
}

static void run_server(worker *w) {
    shared *sh = w->sh;
    uint64_t r = sh->seed + (uint64_t)w->id * 0x9E3779B97F4A7C15ull;
    for (long i = 0; i < sh->iters; i++) {
        size_t k = (size_t)(hkb_rand(&r) % sh->nslots);
        void *p = xalloc(small_size(&r));
        void *old = atomic_exchange_explicit(&sh->slots[k], p, memory_order_acq_rel);
        w->ops++;
        if (old) {
            g_free(old);
            w->ops++;
        }
    }
}

typedef struct ring {
    _Alignas(64) atomic_long head; /* batches pushed */
    _Alignas(64) atomic_long tail; /* batches popped */
    void **buf;                    /* RING_CAP batches of BATCH pointers */
} ring;

static void spin_wait(int *spins) {
    if (++*spins > 64) sched_yield();
}

/* One producer and one consumer per ring. The producer waits for a free
 * batch, fills it and pushes it; the consumer waits for a batch, frees its
 * blocks and pops it. */
static void **ring_wait_space(ring *q, long *h) {
    int spins = 0;
    *h = atomic_load_explicit(&q->head, memory_order_relaxed);
    while (*h - atomic_load_explicit(&q->tail, memory_order_acquire) >= RING_CAP) spin_wait(&spins);
    return q->buf + (size_t)(*h % RING_CAP) * BATCH;
}
static void ring_push(ring *q, long h) { atomic_store_explicit(&q->head, h + 1, memory_order_release); }
static void **ring_wait_batch(ring *q, long *t) {
    int spins = 0;
    *t = atomic_load_explicit(&q->tail, memory_order_relaxed);
    while (atomic_load_explicit(&q->head, memory_order_acquire) == *t) spin_wait(&spins);
    return q->buf + (size_t)(*t % RING_CAP) * BATCH;
}
static void ring_pop(ring *q, long t) { atomic_store_explicit(&q->tail, t + 1, memory_order_release); }

static void run_prodcons(worker *w) {
    shared *sh = w->sh;
    uint64_t r = sh->seed + (uint64_t)w->id * 0x9E3779B97F4A7C15ull;
    ring *out = &sh->rings[w->id], *in = &sh->rings[(w->id + sh->nthreads - 1) % sh->nthreads];
    for (long b = 0; b < sh->iters; b++) {
        long h, t;
        void **dst = ring_wait_space(out, &h);
        for (int i = 0; i < BATCH; i++) dst[i] = xalloc(small_size(&r));
        ring_push(out, h);
        w->ops += BATCH;
        void **src = ring_wait_batch(in, &t);
        for (int i = 0; i < BATCH; i++) g_free(src[i]);
        ring_pop(in, t);
        w->ops += BATCH;
    }
}

static void run_jobframe(worker *w) {
    shared *sh = w->sh;
    uint64_t r = sh->seed + (uint64_t)w->id * 0x9E3779B97F4A7C15ull;
    void *scratch[SCRATCH];
    for (int L = 0; L < sh->levels; L++) {
        for (long f = 0; f < sh->iters; f++) {
            for (;;) {
                int j = atomic_fetch_add_explicit(&sh->next_job, 1, memory_order_relaxed);
                if (j >= JOBS) break;
                for (int i = 0; i < SCRATCH; i++) scratch[i] = xalloc(16 + (size_t)(hkb_rand(&r) % 2033));
                for (int i = 0; i < LEVEL_PER_JOB; i++) {
                    size_t n = 64 + (size_t)(hkb_rand(&r) % 8129);
                    void *p = level_alloc(n);
                    if (!p) die("level allocation failed");
                    touch(p, n);
                    sh->level[w->id][sh->nlevel[w->id]++] = p;
                }
                for (int i = SCRATCH - 1; i >= 0; i--) g_free(scratch[i]);
                w->ops += 2 * SCRATCH + LEVEL_PER_JOB;
            }
            pthread_barrier_wait(&sh->frame); /* every job of the frame done */
            if (w->id == 0) atomic_store_explicit(&sh->next_job, 0, memory_order_relaxed);
            pthread_barrier_wait(&sh->frame); /* next frame */
        }
        /* level end: workers are quiescent; the main thread frees the level */
        if (w->id == 0) {
            uint64_t t0 = hkb_now_ns();
            size_t n = 0;
            for (int t = 0; t < sh->nthreads; t++) n += sh->nlevel[t];
            if (g_is_zone) {
                hk_zone_free_tags(g_tz, HK_TAG_LEVEL, HK_TAG_LEVEL);
            } else {
                for (int t = 0; t < sh->nthreads; t++)
                    for (size_t i = 0; i < sh->nlevel[t]; i++) g_free(sh->level[t][i]);
            }
            for (int t = 0; t < sh->nthreads; t++) sh->nlevel[t] = 0;
            sh->unload_ns += (double)(hkb_now_ns() - t0);
            w->ops += (long)n;
        }
        pthread_barrier_wait(&sh->frame);
    }
}

static size_t larson_size(uint64_t *r) { return 16 + (size_t)(hkb_rand(r) % 985); /* 16 .. 1000 */ }

static void *larson_next(void *arg);

/* One generation of a larson chain: the first fills the slots, each does
 * iters / LARSON_GENS replacements, the last frees every block; the others
 * start the next generation with the slots and exit. */
static void run_larson(worker *w) {
    shared *sh = w->sh;
    long rounds = sh->iters / LARSON_GENS > 0 ? sh->iters / LARSON_GENS : 1;
    if (w->gen == 0) {
        w->rng = sh->seed + (uint64_t)w->id * 0x9E3779B97F4A7C15ull;
        for (int k = 0; k < LARSON_SLOTS; k++) w->arr[k] = xalloc(larson_size(&w->rng));
        w->ops += LARSON_SLOTS;
    }
    for (long i = 0; i < rounds; i++) {
        size_t k = (size_t)(hkb_rand(&w->rng) % LARSON_SLOTS);
        g_free(w->arr[k]);
        w->arr[k] = xalloc(larson_size(&w->rng));
        w->ops += 2;
    }
    int g = ++w->gen;
    if (g < LARSON_GENS) {
        if (pthread_create(&w->chain[g], NULL, larson_next, w) != 0) die("pthread_create failed (larson)");
        return; /* w is the successor's from here */
    }
    for (int k = 0; k < LARSON_SLOTS; k++) g_free(w->arr[k]);
    w->ops += LARSON_SLOTS;
}
static void *larson_next(void *arg) {
    run_larson(arg);
    return NULL;
}

static size_t xmalloc_size(uint64_t *r) { return 16 + (size_t)(hkb_rand(r) % 113); /* 16 .. 128 */ }

/* xmalloc: thread 2p allocates sh->iters batches into ring p, thread 2p+1
 * frees them; only frees are counted. */
static void run_xmalloc(worker *w) {
    shared *sh = w->sh;
    uint64_t r = sh->seed + (uint64_t)w->id * 0x9E3779B97F4A7C15ull;
    if ((sh->nthreads & 1) && w->id == sh->nthreads - 1) {
        /* no partner: allocate and free its own batches, half as many (a
         * thread of a pair makes iters * BATCH calls, so does this one) */
        void *batch[BATCH];
        long n = sh->iters / 2 > 0 ? sh->iters / 2 : 1;
        for (long b = 0; b < n; b++) {
            for (int i = 0; i < BATCH; i++) batch[i] = xalloc(xmalloc_size(&r));
            for (int i = 0; i < BATCH; i++) g_free(batch[i]);
            w->ops += BATCH;
        }
        return;
    }
    ring *q = &sh->rings[w->id / 2];
    for (long b = 0; b < sh->iters; b++) {
        long k;
        if (w->id % 2 == 0) {
            void **dst = ring_wait_space(q, &k);
            for (int i = 0; i < BATCH; i++) dst[i] = xalloc(xmalloc_size(&r));
            ring_push(q, k);
        } else {
            void **src = ring_wait_batch(q, &k);
            for (int i = 0; i < BATCH; i++) g_free(src[i]);
            ring_pop(q, k);
            w->ops += BATCH;
        }
    }
}

/* 1 .. 4096 bytes: a range 1..8, 1..16, .. 1..4096 picked uniformly, then a
 * size in it, so 60% of the blocks are at most 128 bytes. */
static size_t glibcthread_size(uint64_t *r) {
    uint64_t x = hkb_rand(r);
    return 1 + (size_t)((x >> 32) % ((uint64_t)8 << (x % 10)));
}

static void run_glibcthread(worker *w) {
    uint64_t r = w->sh->seed + (uint64_t)w->id * 0x9E3779B97F4A7C15ull;
    void *set[GT_SLOTS] = {0};
    for (long i = 0; i < w->sh->iters; i++) {
        size_t k = (size_t)(hkb_rand(&r) % GT_SLOTS);
        size_t n = glibcthread_size(&r);
        if (set[k]) g_free(set[k]);
        set[k] = xalloc(n);
        w->ops++;
    }
    for (int k = 0; k < GT_SLOTS; k++)
        if (set[k]) g_free(set[k]);
}

static int g_workload;
static void *thread_main(void *arg) {
    worker *w = arg;
    pthread_barrier_wait(&w->sh->start);
    switch (g_workload) {
    case W_CHURN: run_churn(w); break;
    case W_SERVER: run_server(w); break;
    case W_PRODCONS: run_prodcons(w); break;
    case W_LARSON: run_larson(w); break;
    case W_XMALLOC: run_xmalloc(w); break;
    case W_GLIBCTHREAD: run_glibcthread(w); break;
    default: run_jobframe(w); break;
    }
    return NULL;
}

/* ---- the child: one run ------------------------------------------------------------------ */

typedef struct run_out {
    double secs, ops, rss_bytes, unload_ns;
    int ok;
} run_out;

static size_t status_kib(const char *key) {
    long v = hkb_proc_kib(key);
    return v > 0 ? (size_t)v : 0;
}

static int setup_allocator(const char *name) {
    if (!strcmp(name, HKB_ZONE_NAME)) {
        hk_zone_desc d;
        memset(&d, 0, sizeof d);
        d.size = (size_t)1 << 20;
        d.grow_size = (size_t)1 << 20;
        d.name = "threads";
        d.flags = HKB_ZONE_FLAGS;
        if (!HKB_ZONE_FLAGS) {
            d.lock.lock = tz_lock;
            d.lock.unlock = tz_unlock;
        }
        g_tz = hk_zone_create(&d);
        if (!g_tz) return 0;
        g_is_zone = 1;
        g_malloc = tz_malloc;
        g_free = tz_free;
        return 1;
    }
    if (!strcmp(name, HKB_SHIM_NAME)) {
        /* malloc must be the preload's, not the C library's */
        Dl_info info;
        void *(*m)(size_t) = malloc;
        if (!dladdr(*(void **)&m, &info) || !info.dli_fname || !strstr(info.dli_fname, "heapkit-malloc")) {
            fprintf(stderr, "threads bench: malloc is not libheapkit-malloc.so's (LD_PRELOAD missing?)\n");
            return 0;
        }
        g_malloc = malloc;
        g_free = free;
        return 1;
    }
    const hkb_allocator *peers;
    int np = hkb_peers(&peers);
    for (int i = 0; i < np; i++)
        if (!strcmp(peers[i].name, name)) {
            g_malloc = peers[i].malloc;
            g_free = peers[i].free;
            return 1;
        }
    return 0;
}

static void child_run(const char *name, int wl, int nthreads, long iters, int levels, uint64_t seed,
                      run_out *o) {
    memset(o, 0, sizeof *o);
    if (!setup_allocator(name)) return;
    shared sh;
    memset(&sh, 0, sizeof sh);
    sh.nthreads = nthreads;
    sh.iters = iters;
    sh.levels = levels;
    sh.seed = seed;
    /* the bench's own tables come from the C library (or, under the preload, from it) */
    if (wl == W_SERVER) {
        sh.nslots = (size_t)CHURN_SLOTS * (size_t)nthreads;
        sh.slots = calloc(sh.nslots, sizeof *sh.slots);
    } else if (wl == W_PRODCONS || wl == W_XMALLOC) {
        sh.rings = aligned_alloc(64, sizeof(ring) * (size_t)nthreads);
        for (int i = 0; i < nthreads; i++) {
            atomic_init(&sh.rings[i].head, 0);
            atomic_init(&sh.rings[i].tail, 0);
            sh.rings[i].buf = calloc((size_t)RING_CAP * BATCH, sizeof(void *));
        }
    } else if (wl == W_JOBFRAME) {
        sh.level = calloc((size_t)nthreads, sizeof *sh.level);
        sh.nlevel = calloc((size_t)nthreads, sizeof *sh.nlevel);
        for (int i = 0; i < nthreads; i++)
            sh.level[i] = calloc((size_t)iters * JOBS * LEVEL_PER_JOB, sizeof(void *));
        atomic_init(&sh.next_job, 0);
    }
    pthread_barrier_init(&sh.start, NULL, (unsigned)nthreads + 1);
    pthread_barrier_init(&sh.frame, NULL, (unsigned)nthreads);
    g_workload = wl;
    worker w[16];
    pthread_t tid[16];
    size_t base_kib = status_kib("VmRSS:");
    for (int i = 0; i < nthreads; i++) {
        w[i] = (worker){.sh = &sh, .id = i};
        if (wl == W_LARSON && !(w[i].arr = calloc(LARSON_SLOTS, sizeof(void *)))) die("out of memory");
        if (pthread_create(&tid[i], NULL, thread_main, &w[i]) != 0) die("pthread_create failed");
    }
    uint64_t t0 = hkb_now_ns();
    pthread_barrier_wait(&sh.start);
    for (int i = 0; i < nthreads; i++) {
        pthread_join(tid[i], NULL);
        if (wl == W_LARSON) /* chain[g] was written by generation g-1, joined before */
            for (int g = 1; g < LARSON_GENS; g++) pthread_join(w[i].chain[g], NULL);
    }
    o->secs = (double)(hkb_now_ns() - t0) / 1e9;
    /* what is still out: server slots, prodcons rings (untimed) */
    if (wl == W_SERVER)
        for (size_t k = 0; k < sh.nslots; k++) {
            void *p = atomic_load(&sh.slots[k]);
            if (p) g_free(p);
        }
    size_t hwm = status_kib("VmHWM:");
    o->rss_bytes = hwm > base_kib ? (double)(hwm - base_kib) * 1024.0 : 0;
    for (int i = 0; i < nthreads; i++) {
        o->ops += (double)w[i].ops;
        free(w[i].arr);
    }
    o->unload_ns = sh.unload_ns;
    if (g_tz && hk_zone_check(g_tz) != HK_OK) {
        fprintf(stderr, "threads bench: zone check failed after %s\n", k_wl[wl]);
        return;
    }
    hk_stats st = {0};
    if (g_tz && (hk_zone_stats(g_tz, &st) != HK_OK || st.live_blocks != 0)) {
        fprintf(stderr, "threads bench: %zu blocks still live in the zone after %s\n", st.live_blocks,
                k_wl[wl]);
        return;
    }
    o->ok = 1;
}

int hkb_threads_child(int argc, char **argv);
int hkb_threads_child(int argc, char **argv) {
    /* --threads-child FD NAME WORKLOAD THREADS ITERS LEVELS SEED */
    if (argc != 9) return 2;
    int fd = atoi(argv[2]);
    int wl = atoi(argv[4]), nt = atoi(argv[5]), levels = atoi(argv[7]);
    long iters = atol(argv[6]);
    uint64_t seed = strtoull(argv[8], NULL, 10);
    if (wl < 0 || wl >= W_COUNT || nt < 1 || nt > 16 || iters < 1) return 2;
    run_out o;
    child_run(argv[3], wl, nt, iters, levels, seed, &o);
    if (write(fd, &o, sizeof o) != (ssize_t)sizeof o) return 1;
    return o.ok ? 0 : 1;
}

/* ---- the parent --------------------------------------------------------------------------- */

/* Runs one (allocator, workload, threads) in a fresh process. */
static int run_child(const char *name, int preload, int wl, int nt, long iters, int levels, uint64_t seed,
                     run_out *o) {
    int pfd[2];
    memset(o, 0, sizeof *o);
    if (pipe(pfd) != 0) return 0;
    char a_fd[16], a_wl[8], a_nt[8], a_it[32], a_lv[8], a_seed[32];
    snprintf(a_fd, sizeof a_fd, "%d", pfd[1]);
    snprintf(a_wl, sizeof a_wl, "%d", wl);
    snprintf(a_nt, sizeof a_nt, "%d", nt);
    snprintf(a_it, sizeof a_it, "%ld", iters);
    snprintf(a_lv, sizeof a_lv, "%d", levels);
    snprintf(a_seed, sizeof a_seed, "%llu", (unsigned long long)seed);
    char *argv[] = {
        "heapkit-bench", "--threads-child", a_fd, (char *)name, a_wl, a_nt, a_it, a_lv, a_seed, NULL};
    return hkb_run_child(argv, pfd, preload ? hkb_shim_path() : NULL, o, sizeof *o) && o->ok;
}

#define MAXSUBJ 8
#define MAXREPS 15
static const int k_threads[3] = {1, 2, 4};

void hkb_suite_threads(hkb_ctx *ctx);
void hkb_suite_threads(hkb_ctx *ctx) {
    /* the subjects: peers (loaded in this process only to learn which exist), the zone, the preload */
    const char *names[MAXSUBJ];
    int preload[MAXSUBJ] = {0}, heapkit[MAXSUBJ] = {0}, ns = 0;
    const hkb_allocator *peers;
    int np = hkb_peers(&peers);
    for (int i = 0; i < np && ns < MAXSUBJ - 2; i++) names[ns++] = peers[i].name;
    heapkit[ns] = 1;
    names[ns++] = HKB_ZONE_NAME;
    const char *sp = hkb_shim_path();
    struct stat sst;
    int have_shim = sp && stat(sp, &sst) == 0;
    if (have_shim) {
        heapkit[ns] = 1;
        preload[ns] = 1;
        names[ns++] = HKB_SHIM_NAME;
    }
    int reps = ctx->reps < MAXREPS ? ctx->reps : MAXREPS;
    /* Per-thread work, long enough that a run measures the allocator's
     * steady state rather than thread start-up and first page faults
     * (300000 churn iterations were 2-3 ms of work): here, a mimalloc run
     * at 1 thread takes about 60 ms for churn and for server, 10 ms for
     * prodcons (0.06-0.23 s at 2 threads, where every batch crosses cores:
     * it depends on where the two threads run). Process times, start-up
     * included. The job frame ran 8 frames per level for 3 levels: 17 ms
     * for the zone at 2 threads, most of it first touches of the first
     * level's pages (mimalloc's per-repetition ratio to the zone ranged
     * from 1.13 to 2.62 over 5 repetitions); 40 frames and 6 levels measure
     * levels that reuse the memory of the ones before (measured: 0.07-0.11 s
     * per run for the zone, 0.11-0.13 s for mimalloc, 1 to 4 threads).
     * larson, xmalloc and glibcthread (measured under a load average of
     * about 10, so roughly): larson 6M replacements per thread, 0.16 s for
     * mimalloc at 1 thread, up to 1.6 s for glibc at 4; xmalloc 20000
     * batches per pair, 0.02-0.12 s; glibcthread 3M iterations per thread,
     * 0.12 s for mimalloc at 1 thread, about 1.1 s for glibc at 4. */
    long iters[W_COUNT] = {10000000, 6000000, 20000, 40, 6000000, 20000, 3000000};
    int levels = 6;
    if (ctx->quick) {
        iters[W_CHURN] = iters[W_SERVER] = iters[W_LARSON] = iters[W_GLIBCTHREAD] = 20000;
        iters[W_PRODCONS] = iters[W_XMALLOC] = 200;
        iters[W_JOBFRAME] = 2;
        levels = 2;
    }
    const char *only = getenv("HKB_THREADS_WORKLOADS"); /* e.g. churn,jobframe: for profiling */
    printf("threads: %d runs per figure (medians), each in a fresh process; %s is the zone API on one "
           "shared zone%s\n",
           reps, HKB_ZONE_NAME,
           HKB_ZONE_FLAGS ? " (HK_ZONE_THREADS)" : " behind a pthread mutex (lock hooks)");
    if (!have_shim)
        printf("threads: %s not found (%s); set HKB_HEAPKIT_MALLOC\n", HKB_SHIM_NAME, sp ? sp : "no path");
    static double mops[W_COUNT][3][MAXSUBJ], rss[W_COUNT][3][MAXSUBJ];
    memset(mops, 0, sizeof mops);
    memset(rss, 0, sizeof rss);
    for (int wl = 0; wl < W_COUNT; wl++) {
        if (only && !strstr(only, k_wl[wl])) continue;
        for (int ti = 0; ti < 3; ti++) {
            int nt = k_threads[ti];
            char wname[48], what[160];
            snprintf(wname, sizeof wname, "%s_t%d", k_wl[wl], nt);
            snprintf(what, sizeof what, "%s, %d thread%s", k_wl_what[wl], nt, nt > 1 ? "s" : "");
            hkb_section(SUITE, wname, what);
            double v[MAXSUBJ][MAXREPS], r[MAXSUBJ][MAXREPS], u[MAXSUBJ][MAXREPS];
            int okc[MAXSUBJ] = {0};
            for (int k = 0; k < reps; k++)
                for (int s = 0; s < ns; s++) {
                    run_out o;
                    if (!run_child(names[s], preload[s], wl, nt, iters[wl], levels, ctx->seed + (uint64_t)k,
                                   &o))
                        continue;
                    v[s][okc[s]] = o.ops / o.secs / 1e6;
                    r[s][okc[s]] = o.rss_bytes / 1048576.0;
                    u[s][okc[s]] = o.unload_ns / 1000.0 / levels;
                    okc[s]++;
                }
            for (int s = 0; s < ns; s++) {
                if (!okc[s]) {
                    hkb_skip(SUITE, wname, names[s], "the child process failed (see stderr)");
                    continue;
                }
                double m = hkb_median(v[s], okc[s]);
                mops[wl][ti][s] = m;
                rss[wl][ti][s] = hkb_median(r[s], okc[s]);
                hkb_record(SUITE, wname, names[s], "Mops_per_s", m, k_wl_unit[wl]);
                hkb_record(SUITE, wname, names[s], "Mops_per_s_per_thread", m / nt, "M ops/s per thread");
                hkb_record(SUITE, wname, names[s], "peak_rss_MiB", rss[wl][ti][s],
                           "MiB (VmHWM - VmRSS before the workload)");
                if (ti > 0 && mops[wl][0][s] > 0)
                    hkb_record(SUITE, wname, names[s], "scaling_vs_1_thread", m / mops[wl][0][s],
                               "x (ops/s at this thread count / at 1 thread)");
                if (wl == W_JOBFRAME)
                    hkb_record(SUITE, wname, names[s], "us_per_level_unload", hkb_median(u[s], okc[s]),
                               heapkit[s] && !preload[s] ? "us (hk_zone_free_tags)" : "us (free each block)");
            }
            for (int h = 0; h < ns; h++) {
                if (!heapkit[h] || mops[wl][ti][h] <= 0) continue;
                for (int s = 0; s < ns; s++) {
                    if (heapkit[s] || mops[wl][ti][s] <= 0) continue;
                    char m[64];
                    snprintf(m, sizeof m, "throughput_vs_%s", names[s]);
                    hkb_record(SUITE, wname, names[h], m, mops[wl][ti][h] / mops[wl][ti][s],
                               "x (heapkit ops/s / X ops/s)");
                    if (rss[wl][ti][s] > 0) {
                        snprintf(m, sizeof m, "rss_vs_%s", names[s]);
                        hkb_record(SUITE, wname, names[h], m, rss[wl][ti][h] / rss[wl][ti][s],
                                   "x (heapkit peak RSS / X peak RSS)");
                    }
                }
            }
            hkb_skip_missing(SUITE, wname);
        }
    }
    /* the summary: per-thread throughput and peak RSS, one row per workload and thread count */
    printf("\n== threads / summary: M ops/s per thread (peak RSS MiB)\n   %-16s", "workload");
    for (int s = 0; s < ns; s++) printf(" %18s", names[s]);
    printf("\n");
    for (int wl = 0; wl < W_COUNT; wl++)
        for (int ti = 0; ti < 3; ti++) {
            if (only && !strstr(only, k_wl[wl])) continue;
            char wname[48];
            snprintf(wname, sizeof wname, "%s_t%d", k_wl[wl], k_threads[ti]);
            printf("   %-16s", wname);
            for (int s = 0; s < ns; s++) {
                char cell[40];
                snprintf(cell, sizeof cell, "%.2f (%.1f)", mops[wl][ti][s] / k_threads[ti], rss[wl][ti][s]);
                printf(" %18s", cell);
            }
            printf("\n");
        }
    fflush(stdout);
}

/*
 * bench/suite_zone.c - the zone against glibc, mimalloc, jemalloc, tcmalloc
 * and a Quake-style rover first-fit zone (bench/lib_zone_rover.c).
 *
 *  frame       a game-frame trace (frame temporaries, level-lifetime and
 *              cached blocks, 16 B - 64 KiB, a few reallocs): ns per operation
 *  level       level load/unload: hk_zone_free_tags against freeing each block
 *  latency     per-operation time distribution (p99, p99.99, max) at heap
 *              sizes from 1 MiB to 1 GiB, raw and noise-filtered (below)
 *  fragment    peak footprint / peak live bytes on the frame trace
 *
 * "zone-noruns" (frame workload) is the zone created with HK_ZONE_NO_RUNS:
 * every block from its TLSF core, without the small-block runs.
 * "zone+prefault" (latency workload) is the zone created with
 * HK_ZONE_PREFAULT: the memory of each growth is faulted in when the zone
 * takes it.
 *
 * Ratios are recorded as ratio_vs_X = X's figure / the zone's figure (so > 1
 * means the zone is faster, or uses less).
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
#include "harness.h"
#include "heapkit/zone.h"
#include "lib_zone_rover.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#define HKB_HAVE_TSC 1
#endif

#define SUITE "zone"

/* ---- the zone and the rover as hkb_allocators ------------------------------ */

static hk_zone *g_bz;
static void *bz_malloc(size_t n) { return hk_zone_alloc(g_bz, n); }
static void bz_free(void *p) { hk_zone_free(g_bz, p); }
static void *bz_realloc(void *p, size_t n) { return hk_zone_realloc(g_bz, p, n); }
static void *bz_memalign(size_t a, size_t n) { return hk_zone_alloc_aligned(g_bz, a, n); }
static size_t bz_usable(void *p) { return hk_zone_usable_size(g_bz, p); }

static pthread_mutex_t g_bz_mutex = PTHREAD_MUTEX_INITIALIZER;
static void bz_lock(void *u) {
    (void)u;
    pthread_mutex_lock(&g_bz_mutex);
}
static void bz_unlock(void *u) {
    (void)u;
    pthread_mutex_unlock(&g_bz_mutex);
}

static hkb_rover *g_br;
static void *g_br_mem;
static size_t g_br_size;
static void *br_malloc(size_t n) { return hkb_rover_alloc(g_br, n, 1); }
static void br_free(void *p) { hkb_rover_free(g_br, p); }
static void *br_realloc(void *p, size_t n) { return hkb_rover_realloc(g_br, p, n); }
static size_t br_usable(void *p) { return hkb_rover_usable(g_br, p); }

enum { SUBJ_PEER, SUBJ_ZONE, SUBJ_ZONE_LOCKED, SUBJ_ZONE_NR, SUBJ_ZONE_PF, SUBJ_ROVER };
static int subj_is_zone(int kind) { return kind >= SUBJ_ZONE && kind <= SUBJ_ZONE_PF; }

/* Which zone variants a workload measures besides the zone itself. */
enum { SUBJ_SET_PLAIN, SUBJ_SET_FRAME /* +mutex, -noruns */, SUBJ_SET_LATENCY /* +prefault */ };

typedef struct subject {
    hkb_allocator a;
    int kind;
} subject;

/* The zone as the preload configures it: 1 MiB to start, growing from the OS. */
static void subject_open(const subject *s, size_t heap) {
    if (subj_is_zone(s->kind)) {
        hk_zone_desc d;
        memset(&d, 0, sizeof d);
        d.size = (size_t)1 << 20;
        d.grow_size = (size_t)1 << 20;
        d.name = "bench";
        if (s->kind == SUBJ_ZONE_NR)
            d.flags = HK_ZONE_NO_RUNS; /* every block from the TLSF core, no small-block runs */
        if (s->kind == SUBJ_ZONE_PF) d.flags = HK_ZONE_PREFAULT; /* memory faulted in as the zone grows */
        if (s->kind == SUBJ_ZONE_LOCKED) {
            d.lock.lock = bz_lock;
            d.lock.unlock = bz_unlock;
        }
        g_bz = hk_zone_create(&d);
    } else if (s->kind == SUBJ_ROVER) {
        g_br_size = heap;
        g_br_mem =
            mmap(NULL, heap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (g_br_mem == MAP_FAILED) {
            fprintf(stderr, "zone bench: cannot map %zu bytes for the rover\n", heap);
            exit(1);
        }
        g_br = hkb_rover_create(g_br_mem, heap);
    }
}

static void subject_close(const subject *s) {
    if (subj_is_zone(s->kind)) {
        hk_zone_destroy(g_bz);
        g_bz = NULL;
    } else if (s->kind == SUBJ_ROVER) {
        munmap(g_br_mem, g_br_size);
        g_br = NULL;
    }
}

/* The globals behind the zone and rover subjects, so that several
 * instances can be open at once (the frame workload interleaves them). */
typedef struct subject_state {
    hk_zone *bz;
    hkb_rover *br;
    void *br_mem;
    size_t br_size;
} subject_state;

static subject_state subject_save(void) { return (subject_state){g_bz, g_br, g_br_mem, g_br_size}; }
static void subject_restore(subject_state s) {
    g_bz = s.bz;
    g_br = s.br;
    g_br_mem = s.br_mem;
    g_br_size = s.br_size;
}

/* The subjects of a workload: the zone, the variants of `set`, the peers,
 * the rover. */
static int subjects(subject *out, int set) {
    int n = 0;
    out[n++] = (subject){{"zone", bz_malloc, bz_free, bz_realloc, bz_memalign, bz_usable}, SUBJ_ZONE};
    if (set == SUBJ_SET_FRAME) {
        out[n++] = (subject){{"zone+mutex", bz_malloc, bz_free, bz_realloc, bz_memalign, bz_usable},
                             SUBJ_ZONE_LOCKED};
        out[n++] =
            (subject){{"zone-noruns", bz_malloc, bz_free, bz_realloc, bz_memalign, bz_usable}, SUBJ_ZONE_NR};
    }
    if (set == SUBJ_SET_LATENCY)
        out[n++] = (subject){{"zone+prefault", bz_malloc, bz_free, bz_realloc, bz_memalign, bz_usable},
                             SUBJ_ZONE_PF};
    const hkb_allocator *peers;
    int np = hkb_peers(&peers);
    for (int i = 0; i < np; i++) out[n++] = (subject){peers[i], SUBJ_PEER};
    out[n++] = (subject){{"quake-rover", br_malloc, br_free, br_realloc, NULL, br_usable}, SUBJ_ROVER};
    /* HKB_ZONE_SUBJECTS=zone,mimalloc (say) keeps only those, the zone first
     * (the ratios are against it): for profiling one allocator */
    const char *only = getenv("HKB_ZONE_SUBJECTS");
    if (only) {
        int k = 1;
        for (int i = 1; i < n; i++) {
            char pat[64];
            snprintf(pat, sizeof pat, ",%s,", out[i].a.name);
            char list[512];
            snprintf(list, sizeof list, ",%s,", only);
            if (strstr(list, pat))
                out[k++] = out[i];
            else
                printf("zone: %s left out (HKB_ZONE_SUBJECTS=%s)\n", out[i].a.name, only);
        }
        n = k;
    }
    return n;
}

static double rnd_logu(uint64_t *r, double lo, double hi) {
    double u = (double)(hkb_rand(r) >> 11) * (1.0 / 9007199254740992.0);
    return exp(log(lo) + u * (log(hi) - log(lo)));
}

/* ---- the game-frame trace ---------------------------------------------------- */

enum { EV_ALLOC, EV_FREE, EV_REALLOC };

typedef struct ev {
    uint32_t slot;
    uint32_t size;
    uint32_t op;
} ev;

typedef struct trace {
    ev *ev;
    size_t n, cap;
    uint32_t nslots;
    size_t peak_live;
    size_t allocs;
} trace;

static void tr_push(trace *t, uint32_t op, uint32_t slot, uint32_t size) {
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 65536;
        t->ev = realloc(t->ev, t->cap * sizeof *t->ev);
        if (!t->ev) exit(1);
    }
    t->ev[t->n++] = (ev){slot, size, op};
}

typedef struct slotpool {
    uint32_t *free;
    uint32_t nfree, next;
    uint32_t *size;
} slotpool;

static uint32_t sp_get(slotpool *s) {
    if (s->nfree) return s->free[--s->nfree];
    return s->next++;
}
static void sp_put(slotpool *s, uint32_t id) { s->free[s->nfree++] = id; }

static void trace_make(trace *t, int quick, uint64_t seed) {
    memset(t, 0, sizeof *t);
    uint64_t r = seed;
    int levels = quick ? 2 : 3, frames = quick ? 150 : 400;
    int level_blocks = quick ? 2000 : 4000, temps = 150, caches = 4;
    enum { MAXS = 1 << 20 };
    slotpool sp = {malloc(MAXS * sizeof(uint32_t)), 0, 0, malloc(MAXS * sizeof(uint32_t))};
    uint32_t *lvl = malloc((size_t)level_blocks * sizeof(uint32_t));
    uint32_t *tmp = malloc((size_t)temps * sizeof(uint32_t));
    uint32_t *cache = malloc(100000 * sizeof(uint32_t));
    int *expiry = malloc(100000 * sizeof(int));
    size_t live = 0;
#define T_ALLOC(id, sz)                                                                                      \
    do {                                                                                                     \
        sp.size[id] = (uint32_t)(sz);                                                                        \
        tr_push(t, EV_ALLOC, id, sp.size[id]);                                                               \
        live += sp.size[id];                                                                                 \
        if (live > t->peak_live) t->peak_live = live;                                                        \
        t->allocs++;                                                                                         \
    } while (0)
#define T_FREE(id)                                                                                           \
    do {                                                                                                     \
        tr_push(t, EV_FREE, id, 0);                                                                          \
        live -= sp.size[id];                                                                                 \
        sp_put(&sp, id);                                                                                     \
    } while (0)
    for (int L = 0; L < levels; L++) {
        int ncache = 0;
        for (int i = 0; i < level_blocks; i++) {
            lvl[i] = sp_get(&sp);
            T_ALLOC(lvl[i], rnd_logu(&r, 16, 65536));
        }
        for (int f = 0; f < frames; f++) {
            for (int i = 0; i < temps; i++) {
                tmp[i] = sp_get(&sp);
                double sz = hkb_rand(&r) % 20 == 0 ? rnd_logu(&r, 1024, 16384) : rnd_logu(&r, 16, 1024);
                T_ALLOC(tmp[i], sz);
                if (i % 16 == 15) { /* a growing array */
                    uint32_t ns = sp.size[tmp[i]] * 2;
                    tr_push(t, EV_REALLOC, tmp[i], ns);
                    live += ns - sp.size[tmp[i]];
                    if (live > t->peak_live) t->peak_live = live;
                    sp.size[tmp[i]] = ns;
                }
            }
            for (int i = 0; i < caches; i++) {
                cache[ncache] = sp_get(&sp);
                expiry[ncache] = f + 10 + (int)(hkb_rand(&r) % 190);
                T_ALLOC(cache[ncache], rnd_logu(&r, 512, 65536));
                ncache++;
            }
            for (int i = 0; i < ncache;) {
                if (expiry[i] <= f) {
                    T_FREE(cache[i]);
                    cache[i] = cache[ncache - 1];
                    expiry[i] = expiry[ncache - 1];
                    ncache--;
                } else {
                    i++;
                }
            }
            /* frame end: temporaries go, in a shuffled order */
            for (int i = temps - 1; i > 0; i--) {
                int j = (int)(hkb_rand(&r) % (uint64_t)(i + 1));
                uint32_t x = tmp[i];
                tmp[i] = tmp[j];
                tmp[j] = x;
            }
            for (int i = 0; i < temps; i++) T_FREE(tmp[i]);
            /* a few level blocks are replaced during play */
            for (int i = 0; i < 2; i++) {
                int k = (int)(hkb_rand(&r) % (uint64_t)level_blocks);
                T_FREE(lvl[k]);
                lvl[k] = sp_get(&sp);
                T_ALLOC(lvl[k], rnd_logu(&r, 16, 65536));
            }
        }
        for (int i = 0; i < level_blocks; i++) T_FREE(lvl[i]);
        for (int i = 0; i < ncache; i++) T_FREE(cache[i]);
    }
#undef T_ALLOC
#undef T_FREE
    t->nslots = sp.next;
    free(sp.free);
    free(sp.size);
    free(lvl);
    free(tmp);
    free(cache);
    free(expiry);
}

/* Replays the trace; returns ns per operation. With `top` set, tracks the
 * highest byte used (address-space high water) relative to *base. */
/* Page faults so far (minor and major) for this process. */
static long lat_faults(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return ru.ru_minflt + ru.ru_majflt;
}

/* CPU time of this thread: unlike the wall clock it does not count the
 * time the process waits for a core (the machine is shared). */
static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double g_replay_cpu; /* CPU ns per operation of the last replay */

static double trace_replay(const hkb_allocator *a, const trace *t, void **slots, uintptr_t *top) {
    uint64_t c0 = thread_cpu_ns();
    uint64_t t0 = hkb_now_ns();
    for (size_t i = 0; i < t->n; i++) {
        const ev *e = &t->ev[i];
        if (e->op == EV_ALLOC) {
            unsigned char *p = a->malloc(e->size);
            if (!p) {
                fprintf(stderr, "zone bench: %s failed an allocation of %u bytes\n", a->name, e->size);
                exit(1);
            }
            p[0] = 1;
            slots[e->slot] = p;
            if (top && (uintptr_t)p + e->size > *top) *top = (uintptr_t)p + e->size;
        } else if (e->op == EV_FREE) {
            a->free(slots[e->slot]);
        } else {
            unsigned char *p = a->realloc(slots[e->slot], e->size);
            if (!p) exit(1);
            p[e->size - 1] = 2;
            slots[e->slot] = p;
            if (top && (uintptr_t)p + e->size > *top) *top = (uintptr_t)p + e->size;
        }
    }
    double wall = (double)(hkb_now_ns() - t0) / (double)t->n;
    g_replay_cpu = (double)(thread_cpu_ns() - c0) / (double)t->n;
    return wall;
}

static void workload_frame(hkb_ctx *ctx, const trace *t) {
    hkb_section(SUITE, "frame", "game-frame trace: ns per operation (median), ratio = X / zone");
    subject subj[10];
    int ns = subjects(subj, SUBJ_SET_FRAME);
    void **slots = calloc(t->nslots, sizeof(void *));
    double res[10], cres[10], v[10][32], cv[10][32], fv[10][32];
    int warm[10];
    subject_state st[10];
    int reps = ctx->reps < 32 ? ctx->reps : 32;
    /* One instance per allocator, warmed up (every allocator then runs on
     * memory it already has from the OS). The
     * repetitions are interleaved (rep k of every allocator, then rep k+1),
     * so that a change in the machine's load during the run (other jobs)
     * falls on all allocators alike instead of on whichever runs at that
     * time; each timed replay follows an untimed one of the same allocator,
     * so it starts with that allocator's data in the caches, as when the
     * replays ran back to back. Every replay ends with no live block, so the
     * instances can coexist. */
    for (int s = 0; s < ns; s++) {
        subject_open(&subj[s], (size_t)1 << 30);
        /* warm up until a replay takes no page fault (at most 16 replays):
         * some allocators settle on their footprint only after several */
        long f;
        warm[s] = 0;
        do {
            long f0 = lat_faults();
            trace_replay(&subj[s].a, t, slots, NULL);
            f = lat_faults() - f0;
            warm[s]++;
        } while (f > 0 && warm[s] < 16);
        st[s] = subject_save();
    }
    for (int k = 0; k < reps; k++)
        for (int s = 0; s < ns; s++) {
            subject_restore(st[s]);
            trace_replay(&subj[s].a, t, slots, NULL);
            long f0 = lat_faults();
            v[s][k] = trace_replay(&subj[s].a, t, slots, NULL);
            fv[s][k] = (double)(lat_faults() - f0);
            cv[s][k] = g_replay_cpu;
        }
    for (int s = 0; s < ns; s++) {
        subject_restore(st[s]);
        subject_close(&subj[s]);
        res[s] = hkb_median(v[s], reps);
        cres[s] = hkb_median(cv[s], reps);
        hkb_record(SUITE, "frame", subj[s].a.name, "ns_per_op", res[s], "ns");
        hkb_record(SUITE, "frame", subj[s].a.name, "cpu_ns_per_op", cres[s],
                   "ns (thread CPU time: without waits for a core)");
        hkb_record(SUITE, "frame", subj[s].a.name, "warmup_replays", warm[s],
                   "replays until one took no page fault (max 16)");
        hkb_record(SUITE, "frame", subj[s].a.name, "faults_per_replay", hkb_median(fv[s], reps),
                   "page faults in a timed replay (median)");
    }
    for (int s = 1; s < ns; s++) {
        char m[64];
        snprintf(m, sizeof m, "ratio_vs_%s", subj[s].a.name);
        hkb_record(SUITE, "frame", "zone", m, res[s] / res[0], "x (X time / zone time)");
        snprintf(m, sizeof m, "cpu_ratio_vs_%s", subj[s].a.name);
        hkb_record(SUITE, "frame", "zone", m, cres[s] / cres[0], "x (X CPU time / zone CPU time)");
    }
    /* the zone without its small-block runs (every block from the TLSF core) against the peers */
    for (int f = 0; f < ns; f++) {
        if (subj[f].kind != SUBJ_ZONE_NR) continue;
        for (int s = 0; s < ns; s++) {
            if (subj[s].kind != SUBJ_PEER && subj[s].kind != SUBJ_ROVER) continue;
            char m[64];
            snprintf(m, sizeof m, "ratio_vs_%s", subj[s].a.name);
            hkb_record(SUITE, "frame", "zone-noruns", m, res[s] / res[f], "x (X time / zone-noruns time)");
            snprintf(m, sizeof m, "cpu_ratio_vs_%s", subj[s].a.name);
            hkb_record(SUITE, "frame", "zone-noruns", m, cres[s] / cres[f], "x (CPU time)");
        }
    }
    hkb_skip_missing(SUITE, "frame");
    free(slots);
}

/* ---- level load / unload ------------------------------------------------------ */

static void workload_level(hkb_ctx *ctx) {
    hkb_section(SUITE, "level", "level unload: time per unload (median), ratio = X / zone free_tags");
    int n = ctx->quick ? 5000 : 20000;
    void **lv = malloc((size_t)n * sizeof(void *)), **st = malloc((size_t)n * sizeof(void *));
    size_t *sizes = malloc((size_t)n * sizeof(size_t));
    uint64_t r = ctx->seed ^ 0x1e7e1;
    for (int i = 0; i < n; i++) sizes[i] = (size_t)rnd_logu(&r, 16, 16384);
    subject subj[10];
    int nsub = subjects(subj, SUBJ_SET_PLAIN);
    /* rows: zone free_tags, zone free each, peers free each, rover Z_FreeTags walk, rover free each */
    double tags_ns = 0;
    for (int mode = 0; mode < nsub + 2; mode++) {
        const subject *s;
        int use_tags;
        if (mode == 0) {
            s = &subj[0];
            use_tags = 1;
        } else if (mode <= nsub) {
            s = &subj[mode - 1];
            use_tags = 0;
        } else {
            s = &subj[nsub - 1];
            use_tags = 1;
        }
        double v[32];
        int reps = ctx->reps < 32 ? ctx->reps : 32;
        hk_stats stats;
        memset(&stats, 0, sizeof stats);
        for (int k = 0; k < reps; k++) {
            subject_open(s, (size_t)1 << 30);
            /* a level loads: level blocks interleaved with static ones */
            for (int i = 0; i < n; i++) {
                if (s->kind == SUBJ_ZONE)
                    lv[i] = hk_zone_alloc_tagged(g_bz, sizes[i], HK_TAG_LEVEL, NULL, NULL);
                else if (s->kind == SUBJ_ROVER)
                    lv[i] = hkb_rover_alloc(g_br, sizes[i], HK_TAG_LEVEL);
                else
                    lv[i] = s->a.malloc(sizes[i]);
                st[i] = s->a.malloc(sizes[(i * 7) % n] / 4 + 16);
                if (!lv[i] || !st[i]) exit(1);
                ((char *)lv[i])[0] = 1;
            }
            if (s->kind == SUBJ_ZONE && k == 0) hk_zone_stats(g_bz, &stats);
            uint64_t t0 = hkb_now_ns();
            if (use_tags && s->kind == SUBJ_ZONE)
                hk_zone_free_tags(g_bz, HK_TAG_LEVEL, HK_TAG_LEVSPEC);
            else if (use_tags)
                hkb_rover_free_tags(g_br, HK_TAG_LEVEL, HK_TAG_LEVSPEC);
            else
                for (int i = 0; i < n; i++) s->a.free(lv[i]);
            v[k] = (double)(hkb_now_ns() - t0);
            for (int i = 0; i < n; i++) s->a.free(st[i]);
            subject_close(s);
        }
        double med = hkb_median(v, reps);
        char name[64];
        snprintf(name, sizeof name, "%s%s", s->a.name,
                 use_tags ? (s->kind == SUBJ_ZONE ? " free_tags" : " Z_FreeTags walk") : " free each");
        hkb_record(SUITE, "level", name, "us_per_unload", med / 1000.0, "us");
        hkb_record(SUITE, "level", name, "ns_per_block", med / n, "ns");
        if (mode == 0) {
            tags_ns = med;
            hkb_record(SUITE, "level", "zone", "tracked_overhead_per_block",
                       (double)(stats.used_blocks_bytes - stats.used) / (double)stats.live_blocks,
                       "bytes (half tagged, half untracked blocks)");
        } else {
            char m[80];
            snprintf(m, sizeof m, "ratio_vs_%s", name);
            hkb_record(SUITE, "level", "zone free_tags", m, med / tags_ns,
                       "x (X time / zone free_tags time)");
        }
    }
    hkb_skip_missing(SUITE, "level");
    free(lv);
    free(st);
    free(sizes);
}

/* ---- latency ------------------------------------------------------------------- */

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
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        close(pfd[0]);
        close(pfd[1]);
        return 0;
    }
    if (pid == 0) {
        close(pfd[0]);
        FILE *nul = freopen("/dev/null", "w", stdout); /* the parent prints the figures */
        (void)nul;
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(pfd[1]);
    size_t got = 0;
    while (got < sizeof *o) {
        ssize_t n = read(pfd[0], (char *)o + got, sizeof *o - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return got == sizeof *o && o->ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
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

static void workload_latency(hkb_ctx *ctx) {
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

/* ---- fragmentation ----------------------------------------------------------------- */

static int first_block(const hk_block_info *i, void *user) {
    *(uintptr_t *)user = (uintptr_t)i->address - 16;
    return 1;
}

static size_t rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long size = 0, res = 0;
    if (fscanf(f, "%lu %lu", &size, &res) != 2) res = 0;
    fclose(f);
    return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

static void workload_fragment(hkb_ctx *ctx, const trace *t) {
    hkb_section(SUITE, "fragment", "frame trace: peak footprint / peak live bytes");
    void **slots = calloc(t->nslots, sizeof(void *));
    /* The zone and the rover in one fixed region: footprint = high water of
     * the address space used, exact. */
    {
        void *mem = mmap(NULL, (size_t)1 << 30, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (mem == MAP_FAILED) exit(1);
        /* the zone, then the zone without runs (its TLSF core alone) */
        double zr = 0;
        for (int nr = 0; nr < 2; nr++) {
            g_bz = hk_zone_create(
                &(hk_zone_desc){.memory = mem, .size = (size_t)1 << 30, .flags = nr ? HK_ZONE_NO_RUNS : 0u});
            hkb_allocator za = {"zone", bz_malloc, bz_free, bz_realloc, bz_memalign, bz_usable};
            uintptr_t base = 0;
            hk_zone_walk(g_bz, first_block, &base); /* the region starts at the first block's header */
            uintptr_t top = 0;
            trace_replay(&za, t, slots, &top);
            double ratio = (double)(top - base) / (double)t->peak_live;
            if (!nr) zr = ratio;
            hkb_record(SUITE, "fragment", nr ? "zone-noruns" : "zone", "footprint_ratio", ratio,
                       "peak high water / peak live");
            hk_zone_destroy(g_bz);
            g_bz = NULL;
        }
        munmap(mem, (size_t)1 << 30);

        subject rov = {{"quake-rover", br_malloc, br_free, br_realloc, NULL, br_usable}, SUBJ_ROVER};
        subject_open(&rov, (size_t)1 << 30);
        uintptr_t rtop = 0;
        trace_replay(&rov.a, t, slots, &rtop);
        double rr = (double)(rtop - (uintptr_t)hkb_rover_base(g_br)) / (double)t->peak_live;
        subject_close(&rov);
        hkb_record(SUITE, "fragment", "quake-rover", "footprint_ratio", rr, "peak high water / peak live");
        hkb_record(SUITE, "fragment", "zone", "ratio_vs_quake-rover", rr / zr,
                   "x (rover ratio / zone ratio)");
    }
    /* Peers (and the growing zone, for comparison): peak RSS growth in a
     * child process, every block fully written, RSS sampled every 256
     * operations. Approximate: page granularity, and memory the allocator
     * kept from earlier work is not counted. */
    subject subj[10];
    int nsub = subjects(subj, SUBJ_SET_PLAIN);
    for (int s = 0; s < nsub - 1; s++) {
        int pfd[2];
        if (pipe(pfd) != 0) exit(1);
        pid_t pid = fork();
        if (pid == 0) {
            close(pfd[0]);
            subject_open(&subj[s], 0);
            const hkb_allocator *a = &subj[s].a;
            size_t base = rss_bytes(), peak = base;
            for (size_t i = 0; i < t->n; i++) {
                const ev *e = &t->ev[i];
                if (e->op == EV_ALLOC) {
                    slots[e->slot] = a->malloc(e->size);
                    memset(slots[e->slot], 1, e->size);
                } else if (e->op == EV_FREE) {
                    a->free(slots[e->slot]);
                } else {
                    slots[e->slot] = a->realloc(slots[e->slot], e->size);
                    memset(slots[e->slot], 1, e->size);
                }
                if ((i & 255) == 0) {
                    size_t r = rss_bytes();
                    if (r > peak) peak = r;
                }
            }
            double ratio = (double)(peak - base) / (double)t->peak_live;
            if (write(pfd[1], &ratio, sizeof ratio) != sizeof ratio) _exit(1);
            _exit(0);
        }
        close(pfd[1]);
        double ratio = 0;
        ssize_t got = read(pfd[0], &ratio, sizeof ratio);
        close(pfd[0]);
        int status = 0;
        waitpid(pid, &status, 0);
        char name[64];
        snprintf(name, sizeof name, "%s%s", subj[s].a.name, subj[s].kind == SUBJ_ZONE ? " (growing)" : "");
        if (got == (ssize_t)sizeof ratio)
            hkb_record(SUITE, "fragment", name, "rss_ratio", ratio, "peak RSS growth / peak live (approx.)");
        else
            hkb_skip(SUITE, "fragment", name, "child process failed");
    }
    hkb_skip_missing(SUITE, "fragment");
    (void)ctx;
    free(slots);
}

void hkb_suite_zone(hkb_ctx *ctx);
void hkb_suite_zone(hkb_ctx *ctx) {
    trace t;
    trace_make(&t, ctx->quick, ctx->seed);
    printf("zone: frame trace of %zu operations (%zu allocations), peak live %zu bytes\n", t.n, t.allocs,
           t.peak_live);
    /* HKB_ZONE_WORKLOADS=frame,level (say) runs only those: for profiling */
    const char *only = getenv("HKB_ZONE_WORKLOADS");
    if (!only || strstr(only, "fragment")) workload_fragment(ctx, &t);
    if (!only || strstr(only, "frame")) workload_frame(ctx, &t);
    if (!only || strstr(only, "level")) workload_level(ctx);
    if (!only || strstr(only, "latency")) workload_latency(ctx);
    free(t.ev);
}

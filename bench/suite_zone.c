/*
 * bench/suite_zone.c - the zone against glibc, mimalloc, jemalloc, tcmalloc
 * and a Quake-style rover first-fit zone (bench/lib_zone_rover.c).
 *
 *  frame       a game-frame trace (frame temporaries, level-lifetime and
 *              cached blocks, 16 B - 64 KiB, a few reallocs): ns per operation
 *  level       level load/unload: hk_zone_free_tags against freeing each block
 *  latency     per-operation time distribution (p99, p99.99, max) at heap
 *              sizes from 1 MiB to 1 GiB
 *  fragment    peak footprint / peak live bytes on the frame trace
 *
 * Ratios are recorded as ratio_vs_X = X's figure / the zone's figure (so > 1
 * means the zone is faster, or uses less).
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

#define SUITE "zone"

/* ---- the zone and the rover as hkb_allocators ------------------------------ */

static hk_zone *g_bz;
static void *bz_malloc(size_t n) { return hk_zone_alloc(g_bz, n); }
static void bz_free(void *p) { hk_zone_free(g_bz, p); }
static void *bz_realloc(void *p, size_t n) { return hk_zone_realloc(g_bz, p, n); }
static void *bz_memalign(size_t a, size_t n) { return hk_zone_memalign(g_bz, a, n); }
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

enum { SUBJ_PEER, SUBJ_ZONE, SUBJ_ZONE_LOCKED, SUBJ_ZONE_FC, SUBJ_ROVER };

typedef struct subject {
    hkb_allocator a;
    int kind;
} subject;

/* The zone as the preload configures it: 1 MiB to start, growing from the OS. */
static void subject_open(const subject *s, size_t heap) {
    if (s->kind == SUBJ_ZONE || s->kind == SUBJ_ZONE_LOCKED || s->kind == SUBJ_ZONE_FC) {
        hk_zone_desc d;
        memset(&d, 0, sizeof d);
        d.size = (size_t)1 << 20;
        d.grow_size = (size_t)1 << 20;
        d.name = "bench";
        if (s->kind == SUBJ_ZONE_FC)
            d.flags = HK_ZONE_FRONT_CACHE; /* opt-in: defers merging of small blocks */
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
    if (s->kind == SUBJ_ZONE || s->kind == SUBJ_ZONE_LOCKED || s->kind == SUBJ_ZONE_FC) {
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

static int subjects(subject *out, int with_locked) {
    int n = 0;
    out[n++] = (subject){{"zone", bz_malloc, bz_free, bz_realloc, bz_memalign, bz_usable}, SUBJ_ZONE};
    if (with_locked) {
        out[n++] = (subject){{"zone+mutex", bz_malloc, bz_free, bz_realloc, bz_memalign, bz_usable},
                             SUBJ_ZONE_LOCKED};
        out[n++] = (subject){{"zone+frontcache", bz_malloc, bz_free, bz_realloc, bz_memalign, bz_usable},
                             SUBJ_ZONE_FC};
    }
    const hkb_allocator *peers;
    int np = hkb_peers(&peers);
    for (int i = 0; i < np; i++) out[n++] = (subject){peers[i], SUBJ_PEER};
    out[n++] = (subject){{"quake-rover", br_malloc, br_free, br_realloc, NULL, br_usable}, SUBJ_ROVER};
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
    int ns = subjects(subj, 1);
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
    /* the opt-in front cache (deferred merging of small blocks) against the peers */
    for (int f = 0; f < ns; f++) {
        if (subj[f].kind != SUBJ_ZONE_FC) continue;
        for (int s = 0; s < ns; s++) {
            if (subj[s].kind != SUBJ_PEER && subj[s].kind != SUBJ_ROVER) continue;
            char m[64];
            snprintf(m, sizeof m, "ratio_vs_%s", subj[s].a.name);
            hkb_record(SUITE, "frame", "zone+frontcache", m, res[s] / res[f],
                       "x (X time / zone+frontcache time)");
            snprintf(m, sizeof m, "cpu_ratio_vs_%s", subj[s].a.name);
            hkb_record(SUITE, "frame", "zone+frontcache", m, cres[s] / cres[f], "x (CPU time)");
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
    int nsub = subjects(subj, 0);
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

static void workload_latency(hkb_ctx *ctx) {
    hkb_section(SUITE, "latency",
                "per-operation time at heap sizes 1 MiB .. 1 GiB (ns; timer overhead included)");
    size_t heaps[] = {(size_t)1 << 20, (size_t)16 << 20, (size_t)256 << 20, (size_t)1 << 30};
    int nheaps = ctx->quick ? 2 : 4;
    subject subj[10];
    int nsub = subjects(subj, 0);
    size_t samples = ctx->quick ? 20000 : 100000;
    double *lat = malloc(samples * sizeof(double));
    size_t maxblocks = ((size_t)1 << 30) / 4000 + 1000;
    void **blk = malloc(maxblocks * sizeof(void *));
    size_t *bsz = malloc(maxblocks * sizeof(size_t));
    double zmax[4] = {0, 0, 0, 0}, znmax[4] = {0, 0, 0, 0};
    double *clean = malloc(samples * sizeof(double));
    for (int h = 0; h < nheaps; h++) {
        double gmax = 0, gnmax = 0;
        for (int s = 0; s < nsub; s++) {
            int reps = ctx->reps < 3 ? ctx->reps : 3;
            if (heaps[h] >= ((size_t)256 << 20)) reps = 1;
            double p99[3], p9999[3], mx[3], c99[3] = {0, 0, 0}, c9999[3] = {0, 0, 0}, cmx[3] = {0, 0, 0},
                                            faulted[3];
            size_t taken = 0;
            for (int k = 0; k < reps; k++) {
                uint64_t r = ctx->seed + (uint64_t)h * 7919;
                subject_open(&subj[s], heaps[h] * 2 + ((size_t)64 << 20));
                const hkb_allocator *a = &subj[s].a;
                size_t nb = 0, live = 0;
                while (live < heaps[h] && nb < maxblocks) {
                    size_t n = (size_t)rnd_logu(&r, 16, 65536);
                    blk[nb] = a->malloc(n);
                    if (!blk[nb]) exit(1);
                    ((char *)blk[nb])[0] = 1;
                    bsz[nb++] = n;
                    live += n;
                }
                /* warm-up churn (untimed) so that every allocator runs on memory
                 * it already has from the OS, then the timed churn: free a
                 * random block, allocate a random size */
                uint64_t budget = hkb_now_ns() + (uint64_t)2e9; /* the rover can take long */
                for (size_t w = 0; w < samples / 2; w++) {
                    size_t j = (size_t)(hkb_rand(&r) % nb);
                    a->free(blk[j]);
                    blk[j] = a->malloc((size_t)rnd_logu(&r, 16, 65536));
                    if (!blk[j]) exit(1);
                    ((char *)blk[j])[0] = 1;
                    if ((w & 1023) == 0 && hkb_now_ns() > budget) break;
                }
                /* Each operation's page faults are counted (outside the timed
                 * window) so that the figures can also be given without the
                 * operations that took one: a first touch of fresh memory
                 * costs the same whichever allocator asked for it. */
                budget = hkb_now_ns() + (uint64_t)4e9;
                size_t i, nf = 0;
                long f0 = lat_faults();
                for (i = 0; i < samples; i++) {
                    size_t j = (size_t)(hkb_rand(&r) % nb);
                    size_t n = (size_t)rnd_logu(&r, 16, 65536);
                    uint64_t t0 = hkb_now_ns();
                    a->free(blk[j]);
                    uint64_t t1 = hkb_now_ns();
                    long f1 = lat_faults();
                    uint64_t t2 = hkb_now_ns();
                    void *p = a->malloc(n);
                    uint64_t t3 = hkb_now_ns();
                    long f2 = lat_faults();
                    if (!p) exit(1);
                    ((char *)p)[0] = 1; /* a fault here is the program's, not the allocator's */
                    blk[j] = p;
                    lat[i] = (double)(t3 - t2);
                    if (f2 == f1) clean[nf++] = lat[i];
                    if (i + 1 < samples) {
                        lat[++i] = (double)(t1 - t0);
                        if (f1 == f0) clean[nf++] = lat[i];
                    }
                    f0 = lat_faults();
                    if ((i & 1023) == 0 && t3 > budget) break;
                }
                taken = i < samples ? i + 1 : samples;
                qsort(lat, taken, sizeof(double), cmp_dbl);
                p99[k] = lat[(size_t)(0.99 * (double)(taken - 1))];
                p9999[k] = lat[(size_t)(0.9999 * (double)(taken - 1))];
                mx[k] = lat[taken - 1];
                faulted[k] = (double)(taken - nf);
                if (nf) {
                    qsort(clean, nf, sizeof(double), cmp_dbl);
                    c99[k] = clean[(size_t)(0.99 * (double)(nf - 1))];
                    c9999[k] = clean[(size_t)(0.9999 * (double)(nf - 1))];
                    cmx[k] = clean[nf - 1];
                }
                for (size_t q = 0; q < nb; q++) a->free(blk[q]);
                subject_close(&subj[s]);
            }
            char wl[48];
            snprintf(wl, sizeof wl, "latency_%zuMiB", heaps[h] >> 20);
            double m99 = hkb_median(p99, reps), m9999 = hkb_median(p9999, reps), mmax = hkb_median(mx, reps);
            hkb_record(SUITE, wl, subj[s].a.name, "p99", m99, "ns");
            hkb_record(SUITE, wl, subj[s].a.name, "p99.99", m9999, "ns");
            hkb_record(SUITE, wl, subj[s].a.name, "max", mmax, "ns");
            double n99 = hkb_median(c99, reps), n9999 = hkb_median(c9999, reps), nmax = hkb_median(cmx, reps);
            hkb_record(SUITE, wl, subj[s].a.name, "faulting_ops", hkb_median(faulted, reps),
                       "ops with a page fault inside the allocator call");
            hkb_record(SUITE, wl, subj[s].a.name, "nofault_p99", n99, "ns (ops without a page fault)");
            hkb_record(SUITE, wl, subj[s].a.name, "nofault_p99.99", n9999, "ns");
            hkb_record(SUITE, wl, subj[s].a.name, "nofault_max", nmax, "ns");
            if (taken < samples)
                hkb_record(SUITE, wl, subj[s].a.name, "samples", (double)taken, "ops (time budget)");
            if (subj[s].kind == SUBJ_ZONE) {
                zmax[h] = mmax;
                znmax[h] = nmax;
            }
            if (!strcmp(subj[s].a.name, "glibc")) {
                gmax = mmax;
                gnmax = nmax;
            }
        }
        char wl[48];
        snprintf(wl, sizeof wl, "latency_%zuMiB", heaps[h] >> 20);
        if (gmax > 0)
            hkb_record(SUITE, wl, "zone", "max_ratio_vs_glibc", gmax / zmax[h], "x (glibc max / zone max)");
        if (gnmax > 0 && znmax[h] > 0)
            hkb_record(SUITE, wl, "zone", "nofault_max_ratio_vs_glibc", gnmax / znmax[h],
                       "x (glibc max / zone max, ops without a page fault)");
        hkb_skip_missing(SUITE, wl);
    }
    if (nheaps > 1 && zmax[0] > 0)
        hkb_record(SUITE, "latency", "zone", "max_growth_largest_vs_1MiB", zmax[nheaps - 1] / zmax[0],
                   "x (zone max at the largest heap / at 1 MiB)");
    if (nheaps > 1 && znmax[0] > 0)
        hkb_record(SUITE, "latency", "zone", "nofault_max_growth_largest_vs_1MiB",
                   znmax[nheaps - 1] / znmax[0], "x (same, ops without a page fault)");
    free(clean);
    free(lat);
    free(blk);
    free(bsz);
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
        g_bz = hk_zone_create(&(hk_zone_desc){.memory = mem, .size = (size_t)1 << 30});
        hkb_allocator za = {"zone", bz_malloc, bz_free, bz_realloc, bz_memalign, bz_usable};
        uintptr_t base = 0;
        hk_zone_walk(g_bz, first_block, &base); /* the region starts at the first block's header */
        uintptr_t top = 0;
        trace_replay(&za, t, slots, &top);
        double zr = (double)(top - base) / (double)t->peak_live;
        hkb_record(SUITE, "fragment", "zone", "footprint_ratio", zr, "peak high water / peak live");
        hk_zone_destroy(g_bz);
        g_bz = NULL;
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
    int nsub = subjects(subj, 0);
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

/*
 * bench/zone_common.c - suite zone's subjects (the zone and its variants as
 * hkb_allocators, the peers, the Quake-style rover) and the game-frame trace
 * (made from a seed, replayed on any subject).
 *
 * Invariants: the trace is deterministic for (quick, seed) and frees every
 * block it allocates; the zone subjects are created as libheapkit-malloc.so
 * creates its zone (1 MiB, growing by 1 MiB chunks) unless a variant says
 * otherwise.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "zone_bench.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>

/* ---- the zone and the rover as hkb_allocators ------------------------------ */

hk_zone *g_bz;
void *bz_malloc(size_t n) { return hk_zone_alloc(g_bz, n); }
void bz_free(void *p) { hk_zone_free(g_bz, p); }
void *bz_realloc(void *p, size_t n) { return hk_zone_realloc(g_bz, p, n); }
void *bz_memalign(size_t a, size_t n) { return hk_zone_alloc_aligned(g_bz, a, n); }
size_t bz_usable(void *p) { return hk_zone_usable_size(g_bz, p); }

static pthread_mutex_t g_bz_mutex = PTHREAD_MUTEX_INITIALIZER;
static void bz_lock(void *u) {
    (void)u;
    pthread_mutex_lock(&g_bz_mutex);
}
static void bz_unlock(void *u) {
    (void)u;
    pthread_mutex_unlock(&g_bz_mutex);
}

hkb_rover *g_br;
void *g_br_mem;
size_t g_br_size;
void *br_malloc(size_t n) { return hkb_rover_alloc(g_br, n, 1); }
void br_free(void *p) { hkb_rover_free(g_br, p); }
void *br_realloc(void *p, size_t n) { return hkb_rover_realloc(g_br, p, n); }
size_t br_usable(void *p) { return hkb_rover_usable(g_br, p); }

int subj_is_zone(int kind) { return kind >= SUBJ_ZONE && kind <= SUBJ_ZONE_PF; }

/* The zone as the preload configures it: 1 MiB to start, growing from the OS. */
void subject_open(const subject *s, size_t heap) {
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

void subject_close(const subject *s) {
    if (subj_is_zone(s->kind)) {
        hk_zone_destroy(g_bz);
        g_bz = NULL;
    } else if (s->kind == SUBJ_ROVER) {
        munmap(g_br_mem, g_br_size);
        g_br = NULL;
    }
}

subject_state subject_save(void) { return (subject_state){g_bz, g_br, g_br_mem, g_br_size}; }
void subject_restore(subject_state s) {
    g_bz = s.bz;
    g_br = s.br;
    g_br_mem = s.br_mem;
    g_br_size = s.br_size;
}

/* The subjects of a workload: the zone, the variants of `set`, the peers,
 * the rover. */
int subjects(subject *out, int set) {
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

double rnd_logu(uint64_t *r, double lo, double hi) {
    double u = (double)(hkb_rand(r) >> 11) * (1.0 / 9007199254740992.0);
    return exp(log(lo) + u * (log(hi) - log(lo)));
}

/* ---- the game-frame trace ---------------------------------------------------- */

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

void trace_make(trace *t, int quick, uint64_t seed) {
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

/* Page faults so far (minor and major) for this process. */
long lat_faults(void) {
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

double g_replay_cpu; /* CPU ns per operation of the last replay */

/* Replays the trace; returns ns per operation (wall), g_replay_cpu gets the
 * CPU ns per operation. With `top` set, *top tracks the highest byte used
 * (address-space high water). */
double trace_replay(const hkb_allocator *a, const trace *t, void **slots, uintptr_t *top) {
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

/*
 * tools/replay.c - plays a trace against an allocator (tools/replay.h).
 *
 * Invariants: slot[obj] is NULL until object obj is allocated, then its
 * block (or REPLAY_FAILED when the allocator returned NULL), published with
 * release order so that another thread's free of it sees the block; each
 * replay thread runs its recorded thread's events in their order, and waits
 * only for an object allocated by an earlier event of the trace, so the
 * recorded run is itself a schedule that finishes: no deadlock.
 */
#include "replay.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPLAY_FAILED ((void *)1)
#define REPLAY_PAGE   4096u

typedef struct replay {
    const hkt_trace *t;
    const hkb_allocator *a;
    void **slot;
    uint64_t failed;
    int go;
} replay;

typedef struct replay_thread {
    replay *r;
    size_t *idx; /* this thread's events */
    size_t n;
    uint64_t failed;
    pthread_t th;
} replay_thread;

/* A write to every page of the block, as the program's use of it would. */
static void touch(void *p, uint64_t n) {
    volatile unsigned char *c = p;
    for (uint64_t i = 0; i < n; i += REPLAY_PAGE) c[i] = 1;
}

static void *wait_slot(void **slot) {
    void *p;
    unsigned spins = 0;
    while (!(p = __atomic_load_n(slot, __ATOMIC_ACQUIRE)))
        if (++spins > 64) sched_yield();
    return p;
}

static uint64_t run_event(const replay *r, const hkt_event *e) {
    const hkb_allocator *a = r->a;
    void *p;
    switch (e->kind) {
    case HKT_EV_ALLOC:
        if (e->align && a->memalign)
            p = a->memalign(e->align < sizeof(void *) ? sizeof(void *) : e->align, (size_t)e->size);
        else
            p = a->malloc((size_t)e->size);
        if (p) {
            if (e->fn == HKT_FN_CALLOC)
                memset(p, 0, (size_t)e->size);
            else
                touch(p, e->size);
        }
        __atomic_store_n(&r->slot[e->obj], p ? p : REPLAY_FAILED, __ATOMIC_RELEASE);
        return p ? 0 : 1;
    case HKT_EV_FREE:
        p = wait_slot(&r->slot[e->obj]);
        if (p != REPLAY_FAILED) a->free(p);
        return 0;
    case HKT_EV_REALLOC:
        p = wait_slot(&r->slot[e->old]);
        if (p == REPLAY_FAILED) p = NULL;
        p = a->realloc(p, (size_t)e->size);
        __atomic_store_n(&r->slot[e->obj], p ? p : REPLAY_FAILED, __ATOMIC_RELEASE);
        return p ? 0 : 1;
    }
    return 0;
}

static void *thread_main(void *arg) {
    replay_thread *rt = arg;
    while (!__atomic_load_n(&rt->r->go, __ATOMIC_ACQUIRE)) sched_yield();
    uint64_t failed = 0;
    for (size_t i = 0; i < rt->n; i++) failed += run_event(rt->r, &rt->r->t->events[rt->idx[i]]);
    rt->failed = failed;
    return NULL;
}

/* Resident and peak-resident bytes from /proc/self/status. */
static void read_rss(uint64_t *rss, uint64_t *hwm) {
    *rss = *hwm = 0;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return;
    char line[256];
    unsigned long long v;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "VmRSS: %llu kB", &v) == 1) *rss = v * 1024;
        if (sscanf(line, "VmHWM: %llu kB", &v) == 1) *hwm = v * 1024;
    }
    fclose(f);
}

/* Resets the kernel's peak-resident mark to the current size (Linux 4.0+). */
static int reset_hwm(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return 0;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

int hkr_replay(const hkt_trace *t, const hkb_allocator *a, int one_thread, hkr_result *out) {
    memset(out, 0, sizeof *out);
    replay r = {t, a, NULL, 0, 0};
    r.slot = calloc((size_t)t->nobjects + 1, sizeof *r.slot);
    uint32_t nth = one_thread || t->nthreads == 0 ? 1 : t->nthreads;
    replay_thread *th = calloc(nth, sizeof *th);
    size_t *counts = calloc(nth + 1, sizeof *counts);
    size_t *all = malloc((t->nevents ? t->nevents : 1) * sizeof *all);
    int rc = -1;
    if (!r.slot || !th || !counts || !all) goto done;
    memset(r.slot, 0, ((size_t)t->nobjects + 1) * sizeof *r.slot); /* resident before the measurement */
    for (size_t i = 0; i < t->nevents; i++) counts[one_thread ? 0 : t->events[i].thread - 1u]++;
    size_t at = 0;
    for (uint32_t k = 0; k < nth; k++) {
        th[k].r = &r;
        th[k].idx = all + at;
        at += counts[k];
    }
    for (size_t i = 0; i < t->nevents; i++) {
        replay_thread *x = &th[one_thread ? 0 : t->events[i].thread - 1u];
        x->idx[x->n++] = i;
    }
    uint32_t started = 0;
    for (; started < nth; started++)
        if (th[started].n && pthread_create(&th[started].th, NULL, thread_main, &th[started]) != 0) break;
    int measured = reset_hwm();
    uint64_t rss0, hwm;
    read_rss(&rss0, &hwm);
    uint64_t t0 = hkb_now_ns();
    __atomic_store_n(&r.go, started == nth, __ATOMIC_RELEASE);
    if (started < nth) __atomic_store_n(&r.go, 1, __ATOMIC_RELEASE); /* let the started ones finish */
    for (uint32_t k = 0; k < started; k++)
        if (th[k].n) pthread_join(th[k].th, NULL);
    out->time_ns = hkb_now_ns() - t0;
    uint64_t rss1;
    read_rss(&rss1, &hwm);
    out->peak_rss = measured && hwm > rss0 ? hwm - rss0 : 0;
    out->ops = t->nevents;
    for (uint32_t k = 0; k < nth; k++) out->failed += th[k].failed;
    rc = started == nth ? 0 : -1;
done:
    free(r.slot);
    free(th);
    free(counts);
    free(all);
    return rc;
}

/* ---- the zone, set up as libheapkit-malloc.so sets it up ------------------- */

static hk_zone *g_replay_zone;
static pthread_mutex_t g_replay_zone_mu = PTHREAD_MUTEX_INITIALIZER;
static void zone_lock(void *u) {
    (void)u;
    pthread_mutex_lock(&g_replay_zone_mu);
}
static void zone_unlock(void *u) {
    (void)u;
    pthread_mutex_unlock(&g_replay_zone_mu);
}
static void *zone_malloc(size_t n) { return hk_zone_alloc(g_replay_zone, n); }
static void zone_free(void *p) { (void)hk_zone_free(g_replay_zone, p); }
static void *zone_realloc(void *p, size_t n) { return hk_zone_realloc(g_replay_zone, p, n); }
static void *zone_memalign(size_t a, size_t n) { return hk_zone_alloc_aligned(g_replay_zone, a, n); }
static size_t zone_usable(void *p) { return hk_zone_usable_size(g_replay_zone, p); }

int hkr_allocator(const char *name, hkb_allocator *out, char *why, size_t whyn) {
    memset(out, 0, sizeof *out);
    if (strcmp(name, "zone") == 0) {
        if (!g_replay_zone) {
            hk_zone_desc d;
            memset(&d, 0, sizeof d);
            d.size = (size_t)1 << 20;
            d.grow_size = (size_t)1 << 20;
            d.name = "replay";
            d.flags = HK_FLAG_QUIET;
            d.lock.lock = zone_lock;
            d.lock.unlock = zone_unlock;
            g_replay_zone = hk_zone_create(&d);
        }
        if (!g_replay_zone) {
            snprintf(why, whyn, "hk_zone_create failed");
            return -1;
        }
        *out = (hkb_allocator){"zone", zone_malloc, zone_free, zone_realloc, zone_memalign, zone_usable};
        return 0;
    }
    const hkb_allocator *peers;
    int n = hkb_peers(&peers);
    for (int i = 0; i < n; i++)
        if (strcmp(peers[i].name, name) == 0) {
            *out = peers[i];
            return 0;
        }
    const char **miss, **reasons;
    int nm = hkb_missing_peers(&miss, &reasons);
    for (int i = 0; i < nm; i++)
        if (strcmp(miss[i], name) == 0) {
            snprintf(why, whyn, "%s", reasons[i]);
            return -1;
        }
    snprintf(why, whyn, "unknown allocator (zone, glibc, mimalloc, jemalloc, tcmalloc)");
    return -1;
}

void hkr_zone_until(const hkt_trace *t, size_t upto, hk_zone *z) {
    void **slot = calloc((size_t)t->nobjects + 1, sizeof *slot);
    if (!slot) return;
    if (upto > t->nevents) upto = t->nevents;
    for (size_t i = 0; i < upto; i++) {
        const hkt_event *e = &t->events[i];
        void *p = NULL;
        if (e->kind == HKT_EV_FREE) {
            if (slot[e->obj]) hk_zone_free(z, slot[e->obj]);
            continue;
        }
        if (e->kind == HKT_EV_REALLOC)
            p = slot[e->old] ? hk_zone_realloc(z, slot[e->old], (size_t)e->size) : hk_zone_alloc(z, (size_t)e->size);
        else if (e->align)
            p = hk_zone_alloc_aligned(z, e->align, (size_t)e->size);
        else
            p = hk_zone_alloc(z, (size_t)e->size);
        slot[e->obj] = p;
    }
    free(slot);
}

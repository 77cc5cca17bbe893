/*
 * tools/analysis.c - one pass over a trace's events (tools/analysis.h).
 *
 * Invariants during the scan: live == sum of the sizes of blocks allocated
 * and not yet freed (a realloc frees its old block and allocates its new
 * one at the same instant); each site's live is the same sum over its own
 * blocks; a block is "temporary" when its thread made no allocation
 * between its allocation and its free (heaptrack's definition).
 */
#include "analysis.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct obj_info {
    uint64_t size, ts;
    uint32_t stack;
    uint32_t thread_seq; /* the thread's allocation count when it was made */
} obj_info;

static unsigned size_bucket(uint64_t n) {
    unsigned b = 0;
    while (n && b < HKA_SIZE_BUCKETS - 1) {
        n >>= 1;
        b++;
    }
    return b;
}

static unsigned life_bucket(uint64_t ns) {
    unsigned b = 0;
    while (ns >= 10 && b < HKA_LIFE_BUCKETS - 2) {
        ns /= 10;
        b++;
    }
    return b;
}

static size_t curve_slot(const hkt_trace *t, uint64_t ts) {
    uint64_t span = t->end_ns ? t->end_ns : 1;
    uint64_t s = (uint64_t)((double)ts / (double)span * (HKA_CURVE_POINTS - 1));
    return s >= HKA_CURVE_POINTS ? HKA_CURVE_POINTS - 1 : (size_t)s;
}

/* The scan; with `track` set, also fills the curves of a->curve_sites.
 * ends[0] (untracked scan) or ends[1 + k] (tracked) receive, per bucket, the
 * level after the bucket's last event. */
static int scan(const hkt_trace *t, hka *a, int track, uint64_t (*ends)[HKA_CURVE_POINTS]) {
    obj_info *objs = calloc((size_t)t->nobjects + 1, sizeof *objs);
    uint32_t *thread_allocs = calloc((size_t)t->nthreads + 1, sizeof *thread_allocs);
    if (!objs || !thread_allocs) {
        free(objs);
        free(thread_allocs);
        return -1;
    }
    uint64_t live = 0, blocks = 0;
    for (size_t i = 0; i < t->nevents; i++) {
        const hkt_event *e = &t->events[i];
        if (e->kind == HKT_EV_FREE || e->kind == HKT_EV_REALLOC) {
            uint32_t id = e->kind == HKT_EV_FREE ? e->obj : e->old;
            obj_info *o = &objs[id];
            live -= o->size;
            blocks--;
            a->sites[o->stack].live -= o->size;
            if (!track) {
                a->life_hist[life_bucket(e->ts - o->ts)]++;
                if (e->kind == HKT_EV_FREE) {
                    a->frees++;
                    if (thread_allocs[e->thread] == o->thread_seq) {
                        a->temporary++;
                        a->sites[o->stack].temporary++;
                    }
                }
            }
        }
        if (e->kind == HKT_EV_ALLOC || e->kind == HKT_EV_REALLOC) {
            obj_info *o = &objs[e->obj];
            o->size = e->size;
            o->ts = e->ts;
            o->stack = e->stack;
            o->thread_seq = ++thread_allocs[e->thread];
            live += e->size;
            blocks++;
            hka_site *s = &a->sites[e->stack];
            s->live += e->size;
            if (!track) {
                if (e->kind == HKT_EV_ALLOC)
                    a->allocs++;
                else
                    a->reallocs++;
                a->bytes_allocated += e->size;
                a->size_hist[size_bucket(e->size)]++;
                s->allocs++;
                s->bytes += e->size;
                if (s->live > s->peak) s->peak = s->live;
                if (live > a->peak_live) {
                    a->peak_live = live;
                    a->peak_blocks = blocks;
                    a->peak_ts = e->ts;
                    a->peak_event = i;
                }
            }
        }
        size_t slot = curve_slot(t, e->ts);
        if (!track) {
            if (live > a->curve[slot]) a->curve[slot] = live;
            ends[0][slot] = live;
        } else {
            for (int k = 0; k < a->ncurve_sites; k++) {
                uint64_t v = a->sites[a->curve_sites[k]].live;
                if (v > a->site_curve[k][slot]) a->site_curve[k][slot] = v;
                ends[1 + k][slot] = v;
            }
        }
    }
    if (!track) {
        a->end_live = live;
        a->end_blocks = blocks;
        for (uint32_t k = 0; k < a->nsites; k++) a->sites[k].leaked = a->sites[k].live;
        /* leaked blocks per site: the objects never freed */
        uint8_t *freed = calloc((size_t)t->nobjects + 1, 1);
        if (freed) {
            for (size_t i = 0; i < t->nevents; i++) {
                const hkt_event *e = &t->events[i];
                if (e->kind == HKT_EV_FREE) freed[e->obj] = 1;
                if (e->kind == HKT_EV_REALLOC) freed[e->old] = 1;
            }
            for (uint32_t id = 1; id <= t->nobjects; id++)
                if (!freed[id]) {
                    a->sites[objs[id].stack].leaked_blocks++;
                    a->life_hist[HKA_LIFE_BUCKETS - 1]++;
                }
            free(freed);
        }
    }
    free(objs);
    free(thread_allocs);
    return 0;
}

int hka_analyze(const hkt_trace *t, hka *a) {
    memset(a, 0, sizeof *a);
    a->nsites = t->nstacks ? t->nstacks : 1;
    a->sites = calloc(a->nsites, sizeof *a->sites);
    uint64_t(*ends)[HKA_CURVE_POINTS] = calloc(1 + HKA_TOP_CURVES, sizeof *ends);
    if (!a->sites || !ends) {
        free(ends);
        hka_free(a);
        return -1;
    }
    for (uint32_t i = 0; i < a->nsites; i++) a->sites[i].stack = i;
    /* the peak must be known before sites' at_peak can be taken: two passes */
    if (scan(t, a, 0, ends) != 0) {
        free(ends);
        return -1;
    }
    for (uint32_t i = 0; i < a->nsites; i++) a->sites[i].live = 0;
    {
        /* at_peak: each site's live bytes once the peak event is done */
        uint64_t *sz = calloc((size_t)t->nobjects + 1, sizeof *sz);
        uint32_t *st = calloc((size_t)t->nobjects + 1, sizeof *st);
        if (!sz || !st) {
            free(sz);
            free(st);
            free(ends);
            return -1;
        }
        size_t end = t->nevents ? a->peak_event + 1 : 0;
        for (size_t i = 0; i < end; i++) {
            const hkt_event *e = &t->events[i];
            if (e->kind != HKT_EV_ALLOC) {
                uint32_t id = e->kind == HKT_EV_FREE ? e->obj : e->old;
                a->sites[st[id]].at_peak -= sz[id];
            }
            if (e->kind != HKT_EV_FREE) {
                sz[e->obj] = e->size;
                st[e->obj] = e->stack;
                a->sites[e->stack].at_peak += e->size;
            }
        }
        free(sz);
        free(st);
    }
    uint32_t top[HKA_TOP_CURVES];
    a->ncurve_sites = (int)hka_top_sites(a, HKA_BY_PEAK, top, HKA_TOP_CURVES);
    memcpy(a->curve_sites, top, sizeof top);
    for (uint32_t i = 0; i < a->nsites; i++) a->sites[i].live = 0;
    if (scan(t, a, 1, ends) != 0) {
        free(ends);
        return -1;
    }
    for (size_t i = 0; i < HKA_CURVE_POINTS; i++)
        a->curve_t[i] = (uint64_t)((double)(t->end_ns ? t->end_ns : 1) * (double)i / (HKA_CURVE_POINTS - 1));
    /* a bucket no event fell in holds the level left by the last event
     * before it (a step function), not that bucket's maximum: a peak freed
     * just before an idle stretch must not be drawn across it */
    uint64_t *curves[1 + HKA_TOP_CURVES];
    curves[0] = a->curve;
    for (int k = 0; k < a->ncurve_sites; k++) curves[1 + k] = a->site_curve[k];
    uint8_t seen[HKA_CURVE_POINTS] = {0};
    for (size_t i = 0; i < t->nevents; i++) seen[curve_slot(t, t->events[i].ts)] = 1;
    for (int k = 0; k <= a->ncurve_sites; k++) {
        uint64_t level = 0;
        for (size_t i = 0; i < HKA_CURVE_POINTS; i++) {
            if (seen[i])
                level = ends[k][i];
            else
                curves[k][i] = level;
        }
    }
    free(ends);
    return 0;
}

void hka_free(hka *a) {
    free(a->sites);
    memset(a, 0, sizeof *a);
}

static const hka *g_sort_a;
static hka_order g_sort_by;

static uint64_t key(const hka_site *s, hka_order by) {
    switch (by) {
    case HKA_BY_PEAK: return s->peak;
    case HKA_BY_COUNT: return s->allocs;
    case HKA_BY_TEMPORARY: return s->temporary;
    case HKA_BY_LEAKED: return s->leaked;
    }
    return 0;
}

static int cmp_site(const void *x, const void *y) {
    uint64_t a = key(&g_sort_a->sites[*(const uint32_t *)x], g_sort_by);
    uint64_t b = key(&g_sort_a->sites[*(const uint32_t *)y], g_sort_by);
    if (a != b) return a > b ? -1 : 1;
    return (*(const uint32_t *)x > *(const uint32_t *)y) - (*(const uint32_t *)x < *(const uint32_t *)y);
}

size_t hka_top_sites(const hka *a, hka_order by, uint32_t *out, size_t max) {
    uint32_t *idx = malloc((a->nsites ? a->nsites : 1) * sizeof *idx);
    if (!idx) return 0;
    size_t n = 0;
    for (uint32_t i = 0; i < a->nsites; i++)
        if (key(&a->sites[i], by)) idx[n++] = i;
    g_sort_a = a;
    g_sort_by = by;
    qsort(idx, n, sizeof *idx, cmp_site);
    if (n > max) n = max;
    memcpy(out, idx, n * sizeof *idx);
    free(idx);
    return n;
}

const char *hka_bytes(uint64_t n, char *buf, size_t bufn) {
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, bufn, "%llu B", (unsigned long long)n);
    else
        snprintf(buf, bufn, "%.1f %s", v, unit[u]);
    return buf;
}

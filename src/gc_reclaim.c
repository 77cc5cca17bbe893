/*
 * src/gc_reclaim.c - reclamation: the decrement that queues garbage, the
 * backlog drained with its cascades, allocation-debt pacing, the budgeted
 * incremental step, the full pass with Bacon and Rajan's trial-deletion
 * cycle collector, the mode switch and the step timing statistics.
 *
 * Reclamation order: the backlog is a FIFO queue. Reclaiming an object
 * releases its children; a child that reaches zero is appended to the same
 * queue (the cascade worklist). So each object is queued once and examined
 * once: a drain is linear in objects + references, and a step's cursor (the
 * queue head) moves forward by one object for every object examined.
 *
 * Cycle collection (Bacon & Rajan 2001, synchronous): a release that leaves
 * a non-zero count makes the object a PURPLE candidate. A full pass runs
 * MarkGray (trial-decrement every reference inside the subgraph reachable
 * from the candidates), Scan (objects still externally referenced turn
 * BLACK and restore their children's counts; the rest turn WHITE) and
 * CollectWhite (WHITE objects are garbage cycles: finalized and freed
 * without releasing children, whose counts already exclude them). The three
 * traversals use intrusive stacks (wnext, bnext), never recursion, and each
 * object is pushed at most once per traversal.
 *
 * Invariants kept here: outside a pass every object is BLACK or a PURPLE
 * candidate; a PENDING object is on the backlog and nowhere else; the step
 * histogram counts every step once.
 */
#include "gc_internal.h"

#include <stdio.h>

/* ---- tracing --------------------------------------------------------------- */

enum { GC_V_RELEASE, GC_V_MARK_GRAY, GC_V_SCAN, GC_V_SCAN_BLACK, GC_V_COLLECT_WHITE, GC_V_COUNT };

typedef struct gc_visit_ctx {
    hk_gc *gc;
    gc_hdr *parent;
    int mode;
    gc_hdr *stack; /* the traversal's stack top (wnext or bnext chain) */
} gc_visit_ctx;

static void gc_visit(hk_gc_obj *child, void *vctx) {
    gc_visit_ctx *v = (gc_visit_ctx *)vctx;
    hk_gc *gc = v->gc;
    if (!child) return;
    gc_hdr *c = gc_find(gc, child);
    if (!c || c->state != GC_LIVE) {
        if (v->mode == GC_V_RELEASE) {
            const char *what = c ? "an object whose count is already zero" : hk__gc_ref_what(gc, child);
            hk__report(&gc->core.rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, child, 0, gc_tname(v->parent),
                       "object %p (%s) being reclaimed references %p, %s; reference ignored",
                       (void *)gc_ref_of(v->parent), gc_tname(v->parent), (void *)child, what);
        }
        return;
    }
    switch (v->mode) {
    case GC_V_RELEASE: hk__gc_decref(gc, c); break;
    case GC_V_MARK_GRAY:
        if (c->rc) c->rc--;
        if (c->color != GC_GRAY) {
            c->color = GC_GRAY;
            c->wnext = v->stack;
            v->stack = c;
        }
        break;
    case GC_V_SCAN:
        if (c->color == GC_GRAY && !c->queued) {
            c->queued = 1;
            c->wnext = v->stack;
            v->stack = c;
        }
        break;
    case GC_V_SCAN_BLACK:
        c->rc++;
        if (c->color != GC_BLACK) {
            c->color = GC_BLACK;
            c->bnext = v->stack;
            v->stack = c;
        }
        break;
    case GC_V_COLLECT_WHITE:
        if (c->color == GC_WHITE && !c->buffered) {
            c->color = GC_BLACK;
            c->wnext = v->stack;
            v->stack = c;
        }
        break;
    case GC_V_COUNT:
        if (!c->queued) {
            c->queued = 1;
            c->wnext = v->stack;
            v->stack = c;
            c->bnext = v->parent; /* the seen chain (collect step), headed by v->parent */
            v->parent = c;
        }
        break;
    default: break;
    }
}

static void gc_trace_mode(hk_gc *gc, gc_hdr *o, gc_visit_ctx *v) {
    v->parent = o;
    gc_trace(gc, o, gc_visit, v);
}

/* ---- reference counting ---------------------------------------------------- */

void hk__gc_decref(hk_gc *gc, gc_hdr *c) {
    if (--c->rc == 0) {
        if (c->buffered) {
            gc_list_remove(&gc->candidates, c);
            c->buffered = 0;
        }
        c->color = GC_BLACK;
        c->state = GC_PENDING;
        gc_list_push(&gc->backlog, c);
    } else if (c->color != GC_PURPLE) {
        c->color = GC_PURPLE;
        if (!c->buffered) {
            c->buffered = 1;
            gc_list_push(&gc->candidates, c);
        }
    }
}

/* Reclaims backlog object o (already unlinked): releases its children (they
 * join the backlog's tail when they reach zero), finalizes, frees. */
static void gc_reclaim(hk_gc *gc, gc_hdr *o) {
    gc_visit_ctx v = {gc, o, GC_V_RELEASE, NULL};
    o->state = GC_DYING;
    gc_trace_mode(gc, o, &v);
    gc_finalize(gc, o);
    hk__gc_free_object(gc, o);
}

size_t hk__gc_drain(hk_gc *gc) {
    size_t n = 0;
    gc_hdr *o;
    gc->draining++;
    while ((o = gc_list_pop(&gc->backlog)) != NULL) {
        gc_reclaim(gc, o);
        n++;
    }
    gc->draining--;
    return n;
}

static size_t gc_cost(const gc_hdr *o) { return sizeof(gc_hdr) + o->size; }

void hk__gc_pace(hk_gc *gc) {
    size_t debt = gc->debt, goal, done = 0;
    gc->debt = 0;
    if (!hk_size_mul(debt / 100, gc->pace_percent, &goal))
        goal = SIZE_MAX;
    else if (!hk_size_add(goal, debt % 100 * gc->pace_percent / 100, &goal))
        goal = SIZE_MAX;
    gc->paced_steps++;
    gc_hdr *o;
    gc->draining++;
    while (done < goal && (o = gc_list_pop(&gc->backlog)) != NULL) {
        done += gc_cost(o);
        gc_reclaim(gc, o);
        gc->paced_objects++;
    }
    gc->draining--;
}

/* ---- cycle collection (trial deletion) -------------------------------------- */

static void gc_mark_gray(hk_gc *gc, gc_hdr *s) {
    gc_visit_ctx v = {gc, NULL, GC_V_MARK_GRAY, NULL};
    s->color = GC_GRAY;
    s->wnext = NULL;
    v.stack = s;
    while (v.stack) {
        gc_hdr *x = v.stack;
        v.stack = x->wnext;
        gc_trace_mode(gc, x, &v);
    }
}

static void gc_scan_black(hk_gc *gc, gc_hdr *s) {
    gc_visit_ctx v = {gc, NULL, GC_V_SCAN_BLACK, NULL};
    s->color = GC_BLACK;
    s->bnext = NULL;
    v.stack = s;
    while (v.stack) {
        gc_hdr *x = v.stack;
        v.stack = x->bnext;
        gc_trace_mode(gc, x, &v);
    }
}

static void gc_scan(hk_gc *gc, gc_hdr *s) {
    if (s->color != GC_GRAY || s->queued) return;
    gc_visit_ctx v = {gc, NULL, GC_V_SCAN, NULL};
    s->queued = 1;
    s->wnext = NULL;
    v.stack = s;
    while (v.stack) {
        gc_hdr *x = v.stack;
        v.stack = x->wnext;
        x->queued = 0;
        if (x->color != GC_GRAY) continue;
        if (x->rc > 0) {
            gc_hdr *saved = v.stack;
            gc_scan_black(gc, x);
            v.stack = saved;
        } else {
            x->color = GC_WHITE;
            gc_trace_mode(gc, x, &v);
        }
    }
}

static void gc_collect_white(hk_gc *gc, gc_hdr *s, gc_list *dead) {
    if (s->color != GC_WHITE || s->buffered) return;
    gc_visit_ctx v = {gc, NULL, GC_V_COLLECT_WHITE, NULL};
    s->color = GC_BLACK;
    s->wnext = NULL;
    v.stack = s;
    while (v.stack) {
        gc_hdr *x = v.stack;
        v.stack = x->wnext;
        gc_list_push(dead, x);
        gc_trace_mode(gc, x, &v);
    }
}

static size_t gc_cycles(hk_gc *gc) {
    gc_hdr *s, *nx;
    /* MarkRoots: trial-delete from every purple candidate; drop the others. */
    for (s = gc->candidates.head; s; s = nx) {
        nx = s->next;
        if (s->color == GC_PURPLE) {
            gc_mark_gray(gc, s);
        } else {
            gc_list_remove(&gc->candidates, s);
            s->buffered = 0;
        }
    }
    /* ScanRoots. */
    for (s = gc->candidates.head; s; s = s->next) gc_scan(gc, s);
    /* CollectRoots. */
    gc_list dead = {NULL, NULL, 0};
    while ((s = gc_list_pop(&gc->candidates)) != NULL) {
        s->buffered = 0;
        gc_collect_white(gc, s, &dead);
    }
    size_t n = dead.n;
    for (s = dead.head; s; s = s->next) s->state = GC_DYING;
    while ((s = gc_list_pop(&dead)) != NULL) {
        gc_finalize(gc, s);
        hk__gc_free_object(gc, s);
    }
    gc->freed_cycles += n;
    return n;
}

/* ---- cycle collection in slices -------------------------------------------- */

/* The objects reachable from s (s included), counted read-only up to
 * limit + 1: each one seen is marked queued and chained through bnext from
 * *seen (the caller unmarks them). Returns the count (limit + 1 when there
 * are more). */
static size_t gc_reach(hk_gc *gc, gc_hdr *s, size_t limit, gc_hdr **seen) {
    gc_visit_ctx v = {gc, NULL, GC_V_COUNT, NULL};
    size_t n = 1;
    s->queued = 1;
    s->wnext = NULL;
    s->bnext = NULL;
    v.parent = s;
    v.stack = s;
    while (v.stack && n <= limit) {
        gc_hdr *x = v.stack;
        v.stack = x->wnext;
        gc_hdr *before = v.parent;
        gc_trace(gc, x, gc_visit, &v);
        for (gc_hdr *y = v.parent; y != before; y = y->bnext) n++;
    }
    *seen = v.parent;
    return n;
}

/* Trial deletion over one closed subgraph: the candidates in `seen` (the
 * objects reachable from one candidate, so everything any of them reaches
 * is in it) are the roots, handled in candidate order exactly as
 * gc_cycles handles all of them: the result is what a full pass would find
 * there. Appends the garbage to *dead. */
static void gc_cycles_in(hk_gc *gc, gc_hdr *seen, gc_list *dead) {
    gc_list roots = {NULL, NULL, 0};
    for (gc_hdr *x = seen; x; x = x->bnext) x->queued = 0;
    /* the candidates among them, in candidate order */
    for (gc_hdr *x = seen; x; x = x->bnext)
        if (x->buffered) {
            gc_list_remove(&gc->candidates, x);
            gc_list_push(&roots, x);
        }
    gc_hdr *r, *nx;
    for (r = roots.head; r; r = nx) {
        nx = r->next;
        if (r->color == GC_PURPLE) {
            gc_mark_gray(gc, r);
        } else {
            gc_list_remove(&roots, r);
            r->buffered = 0;
        }
    }
    for (r = roots.head; r; r = r->next) gc_scan(gc, r);
    while ((r = gc_list_pop(&roots)) != NULL) {
        r->buffered = 0;
        gc_collect_white(gc, r, dead);
    }
}

size_t hk_gc_collect_step(hk_gc *gc, size_t max_objects, int *more) {
    if (more) *more = 0;
    if (!gc) return 0;
    hk__core_lock(&gc->core);
    if (gc_refuse_in_cb(gc, "collect step")) {
        hk__core_unlock(&gc->core);
        return 0;
    }
    if (!max_objects) max_objects = gc->step_max;
    size_t spent = 0, passed = 0, ncand = gc->candidates.n;
    gc_list dead = {NULL, NULL, 0};
    gc_hdr *s;
    /* each candidate at most once per call: one whose subgraph is larger
     * than a whole step goes to the back (for hk_gc_collect) */
    while (passed < ncand && (s = gc->candidates.head) != NULL && spent < max_objects) {
        passed++;
        if (s->color != GC_PURPLE) { /* retained since: no longer a candidate */
            gc_list_remove(&gc->candidates, s);
            s->buffered = 0;
            spent++;
            continue;
        }
        gc_hdr *seen = NULL;
        size_t left = max_objects - spent;
        size_t n = gc_reach(gc, s, left, &seen);
        if (n > left) {
            for (gc_hdr *x = seen; x; x = x->bnext) x->queued = 0;
            spent += left;
            if (left == max_objects) { /* too large for any step: it and the candidates seen go back */
                for (gc_hdr *x = seen; x; x = x->bnext)
                    if (x->buffered) {
                        gc_list_remove(&gc->candidates, x);
                        gc_list_push(&gc->candidates, x);
                    }
                continue;
            }
            break; /* the next step starts with it */
        }
        spent += n;
        gc_cycles_in(gc, seen, &dead);
    }
    size_t got = dead.n;
    for (s = dead.head; s; s = s->next) s->state = GC_DYING;
    while ((s = gc_list_pop(&dead)) != NULL) {
        gc_finalize(gc, s);
        hk__gc_free_object(gc, s);
    }
    gc->freed_cycles += got;
    if (more) *more = gc->candidates.n != 0;
    hk__core_after(&gc->core);
    hk__core_unlock(&gc->core);
    return got;
}

/* ---- step timing ------------------------------------------------------------- */

static unsigned gc_hist_bucket(uint64_t v) {
    if (v < 16) return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= 4 */
    unsigned sub = (unsigned)(v >> (e - 3)) & (GC_HIST_SUB - 1);
    unsigned b = 16u + (e - 4u) * GC_HIST_SUB + sub;
    return b < GC_HIST_BUCKETS ? b : GC_HIST_BUCKETS - 1;
}
/* Largest value that falls into bucket b. */
static uint64_t gc_hist_upper(unsigned b) {
    if (b < 16) return b;
    unsigned e = (b - 16u) / GC_HIST_SUB + 4u, sub = (b - 16u) % GC_HIST_SUB;
    uint64_t base = (uint64_t)1 << e, step = (uint64_t)1 << (e - 3);
    return base + (uint64_t)(sub + 1) * step - 1;
}
static uint64_t gc_hist_pct(const hk_gc *gc, double p) {
    if (!gc->steps) return 0;
    double want = p / 100.0 * (double)gc->steps;
    uint64_t need = (uint64_t)want;
    if ((double)need < want) need++;
    if (need == 0) need = 1;
    uint64_t acc = 0;
    for (unsigned b = 0; b < GC_HIST_BUCKETS; b++) {
        acc += gc->hist[b];
        if (acc >= need) {
            uint64_t u = gc_hist_upper(b);
            return u < gc->step_max_ns ? u : gc->step_max_ns;
        }
    }
    return gc->step_max_ns;
}
static void gc_record_step(hk_gc *gc, uint64_t ns) {
    gc->steps++;
    gc->step_last = ns;
    if (ns > gc->step_max_ns) gc->step_max_ns = ns;
    gc->step_total += ns;
    gc->hist[gc_hist_bucket(ns)]++;
}

/* ---- step / collect / mode ---------------------------------------------------- */

size_t hk_gc_step(hk_gc *gc, uint64_t budget_ns) {
    if (!gc) return 0;
    hk__core_lock(&gc->core);
    if (gc_refuse_in_cb(gc, "step")) {
        hk__core_unlock(&gc->core);
        return 0;
    }
    uint64_t t0 = gc_now(gc), t = t0;
    uint64_t deadline = budget_ns > UINT64_MAX - t0 ? UINT64_MAX : t0 + budget_ns;
    size_t n = 0;
    if (!gc->incremental) {
        n = hk__gc_drain(gc);
        t = gc_now(gc);
    } else {
        gc_hdr *o;
        gc->draining++;
        /* The cursor is the queue head: every object examined leaves the
         * queue, and the first is examined before the clock is consulted.
         * After that the step stops when the deadline has passed or when
         * one more object of the step's average cost would pass it, so an
         * overshoot needs an object dearer than the average so far. */
        while (n < gc->step_max && (o = gc_list_pop(&gc->backlog)) != NULL) {
            gc_reclaim(gc, o);
            n++;
            t = gc_now(gc);
            if (t >= deadline) break;
            uint64_t avg = t > t0 ? (t - t0) / n : 0;
            if (avg >= deadline - t) break;
        }
        gc->draining--;
    }
    gc->step_objects += n;
    gc_record_step(gc, t >= t0 ? t - t0 : 0);
    hk__core_after(&gc->core);
    hk__core_unlock(&gc->core);
    return n;
}

size_t hk_gc_collect(hk_gc *gc) {
    if (!gc) return 0;
    hk__core_lock(&gc->core);
    if (gc_refuse_in_cb(gc, "collect")) {
        hk__core_unlock(&gc->core);
        return 0;
    }
    uint64_t t0 = gc_now(gc);
    size_t n = hk__gc_drain(gc);
    n += gc_cycles(gc);
    uint64_t t1 = gc_now(gc), d = t1 >= t0 ? t1 - t0 : 0;
    gc->collects++;
    gc->collect_last = d;
    if (d > gc->collect_max) gc->collect_max = d;
    gc->debt = 0;
    hk__core_after(&gc->core);
    hk__core_unlock(&gc->core);
    return n;
}

hk_result hk_gc_set_incremental(hk_gc *gc, bool on) {
    if (!gc) return HK_ERR_INVALID;
    hk__core_lock(&gc->core);
    hk_result r = HK_OK;
    if (gc_refuse_in_cb(gc, "mode switch"))
        r = HK_ERR_STATE;
    else
        gc->incremental = on ? 1 : 0;
    hk__core_unlock(&gc->core);
    return r;
}

bool hk_gc_incremental(const hk_gc *gc) { return gc && gc->incremental; }

/* ---- statistics ------------------------------------------------------------ */

hk_result hk_gc_get_info(const hk_gc *gc, hk_gc_info *out) {
    if (!gc || !out) return HK_ERR_INVALID;
    hk__core_lock(&gc->core);
    memset(out, 0, sizeof *out);
    out->objects = gc->objects;
    out->backlog = gc->backlog.n;
    out->live = gc->objects - gc->backlog.n;
    out->candidates = gc->candidates.n;
    out->data_bytes = gc->data_bytes;
    out->freed = gc->freed;
    out->freed_cycles = gc->freed_cycles;
    out->steps = gc->steps;
    out->step_objects = gc->step_objects;
    out->step_last_ns = gc->step_last;
    out->step_max_ns = gc->step_max_ns;
    out->step_p50_ns = gc_hist_pct(gc, 50.0);
    out->step_p99_ns = gc_hist_pct(gc, 99.0);
    out->step_total_ns = gc->step_total;
    out->paced_steps = gc->paced_steps;
    out->paced_objects = gc->paced_objects;
    out->collects = gc->collects;
    out->collect_last_ns = gc->collect_last;
    out->collect_max_ns = gc->collect_max;
    out->retired_slots = gc->ht.nretired;
    out->index_bits = gc->ht.index_bits;
    out->incremental = gc->incremental != 0;
    hk__core_unlock(&gc->core);
    return HK_OK;
}

void hk_gc_reset_timing(hk_gc *gc) {
    if (!gc) return;
    hk__core_lock(&gc->core);
    gc->steps = 0;
    gc->step_last = gc->step_max_ns = gc->step_total = 0;
    memset(gc->hist, 0, sizeof gc->hist);
    gc->collect_last = gc->collect_max = 0;
    hk__core_unlock(&gc->core);
}

/*
 * src/gc.c - reference-counted objects with a budgeted incremental step, a
 * linear full pass and trial-deletion cycle collection. See heapkit/gc.h for
 * the behaviour; this file keeps the invariants below.
 *
 * Storage. Object headers (struct hk_gc_obj) live in chunks of
 * HK_GC_CHUNK_OBJECTS slots; `chunks` lists the chunks sorted by address, so
 * any pointer is resolved to a slot (or rejected) by binary search without
 * reading memory outside our chunks. Chunks are released only by destroy.
 * Object data is a separate block from the alloc hook (NULL for size 0).
 *
 * Slot states:
 *   FREE     on the free list (FIFO: freed slots are reused last).
 *   LIVE     rc > 0. On the candidate list iff `buffered`.
 *   PENDING  rc == 0, on the backlog queue, awaiting reclamation.
 *   DYING    being reclaimed right now (only inside gc_reclaim/gc_cycles).
 * Invariants (verified by hk_gc_check):
 *  - every slot's owner is this collector; FREE slots have no type/data;
 *    allocated slots (LIVE, PENDING) have a type, data == NULL iff size == 0.
 *  - backlog.n == number of PENDING slots == length of the backlog list;
 *    candidates.n == number of buffered slots; free.n == number of FREE slots;
 *    objects == LIVE + PENDING; data_bytes == sum of their sizes.
 *  - buffered implies LIVE; colour is BLACK outside a cycle collection for
 *    every object that is not a candidate (candidates may be PURPLE).
 *  - for every allocated object, rc >= the number of references to it that
 *    allocated objects' trace functions list (external references make up
 *    the difference); a reference never points to a FREE slot.
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
 */
#include "heapkit/gc.h"
#include "internal.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { GC_FREE = 0, GC_LIVE = 1, GC_PENDING = 2, GC_DYING = 3 };
enum { GC_BLACK = 0, GC_GRAY = 1, GC_WHITE = 2, GC_PURPLE = 3 };

#define GC_HIST_SUB     8u
#define GC_HIST_BUCKETS (16u + 60u * GC_HIST_SUB)

struct hk_gc_obj {
    hk_gc *owner;
    const hk_gc_type *type;
    void *data;
    size_t size;
    hk_gc_obj *next, *prev; /* backlog, candidates, free list or the dead list of a cycle pass */
    hk_gc_obj *wnext;       /* mark / scan / collect-white stack */
    hk_gc_obj *bnext;       /* scan-black stack */
    uint32_t rc;
    uint32_t gen; /* times the slot was allocated */
    uint32_t aux; /* check: references counted to this object */
    uint8_t state, color, buffered, queued;
};

typedef struct gc_list {
    hk_gc_obj *head, *tail;
    size_t n;
} gc_list;

struct hk_gc {
    hk_gc_obj **chunks; /* sorted by address */
    size_t nchunks, chunk_cap;
    gc_list free_slots, backlog, candidates;
    size_t objects, data_bytes, peak_data;
    size_t debt, pace_bytes;
    uint32_t pace_percent, step_max;
    int incremental;
    int in_cb; /* > 0 while a user callback runs */
    int draining;
    uint64_t alloc_count, fail_count, freed, freed_cycles, paced_steps, paced_objects;
    uint64_t steps, step_objects, step_last, step_max_ns, step_total;
    uint64_t hist[GC_HIST_BUCKETS];
    uint64_t collects, collect_last, collect_max;
    uint32_t flags;
    void *(*alloc_fn)(size_t, void *);
    void (*free_fn)(void *, size_t, void *);
    void *alloc_user;
    uint64_t (*clock_fn)(void *);
    void *clock_user;
    hk__reporter rep;
    hk_lock_hooks lock;
};

#define GC_CHUNK_BYTES ((size_t)HK_GC_CHUNK_OBJECTS * sizeof(hk_gc_obj))

/* ---- host: memory and clock ------------------------------------------- */

static void *gc_default_alloc(size_t n, void *u) {
    (void)u;
    return malloc(n);
}
static void gc_default_free(void *p, size_t n, void *u) {
    (void)u;
    (void)n;
    free(p);
}
static uint64_t gc_default_clock(void *u) {
    (void)u;
    return hk_os_now_ns();
}
static inline uint64_t gc_now(const hk_gc *gc) { return gc->clock_fn(gc->clock_user); }

/* ---- intrusive lists ------------------------------------------------------ */

static inline void gc_list_push(gc_list *l, hk_gc_obj *o) {
    o->next = NULL;
    o->prev = l->tail;
    if (l->tail)
        l->tail->next = o;
    else
        l->head = o;
    l->tail = o;
    l->n++;
}
static inline void gc_list_remove(gc_list *l, hk_gc_obj *o) {
    if (o->prev)
        o->prev->next = o->next;
    else
        l->head = o->next;
    if (o->next)
        o->next->prev = o->prev;
    else
        l->tail = o->prev;
    o->next = o->prev = NULL;
    l->n--;
}
static inline hk_gc_obj *gc_list_pop(gc_list *l) {
    hk_gc_obj *o = l->head;
    if (o) gc_list_remove(l, o);
    return o;
}

/* ---- pointer resolution ---------------------------------------------------- */

enum { GC_REF_OK = 0, GC_REF_NULL, GC_REF_FOREIGN, GC_REF_INTERIOR, GC_REF_FREED };

/* Index of the chunk holding address p, or -1. Reads only the chunk table. */
static long gc_chunk_of(const hk_gc *gc, const void *p) {
    uintptr_t a = (uintptr_t)p;
    size_t lo = 0, hi = gc->nchunks;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)gc->chunks[mid] <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0) return -1;
    uintptr_t base = (uintptr_t)gc->chunks[lo - 1];
    if (a - base >= GC_CHUNK_BYTES) return -1;
    return (long)(lo - 1);
}

/* Resolves an object pointer to its slot. *why says what is wrong. */
static hk_gc_obj *gc_resolve(const hk_gc *gc, const void *p, int *why) {
    if (!p) {
        *why = GC_REF_NULL;
        return NULL;
    }
    long c = gc_chunk_of(gc, p);
    if (c < 0) {
        *why = GC_REF_FOREIGN;
        return NULL;
    }
    size_t off = (size_t)((uintptr_t)p - (uintptr_t)gc->chunks[c]);
    if (off % sizeof(hk_gc_obj)) {
        *why = GC_REF_INTERIOR;
        return NULL;
    }
    hk_gc_obj *o = (hk_gc_obj *)p;
    if (o->state == GC_FREE) {
        *why = GC_REF_FREED;
        return o;
    }
    *why = GC_REF_OK;
    return o;
}

static const char *gc_tname(const hk_gc_obj *o) {
    return o && o->type && o->type->name ? o->type->name : "object";
}

/* Resolves and reports a bad pointer for operation `op`. Returns the slot
 * (allocated, any state but FREE) or NULL after reporting. */
static hk_gc_obj *gc_checked(hk_gc *gc, const void *p, const char *op) {
    int why;
    hk_gc_obj *o = gc_resolve(gc, p, &why);
    switch (why) {
    case GC_REF_OK: return o;
    case GC_REF_NULL:
        hk__report(&gc->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, 0, NULL, "%s of a NULL object", op);
        return NULL;
    case GC_REF_FOREIGN:
        hk__report(&gc->rep, HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, p, 0, NULL,
                   "%s of object %p, which does not belong to this collector (another collector's, or not an "
                   "object)",
                   op, p);
        return NULL;
    case GC_REF_INTERIOR:
        hk__report(&gc->rep, HK_ERR_FOREIGN, HK_EK_INTERIOR_PTR, p, 0, NULL,
                   "%s of %p, which points inside an object header, not at its start", op, p);
        return NULL;
    default:
        hk__report(&gc->rep, HK_ERR_STALE, HK_EK_STALE, p, 0, NULL,
                   "%s of a freed object %p (slot reclaimed; allocated %u times)", op, p, o->gen);
        return NULL;
    }
}

static int gc_refuse_in_cb(hk_gc *gc, const char *op) {
    if (!gc->in_cb) return 0;
    hk__report(&gc->rep, HK_ERR_STATE, HK_EK_STATE, NULL, 0, NULL,
               "%s called from a trace, finalize or walk callback; refused", op);
    return 1;
}

/* ---- statistics helpers -------------------------------------------------- */

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

/* ---- chunks and slots ------------------------------------------------------ */

static int gc_add_chunk(hk_gc *gc) {
    if (gc->nchunks == gc->chunk_cap) {
        size_t ncap = gc->chunk_cap ? gc->chunk_cap * 2 : 16, bytes;
        if (!hk_size_mul(ncap, sizeof(hk_gc_obj *), &bytes)) return 0;
        hk_gc_obj **t = (hk_gc_obj **)gc->alloc_fn(bytes, gc->alloc_user);
        if (!t) return 0;
        if (gc->nchunks) memcpy(t, gc->chunks, gc->nchunks * sizeof *t);
        if (gc->chunks) gc->free_fn(gc->chunks, gc->chunk_cap * sizeof *t, gc->alloc_user);
        gc->chunks = t;
        gc->chunk_cap = ncap;
    }
    hk_gc_obj *c = (hk_gc_obj *)gc->alloc_fn(GC_CHUNK_BYTES, gc->alloc_user);
    if (!c) return 0;
    memset(c, 0, GC_CHUNK_BYTES);
    size_t i = gc->nchunks;
    while (i > 0 && (uintptr_t)gc->chunks[i - 1] > (uintptr_t)c) {
        gc->chunks[i] = gc->chunks[i - 1];
        i--;
    }
    gc->chunks[i] = c;
    gc->nchunks++;
    for (size_t k = 0; k < HK_GC_CHUNK_OBJECTS; k++) {
        c[k].owner = gc;
        c[k].state = GC_FREE;
        gc_list_push(&gc->free_slots, &c[k]);
    }
    return 1;
}

/* Returns the object's slot to the free list (FIFO) and frees its data. */
static void gc_free_object(hk_gc *gc, hk_gc_obj *o) {
    if (o->data) {
        if (gc->flags & HK_FLAG_FILL) hk_fill(o->data, o->size, HK_FILL_FREE);
        gc->free_fn(o->data, o->size, gc->alloc_user);
    }
    gc->data_bytes -= o->size;
    gc->objects--;
    gc->freed++;
    o->data = NULL;
    o->size = 0;
    o->type = NULL;
    o->rc = 0;
    o->color = GC_BLACK;
    o->buffered = 0;
    o->queued = 0;
    o->state = GC_FREE;
    gc_list_push(&gc->free_slots, o);
}

static size_t gc_cost(const hk_gc_obj *o) { return sizeof(hk_gc_obj) + o->size; }

/* ---- tracing ------------------------------------------------------------- */

enum { GC_V_RELEASE, GC_V_MARK_GRAY, GC_V_SCAN, GC_V_SCAN_BLACK, GC_V_COLLECT_WHITE, GC_V_CHECK };

typedef struct gc_visit_ctx {
    hk_gc *gc;
    hk_gc_obj *parent;
    int mode;
    hk_gc_obj *stack; /* the traversal's stack top (wnext or bnext chain) */
    int bad;          /* check: first bad reference found */
    const void *bad_ptr;
    int bad_why;
} gc_visit_ctx;

static void gc_decref(hk_gc *gc, hk_gc_obj *c);

static void gc_visit(hk_gc_obj *child, void *vctx) {
    gc_visit_ctx *v = (gc_visit_ctx *)vctx;
    hk_gc *gc = v->gc;
    if (!child) return;
    int why;
    hk_gc_obj *c = gc_resolve(gc, child, &why);
    if (v->mode == GC_V_CHECK) {
        if (why == GC_REF_OK)
            c->aux++;
        else if (!v->bad) {
            v->bad = 1;
            v->bad_ptr = child;
            v->bad_why = why;
        }
        return;
    }
    if (why != GC_REF_OK || c->state != GC_LIVE) {
        if (v->mode == GC_V_RELEASE) {
            const char *what = why == GC_REF_FREED      ? "a freed object"
                               : why == GC_REF_OK       ? "an object whose count is already zero"
                               : why == GC_REF_INTERIOR ? "the inside of an object header"
                                                        : "something that is not an object of this collector";
            hk__report(&gc->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, child, 0, gc_tname(v->parent),
                       "object %p (%s) being reclaimed references %p, %s; reference ignored",
                       (void *)v->parent, gc_tname(v->parent), (void *)child, what);
        }
        return;
    }
    switch (v->mode) {
    case GC_V_RELEASE: gc_decref(gc, c); break;
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
    default: break;
    }
}

static void gc_trace(hk_gc *gc, hk_gc_obj *o, gc_visit_ctx *v) {
    const hk_gc_type *t = o->type;
    if (!t || !t->trace) return;
    v->parent = o;
    gc->in_cb++;
    t->trace(o->data, o->size, gc_visit, v, t->user);
    gc->in_cb--;
}

static void gc_finalize(hk_gc *gc, hk_gc_obj *o) {
    const hk_gc_type *t = o->type;
    if (!t || !t->finalize) return;
    gc->in_cb++;
    t->finalize(o->data, o->size, t->user);
    gc->in_cb--;
}

/* ---- reference counting -------------------------------------------------- */

/* One reference to live object c goes away. */
static void gc_decref(hk_gc *gc, hk_gc_obj *c) {
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
static void gc_reclaim(hk_gc *gc, hk_gc_obj *o) {
    gc_visit_ctx v = {gc, o, GC_V_RELEASE, NULL, 0, NULL, 0};
    o->state = GC_DYING;
    gc_trace(gc, o, &v);
    gc_finalize(gc, o);
    gc_free_object(gc, o);
}

/* Reclaims the whole backlog, cascades included. Returns objects reclaimed. */
static size_t gc_drain(hk_gc *gc) {
    size_t n = 0;
    hk_gc_obj *o;
    gc->draining++;
    while ((o = gc_list_pop(&gc->backlog)) != NULL) {
        gc_reclaim(gc, o);
        n++;
    }
    gc->draining--;
    return n;
}

/* Allocation-debt pacing: reclaims garbage worth pace_percent% of the debt. */
static void gc_pace(hk_gc *gc) {
    size_t debt = gc->debt, goal, done = 0;
    gc->debt = 0;
    if (!hk_size_mul(debt / 100, gc->pace_percent, &goal))
        goal = SIZE_MAX;
    else if (!hk_size_add(goal, debt % 100 * gc->pace_percent / 100, &goal))
        goal = SIZE_MAX;
    gc->paced_steps++;
    hk_gc_obj *o;
    gc->draining++;
    while (done < goal && (o = gc_list_pop(&gc->backlog)) != NULL) {
        done += gc_cost(o);
        gc_reclaim(gc, o);
        gc->paced_objects++;
    }
    gc->draining--;
}

/* ---- cycle collection (trial deletion) -------------------------------------- */

static void gc_mark_gray(hk_gc *gc, hk_gc_obj *s) {
    gc_visit_ctx v = {gc, NULL, GC_V_MARK_GRAY, NULL, 0, NULL, 0};
    s->color = GC_GRAY;
    s->wnext = NULL;
    v.stack = s;
    while (v.stack) {
        hk_gc_obj *x = v.stack;
        v.stack = x->wnext;
        gc_trace(gc, x, &v);
    }
}

static void gc_scan_black(hk_gc *gc, hk_gc_obj *s) {
    gc_visit_ctx v = {gc, NULL, GC_V_SCAN_BLACK, NULL, 0, NULL, 0};
    s->color = GC_BLACK;
    s->bnext = NULL;
    v.stack = s;
    while (v.stack) {
        hk_gc_obj *x = v.stack;
        v.stack = x->bnext;
        gc_trace(gc, x, &v);
    }
}

static void gc_scan(hk_gc *gc, hk_gc_obj *s) {
    if (s->color != GC_GRAY || s->queued) return;
    gc_visit_ctx v = {gc, NULL, GC_V_SCAN, NULL, 0, NULL, 0};
    s->queued = 1;
    s->wnext = NULL;
    v.stack = s;
    while (v.stack) {
        hk_gc_obj *x = v.stack;
        v.stack = x->wnext;
        x->queued = 0;
        if (x->color != GC_GRAY) continue;
        if (x->rc > 0) {
            hk_gc_obj *saved = v.stack;
            gc_scan_black(gc, x);
            v.stack = saved;
        } else {
            x->color = GC_WHITE;
            gc_trace(gc, x, &v);
        }
    }
}

static void gc_collect_white(hk_gc *gc, hk_gc_obj *s, gc_list *dead) {
    if (s->color != GC_WHITE || s->buffered) return;
    gc_visit_ctx v = {gc, NULL, GC_V_COLLECT_WHITE, NULL, 0, NULL, 0};
    s->color = GC_BLACK;
    s->wnext = NULL;
    v.stack = s;
    while (v.stack) {
        hk_gc_obj *x = v.stack;
        v.stack = x->wnext;
        gc_list_push(dead, x);
        gc_trace(gc, x, &v);
    }
}

static size_t gc_cycles(hk_gc *gc) {
    hk_gc_obj *s, *nx;
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
        gc_free_object(gc, s);
    }
    gc->freed_cycles += n;
    return n;
}

/* ---- create / destroy -------------------------------------------------------- */

static void gc_after_op(hk_gc *gc);

hk_gc *hk_gc_create(const hk_gc_desc *desc) {
    if (!desc) return NULL;
    if (!desc->alloc != !desc->free) return NULL;
    if (!desc->lock.lock != !desc->lock.unlock) return NULL;
    void *(*af)(size_t, void *) = desc->alloc ? desc->alloc : gc_default_alloc;
    void (*ff)(void *, size_t, void *) = desc->free ? desc->free : gc_default_free;
    hk_gc *gc = (hk_gc *)af(sizeof(hk_gc), desc->alloc_user);
    if (!gc) return NULL;
    memset(gc, 0, sizeof *gc);
    gc->alloc_fn = af;
    gc->free_fn = ff;
    gc->alloc_user = desc->alloc_user;
    gc->clock_fn = desc->clock ? desc->clock : gc_default_clock;
    gc->clock_user = desc->clock_user;
    gc->flags = desc->flags;
    gc->step_max = desc->step_max_objects ? desc->step_max_objects : HK_GC_DEFAULT_STEP_OBJECTS;
    gc->pace_bytes = desc->pace_bytes;
    gc->pace_percent = desc->pace_percent ? desc->pace_percent : HK_GC_DEFAULT_PACE_PERCENT;
    gc->incremental = (desc->flags & HK_GC_FLAG_IMMEDIATE) ? 0 : 1;
    hk__reporter_init(&gc->rep, "gc", desc->name, desc->on_error, desc->error_user, desc->flags);
    gc->lock = desc->lock;
    return gc;
}

void hk_gc_destroy(hk_gc *gc) {
    if (!gc) return;
    hk__lock(&gc->lock);
    if (gc_refuse_in_cb(gc, "destroy")) {
        hk__unlock(&gc->lock);
        return;
    }
    for (size_t c = 0; c < gc->nchunks; c++) {
        hk_gc_obj *ch = gc->chunks[c];
        for (size_t k = 0; k < HK_GC_CHUNK_OBJECTS; k++) {
            hk_gc_obj *o = &ch[k];
            if (o->state == GC_FREE) continue;
            gc_finalize(gc, o);
            if (o->data) gc->free_fn(o->data, o->size, gc->alloc_user);
        }
    }
    for (size_t c = 0; c < gc->nchunks; c++) gc->free_fn(gc->chunks[c], GC_CHUNK_BYTES, gc->alloc_user);
    if (gc->chunks) gc->free_fn(gc->chunks, gc->chunk_cap * sizeof(hk_gc_obj *), gc->alloc_user);
    hk_lock_hooks lk = gc->lock;
    void (*ff)(void *, size_t, void *) = gc->free_fn;
    void *au = gc->alloc_user;
    ff(gc, sizeof *gc, au);
    hk__unlock(&lk);
}

/* ---- allocation ------------------------------------------------------------ */

static hk_gc_obj *gc_alloc_impl(hk_gc *gc, const hk_gc_type *type, size_t size) {
    if (!type) {
        gc->fail_count++;
        hk__report(&gc->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, size, NULL,
                   "allocation with a NULL type");
        return NULL;
    }
    if (gc_refuse_in_cb(gc, "alloc")) {
        gc->fail_count++;
        return NULL;
    }
    size_t cost;
    if (!hk_size_add(size, sizeof(hk_gc_obj), &cost) || cost > (size_t)PTRDIFF_MAX) {
        gc->fail_count++;
        hk__report(&gc->rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, NULL, size, type->name,
                   "asked %zu data bytes for a %s: with the object header it passes PTRDIFF_MAX", size,
                   type->name ? type->name : "object");
        return NULL;
    }
    if (gc->pace_bytes && gc->incremental) {
        if (!hk_size_add(gc->debt, cost, &gc->debt)) gc->debt = SIZE_MAX;
        if (gc->debt >= gc->pace_bytes) gc_pace(gc);
    }
    if (!gc->free_slots.head && !gc_add_chunk(gc)) {
        gc->fail_count++;
        hk__report(&gc->rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, GC_CHUNK_BYTES, type->name,
                   "no memory for a chunk of %u object headers (%zu objects allocated)", HK_GC_CHUNK_OBJECTS,
                   gc->objects);
        return NULL;
    }
    void *data = NULL;
    if (size) {
        data = gc->alloc_fn(size, gc->alloc_user);
        if (!data) {
            gc->fail_count++;
            hk__report(&gc->rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, size, type->name,
                       "no memory for %zu data bytes of a %s", size, type->name ? type->name : "object");
            return NULL;
        }
        memset(data, 0, size);
    }
    hk_gc_obj *o = gc_list_pop(&gc->free_slots);
    o->type = type;
    o->data = data;
    o->size = size;
    o->rc = 1;
    o->gen++;
    o->state = GC_LIVE;
    o->color = GC_BLACK;
    o->buffered = 0;
    o->queued = 0;
    gc->objects++;
    gc->data_bytes += size;
    if (gc->data_bytes > gc->peak_data) gc->peak_data = gc->data_bytes;
    gc->alloc_count++;
    return o;
}

hk_gc_obj *hk_gc_alloc_size(hk_gc *gc, const hk_gc_type *type, size_t size) {
    if (!gc) return NULL;
    hk__lock(&gc->lock);
    hk_gc_obj *o = gc_alloc_impl(gc, type, size);
    gc_after_op(gc);
    hk__unlock(&gc->lock);
    return o;
}

hk_gc_obj *hk_gc_alloc(hk_gc *gc, const hk_gc_type *type) {
    return hk_gc_alloc_size(gc, type, type ? type->size : 0);
}

hk_gc_obj *hk_gc_alloc_array(hk_gc *gc, const hk_gc_type *type, size_t count, size_t elem_size) {
    size_t n;
    if (!gc) return NULL;
    if (!hk_size_mul(count, elem_size, &n)) {
        hk__lock(&gc->lock);
        gc->fail_count++;
        hk__report(&gc->rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, NULL, count, type ? type->name : NULL,
                   "array of %zu elements of %zu bytes overflows", count, elem_size);
        hk__unlock(&gc->lock);
        return NULL;
    }
    return hk_gc_alloc_size(gc, type, n);
}

/* ---- queries ------------------------------------------------------------ */

void *hk_gc_data(hk_gc *gc, const hk_gc_obj *obj) {
    if (!gc) return NULL;
    hk__lock(&gc->lock);
    hk_gc_obj *o = gc_checked(gc, obj, "data access");
    void *d = o ? o->data : NULL;
    hk__unlock(&gc->lock);
    return d;
}

size_t hk_gc_size(hk_gc *gc, const hk_gc_obj *obj) {
    if (!gc) return 0;
    hk__lock(&gc->lock);
    hk_gc_obj *o = gc_checked(gc, obj, "size query");
    size_t s = o ? o->size : 0;
    hk__unlock(&gc->lock);
    return s;
}

const hk_gc_type *hk_gc_type_of(hk_gc *gc, const hk_gc_obj *obj) {
    if (!gc) return NULL;
    hk__lock(&gc->lock);
    hk_gc_obj *o = gc_checked(gc, obj, "type query");
    const hk_gc_type *t = o ? o->type : NULL;
    hk__unlock(&gc->lock);
    return t;
}

uint32_t hk_gc_refcount(hk_gc *gc, const hk_gc_obj *obj) {
    if (!gc) return 0;
    hk__lock(&gc->lock);
    hk_gc_obj *o = gc_checked(gc, obj, "count query");
    uint32_t r = o ? o->rc : 0;
    hk__unlock(&gc->lock);
    return r;
}

/* ---- retain / release ------------------------------------------------------- */

/* gc_checked, plus the result a refused reference turns into. */
static hk_gc_obj *gc_checked_or(hk_gc *gc, const hk_gc_obj *obj, const char *op, hk_result *bad) {
    hk_gc_obj *o = gc_checked(gc, obj, op);
    if (!o) {
        int why;
        gc_resolve(gc, obj, &why);
        *bad = why == GC_REF_NULL ? HK_ERR_INVALID : why == GC_REF_FREED ? HK_ERR_STALE : HK_ERR_FOREIGN;
    }
    return o;
}

static hk_result gc_retain_impl(hk_gc *gc, hk_gc_obj *obj) {
    if (gc_refuse_in_cb(gc, "retain")) return HK_ERR_STATE;
    hk_result bad;
    hk_gc_obj *o = gc_checked_or(gc, obj, "retain", &bad);
    if (!o) return bad;
    if (o->state != GC_LIVE)
        return hk__report(&gc->rep, HK_ERR_STALE, HK_EK_STALE, obj, o->size, gc_tname(o),
                          "retain of object %p (%s) whose count is zero: it is garbage awaiting reclamation",
                          (void *)obj, gc_tname(o));
    if (o->rc == UINT32_MAX)
        return hk__report(&gc->rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, obj, o->size, gc_tname(o),
                          "retain of object %p (%s) whose count is already %u", (void *)obj, gc_tname(o),
                          o->rc);
    o->rc++;
    if (o->color == GC_PURPLE) o->color = GC_BLACK;
    return HK_OK;
}

static hk_result gc_release_impl(hk_gc *gc, hk_gc_obj *obj) {
    if (gc_refuse_in_cb(gc, "release")) return HK_ERR_STATE;
    hk_result bad;
    hk_gc_obj *o = gc_checked_or(gc, obj, "release", &bad);
    if (!o) return bad;
    if (o->state != GC_LIVE)
        return hk__report(&gc->rep, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, obj, o->size, gc_tname(o),
                          "release below zero of object %p (%s): its count is already zero", (void *)obj,
                          gc_tname(o));
    gc_decref(gc, o);
    if (o->state == GC_PENDING && !gc->incremental && !gc->draining) gc_drain(gc);
    return HK_OK;
}

hk_result hk_gc_retain(hk_gc *gc, hk_gc_obj *obj) {
    if (!gc) return HK_ERR_INVALID;
    hk__lock(&gc->lock);
    hk_result r = gc_retain_impl(gc, obj);
    gc_after_op(gc);
    hk__unlock(&gc->lock);
    return r;
}

hk_result hk_gc_release(hk_gc *gc, hk_gc_obj *obj) {
    if (!gc) return HK_ERR_INVALID;
    hk__lock(&gc->lock);
    hk_result r = gc_release_impl(gc, obj);
    gc_after_op(gc);
    hk__unlock(&gc->lock);
    return r;
}

hk_result hk_gc_assign(hk_gc *gc, hk_gc_obj **field, hk_gc_obj *value) {
    if (!gc) return HK_ERR_INVALID;
    hk__lock(&gc->lock);
    hk_result r = HK_OK;
    if (!field) {
        r = hk__report(&gc->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, 0, NULL, "assign to a NULL field");
    } else if (value != *field) {
        hk_gc_obj *old = *field;
        if (value) r = gc_retain_impl(gc, value);
        if (r == HK_OK) {
            *field = value;
            if (old) {
                hk_result r2 = gc_release_impl(gc, old);
                if (r2 != HK_OK) r = r2;
            }
        }
    }
    gc_after_op(gc);
    hk__unlock(&gc->lock);
    return r;
}

/* ---- step / collect / mode ---------------------------------------------------- */

size_t hk_gc_step(hk_gc *gc, uint64_t budget_ns) {
    if (!gc) return 0;
    hk__lock(&gc->lock);
    if (gc_refuse_in_cb(gc, "step")) {
        hk__unlock(&gc->lock);
        return 0;
    }
    uint64_t t0 = gc_now(gc), t = t0;
    uint64_t deadline = budget_ns > UINT64_MAX - t0 ? UINT64_MAX : t0 + budget_ns;
    size_t n = 0;
    if (!gc->incremental) {
        n = gc_drain(gc);
        t = gc_now(gc);
    } else {
        hk_gc_obj *o;
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
    gc_after_op(gc);
    hk__unlock(&gc->lock);
    return n;
}

size_t hk_gc_collect(hk_gc *gc) {
    if (!gc) return 0;
    hk__lock(&gc->lock);
    if (gc_refuse_in_cb(gc, "collect")) {
        hk__unlock(&gc->lock);
        return 0;
    }
    uint64_t t0 = gc_now(gc);
    size_t n = gc_drain(gc);
    n += gc_cycles(gc);
    uint64_t t1 = gc_now(gc), d = t1 >= t0 ? t1 - t0 : 0;
    gc->collects++;
    gc->collect_last = d;
    if (d > gc->collect_max) gc->collect_max = d;
    gc->debt = 0;
    gc_after_op(gc);
    hk__unlock(&gc->lock);
    return n;
}

hk_result hk_gc_set_incremental(hk_gc *gc, bool on) {
    if (!gc) return HK_ERR_INVALID;
    hk__lock(&gc->lock);
    hk_result r = HK_OK;
    if (gc_refuse_in_cb(gc, "mode switch"))
        r = HK_ERR_STATE;
    else
        gc->incremental = on ? 1 : 0;
    hk__unlock(&gc->lock);
    return r;
}

bool hk_gc_incremental(const hk_gc *gc) { return gc && gc->incremental; }

/* ---- statistics ------------------------------------------------------------ */

hk_result hk_gc_info_get(const hk_gc *gc, hk_gc_info *out) {
    if (!gc || !out) return HK_ERR_INVALID;
    hk__lock(&gc->lock);
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
    out->incremental = gc->incremental != 0;
    hk__unlock(&gc->lock);
    return HK_OK;
}

void hk_gc_reset_timing(hk_gc *gc) {
    if (!gc) return;
    hk__lock(&gc->lock);
    gc->steps = 0;
    gc->step_last = gc->step_max_ns = gc->step_total = 0;
    memset(gc->hist, 0, sizeof gc->hist);
    gc->collect_last = gc->collect_max = 0;
    hk__unlock(&gc->lock);
}

hk_result hk_gc_stats(const hk_gc *gc, hk_stats *out) {
    if (!gc || !out) return HK_ERR_INVALID;
    hk__lock(&gc->lock);
    memset(out, 0, sizeof *out);
    out->size = (uint32_t)sizeof *out;
    out->version = HK_STATS_VERSION;
    out->allocator = "gc";
    size_t hdr = gc->nchunks * GC_CHUNK_BYTES;
    out->overhead = hdr + gc->chunk_cap * sizeof(hk_gc_obj *) + sizeof(hk_gc);
    out->capacity = gc->data_bytes + hdr;
    out->used = gc->data_bytes;
    out->used_blocks_bytes = gc->data_bytes + gc->objects * sizeof(hk_gc_obj);
    out->free = gc->free_slots.n * sizeof(hk_gc_obj);
    out->largest_free = 0;
    out->peak_used = gc->peak_data;
    out->live_blocks = gc->objects;
    out->free_blocks = gc->free_slots.n;
    out->alloc_count = gc->alloc_count;
    out->free_count = gc->freed;
    out->fail_count = gc->fail_count;
    out->error_count = gc->rep.error_count;
    hk__unlock(&gc->lock);
    return HK_OK;
}

/* ---- walk / where / check ------------------------------------------------------ */

static void gc_fill_info(const hk_gc_obj *o, hk_block_info *info) {
    memset(info, 0, sizeof *info);
    info->owner = (void *)(uintptr_t)o;
    info->id = o->gen;
    if (o->state == GC_FREE) {
        info->overhead = sizeof(hk_gc_obj);
        return;
    }
    info->address = o->data;
    info->size = o->size;
    info->requested = o->size;
    info->overhead = sizeof(hk_gc_obj);
    info->flags = HK_BLOCK_USED | (o->state == GC_PENDING ? (uint32_t)HK_BLOCK_PURGEABLE : 0u);
    info->lock_count = o->rc;
    info->name = gc_tname(o);
}

int hk_gc_walk(hk_gc *gc, hk_walk_fn fn, void *user) {
    if (!gc || !fn) return 0;
    hk__lock(&gc->lock);
    int r = 0;
    for (size_t c = 0; c < gc->nchunks && !r; c++) {
        hk_gc_obj *ch = gc->chunks[c];
        for (size_t k = 0; k < HK_GC_CHUNK_OBJECTS && !r; k++) {
            if (ch[k].state == GC_FREE) continue;
            hk_block_info info;
            gc_fill_info(&ch[k], &info);
            gc->in_cb++;
            r = fn(&info, user);
            gc->in_cb--;
        }
    }
    hk__unlock(&gc->lock);
    return r;
}

hk_result hk_gc_where(hk_gc *gc, const void *addr, hk_block_info *info) {
    if (!gc || !info) return HK_ERR_INVALID;
    hk__lock(&gc->lock);
    hk_result r = HK_ERR_FOREIGN;
    long c = gc_chunk_of(gc, addr);
    if (c >= 0) {
        size_t off = (size_t)((uintptr_t)addr - (uintptr_t)gc->chunks[c]);
        gc_fill_info(&gc->chunks[c][off / sizeof(hk_gc_obj)], info);
        r = HK_OK;
    } else if (addr) {
        uintptr_t a = (uintptr_t)addr;
        for (size_t i = 0; i < gc->nchunks && r != HK_OK; i++) {
            hk_gc_obj *ch = gc->chunks[i];
            for (size_t k = 0; k < HK_GC_CHUNK_OBJECTS; k++) {
                hk_gc_obj *o = &ch[k];
                if (o->state == GC_FREE || !o->data) continue;
                if (a >= (uintptr_t)o->data && a - (uintptr_t)o->data < o->size) {
                    gc_fill_info(o, info);
                    r = HK_OK;
                    break;
                }
            }
        }
    }
    hk__unlock(&gc->lock);
    return r;
}

static hk_result gc_corrupt(hk_gc *gc, const hk_gc_obj *o, const char *fmt, ...) HK__PRINTF(3, 4);
static hk_result gc_corrupt(hk_gc *gc, const hk_gc_obj *o, const char *fmt, ...) {
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return hk__report(&gc->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, o, o ? o->size : 0, gc_tname(o),
                      "object %p (%s): %s", (const void *)o, gc_tname(o), what);
}

/* Walks a list checking links and membership; returns 0 when broken. */
static int gc_check_list(hk_gc *gc, const gc_list *l, const char *name, int state, size_t limit) {
    size_t n = 0;
    const hk_gc_obj *prev = NULL;
    for (const hk_gc_obj *o = l->head; o; prev = o, o = o->next) {
        if (++n > limit || gc_chunk_of(gc, o) < 0 || o->prev != prev) {
            hk__report(&gc->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, o, 0, NULL,
                       "%s list broken at %p (entry %zu)", name, (const void *)o, n);
            return 0;
        }
        int ok = state == -1 ? (o->buffered && o->state == GC_LIVE) : o->state == state;
        if (!ok) {
            gc_corrupt(gc, o, "on the %s list in the wrong state (state %u, candidate %u)", name, o->state,
                       o->buffered);
            return 0;
        }
    }
    if (prev != l->tail || n != l->n) {
        hk__report(&gc->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, l->tail, 0, NULL,
                   "%s list: %zu entries found, %zu recorded (or tail wrong)", name, n, l->n);
        return 0;
    }
    return 1;
}

static hk_result gc_check_impl(hk_gc *gc) {
    size_t total = gc->nchunks * HK_GC_CHUNK_OBJECTS;
    size_t nfree = 0, nlive = 0, npend = 0, nbuf = 0, bytes = 0;
    for (size_t c = 0; c < gc->nchunks; c++) {
        if (c && (uintptr_t)gc->chunks[c - 1] >= (uintptr_t)gc->chunks[c])
            return hk__report(&gc->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, gc->chunks[c], 0, NULL,
                              "chunk table not sorted at entry %zu", c);
        hk_gc_obj *ch = gc->chunks[c];
        for (size_t k = 0; k < HK_GC_CHUNK_OBJECTS; k++) {
            hk_gc_obj *o = &ch[k];
            if (o->owner != gc) return gc_corrupt(gc, o, "header damaged (owner is not this collector)");
            o->aux = 0;
            switch (o->state) {
            case GC_FREE:
                if (o->data || o->type || o->buffered)
                    return gc_corrupt(gc, o, "free slot still has data, type or candidacy");
                nfree++;
                break;
            case GC_LIVE:
            case GC_PENDING:
                if (!o->type) return gc_corrupt(gc, o, "allocated object without a type");
                if (!o->data != !o->size) return gc_corrupt(gc, o, "data pointer and size disagree");
                if (o->state == GC_LIVE && o->rc == 0)
                    return gc_corrupt(gc, o, "live object with count zero");
                if (o->state == GC_PENDING && (o->rc != 0 || o->buffered))
                    return gc_corrupt(gc, o, "backlog object with count %u or candidacy %u", o->rc,
                                      o->buffered);
                if (o->color != GC_BLACK && !(o->buffered && o->color == GC_PURPLE))
                    return gc_corrupt(gc, o, "colour %u outside a cycle pass (candidate %u)", o->color,
                                      o->buffered);
                if (o->state == GC_LIVE)
                    nlive++;
                else
                    npend++;
                if (o->buffered) nbuf++;
                bytes += o->size;
                break;
            default: return gc_corrupt(gc, o, "state %u is not valid here", o->state);
            }
        }
    }
    if (nfree != gc->free_slots.n || npend != gc->backlog.n || nbuf != gc->candidates.n ||
        nlive + npend != gc->objects || bytes != gc->data_bytes)
        return hk__report(
            &gc->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, NULL, 0, NULL,
            "counts disagree: free %zu/%zu, backlog %zu/%zu, candidates %zu/%zu, objects %zu/%zu, "
            "bytes %zu/%zu",
            nfree, gc->free_slots.n, npend, gc->backlog.n, nbuf, gc->candidates.n, nlive + npend, gc->objects,
            bytes, gc->data_bytes);
    if (!gc_check_list(gc, &gc->free_slots, "free", GC_FREE, total) ||
        !gc_check_list(gc, &gc->backlog, "backlog", GC_PENDING, total) ||
        !gc_check_list(gc, &gc->candidates, "candidate", -1, total))
        return HK_ERR_CORRUPT;
    /* References: every one points to an allocated object; counts cover them. */
    for (size_t c = 0; c < gc->nchunks; c++) {
        hk_gc_obj *ch = gc->chunks[c];
        for (size_t k = 0; k < HK_GC_CHUNK_OBJECTS; k++) {
            hk_gc_obj *o = &ch[k];
            if (o->state == GC_FREE) continue;
            gc_visit_ctx v = {gc, o, GC_V_CHECK, NULL, 0, NULL, 0};
            gc_trace(gc, o, &v);
            if (v.bad)
                return hk__report(&gc->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, o, o->size, gc_tname(o),
                                  "object %p (%s) references %p, which is %s", (const void *)o, gc_tname(o),
                                  v.bad_ptr,
                                  v.bad_why == GC_REF_FREED      ? "a freed object"
                                  : v.bad_why == GC_REF_INTERIOR ? "inside an object header"
                                                                 : "not an object of this collector");
        }
    }
    for (size_t c = 0; c < gc->nchunks; c++) {
        hk_gc_obj *ch = gc->chunks[c];
        for (size_t k = 0; k < HK_GC_CHUNK_OBJECTS; k++) {
            hk_gc_obj *o = &ch[k];
            if (o->state != GC_FREE && o->aux > o->rc)
                return gc_corrupt(gc, o, "count %u is lower than the %u references to it", o->rc, o->aux);
        }
    }
    return HK_OK;
}

hk_result hk_gc_check(hk_gc *gc) {
    if (!gc) return HK_ERR_INVALID;
    hk__lock(&gc->lock);
    hk_result r;
    if (gc_refuse_in_cb(gc, "check"))
        r = HK_ERR_STATE;
    else
        r = gc_check_impl(gc);
    hk__unlock(&gc->lock);
    return r;
}

static void gc_after_op(hk_gc *gc) {
    if ((gc->flags & HK_FLAG_PARANOID) && !gc->in_cb) (void)gc_check_impl(gc);
}

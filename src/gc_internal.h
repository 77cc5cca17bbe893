/*
 * src/gc_internal.h - the gc's state, shared by its files:
 *
 *   gc_slots.c    header slots: the handle table that makes references,
 *                 the header chunks, resolving and judging a reference,
 *                 giving a slot back
 *   gc_reclaim.c  reference counting's other half: decrement, the backlog,
 *                 reclamation with cascades, pacing, the incremental step,
 *                 the full pass and trial-deletion cycle collection, timing
 *   gc_objects.c  create / destroy, allocation, queries, retain / release /
 *                 assign, mode, recycle, statistics
 *   gc_check.c    check, walk and where
 *
 * Calls go down only: objects calls reclaim and slots (and check, through
 * the core's check pointer); reclaim and check call slots; slots calls
 * nothing of the gc.
 *
 * References. A reference (hk_gc_obj *) carries a handle of the table ht:
 * (generation << index_bits) | slot. Slot i's header is
 * chunks[i / HK_GC_CHUNK_OBJECTS][i % HK_GC_CHUNK_OBJECTS]. A slot is
 * allocated (LIVE or PENDING) exactly while its handle is live in the
 * table; reclaiming an object frees its handle (FIFO reuse, a new
 * generation each time).
 *
 * Slot states:
 *   FREE     its handle is dead (table FREE, or RETIRED with HK_GC_RETIRE).
 *   LIVE     rc > 0. On the candidate list iff `buffered`.
 *   PENDING  rc == 0, on the backlog queue, awaiting reclamation.
 *   DYING    being reclaimed right now (only inside reclaim / cycles).
 * Invariants (verified by hk_gc_check):
 *  - the handle table's own (hk__ht_check); the table never holds HELD slots.
 *  - a slot's header is allocated iff its table word is live, and then
 *    hdr.ref equals that word; FREE headers have no type, no data, no
 *    candidacy; allocated headers have a type, data == NULL iff size == 0.
 *  - backlog.n == number of PENDING slots == length of the backlog list;
 *    candidates.n == number of buffered slots; objects == LIVE + PENDING ==
 *    the table's live count; data_bytes == sum of their sizes.
 *  - buffered implies LIVE; colour is BLACK outside a cycle collection for
 *    every object that is not a candidate (candidates may be PURPLE).
 *  - for every allocated object, rc >= the number of references to it that
 *    allocated objects' trace functions list (external references make up
 *    the difference); a listed reference always names an allocated object.
 */
#ifndef HEAPKIT_GC_INTERNAL_H
#define HEAPKIT_GC_INTERNAL_H

#include "heapkit/gc.h"
#include "common.h"
#include "handles.h"

enum { GC_FREE = 0, GC_LIVE = 1, GC_PENDING = 2, GC_DYING = 3 };
enum { GC_BLACK = 0, GC_GRAY = 1, GC_WHITE = 2, GC_PURPLE = 3 };

#define GC_HIST_SUB     8u
#define GC_HIST_BUCKETS (16u + 60u * GC_HIST_SUB)
#define GC_CHUNK_SHIFT  10u
#define GC_CHUNK_MASK   (HK_GC_CHUNK_OBJECTS - 1u)
_Static_assert(HK_GC_CHUNK_OBJECTS == 1u << GC_CHUNK_SHIFT, "chunk size is 2^GC_CHUNK_SHIFT");

/* An object's header. */
typedef struct gc_hdr {
    const hk_gc_type *type;
    void *data;
    size_t size;
    struct gc_hdr *next, *prev; /* backlog, candidates or the dead list of a cycle pass */
    struct gc_hdr *wnext;       /* mark / scan / collect-white stack */
    struct gc_hdr *bnext;       /* scan-black stack */
    uint32_t rc;
    uint32_t ref; /* its reference while allocated; the last one it had when free */
    uint32_t aux; /* check: references counted to this object */
    uint8_t state, color, buffered, queued;
} gc_hdr;

typedef struct gc_list {
    gc_hdr *head, *tail;
    size_t n;
} gc_list;

struct hk_gc {
    hk__htab ht;     /* references */
    gc_hdr **chunks; /* header chunks, by slot / HK_GC_CHUNK_OBJECTS */
    size_t nchunks, chunk_cap;
    gc_list backlog, candidates;
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
    uint64_t (*clock_fn)(void *);
    void *clock_user;
    hk__core core; /* names, reporter, lock hooks, flags, paranoid check, backing hooks */
};

#define GC_CHUNK_BYTES ((size_t)HK_GC_CHUNK_OBJECTS * sizeof(gc_hdr))

static inline uint64_t gc_now(const hk_gc *gc) { return gc->clock_fn(gc->clock_user); }
static inline gc_hdr *gc_hdr_at(const hk_gc *gc, uint32_t i) {
    return &gc->chunks[i >> GC_CHUNK_SHIFT][i & GC_CHUNK_MASK];
}
static inline hk_gc_obj *gc_ref_of(const gc_hdr *o) { return (hk_gc_obj *)(uintptr_t)o->ref; }
static inline const char *gc_tname(const gc_hdr *o) {
    return o && o->type && o->type->name ? o->type->name : "object";
}

/* The allocated header that reference r names, or NULL (no report). Read
 * from the header itself (allocated, and its ref is r: the same answer as
 * the table's word, by the invariants above), so the lookup is the same
 * whether the table's storage is reserved or chunked. */
static inline gc_hdr *gc_find(const hk_gc *gc, const hk_gc_obj *r) {
    uintptr_t v = (uintptr_t)r;
    uint32_t i = (uint32_t)v & gc->ht.index_mask;
    if (v > UINT32_MAX || i >= gc->ht.cap) return NULL;
    gc_hdr *o = gc_hdr_at(gc, i);
    return o->ref == (uint32_t)v && o->state != GC_FREE ? o : NULL;
}

/* ---- intrusive lists ------------------------------------------------------ */

static inline void gc_list_push(gc_list *l, gc_hdr *o) {
    o->next = NULL;
    o->prev = l->tail;
    if (l->tail)
        l->tail->next = o;
    else
        l->head = o;
    l->tail = o;
    l->n++;
}
static inline void gc_list_remove(gc_list *l, gc_hdr *o) {
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
static inline gc_hdr *gc_list_pop(gc_list *l) {
    gc_hdr *o = l->head;
    if (o) gc_list_remove(l, o);
    return o;
}

/* ---- callbacks ----------------------------------------------------------------- */

/* Calls that change the collector are refused from callbacks: reports and
 * returns 1 when `op` is called from one. */
static inline int gc_refuse_in_cb(hk_gc *gc, const char *op) {
    if (!gc->in_cb) return 0;
    hk__report(&gc->core.rep, HK_ERR_STATE, HK_EK_STATE, NULL, 0, NULL,
               "%s called from a trace, finalize or walk callback; refused", op);
    return 1;
}

/* The type's trace and finalize, with the collector marked busy. */
static inline void gc_trace(hk_gc *gc, gc_hdr *o, hk_gc_visit_fn visit, void *ctx) {
    const hk_gc_type *t = o->type;
    if (!t || !t->trace) return;
    gc->in_cb++;
    t->trace(o->data, o->size, visit, ctx, t->user);
    gc->in_cb--;
}
static inline void gc_finalize(hk_gc *gc, gc_hdr *o) {
    const hk_gc_type *t = o->type;
    if (!t || !t->finalize) return;
    gc->in_cb++;
    t->finalize(o->data, o->size, t->user);
    gc->in_cb--;
}

/* ---- gc_slots.c ---------------------------------------------------------------- */

/* Makes a free slot available (when none is free: GC_GROW_SLOTS more, in a
 * new chunk when the last one is full). Returns 0 when memory fails or the
 * index space is used up. O(GC_GROW_SLOTS) + a commit of table pages once
 * per HK__HT_COMMIT_SLOTS slots + a chunk allocation once per chunk. */
int hk__gc_slots_reserve(hk_gc *gc);
/* At create: the chunk pointer array (every chunk the index bits allow),
 * the table's first pages, and `reserve_objects` slots made ready (their
 * chunks allocated, their pages committed). Returns 0 when memory fails
 * (the caller destroys what was made with hk__gc_slots_destroy). */
int hk__gc_slots_init(hk_gc *gc, uint32_t reserve_objects);
/* Pops the oldest free slot and makes it allocated: its header, with ref
 * set; the caller fills in the rest. hk__gc_slots_reserve must have
 * succeeded. */
gc_hdr *hk__gc_slot_take(hk_gc *gc);
/* Frees the object's data and gives its slot back (FIFO). */
void hk__gc_free_object(hk_gc *gc, gc_hdr *o);
/* The allocated header r names, or NULL after reporting why it names none
 * (for operation `op`; `freeing` for a release) with *res set. */
gc_hdr *hk__gc_checked(hk_gc *gc, const hk_gc_obj *r, const char *op, int freeing, hk_result *res);
/* What a reference that gc_find did not resolve is, in words: "a reclaimed
 * object", "not a reference of this collector"... (for corruption reports). */
const char *hk__gc_ref_what(const hk_gc *gc, const hk_gc_obj *r);
/* Frees every chunk and the table (destroy). */
void hk__gc_slots_destroy(hk_gc *gc);

/* ---- gc_reclaim.c -------------------------------------------------------------- */

/* One reference to live object c goes away: at zero it joins the backlog,
 * otherwise it becomes a cycle candidate. */
void hk__gc_decref(hk_gc *gc, gc_hdr *c);
/* Reclaims the whole backlog, cascades included; returns objects reclaimed. */
size_t hk__gc_drain(hk_gc *gc);
/* Allocation-debt pacing: reclaims garbage worth pace_percent% of the debt. */
void hk__gc_pace(hk_gc *gc);

/* ---- gc_check.c ------------------------------------------------------------------ */

/* The full check without the lock (the core's paranoid hook; skipped from
 * callbacks). */
hk_result hk__gc_check(void *gc);

#endif /* HEAPKIT_GC_INTERNAL_H */

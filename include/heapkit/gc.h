/*
 * heapkit/gc.h - reference-counted objects reclaimed within a per-frame time
 * budget, plus a linear full pass that also reclaims reference cycles.
 *
 * This is the corrected design of the Papyrus VM collector (seed
 * 001_621fea22bf69eb89): there, every frame each object list got 1% of the
 * frame to find objects whose only reference was the collector's own, a
 * cursor bug ended the slice after one object, and the full pass looped
 * "until a whole round frees nothing" (quadratic). Here:
 *
 *  - An object whose count falls to zero is queued at once (O(1)): the
 *    collector never scans live objects to find garbage. The queue is the
 *    backlog; its head is the cursor. hk_gc_step examines objects from the
 *    head until the time budget or the per-step object cap is spent, and
 *    always examines at least one object when the backlog is not empty, so
 *    the cursor advances on every call whatever the clock says.
 *  - Reclaiming an object releases the objects it references (as listed by
 *    its type's trace function); children whose count falls to zero join the
 *    same queue (a worklist), so cascades are handled within the same pass,
 *    never by repeating rounds, and never by recursion (no stack overflow on
 *    long chains).
 *  - hk_gc_collect drains the queue (each object and each reference visited
 *    once) and then runs Bacon and Rajan's synchronous cycle collector (trial
 *    deletion) over the objects whose count was decremented to a non-zero
 *    value since the last pass (the "candidate roots"). Linear in the objects
 *    and references reachable from the candidates. hk_gc_collect_step does
 *    the cycle collection in budgeted slices, one closed subgraph at a time.
 *  - Optional pacing by allocation debt (as Lua does): every `pace_bytes`
 *    allocated, the allocation itself reclaims garbage worth `pace_percent`
 *    percent of the debt. Pacing is counted in bytes, not time, so it keeps
 *    the backlog bounded even when the per-frame budget is too small.
 *
 * Object references: the user holds `hk_gc_obj *` values (opaque, never
 * dereferenced, NULL = none), stored in variables and inside objects' data
 * like pointers, as Papyrus scripts hold them. A reference is a generational
 * handle of heapkit's one handle table (the one under pool IDs and cache
 * handles), carried in a pointer type: its value is (generation <<
 * index_bits) | slot, so every call resolves it in O(1) without touching
 * freed memory and gives the same answer as the pool and the cache for a
 * bad one:
 *   NULL                                              HK_ERR_INVALID      HK_EK_INVALID_ARG
 *   not a reference of this collector (another        HK_ERR_FOREIGN      HK_EK_FOREIGN_PTR
 *     collector's, a real pointer, a forged value)
 *   hk_gc_release of a reference whose count is       HK_ERR_DOUBLE_FREE  HK_EK_DOUBLE_FREE
 *     already zero ("release below zero"), in the
 *     backlog or reclaimed, while its slot has not
 *     been reused
 *   any other use of a reclaimed reference, or a      HK_ERR_STALE        HK_EK_STALE
 *     retain of garbage awaiting reclamation
 * Header slots are reused in FIFO order (least recently freed first) and
 * each reuse issues the slot's next generation, so a stale reference is
 * caught until its slot has been reused 2^(32 - index_bits) - 1 times (1023
 * with the default 22 index bits): by default the generation then wraps
 * (an older reference could alias a new object); with HK_GC_RETIRE the slot
 * is retired instead, never reused until hk_gc_recycle. The object's data
 * (the bytes the user reads and writes, hk_gc_data) comes from the desc's
 * backing hooks; headers live in chunks the collector keeps until destroy.
 *
 * Reference counting rules: hk_gc_alloc returns an object with count 1,
 * owned by the caller. Every reference an object holds to another object
 * must be counted (retain it when storing it, or use hk_gc_assign) and must
 * be listed by the type's trace function; when the object is reclaimed the
 * collector releases exactly the references trace lists. Releasing to zero
 * makes the object garbage: it may not be retained or released again
 * (reported as misuse), even before it is reclaimed.
 *
 * Callbacks (trace, finalize, walk) run with the collector marked busy:
 * calls into the collector from a callback that change it (alloc, retain,
 * release, assign, step, collect, mode switch, destroy) are reported as
 * HK_EK_STATE and refused. With lock hooks such calls deadlock unless the
 * lock is recursive: simply do not make them.
 *
 * Thread-safety: an instance is not thread-safe unless the desc carries lock
 * hooks, in which case every call below takes the lock.
 * Errors: reported through desc.on_error (or the default handler), see
 * heapkit.h. Nothing here aborts, and the collector stays consistent
 * (hk_gc_check passes) after every reported misuse.
 */
#ifndef HEAPKIT_GC_H
#define HEAPKIT_GC_H

#include "heapkit/heapkit.h"

#ifdef __cplusplus
extern "C" {
#endif
HK_API_BEGIN

typedef struct hk_gc hk_gc;
typedef struct hk_gc_obj hk_gc_obj; /* an object reference; opaque */

/* Called by a type's trace function once per reference the object holds.
 * NULL children are ignored. */
typedef void (*hk_gc_visit_fn)(hk_gc_obj *child, void *ctx);

/* An object type. The collector keeps the pointer: the type must outlive
 * every object of that type (a static const is the usual choice). */
typedef struct hk_gc_type {
    const char *name; /* for reports and walk ("object" when NULL); the pointer is kept */
    size_t size;      /* data bytes of hk_gc_alloc (hk_gc_alloc_size / _array give their own) */
    /* Lists every object reference the object holds, calling visit(child,
     * ctx) for each (NULL allowed). Must not modify the data or call into the
     * collector. Called when the object is reclaimed, by the cycle collector
     * and by check. NULL: the type holds no references. */
    void (*trace)(void *data, size_t size, hk_gc_visit_fn visit, void *ctx, void *user);
    /* Called once when the object is reclaimed, after the references trace
     * lists were released (the children are still allocated, but no longer
     * counted). Must not call into the collector. NULL: nothing to do. */
    void (*finalize)(void *data, size_t size, void *user);
    void *user; /* passed to trace and finalize */
} hk_gc_type;

/* Desc flags, in addition to HK_FLAG_FILL (freed data is filled with
 * HK_FILL_FREE before it goes back to the free hook), HK_FLAG_PARANOID
 * (hk_gc_check after every call that changes the collector) and
 * HK_FLAG_QUIET. Data is always zeroed on allocation (HK_FLAG_ZERO is
 * implied), so trace sees NULL references in a fresh object. */
enum {
    HK_GC_IMMEDIATE = 1u << 16, /* start with incremental mode off (see hk_gc_set_incremental) */
    HK_GC_RETIRE = 1u << 17     /* retire a header slot that used every generation (see hk_gc_recycle) */
};

#define HK_GC_DEFAULT_STEP_OBJECTS 4096u /* per-step cap on objects examined when the desc says 0 */
#define HK_GC_DEFAULT_PACE_PERCENT 200u  /* pacing work per byte of debt when the desc says 0 */
#define HK_GC_CHUNK_OBJECTS        1024u /* object headers per chunk */
#define HK_GC_GROW_OBJECTS         64u   /* header slots made free at a time when none is free */
#define HK_GC_DEFAULT_INDEX_BITS   22u   /* reference bits naming the slot: up to 4,194,303 objects */
#define HK_GC_MIN_INDEX_BITS       10u
#define HK_GC_MAX_INDEX_BITS       24u

/* Zero-initialisable: every zero field means the documented default. */
typedef struct hk_gc_desc {
    uint32_t flags;   /* HK_FLAG_* and HK_GC_* */
    const char *name; /* instance name for reports ("gc" when NULL); the pointer is kept */
    hk_error_fn on_error;
    void *error_user;
    hk_lock_hooks lock;
    /* Memory for the control block, object data, header chunks and the
     * chunk pointer array [malloc/free]. The reference table is address
     * space reserved from the OS and committed as it grows (from these
     * hooks, doubling, only where the OS cannot reserve: 32-bit hosts). */
    hk_alloc_hooks backing;
    /* Monotonic clock in nanoseconds for budgets and step statistics.
     * NULL: hk_now_ns. Tests inject a simulated clock here. */
    uint64_t (*clock)(void *user);
    void *clock_user;
    uint32_t step_max_objects; /* cap on objects one hk_gc_step examines; 0: HK_GC_DEFAULT_STEP_OBJECTS */
    size_t pace_bytes;         /* allocation debt that triggers a paced step; 0: no pacing */
    uint32_t pace_percent;     /* garbage bytes reclaimed per 100 bytes of debt; 0: 200 */
    uint32_t index_bits;       /* bits of a reference naming its slot, 10..24; 0: 22. Objects
                                  allocated at once <= 2^index_bits - 1; generations per slot
                                  2^(32 - index_bits) - 1 */
    /* Objects made room for at create: their header chunks allocated and
     * the reference table's pages committed, so that no allocation while
     * fewer objects are allocated grows anything (only the object's data
     * comes from the backing hooks). 0: the collector grows as it goes
     * (64 header slots at a time; a chunk of HK_GC_CHUNK_OBJECTS headers
     * from the backing hooks once per chunk, and a commit of reference-table
     * pages, an OS call, once per 16,384 objects). Capped at
     * 2^index_bits - 1. */
    uint32_t reserve_objects;
} hk_gc_desc;

/* Collector-specific statistics (hk_gc_get_info). Times are in the clock's
 * nanoseconds. Percentiles come from a log-linear histogram of step times
 * (8 sub-buckets per power of two: within 12.5%, rounded up). */
typedef struct hk_gc_info {
    size_t objects;           /* allocated objects not yet reclaimed (live + backlog) */
    size_t live;              /* objects with a non-zero count */
    size_t backlog;           /* garbage awaiting reclamation (count zero, queued) */
    size_t candidates;        /* buffered possible cycle roots */
    size_t data_bytes;        /* data bytes of the allocated objects */
    uint64_t freed;           /* objects reclaimed since creation (all paths) */
    uint64_t freed_cycles;    /* of which by the cycle collector */
    uint64_t steps;           /* hk_gc_step calls */
    uint64_t step_objects;    /* objects examined by hk_gc_step in total */
    uint64_t step_last_ns;    /* duration of the last step */
    uint64_t step_max_ns;     /* longest step */
    uint64_t step_p50_ns;     /* median step (histogram bucket upper bound) */
    uint64_t step_p99_ns;     /* 99th percentile step (histogram bucket upper bound) */
    uint64_t step_total_ns;   /* sum of step durations */
    uint64_t paced_steps;     /* steps run by allocation debt */
    uint64_t paced_objects;   /* objects reclaimed by paced steps */
    uint64_t collects;        /* hk_gc_collect calls */
    uint64_t collect_last_ns; /* duration of the last full pass */
    uint64_t collect_max_ns;  /* longest full pass */
    size_t retired_slots;     /* header slots retired (HK_GC_RETIRE), waiting for hk_gc_recycle */
    uint32_t index_bits;      /* the desc's, or the default */
    bool incremental;         /* current mode */
} hk_gc_info;

/* Creates a collector. Returns NULL when desc is NULL, when only one of the
 * backing or lock hooks is set or index_bits is out of range (reported,
 * HK_EK_INVALID_ARG), or when the control block cannot be allocated
 * (reported, HK_EK_NOMEM), as are the chunks and table pages of
 * desc.reserve_objects. O(1) + O(reserve_objects). Thread-safe. */
hk_gc *hk_gc_create(const hk_gc_desc *desc);

/* Destroys the collector: every object still allocated (live, backlog or
 * garbage cycles) is finalized (in no particular order, without releasing
 * references) and its data freed; then the header chunks go. Every
 * hk_gc_obj pointer becomes invalid. NULL is ignored. Refused (reported)
 * from a callback. O(objects). */
void hk_gc_destroy(hk_gc *gc);

/* Allocates an object of `type` with type->size zeroed data bytes and count
 * 1 (owned by the caller). Size 0 is allowed (hk_gc_data returns NULL).
 * Returns NULL and reports: HK_EK_INVALID_ARG for a NULL gc/type,
 * HK_EK_OVERFLOW for sizes past PTRDIFF_MAX, HK_EK_NOMEM when the backing
 * hooks or the OS fail or 2^index_bits - 1 objects are allocated (or their
 * slots retired), HK_EK_STATE from a callback. In incremental mode with
 * pacing, the call may first reclaim garbage (bounded by the debt). O(1):
 * when no slot is free, HK_GC_GROW_OBJECTS headers are made free (plus a
 * header chunk from the backing hooks once per HK_GC_CHUNK_OBJECTS objects,
 * and a commit of reference-table pages, an OS call, once per 16,384;
 * desc.reserve_objects does both at creation); + O(size) zeroing, + the
 * paced work. The result is a reference, not
 * memory: HK_MALLOC does not apply. */
hk_gc_obj *hk_gc_alloc(hk_gc *gc, const hk_gc_type *type);

/* Same with an explicit data size (variable-size objects). */
hk_gc_obj *hk_gc_alloc_size(hk_gc *gc, const hk_gc_type *type, size_t size);

/* Same with count * elem_size bytes (arrays); the product is overflow-checked. */
hk_gc_obj *hk_gc_alloc_array(hk_gc *gc, const hk_gc_type *type, size_t count, size_t elem_size);

/* The object's data (NULL for size 0), its size, type and count. An invalid
 * reference (foreign, reclaimed) is reported and gives NULL / 0. Objects in
 * the backlog are still readable (they are garbage but not yet reclaimed).
 * O(1). Allowed from callbacks. */
void *hk_gc_data(hk_gc *gc, const hk_gc_obj *obj);
size_t hk_gc_size(hk_gc *gc, const hk_gc_obj *obj);
const hk_gc_type *hk_gc_type_of(hk_gc *gc, const hk_gc_obj *obj);
uint32_t hk_gc_refcount(hk_gc *gc, const hk_gc_obj *obj);

/* Adds one reference. Misuse, reported and refused (count unchanged):
 * NULL (HK_ERR_INVALID), not this collector's (HK_ERR_FOREIGN), a reclaimed
 * object (HK_ERR_STALE), an object whose count is zero (HK_ERR_STALE: it is
 * garbage awaiting reclamation), a count at UINT32_MAX (HK_ERR_OVERFLOW), a
 * call from a callback (HK_ERR_STATE). O(1). */
hk_result hk_gc_retain(hk_gc *gc, hk_gc_obj *obj);

/* Drops one reference. At zero the object joins the backlog (incremental
 * mode) or is reclaimed at once with its cascade (immediate mode); at a
 * non-zero count it becomes a possible cycle root. Misuse, reported and
 * refused: NULL, foreign, count already zero (HK_ERR_DOUBLE_FREE, "release
 * below zero": in the backlog, or reclaimed while its slot is not reused),
 * reclaimed and its slot reused since (HK_ERR_STALE), from a callback.
 * O(1) in incremental mode; immediate mode adds the cascade. */
hk_result hk_gc_release(hk_gc *gc, hk_gc_obj *obj);

/* Stores `value` into the reference field *field: retains value (when not
 * NULL), then releases the old *field (when not NULL), then writes. If value
 * is invalid, nothing changes and the misuse is reported. The field itself
 * is plain memory (usually inside an object's data). */
hk_result hk_gc_assign(hk_gc *gc, hk_gc_obj **field, hk_gc_obj *value);

/* One incremental step: reclaims backlog objects from the head of the queue
 * (cascades join its tail) until `budget_ns` has passed on the collector's
 * clock, `step_max_objects` objects were examined, or the backlog is empty.
 * The clock is read after each object; the step also stops early when one
 * more object of the step's average cost so far would pass the deadline.
 * At least one object is examined whenever the backlog is not empty (even
 * with budget 0), so the cursor advances on every call. In immediate mode the step ignores budget and cap
 * and drains the backlog. Cycles are not looked for (hk_gc_collect does).
 * Returns the number of objects reclaimed. The step's duration feeds the
 * step statistics. O(objects examined + their references). */
size_t hk_gc_step(hk_gc *gc, uint64_t budget_ns);

/* Full pass: drains the backlog with its cascades, then reclaims garbage
 * cycles by trial deletion. Returns the number of objects reclaimed. Linear
 * in the backlog's objects and references plus the objects and references
 * reachable from the candidate roots; never repeats rounds. Refused from a
 * callback (returns 0). */
size_t hk_gc_collect(hk_gc *gc);

/* The cycle collection of hk_gc_collect in slices, for frames. Takes the
 * candidate roots in order; for each, counts the live objects reachable
 * from it (reading only); when they fit the step's budget, runs the trial
 * deletion over that subgraph (which is closed: every candidate inside it
 * is one of its roots) and reclaims the garbage cycles found there, as a
 * full pass would. A candidate whose subgraph does not fit what is left of
 * the budget waits for the next step; one whose subgraph is larger than a
 * whole step goes to the back of the candidates (hk_gc_collect reclaims
 * it). The budget is `max_objects` objects counted or examined (0: the
 * desc's step_max_objects); each candidate is looked at once per call. The
 * backlog is not drained (hk_gc_step does that). *more (may be NULL) is set
 * to 1 when candidates remain. Returns the objects reclaimed. Refused from
 * a callback (returns 0). O(max_objects + their references), independent
 * of the heap's size (docs/realtime.md has the bound). */
size_t hk_gc_collect_step(hk_gc *gc, size_t max_objects, int *more);

/* Switches incremental mode at run time. On: garbage is queued and
 * reclaimed by steps, pacing and full passes. Off (immediate mode): a
 * release to zero reclaims the object and its cascade at once, and a step
 * drains whatever backlog is left. Switching is O(1): it does not drain the
 * backlog itself. HK_ERR_STATE from a callback. */
hk_result hk_gc_set_incremental(hk_gc *gc, bool on);
bool hk_gc_incremental(const hk_gc *gc);

/* Collector statistics (see hk_gc_info). O(1) (the percentiles scan a
 * fixed-size histogram). */
hk_result hk_gc_get_info(const hk_gc *gc, hk_gc_info *out);

/* HK_GC_RETIRE: makes the retired header slots reusable, their generations
 * restarted. Call it only when no reference to a reclaimed object is kept
 * anywhere (a level load). Returns the number of slots recycled (0 without
 * HK_GC_RETIRE); HK_ERR_STATE (negative, reported) from a callback. O(slots). */
long hk_gc_recycle(hk_gc *gc);

/* Forgets the step and full-pass timing statistics (counts of objects stay). */
void hk_gc_reset_timing(hk_gc *gc);

/* Introspection (see heapkit.h). stats: O(1); `used` counts data bytes,
 * `overhead` header chunks and tables, live_blocks the allocated objects,
 * free_blocks the free header slots.
 * walk: every allocated object in slot order. info.address is the data
 * (NULL for size 0), owner the hk_gc_obj reference, id its 32-bit value,
 * lock_count the reference count, name the type name, flags HK_BLOCK_USED,
 * plus HK_BLOCK_PURGEABLE for backlog objects (garbage awaiting
 * reclamation). The callback must not call into the collector.
 * check: every invariant (lists, counts, states, chunk table) and, tracing
 * every object, that each reference names an allocated object of this
 * collector and that no count is lower than the references to it, and the
 * handle table. Reports the first problem and returns HK_ERR_CORRUPT.
 * O(slots + references). */
hk_result hk_gc_stats(const hk_gc *gc, hk_stats *out);
int hk_gc_walk(hk_gc *gc, hk_walk_fn fn, void *user);
hk_result hk_gc_check(hk_gc *gc);

/* Where is `addr`: a reference (an allocated object's, or the last one a
 * free slot issued: flags 0), or any byte of an object's data. HK_OK with
 * *info filled, or HK_ERR_FOREIGN. O(1) for references, O(slots) for data. */
hk_result hk_gc_where(hk_gc *gc, const void *addr, hk_block_info *info);

HK_API_END

#ifdef __cplusplus
}
#endif

#endif /* HEAPKIT_GC_H */

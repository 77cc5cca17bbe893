/*
 * heapkit/pool.h - fixed-size objects addressed by generational 32-bit IDs,
 * with live lists, parent/child trees and deferred destruction.
 *
 * The Touhou AnmManager design (a preallocated array of VMs, 32-bit IDs made
 * of a slot index and a discriminator, FIFO slot reuse, a malloc fallback when
 * the array is full) with its two slow or unsafe parts replaced:
 *
 *  - the fallback ("overflow") path keeps O(1) expected lookup by ID through a
 *    hash table instead of scanning every live object;
 *  - objects sit on intrusive DOUBLY-linked lists and in a doubly-linked
 *    sibling list under their parent, all kept by the pool itself, so freeing
 *    an object takes it off every list and out of its parent at once. A
 *    freed child can never be found on a draw list, and a child can never
 *    write into a parent that is gone (the seed's two crashes).
 *
 * IDs
 * ---
 *   bit 31 ........................ index_bits | index_bits-1 ........ 0
 *   [            generation (never 0)          |        index          ]
 *
 * index_bits is configurable (2..24, default 14 as in TH17 1.00b); the
 * generation takes the rest (default 18 bits). ID value 0 is "none" and is
 * never issued, because no generation is 0. The all-ones index
 * (2^index_bits - 1) is reserved for the overflow path, so the fast capacity
 * is at most 2^index_bits - 1 slots (16383 by default).
 *
 * The fast slots' IDs come from heapkit's one generational handle table,
 * which the cache's handles and the gc's references use too (see
 * docs/pool.md). Generations: each slot issues the generations of a
 * per-pool sequence (every pool starts at a different point, its instance
 * tag, so an ID handed to the wrong pool is very likely reported as foreign
 * rather than silently accepted). Every reuse of a slot issues the next
 * generation, so a stale ID never resolves.
 *
 * Wraparound policy: RETIRE (default). A slot may be issued
 * HK_POOL_SLOT_USES(index_bits) = 2^(32 - index_bits) - 1 generations
 * (262,143 by default). After the last one is freed the slot is retired: it
 * is never reused, so no old ID can ever resolve to a new object, until
 * hk_pool_recycle() is called at a point where the program holds no stale IDs
 * (a level load); recycle restarts those slots' sequences. With the flag
 * HK_POOL_WRAP the sequence wraps instead (generation 2^gen - 1 is followed
 * by generation 1, never 0): slots are never retired, and an ID kept across
 * 262,143 reuses of its slot could alias a new object.
 * Overflow IDs always wrap: they carry the overflow index and a per-pool key
 * taken from the same-sized sequence (skipping keys still live), so an
 * overflow ID may alias only after 2^gen - 1 further overflow allocations,
 * and at most 2^gen - 1 overflow objects can be live at once.
 *
 * Slot reuse is FIFO (HK_POOL_HOT_REUSE makes the release pass of a defer
 * scope LIFO): a freed slot goes to the back of the free queue, so it
 * is reused as late as possible. That keeps a just-freed object's memory and
 * generation untouched for the longest time (a dangling pointer or ID is most
 * likely to hit a dead slot that get() rejects and ASan has poisoned, not a
 * new object), and it spreads generation wear evenly over all slots, which
 * delays retirement.
 *
 * Lists
 * -----
 * A list is created by the pool (hk_pool_list_create) on one of the object's
 * `links` link slots (desc.links, default 2: e.g. a tick list and a draw
 * layer). An object is on at most one list per link slot, so it can be on
 * `links` lists at once. Insertion and removal are O(1) at any time.
 * Frame lists (hk_pool_flist, below) are the other kind: arrays of IDs that
 * the program rebuilds every frame, which freeing never touches (their
 * iterator skips the entries of dead objects), for lists a game rebuilds
 * in its tick anyway, such as draw layers.
 *
 * Deferred destruction
 * --------------------
 * While a defer scope is open (hk_pool_defer_begin .. hk_pool_defer_end, and
 * implicitly during hk_pool_each / hk_pool_list_each and the on_destroy
 * hook), hk_pool_free makes the objects dead AT ONCE (get() returns NULL,
 * is_alive is false, they leave every list and their parent, iterations skip
 * them) but keeps their memory valid and their slots unused until the
 * outermost scope ends; then on_destroy runs for each and the slots are
 * released. Pointers held by code running inside the scope stay valid.
 * Outside any scope hk_pool_free does all of that immediately.
 *
 * Complexity: every call is O(1) (expected O(1) on the overflow path) except
 * where noted: freeing a subtree is O(subtree), freeing with detach is
 * O(children), set_parent is O(depth) (cycle check), list_destroy/list_clear
 * are O(members), each/walk/check/recycle/clear are O(capacity + overflow),
 * check also O(frame list entries).
 * Thread-safety: an instance is not thread-safe. With desc.lock hooks every
 * call takes the lock; since callbacks (on_destroy, visitors) may re-enter
 * the pool, the lock must then be recursive.
 * Ownership: the pool owns every object's memory; pointers from
 * hk_pool_alloc / hk_pool_get are valid until the object is released (see
 * deferred destruction) or the pool is destroyed.
 * Errors: misuse is reported through desc.on_error (or the default handler)
 * and the pool stays consistent (hk_pool_check passes afterwards); nothing
 * here aborts. An ID that names no live object gets the answer the cache and
 * the gc give for their handles and references:
 *   the none ID (0)                                   HK_ERR_INVALID      HK_EK_INVALID_ARG
 *   an ID this pool never issued (another pool's, a   HK_ERR_FOREIGN      HK_EK_FOREIGN_PTR
 *     slot beyond the capacity, a generation its
 *     slot never issued, an unknown overflow key)
 *   hk_pool_free of the ID freed last from its slot   HK_ERR_DOUBLE_FREE  HK_EK_DOUBLE_FREE
 *     (release pending, free or retired)
 *   any other use of a freed ID, or a free after its  HK_ERR_STALE        HK_EK_STALE
 *     slot was reused
 * A bad list handle is HK_ERR_INVALID (never a list of this pool) or
 * HK_ERR_STALE (a destroyed list).
 */
#ifndef HEAPKIT_POOL_H
#define HEAPKIT_POOL_H

#include "heapkit/heapkit.h"
#include "heapkit/detail/handles.h"

#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif
HK_API_BEGIN

typedef struct hk_pool hk_pool;

/* A typed object ID: generation and slot index packed in 32 bits. 0 = none. */
typedef struct hk_pool_id {
    uint32_t value;
} hk_pool_id;

/* A list of the pool (see "Lists"). 0 = none. */
typedef struct hk_pool_list {
    uint32_t value;
} hk_pool_list;

#define HK_POOL_DEFAULT_INDEX_BITS 14
#define HK_POOL_MIN_INDEX_BITS     2
#define HK_POOL_MAX_INDEX_BITS     24
#define HK_POOL_MAX_LINKS          8
#define HK_POOL_DEFAULT_LINKS      2
#define HK_POOL_DEFAULT_MAX_LISTS  64
#define HK_POOL_MAX_LISTS          65535
/* Generations a slot can issue before it is retired (RETIRE policy). */
#define HK_POOL_SLOT_USES(index_bits) ((uint32_t)((1ull << (32 - (index_bits))) - 1u))

/* Pool flags, in addition to HK_FLAG_ZERO, HK_FLAG_FILL, HK_FLAG_PARANOID,
 * HK_FLAG_QUIET. */
enum {
    HK_POOL_WRAP = 1u << 16,        /* generations wrap instead of retiring slots */
    HK_POOL_NO_OVERFLOW = 1u << 17, /* no overflow path: alloc fails when the slots are exhausted */
    /* Hot reuse: the fast slots released when a defer scope or an iteration
     * ends go to the FRONT of the free queue, the last released first
     * (LIFO), so the allocations that follow (a game's refill after its
     * tick) get slots whose memory and metadata were touched moments ago
     * instead of the oldest free slot. Other frees stay FIFO. Stale IDs are
     * detected as always (every reuse issues the next generation); what it
     * gives up is FIFO's distance: a dangling raw pointer to an object freed
     * in the scope is more likely to hit its slot's next object, and
     * generation wear concentrates on the slots that churn (under the
     * RETIRE policy they retire sooner; see hk_pool_recycle). */
    HK_POOL_HOT_REUSE = 1u << 18
};

/* What hk_pool_free does with the object's children. */
typedef enum hk_pool_children {
    HK_POOL_FREE_SUBTREE = 0, /* free the whole subtree with the object */
    HK_POOL_DETACH = 1        /* children become roots and stay alive */
} hk_pool_children;

/* Called for every object when it is released (after any defer scope), with
 * the memory still valid. May call any pool function; frees it makes are
 * deferred and processed in the same release pass. */
typedef void (*hk_pool_destroy_fn)(hk_pool *p, hk_pool_id id, void *obj, void *user);

/* Visitor for hk_pool_each / hk_pool_list_each: return 0 to go on, non-zero
 * to stop (the each call returns that value). */
typedef int (*hk_pool_visit_fn)(hk_pool *p, hk_pool_id id, void *obj, void *user);

/* Zero-initialisable: every zero field means the default in brackets. */
typedef struct hk_pool_desc {
    size_t elem_size;    /* bytes per object (required, > 0) */
    size_t align;        /* object alignment, a power of two <= 4096 [16] */
    uint32_t capacity;   /* fast slots, <= 2^index_bits - 1 [2^index_bits - 1] */
    uint32_t index_bits; /* bits of the ID that hold the slot index, 2..24 [14] */
    uint32_t links;      /* link slots per object (lists it can be on at once), <= 8 [2] */
    uint32_t max_lists;  /* lists the pool can hold, <= 65535 [64] */
    void *memory; /* caller memory for everything but the overflow path (see hk_pool_memory_size); NULL: OS */
    size_t size;  /* bytes of memory */
    uint32_t flags;   /* HK_FLAG_* | HK_POOL_* */
    const char *name; /* instance name for reports ["pool"]; the pointer is kept */
    hk_error_fn on_error;
    void *error_user;
    hk_lock_hooks lock;
    hk_alloc_hooks backing;        /* overflow objects and overflow tables [malloc/free] */
    hk_pool_destroy_fn on_destroy; /* [none] */
    void *destroy_user;
} hk_pool_desc;

/* Pool-specific counters (hk_pool_stats gives the common ones). O(1). */
typedef struct hk_pool_info {
    size_t live;          /* objects alive (not counting those pending release) */
    size_t fast_live;     /* of which in fast slots */
    size_t overflow_live; /* of which on the overflow path */
    size_t overflow_peak; /* high-water mark of overflow_live */
    size_t pending;       /* freed during a defer scope, released at its end */
    size_t free_slots;    /* fast slots ready for reuse */
    size_t retired_slots; /* fast slots waiting for hk_pool_recycle */
    size_t lists;         /* lists in use */
    uint32_t capacity;    /* fast slots */
    uint32_t index_bits;
    uint32_t slot_uses;       /* generations per slot before retirement */
    uint32_t defer_depth;     /* open defer scopes (iterations included) */
    uint64_t overflow_allocs; /* objects ever allocated on the overflow path */
} hk_pool_info;

/* Bytes of caller memory a pool with this desc needs (control block, tables
 * and fast objects), or 0 when the desc is invalid or the size overflows. O(1). */
size_t hk_pool_memory_size(const hk_pool_desc *desc);

/* Creates a pool. Returns NULL when desc is NULL or invalid (elem_size 0,
 * bad align, index_bits out of range, capacity too large, links > 8,
 * max_lists too large, lock hooks half set, backing hooks half set: each
 * reported as HK_EK_INVALID_ARG), when desc->memory is smaller than
 * hk_pool_memory_size(desc), or when the OS refuses memory (reported).
 * Unless HK_POOL_NO_OVERFLOW, the overflow path's first metadata segment
 * and hash tables come from the backing hooks here (about 7 KiB; when the
 * hooks refuse, the first overflow allocation makes them).
 * O(1) with caller memory; O(capacity) otherwise (the OS zeroes the pages). */
hk_pool *hk_pool_create(const hk_pool_desc *desc);

/* Frees every live object (on_destroy runs for each, parents before their
 * children), releases overflow memory and OS memory. Caller memory is left
 * alone. NULL is ignored. Must not be called from inside a callback of the
 * same pool. O(live + capacity). */
void hk_pool_destroy(hk_pool *p);

/* ---- objects ------------------------------------------------------------- */

/* hk_pool_alloc, then hk_pool_set_parent(new, parent). A bad parent is
 * reported and gives the none ID (nothing is allocated). */
hk_pool_id hk_pool_alloc_child(hk_pool *p, hk_pool_id parent, void **obj);

/* The ID of the live object that starts at `obj`, or the none ID for NULL,
 * interior, freed or foreign pointers. Never reports. O(1) (overflow:
 * expected O(1)). */
hk_pool_id hk_pool_id_of(const hk_pool *p, const void *obj);

/* Slot index and generation of an ID (no validity check). O(1). */
uint32_t hk_pool_id_index(const hk_pool *p, hk_pool_id id);
uint32_t hk_pool_id_generation(const hk_pool *p, hk_pool_id id);

/* ---- inline fast paths ----------------------------------------------------- */

/* PRIVATE: the first member of every pool, read and written by the inline
 * functions below. Do not touch it; it may change in any release.
 * ht is the fast slots' generational handle table (heapkit/detail/handles.h):
 * ht.words[s] is the live ID of fast slot s, or (generation << index_bits) |
 * index_mask when the slot is not alive (never equal to any ID), so
 * words[s] + 1 is the next generation's ID bits; ht.ring holds the free
 * fast slots, FIFO. busy[s] is non-zero while the object is on a list or in
 * a tree. */
typedef struct hk__pool_hot {
    hk__htab ht;
    const unsigned char *busy;
    unsigned char *base;
    size_t stride;
    size_t hold_base;       /* objects held (live + pending) = hold_base - free slots */
    size_t peak;            /* high-water mark of objects held */
    uint32_t get_cap;       /* capacity, or 0 when lookups must take the lock */
    uint32_t free_cap;      /* capacity, or 0 when frees must take the full path */
    uint32_t alloc_ok;      /* 0 when allocations must take the full path */
    uint32_t nfl;           /* frame list table entries (desc.max_lists) */
    struct hk__pool_fl *fl; /* the frame list table (see "Frame lists") */
} hk__pool_hot;

#if defined(__GNUC__) || defined(__clang__)
#define HK_POOL__LIKELY(x) __builtin_expect(!!(x), 1)
#define HK_POOL__PURE      __attribute__((pure))
#else
#define HK_POOL__LIKELY(x) (x)
#define HK_POOL__PURE
#endif

/* The full (out-of-line) paths behind the inline functions. Same contracts.
 * hk__pool_get changes no memory the caller can see (with lock hooks it
 * takes and releases the lock), so it is declared pure: a loop of lookups
 * keeps the pool's table addresses in registers. */
hk_pool_id hk__pool_alloc(hk_pool *p, void **obj);
hk_result hk__pool_free(hk_pool *p, hk_pool_id id, hk_pool_children children);
void *hk__pool_get(const hk_pool *p, hk_pool_id id) HK_POOL__PURE;
/* The hot block of "no pool" (every capacity 0), read in place of NULL. */
extern const hk__pool_hot hk__pool_none;

/* Allocates one object (elem_size bytes, aligned; zeroed with HK_FLAG_ZERO,
 * filled with HK_FILL_ALLOC with HK_FLAG_FILL, otherwise unspecified) and
 * returns its ID; stores its address in *obj when obj is not NULL. Takes the
 * oldest free fast slot; when none is left the object comes from the desc's
 * backing hooks (overflow path). Returns the none ID (and reports HK_EK_NOMEM)
 * when the slots are exhausted and the overflow path is disabled or its
 * allocation fails. O(1) (overflow: expected O(1); the tables grow a
 * bounded step per overflow allocation, never all at once).
 * Inline: with a free fast slot in a pool without lock hooks, on_destroy,
 * HK_FLAG_ZERO/FILL/PARANOID (and not under a sanitizer), it is a ring pop,
 * a generation bump and a store, in the caller's code; anything else calls
 * hk__pool_alloc. */
static inline hk_pool_id hk_pool_alloc(hk_pool *p, void **obj) {
    hk__pool_hot *h = (hk__pool_hot *)p;
    if (HK_POOL__LIKELY(p && h->alloc_ok)) {
        uint32_t s, v = hk__ht_alloc_fast(&h->ht, &s);
        if (HK_POOL__LIKELY(v != 0)) {
            size_t held = h->hold_base - (size_t)(h->ht.tail - h->ht.head);
            if (held > h->peak) h->peak = held;
            unsigned char *o = h->base + (size_t)s * h->stride;
            if (obj) *obj = o;
            hk_pool_id id;
            id.value = v;
            return id;
        }
    }
    return hk__pool_alloc(p, obj);
}

/* Frees an object, and its subtree or not (`children`). See "Deferred
 * destruction" for what happens inside a defer scope. Errors (reported, the
 * pool unchanged; see "Errors" above): HK_ERR_INVALID for the none ID or a
 * `children` that is neither HK_POOL_FREE_SUBTREE nor HK_POOL_DETACH,
 * HK_ERR_DOUBLE_FREE when the object was already freed (still pending or
 * released, as long as its slot has not been reused), HK_ERR_STALE for an
 * older generation, HK_ERR_FOREIGN for an ID this pool never issued. O(1) + O(subtree) or
 * O(children). Inline: a live fast object on no list and in no tree, freed
 * outside any defer scope in a pool without hooks or debug flags, is a
 * compare, a store and a ring push in the caller's code; anything else
 * (including every error) calls hk__pool_free. */
static inline hk_result hk_pool_free(hk_pool *p, hk_pool_id id, hk_pool_children children) {
    hk__pool_hot *h = (hk__pool_hot *)p;
    if (HK_POOL__LIKELY(p != 0)) {
        uint32_t v = id.value, s = v & h->ht.index_mask;
        if (HK_POOL__LIKELY((unsigned)children <= (unsigned)HK_POOL_DETACH && s < h->free_cap &&
                            h->ht.words[s] == v && !h->busy[s] && hk__ht_free_fast(&h->ht, s, v)))
            return HK_OK;
    }
    return hk__pool_free(p, id, children);
}

/* The object's address, or NULL for the none ID or a stale, freed, foreign
 * or never-issued ID. Never reports. O(1) (overflow: expected O(1)).
 * Inline: a live fast ID costs a mask, one load and one compare in the
 * caller's code (pools with lock hooks and overflow IDs call hk__pool_get). */
static inline void *hk_pool_get(const hk_pool *p, hk_pool_id id) {
    /* Every field is read unconditionally (a NULL pool reads an empty
     * stand-in), so in a loop the compiler hoists them into registers; a
     * miss calls out of line, so the compiler keeps a predicted branch here
     * rather than making the object address wait for the compare. */
    const hk__pool_hot *h = p ? (const hk__pool_hot *)p : &hk__pool_none;
    const uint32_t *ids = h->ht.words;
    unsigned char *base = h->base;
    size_t stride = h->stride;
    uint32_t s = id.value & h->ht.index_mask, cap = h->get_cap;
    if (HK_POOL__LIKELY(s < cap && ids[s] == id.value)) return base + (size_t)s * stride;
    return hk__pool_get(p, id);
}

/* true when get(id) would return an object. O(1). */
static inline bool hk_pool_is_alive(const hk_pool *p, hk_pool_id id) { return hk_pool_get(p, id) != 0; }

/* ---- parent / child ------------------------------------------------------ */

/* Makes `parent` the parent of `child` (the none ID detaches it). The child
 * leaves its previous parent and becomes the parent's LAST child. Errors
 * (reported): HK_ERR_STALE / HK_ERR_FOREIGN / HK_ERR_INVALID for dead or bad
 * IDs, HK_ERR_INVALID when parent == child or parent is in child's subtree
 * (a cycle). O(depth of parent). */
hk_result hk_pool_set_parent(hk_pool *p, hk_pool_id child, hk_pool_id parent);

/* Tree navigation for live objects; the none ID when there is none or the
 * ID is not alive. O(1). */
hk_pool_id hk_pool_parent(const hk_pool *p, hk_pool_id id);
hk_pool_id hk_pool_first_child(const hk_pool *p, hk_pool_id id);
hk_pool_id hk_pool_next_sibling(const hk_pool *p, hk_pool_id id);
/* Number of direct children. O(1). */
uint32_t hk_pool_child_count(const hk_pool *p, hk_pool_id id);

/* ---- lists --------------------------------------------------------------- */

/* Creates an empty list on link slot `link` (< desc.links). `name` is kept
 * (not copied) for reports. Returns the none list (and reports) when link
 * is out of range or max_lists lists exist. O(1). */
hk_pool_list hk_pool_list_create(hk_pool *p, uint32_t link, const char *name);

/* Takes every member off the list and deletes the list (its handle becomes
 * stale). Members stay alive. HK_ERR_STALE/HK_ERR_INVALID for a bad list
 * (reported). O(members). */
hk_result hk_pool_list_destroy(hk_pool *p, hk_pool_list list);

/* Appends / prepends a live object. An object on another list of the same
 * link slot is moved (it is on at most one list per link). Objects added
 * while the list is being iterated are not visited by that iteration.
 * Errors (reported): bad list, dead or bad ID. O(1). */
hk_result hk_pool_list_push_back(hk_pool *p, hk_pool_list list, hk_pool_id id);
hk_result hk_pool_list_push_front(hk_pool *p, hk_pool_list list, hk_pool_id id);

/* Takes the object off the list. HK_ERR_INVALID (reported) when it is not on
 * it; bad list or ID reported as above. Safe during any iteration. O(1). */
hk_result hk_pool_list_remove(hk_pool *p, hk_pool_list list, hk_pool_id id);

/* Takes every member off the list. O(members). */
hk_result hk_pool_list_clear(hk_pool *p, hk_pool_list list);

/* Members of the list (0 for a bad list). O(1). */
size_t hk_pool_list_count(const hk_pool *p, hk_pool_list list);

/* The list the live object is on for `link`, or the none list. O(1). */
hk_pool_list hk_pool_list_of(const hk_pool *p, hk_pool_id id, uint32_t link);

/* First member, and the member after `id` on `list`; the none ID at the end
 * or for bad arguments. For loops that do not change the list; use
 * hk_pool_list_each when the loop may remove or free objects. O(1). */
hk_pool_id hk_pool_list_first(const hk_pool *p, hk_pool_list list);
hk_pool_id hk_pool_list_next(const hk_pool *p, hk_pool_list list, hk_pool_id id);

/* ---- iteration and defer scopes ------------------------------------------ */

/* Calls fn for every member of `list`, front to back, inside a defer scope.
 * The members visited are those on the list when the call starts and still
 * on it (not freed, removed or moved) when their turn comes; fn may free,
 * remove, add or move any object, the current one included, and objects
 * added during the call are not visited (so the call always ends). Nested
 * iterations of the same list are allowed. Returns fn's non-zero value, 0 when done, -1 for a bad list
 * (reported). O(members). */
int hk_pool_list_each(hk_pool *p, hk_pool_list list, hk_pool_visit_fn fn, void *user);

/* Calls fn for every live object (fast slots by index, then the overflow
 * path) inside a defer scope; fn may free any object. Objects allocated
 * during the call may or may not be visited. O(capacity + overflow). */
int hk_pool_each(hk_pool *p, hk_pool_visit_fn fn, void *user);

/* ---- inline list iteration -------------------------------------------------
 *
 *   hk_pool_iter it;
 *   for (it = hk_pool_iter_begin(p, list); (obj = hk_pool_iter_next(&it)) != NULL;) {
 *       ... it.id is obj's ID; free, remove, add or move anything ...
 *   }
 *
 * The same visits as hk_pool_list_each (the members on the list when the
 * first hk_pool_iter_next runs and still on it when their turn comes;
 * objects added meanwhile are not visited; nested iterations of one list
 * are allowed) and the same defer scope: from the first hk_pool_iter_next
 * until the one that returns NULL, frees are deferred, so every pointer the
 * loop holds stays valid and no slot is reused. Leaving the loop early
 * (break, return, goto) requires hk_pool_iter_end(&it), which closes the
 * scope; without it the pool stays in a defer scope and keeps a pointer to
 * `it`. Between the first next and the end, `it` must stay where it is (the
 * pool fixes it up when members leave the list): do not copy or move it.
 * Cost: a step over a fast slot is inline, a compare, two loads (the next
 * link and the ID) and an address computation, as a raw intrusive list;
 * the first and last steps, overflow objects, and every step of a pool
 * with lock hooks (which then takes the lock for each step) go out of
 * line. Thread-safety: as the pool. */

/* PRIVATE: a running iteration's frame, fixed up by the pool when a member
 * leaves the list (the same frame hk_pool_list_each uses). */
typedef struct hk__pool_iter_frame {
    struct hk__pool_iter_frame *up;
    uint32_t list; /* list index */
    uint32_t next; /* slot to visit next; HK__POOL_ITER_END when done */
    uint32_t last; /* last slot to visit */
} hk__pool_iter_frame;

#define HK__POOL_ITER_END   0xFFFFFFFFu /* no slot: the iteration is over */
#define HK__POOL_ITER_START 0xFFFFFFFEu /* before the first step */

typedef struct hk_pool_iter {
    hk_pool_id id; /* the current object's ID (after hk_pool_iter_next returned it) */
    void *obj;     /* the current object, NULL before the first step and after the last */
    /* PRIVATE from here on */
    hk__pool_iter_frame f;
    hk_pool *p;
    uint32_t handle; /* the list's handle */
    uint32_t cap;    /* fast slots the inline step takes (0: every step out of line) */
    uint32_t state;  /* 0 not started, 1 running, 2 done */
    uint32_t reserved;
    const unsigned char *lnext; /* address of slot 0's next link on the list's link slot */
    size_t rstride;             /* bytes between two slots' links */
    const uint32_t *words;      /* the IDs of the fast slots */
    unsigned char *base;        /* fast slot 0's object */
    size_t stride;              /* bytes between two fast objects */
} hk_pool_iter;

/* An iteration over `list`, not started (nothing happens in the pool until
 * the first hk_pool_iter_next). A bad list (or a NULL pool) is reported and
 * gives an iteration that visits nothing. O(1). */
hk_pool_iter hk_pool_iter_begin(hk_pool *p, hk_pool_list list);

/* The out-of-line step: the first and the last, overflow objects, locked
 * pools. Same contract as hk_pool_iter_next. */
void *hk__pool_iter_step(hk_pool_iter *it);

/* The next member (its ID in it->id), or NULL when the iteration is over
 * (the defer scope is then closed, releasing what was freed inside it).
 * Calling it again after NULL returns NULL. O(1) (the last step:
 * O(objects released)). */
static inline void *hk_pool_iter_next(hk_pool_iter *it) {
    uint32_t s = it->f.next;
    if (HK_POOL__LIKELY(s < it->cap)) {
        uint32_t n;
        memcpy(&n, it->lnext + (size_t)s * it->rstride, sizeof n);
        it->f.next = s == it->f.last ? HK__POOL_ITER_END : n;
        it->id.value = it->words[s];
        return it->obj = it->base + (size_t)s * it->stride;
    }
    return hk__pool_iter_step(it);
}

/* Ends an iteration before hk_pool_iter_next returned NULL: closes its
 * defer scope (releasing what was freed inside). Harmless on an iteration
 * that is over or never started. O(1) + O(objects released). */
void hk_pool_iter_end(hk_pool_iter *it);

/* ---- frame lists -------------------------------------------------------------
 *
 * A frame list is a sequence of object IDs that the program rebuilds every
 * frame, as a game rebuilds its draw layers during its tick: cleared in
 * O(1), appended to in O(1) (inline), and visited in push order by an
 * inline iterator that SKIPS every entry whose object is no longer alive.
 * Nothing is linked through the objects: a push writes one ID into the
 * list's own array, freeing an object does not touch the frame lists it is
 * on (its entries go stale and are skipped: the generation in the ID says
 * so), so no unlink and no neighbour write is paid at death. The price: an
 * object pushed twice is visited twice (a frame list is a sequence, not a
 * set; the doubly-linked lists above are sets), and dead entries keep their
 * room until the next clear.
 *
 *   hk_pool_flist tick[2], layer[8];  (tick[cur] holds this frame's objects)
 *   hk_pool_flist_clear(p, tick[cur ^ 1]); ... clear every layer ...
 *   for (it = hk_pool_fiter_begin(p, tick[cur]); (o = hk_pool_fiter_next(&it)) != NULL;) {
 *       if (update(o)) hk_pool_free(p, it.id, HK_POOL_FREE_SUBTREE);
 *       else { hk_pool_flist_push(p, tick[cur ^ 1], it.id);
 *              hk_pool_flist_push(p, layer[o->layer], it.id); }
 *   }
 *   ... draw: for each layer, for each object of hk_pool_fiter over it ...
 *
 * Safety: an entry is only ever an ID, so a freed object (or one whose slot
 * was reused by a new object) is never reached through a frame list: the
 * iterator compares the entry with the slot's live ID, the same check as
 * hk_pool_get. The iteration is a defer scope like hk_pool_iter's: frees
 * made inside it are deferred to its last step, so the pointers the loop
 * holds stay valid and no slot is reused until it ends.
 * Storage: each list's array comes from desc.backing (malloc by default),
 * reserved at create. It grows without a pause: once it is 3/4 full, an
 * array of twice the room is allocated and each later push copies 4
 * entries into it, which ends before the old one is full; then the list
 * switches to it. A push whose growth fails is reported (HK_ERR_NOMEM) and
 * adds nothing. Frame lists
 * share the handle space of desc.max_lists with nobody: a pool holds up to
 * max_lists lists and, apart, up to max_lists frame lists.
 * Thread-safety: as the pool (with lock hooks every call takes the lock,
 * and the inline push and iteration steps go out of line to do so). */

typedef struct hk_pool_flist {
    uint32_t value; /* (generation << 16) | (index + 1); 0 = none */
} hk_pool_flist;

/* PRIVATE: a frame list's state, in the table the hot block points to. */
typedef struct hk__pool_fl {
    uint32_t *ents;   /* the entries (IDs), room of them */
    uint32_t count;   /* entries pushed since the last clear */
    uint32_t room;    /* entries the array holds */
    uint32_t handle;  /* the list's handle while it exists, 0 otherwise */
    uint32_t gen;     /* generation of its last handle */
    const char *name; /* kept for reports */
    uint32_t limit;   /* the inline push appends while count < limit (3/4 of room) */
    uint32_t copied;  /* growth: entries already copied to next */
    uint32_t *next;   /* growth: the array of twice the room being filled, or NULL */
} hk__pool_fl;

/* Creates an empty frame list with room for `reserve` entries without any
 * growth (the array holds 4/3 of them: growth starts at 3/4) (0: none
 * yet; the first push allocates). `name` is kept, not copied. Returns the
 * none list (reported) when max_lists frame lists exist, or HK_EK_NOMEM
 * when the reserve cannot be allocated. O(1). */
hk_pool_flist hk_pool_flist_create(hk_pool *p, uint32_t reserve, const char *name);

/* Deletes a frame list and its array; its handle becomes stale. Running
 * iterations of it end at their next step. Objects are not affected.
 * HK_ERR_INVALID / HK_ERR_STALE (reported) for a bad handle. O(1). */
hk_result hk_pool_flist_destroy(hk_pool *p, hk_pool_flist fl);

/* Empties the list (its room is kept). Running iterations of it end at
 * their next step. Errors as destroy. O(1). */
hk_result hk_pool_flist_clear(hk_pool *p, hk_pool_flist fl);

/* Entries pushed since the last clear, those of objects freed since
 * included (0 for a bad handle). O(1). */
size_t hk_pool_flist_count(const hk_pool *p, hk_pool_flist fl);

/* Entries of objects still alive: O(count). */
size_t hk_pool_flist_live(const hk_pool *p, hk_pool_flist fl);

/* The full path behind hk_pool_flist_push (growth, overflow IDs, locked
 * pools, every error). Same contract. */
hk_result hk__pool_flist_push(hk_pool *p, hk_pool_flist fl, hk_pool_id id);

/* Appends a live object's ID. Errors (reported, nothing added): bad frame
 * list (HK_ERR_INVALID, or HK_ERR_STALE for a destroyed one), an ID that
 * names no live object (the table in "Errors": HK_ERR_STALE for a freed
 * one, HK_ERR_FOREIGN, HK_ERR_INVALID for the none ID), HK_ERR_NOMEM when
 * the array cannot grow. Entries pushed while the list is iterated are not
 * visited by that iteration. O(1): a push past 3/4 of the room copies 4
 * entries to the next array (and allocates it, or switches to it). Inline: a live fast ID onto a
 * list with room, in a pool without lock hooks, is a handle compare, an ID
 * compare and a store in the caller's code. */
static inline hk_result hk_pool_flist_push(hk_pool *p, hk_pool_flist fl, hk_pool_id id) {
    hk__pool_hot *h = (hk__pool_hot *)p;
    if (HK_POOL__LIKELY(p != 0)) {
        uint32_t fi = (fl.value & 0xFFFFu) - 1u, v = id.value, s = v & h->ht.index_mask;
        if (HK_POOL__LIKELY(fi < h->nfl && s < h->get_cap && h->ht.words[s] == v)) {
            hk__pool_fl *f = &h->fl[fi];
            if (HK_POOL__LIKELY(f->handle == fl.value && f->count < f->limit)) {
                f->ents[f->count++] = v;
                return HK_OK;
            }
        }
    }
    return hk__pool_flist_push(p, fl, id);
}

/* PRIVATE: a running frame-list iteration, fixed up by the pool when the
 * list is cleared, destroyed or grows. */
typedef struct hk__pool_fiter_frame {
    struct hk__pool_fiter_frame *up;
    const uint32_t *ents; /* the list's array */
    uint32_t fl;          /* frame list index */
    uint32_t i;           /* next entry */
    uint32_t end;         /* entries [0, end) are visited; 0 before the start and after the end */
    uint32_t reserved;
} hk__pool_fiter_frame;

/*   hk_pool_fiter it;
 *   for (it = hk_pool_fiter_begin(p, fl); (obj = hk_pool_fiter_next(&it)) != NULL;) {
 *       ... it.id is obj's ID; free, push or allocate anything ...
 *   }
 *
 * Visits the entries present at the first hk_pool_fiter_next, in push
 * order, whose objects are alive when their turn comes (entries pushed
 * meanwhile are not visited; clearing or destroying the list ends the
 * iteration). From the first hk_pool_fiter_next until the one that returns
 * NULL the pool is in a defer scope (as hk_pool_iter). Leaving early
 * requires hk_pool_fiter_end(&it); `it` must not be moved or copied while
 * running. Cost of a step over a fast slot: the entry, a mask and a
 * compare with the slot's live ID (dead entries are skipped in the same
 * inline loop), the object's address; the first and last steps, overflow
 * objects and every step of a pool with lock hooks go out of line. */
typedef struct hk_pool_fiter {
    hk_pool_id id; /* the current object's ID */
    void *obj;     /* the current object, NULL before the first step and after the last */
    /* PRIVATE from here on */
    hk__pool_fiter_frame f;
    hk_pool *p;
    uint32_t handle; /* the frame list's handle */
    uint32_t cap;    /* fast slots the inline step takes (0: every step out of line) */
    uint32_t mask;   /* index mask of IDs */
    uint32_t state;  /* 0 not started, 1 running, 2 done */
    const uint32_t *words;
    unsigned char *base;
    size_t stride;
} hk_pool_fiter;

/* An iteration over frame list `fl`, not started. A bad list (or a NULL
 * pool) is reported and gives an iteration that visits nothing. O(1). */
hk_pool_fiter hk_pool_fiter_begin(hk_pool *p, hk_pool_flist fl);

/* The out-of-line step (first and last steps, overflow entries, locked
 * pools). Same contract as hk_pool_fiter_next. */
void *hk__pool_fiter_step(hk_pool_fiter *it);

/* The next live object (its ID in it->id), or NULL when the iteration is
 * over (its defer scope then closes, releasing what was freed inside). NULL
 * again after that. O(1) per entry, dead entries included: one call skips
 * every dead entry before the next live one (O(dead entries skipped); the
 * last step: + O(objects released)). hk_pool_fiter_next_within bounds the
 * entries one call looks at. */
static inline void *hk_pool_fiter_next(hk_pool_fiter *it) {
    uint32_t i = it->f.i;
    while (HK_POOL__LIKELY(i < it->f.end)) {
        uint32_t v = it->f.ents[i], s = v & it->mask;
        if (s >= it->cap) break; /* overflow entry or locked pool */
        i++;
        if (HK_POOL__LIKELY(it->words[s] == v)) {
            it->f.i = i;
            it->id.value = v;
            return it->obj = it->base + (size_t)s * it->stride;
        }
    }
    it->f.i = i;
    return hk__pool_fiter_step(it);
}

/* The bounded step, for a frame that must not pay for a run of dead
 * entries in one call: the next live object among the next `max_entries`
 * entries (0 is taken as 1), or NULL. NULL means either that the iteration
 * is over (as hk_pool_fiter_next: its scope closed; hk_pool_fiter_done is
 * then true) or that all `max_entries` entries looked at were dead: the
 * iteration is still running from the next entry (call again, now or in a
 * later frame; hk_pool_fiter_end to stop). Visits the same objects in the
 * same order as hk_pool_fiter_next, and the two may be mixed on one
 * iteration. Always out of line (takes the lock with lock hooks).
 * O(max_entries) (the last step: + O(objects released)). Thread-safety: as
 * the pool.
 *
 *   for (it = hk_pool_fiter_begin(p, fl); !hk_pool_fiter_done(&it);)
 *       if ((obj = hk_pool_fiter_next_within(&it, 64)) != NULL) ... use obj ...
 */
void *hk_pool_fiter_next_within(hk_pool_fiter *it, uint32_t max_entries);

/* True when the iteration is over (its last step returned NULL, or
 * hk_pool_fiter_end ran, or its frame list was bad): no more objects and
 * its defer scope is closed. False before the first step and while it
 * runs. O(1); reads the iterator only (no lock, no report). */
static inline int hk_pool_fiter_done(const hk_pool_fiter *it) { return it->state == 2; }

/* Ends a running frame-list iteration early (closes its defer scope).
 * Harmless on one that is over or never started. O(1) + O(released). */
void hk_pool_fiter_end(hk_pool_fiter *it);

/* Opens / closes a defer scope (nestable; e.g. around a whole tick). When
 * the outermost scope closes, the objects freed inside are released. end
 * without begin is reported (HK_ERR_STATE). O(1) + O(released). */
void hk_pool_defer_begin(hk_pool *p);
hk_result hk_pool_defer_end(hk_pool *p);

/* ---- maintenance --------------------------------------------------------- */

/* Returns retired slots (RETIRE policy) to the free queue with fresh
 * generation sequences. Call it only when no stale ID of this pool is kept
 * anywhere (the pool's own frame lists are taken care of: their entries of
 * dead objects are dropped first). Returns the number of slots recycled;
 * HK_ERR_STATE (negative, reported) inside a defer scope.
 * O(capacity + frame list entries). */
long hk_pool_recycle(hk_pool *p);

/* Frees every live object (as hk_pool_free with HK_POOL_FREE_SUBTREE on each
 * root). Lists stay, empty. O(live + capacity). */
void hk_pool_clear(hk_pool *p);

/* ---- introspection (see heapkit.h) --------------------------------------- */

/* Stats: capacity/free are fast-slot bytes plus overflow bytes in use;
 * live_blocks counts live and pending objects. O(1). */
hk_result hk_pool_stats(const hk_pool *p, hk_stats *out);
hk_result hk_pool_get_info(const hk_pool *p, hk_pool_info *out);

/* Visits every fast slot in address order (live objects with HK_BLOCK_USED
 * and their ID, free and retired slots without), then every overflow object
 * (HK_BLOCK_USED | HK_BLOCK_OVERFLOW). Returns fn's non-zero value or 0.
 * fn must not change the pool. O(capacity + overflow). */
int hk_pool_walk(hk_pool *p, hk_walk_fn fn, void *user);

/* Verifies every invariant: the free queue (sound, no cycles, only free
 * slots, count), every live ID resolves to its object, the overflow tables,
 * every list (links both ways, counts, membership), the parent/child links
 * (both ways, child counts, no cycles), the pending queue, the counters,
 * every frame list (handle, count within its room, every entry an ID of this
 * pool) and running frame iteration, and with HK_FLAG_FILL the free fill of
 * free slots. Reports the first broken invariant and returns HK_ERR_CORRUPT.
 * O(capacity * links + overflow + frame list entries). */
hk_result hk_pool_check(hk_pool *p);

/* Finds the object (live, pending or free fast slot) containing `addr`:
 * HK_OK and *info filled, or HK_ERR_FOREIGN. O(1) for fast slots and exact
 * overflow object addresses, O(overflow) for interior overflow addresses. */
hk_result hk_pool_where(hk_pool *p, const void *addr, hk_block_info *info);

HK_API_END

#ifdef __cplusplus
}
#endif

#endif /* HEAPKIT_POOL_H */

/*
 * src/pool_internal.h - the pool's state, shared by its files:
 *
 *   pool_slots.c     create / destroy, allocation, freeing and release,
 *                    deferred destruction, lookups, recycle, clear, counters
 *   pool_overflow.c  the overflow path: objects from the backing hooks, found
 *                    by ID and by address through two hash tables
 *   pool_links.c     the link primitives: list link / unlink (with iterator
 *                    fix-ups) and tree attach / detach
 *   pool_lists.c     the list API and list iteration
 *   pool_tree.c      the parent / child API
 *   pool_frame.c     frame lists (ID arrays rebuilt every frame) and their
 *                    iteration
 *   pool_check.c     check, walk and where
 *
 * Calls go down only: lists, frame and tree call slots, links and overflow; slots
 * calls links and overflow (and check, through the core's check pointer);
 * check calls overflow; links and overflow call nothing of the pool.
 *
 * Slots. A slot number s names every object the pool holds: s < cap is a
 * fast slot (object at base + s * stride; its metadata and then its links
 * in one record at rec + s * rstride, 64 bytes with the default 2 links,
 * so that the list, tree and release work on an object touches one cache
 * line of metadata; identity in the handle table hot.ht); s >= cap is
 * overflow slot s - cap (object from the backing hooks, metadata in the
 * overflow segments: segment k holds 64 << k slots and never moves, so the
 * overflow path never copies its tables). Slot numbers are used for every
 * link, never pointers. POOL_NIL is "no slot".
 *
 * Invariants (verified by hk_pool_check; the handle table's own by
 * hk__ht_check):
 *  - A fast slot's state is its handle table status: FREE (on the table's
 *    free ring), ALIVE (its word is its ID), DYING (HELD: freed inside a
 *    defer scope, on the pending queue, memory valid) or RETIRED (all
 *    generations used; on no queue until recycle). meta[s].state is unused
 *    for fast slots.
 *  - Overflow slots are FREE (on the overflow free list) or ALIVE/DYING
 *    (meta state); an ALIVE/DYING overflow slot's ID is (key << index_bits)
 *    | mark, found in the ID hash (key = ID) and the pointer hash (key =
 *    object address), both mapping back to the slot. A FREE overflow slot
 *    keeps the ID of its last occupant (for the double-free verdict).
 *  - The pending queue (pend_head .. pend_tail through meta.next) holds
 *    exactly the DYING slots, npending of them. While pend_ok (no overflow
 *    slot joined it since it was last empty), pend[0 .. npend) lists the
 *    same slots in the same order, so a release pass reads a dense array
 *    instead of chasing meta.next through records gone cold. DYING objects are on no list
 *    and in no tree: they left them when they were freed.
 *  - Lists: for each list, head/tail/prev/next are consistent both ways,
 *    count is the number of members, and a member's link for the list's link
 *    slot names that list; every link naming a list is on it. Only ALIVE
 *    objects are members.
 *  - Tree: a child's parent lists it among its children (doubly linked,
 *    first/last, nchildren); only ALIVE objects have parents or children;
 *    the parent chain has no cycle.
 *  - busy[s] (fast slots) is non-zero iff the object is on a list or in a
 *    tree: the inline free leaves such objects to the full path.
 *  - Active list iterations (iters, a stack of frames on the C stack) hold
 *    the next member to visit and the last one; unlinking a member fixes
 *    them up, so a member removed during an iteration is never reached.
 *  - Frame lists (fl[i], handle != 0 while it exists): count <= room, ents
 *    holds room entries (NULL when room is 0), every entry is an ID this
 *    pool issued (index < cap or the overflow mark, generation not 0), not
 *    necessarily alive. Running frame iterations (fiters) name an existing
 *    frame list, read its current array, and i <= end <= count.
 *  - live == fast_live + overflow_live == number of ALIVE slots.
 */
#ifndef HEAPKIT_POOL_INTERNAL_H
#define HEAPKIT_POOL_INTERNAL_H

#include "heapkit/pool.h"
#include "common.h"
#include "handles.h"

#define POOL_NIL           0xFFFFFFFFu
#define POOL_DEFAULT_ALIGN 16u

/* Slot states: the handle table's for fast slots, meta.state for overflow. */
enum {
    POOL_FREE = HK__HT_FREE,
    POOL_DYING = HK__HT_HELD,
    POOL_RETIRED = HK__HT_RETIRED,
    POOL_ALIVE = HK__HT_LIVE
};
#define POOL_MF_SUBTREE  1u /* DYING: its children die with it */
#define POOL_MF_NOTIFIED 2u /* DYING: on_destroy has run */

typedef struct pool_meta {
    uint32_t id;   /* overflow: ID of the current (or last) occupant; unused for fast slots */
    uint32_t next; /* pending queue or overflow free list */
    uint32_t parent, first_child, last_child, next_sib, prev_sib;
    uint32_t nchildren;
    uint8_t state, mflags; /* state: overflow slots only */
    uint16_t nlinked;      /* lists the object is on (any link slot) */
} pool_meta;

typedef struct pool_link {
    uint32_t prev, next;
    uint32_t list; /* list index + 1, 0 when on no list of this link slot */
} pool_link;

typedef struct pool_lst {
    uint32_t head, tail, count;
    uint16_t gen; /* handle value = (gen << 16) | (index + 1) */
    uint8_t link;
    uint8_t used;
    const char *name;
} pool_lst;

/* Overflow segments: segment k holds POOL_OSEG0 << k slots, starting at
 * overflow slot POOL_OSEG0 * (2^k - 1). */
#define POOL_OSEG_SHIFT 6u
#define POOL_OSEG0      (1u << POOL_OSEG_SHIFT)
#define POOL_OSEGS      27u

typedef struct pool_ovf {
    void *obj;
    void *raw;
    size_t raw_size;
} pool_ovf;

/* Open addressing, linear probing, backward-shift deletion; key 0 = empty.
 * Growth is incremental (pool_overflow.c): a table twice the size is
 * zeroed a few buckets per insert, then becomes the table while the
 * previous one is moved into it a few buckets per insert; lookups look in
 * both meanwhile. */
typedef struct pool_hash {
    uint64_t *keys;
    uint32_t *vals;
    uint32_t size;  /* power of two, 0 before the first insert */
    uint32_t count; /* keys in this table */
    uint32_t shift; /* 64 - log2(size) */
    uint32_t n;     /* live keys (in either table) */
    /* the next table, while it is being zeroed (nkeys != NULL) */
    uint64_t *nkeys;
    uint32_t *nvals;
    uint32_t nsize, nzeroed;
    /* the previous table, while it is being moved (okeys != NULL): deleted
     * keys become tombstones there, moved ones stay until it is freed */
    uint64_t *okeys;
    uint32_t *ovals;
    uint32_t osize, oshift, omoved;
} pool_hash;

/* A running list iteration (hk_pool_list_each's, or an hk_pool_iter's):
 * next is the member to visit next (POOL_NIL when done), last the last one. */
typedef hk__pool_iter_frame pool_iter;
_Static_assert(HK__POOL_ITER_END == POOL_NIL, "an iteration ends on the no-slot value");

struct hk_pool {
    hk__pool_hot hot;    /* first: the inline fast paths of pool.h read it */
    unsigned char *base; /* fast objects */
    size_t stride, elem_size, align;
    uint32_t cap, index_bits, imask, mark;
    uint32_t links;
    unsigned char *busy; /* == hot.busy */
    unsigned char *rec;  /* fast slot records: pool_meta, then `links` pool_link */
    size_t rstride;      /* bytes per record */
    pool_lst *lists;
    uint32_t max_lists, nlists;
    uint32_t pend_head, pend_tail, npending; /* fast pending slots: hot.ht.nheld */
    uint32_t *pend; /* the pending fast slots in queue order, while pend_ok (cap entries) */
    uint32_t npend; /* entries of pend in use */
    int pend_ok;    /* no overflow slot joined the queue since it was empty: pend mirrors it */
    size_t ovf_live, ovf_peak;
    /* overflow path */
    unsigned char *oseg[POOL_OSEGS]; /* segment k: pool_ovf, pool_meta, then links of 64 << k slots */
    uint32_t nosegs;
    uint32_t ocap;       /* overflow slots in the segments */
    uint32_t ohigh;      /* overflow slots ever used (initialised); the rest of the segments is not */
    uint32_t ofree_head; /* freed overflow slots, through meta.next */
    pool_hash oid, optr;
    uint32_t okey_last, okey_issued;
    size_t ovf_bytes;
    uint64_t ovf_allocs;
    /* scopes */
    uint32_t defer_depth;
    int flushing;
    int slow; /* lock hooks, on_destroy, FILL or PARANOID: no fast free path */
    int san;  /* announce objects to ASan and the tools (src/track.h): only when built with it / one is on */
    pool_iter *iters;
    /* frame lists (pool_frame.c): the table (== hot.fl, max_lists entries),
     * how many exist, and the running frame-list iterations */
    hk__pool_fl *fl;
    uint32_t nfl_used;
    hk__pool_fiter_frame *fiters;
    /* counters and host */
    uint64_t fail_count;
    uint64_t front_released; /* HK_POOL_HOT_REUSE releases, each of which moved the ring's head back */
    hk_pool_destroy_fn on_destroy;
    void *destroy_user;
    void *os_base;
    size_t os_size;
    size_t table_bytes;
    hk__core core; /* names, reporter, lock hooks, flags, paranoid check, backing hooks */
};

/* ---- slot accessors ------------------------------------------------------- */

/* Overflow slot o (0-based): its record, its metadata, its links
 * (pool_overflow.c; out of line, so that the fast-slot accessors below stay
 * small enough to inline everywhere). */
pool_ovf *hk__pool_oo(const hk_pool *p, uint32_t o);
pool_meta *hk__pool_om(const hk_pool *p, uint32_t o);
pool_link *hk__pool_ol(const hk_pool *p, uint32_t o, uint32_t link);
#define pool_oo hk__pool_oo
#define pool_om hk__pool_om
#define pool_ol hk__pool_ol

#if defined(__GNUC__) || defined(__clang__)
#define POOL_INLINE static inline __attribute__((always_inline))
#else
#define POOL_INLINE static inline
#endif

/* Fast slot s: its record (metadata, then links) and object; an overflow
 * slot goes out of line. Always inlined: they are on every list, tree and
 * free path. */
POOL_INLINE pool_meta *pool_m(const hk_pool *p, uint32_t s) {
    return s < p->cap ? (pool_meta *)(void *)(p->rec + (size_t)s * p->rstride) : pool_om(p, s - p->cap);
}
POOL_INLINE pool_link *pool_l(const hk_pool *p, uint32_t s, uint32_t link) {
    return s < p->cap ? (pool_link *)(void *)(p->rec + (size_t)s * p->rstride + sizeof(pool_meta)) + link
                      : pool_ol(p, s - p->cap, link);
}
POOL_INLINE void *pool_obj(const hk_pool *p, uint32_t s) {
    return s < p->cap ? (void *)(p->base + (size_t)s * p->stride) : pool_oo(p, s - p->cap)->obj;
}
/* The ID of slot s's current (or last) occupant. */
static inline uint32_t pool_id(const hk_pool *p, uint32_t s) {
    return s < p->cap ? (p->hot.ht.words[s] & ~p->imask) | s : pool_om(p, s - p->cap)->id;
}
static inline int pool_state(const hk_pool *p, uint32_t s) {
    if (s < p->cap) return hk__ht_status(&p->hot.ht, s);
    return pool_om(p, s - p->cap)->state;
}
static inline uint32_t pool_nfree(const hk_pool *p) { return hk__ht_nfree(&p->hot.ht); }
static inline size_t pool_fast_live(const hk_pool *p) { return hk__ht_nlive(&p->hot.ht); }
static inline size_t pool_live(const hk_pool *p) { return pool_fast_live(p) + p->ovf_live; }
static inline uint32_t pool_flags(const hk_pool *p) { return p->core.flags; }

/* busy[s]: the inline free must leave this object to the full path. */
static inline void pool_busy_update(hk_pool *p, uint32_t s) {
    if (s >= p->cap) return;
    const pool_meta *m = pool_m(p, s);
    p->busy[s] = (unsigned char)(m->parent != POOL_NIL || m->first_child != POOL_NIL || m->nlinked != 0);
}

/* Recomputes what the inline paths may do and the held-objects base; called
 * after every full-path operation and whenever a defer scope opens. */
static inline void pool_hot_update(hk_pool *p) {
    hk__pool_hot *h = &p->hot;
    int plain = !p->slow && !p->san;
    h->alloc_ok = plain && !(pool_flags(p) & HK_FLAG_ZERO);
    h->free_cap = plain && !p->defer_depth && !p->flushing ? p->cap : 0;
    h->get_cap = p->core.locked_hooks ? 0 : p->cap;
    h->hold_base = (size_t)p->cap - h->ht.nretired + p->ovf_live + (p->npending - h->ht.nheld);
    size_t held = pool_live(p) + p->npending;
    if (held > h->peak) h->peak = held;
}

/* The end of every full-path call that may change the pool, inside the
 * lock: the inline paths' permissions, then the paranoid check. */
static inline void pool_after_op(hk_pool *p) {
    pool_hot_update(p);
    hk__core_after(&p->core);
}

/* The end of a call that changed only lists or the tree (no object was
 * allocated, freed or released, no scope opened or closed): the inline
 * paths' permissions are unchanged, only the paranoid check runs. */
static inline void pool_after_links(hk_pool *p) { hk__core_after(&p->core); }

/* Prefetches the record and the object of the fast slot the allocation
 * four from now will take: FIFO reuse spreads consecutive allocations over
 * the whole pool, so each would otherwise start with two cache misses. A
 * macro, not a helper: GCC finds a helper made of prefetches free of side
 * effects and deletes its calls. */
#if defined(__GNUC__) || defined(__clang__)
#define POOL_PREFETCH_AHEAD(p)                                                                               \
    do {                                                                                                     \
        if ((p)->hot.ht.tail - (p)->hot.ht.head > 4) {                                                       \
            uint32_t ahead_ = (p)->hot.ht.ring[(uint32_t)((p)->hot.ht.head + 4) & (p)->hot.ht.ring_mask];    \
            __builtin_prefetch((p)->rec + (size_t)ahead_ * (p)->rstride);                                    \
            __builtin_prefetch((p)->base + (size_t)ahead_ * (p)->stride);                                    \
        }                                                                                                    \
    } while (0)
#else
#define POOL_PREFETCH_AHEAD(p) ((void)(p))
#endif

/* ---- pool_overflow.c --------------------------------------------------------- */

uint32_t hk__pool_hash_find(const pool_hash *h, uint64_t key);
/* At create: the first overflow segment and hash tables (about 7 KiB with
 * two links), so that the first overflow allocation asks the backing hooks
 * for its object only. A failure is left for the first overflow
 * allocation to meet. */
void hk__pool_ovf_prepare(hk_pool *p);
/* Allocates an overflow object: its slot (ALIVE, ID minted), or POOL_NIL
 * when memory fails or every key is live. */
uint32_t hk__pool_ovf_alloc(hk_pool *p, void **obj_out);
/* Releases DYING overflow slot s: memory back to the hooks, slot FREE. */
void hk__pool_ovf_release(hk_pool *p, uint32_t s);
/* The live (or DYING) overflow slot with ID v, or POOL_NIL. */
static inline uint32_t hk__pool_ovf_find(const hk_pool *p, uint32_t v) {
    return hk__pool_hash_find(&p->oid, v);
}
/* The overflow slot whose object starts at obj, or POOL_NIL. */
static inline uint32_t hk__pool_ovf_at(const hk_pool *p, const void *obj) {
    return hk__pool_hash_find(&p->optr, (uint64_t)(uintptr_t)obj);
}
/* Reports why overflow ID v (index bits == mark) names no live object. */
hk_result hk__pool_ovf_report(hk_pool *p, uint32_t v, int freeing, const char *what);
/* Frees every overflow object and table (destroy). */
void hk__pool_ovf_destroy(hk_pool *p);

/* ---- pool_links.c ------------------------------------------------------------- */

void hk__pool_list_link(hk_pool *p, uint32_t li, uint32_t s, int front);
void hk__pool_list_unlink(hk_pool *p, uint32_t li, uint32_t s);
void hk__pool_attach(hk_pool *p, uint32_t s, uint32_t parent);
void hk__pool_detach(hk_pool *p, uint32_t s);

/* ---- pool_slots.c ------------------------------------------------------------- */

/* The slot of the live object with ID v, or POOL_NIL. No report. */
static inline uint32_t pool_alive_slot(const hk_pool *p, uint32_t v) {
    uint32_t s = v & p->imask;
    if (s < p->cap) return p->hot.ht.words[s] == v ? s : POOL_NIL;
    if (s != p->mark) return POOL_NIL;
    uint32_t o = hk__pool_ovf_find(p, v);
    if (o == POOL_NIL || pool_om(p, o - p->cap)->state != POOL_ALIVE) return POOL_NIL;
    return o;
}
/* The slot of a live object, or POOL_NIL after reporting why the ID is not
 * one (for the operation `what`; `freeing` for a free) with *res set. */
uint32_t hk__pool_resolve(hk_pool *p, hk_pool_id id, const char *what, int freeing, hk_result *res);
/* Allocates one object (fast slot or overflow), reporting failure. */
hk_pool_id hk__pool_alloc_locked(hk_pool *p, void **obj);
/* Opens / closes an internal defer scope (iterations); closing the
 * outermost releases what was freed inside. */
void hk__pool_scope_begin(hk_pool *p);
void hk__pool_scope_end(hk_pool *p);

/* Drops from every frame list the entries whose objects are not alive:
 * recycle calls it before sequences restart, since a dead entry's ID could
 * otherwise name an object of the restarted sequence. Running frame
 * iterations are not affected (recycle is refused inside any scope). */
static inline void pool_fl_drop_dead(hk_pool *p) {
    for (uint32_t i = 0; i < p->max_lists; i++) {
        hk__pool_fl *f = &p->fl[i];
        uint32_t w = 0;
        for (uint32_t e = 0; e < f->count; e++)
            if (pool_alive_slot(p, f->ents[e]) != POOL_NIL) f->ents[w++] = f->ents[e];
        f->count = w;
        f->copied = 0; /* the entries moved: a growth in progress copies them again */
    }
}

/* Frees every frame list's array (pool_frame.c keeps the lists; destroy
 * calls this). */
static inline void pool_fl_destroy_all(hk_pool *p) {
    for (uint32_t i = 0; i < p->max_lists; i++) {
        hk__pool_fl *f = &p->fl[i];
        hk__core_backing_free(&p->core, f->ents, (size_t)f->room * sizeof(uint32_t));
        if (f->next) hk__core_backing_free(&p->core, f->next, (size_t)f->room * 2u * sizeof(uint32_t));
        f->ents = f->next = NULL;
        f->room = f->count = f->limit = f->copied = 0;
        f->handle = 0;
    }
    p->nfl_used = 0;
    p->fiters = NULL;
}

/* ---- pool_check.c ------------------------------------------------------------- */

/* The full check, without the lock (the core's paranoid hook). */
hk_result hk__pool_check(void *pool);

#endif /* HEAPKIT_POOL_INTERNAL_H */

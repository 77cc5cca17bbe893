/*
 * src/pool.c - fixed-size objects addressed by generational IDs, with live
 * lists, parent/child trees and deferred destruction (heapkit/pool.h).
 *
 * Slots. A slot number s names every object the pool holds: s < cap is a
 * fast slot (object at base + s * stride, metadata in meta[s], links in
 * lk[s * links ..]); s >= cap is overflow slot s - cap (object from the alloc
 * hook, metadata in ometa / olk / oobj, tables that grow). Slot numbers are
 * used for every link, never pointers, so the overflow tables may move.
 * POOL_NIL is "no slot".
 *
 * Invariants (verified by hk_pool_check):
 *  - A fast slot is in exactly one state: FREE (on the free queue), ALIVE,
 *    DYING (freed inside a defer scope, on the pending queue, memory valid)
 *    or RETIRED (all generations used; on no queue until recycle).
 *  - ids[s] == meta[s].id for ALIVE fast slots and POOL_ID_DEAD otherwise,
 *    so get() is one load and one compare. meta[s].id is the ID of the
 *    current or last occupant; meta[s].gen its generation; meta[s].uses the
 *    number of generations issued (saturating at gmax). An ALIVE or DYING
 *    fast slot's id is (gen << index_bits) | s.
 *  - The free queue (free_head .. free_tail through meta.next) holds exactly
 *    the FREE fast slots, nfree of them, oldest first (FIFO reuse).
 *  - Overflow slots are FREE (on the overflow free list) or ALIVE/DYING; an
 *    ALIVE/DYING overflow slot's ID is (key << index_bits) | mark, found in
 *    the ID hash (key = ID) and the pointer hash (key = object address),
 *    both mapping back to the slot.
 *  - The pending queue (pend_head .. pend_tail through meta.next) holds
 *    exactly the DYING slots, npending of them. DYING objects are on no list
 *    and in no tree: they left them when they were freed.
 *  - Lists: for each list, head/tail/prev/next are consistent both ways,
 *    count is the number of members, and a member's link for the list's link
 *    slot names that list; every link naming a list is on it. Only ALIVE
 *    objects are members.
 *  - Tree: a child's parent lists it among its children (doubly linked,
 *    first/last, nchildren); only ALIVE objects have parents or children;
 *    the parent chain has no cycle.
 *  - Active list iterations (iters, a stack of frames on the C stack) hold
 *    the next member to visit and the last one; unlinking a member fixes
 *    them up, so a member removed during an iteration is never reached.
 *  - live == fast_live + overflow_live == number of ALIVE slots.
 */
#include "heapkit/pool.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define POOL_NIL           0xFFFFFFFFu
#define POOL_ID_DEAD       0xFFFFFFFFu /* ids[] value of a slot that is not ALIVE (never a fast ID) */
#define POOL_DEFAULT_ALIGN 16u

enum { POOL_FREE = 0, POOL_ALIVE = 1, POOL_DYING = 2, POOL_RETIRED = 3 };
#define POOL_MF_SUBTREE  1u /* DYING: its children die with it */
#define POOL_MF_NOTIFIED 2u /* DYING: on_destroy has run */
#define POOL_MF_WRAPPED  4u /* fast: has issued the last generation of its sequence (uses saturate) */
#define POOL_MF_SEEN     8u /* check(): met on the free ring */

typedef struct pool_meta {
    uint32_t id;   /* overflow: ID of the current occupant (fast slots: see ids[]) */
    uint32_t next; /* pending queue or overflow free list */
    uint32_t parent, first_child, last_child, next_sib, prev_sib;
    uint32_t nchildren;
    uint8_t state, mflags;
    uint16_t nlinked; /* lists the object is on (any link slot) */
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

typedef struct pool_ovf {
    void *obj;
    void *raw;
    size_t raw_size;
} pool_ovf;

/* Open addressing, linear probing, backward-shift deletion; key 0 = empty. */
typedef struct pool_hash {
    uint64_t *keys;
    uint32_t *vals;
    uint32_t size; /* power of two, 0 before the first insert */
    uint32_t count;
    uint32_t shift; /* 64 - log2(size) */
} pool_hash;

typedef struct pool_iter {
    struct pool_iter *up;
    uint32_t list; /* list index */
    uint32_t next; /* next member to visit, POOL_NIL when done */
    uint32_t last; /* last member to visit */
} pool_iter;

struct hk_pool {
    hk_pool__hot hot;    /* first: the inline fast paths of pool.h read it */
    unsigned char *base; /* fast objects */
    size_t stride, elem_size, align;
    uint32_t cap, index_bits, imask, mark;
    uint32_t gmax;  /* generations per sequence: 2^(32-index_bits) - 1 */
    uint32_t gbase; /* first generation of every sequence of this pool */
    uint32_t links;
    uint32_t *ids;       /* == hot.ids */
    unsigned char *busy; /* == hot.busy */
    uint32_t gen_last;   /* last generation of a sequence (a slot issuing it has used them all) */
    pool_meta *meta;
    pool_link *lk;
    pool_lst *lists;
    uint32_t max_lists, nlists;
    uint32_t nretired;
    uint32_t pend_head, pend_tail, npending, fpending; /* fpending: pending fast slots */
    size_t ovf_live, ovf_peak;
    /* overflow path */
    pool_meta *ometa;
    pool_link *olk;
    pool_ovf *oobj;
    uint32_t ocap, ofree_head;
    pool_hash oid, optr;
    uint32_t okey_last, okey_issued;
    size_t ovf_bytes;
    uint64_t ovf_allocs;
    /* scopes */
    uint32_t defer_depth;
    int flushing;
    int slow; /* lock hooks, on_destroy, FILL or PARANOID: no fast free path */
    int san;  /* announce blocks to ASan / Valgrind (client requests cost time: only when running under it) */
    pool_iter *iters;
    /* counters and host */
    uint64_t fail_count;
    uint32_t flags;
    void *(*halloc)(size_t, void *);
    void (*hfree)(void *, size_t, void *);
    void *huser;
    hk_pool_destroy_fn on_destroy;
    void *destroy_user;
    void *os_base;
    size_t os_size;
    size_t table_bytes;
    hk__reporter rep;
    hk_lock_hooks lock;
};

static void *pool_default_alloc(size_t size, void *user) {
    (void)user;
    return malloc(size);
}
static void pool_default_free(void *ptr, size_t size, void *user) {
    (void)size;
    (void)user;
    free(ptr);
}

/* ---- slot accessors ------------------------------------------------------- */

static inline pool_meta *pool_m(const hk_pool *p, uint32_t s) {
    return s < p->cap ? &p->meta[s] : &p->ometa[s - p->cap];
}
static inline pool_link *pool_l(const hk_pool *p, uint32_t s, uint32_t link) {
    return s < p->cap ? &p->lk[(size_t)s * p->links + link] : &p->olk[(size_t)(s - p->cap) * p->links + link];
}
static inline void *pool_obj(const hk_pool *p, uint32_t s) {
    return s < p->cap ? (void *)(p->base + (size_t)s * p->stride) : p->oobj[s - p->cap].obj;
}
static inline uint32_t pool_gen_next(const hk_pool *p, uint32_t gen) {
    return gen == 0 ? p->gbase : gen >= p->gmax ? 1u : gen + 1u; /* no division on the hot path */
}
static inline uint32_t pool_gen_ord(const hk_pool *p, uint32_t gen) {
    return (gen + p->gmax - p->gbase) % p->gmax;
}

/* Fast slots keep their hot state in ids[] (see the invariants): an ids[]
 * value whose index bits are all ones is "not alive" and still carries the
 * generation of the last occupant. meta[s].state is FREE, DYING or RETIRED;
 * ALIVE is never stored for a fast slot, it is read from ids[]. */
static inline int pool_ids_alive(const hk_pool *p, uint32_t x) { return (x & p->imask) != p->imask; }
static inline uint32_t pool_gen(const hk_pool *p, uint32_t s) { return p->ids[s] >> p->index_bits; }
static inline uint32_t pool_id(const hk_pool *p, uint32_t s) {
    return s < p->cap ? (p->ids[s] & ~p->imask) | s : p->ometa[s - p->cap].id;
}
static inline int pool_state(const hk_pool *p, uint32_t s) {
    if (s < p->cap) return pool_ids_alive(p, p->ids[s]) ? POOL_ALIVE : p->meta[s].state;
    return p->ometa[s - p->cap].state;
}
/* Generations a fast slot has issued since creation or recycle (saturating). */
static uint32_t pool_uses(const hk_pool *p, uint32_t s) {
    uint32_t g = pool_gen(p, s);
    if (p->meta[s].mflags & POOL_MF_WRAPPED) return p->gmax;
    if (g == 0 || (g == p->gbase - 1u && pool_state(p, s) == POOL_FREE)) return 0; /* fresh */
    return pool_gen_ord(p, g) + 1u;
}
/* ids[] of a slot that never issued an ID: "generation gbase - 1", so that
 * ids[s] + 1 (the inline alloc) gives generation gbase. A FREE slot with that
 * generation and without POOL_MF_WRAPPED is fresh (a slot that issued
 * gbase - 1 == gen_last is retired, or WRAPPED under HK_POOL_WRAP). */
#define POOL_FRESH(p) (((p)->gbase - 1u) << (p)->index_bits | (p)->imask)
#define POOL_NFREE(p) ((uint32_t)((p)->hot.tail - (p)->hot.head))
static inline size_t pool_fast_live(const hk_pool *p) {
    return (size_t)p->cap - POOL_NFREE(p) - p->nretired - p->fpending;
}
static inline size_t pool_live(const hk_pool *p) { return pool_fast_live(p) + p->ovf_live; }
static inline void pool_ring_push(hk_pool *p, uint32_t s) {
    p->hot.ring[(uint32_t)p->hot.tail & p->hot.ring_mask] = s;
    p->hot.tail++;
}
/* busy[s]: the inline free must leave this object to the full path. */
static inline void pool_busy_update(hk_pool *p, uint32_t s) {
    if (s >= p->cap) return;
    const pool_meta *m = &p->meta[s];
    p->busy[s] = (unsigned char)(m->parent != POOL_NIL || m->first_child != POOL_NIL || m->nlinked != 0);
}
/* Recomputes what the inline paths may do and the held-objects base; called
 * after every full-path operation and whenever a defer scope opens. */
static void pool_hot_update(hk_pool *p) {
    hk_pool__hot *h = &p->hot;
    int plain = !p->slow && !p->san;
    h->alloc_ok = plain && !(p->flags & HK_FLAG_ZERO);
    h->free_cap = plain && !p->defer_depth && !p->flushing ? p->cap : 0;
    h->get_cap = p->lock.lock ? 0 : p->cap;
    h->hold_base = (size_t)p->cap - p->nretired + p->ovf_live + (p->npending - p->fpending);
    size_t held = pool_live(p) + p->npending;
    if (held > h->peak) h->peak = held;
}

/* ---- hash tables (overflow path) ----------------------------------------- */

static inline uint32_t pool_hash_pos(const pool_hash *h, uint64_t key) {
    return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> h->shift);
}

static uint32_t pool_hash_find(const pool_hash *h, uint64_t key) {
    if (!h->size) return POOL_NIL;
    uint32_t mask = h->size - 1, i = pool_hash_pos(h, key);
    for (;;) {
        uint64_t k = h->keys[i];
        if (k == key) return h->vals[i];
        if (k == 0) return POOL_NIL;
        i = (i + 1) & mask;
    }
}

static void pool_hash_put_raw(pool_hash *h, uint64_t key, uint32_t val) {
    uint32_t mask = h->size - 1, i = pool_hash_pos(h, key);
    while (h->keys[i] != 0) i = (i + 1) & mask;
    h->keys[i] = key;
    h->vals[i] = val;
    h->count++;
}

/* Makes room for one more key (load <= 1/2). Returns 0 when memory fails. */
static int pool_hash_reserve(hk_pool *p, pool_hash *h) {
    if ((size_t)(h->count + 1) * 2 <= h->size) return 1;
    uint32_t nsize = h->size ? h->size * 2 : 64;
    if (nsize == 0 || nsize > (1u << 30)) return 0;
    size_t kb = (size_t)nsize * sizeof(uint64_t), vb = (size_t)nsize * sizeof(uint32_t);
    uint64_t *keys = (uint64_t *)p->halloc(kb, p->huser);
    uint32_t *vals = keys ? (uint32_t *)p->halloc(vb, p->huser) : NULL;
    if (!vals) {
        if (keys) p->hfree(keys, kb, p->huser);
        return 0;
    }
    memset(keys, 0, kb);
    pool_hash old = *h;
    h->keys = keys;
    h->vals = vals;
    h->size = nsize;
    h->count = 0;
    h->shift = 64u - (uint32_t)__builtin_ctz(nsize);
    for (uint32_t i = 0; i < old.size; i++)
        if (old.keys[i]) pool_hash_put_raw(h, old.keys[i], old.vals[i]);
    if (old.size) {
        p->hfree(old.keys, (size_t)old.size * sizeof(uint64_t), p->huser);
        p->hfree(old.vals, (size_t)old.size * sizeof(uint32_t), p->huser);
    }
    p->table_bytes += kb + vb - (size_t)old.size * (sizeof(uint64_t) + sizeof(uint32_t));
    return 1;
}

static void pool_hash_del(pool_hash *h, uint64_t key) {
    if (!h->size) return;
    uint32_t mask = h->size - 1, i = pool_hash_pos(h, key);
    while (h->keys[i] != key) {
        if (h->keys[i] == 0) return;
        i = (i + 1) & mask;
    }
    /* backward-shift: move later entries of the run into the hole */
    uint32_t hole = i;
    for (uint32_t j = (i + 1) & mask; h->keys[j] != 0; j = (j + 1) & mask) {
        uint32_t home = pool_hash_pos(h, h->keys[j]);
        /* j may move to hole when home is not in (hole, j] cyclically */
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            h->keys[hole] = h->keys[j];
            h->vals[hole] = h->vals[j];
            hole = j;
        }
    }
    h->keys[hole] = 0;
    h->count--;
}

static void pool_hash_release(hk_pool *p, pool_hash *h) {
    if (h->size) {
        p->hfree(h->keys, (size_t)h->size * sizeof(uint64_t), p->huser);
        p->hfree(h->vals, (size_t)h->size * sizeof(uint32_t), p->huser);
    }
    memset(h, 0, sizeof *h);
}

/* ---- layout and creation -------------------------------------------------- */

typedef struct pool_layout {
    size_t elem_size, align, stride;
    uint32_t cap, index_bits, links, max_lists;
    uint32_t ring_size; /* power of two >= cap */
    size_t off_lists, off_ids, off_ring, off_busy, off_meta, off_lk, off_base, total;
} pool_layout;

static int pool_plan(const hk_pool_desc *d, pool_layout *L) {
    if (!d || d->elem_size == 0) return 0;
    L->elem_size = d->elem_size;
    L->align = d->align ? d->align : POOL_DEFAULT_ALIGN;
    if (!hk_is_pow2(L->align) || L->align > 4096) return 0;
    L->index_bits = d->index_bits ? d->index_bits : HK_POOL_DEFAULT_INDEX_BITS;
    if (L->index_bits < HK_POOL_MIN_INDEX_BITS || L->index_bits > HK_POOL_MAX_INDEX_BITS) return 0;
    uint32_t mark = (1u << L->index_bits) - 1u;
    L->cap = d->capacity ? d->capacity : mark;
    if (L->cap > mark) return 0;
    L->links = d->links ? d->links : HK_POOL_DEFAULT_LINKS;
    if (L->links > HK_POOL_MAX_LINKS) return 0;
    L->max_lists = d->max_lists ? d->max_lists : HK_POOL_DEFAULT_MAX_LISTS;
    if (L->max_lists > HK_POOL_MAX_LISTS) return 0;
    if (!hk_size_align(L->elem_size, L->align, &L->stride)) return 0;
    size_t off = sizeof(hk_pool), n;
    if (!hk_size_align(off, 16, &off)) return 0;
    L->off_lists = off;
    if (!hk_size_mul(L->max_lists, sizeof(pool_lst), &n) || !hk_size_add(off, n, &off)) return 0;
    L->off_ids = off;
    if (!hk_size_mul(L->cap, sizeof(uint32_t), &n) || !hk_size_add(off, n, &off)) return 0;
    if (!hk_size_align(off, 16, &off)) return 0;
    L->ring_size = 1;
    while (L->ring_size < L->cap) L->ring_size *= 2; /* cap < 2^24 */
    L->off_ring = off;
    if (!hk_size_mul(L->ring_size, sizeof(uint32_t), &n) || !hk_size_add(off, n, &off)) return 0;
    L->off_busy = off;
    if (!hk_size_add(off, L->cap, &off) || !hk_size_align(off, 16, &off)) return 0;
    L->off_meta = off;
    if (!hk_size_mul(L->cap, sizeof(pool_meta), &n) || !hk_size_add(off, n, &off)) return 0;
    if (!hk_size_align(off, 16, &off)) return 0;
    L->off_lk = off;
    if (!hk_size_mul((size_t)L->cap * L->links, sizeof(pool_link), &n) || !hk_size_add(off, n, &off))
        return 0;
    if (!hk_size_align(off, L->align, &off)) return 0;
    L->off_base = off;
    if (!hk_size_mul(L->cap, L->stride, &n) || !hk_size_add(off, n, &off)) return 0;
    /* room to align the start of caller memory */
    if (!hk_size_add(off, L->align > 16 ? L->align : 16, &L->total)) return 0;
    return 1;
}

size_t hk_pool_memory_size(const hk_pool_desc *desc) {
    pool_layout L;
    return pool_plan(desc, &L) ? L.total : 0;
}

static uint32_t pool_instances; /* seeds each pool's generation base */

static void pool_after_op(hk_pool *p);

hk_pool *hk_pool_create(const hk_pool_desc *desc) {
    pool_layout L;
    if (!pool_plan(desc, &L)) return NULL;
    if ((desc->lock.lock == NULL) != (desc->lock.unlock == NULL)) return NULL;
    if ((desc->alloc == NULL) != (desc->free == NULL)) return NULL;
    unsigned char *mem;
    void *os_base = NULL;
    size_t os_size = 0;
    if (desc->memory) {
        if (desc->size < L.total) return NULL;
        mem = (unsigned char *)desc->memory;
    } else {
        os_base = hk_os_alloc(L.total);
        if (!os_base) return NULL;
        os_size = L.total;
        mem = (unsigned char *)os_base;
    }
    /* align the start so that every offset keeps its alignment */
    size_t a = L.align > 16 ? L.align : 16;
    unsigned char *start = (unsigned char *)hk_align_ptr((uintptr_t)mem, a);
    hk_pool *p = (hk_pool *)start;
    memset(p, 0, sizeof *p);
    p->elem_size = L.elem_size;
    p->align = L.align;
    p->stride = L.stride;
    p->cap = L.cap;
    p->index_bits = L.index_bits;
    p->imask = (1u << L.index_bits) - 1u;
    p->mark = p->imask;
    p->gmax = HK_POOL_SLOT_USES(L.index_bits);
    uint32_t k = __atomic_fetch_add(&pool_instances, 1u, __ATOMIC_RELAXED);
    p->gbase = (uint32_t)(((uint64_t)k * 0x9E3779B1u) % p->gmax) + 1u;
    p->links = L.links;
    p->max_lists = L.max_lists;
    p->lists = (pool_lst *)(start + L.off_lists);
    p->ids = (uint32_t *)(start + L.off_ids);
    p->busy = start + L.off_busy;
    p->gen_last = p->gbase == 1 ? p->gmax : p->gbase - 1u;
    p->meta = (pool_meta *)(start + L.off_meta);
    p->lk = (pool_link *)(start + L.off_lk);
    p->base = start + L.off_base;
    memset(p->lists, 0, (size_t)L.max_lists * sizeof(pool_lst));
    for (uint32_t i = 0; i < L.max_lists; i++) p->lists[i].head = p->lists[i].tail = POOL_NIL;
    memset(p->lk, 0, (size_t)L.cap * L.links * sizeof(pool_link));
    hk_pool__hot *h = &p->hot;
    h->ids = p->ids;
    h->busy = p->busy;
    h->ring = (uint32_t *)(start + L.off_ring);
    h->base = p->base;
    h->stride = p->stride;
    h->ring_mask = L.ring_size - 1u;
    h->index_mask = p->imask;
    h->view_cap = p->cap;
    h->last_dead = (p->gen_last << p->index_bits) | p->imask;
    memset(p->busy, 0, L.cap);
    for (uint32_t s = 0; s < L.cap; s++) {
        pool_meta *m = &p->meta[s];
        p->ids[s] = POOL_FRESH(p); /* not alive, never issued */
        memset(m, 0, sizeof *m);
        m->next = POOL_NIL;
        m->parent = m->first_child = m->last_child = m->next_sib = m->prev_sib = POOL_NIL;
        h->ring[s] = s;
    }
    h->head = 0;
    h->tail = L.cap;
    p->pend_head = p->pend_tail = POOL_NIL;
    p->ofree_head = POOL_NIL;
    p->flags = desc->flags;
    p->halloc = desc->alloc ? desc->alloc : pool_default_alloc;
    p->hfree = desc->free ? desc->free : pool_default_free;
    p->huser = desc->alloc_user;
    p->on_destroy = desc->on_destroy;
    p->destroy_user = desc->destroy_user;
    p->os_base = os_base;
    p->os_size = os_size;
    hk__reporter_init(&p->rep, "pool", desc->name, desc->on_error, desc->error_user, desc->flags);
    p->lock = desc->lock;
    p->table_bytes = L.off_base;
#ifdef HK__ASAN
    p->san = 1;
#elif defined(HK__VALGRIND)
    p->san = RUNNING_ON_VALGRIND ? 1 : 0;
#endif
    p->slow = desc->lock.lock || desc->on_destroy || (desc->flags & (HK_FLAG_FILL | HK_FLAG_PARANOID)) ||
              HK_DEBUG >= 3;
    if (p->flags & HK_FLAG_FILL) hk_fill(p->base, (size_t)L.cap * L.stride, HK_FILL_FREE);
    hk__san_noaccess(p->base, (size_t)L.cap * L.stride);
    pool_hot_update(p);
    return p;
}

/* ---- ID classification and reports ---------------------------------------- */

static inline uint32_t pool_alive_slot_nolock(const hk_pool *p, uint32_t v) {
    uint32_t s = v & p->imask;
    if (s < p->cap) return p->ids[s] == v ? s : POOL_NIL;
    if (s != p->mark) return POOL_NIL;
    uint32_t o = pool_hash_find(&p->oid, v);
    if (o == POOL_NIL || p->ometa[o - p->cap].state != POOL_ALIVE) return POOL_NIL;
    return o;
}

/* Returns the slot of a live object, or reports why the ID is not one (for
 * `what`, e.g. "free") and returns POOL_NIL with *res set. */
static uint32_t pool_resolve(hk_pool *p, hk_pool_id id, const char *what, hk_result *res) {
    uint32_t v = id.value;
    uint32_t s = pool_alive_slot_nolock(p, v);
    if (s != POOL_NIL) return s;
    uint32_t idx = v & p->imask, g = v >> p->index_bits;
    if (v == 0) {
        *res = hk__report(&p->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, 0, NULL, "%s of the none ID (0)",
                          what);
        return POOL_NIL;
    }
    if (idx < p->cap) {
        uint32_t uses = pool_uses(p, idx), mgen = pool_gen(p, idx);
        int st = pool_state(p, idx);
        void *obj = p->base + (size_t)idx * p->stride;
        if (g == 0) {
            *res =
                hk__report(&p->rep, HK_ERR_FOREIGN, HK_EK_STALE, obj, p->elem_size, NULL,
                           "%s of foreign ID 0x%08x (slot %u): generation 0 is never issued", what, v, idx);
        } else if (uses && mgen == g) {
            *res = hk__report(&p->rep, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, obj, p->elem_size, NULL,
                              "%s of ID 0x%08x: object at %p (slot %u, generation %u) was already freed%s",
                              what, v, obj, idx, g, st == POOL_DYING ? " (release pending)" : "");
        } else if (uses && (uses >= p->gmax || pool_gen_ord(p, g) < pool_gen_ord(p, mgen))) {
            *res = hk__report(&p->rep, HK_ERR_STALE, HK_EK_STALE, obj, p->elem_size, NULL,
                              "%s of stale ID 0x%08x: slot %u at %p is at generation %u (%s), the ID has %u",
                              what, v, idx, obj, mgen, st == POOL_ALIVE ? "alive" : "free", g);
        } else {
            *res = hk__report(
                &p->rep, HK_ERR_FOREIGN, HK_EK_STALE, obj, p->elem_size, NULL,
                "%s of foreign ID 0x%08x: generation %u was never issued for slot %u (another pool's ID?)",
                what, v, g, idx);
        }
        return POOL_NIL;
    }
    if (idx != p->mark) {
        *res = hk__report(&p->rep, HK_ERR_FOREIGN, HK_EK_STALE, NULL, 0, NULL,
                          "%s of foreign ID 0x%08x: slot index %u is beyond the capacity %u", what, v, idx,
                          p->cap);
        return POOL_NIL;
    }
    uint32_t o = pool_hash_find(&p->oid, v);
    if (o != POOL_NIL) { /* DYING overflow object */
        void *obj = p->oobj[o - p->cap].obj;
        *res = hk__report(&p->rep, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, obj, p->elem_size, NULL,
                          "%s of ID 0x%08x: overflow object at %p was already freed (release pending)", what,
                          v, obj);
    } else if (g != 0 && p->okey_issued &&
               (p->okey_issued >= p->gmax || pool_gen_ord(p, g) <= pool_gen_ord(p, p->okey_last))) {
        *res = hk__report(&p->rep, HK_ERR_STALE, HK_EK_STALE, NULL, 0, NULL,
                          "%s of stale ID 0x%08x: the overflow object it named was freed", what, v);
    } else {
        *res =
            hk__report(&p->rep, HK_ERR_FOREIGN, HK_EK_STALE, NULL, 0, NULL,
                       "%s of foreign ID 0x%08x: overflow key %u was never issued by this pool", what, v, g);
    }
    return POOL_NIL;
}

/* ---- lists: link / unlink with iterator fix-ups ---------------------------- */

static void pool_list_unlink(hk_pool *p, uint32_t li, uint32_t s) {
    pool_lst *L = &p->lists[li];
    pool_link *l = pool_l(p, s, L->link);
    for (pool_iter *it = p->iters; it; it = it->up) {
        if (it->list != li || it->next == POOL_NIL) continue;
        if (it->next == s)
            it->next = (it->last == s) ? POOL_NIL : l->next;
        else if (it->last == s)
            it->last = l->prev;
    }
    if (l->prev != POOL_NIL)
        pool_l(p, l->prev, L->link)->next = l->next;
    else
        L->head = l->next;
    if (l->next != POOL_NIL)
        pool_l(p, l->next, L->link)->prev = l->prev;
    else
        L->tail = l->prev;
    l->prev = l->next = POOL_NIL;
    l->list = 0;
    L->count--;
    pool_m(p, s)->nlinked--;
    pool_busy_update(p, s);
}

static void pool_list_link(hk_pool *p, uint32_t li, uint32_t s, int front) {
    pool_lst *L = &p->lists[li];
    pool_link *l = pool_l(p, s, L->link);
    if (l->list) pool_list_unlink(p, l->list - 1, s);
    l->list = li + 1;
    if (front) {
        l->prev = POOL_NIL;
        l->next = L->head;
        if (L->head != POOL_NIL)
            pool_l(p, L->head, L->link)->prev = s;
        else
            L->tail = s;
        L->head = s;
    } else {
        l->next = POOL_NIL;
        l->prev = L->tail;
        if (L->tail != POOL_NIL)
            pool_l(p, L->tail, L->link)->next = s;
        else
            L->head = s;
        L->tail = s;
    }
    L->count++;
    pool_m(p, s)->nlinked++;
    pool_busy_update(p, s);
}

/* Returns the list index of a valid handle, or reports and returns POOL_NIL. */
static uint32_t pool_list_resolve(hk_pool *p, hk_pool_list list, const char *what, hk_result *res) {
    uint32_t v = list.value, idx = (v & 0xFFFFu), gen = v >> 16;
    if (idx == 0 || idx > p->max_lists) {
        *res = hk__report(&p->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, 0, NULL,
                          "%s: list handle 0x%08x is not a list of this pool (max %u lists)", what, v,
                          p->max_lists);
        return POOL_NIL;
    }
    pool_lst *L = &p->lists[idx - 1];
    if (!L->used || L->gen != gen) {
        *res = hk__report(&p->rep, HK_ERR_STALE, HK_EK_STALE, NULL, 0, L->used ? L->name : NULL,
                          "%s: list handle 0x%08x is stale (that list was destroyed)", what, v);
        return POOL_NIL;
    }
    return idx - 1;
}

static inline uint32_t pool_list_index_nolock(const hk_pool *p, hk_pool_list list) {
    uint32_t idx = list.value & 0xFFFFu;
    if (idx == 0 || idx > p->max_lists) return POOL_NIL;
    const pool_lst *L = &p->lists[idx - 1];
    return (L->used && L->gen == (list.value >> 16)) ? idx - 1 : POOL_NIL;
}

/* ---- tree ------------------------------------------------------------------ */

static void pool_detach(hk_pool *p, uint32_t s) {
    pool_meta *m = pool_m(p, s);
    if (m->parent == POOL_NIL) return;
    pool_meta *pm = pool_m(p, m->parent);
    if (m->prev_sib != POOL_NIL)
        pool_m(p, m->prev_sib)->next_sib = m->next_sib;
    else
        pm->first_child = m->next_sib;
    if (m->next_sib != POOL_NIL)
        pool_m(p, m->next_sib)->prev_sib = m->prev_sib;
    else
        pm->last_child = m->prev_sib;
    pm->nchildren--;
    uint32_t ps = m->parent;
    m->parent = m->next_sib = m->prev_sib = POOL_NIL;
    pool_busy_update(p, s);
    pool_busy_update(p, ps);
}

static void pool_attach(hk_pool *p, uint32_t s, uint32_t parent) {
    pool_meta *m = pool_m(p, s), *pm = pool_m(p, parent);
    m->parent = parent;
    m->next_sib = POOL_NIL;
    m->prev_sib = pm->last_child;
    if (pm->last_child != POOL_NIL)
        pool_m(p, pm->last_child)->next_sib = s;
    else
        pm->first_child = s;
    pm->last_child = s;
    pm->nchildren++;
    pool_busy_update(p, s);
    pool_busy_update(p, parent);
}

/* ---- allocation ------------------------------------------------------------ */

/* A FREE slot is already on no list and in no tree (kill took it out), so
 * only the identity changes; the overflow path re-checks the links since its
 * tables may be fresh. */
static inline void pool_init_slot(hk_pool *p, uint32_t s, uint32_t id) {
    pool_meta *m = pool_m(p, s);
    HK__ASSERT(m->parent == POOL_NIL && m->first_child == POOL_NIL && m->nlinked == 0);
    m->next = POOL_NIL;
    if (s < p->cap) { /* state stays FREE: ALIVE lives in ids[] */
        m->mflags &= POOL_MF_WRAPPED;
        p->ids[s] = id;
        return;
    }
    m->id = id;
    m->state = POOL_ALIVE;
    m->mflags = 0;
    for (uint32_t k = 0; k < p->links; k++) {
        pool_link *l = pool_l(p, s, k);
        l->prev = l->next = POOL_NIL;
        l->list = 0;
    }
}

/* Grows the overflow tables so that a free overflow slot exists. */
static int pool_ovf_grow(hk_pool *p) {
    if (p->ofree_head != POOL_NIL) return 1;
    uint32_t ncap = p->ocap ? p->ocap * 2 : 64;
    if (ncap > (POOL_NIL - 1) - p->cap || ncap < p->ocap) return 0;
    size_t mb = (size_t)ncap * sizeof(pool_meta), lb = (size_t)ncap * p->links * sizeof(pool_link),
           ob = (size_t)ncap * sizeof(pool_ovf);
    pool_meta *nm = (pool_meta *)p->halloc(mb, p->huser);
    pool_link *nl = nm && lb ? (pool_link *)p->halloc(lb, p->huser) : NULL;
    pool_ovf *no = nm && (nl || !lb) ? (pool_ovf *)p->halloc(ob, p->huser) : NULL;
    if (!no) {
        if (nl) p->hfree(nl, lb, p->huser);
        if (nm) p->hfree(nm, mb, p->huser);
        return 0;
    }
    size_t omb = (size_t)p->ocap * sizeof(pool_meta), olb = (size_t)p->ocap * p->links * sizeof(pool_link),
           oob = (size_t)p->ocap * sizeof(pool_ovf);
    if (p->ocap) {
        memcpy(nm, p->ometa, omb);
        if (lb) memcpy(nl, p->olk, olb);
        memcpy(no, p->oobj, oob);
        p->hfree(p->ometa, omb, p->huser);
        if (p->olk) p->hfree(p->olk, olb, p->huser);
        p->hfree(p->oobj, oob, p->huser);
    }
    for (uint32_t i = p->ocap; i < ncap; i++) {
        memset(&nm[i], 0, sizeof nm[i]);
        nm[i].state = POOL_FREE;
        nm[i].next = i + 1 < ncap ? p->cap + i + 1 : POOL_NIL;
        nm[i].parent = nm[i].first_child = nm[i].last_child = nm[i].next_sib = nm[i].prev_sib = POOL_NIL;
        memset(&no[i], 0, sizeof no[i]);
    }
    if (lb) memset(nl + (size_t)p->ocap * p->links, 0, lb - olb);
    p->ofree_head = p->cap + p->ocap;
    p->ometa = nm;
    p->olk = lb ? nl : NULL;
    p->oobj = no;
    p->table_bytes += (mb + lb + ob) - (omb + olb + oob);
    p->ocap = ncap;
    return 1;
}

static uint32_t pool_alloc_overflow(hk_pool *p, void **obj_out) {
    if (p->ovf_live + p->npending >= (size_t)p->gmax - 1) return POOL_NIL; /* every key is live */
    if (!pool_ovf_grow(p) || !pool_hash_reserve(p, &p->oid) || !pool_hash_reserve(p, &p->optr))
        return POOL_NIL;
    size_t extra = p->align > POOL_DEFAULT_ALIGN ? p->align - 1 : 0, raw_size;
    if (!hk_size_add(p->elem_size, extra, &raw_size)) return POOL_NIL;
    void *raw = p->halloc(raw_size, p->huser);
    if (!raw) return POOL_NIL;
    void *obj = (void *)hk_align_ptr((uintptr_t)raw, p->align);
    uint32_t key = p->okey_last, id;
    do {
        key = pool_gen_next(p, key);
        id = (key << p->index_bits) | p->mark;
    } while (pool_hash_find(&p->oid, id) != POOL_NIL);
    p->okey_last = key;
    if (p->okey_issued < p->gmax) p->okey_issued++;
    uint32_t s = p->ofree_head;
    pool_meta *m = pool_m(p, s);
    p->ofree_head = m->next;
    pool_init_slot(p, s, id);
    pool_ovf *o = &p->oobj[s - p->cap];
    o->obj = obj;
    o->raw = raw;
    o->raw_size = raw_size;
    pool_hash_put_raw(&p->oid, id, s);
    pool_hash_put_raw(&p->optr, (uint64_t)(uintptr_t)obj, s);
    p->ovf_live++;
    p->ovf_allocs++;
    p->ovf_bytes += raw_size;
    if (p->ovf_live > p->ovf_peak) p->ovf_peak = p->ovf_live;
    *obj_out = obj;
    return s;
}

static hk_pool_id pool_alloc_locked(hk_pool *p, void **obj) {
    hk_pool_id id = {0};
    void *o;
    uint32_t s;
    if (HK__LIKELY(p->hot.head != p->hot.tail)) {
        s = p->hot.ring[(uint32_t)p->hot.head & p->hot.ring_mask];
        p->hot.head++;
        id.value = (pool_gen_next(p, pool_gen(p, s)) << p->index_bits) | s;
        pool_init_slot(p, s, id.value);
        o = p->base + (size_t)s * p->stride;
        if (p->san) hk__san_alloc(o, p->elem_size, (p->flags & HK_FLAG_ZERO) != 0);
    } else {
        s = (p->flags & HK_POOL_NO_OVERFLOW) ? POOL_NIL : pool_alloc_overflow(p, &o);
        if (s == POOL_NIL) {
            p->fail_count++;
            hk__report(&p->rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, p->elem_size, NULL,
                       "allocation failed: all %u fast slots in use (%u retired), overflow %s (%zu live)",
                       p->cap, p->nretired,
                       (p->flags & HK_POOL_NO_OVERFLOW) ? "disabled" : "allocation failed", p->ovf_live);
            if (obj) *obj = NULL;
            return id;
        }
        id.value = pool_m(p, s)->id;
    }
    if (p->flags & HK_FLAG_ZERO)
        memset(o, 0, p->elem_size);
    else if (p->flags & HK_FLAG_FILL)
        memset(o, HK_FILL_ALLOC, p->elem_size);
    if (obj) *obj = o;
    return id;
}

/* The full path behind the inline hk_pool_alloc (pool.h). */
hk_pool_id hk_pool__alloc(hk_pool *p, void **obj) {
    if (!p) {
        if (obj) *obj = NULL;
        return (hk_pool_id){0};
    }
    hk__lock(&p->lock);
    hk_pool_id id = pool_alloc_locked(p, obj);
    pool_after_op(p);
    hk__unlock(&p->lock);
    return id;
}

hk_pool_id hk_pool_alloc_child(hk_pool *p, hk_pool_id parent, void **obj) {
    hk_pool_id id = {0};
    if (obj) *obj = NULL;
    if (!p) return id;
    hk__lock(&p->lock);
    hk_result r;
    uint32_t ps = pool_resolve(p, parent, "alloc_child", &r);
    if (ps != POOL_NIL) {
        id = pool_alloc_locked(p, obj);
        if (id.value) pool_attach(p, pool_alive_slot_nolock(p, id.value), ps);
    }
    pool_after_op(p);
    hk__unlock(&p->lock);
    return id;
}

/* ---- freeing and release ---------------------------------------------------- */

/* Makes an ALIVE object DYING: dead to every lookup, off every list, out of
 * its tree, appended to the pending queue. */
static void pool_kill(hk_pool *p, uint32_t s, int subtree) {
    pool_meta *m = pool_m(p, s);
    m->state = POOL_DYING;
    m->mflags = (uint8_t)((m->mflags & POOL_MF_WRAPPED) | (subtree ? POOL_MF_SUBTREE : 0));
    if (s < p->cap) {
        p->ids[s] |= p->imask; /* dead; the generation stays */
        p->fpending++;
    } else {
        p->ovf_live--;
    }
    for (uint32_t k = 0; k < p->links; k++) {
        pool_link *l = pool_l(p, s, k);
        if (l->list) pool_list_unlink(p, l->list - 1, s);
    }
    pool_detach(p, s);
    if (!subtree)
        while (m->first_child != POOL_NIL) pool_detach(p, m->first_child);
    m->next = POOL_NIL;
    if (p->pend_tail != POOL_NIL)
        pool_m(p, p->pend_tail)->next = s;
    else
        p->pend_head = s;
    p->pend_tail = s;
    p->npending++;
}

/* Kills s and (subtree) every descendant, breadth first through the pending
 * queue: no recursion, O(subtree). */
static void pool_kill_tree(hk_pool *p, uint32_t s, int subtree) {
    pool_kill(p, s, subtree);
    if (!subtree) return;
    for (uint32_t q = s; q != POOL_NIL; q = pool_m(p, q)->next) {
        pool_meta *qm = pool_m(p, q);
        while (qm->first_child != POOL_NIL) pool_kill(p, qm->first_child, 1);
    }
}

static void pool_release(hk_pool *p, uint32_t s) {
    pool_meta *m = pool_m(p, s);
    HK__ASSERT(m->state == POOL_DYING);
    m->mflags &= POOL_MF_WRAPPED;
    m->next = POOL_NIL;
    p->npending--;
    if (s < p->cap) {
        p->fpending--;
        void *o = p->base + (size_t)s * p->stride;
        if (p->flags & HK_FLAG_FILL) {
            hk__san_access(o, p->stride);
            hk_fill(o, p->stride, HK_FILL_FREE);
        }
        if (p->san) hk__san_free(o, p->stride);
        if (pool_gen(p, s) == p->gen_last && !(m->mflags & POOL_MF_WRAPPED)) {
            /* the slot has issued every generation of its sequence */
            if (!(p->flags & HK_POOL_WRAP)) {
                m->state = POOL_RETIRED;
                p->nretired++;
                return;
            }
            m->mflags |= POOL_MF_WRAPPED;
        }
        m->state = POOL_FREE;
        pool_ring_push(p, s);
    } else {
        pool_ovf *o = &p->oobj[s - p->cap];
        pool_hash_del(&p->oid, m->id);
        pool_hash_del(&p->optr, (uint64_t)(uintptr_t)o->obj);
        if (p->flags & HK_FLAG_FILL) hk_fill(o->obj, p->elem_size, HK_FILL_FREE);
        p->hfree(o->raw, o->raw_size, p->huser);
        p->ovf_bytes -= o->raw_size;
        memset(o, 0, sizeof *o);
        m->state = POOL_FREE;
        m->next = p->ofree_head;
        p->ofree_head = s;
    }
}

/* Runs on_destroy for every pending object (frees made by it join the queue),
 * then releases them all. Called when the outermost scope closes. */
static void pool_flush(hk_pool *p) {
    if (p->flushing || p->pend_head == POOL_NIL) return;
    p->flushing = 1;
    p->defer_depth++;
    if (p->on_destroy) {
        for (uint32_t q = p->pend_head; q != POOL_NIL; q = pool_m(p, q)->next) {
            pool_meta *m = pool_m(p, q);
            if (m->mflags & POOL_MF_NOTIFIED) continue;
            m->mflags |= POOL_MF_NOTIFIED;
            p->on_destroy(p, (hk_pool_id){pool_id(p, q)}, pool_obj(p, q), p->destroy_user);
        }
    }
    while (p->pend_head != POOL_NIL) {
        uint32_t q = p->pend_head;
        p->pend_head = pool_m(p, q)->next;
        pool_release(p, q);
    }
    p->pend_tail = POOL_NIL;
    p->defer_depth--;
    p->flushing = 0;
}

/* The full path behind the inline hk_pool_free (pool.h). */
hk_result hk_pool__free(hk_pool *p, hk_pool_id id, hk_pool_children children) {
    if (!p) return HK_ERR_INVALID;
    hk__lock(&p->lock);
    hk_result r = HK_OK;
    uint32_t s = pool_resolve(p, id, "free", &r);
    if (s != POOL_NIL) {
        pool_kill_tree(p, s, children != HK_POOL_DETACH);
        if (p->defer_depth == 0) pool_flush(p);
    }
    pool_after_op(p);
    hk__unlock(&p->lock);
    return r;
}

/* ---- lookups ---------------------------------------------------------------- */

const hk_pool__hot hk_pool__none = {0};

/* The full path behind the inline hk_pool_get (pool.h). */
void *hk_pool__get(const hk_pool *p, hk_pool_id id) {
    if (HK__UNLIKELY(!p)) return NULL;
    hk__lock(&p->lock);
    uint32_t o = pool_alive_slot_nolock(p, id.value);
    void *r = o == POOL_NIL ? NULL : pool_obj(p, o);
    hk__unlock(&p->lock);
    return r;
}

hk_pool_id hk_pool_id_of(const hk_pool *p, const void *obj) {
    hk_pool_id id = {0};
    if (!p || !obj) return id;
    hk__lock(&p->lock);
    uintptr_t a = (uintptr_t)obj, b = (uintptr_t)p->base;
    if (a >= b && a - b < (uintptr_t)p->cap * p->stride) {
        size_t off = (size_t)(a - b);
        uint32_t s = (uint32_t)(off / p->stride);
        if (off % p->stride == 0 && pool_ids_alive(p, p->ids[s])) id.value = p->ids[s];
    } else {
        uint32_t s = pool_hash_find(&p->optr, (uint64_t)a);
        if (s != POOL_NIL && pool_m(p, s)->state == POOL_ALIVE) id.value = pool_m(p, s)->id;
    }
    hk__unlock(&p->lock);
    return id;
}

uint32_t hk_pool_id_index(const hk_pool *p, hk_pool_id id) { return p ? id.value & p->imask : 0; }
uint32_t hk_pool_id_generation(const hk_pool *p, hk_pool_id id) { return p ? id.value >> p->index_bits : 0; }

/* ---- parent / child --------------------------------------------------------- */

hk_result hk_pool_set_parent(hk_pool *p, hk_pool_id child, hk_pool_id parent) {
    if (!p) return HK_ERR_INVALID;
    hk__lock(&p->lock);
    hk_result r = HK_OK;
    uint32_t c = pool_resolve(p, child, "set_parent (child)", &r), ps = POOL_NIL;
    if (c != POOL_NIL && parent.value) ps = pool_resolve(p, parent, "set_parent (parent)", &r);
    if (c != POOL_NIL && r == HK_OK) {
        if (ps != POOL_NIL) {
            uint32_t x = ps;
            while (x != POOL_NIL && x != c) x = pool_m(p, x)->parent;
            if (x == c) {
                r = hk__report(&p->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, pool_obj(p, c), p->elem_size, NULL,
                               "set_parent: object 0x%08x cannot become a child of 0x%08x, which is %s",
                               child.value, parent.value, ps == c ? "itself" : "in its own subtree (cycle)");
            }
        }
        if (r == HK_OK && pool_m(p, c)->parent != ps) {
            pool_detach(p, c);
            if (ps != POOL_NIL) pool_attach(p, c, ps);
        }
    }
    pool_after_op(p);
    hk__unlock(&p->lock);
    return r;
}

static hk_pool_id pool_tree_query(const hk_pool *p, hk_pool_id id, int which) {
    hk_pool_id out = {0};
    if (!p) return out;
    hk__lock(&p->lock);
    uint32_t s = pool_alive_slot_nolock(p, id.value);
    if (s != POOL_NIL) {
        const pool_meta *m = pool_m(p, s);
        uint32_t t = which == 0 ? m->parent : which == 1 ? m->first_child : m->next_sib;
        if (t != POOL_NIL) out.value = pool_id(p, t);
    }
    hk__unlock(&p->lock);
    return out;
}

hk_pool_id hk_pool_parent(const hk_pool *p, hk_pool_id id) { return pool_tree_query(p, id, 0); }
hk_pool_id hk_pool_first_child(const hk_pool *p, hk_pool_id id) { return pool_tree_query(p, id, 1); }
hk_pool_id hk_pool_next_sibling(const hk_pool *p, hk_pool_id id) { return pool_tree_query(p, id, 2); }

uint32_t hk_pool_child_count(const hk_pool *p, hk_pool_id id) {
    if (!p) return 0;
    hk__lock(&p->lock);
    uint32_t s = pool_alive_slot_nolock(p, id.value);
    uint32_t n = s == POOL_NIL ? 0 : pool_m(p, s)->nchildren;
    hk__unlock(&p->lock);
    return n;
}

/* ---- lists ------------------------------------------------------------------ */

hk_pool_list hk_pool_list_create(hk_pool *p, uint32_t link, const char *name) {
    hk_pool_list out = {0};
    if (!p) return out;
    hk__lock(&p->lock);
    if (link >= p->links) {
        hk__report(&p->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, 0, name,
                   "list_create '%s': link slot %u out of range (the pool's objects have %u)",
                   name ? name : "?", link, p->links);
    } else if (p->nlists >= p->max_lists) {
        hk__report(&p->rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, 0, name,
                   "list_create '%s': all %u lists in use (raise desc.max_lists)", name ? name : "?",
                   p->max_lists);
    } else {
        for (uint32_t i = 0; i < p->max_lists; i++) {
            pool_lst *L = &p->lists[i];
            if (L->used) continue;
            L->used = 1;
            L->gen = (uint16_t)(L->gen + 1u);
            if (L->gen == 0) L->gen = 1;
            L->link = (uint8_t)link;
            L->name = name;
            L->head = L->tail = POOL_NIL;
            L->count = 0;
            p->nlists++;
            out.value = ((uint32_t)L->gen << 16) | (i + 1);
            break;
        }
    }
    pool_after_op(p);
    hk__unlock(&p->lock);
    return out;
}

static void pool_list_clear_locked(hk_pool *p, uint32_t li) {
    while (p->lists[li].head != POOL_NIL) pool_list_unlink(p, li, p->lists[li].head);
}

hk_result hk_pool_list_destroy(hk_pool *p, hk_pool_list list) {
    if (!p) return HK_ERR_INVALID;
    hk__lock(&p->lock);
    hk_result r = HK_OK;
    uint32_t li = pool_list_resolve(p, list, "list_destroy", &r);
    if (li != POOL_NIL) {
        pool_list_clear_locked(p, li);
        p->lists[li].used = 0;
        p->lists[li].name = NULL;
        p->nlists--;
    }
    pool_after_op(p);
    hk__unlock(&p->lock);
    return r;
}

hk_result hk_pool_list_clear(hk_pool *p, hk_pool_list list) {
    if (!p) return HK_ERR_INVALID;
    hk__lock(&p->lock);
    hk_result r = HK_OK;
    uint32_t li = pool_list_resolve(p, list, "list_clear", &r);
    if (li != POOL_NIL) pool_list_clear_locked(p, li);
    pool_after_op(p);
    hk__unlock(&p->lock);
    return r;
}

static hk_result pool_list_push(hk_pool *p, hk_pool_list list, hk_pool_id id, int front) {
    if (!p) return HK_ERR_INVALID;
    hk__lock(&p->lock);
    hk_result r = HK_OK;
    const char *what = front ? "list_push_front" : "list_push_back";
    uint32_t li = pool_list_resolve(p, list, what, &r);
    uint32_t s = li != POOL_NIL ? pool_resolve(p, id, what, &r) : POOL_NIL;
    if (s != POOL_NIL) pool_list_link(p, li, s, front);
    pool_after_op(p);
    hk__unlock(&p->lock);
    return r;
}

hk_result hk_pool_list_push_back(hk_pool *p, hk_pool_list list, hk_pool_id id) {
    return pool_list_push(p, list, id, 0);
}
hk_result hk_pool_list_push_front(hk_pool *p, hk_pool_list list, hk_pool_id id) {
    return pool_list_push(p, list, id, 1);
}

hk_result hk_pool_list_remove(hk_pool *p, hk_pool_list list, hk_pool_id id) {
    if (!p) return HK_ERR_INVALID;
    hk__lock(&p->lock);
    hk_result r = HK_OK;
    uint32_t li = pool_list_resolve(p, list, "list_remove", &r);
    uint32_t s = li != POOL_NIL ? pool_resolve(p, id, "list_remove", &r) : POOL_NIL;
    if (s != POOL_NIL) {
        pool_link *l = pool_l(p, s, p->lists[li].link);
        if (l->list != li + 1) {
            const char *ln = p->lists[li].name;
            r = hk__report(&p->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, pool_obj(p, s), p->elem_size, ln,
                           "list_remove: object 0x%08x at %p is not on list '%s'", id.value, pool_obj(p, s),
                           ln ? ln : "?");
        } else {
            pool_list_unlink(p, li, s);
        }
    }
    pool_after_op(p);
    hk__unlock(&p->lock);
    return r;
}

size_t hk_pool_list_count(const hk_pool *p, hk_pool_list list) {
    if (!p) return 0;
    hk__lock(&p->lock);
    uint32_t li = pool_list_index_nolock(p, list);
    size_t n = li == POOL_NIL ? 0 : p->lists[li].count;
    hk__unlock(&p->lock);
    return n;
}

hk_pool_list hk_pool_list_of(const hk_pool *p, hk_pool_id id, uint32_t link) {
    hk_pool_list out = {0};
    if (!p || link >= p->links) return out;
    hk__lock(&p->lock);
    uint32_t s = pool_alive_slot_nolock(p, id.value);
    if (s != POOL_NIL) {
        uint32_t li = pool_l(p, s, link)->list;
        if (li) out.value = ((uint32_t)p->lists[li - 1].gen << 16) | li;
    }
    hk__unlock(&p->lock);
    return out;
}

hk_pool_id hk_pool_list_first(const hk_pool *p, hk_pool_list list) {
    hk_pool_id out = {0};
    if (!p) return out;
    hk__lock(&p->lock);
    uint32_t li = pool_list_index_nolock(p, list);
    if (li != POOL_NIL && p->lists[li].head != POOL_NIL) out.value = pool_id(p, p->lists[li].head);
    hk__unlock(&p->lock);
    return out;
}

hk_pool_id hk_pool_list_next(const hk_pool *p, hk_pool_list list, hk_pool_id id) {
    hk_pool_id out = {0};
    if (!p) return out;
    hk__lock(&p->lock);
    uint32_t li = pool_list_index_nolock(p, list);
    uint32_t s = li == POOL_NIL ? POOL_NIL : pool_alive_slot_nolock(p, id.value);
    if (s != POOL_NIL) {
        const pool_link *l = pool_l(p, s, p->lists[li].link);
        if (l->list == li + 1 && l->next != POOL_NIL) out.value = pool_id(p, l->next);
    }
    hk__unlock(&p->lock);
    return out;
}

/* ---- iteration and scopes ---------------------------------------------------- */

void hk_pool_defer_begin(hk_pool *p) {
    if (!p) return;
    hk__lock(&p->lock);
    p->defer_depth++;
    pool_hot_update(p);
    hk__unlock(&p->lock);
}

hk_result hk_pool_defer_end(hk_pool *p) {
    if (!p) return HK_ERR_INVALID;
    hk__lock(&p->lock);
    hk_result r = HK_OK;
    if (p->defer_depth == 0) {
        r = hk__report(&p->rep, HK_ERR_STATE, HK_EK_STATE, NULL, 0, NULL,
                       "defer_end without a matching defer_begin");
    } else if (--p->defer_depth == 0) {
        pool_flush(p);
    }
    pool_after_op(p);
    hk__unlock(&p->lock);
    return r;
}

int hk_pool_list_each(hk_pool *p, hk_pool_list list, hk_pool_visit_fn fn, void *user) {
    if (!p || !fn) return -1;
    hk__lock(&p->lock);
    hk_result r = HK_OK;
    uint32_t li = pool_list_resolve(p, list, "list_each", &r);
    if (li == POOL_NIL) {
        hk__unlock(&p->lock);
        return -1;
    }
    pool_iter it;
    it.list = li;
    it.next = p->lists[li].head;
    it.last = p->lists[li].tail;
    it.up = p->iters;
    p->iters = &it;
    p->defer_depth++;
    pool_hot_update(p);
    int ret = 0;
    while (it.next != POOL_NIL) {
        uint32_t cur = it.next;
        it.next = cur == it.last ? POOL_NIL : pool_l(p, cur, p->lists[li].link)->next;
        ret = fn(p, (hk_pool_id){pool_id(p, cur)}, pool_obj(p, cur), user);
        if (ret) break;
    }
    p->iters = it.up;
    if (--p->defer_depth == 0) pool_flush(p);
    pool_after_op(p);
    hk__unlock(&p->lock);
    return ret;
}

int hk_pool_each(hk_pool *p, hk_pool_visit_fn fn, void *user) {
    if (!p || !fn) return -1;
    hk__lock(&p->lock);
    p->defer_depth++;
    pool_hot_update(p);
    int ret = 0;
    for (uint32_t s = 0; s < p->cap + p->ocap && !ret; s++) {
        if (pool_state(p, s) != POOL_ALIVE) continue;
        ret = fn(p, (hk_pool_id){pool_id(p, s)}, pool_obj(p, s), user);
    }
    if (--p->defer_depth == 0) pool_flush(p);
    pool_after_op(p);
    hk__unlock(&p->lock);
    return ret;
}

/* ---- maintenance ------------------------------------------------------------- */

long hk_pool_recycle(hk_pool *p) {
    if (!p) return HK_ERR_INVALID;
    hk__lock(&p->lock);
    long n = 0;
    if (p->defer_depth) {
        n = hk__report(&p->rep, HK_ERR_STATE, HK_EK_STATE, NULL, 0, NULL,
                       "recycle inside a defer scope or iteration (depth %u): call it at a safe point",
                       p->defer_depth);
    } else {
        for (uint32_t s = 0; s < p->cap; s++) {
            pool_meta *m = &p->meta[s];
            if (m->state != POOL_RETIRED) continue;
            m->state = POOL_FREE;
            m->mflags = 0;
            m->next = POOL_NIL;
            p->ids[s] = POOL_FRESH(p); /* the sequence restarts */
            pool_ring_push(p, s);
            p->nretired--;
            n++;
        }
    }
    pool_after_op(p);
    hk__unlock(&p->lock);
    return n;
}

static void pool_clear_locked(hk_pool *p) {
    p->defer_depth++;
    pool_hot_update(p);
    for (uint32_t s = 0; s < p->cap + p->ocap; s++) {
        if (pool_state(p, s) != POOL_ALIVE || pool_m(p, s)->parent != POOL_NIL) continue;
        pool_kill_tree(p, s, 1);
    }
    if (--p->defer_depth == 0) pool_flush(p);
}

void hk_pool_clear(hk_pool *p) {
    if (!p) return;
    hk__lock(&p->lock);
    pool_clear_locked(p);
    pool_after_op(p);
    hk__unlock(&p->lock);
}

void hk_pool_destroy(hk_pool *p) {
    if (!p) return;
    hk__lock(&p->lock);
    p->defer_depth = 0;
    pool_clear_locked(p);
    /* objects freed by on_destroy hooks during the clear are released too */
    pool_flush(p);
    pool_hash_release(p, &p->oid);
    pool_hash_release(p, &p->optr);
    for (uint32_t i = 0; i < p->ocap; i++)
        if (p->oobj[i].raw) p->hfree(p->oobj[i].raw, p->oobj[i].raw_size, p->huser);
    if (p->ocap) {
        p->hfree(p->ometa, (size_t)p->ocap * sizeof(pool_meta), p->huser);
        if (p->olk) p->hfree(p->olk, (size_t)p->ocap * p->links * sizeof(pool_link), p->huser);
        p->hfree(p->oobj, (size_t)p->ocap * sizeof(pool_ovf), p->huser);
    }
    hk__san_access(p->base, (size_t)p->cap * p->stride);
    hk_lock_hooks lock = p->lock;
    void *os_base = p->os_base;
    size_t os_size = p->os_size;
    hk__unlock(&lock);
    if (os_base) hk_os_release(os_base, os_size);
}

/* ---- introspection ------------------------------------------------------------ */

hk_result hk_pool_stats(const hk_pool *p, hk_stats *out) {
    if (!p || !out) return HK_ERR_INVALID;
    hk__lock(&p->lock);
    memset(out, 0, sizeof *out);
    out->size = (uint32_t)sizeof *out;
    out->version = HK_STATS_VERSION;
    out->allocator = "pool";
    size_t fast_bytes = (size_t)p->cap * p->stride;
    uint32_t nfree = POOL_NFREE(p);
    size_t fast_held = (size_t)p->cap - nfree - p->nretired;
    size_t held = pool_live(p) + p->npending;
    uint64_t allocs = p->hot.head + p->ovf_allocs;
    out->capacity = fast_bytes + p->ovf_bytes;
    out->used = held * p->elem_size;
    out->used_blocks_bytes = fast_held * p->stride + p->ovf_bytes;
    out->free = (size_t)nfree * p->stride;
    out->largest_free = (nfree || !(p->flags & HK_POOL_NO_OVERFLOW)) ? p->elem_size : 0;
    out->peak_used = (held > p->hot.peak ? held : p->hot.peak) * p->elem_size;
    out->overhead = p->table_bytes;
    out->live_blocks = held;
    out->free_blocks = nfree;
    out->alloc_count = allocs;
    out->free_count = allocs - held;
    out->fail_count = p->fail_count;
    out->error_count = p->rep.error_count;
    hk__unlock(&p->lock);
    return HK_OK;
}

hk_result hk_pool_get_info(const hk_pool *p, hk_pool_info *out) {
    if (!p || !out) return HK_ERR_INVALID;
    hk__lock(&p->lock);
    memset(out, 0, sizeof *out);
    out->live = pool_live(p);
    out->fast_live = pool_fast_live(p);
    out->overflow_live = p->ovf_live;
    out->overflow_peak = p->ovf_peak;
    out->pending = p->npending;
    out->free_slots = POOL_NFREE(p);
    out->retired_slots = p->nretired;
    out->lists = p->nlists;
    out->capacity = p->cap;
    out->index_bits = p->index_bits;
    out->slot_uses = p->gmax;
    out->defer_depth = p->defer_depth;
    out->overflow_allocs = p->ovf_allocs;
    hk__unlock(&p->lock);
    return HK_OK;
}

static void pool_info_of(const hk_pool *p, uint32_t s, hk_block_info *info) {
    memset(info, 0, sizeof *info);
    info->address = pool_obj(p, s);
    info->size = p->elem_size;
    info->name = p->rep.instance;
    if (s < p->cap) {
        info->address = p->base + (size_t)s * p->stride;
        info->overhead = p->stride - p->elem_size + sizeof(pool_meta) + 2 * sizeof(uint32_t) + 1 +
                         p->links * sizeof(pool_link);
    } else {
        info->flags |= HK_BLOCK_OVERFLOW;
        info->overhead = p->oobj[s - p->cap].raw_size - p->elem_size + sizeof(pool_meta) + sizeof(pool_ovf) +
                         p->links * sizeof(pool_link);
    }
    int st = pool_state(p, s);
    if (st == POOL_ALIVE || st == POOL_DYING) {
        info->flags |= HK_BLOCK_USED;
        info->requested = p->elem_size;
        info->id = pool_id(p, s);
    }
}

int hk_pool_walk(hk_pool *p, hk_walk_fn fn, void *user) {
    if (!p || !fn) return -1;
    hk__lock(&p->lock);
    int r = 0;
    hk_block_info info;
    for (uint32_t s = 0; s < p->cap + p->ocap && !r; s++) {
        if (s >= p->cap && pool_m(p, s)->state == POOL_FREE) continue;
        pool_info_of(p, s, &info);
        r = fn(&info, user);
    }
    hk__unlock(&p->lock);
    return r;
}

hk_result hk_pool_where(hk_pool *p, const void *addr, hk_block_info *info) {
    if (!p || !info) return HK_ERR_INVALID;
    hk__lock(&p->lock);
    hk_result r = HK_ERR_FOREIGN;
    uintptr_t a = (uintptr_t)addr, b = (uintptr_t)p->base;
    if (a >= b && a - b < (uintptr_t)p->cap * p->stride) {
        pool_info_of(p, (uint32_t)((size_t)(a - b) / p->stride), info);
        r = HK_OK;
    } else if (addr) {
        uint32_t s = pool_hash_find(&p->optr, (uint64_t)a);
        for (uint32_t i = 0; s == POOL_NIL && i < p->ocap; i++) {
            const pool_ovf *o = &p->oobj[i];
            if (o->raw && a >= (uintptr_t)o->obj && a - (uintptr_t)o->obj < p->elem_size) s = p->cap + i;
        }
        if (s != POOL_NIL) {
            pool_info_of(p, s, info);
            r = HK_OK;
        }
    }
    hk__unlock(&p->lock);
    return r;
}

/* ---- check -------------------------------------------------------------------- */

#define POOL_BAD(...)                                                                                        \
    do {                                                                                                     \
        hk__report(&p->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, p, 0, NULL, __VA_ARGS__);               \
        return 0;                                                                                            \
    } while (0)

static int pool_check_queue(hk_pool *p, uint32_t head, uint32_t tail, uint32_t expect, int state,
                            const char *what) {
    uint32_t n = 0, last = POOL_NIL, total = p->cap + p->ocap;
    for (uint32_t s = head; s != POOL_NIL; s = pool_m(p, s)->next) {
        if (s >= total) POOL_BAD("%s queue: slot %u out of range after slot %u", what, s, last);
        if (++n > expect) POOL_BAD("%s queue: longer than its count %u (cycle?)", what, expect);
        if (pool_state(p, s) != state)
            POOL_BAD("%s queue: slot %u is in state %u", what, s, pool_state(p, s));
        last = s;
    }
    if (n != expect) POOL_BAD("%s queue: %u slots found, count says %u", what, n, expect);
    if (last != tail) POOL_BAD("%s queue: tail is slot %u, the last slot found is %u", what, tail, last);
    return 1;
}

/* The free ring: nfree distinct FREE fast slots. */
static int pool_check_ring(hk_pool *p) {
    uint32_t nfree = POOL_NFREE(p), bad = POOL_NIL, n = 0;
    if (nfree > p->cap) POOL_BAD("free ring: %u entries for %u slots (head/tail damaged)", nfree, p->cap);
    for (uint64_t i = p->hot.head; i != p->hot.tail; i++, n++) {
        uint32_t s = p->hot.ring[(uint32_t)i & p->hot.ring_mask];
        if (s >= p->cap || pool_state(p, s) != POOL_FREE || (p->meta[s].mflags & POOL_MF_SEEN)) {
            bad = s;
            break;
        }
        p->meta[s].mflags |= POOL_MF_SEEN;
    }
    for (uint64_t i = p->hot.head; i != p->hot.tail; i++) {
        uint32_t s = p->hot.ring[(uint32_t)i & p->hot.ring_mask];
        if (s < p->cap) p->meta[s].mflags &= (uint8_t)~POOL_MF_SEEN;
    }
    if (bad != POOL_NIL)
        POOL_BAD("free ring entry %u: slot %u is %s", n, bad,
                 bad >= p->cap                     ? "out of range"
                 : pool_state(p, bad) != POOL_FREE ? "not free"
                                                   : "queued twice");
    return 1;
}

static int pool_check_slots(hk_pool *p) {
    uint32_t nfree = 0, nret = 0, nalive = 0, ndying = 0, nfdying = 0, nofree = 0;
    size_t fl = 0, ol = 0;
    for (uint32_t s = 0; s < p->cap + p->ocap; s++) {
        pool_meta *m = pool_m(p, s);
        int fast = s < p->cap, st = pool_state(p, s);
        uint32_t id = pool_id(p, s);
        if (m->state > POOL_RETIRED || (!fast && m->state == POOL_RETIRED) ||
            (fast && m->state == POOL_ALIVE))
            POOL_BAD("slot %u: bad state %u", s, m->state);
        if (fast) {
            uint32_t x = p->ids[s];
            if (pool_ids_alive(p, x) && ((x & p->imask) != s || m->state != POOL_FREE))
                POOL_BAD("slot %u at %p: lookup table holds 0x%08x (state %u)", s, pool_obj(p, s), x,
                         m->state);
            if ((st == POOL_ALIVE || st == POOL_DYING) && pool_gen(p, s) == 0)
                POOL_BAD("slot %u at %p: object 0x%08x has generation 0", s, pool_obj(p, s), id);
            unsigned char busy =
                (unsigned char)(m->parent != POOL_NIL || m->first_child != POOL_NIL || m->nlinked);
            if (p->busy[s] != busy)
                POOL_BAD("slot %u at %p: busy flag %u, links say %u", s, pool_obj(p, s), p->busy[s], busy);
        }
        if (st == POOL_ALIVE || st == POOL_DYING) {
            if (!fast) {
                if ((m->id & p->imask) != p->mark || m->id >> p->index_bits == 0)
                    POOL_BAD("overflow slot %u: bad ID 0x%08x", s - p->cap, m->id);
                if (pool_hash_find(&p->oid, m->id) != s)
                    POOL_BAD("overflow object 0x%08x at %p does not resolve through the ID table", m->id,
                             pool_obj(p, s));
                if (!p->oobj[s - p->cap].raw ||
                    pool_hash_find(&p->optr, (uint64_t)(uintptr_t)p->oobj[s - p->cap].obj) != s)
                    POOL_BAD("overflow object 0x%08x at %p is missing from the address table", m->id,
                             pool_obj(p, s));
            }
            if (st == POOL_ALIVE) {
                nalive++;
                if (fast)
                    fl++;
                else
                    ol++;
            } else {
                ndying++;
                if (fast) nfdying++;
                if (m->parent != POOL_NIL || m->first_child != POOL_NIL)
                    POOL_BAD("pending object 0x%08x at %p is still in a tree", id, pool_obj(p, s));
            }
        } else {
            if (m->parent != POOL_NIL || m->first_child != POOL_NIL || m->nchildren)
                POOL_BAD("free slot %u still has tree links", s);
            if (st == POOL_FREE) {
                if (fast)
                    nfree++;
                else
                    nofree++;
            } else {
                nret++;
            }
            if (fast && st == POOL_FREE && (p->flags & HK_FLAG_FILL)) {
                unsigned char *o = p->base + (size_t)s * p->stride;
                hk__san_access(o, p->stride);
                size_t bad = hk_fill_check(o, p->stride, HK_FILL_FREE);
                hk__san_noaccess(o, p->stride);
                if (bad != p->stride) {
                    hk__report(&p->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_FREE, o + bad, p->elem_size, NULL,
                               "free slot %u at %p written after free (byte %zu)", s, (void *)o, bad);
                    return 0;
                }
            }
        }
        if (!fast && m->state == POOL_FREE && p->oobj[s - p->cap].raw)
            POOL_BAD("free overflow slot %u still holds memory", s - p->cap);
        uint32_t nl = 0;
        for (uint32_t k = 0; k < p->links; k++) nl += pool_l(p, s, k)->list != 0;
        if (nl != m->nlinked)
            POOL_BAD("object 0x%08x at %p is on %u lists, its count says %u", id, pool_obj(p, s), nl,
                     m->nlinked);
        for (uint32_t k = 0; k < p->links; k++) {
            pool_link *l = pool_l(p, s, k);
            if (l->list && st != POOL_ALIVE)
                POOL_BAD("slot %u (state %u) is still on list %u", s, st, l->list - 1);
            if (l->list &&
                (l->list > p->max_lists || !p->lists[l->list - 1].used || p->lists[l->list - 1].link != k))
                POOL_BAD("object 0x%08x at %p names list %u on link %u, which is not such a list", id,
                         pool_obj(p, s), l->list - 1, k);
        }
    }
    if (nalive != pool_live(p) || fl != pool_fast_live(p) || ol != p->ovf_live)
        POOL_BAD("counters: %u alive found (%zu fast, %zu overflow), counters say %zu (%zu, %zu)", nalive, fl,
                 ol, pool_live(p), pool_fast_live(p), p->ovf_live);
    if (ndying != p->npending || nfdying != p->fpending)
        POOL_BAD("counters: %u pending found (%u fast), counts say %u (%u)", ndying, nfdying, p->npending,
                 p->fpending);
    if (nret != p->nretired) POOL_BAD("counters: %u retired slots found, count says %u", nret, p->nretired);
    if (nfree != POOL_NFREE(p))
        POOL_BAD("counters: %u free slots found, the free ring holds %u", nfree, POOL_NFREE(p));
    size_t base = (size_t)p->cap - p->nretired + p->ovf_live + (p->npending - p->fpending);
    if (p->hot.hold_base != base)
        POOL_BAD("counters: held-objects base %zu, expected %zu", p->hot.hold_base, base);
    if (pool_live(p) + p->npending > p->hot.peak)
        POOL_BAD("counters: %zu objects held, above the peak %zu", pool_live(p) + p->npending, p->hot.peak);
    if (p->oid.count != p->ocap - nofree)
        POOL_BAD("overflow ID table holds %u keys for %u overflow objects", p->oid.count, p->ocap - nofree);
    if (p->optr.count != p->ocap - nofree)
        POOL_BAD("overflow address table holds %u keys for %u overflow objects", p->optr.count,
                 p->ocap - nofree);
    uint32_t n = 0;
    for (uint32_t s = p->ofree_head; s != POOL_NIL; s = pool_m(p, s)->next) {
        if (s < p->cap || s >= p->cap + p->ocap || pool_m(p, s)->state != POOL_FREE)
            POOL_BAD("overflow free list: bad slot %u", s);
        if (++n > nofree)
            POOL_BAD("overflow free list: longer than the %u free overflow slots (cycle?)", nofree);
    }
    if (n != nofree) POOL_BAD("overflow free list: %u slots, %u free overflow slots", n, nofree);
    return 1;
}

static int pool_check_lists(hk_pool *p) {
    uint32_t used = 0, total = p->cap + p->ocap;
    for (uint32_t li = 0; li < p->max_lists; li++) {
        pool_lst *L = &p->lists[li];
        if (!L->used) {
            if (L->head != POOL_NIL && L->count) POOL_BAD("deleted list %u still has members", li);
            continue;
        }
        used++;
        const char *nm = L->name ? L->name : "?";
        uint32_t n = 0, prev = POOL_NIL;
        for (uint32_t s = L->head; s != POOL_NIL; s = pool_l(p, s, L->link)->next) {
            if (s >= total) POOL_BAD("list '%s': member slot %u out of range", nm, s);
            pool_link *l = pool_l(p, s, L->link);
            if (l->list != li + 1) POOL_BAD("list '%s': member slot %u names list %u", nm, s, l->list);
            if (l->prev != prev)
                POOL_BAD("list '%s': slot %u's back link is %u, expected %u", nm, s, l->prev, prev);
            if (pool_state(p, s) != POOL_ALIVE) POOL_BAD("list '%s': member slot %u is not alive", nm, s);
            if (++n > L->count) POOL_BAD("list '%s': more members than its count %u (cycle?)", nm, L->count);
            prev = s;
        }
        if (n != L->count) POOL_BAD("list '%s': %u members found, count says %u", nm, n, L->count);
        if (prev != L->tail) POOL_BAD("list '%s': tail is slot %u, last member is %u", nm, L->tail, prev);
    }
    if (used != p->nlists) POOL_BAD("%u lists in use, count says %u", used, p->nlists);
    /* every link naming a list is on it: counts add up per list */
    for (uint32_t li = 0; li < p->max_lists; li++) {
        if (!p->lists[li].used) continue;
        uint32_t named = 0;
        for (uint32_t s = 0; s < total; s++)
            if (pool_l(p, s, p->lists[li].link)->list == li + 1) named++;
        if (named != p->lists[li].count)
            POOL_BAD("list '%s': %u objects name it, %u are on it",
                     p->lists[li].name ? p->lists[li].name : "?", named, p->lists[li].count);
    }
    return 1;
}

static int pool_check_tree(hk_pool *p) {
    uint32_t total = p->cap + p->ocap;
    for (uint32_t s = 0; s < total; s++) {
        pool_meta *m = pool_m(p, s);
        if (pool_state(p, s) != POOL_ALIVE) continue;
        uint32_t id = pool_id(p, s);
        if (m->parent != POOL_NIL) {
            if (m->parent >= total || pool_state(p, m->parent) != POOL_ALIVE)
                POOL_BAD("object 0x%08x at %p has a dead parent (slot %u)", id, pool_obj(p, s), m->parent);
        }
        uint32_t n = 0, prev = POOL_NIL;
        for (uint32_t c = m->first_child; c != POOL_NIL; c = pool_m(p, c)->next_sib) {
            if (c >= total) POOL_BAD("object 0x%08x: child slot %u out of range", id, c);
            pool_meta *cm = pool_m(p, c);
            if (cm->parent != s || cm->prev_sib != prev)
                POOL_BAD("object 0x%08x at %p: child slot %u links back wrongly", id, pool_obj(p, s), c);
            if (++n > m->nchildren)
                POOL_BAD("object 0x%08x: more children than its count %u", id, m->nchildren);
            prev = c;
        }
        if (n != m->nchildren || prev != m->last_child)
            POOL_BAD("object 0x%08x at %p: %u children found, count %u", id, pool_obj(p, s), n, m->nchildren);
        uint32_t depth = 0;
        for (uint32_t x = m->parent; x != POOL_NIL; x = pool_m(p, x)->parent)
            if (++depth > total) POOL_BAD("object 0x%08x: its parent chain has a cycle", id);
    }
    return 1;
}

static int pool_check_all(hk_pool *p) {
    if ((uint64_t)POOL_NFREE(p) + p->nretired + p->fpending > p->cap)
        POOL_BAD("control block damaged: %u free + %u retired + %u pending > %u slots", POOL_NFREE(p),
                 p->nretired, p->fpending, p->cap);
    return pool_check_ring(p) &&
           pool_check_queue(p, p->pend_head, p->pend_tail, p->npending, POOL_DYING, "pending") &&
           pool_check_slots(p) && pool_check_lists(p) && pool_check_tree(p);
}

hk_result hk_pool_check(hk_pool *p) {
    if (!p) return HK_ERR_INVALID;
    hk__lock(&p->lock);
    hk_result r = pool_check_all(p) ? HK_OK : HK_ERR_CORRUPT;
    hk__unlock(&p->lock);
    return r;
}

static void pool_after_op(hk_pool *p) {
    pool_hot_update(p);
    if (HK__UNLIKELY(p->flags & HK_FLAG_PARANOID) || HK_DEBUG >= 3) (void)pool_check_all(p);
}

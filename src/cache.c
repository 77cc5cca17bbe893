/*
 * src/cache.c - movable, purgeable blocks behind handles (heapkit/cache.h).
 *
 * Two structures, kept apart so that blocks can move:
 *
 *  - The handle table, in two arrays indexed by slot: v.hot[] (16-byte
 *    hk__cache_hot: key = handle value | LRU stamp << 32, block address;
 *    2^idx_bits entries, so handle & idx_mask always lands in the array) and
 *    slots[nslots] (cache_slot: requested size, name, generation, lock
 *    count, flags, free-queue link). A live handle's value is
 *    (gen << idx_bits) | index with gen >= 1 (never 0). The address is NULL
 *    when the handle is empty, i.e. purged. Unused entries have key 0 and
 *    wait in a FIFO queue; slots never used are preferred (high_water), so a
 *    freed handle's slot is reused as late as possible; a slot whose
 *    generation would wrap is retired for good. The LRU clock: see
 *    cache_stamp.
 *
 *  - The data region [lo, end + 16): 16-byte aligned blocks tiling [lo, end)
 *    in address order, then a 16-byte end sentinel at `end`. Every block
 *    starts with a cache_blk header {magic, handle, size16, prev16}: used
 *    blocks carry the handle (the back-pointer to their slot); free blocks
 *    carry two links right after the header (so a free block is at least 32
 *    bytes) and sit in one of CACHE_NBINS size-class lists (class =
 *    floor(log2(size16))).
 *
 * Invariants (verified by hk_cache_check):
 *  - blocks tile [lo, end) exactly; size16 >= 2; prev16 of a block (and of
 *    the sentinel) is the size16 of the block before it, 0 for the first.
 *  - no two free blocks are adjacent; every free block is in the list of its
 *    class and nothing else is; bin_map has bit i set iff bins[i] != NULL.
 *  - a used block's handle names a slot whose handle equals it and whose
 *    data is the block's user address (header + 16); requested + 16 + 8 <=
 *    block bytes; the bytes from requested to the block's end are
 *    HK_FILL_PAD (the canary).
 *  - a live slot with data != NULL has exactly one block; live slots with
 *    data == NULL are the empty (purged) handles; unused entries (also past
 *    nslots) have key 0 and data NULL; no stamp is ahead of the tick, which
 *    is even and non-zero.
 *  - counters (free_bytes, free_blocks, used_bytes, requested_bytes,
 *    resident, live) equal the sums over blocks and slots.
 *  - `hint` is a block boundary in [lo, end]; every free block below it is
 *    followed by a locked block (so incremental compaction resumes at hint).
 *
 * Moving: a block moves only by memmove of the whole block (header, bytes,
 * canary), or of a run of adjacent blocks, with its slot's data pointer
 * updated. Compaction
 * slides unlocked blocks down (cache_slide_down, budgeted) or up
 * (cache_slide_up: scramble and hunk reclaim from the low side).
 *
 * Sanitizers: under AddressSanitizer the canary bytes of used blocks and the
 * bodies of free blocks (past their links) are poisoned; headers and user
 * bytes are not. Operations that move many blocks unpoison the region first
 * and poison it again from a walk afterwards (cache_san_open/close).
 */
#include "heapkit/cache.h"
#include "internal.h"

#include <stdio.h>
#include <string.h>

#define CACHE_HDR          16u
#define CACHE_MIN_CANARY   8u
#define CACHE_MIN_FREE     32u
#define CACHE_NBINS        32
#define CACHE_SCAN_LIMIT   64
#define CACHE_MAGIC_USED   0xCAC4EB10u
#define CACHE_MAGIC_FREE   0xCAC4EF4Eu
#define CACHE_MAGIC_END    0xCAC4E4D0u
#define CACHE_LOCK_MAX     65535u
#define CACHE_GROW_ROUNDS  64
#define CACHE_DEFAULT_SIZE ((size_t)16 << 20)

enum { CACHE_SLOT_PURGEABLE = 1, CACHE_SLOT_RETIRED = 2, CACHE_SLOT_BUSY = 4 };

typedef struct cache_blk {
    uint32_t magic;
    uint32_t handle;
    uint32_t size16;
    uint32_t prev16;
} cache_blk;

typedef struct cache_links {
    cache_blk *next, *prev;
} cache_links;

_Static_assert(sizeof(cache_blk) == CACHE_HDR, "cache header is 16 bytes");
_Static_assert(sizeof(cache_links) <= CACHE_MIN_FREE - CACHE_HDR, "free links fit a minimal free block");

/* The cold part of a handle's slot (the hot part, hk__cache_hot, holds the
 * handle value, LRU stamp and block address). */
typedef struct cache_slot {
    size_t requested; /* bytes asked for */
    const char *name;
    uint32_t gen;  /* generation of the live (or next) handle */
    uint16_t lock; /* lock count */
    uint16_t flags;
    uint32_t link; /* free-slot queue */
    uint32_t reserved;
} cache_slot;

_Static_assert(sizeof(cache_slot) == 32, "cold slot is 32 bytes");
_Static_assert(sizeof(hk__cache_hot) == 16, "hot entry is 16 bytes");
_Static_assert(sizeof(hk__cache_hot) + sizeof(cache_slot) + 2 * sizeof(uint32_t) == HK_CACHE_HANDLE_BYTES,
               "HK_CACHE_HANDLE_BYTES is the table's cost per handle");

struct hk_cache {
    hk__cache_view v; /* first: read by hk_cache_deref_fast */
    cache_slot *slots;
    uint32_t nslots;
    uint32_t idx_bits, gen_base, gen_max;
    uint32_t high_water;       /* slots ever used */
    uint32_t fq_head, fq_tail; /* free-slot FIFO (index + 1, 0 = none) */
    uint32_t live, resident, retired;
    uint32_t *order, *rank; /* scratch, nslots each */
    unsigned char *lo;      /* data region start, NULL when the cache holds none (hunk took it) */
    cache_blk *end;         /* end sentinel */
    cache_blk *hint;        /* incremental compaction resumes here */
    cache_blk *bins[CACHE_NBINS];
    uint32_t bin_map;
    int scramble_dir, in_grow;
    uint32_t slow; /* lock hooks or paranoid: deref_fast always misses */
    size_t free_bytes, free_blocks, used_bytes, requested_bytes, peak_requested, table_bytes;
    uint64_t alloc_count, free_count, fail_count, purge_count, moved_bytes;
    uint32_t flags;
    hk_cache_purge_fn on_purge;
    void *purge_user;
    hk_cache_grow_fn grow;
    void *grow_user;
    hk_hunk *hunk;
    void *os_base;
    size_t os_size;
    hk__reporter rep;
    hk_lock_hooks lock;
};

/* ---- sanitizer helpers ---------------------------------------------------- */

static void cache_poison(const void *p, size_t n) {
#ifdef HK__ASAN
    if (n) ASAN_POISON_MEMORY_REGION(p, n);
#endif
    (void)p;
    (void)n;
}
static void cache_unpoison(const void *p, size_t n) {
#ifdef HK__ASAN
    if (n) ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
    (void)p;
    (void)n;
}

/* ---- small helpers --------------------------------------------------------- */

static inline size_t cache_bytes(const cache_blk *b) { return (size_t)b->size16 * 16u; }
static inline cache_blk *cache_next(cache_blk *b) {
    return (cache_blk *)((unsigned char *)b + cache_bytes(b));
}
static inline cache_blk *cache_prev(const hk_cache *c, cache_blk *b) {
    return (unsigned char *)b == c->lo ? NULL : (cache_blk *)((unsigned char *)b - (size_t)b->prev16 * 16u);
}
static inline unsigned char *cache_user(cache_blk *b) { return (unsigned char *)b + CACHE_HDR; }
static inline cache_blk *cache_blk_of(void *data) { return (cache_blk *)((unsigned char *)data - CACHE_HDR); }
static inline cache_links *cache_links_of(cache_blk *b) { return (cache_links *)(void *)cache_user(b); }
static inline uint32_t cache_slot_index(const hk_cache *c, uint32_t handle) { return handle & c->v.idx_mask; }
static inline hk__cache_hot *cache_hot_at(const hk_cache *c, uint32_t idx) { return &c->v.hot[idx]; }
static inline hk__cache_hot *cache_hot(const hk_cache *c, const cache_slot *s) {
    return &c->v.hot[(size_t)(s - c->slots)];
}
static inline uint32_t cache_handle(const hk_cache *c, const cache_slot *s) {
    return (uint32_t)cache_hot(c, s)->key;
}
static inline uint32_t cache_stamp_at(const hk_cache *c, uint32_t idx) {
    return (uint32_t)(c->v.hot[idx].key >> 32);
}
static inline uint32_t cache_tick(const hk_cache *c) { return (uint32_t)(c->v.tick_key >> 32); }
static inline void cache_set_tick(hk_cache *c, uint32_t t) {
    c->v.tick_key = ((uint64_t)t << 32) | (c->slow ? 0xFFFFFFFFu : 0u);
}
static inline cache_slot *cache_slot_of_blk(hk_cache *c, const cache_blk *b) {
    return &c->slots[cache_slot_index(c, b->handle)];
}
static inline unsigned cache_log2(uint32_t x) { return 31u - (unsigned)__builtin_clz(x); }
static inline const char *cache_nm(const char *n) { return n ? n : "(unnamed)"; }

/* The LRU clock: a 32-bit tick kept in the view's tick_key (high half) and
 * stamps in the hot entries' keys (high half). Slow stamps (alloc, deref,
 * touch, reallocate) are odd: tick + 1, and the tick then moves on by 2, so
 * the tick is always even. hk_cache_deref_fast hits only entries stamped
 * with the current (even) tick and hk__cache_deref_miss stamps with it
 * without advancing it: an increment per access would chain every access
 * through memory, and a stamp written only when it changes dirties nothing
 * on repeated accesses. Before the tick would wrap, the stamps of live
 * slots are renumbered in order (cache_renumber). Unused entries have key
 * 0 and the tick is never 0, so they never hit. */
#define CACHE_TICK_LIMIT 0xFFFFFF00u
static void cache_renumber(hk_cache *c);

static inline void cache_set_stamp(hk_cache *c, uint32_t idx, uint32_t stamp) {
    hk__cache_hot *e = cache_hot_at(c, idx);
    e->key = (uint32_t)e->key | ((uint64_t)stamp << 32);
}

/* Marks slot s most recently used. */
static inline void cache_stamp(hk_cache *c, cache_slot *s) {
    if (HK__UNLIKELY(cache_tick(c) >= CACHE_TICK_LIMIT)) cache_renumber(c);
    uint32_t t = cache_tick(c);
    cache_set_stamp(c, (uint32_t)(s - c->slots), t + 1u);
    cache_set_tick(c, t + 2u);
}

/* Block size in 16-byte units for a request, 0 on overflow. */
static uint32_t cache_need16(size_t size) {
    size_t t;
    if (!hk_size_add(size, CACHE_HDR + CACHE_MIN_CANARY, &t) || !hk_size_align(t, 16, &t)) return 0;
    t /= 16u;
    return t > UINT32_MAX ? 0 : (uint32_t)t;
}

static inline void cache_fill_pad(cache_blk *b, size_t requested) {
    unsigned char *pad = cache_user(b) + requested;
    size_t n = cache_bytes(b) - CACHE_HDR - requested;
    cache_unpoison(pad, n);
    memset(pad, HK_FILL_PAD, n);
    cache_poison(pad, n);
}

/* ---- free-block index ------------------------------------------------------ */

static void cache_bin_insert(hk_cache *c, cache_blk *b) {
    unsigned i = cache_log2(b->size16);
    cache_unpoison(b, CACHE_MIN_FREE);
    b->magic = CACHE_MAGIC_FREE;
    b->handle = 0;
    cache_links *l = cache_links_of(b);
    l->prev = NULL;
    l->next = c->bins[i];
    if (c->bins[i]) cache_links_of(c->bins[i])->prev = b;
    c->bins[i] = b;
    c->bin_map |= 1u << i;
    c->free_bytes += cache_bytes(b);
    c->free_blocks++;
}

static void cache_bin_remove(hk_cache *c, cache_blk *b) {
    unsigned i = cache_log2(b->size16);
    cache_links *l = cache_links_of(b);
    if (l->prev)
        cache_links_of(l->prev)->next = l->next;
    else
        c->bins[i] = l->next;
    if (l->next) cache_links_of(l->next)->prev = l->prev;
    if (!c->bins[i]) c->bin_map &= ~(1u << i);
    c->free_bytes -= cache_bytes(b);
    c->free_blocks--;
}

/* Makes the fresh free block b (header fields size16 and prev16 set) known:
 * indexes it, fills its body when asked, poisons it. */
static void cache_add_free(hk_cache *c, cache_blk *b) {
    cache_bin_insert(c, b);
    size_t n = cache_bytes(b) - CACHE_MIN_FREE;
    if (c->flags & (HK_FLAG_FILL | HK_CACHE_SCRAMBLE)) {
        cache_unpoison((unsigned char *)b + CACHE_MIN_FREE, n);
        memset((unsigned char *)b + CACHE_MIN_FREE, HK_FILL_FREE, n);
    }
    cache_poison((unsigned char *)b + CACHE_MIN_FREE, n);
}

/* A free block of at least need16 units, or NULL. Good fit: first fit in
 * the request's class (scan bounded), else any block of a larger class. */
static cache_blk *cache_fit(hk_cache *c, uint32_t need16) {
    unsigned i = cache_log2(need16);
    int scanned = 0;
    cache_blk *b = c->bins[i];
    for (; b && scanned < CACHE_SCAN_LIMIT; b = cache_links_of(b)->next, scanned++)
        if (b->size16 >= need16) return b;
    uint32_t m = i + 1 < CACHE_NBINS ? c->bin_map & ~((2u << i) - 1u) : 0;
    if (m) return c->bins[__builtin_ctz(m)];
    for (; b; b = cache_links_of(b)->next)
        if (b->size16 >= need16) return b;
    return NULL;
}

/* Takes need16 units from the free block f, at its bottom (high == 0) or its
 * top. Returns the block (header size16/prev16 set, magic and handle to be
 * written by the caller). */
static cache_blk *cache_carve(hk_cache *c, cache_blk *f, uint32_t need16, int high) {
    cache_bin_remove(c, f);
    uint32_t rem = f->size16 - need16;
    cache_blk *u = f;
    if ((size_t)rem * 16u >= CACHE_MIN_FREE) {
        if (!high) {
            cache_blk *r = (cache_blk *)((unsigned char *)f + (size_t)need16 * 16u);
            cache_unpoison(r, CACHE_HDR);
            r->size16 = rem;
            r->prev16 = need16;
            cache_next(r)->prev16 = rem;
            f->size16 = need16;
            cache_bin_insert(c, r);
        } else {
            u = (cache_blk *)((unsigned char *)f + (size_t)rem * 16u);
            cache_unpoison(u, CACHE_HDR);
            u->size16 = need16;
            u->prev16 = rem;
            cache_next(u)->prev16 = need16;
            f->size16 = rem;
            cache_bin_insert(c, f);
            /* f is now followed by an unlocked block: compaction must see it */
            if ((unsigned char *)f < (unsigned char *)c->hint) c->hint = f;
        }
    }
    cache_unpoison(u, cache_bytes(u));
    return u;
}

/* Turns the block b (used, or a piece being given back) into free space,
 * coalescing with its neighbours. Counters of used bytes are the caller's. */
static void cache_release(hk_cache *c, cache_blk *b) {
    cache_unpoison(b, cache_bytes(b));
    cache_blk *n = cache_next(b);
    if (n->magic == CACHE_MAGIC_FREE) {
        cache_bin_remove(c, n);
        if (c->hint == n) c->hint = b;
        b->size16 += n->size16;
    }
    cache_blk *p = cache_prev(c, b);
    if (p && p->magic == CACHE_MAGIC_FREE) {
        cache_bin_remove(c, p);
        if (c->hint == b) c->hint = p;
        cache_unpoison(p, cache_bytes(p));
        p->size16 += b->size16;
        b = p;
    }
    cache_next(b)->prev16 = b->size16;
    if ((unsigned char *)b < (unsigned char *)c->hint) c->hint = b;
    cache_add_free(c, b);
}

/* ---- sanitizer: whole-region open/close --------------------------------- */

static void cache_san_open(hk_cache *c) {
#ifdef HK__ASAN
    if (c->lo) cache_unpoison(c->lo, (size_t)((unsigned char *)c->end + CACHE_HDR - c->lo));
#else
    (void)c;
#endif
}

static void cache_san_close(hk_cache *c) {
#ifdef HK__ASAN
    if (!c->lo) return;
    for (cache_blk *b = (cache_blk *)c->lo; b < c->end; b = cache_next(b)) {
        if (b->magic == CACHE_MAGIC_FREE)
            cache_poison((unsigned char *)b + CACHE_MIN_FREE, cache_bytes(b) - CACHE_MIN_FREE);
        else if (b->magic == CACHE_MAGIC_USED) {
            cache_slot *s = cache_slot_of_blk(c, b);
            cache_poison(cache_user(b) + s->requested, cache_bytes(b) - CACHE_HDR - s->requested);
        }
        if (b->size16 == 0) break;
    }
#else
    (void)c;
#endif
}

/* ---- the handle table -------------------------------------------------------- */

static hk_result cache_bad_handle(hk_cache *c, hk_cache_handle h, const char *op) {
    if (h.value == 0)
        return hk__report(&c->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, 0, NULL,
                          "%s: the none handle (0)", op);
    uint32_t idx = cache_slot_index(c, h.value), g = h.value >> c->idx_bits;
    if (idx < c->high_water && g >= c->gen_base && g < c->slots[idx].gen) {
        const cache_slot *s = &c->slots[idx];
        return hk__report(
            &c->rep, HK_ERR_STALE, HK_EK_STALE, (const void *)(uintptr_t)h.value, 0, NULL,
            "%s: handle 0x%08x is stale: its block was freed (slot %u is now at generation %u%s)", op,
            h.value, idx + 1, s->gen, (s->flags & CACHE_SLOT_RETIRED) ? ", retired" : "");
    }
    return hk__report(&c->rep, HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, (const void *)(uintptr_t)h.value, 0, NULL,
                      "%s: handle 0x%08x does not belong to this cache (slot %u, generation %u never issued)",
                      op, h.value, idx + 1, g);
}

/* The live slot of h, or NULL after a report. */
static cache_slot *cache_lookup(hk_cache *c, hk_cache_handle h, const char *op, hk_result *err) {
    uint32_t idx = cache_slot_index(c, h.value);
    if (h.value && idx < c->nslots && (uint32_t)cache_hot_at(c, idx)->key == h.value) return &c->slots[idx];
    hk_result r = cache_bad_handle(c, h, op);
    if (err) *err = r;
    return NULL;
}

static uint32_t cache_slot_new(hk_cache *c) {
    uint32_t idx;
    if (c->high_water < c->nslots) {
        idx = c->high_water++;
        c->slots[idx].gen = c->gen_base;
    } else if (c->fq_head) {
        idx = c->fq_head - 1u;
        c->fq_head = c->slots[idx].link;
        if (!c->fq_head) c->fq_tail = 0;
    } else {
        return UINT32_MAX;
    }
    cache_slot *s = &c->slots[idx];
    hk__cache_hot *e = cache_hot_at(c, idx);
    e->key = (s->gen << c->idx_bits) | idx;
    e->data = NULL;
    s->requested = 0;
    s->name = NULL;
    s->lock = 0;
    s->flags = 0;
    s->link = 0;
    cache_stamp(c, s);
    c->live++;
    return idx;
}

static void cache_slot_release(hk_cache *c, cache_slot *s) {
    uint32_t idx = (uint32_t)(s - c->slots);
    cache_hot_at(c, idx)->key = 0;
    cache_hot_at(c, idx)->data = NULL;
    s->lock = 0;
    s->name = NULL;
    s->requested = 0;
    c->live--;
    if (s->gen >= c->gen_max) {
        s->gen = c->gen_max + 1u;
        s->flags = CACHE_SLOT_RETIRED;
        c->retired++;
        return;
    }
    s->gen++;
    s->flags = 0;
    s->link = 0;
    if (c->fq_tail)
        c->slots[c->fq_tail - 1u].link = idx + 1u;
    else
        c->fq_head = idx + 1u;
    c->fq_tail = idx + 1u;
}

/* Sorts order[0..n) by slot stamp, ascending (oldest first) or descending.
 * Heap sort: no allocation, O(n log n). */
static int cache_stamp_before(const hk_cache *c, uint32_t a, uint32_t b, int desc) {
    uint32_t x = cache_stamp_at(c, a), y = cache_stamp_at(c, b);
    return desc ? x > y : x < y;
}
static void cache_sift(hk_cache *c, uint32_t *o, size_t i, size_t n, int desc) {
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && cache_stamp_before(c, o[m], o[l], desc)) m = l;
        if (l + 1 < n && cache_stamp_before(c, o[m], o[l + 1], desc)) m = l + 1;
        if (m == i) return;
        uint32_t t = o[i];
        o[i] = o[m];
        o[m] = t;
        i = m;
    }
}
static void cache_sort(hk_cache *c, size_t n, int desc) {
    uint32_t *o = c->order;
    for (size_t i = n / 2; i-- > 0;) cache_sift(c, o, i, n, desc);
    for (size_t k = n; k > 1; k--) {
        uint32_t t = o[0];
        o[0] = o[k - 1];
        o[k - 1] = t;
        cache_sift(c, o, 0, k - 1, desc);
    }
}

/* Fills rank[] for every resident slot (0 = most recently used). */
static void cache_compute_ranks(hk_cache *c) {
    size_t n = 0;
    for (uint32_t i = 0; i < c->high_water; i++)
        if (cache_hot_at(c, i)->key && cache_hot_at(c, i)->data) c->order[n++] = i;
    cache_sort(c, n, 1);
    /* rank = how many blocks are newer: blocks with one stamp share a rank */
    for (size_t k = 0; k < n; k++)
        c->rank[c->order[k]] = k && cache_stamp_at(c, c->order[k]) == cache_stamp_at(c, c->order[k - 1])
                                   ? c->rank[c->order[k - 1]]
                                   : (uint32_t)k;
}

/* Renumbers the stamps of the live slots 1, 3, 5, ... in their order (equal
 * stamps stay equal) and sets the tick above them, before it would wrap. */
static void cache_renumber(hk_cache *c) {
    size_t n = 0;
    for (uint32_t i = 0; i < c->high_water; i++)
        if (cache_hot_at(c, i)->key) c->order[n++] = i;
    cache_sort(c, n, 0);
    uint32_t next = 1, prev = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t st = cache_stamp_at(c, c->order[k]);
        if (k && st != prev) next += 2;
        prev = st;
        cache_set_stamp(c, c->order[k], next);
    }
    cache_set_tick(c, next + 1u);
}

/* ---- purging ------------------------------------------------------------------ */

static void cache_purge_slot(hk_cache *c, cache_slot *s) {
    cache_blk *b = cache_blk_of(cache_hot(c, s)->data);
    if (c->on_purge)
        c->on_purge(c, (hk_cache_handle){cache_handle(c, s)}, cache_hot(c, s)->data, s->requested,
                    c->purge_user);
    c->used_bytes -= cache_bytes(b);
    c->requested_bytes -= s->requested;
    c->resident--;
    c->purge_count++;
    c->free_count++;
    cache_hot(c, s)->data = NULL;
    s->requested = 0;
    cache_release(c, b);
}

static int cache_purgeable(const hk_cache *c, const cache_slot *s) {
    return cache_handle(c, s) && cache_hot(c, s)->data && !s->lock && (s->flags & CACHE_SLOT_PURGEABLE) &&
           !(s->flags & CACHE_SLOT_BUSY);
}

/* Collects the purgeable unlocked resident slots into order[], oldest first. */
static size_t cache_purge_candidates(hk_cache *c) {
    size_t n = 0;
    for (uint32_t i = 0; i < c->high_water; i++)
        if (cache_purgeable(c, &c->slots[i])) c->order[n++] = i;
    cache_sort(c, n, 0);
    return n;
}

/* ---- compaction ----------------------------------------------------------------- */

/* Slides unlocked blocks down from the hint (or the bottom), around locked
 * blocks, until the budget is spent. Returns 1 when work remains.
 *
 * Adjacent movable blocks form a run that moves with ONE memmove: the scan
 * reads each block's header (size, handle, lock), points its slot at the
 * block's address-to-be and, for the first block of a run, writes the new
 * prev16 into the header before it moves (the prev16 links inside a run stay
 * right as they are); a free block, a locked block, the end or the budget
 * flushes the run. The moved bytes are touched once, by memmove: no canary
 * checks, and no fills of the vacated space unless HK_FLAG_FILL or scramble
 * asks for them (cache_add_free). */
static int cache_slide_down(hk_cache *c, int from_bottom, size_t max_bytes, uint64_t max_ns,
                            size_t *moved_out) {
    if (!c->lo) return 0;
    cache_san_open(c);
    unsigned char *end = (unsigned char *)c->end;
    cache_blk *cur = from_bottom ? (cache_blk *)c->lo : c->hint;
    while ((unsigned char *)cur < end && cur->magic != CACHE_MAGIC_FREE) cur = cache_next(cur);
    if ((unsigned char *)cur >= end) {
        c->hint = c->end;
        cache_san_close(c);
        return 0;
    }
    unsigned char *dst = (unsigned char *)cur;
    unsigned char *run = NULL; /* source of the pending run, whose bytes go to dst */
    size_t run_len = 0;
    uint32_t prevsize = cur->prev16;
    size_t moved = 0;
    uint64_t t0 = max_ns ? hk_os_now_ns() : 0;
    unsigned nb = 0;
    int stopped = 0;
    while ((unsigned char *)cur < end) {
        cache_blk *nx = cache_next(cur);
        if (cur->magic == CACHE_MAGIC_FREE) {
            if (run_len) {
                memmove(dst, run, run_len);
                dst += run_len;
                moved += run_len;
                run_len = 0;
            }
            cache_bin_remove(c, cur);
            cur = nx;
            continue;
        }
        cache_slot *s = cache_slot_of_blk(c, cur);
        if (s->lock) {
            if (run_len) {
                memmove(dst, run, run_len);
                dst += run_len;
                moved += run_len;
                run_len = 0;
            }
            if (dst < (unsigned char *)cur) {
                cache_blk *f = (cache_blk *)dst;
                f->size16 = (uint32_t)(((unsigned char *)cur - dst) / 16u);
                f->prev16 = prevsize;
                cache_add_free(c, f);
                prevsize = f->size16;
            }
            cur->prev16 = prevsize;
            prevsize = cur->size16;
            dst = (unsigned char *)nx;
            cur = nx;
            continue;
        }
        size_t sz = cache_bytes(cur);
        if (dst == (unsigned char *)cur) { /* in place (right after a locked block) */
            cur->prev16 = prevsize;
            prevsize = cur->size16;
            dst = (unsigned char *)nx;
            cur = nx;
            continue;
        }
        size_t pending = moved + run_len;
        if (pending && ((max_bytes && pending + sz > max_bytes) ||
                        (max_ns && (++nb & 7u) == 0 && hk_os_now_ns() - t0 >= max_ns))) {
            stopped = 1;
            break;
        }
        if (!run_len) {
            run = (unsigned char *)cur;
            cur->prev16 = prevsize; /* travels with the header */
        }
        cache_hot(c, s)->data = dst + run_len + CACHE_HDR;
        run_len += sz;
        prevsize = cur->size16;
        cur = nx;
    }
    if (run_len) {
        memmove(dst, run, run_len);
        dst += run_len;
        moved += run_len;
    }
    if (dst < (unsigned char *)cur) {
        cache_blk *f = (cache_blk *)dst;
        f->size16 = (uint32_t)(((unsigned char *)cur - dst) / 16u);
        f->prev16 = prevsize;
        cur->prev16 = f->size16;
        cache_add_free(c, f);
        c->hint = f;
    } else {
        cur->prev16 = prevsize;
        c->hint = cur;
    }
    c->moved_bytes += moved;
    if (moved_out) *moved_out += moved;
    cache_san_close(c);
    return stopped;
}

/* Slides every unlocked block up, around locked blocks: free space gathers at
 * the bottom (and right above each locked block). */
static void cache_slide_up(hk_cache *c) {
    if (!c->lo || (unsigned char *)c->end == c->lo) return;
    cache_san_open(c);
    cache_blk *cur = cache_prev(c, c->end);
    unsigned char *dst_end = (unsigned char *)c->end;
    cache_blk *above = c->end;
    while (cur) {
        cache_blk *pv = cache_prev(c, cur);
        size_t sz = cache_bytes(cur);
        if (cur->magic == CACHE_MAGIC_FREE) {
            cache_bin_remove(c, cur);
            cur = pv;
            continue;
        }
        cache_slot *s = cache_slot_of_blk(c, cur);
        if (s->lock) {
            unsigned char *ce = (unsigned char *)cur + sz;
            if (ce < dst_end) {
                cache_blk *f = (cache_blk *)ce;
                f->size16 = (uint32_t)((dst_end - ce) / 16u);
                f->prev16 = cur->size16;
                above->prev16 = f->size16;
                cache_add_free(c, f);
            } else {
                above->prev16 = cur->size16;
            }
            above = cur;
            dst_end = (unsigned char *)cur;
            cur = pv;
            continue;
        }
        unsigned char *nd = dst_end - sz;
        if (nd != (unsigned char *)cur) {
            memmove(nd, cur, sz);
            cache_hot(c, s)->data = nd + CACHE_HDR;
            c->moved_bytes += sz;
        }
        above->prev16 = ((cache_blk *)nd)->size16;
        above = (cache_blk *)nd;
        dst_end = nd;
        cur = pv;
    }
    if (dst_end > c->lo) {
        cache_blk *f = (cache_blk *)c->lo;
        f->size16 = (uint32_t)((dst_end - c->lo) / 16u);
        f->prev16 = 0;
        above->prev16 = f->size16;
        cache_add_free(c, f);
    } else {
        above->prev16 = 0;
    }
    c->hint = (cache_blk *)c->lo;
    cache_san_close(c);
}

/* HeapQC's scramble: move everything that can move, alternately up and
 * down, and fill all free space with the freed pattern. */
static void cache_scramble(hk_cache *c) {
    if (!c->lo) return;
    uint64_t before = c->moved_bytes;
    if (c->scramble_dir)
        (void)cache_slide_down(c, 1, 0, 0, NULL);
    else
        cache_slide_up(c);
    /* Turn round only when something moved (an empty heap has nothing to
     * scramble). New blocks are then placed next to the packed ones (see
     * cache_place_high) so the next slide, the other way, moves them too. */
    if (c->moved_bytes != before) c->scramble_dir ^= 1;
    for (int i = 0; i < CACHE_NBINS; i++)
        for (cache_blk *b = c->bins[i]; b; b = cache_links_of(b)->next) {
            size_t n = cache_bytes(b) - CACHE_MIN_FREE;
            cache_unpoison((unsigned char *)b + CACHE_MIN_FREE, n);
            memset((unsigned char *)b + CACHE_MIN_FREE, HK_FILL_FREE, n);
            cache_poison((unsigned char *)b + CACHE_MIN_FREE, n);
        }
}

/* ---- living in a hunk ------------------------------------------------------------ */

/* Sets up a region holding one free block and the sentinel. */
static void cache_region_init(hk_cache *c, unsigned char *lo, unsigned char *hi) {
    c->lo = lo;
    c->end = (cache_blk *)(hi - CACHE_HDR);
    cache_unpoison(c->end, CACHE_HDR);
    c->end->magic = CACHE_MAGIC_END;
    c->end->handle = 0;
    c->end->size16 = 1;
    c->end->prev16 = 0;
    c->hint = (cache_blk *)lo;
    if (hi - lo > CACHE_HDR) {
        cache_blk *f = (cache_blk *)lo;
        cache_unpoison(f, CACHE_HDR);
        f->size16 = (uint32_t)((size_t)(hi - CACHE_HDR - lo) / 16u);
        f->prev16 = 0;
        c->end->prev16 = f->size16;
        cache_add_free(c, f);
    }
}

static size_t cache_claim_size(const hk_cache *c) {
    return c->lo ? (size_t)((unsigned char *)c->end + CACHE_HDR - c->lo) : 0;
}

/* Takes whatever the hunk's middle offers beyond the region. 1 if it grew. */
static int cache_hunk_expand(hk_hunk *hk, hk_cache *c) {
    void *ms;
    size_t mn;
    hk_hunk_free_range(hk, &ms, &mn);
    unsigned char *m0 = (unsigned char *)ms, *m1 = m0 + mn;
    if (!c->lo) {
        if (mn < CACHE_HDR + CACHE_MIN_FREE) return 0;
        cache_region_init(c, m0, m1);
        (void)hk_hunk_set_tenant_range(hk, m0, mn);
        return 1;
    }
    int grew = 0;
    cache_san_open(c);
    if (m0 < c->lo && (size_t)(c->lo - m0) >= CACHE_MIN_FREE) {
        cache_blk *n = (cache_blk *)m0, *first = (cache_blk *)c->lo;
        cache_unpoison(m0, (size_t)(c->lo - m0));
        n->size16 = (uint32_t)((size_t)(c->lo - m0) / 16u);
        n->prev16 = 0;
        if (first != c->end && first->magic == CACHE_MAGIC_FREE) {
            cache_bin_remove(c, first);
            n->size16 += first->size16;
        }
        c->lo = m0;
        cache_next(n)->prev16 = n->size16;
        cache_add_free(c, n);
        grew = 1;
    }
    unsigned char *hi = (unsigned char *)c->end + CACHE_HDR;
    if (m1 > hi && (size_t)(m1 - hi) >= CACHE_MIN_FREE) {
        cache_blk *old = c->end, *ns = (cache_blk *)(m1 - CACHE_HDR);
        cache_unpoison(hi, (size_t)(m1 - hi));
        cache_blk *last = cache_prev(c, old);
        cache_blk *f;
        if (last && last->magic == CACHE_MAGIC_FREE) {
            cache_bin_remove(c, last);
            f = last;
            f->size16 += (uint32_t)((size_t)((unsigned char *)ns - (unsigned char *)old) / 16u);
        } else {
            f = old;
            f->size16 = (uint32_t)((size_t)((unsigned char *)ns - (unsigned char *)old) / 16u);
            /* prev16 of the old sentinel is already the last block's size */
        }
        ns->magic = CACHE_MAGIC_END;
        ns->handle = 0;
        ns->size16 = 1;
        ns->prev16 = f->size16;
        c->end = ns;
        cache_add_free(c, f);
        grew = 1;
    }
    if (grew) {
        c->hint = (cache_blk *)c->lo;
        (void)hk_hunk_set_tenant_range(hk, c->lo, cache_claim_size(c));
    }
    cache_san_close(c);
    return grew;
}

/* Can the bottom `need` bytes go? Sets *cut to where the region would start. */
static int cache_low_free(hk_cache *c, size_t need, unsigned char **cut) {
    cache_blk *f = (cache_blk *)c->lo;
    if (f == c->end || f->magic != CACHE_MAGIC_FREE || cache_bytes(f) < need) return 0;
    size_t rem = cache_bytes(f) - need;
    *cut = c->lo + (rem == 16 ? cache_bytes(f) : need);
    return 1;
}

static int cache_high_free(hk_cache *c, size_t need, unsigned char **ns) {
    cache_blk *l = cache_prev(c, c->end);
    if (!l || l->magic != CACHE_MAGIC_FREE || cache_bytes(l) < need) return 0;
    size_t rem = cache_bytes(l) - need;
    *ns = (unsigned char *)l + (rem == 16 ? 0 : rem);
    return 1;
}

/* Purges purgeable unlocked blocks overlapping [a, b). Returns how many. */
static size_t cache_purge_range(hk_cache *c, unsigned char *a, unsigned char *b) {
    size_t n = 0;
    cache_blk *x = (cache_blk *)c->lo;
    while (x != c->end) {
        cache_blk *nx = cache_next(x);
        unsigned char *xs = (unsigned char *)x, *xe = (unsigned char *)nx;
        if (xe > a && xs < b && x->magic == CACHE_MAGIC_USED) {
            cache_slot *s = cache_slot_of_blk(c, x);
            if (cache_purgeable(c, s)) {
                cache_blk *p = cache_prev(c, x);
                cache_purge_slot(c, s);
                n++;
                nx = p ? p : (cache_blk *)c->lo; /* the walk restarts at the merged block */
            }
        }
        x = nx;
    }
    return n;
}

static size_t cache_release_all(hk_cache *c) {
    for (uint32_t i = 0; i < c->high_water; i++) {
        cache_slot *s = &c->slots[i];
        if (cache_handle(c, s) && cache_hot(c, s)->data && !cache_purgeable(c, s)) return 0;
    }
    for (uint32_t i = 0; i < c->high_water; i++)
        if (cache_purgeable(c, &c->slots[i])) cache_purge_slot(c, &c->slots[i]);
    size_t n = cache_claim_size(c);
    cache_unpoison(c->lo, n);
    cache_poison(c->lo, n);
    memset(c->bins, 0, sizeof c->bins);
    c->bin_map = 0;
    c->free_blocks = 0;
    c->free_bytes = 0;
    c->lo = NULL;
    c->end = c->hint = NULL;
    return n;
}

/* The hunk's reclaim hook (hk_hunk_set_tenant): give back `bytes` from the
 * bottom (high == 0) or top of the region. */
static size_t cache_hunk_reclaim(void *user, int high, size_t bytes) {
    hk_cache *c = (hk_cache *)user;
    size_t got = 0, need;
    hk__lock(&c->lock);
    if (!c->lo || !hk_size_align(bytes, 16, &need)) goto out;
    if (need + CACHE_HDR + CACHE_MIN_FREE > cache_claim_size(c)) {
        got = cache_release_all(c);
        goto out;
    }
    for (int attempt = 0;; attempt++) {
        unsigned char *edge;
        if (!high && cache_low_free(c, need, &edge)) {
            cache_blk *f = (cache_blk *)c->lo;
            cache_blk *n = cache_next(f);
            cache_bin_remove(c, f);
            got = (size_t)(edge - c->lo);
            cache_unpoison(c->lo, got);
            cache_poison(c->lo, got);
            c->lo = edge;
            if (edge < (unsigned char *)n) {
                cache_blk *r = (cache_blk *)edge;
                cache_unpoison(r, CACHE_HDR);
                r->size16 = (uint32_t)((size_t)((unsigned char *)n - edge) / 16u);
                r->prev16 = 0;
                n->prev16 = r->size16;
                cache_add_free(c, r);
            } else {
                n->prev16 = 0;
            }
            break;
        }
        if (high && cache_high_free(c, need, &edge)) {
            cache_blk *l = cache_prev(c, c->end);
            unsigned char *old_hi = (unsigned char *)c->end + CACHE_HDR;
            uint32_t lprev = l->prev16;
            cache_bin_remove(c, l);
            cache_blk *ns = (cache_blk *)edge;
            if (edge > (unsigned char *)l) {
                l->size16 = (uint32_t)((size_t)(edge - (unsigned char *)l) / 16u);
                cache_add_free(c, l);
            }
            cache_unpoison(ns, CACHE_HDR);
            ns->magic = CACHE_MAGIC_END;
            ns->handle = 0;
            ns->size16 = 1;
            ns->prev16 = edge > (unsigned char *)l ? l->size16 : ((unsigned char *)l == c->lo ? 0 : lprev);
            c->end = ns;
            got = (size_t)(old_hi - (edge + CACHE_HDR));
            cache_unpoison(edge + CACHE_HDR, got);
            cache_poison(edge + CACHE_HDR, got);
            break;
        }
        unsigned char *a = high ? (unsigned char *)c->end + CACHE_HDR - need : c->lo;
        unsigned char *b = high ? (unsigned char *)c->end + CACHE_HDR : c->lo + need;
        if (attempt == 0) {
            /* move what can move out of the way */
        } else if (attempt == 1) {
            if (!cache_purge_range(c, a, b)) continue; /* nothing purgeable in the way: next stage */
        } else {
            /* purge least recently used purgeable blocks elsewhere to make room */
            size_t n = cache_purge_candidates(c);
            if (!n) break;
            for (size_t k = 0; k < n; k++) {
                cache_purge_slot(c, &c->slots[c->order[k]]);
                if (c->free_bytes >= need + CACHE_MIN_FREE) break;
            }
        }
        if (high)
            (void)cache_slide_down(c, 1, 0, 0, NULL);
        else
            cache_slide_up(c);
    }
    c->hint = c->lo ? (cache_blk *)c->lo : NULL;
out:
    hk__unlock(&c->lock);
    return got;
}

/* ---- making room ------------------------------------------------------------------- */

/* A free block of at least need16 units: fit, (take more of the hunk),
 * compact, purge LRU, grow callback. NULL when none can be had. */
static cache_blk *cache_make_room(hk_cache *c, uint32_t need16) {
    size_t need = (size_t)need16 * 16u;
    for (int round = 0; round < CACHE_GROW_ROUNDS; round++) {
        cache_blk *f = c->lo ? cache_fit(c, need16) : NULL;
        if (f) return f;
        if (c->hunk && cache_hunk_expand(c->hunk, c) && (f = cache_fit(c, need16)) != NULL) return f;
        if (!c->lo) goto grow;
        if (c->free_bytes >= need) {
            (void)cache_slide_down(c, 0, 0, 0, NULL);
            if ((f = cache_fit(c, need16)) != NULL) return f;
        }
        {
            size_t n = cache_purge_candidates(c);
            for (size_t k = 0; k < n; k++) {
                cache_purge_slot(c, &c->slots[c->order[k]]);
                if (c->free_bytes < need) continue;
                if ((f = cache_fit(c, need16)) != NULL) return f;
                (void)cache_slide_down(c, 0, 0, 0, NULL);
                if ((f = cache_fit(c, need16)) != NULL) return f;
            }
        }
    grow:
        if (!c->grow || c->in_grow) return NULL;
        c->in_grow = 1;
        hk__unlock(&c->lock);
        size_t r = c->grow(c, need, c->grow_user);
        hk__lock(&c->lock);
        c->in_grow = 0;
        if (!r) return NULL;
    }
    return NULL;
}

/* Where new blocks go in a free block: at its bottom, except in scramble
 * mode after a slide up (the packed blocks are above: join them). */
static int cache_place_high(const hk_cache *c) { return (c->flags & HK_CACHE_SCRAMBLE) && c->scramble_dir; }

/* Gives slot s a block of `size` bytes (need16 units) from room f. */
static void cache_place(hk_cache *c, cache_slot *s, cache_blk *f, uint32_t need16, size_t size) {
    cache_blk *b = cache_carve(c, f, need16, cache_place_high(c));
    b->magic = CACHE_MAGIC_USED;
    b->handle = cache_handle(c, s);
    unsigned char *u = cache_user(b);
    if (c->flags & HK_FLAG_ZERO)
        memset(u, 0, size);
    else if (c->flags & HK_FLAG_FILL)
        memset(u, HK_FILL_ALLOC, size);
    cache_fill_pad(b, size);
    cache_hot(c, s)->data = u;
    s->requested = size;
    cache_stamp(c, s);
    c->used_bytes += cache_bytes(b);
    c->requested_bytes += size;
    if (c->requested_bytes > c->peak_requested) c->peak_requested = c->requested_bytes;
    c->resident++;
    c->alloc_count++;
}

static void cache_fail_nomem(hk_cache *c, size_t size, const char *name, const char *why) {
    c->fail_count++;
    hk__report(
        &c->rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, size, name,
        "allocation of %zu bytes for '%s' failed: %s (region %zu, free %zu in %zu blocks, %u handles live)",
        size, cache_nm(name), why, cache_claim_size(c), c->free_bytes, c->free_blocks, c->live);
}

static void cache_fail_overflow(hk_cache *c, size_t size, const char *name) {
    c->fail_count++;
    hk__report(&c->rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, NULL, size, name,
               "allocation of %zu bytes for '%s' overflows with the block overhead", size, cache_nm(name));
}

static hk_result cache_check_locked(hk_cache *c);

static void cache_after_op(hk_cache *c) {
    if (HK__UNLIKELY(c->flags & HK_FLAG_PARANOID) || HK_DEBUG >= 3) (void)cache_check_locked(c);
}

/* ---- create / destroy ------------------------------------------------------------ */

static uint32_t cache_instances;

hk_cache *hk_cache_create(const hk_cache_desc *desc) {
    if (!desc) return NULL;
    size_t data_size =
        desc->hunk ? 0 : (desc->memory ? desc->size : (desc->size ? desc->size : CACHE_DEFAULT_SIZE));
    uint32_t nslots = desc->max_handles;
    if (!nslots) {
        size_t est = desc->hunk ? 0 : data_size / 1024u;
        if (desc->hunk) {
            size_t mn;
            hk_hunk_free_range(desc->hunk, NULL, &mn);
            est = mn / 1024u;
        }
        nslots = (uint32_t)(est < 64 ? 64 : est > ((size_t)1 << 20) ? ((size_t)1 << 20) : est);
        nslots = 1u << cache_log2(nslots); /* a power of two: no hot entry is wasted */
    }
    if (nslots > (1u << 24) - 1u) return NULL;
    uint32_t idx_bits = 1;
    while ((1u << idx_bits) < nslots) idx_bits++;
    size_t nhot = (size_t)1 << idx_bits; /* every handle & idx_mask lands in the table */
    size_t ctl = (sizeof(hk_cache) + 63u) & ~(size_t)63u;
    size_t table =
        nhot * sizeof(hk__cache_hot) + (size_t)nslots * (sizeof(cache_slot) + 2u * sizeof(uint32_t));
    size_t head = ctl + table, total;
    if (!hk_size_add(head, 16u, &total)) return NULL;
    if (!desc->hunk && !desc->memory && !hk_size_add(total, data_size, &total)) return NULL;
    unsigned char *mem;
    size_t mem_size;
    void *os_base = NULL;
    if (desc->memory) {
        mem = (unsigned char *)desc->memory;
        mem_size = desc->size;
    } else {
        os_base = hk_os_alloc(total);
        if (!os_base) return NULL;
        mem = (unsigned char *)os_base;
        mem_size = total;
    }
    uintptr_t start = hk_align_ptr((uintptr_t)mem, 64);
    if (start - (uintptr_t)mem > mem_size || mem_size - (start - (uintptr_t)mem) < head) goto fail;
    hk_cache *c = (hk_cache *)start;
    memset(c, 0, sizeof *c);
    c->v.hot = (hk__cache_hot *)(start + ctl);
    memset(c->v.hot, 0, table);
    c->slots = (cache_slot *)(void *)(c->v.hot + nhot);
    c->order = (uint32_t *)(void *)(c->slots + nslots);
    c->rank = c->order + nslots;
    c->nslots = nslots;
    c->idx_bits = idx_bits;
    c->v.idx_mask = (1u << c->idx_bits) - 1u;
    c->gen_max = (uint32_t)((1ull << (32u - c->idx_bits)) - 2u);
    {
        uint32_t k = __atomic_fetch_add(&cache_instances, 1u, __ATOMIC_RELAXED);
        c->gen_base = 1u + (uint32_t)(((uint64_t)k * 2654435761u) % ((uint64_t)c->gen_max / 4u + 1u));
    }
    c->slow = (desc->lock.lock || (desc->flags & HK_FLAG_PARANOID)) ? 1u : 0u;
    cache_set_tick(c, 2u);
    c->table_bytes = table;
    c->flags = desc->flags;
    c->on_purge = desc->on_purge;
    c->purge_user = desc->purge_user;
    c->grow = desc->grow;
    c->grow_user = desc->grow_user;
    c->os_base = os_base;
    c->os_size = os_base ? total : 0;
    hk__reporter_init(&c->rep, "cache", desc->name, desc->on_error, desc->error_user, desc->flags);
    c->lock = desc->lock;
    if (desc->hunk) {
        void *ms;
        size_t mn;
        hk_hunk_free_range(desc->hunk, &ms, &mn);
        int usable = mn >= CACHE_HDR + CACHE_MIN_FREE;
        if (hk_hunk_set_tenant(desc->hunk, cache_hunk_reclaim, c, usable ? ms : NULL, usable ? mn : 0) !=
            HK_OK)
            goto fail;
        c->hunk = desc->hunk;
        if (usable) cache_region_init(c, (unsigned char *)ms, (unsigned char *)ms + mn);
    } else {
        unsigned char *lo = (unsigned char *)hk_align_ptr(start + head, 16);
        unsigned char *hi = (unsigned char *)(((uintptr_t)mem + mem_size) & ~(uintptr_t)15u);
        if (hi <= lo || (size_t)(hi - lo) < 64u) goto fail;
        cache_region_init(c, lo, hi);
    }
    return c;
fail:
    if (os_base) hk_os_release(os_base, total);
    return NULL;
}

void hk_cache_destroy(hk_cache *c) {
    if (!c) return;
    if (c->hunk) {
        if (c->lo) {
            size_t n = cache_claim_size(c);
            cache_unpoison(c->lo, n);
            cache_poison(c->lo, n);
        }
        (void)hk_hunk_set_tenant(c->hunk, NULL, NULL, NULL, 0);
    } else if (c->lo) {
        cache_unpoison(c->lo, cache_claim_size(c));
    }
    if (c->os_base) hk_os_release(c->os_base, c->os_size);
}

/* ---- allocation ------------------------------------------------------------------ */

hk_cache_handle hk_cache_alloc(hk_cache *c, size_t size, const char *name) {
    hk_cache_handle h = {0};
    if (!c) return h;
    hk__lock(&c->lock);
    uint32_t need16 = cache_need16(size);
    if (!need16) {
        cache_fail_overflow(c, size, name);
        goto out;
    }
    uint32_t idx = cache_slot_new(c);
    if (idx == UINT32_MAX) {
        cache_fail_nomem(c, size, name, "the handle table is full");
        goto out;
    }
    cache_slot *s = &c->slots[idx];
    s->name = name;
    s->flags |= CACHE_SLOT_BUSY;
    if (c->flags & HK_CACHE_SCRAMBLE) cache_scramble(c);
    cache_blk *f = cache_make_room(c, need16);
    s->flags &= (uint16_t)~CACHE_SLOT_BUSY;
    if (!f) {
        cache_slot_release(c, s);
        cache_fail_nomem(c, size, name, "no room even after compacting and purging");
        goto out;
    }
    cache_place(c, s, f, need16, size);
    h.value = cache_handle(c, s);
out:
    cache_after_op(c);
    hk__unlock(&c->lock);
    return h;
}

/* Releases slot s's block (used-bytes counters included). */
static void cache_drop_block(hk_cache *c, cache_slot *s) {
    cache_blk *b = cache_blk_of(cache_hot(c, s)->data);
    c->used_bytes -= cache_bytes(b);
    c->requested_bytes -= s->requested;
    c->resident--;
    c->free_count++;
    cache_hot(c, s)->data = NULL;
    s->requested = 0;
    cache_release(c, b);
}

/* Verifies the canary of slot s's block; reports and returns 0 if damaged. */
static int cache_canary_ok(hk_cache *c, cache_slot *s, int report) {
    cache_blk *b = cache_blk_of(cache_hot(c, s)->data);
    unsigned char *pad = cache_user(b) + s->requested;
    size_t n = cache_bytes(b) - CACHE_HDR - s->requested;
    cache_unpoison(pad, n);
    size_t at = hk_fill_check(pad, n, HK_FILL_PAD);
    cache_poison(pad, n);
    if (at == n) return 1;
    if (report)
        hk__report(&c->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_CANARY, cache_hot(c, s)->data, s->requested,
                   s->name,
                   "block '%s' at %p (handle 0x%08x, %zu bytes): canary damaged %zu bytes past the end",
                   cache_nm(s->name), cache_hot(c, s)->data, cache_handle(c, s), s->requested, at);
    return 0;
}

hk_result hk_cache_free(hk_cache *c, hk_cache_handle h) {
    if (!c) return HK_ERR_INVALID;
    hk__lock(&c->lock);
    hk_result r = HK_OK;
    cache_slot *s = cache_lookup(c, h, "free", &r);
    if (s && s->lock) {
        r = hk__report(&c->rep, HK_ERR_LOCKED, HK_EK_LOCKED, cache_hot(c, s)->data, s->requested, s->name,
                       "free of locked block '%s' at %p (handle 0x%08x, lock count %u) refused",
                       cache_nm(s->name), cache_hot(c, s)->data, cache_handle(c, s), (unsigned)s->lock);
    } else if (s) {
        if (cache_hot(c, s)->data && !cache_canary_ok(c, s, 1)) r = HK_ERR_CORRUPT;
        if (cache_hot(c, s)->data) cache_drop_block(c, s);
        cache_slot_release(c, s);
    }
    cache_after_op(c);
    hk__unlock(&c->lock);
    return r;
}

void *hk_cache_deref(hk_cache *c, hk_cache_handle h) {
    if (!c) return NULL;
    hk__lock(&c->lock);
    void *p = NULL;
    cache_slot *s = cache_lookup(c, h, "deref", NULL);
    if (s) {
        cache_stamp(c, s);
        p = cache_hot(c, s)->data;
    }
    hk__unlock(&c->lock);
    return p;
}

/* hk_cache_deref_fast's miss: a live resident handle whose stamp is not the
 * current tick gets it (one write per tick value); everything else goes to
 * hk_cache_deref. Lock-free only when the cache has no lock hooks (then it
 * is not thread-safe anyway): with hooks, `slow` sends every call there. */
void *hk__cache_deref_miss(hk_cache *c, hk_cache_handle h) {
    if (c && !c->slow) {
        uint32_t idx = cache_slot_index(c, h.value);
        hk__cache_hot *e = cache_hot_at(c, idx);
        if (h.value && idx < c->nslots && (uint32_t)e->key == h.value && e->data) {
            e->key = c->v.tick_key | h.value;
            return e->data;
        }
    }
    return hk_cache_deref(c, h);
}

hk_result hk_cache_touch(hk_cache *c, hk_cache_handle h) {
    if (!c) return HK_ERR_INVALID;
    hk__lock(&c->lock);
    hk_result r = HK_OK;
    cache_slot *s = cache_lookup(c, h, "touch", &r);
    if (s) cache_stamp(c, s);
    hk__unlock(&c->lock);
    return r;
}

size_t hk_cache_size(hk_cache *c, hk_cache_handle h) {
    if (!c) return 0;
    hk__lock(&c->lock);
    cache_slot *s = cache_lookup(c, h, "size", NULL);
    size_t n = s ? s->requested : 0;
    hk__unlock(&c->lock);
    return n;
}

bool hk_cache_is_purged(hk_cache *c, hk_cache_handle h) {
    if (!c) return false;
    hk__lock(&c->lock);
    uint32_t idx = cache_slot_index(c, h.value);
    bool r = h.value && idx < c->nslots && (uint32_t)cache_hot_at(c, idx)->key == h.value &&
             !cache_hot_at(c, idx)->data;
    hk__unlock(&c->lock);
    return r;
}

/* ---- resize / reallocate ------------------------------------------------------------ */

/* Shrinks block b of slot s to need16 units, giving the tail back. */
static void cache_shrink_in_place(hk_cache *c, cache_blk *b, uint32_t need16) {
    uint32_t rem = b->size16 - need16;
    if ((size_t)rem * 16u < CACHE_MIN_FREE) return;
    cache_blk *t = (cache_blk *)((unsigned char *)b + (size_t)need16 * 16u);
    cache_unpoison(t, CACHE_HDR);
    t->magic = CACHE_MAGIC_USED;
    t->size16 = rem;
    t->prev16 = need16;
    b->size16 = need16;
    c->used_bytes -= (size_t)rem * 16u;
    cache_release(c, t);
}

/* Grows block b in place into a free next block if it is big enough. */
static int cache_grow_in_place(hk_cache *c, cache_blk *b, uint32_t need16) {
    cache_blk *n = cache_next(b);
    if (n->magic != CACHE_MAGIC_FREE || (uint64_t)b->size16 + n->size16 < need16) return 0;
    uint32_t old16 = b->size16;
    cache_bin_remove(c, n);
    cache_unpoison(n, cache_bytes(n));
    b->size16 += n->size16;
    cache_next(b)->prev16 = b->size16;
    if (c->hint == n) c->hint = b;
    c->used_bytes += cache_bytes(b) - (size_t)old16 * 16u;
    cache_shrink_in_place(c, b, need16);
    return 1;
}

static void cache_set_requested(hk_cache *c, cache_slot *s, size_t size) {
    cache_blk *b = cache_blk_of(cache_hot(c, s)->data);
    if (size > s->requested) {
        unsigned char *u = cache_user(b);
        cache_unpoison(u + s->requested, size - s->requested);
        if (c->flags & HK_FLAG_ZERO)
            memset(u + s->requested, 0, size - s->requested);
        else if (c->flags & HK_FLAG_FILL)
            memset(u + s->requested, HK_FILL_ALLOC, size - s->requested);
    }
    c->requested_bytes = c->requested_bytes - s->requested + size;
    if (c->requested_bytes > c->peak_requested) c->peak_requested = c->requested_bytes;
    s->requested = size;
    cache_fill_pad(b, size);
}

hk_result hk_cache_resize(hk_cache *c, hk_cache_handle h, size_t size) {
    if (!c) return HK_ERR_INVALID;
    hk__lock(&c->lock);
    hk_result r = HK_OK;
    cache_slot *s = cache_lookup(c, h, "resize", &r);
    if (!s) goto out;
    if (!cache_hot(c, s)->data) {
        r = hk__report(&c->rep, HK_ERR_STATE, HK_EK_STATE, NULL, size, s->name,
                       "resize of empty (purged) handle 0x%08x '%s': use reallocate", cache_handle(c, s),
                       cache_nm(s->name));
        goto out;
    }
    uint32_t need16 = cache_need16(size);
    if (!need16) {
        c->fail_count++;
        r = hk__report(&c->rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, cache_hot(c, s)->data, size, s->name,
                       "resize of '%s' to %zu bytes overflows with the block overhead", cache_nm(s->name),
                       size);
        goto out;
    }
    cache_blk *b = cache_blk_of(cache_hot(c, s)->data);
    if (need16 <= b->size16) {
        if (size < s->requested) cache_unpoison(cache_hot(c, s)->data, s->requested);
        cache_set_requested(c, s, size);
        cache_shrink_in_place(c, b, need16);
        cache_fill_pad(b, size);
        goto out;
    }
    if (cache_grow_in_place(c, b, need16)) {
        cache_set_requested(c, s, size);
        goto out;
    }
    if (s->lock) {
        r = hk__report(
            &c->rep, HK_ERR_LOCKED, HK_EK_LOCKED, cache_hot(c, s)->data, size, s->name,
            "resize of locked block '%s' at %p (handle 0x%08x) from %zu to %zu bytes: it cannot grow in "
            "place and a locked block does not move",
            cache_nm(s->name), cache_hot(c, s)->data, cache_handle(c, s), s->requested, size);
        goto out;
    }
    s->flags |= CACHE_SLOT_BUSY;
    if (c->flags & HK_CACHE_SCRAMBLE) cache_scramble(c);
    b = cache_blk_of(cache_hot(c, s)->data);
    if (cache_grow_in_place(c, b, need16)) {
        s->flags &= (uint16_t)~CACHE_SLOT_BUSY;
        cache_set_requested(c, s, size);
        goto out;
    }
    cache_blk *f = cache_make_room(c, need16);
    s->flags &= (uint16_t)~CACHE_SLOT_BUSY;
    if (!f) {
        c->fail_count++;
        r = hk__report(
            &c->rep, HK_ERR_NOMEM, HK_EK_NOMEM, cache_hot(c, s)->data, size, s->name,
            "resize of '%s' from %zu to %zu bytes failed: no room even after compacting and purging "
            "(the block is unchanged)",
            cache_nm(s->name), s->requested, size);
        goto out;
    }
    b = cache_blk_of(cache_hot(c, s)->data); /* compaction may have moved it */
    {
        size_t keep = s->requested;
        cache_blk *nb = cache_carve(c, f, need16, cache_place_high(c));
        nb->magic = CACHE_MAGIC_USED;
        nb->handle = cache_handle(c, s);
        memcpy(cache_user(nb), cache_user(b), keep);
        c->used_bytes += cache_bytes(nb);
        c->used_bytes -= cache_bytes(b);
        cache_release(c, b);
        cache_hot(c, s)->data = cache_user(nb);
        if (c->flags & HK_FLAG_ZERO)
            memset(cache_user(nb) + keep, 0, size - keep);
        else if (c->flags & HK_FLAG_FILL)
            memset(cache_user(nb) + keep, HK_FILL_ALLOC, size - keep);
        c->requested_bytes = c->requested_bytes - keep + size;
        if (c->requested_bytes > c->peak_requested) c->peak_requested = c->requested_bytes;
        s->requested = size;
        cache_fill_pad(nb, size);
    }
out:
    cache_after_op(c);
    hk__unlock(&c->lock);
    return r;
}

hk_result hk_cache_reallocate(hk_cache *c, hk_cache_handle h, size_t size) {
    if (!c) return HK_ERR_INVALID;
    hk__lock(&c->lock);
    hk_result r = HK_OK;
    cache_slot *s = cache_lookup(c, h, "reallocate", &r);
    if (!s) goto out;
    uint32_t need16 = cache_need16(size);
    if (!need16) {
        c->fail_count++;
        r = hk__report(&c->rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, cache_hot(c, s)->data, size, s->name,
                       "reallocate of '%s' to %zu bytes overflows with the block overhead", cache_nm(s->name),
                       size);
        goto out;
    }
    if (cache_hot(c, s)->data && s->lock) {
        r = hk__report(&c->rep, HK_ERR_LOCKED, HK_EK_LOCKED, cache_hot(c, s)->data, size, s->name,
                       "reallocate of locked block '%s' at %p (handle 0x%08x) refused", cache_nm(s->name),
                       cache_hot(c, s)->data, cache_handle(c, s));
        goto out;
    }
    if (cache_hot(c, s)->data) cache_drop_block(c, s);
    s->flags |= CACHE_SLOT_BUSY;
    if (c->flags & HK_CACHE_SCRAMBLE) cache_scramble(c);
    cache_blk *f = cache_make_room(c, need16);
    s->flags &= (uint16_t)~CACHE_SLOT_BUSY;
    if (!f) {
        cache_fail_nomem(c, size, s->name,
                         "no room even after compacting and purging (the handle stays empty)");
        r = HK_ERR_NOMEM;
        goto out;
    }
    cache_place(c, s, f, need16, size);
out:
    cache_after_op(c);
    hk__unlock(&c->lock);
    return r;
}

/* ---- locking, purgeable, purge -------------------------------------------------------- */

/* One more pin on s, refused (reported) when the count would overflow. */
static hk_result cache_pin(hk_cache *c, cache_slot *s, const char *op) {
    if (s->lock >= CACHE_LOCK_MAX)
        return hk__report(&c->rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, cache_hot(c, s)->data, s->lock, s->name,
                          "%s of '%s' (handle 0x%08x): lock count would pass %u", op, cache_nm(s->name),
                          cache_handle(c, s), CACHE_LOCK_MAX);
    s->lock++;
    return HK_OK;
}

hk_result hk_cache_lock(hk_cache *c, hk_cache_handle h) {
    if (!c) return HK_ERR_INVALID;
    hk__lock(&c->lock);
    hk_result r = HK_OK;
    cache_slot *s = cache_lookup(c, h, "lock", &r);
    if (s) r = cache_pin(c, s, "lock");
    hk__unlock(&c->lock);
    return r;
}

hk_result hk_cache_unlock(hk_cache *c, hk_cache_handle h) {
    if (!c) return HK_ERR_INVALID;
    hk__lock(&c->lock);
    hk_result r = HK_OK;
    cache_slot *s = cache_lookup(c, h, "unlock", &r);
    if (s && s->lock == 0) {
        r = hk__report(&c->rep, HK_ERR_STATE, HK_EK_STATE, cache_hot(c, s)->data, s->requested, s->name,
                       "unlock of block '%s' at %p (handle 0x%08x) that is not locked", cache_nm(s->name),
                       cache_hot(c, s)->data, cache_handle(c, s));
    } else if (s) {
        s->lock--;
        if (!s->lock && cache_hot(c, s)->data) {
            /* blocks below the hint may now slide: resume compaction before it */
            cache_blk *b = cache_blk_of(cache_hot(c, s)->data), *p = cache_prev(c, b);
            cache_blk *lowest = p ? p : b;
            if ((unsigned char *)lowest < (unsigned char *)c->hint) c->hint = lowest;
        }
    }
    hk__unlock(&c->lock);
    return r;
}

uint32_t hk_cache_lock_count(hk_cache *c, hk_cache_handle h) {
    if (!c) return 0;
    hk__lock(&c->lock);
    cache_slot *s = cache_lookup(c, h, "lock_count", NULL);
    uint32_t n = s ? s->lock : 0;
    hk__unlock(&c->lock);
    return n;
}

static hk_result cache_move_high_locked(hk_cache *c, cache_slot *s, const char *op) {
    if (!cache_hot(c, s)->data)
        return hk__report(&c->rep, HK_ERR_STATE, HK_EK_STATE, NULL, 0, s->name,
                          "%s of empty (purged) handle 0x%08x '%s'", op, cache_handle(c, s),
                          cache_nm(s->name));
    if (s->lock)
        return hk__report(&c->rep, HK_ERR_LOCKED, HK_EK_LOCKED, cache_hot(c, s)->data, s->requested, s->name,
                          "%s of locked block '%s' at %p (handle 0x%08x): a locked block does not move", op,
                          cache_nm(s->name), cache_hot(c, s)->data, cache_handle(c, s));
    cache_blk *b = cache_blk_of(cache_hot(c, s)->data), *best = NULL;
    for (cache_blk *x = cache_next(b); x != c->end; x = cache_next(x))
        if (x->magic == CACHE_MAGIC_FREE && x->size16 >= b->size16) best = x;
    if (!best) return HK_OK;
    uint32_t n16 = b->size16;
    cache_blk *nb = cache_carve(c, best, n16, 1);
    nb->magic = CACHE_MAGIC_USED;
    nb->handle = cache_handle(c, s);
    cache_unpoison(b, cache_bytes(b));
    memcpy(cache_user(nb), cache_user(b), cache_bytes(b) - CACHE_HDR);
    cache_hot(c, s)->data = cache_user(nb);
    c->moved_bytes += cache_bytes(b);
    c->used_bytes += cache_bytes(nb) - cache_bytes(b); /* nb may have taken a sliver more */
    cache_release(c, b);
    cache_fill_pad(nb, s->requested);
    return HK_OK;
}

hk_result hk_cache_move_high(hk_cache *c, hk_cache_handle h) {
    if (!c) return HK_ERR_INVALID;
    hk__lock(&c->lock);
    hk_result r = HK_OK;
    cache_slot *s = cache_lookup(c, h, "move_high", &r);
    if (s) r = cache_move_high_locked(c, s, "move_high");
    cache_after_op(c);
    hk__unlock(&c->lock);
    return r;
}

hk_result hk_cache_lock_high(hk_cache *c, hk_cache_handle h) {
    if (!c) return HK_ERR_INVALID;
    hk__lock(&c->lock);
    hk_result r = HK_OK;
    cache_slot *s = cache_lookup(c, h, "lock_high", &r);
    if (s && s->lock == 0 && cache_hot(c, s)->data) r = cache_move_high_locked(c, s, "lock_high");
    if (s && r == HK_OK) r = cache_pin(c, s, "lock_high");
    cache_after_op(c);
    hk__unlock(&c->lock);
    return r;
}

hk_result hk_cache_set_purgeable(hk_cache *c, hk_cache_handle h, bool purgeable) {
    if (!c) return HK_ERR_INVALID;
    hk__lock(&c->lock);
    hk_result r = HK_OK;
    cache_slot *s = cache_lookup(c, h, "set_purgeable", &r);
    if (s) {
        if (purgeable)
            s->flags |= CACHE_SLOT_PURGEABLE;
        else
            s->flags &= (uint16_t)~CACHE_SLOT_PURGEABLE;
    }
    hk__unlock(&c->lock);
    return r;
}

hk_result hk_cache_purge(hk_cache *c, hk_cache_handle h) {
    if (!c) return HK_ERR_INVALID;
    hk__lock(&c->lock);
    hk_result r = HK_OK;
    cache_slot *s = cache_lookup(c, h, "purge", &r);
    if (s && cache_hot(c, s)->data && s->lock)
        r = hk__report(&c->rep, HK_ERR_LOCKED, HK_EK_LOCKED, cache_hot(c, s)->data, s->requested, s->name,
                       "purge of locked block '%s' at %p (handle 0x%08x) refused", cache_nm(s->name),
                       cache_hot(c, s)->data, cache_handle(c, s));
    else if (s && cache_hot(c, s)->data)
        cache_purge_slot(c, s);
    cache_after_op(c);
    hk__unlock(&c->lock);
    return r;
}

size_t hk_cache_purge_all(hk_cache *c) {
    if (!c) return 0;
    hk__lock(&c->lock);
    size_t n = 0;
    for (uint32_t i = 0; i < c->high_water; i++)
        if (cache_purgeable(c, &c->slots[i])) {
            cache_purge_slot(c, &c->slots[i]);
            n++;
        }
    cache_after_op(c);
    hk__unlock(&c->lock);
    return n;
}

/* ---- compaction API ---------------------------------------------------------------- */

hk_result hk_cache_compact(hk_cache *c) {
    if (!c) return HK_ERR_INVALID;
    hk__lock(&c->lock);
    (void)cache_slide_down(c, 1, 0, 0, NULL);
    cache_after_op(c);
    hk__unlock(&c->lock);
    return HK_OK;
}

int hk_cache_compact_step(hk_cache *c, size_t max_bytes, uint64_t max_ns, size_t *moved) {
    if (!c) return 0;
    hk__lock(&c->lock);
    int more = cache_slide_down(c, 0, max_bytes, max_ns, moved);
    cache_after_op(c);
    hk__unlock(&c->lock);
    return more;
}

static size_t cache_req_for(size_t block_bytes) {
    return block_bytes >= CACHE_HDR + CACHE_MIN_CANARY ? block_bytes - CACHE_HDR - CACHE_MIN_CANARY : 0;
}

hk_result hk_cache_max_block(hk_cache *c, hk_cache_space *out) {
    if (!c || !out) return HK_ERR_INVALID;
    hk__lock(&c->lock);
    memset(out, 0, sizeof *out);
    size_t best_now = 0, best_comp = 0, best_purge = 0, run_free = 0, run_purge = 0;
    if (c->lo) {
        for (cache_blk *b = (cache_blk *)c->lo;; b = cache_next(b)) {
            int boundary = b == c->end;
            if (!boundary && b->magic == CACHE_MAGIC_FREE) {
                if (cache_bytes(b) > best_now) best_now = cache_bytes(b);
                run_free += cache_bytes(b);
                run_purge += cache_bytes(b);
                continue;
            }
            if (!boundary) {
                cache_slot *s = cache_slot_of_blk(c, b);
                if (!s->lock) {
                    if (cache_purgeable(c, s)) run_purge += cache_bytes(b);
                    continue;
                }
            }
            if (run_free > best_comp) best_comp = run_free;
            if (run_purge > best_purge) best_purge = run_purge;
            run_free = run_purge = 0;
            if (boundary) break;
        }
    }
    out->now = cache_req_for(best_now);
    out->compacted = cache_req_for(best_comp);
    out->purged = cache_req_for(best_purge);
    hk__unlock(&c->lock);
    return HK_OK;
}

/* ---- introspection ------------------------------------------------------------------ */

hk_result hk_cache_stats(const hk_cache *c, hk_stats *out) {
    if (!c || !out) return HK_ERR_INVALID;
    hk_cache *m = (hk_cache *)(uintptr_t)c;
    hk__lock(&m->lock);
    memset(out, 0, sizeof *out);
    out->size = (uint32_t)sizeof *out;
    out->version = HK_STATS_VERSION;
    out->allocator = "cache";
    out->capacity = cache_claim_size(c);
    out->used = c->requested_bytes;
    out->used_blocks_bytes = c->used_bytes;
    out->free = c->free_bytes;
    if (c->bin_map) {
        unsigned top = cache_log2(c->bin_map);
        size_t mx = 0;
        for (cache_blk *b = c->bins[top]; b; b = cache_links_of(b)->next)
            if (cache_bytes(b) > mx) mx = cache_bytes(b);
        out->largest_free = cache_req_for(mx);
    }
    out->peak_used = c->peak_requested;
    out->overhead = (c->used_bytes - c->requested_bytes) + c->table_bytes + sizeof(hk_cache) +
                    (c->lo ? CACHE_HDR * (c->free_blocks + 1) : 0);
    out->live_blocks = c->resident;
    out->free_blocks = c->free_blocks;
    out->alloc_count = c->alloc_count;
    out->free_count = c->free_count;
    out->fail_count = c->fail_count;
    out->error_count = c->rep.error_count;
    hk__unlock(&m->lock);
    return HK_OK;
}

static void cache_info_blk(hk_cache *c, cache_blk *b, hk_block_info *info) {
    memset(info, 0, sizeof *info);
    info->address = cache_user(b);
    info->size = cache_bytes(b) - CACHE_HDR;
    if (b->magic != CACHE_MAGIC_USED) {
        info->overhead = CACHE_HDR;
        return;
    }
    cache_slot *s = cache_slot_of_blk(c, b);
    info->requested = s->requested;
    info->overhead = cache_bytes(b) - s->requested;
    info->flags = HK_BLOCK_USED | (s->lock ? HK_BLOCK_LOCKED : 0u) |
                  ((s->flags & CACHE_SLOT_PURGEABLE) ? HK_BLOCK_PURGEABLE : 0u);
    info->id = cache_handle(c, s);
    info->lock_count = s->lock;
    info->rank = c->rank[s - c->slots];
    info->name = s->name;
}

static void cache_info_empty(const hk_cache *c, const cache_slot *s, hk_block_info *info) {
    memset(info, 0, sizeof *info);
    info->flags = HK_BLOCK_PURGED | (s->lock ? HK_BLOCK_LOCKED : 0u) |
                  ((s->flags & CACHE_SLOT_PURGEABLE) ? HK_BLOCK_PURGEABLE : 0u);
    info->id = cache_handle(c, s);
    info->lock_count = s->lock;
    info->name = s->name;
}

int hk_cache_walk(hk_cache *c, hk_walk_fn fn, void *user) {
    if (!c || !fn) return -1;
    hk__lock(&c->lock);
    int r = 0;
    if (cache_check_locked(c) != HK_OK) {
        r = -1;
        goto out;
    }
    cache_compute_ranks(c);
    hk_block_info info;
    if (c->lo)
        for (cache_blk *b = (cache_blk *)c->lo; b != c->end && !r; b = cache_next(b)) {
            cache_info_blk(c, b, &info);
            r = fn(&info, user);
        }
    for (uint32_t i = 0; i < c->high_water && !r; i++) {
        cache_slot *s = &c->slots[i];
        if (!cache_handle(c, s) || cache_hot(c, s)->data) continue;
        cache_info_empty(c, s, &info);
        r = fn(&info, user);
    }
out:
    hk__unlock(&c->lock);
    return r;
}

hk_result hk_cache_where(hk_cache *c, const void *addr, hk_block_info *info) {
    if (!c || !info) return HK_ERR_INVALID;
    hk__lock(&c->lock);
    hk_result r = HK_ERR_FOREIGN;
    const unsigned char *a = (const unsigned char *)addr;
    if (c->lo && a >= c->lo && a < (unsigned char *)c->end) {
        for (cache_blk *b = (cache_blk *)c->lo; b != c->end; b = cache_next(b))
            if (a < (unsigned char *)cache_next(b)) {
                cache_compute_ranks(c);
                cache_info_blk(c, b, info);
                r = HK_OK;
                break;
            }
    }
    hk__unlock(&c->lock);
    return r;
}

/* ---- check ------------------------------------------------------------------------------ */

static hk_result cache_corrupt(hk_cache *c, const void *at, const char *what, hk_error_kind kind) {
    return hk__report(&c->rep, HK_ERR_CORRUPT, kind, at, 0, NULL, "%s (at %p)", what, at);
}

static hk_result cache_check_region(hk_cache *c) {
    unsigned char *lo = c->lo, *end = (unsigned char *)c->end;
    if (((uintptr_t)lo & 15) || ((uintptr_t)end & 15) || end < lo)
        return cache_corrupt(c, lo, "control block damaged: region bounds", HK_EK_CORRUPT_STRUCTURE);
    size_t nfree = 0, free_bytes = 0, used_bytes = 0, req = 0, nused = 0;
    uint32_t prev16 = 0;
    int prev_free = 0, hint_seen = 0;
    cache_blk *b = (cache_blk *)lo, *after_free = NULL;
    while ((unsigned char *)b < end) {
        if ((size_t)(end - (unsigned char *)b) < CACHE_MIN_FREE)
            return cache_corrupt(c, b, "block header runs past the end of the region", HK_EK_CORRUPT_HEADER);
        if (b == c->hint) hint_seen = 1;
        if (b->magic != CACHE_MAGIC_USED && b->magic != CACHE_MAGIC_FREE)
            return cache_corrupt(c, b,
                                 "block header magic damaged (underrun, or overrun of the block before)",
                                 HK_EK_CORRUPT_HEADER);
        if (b->size16 < 2 || cache_bytes(b) > (size_t)(end - (unsigned char *)b))
            return cache_corrupt(c, b, "block size damaged", HK_EK_CORRUPT_HEADER);
        if (b->prev16 != prev16)
            return cache_corrupt(c, b, "previous-size link disagrees with the block before",
                                 HK_EK_CORRUPT_HEADER);
        if (b->magic == CACHE_MAGIC_FREE) {
            if (prev_free)
                return cache_corrupt(c, b, "two adjacent free blocks (not coalesced)",
                                     HK_EK_CORRUPT_STRUCTURE);
            nfree++;
            free_bytes += cache_bytes(b);
            prev_free = 1;
            if (!hint_seen && b != c->hint) after_free = b;
        } else {
            uint32_t idx = cache_slot_index(c, b->handle);
            cache_slot *s = idx < c->high_water ? &c->slots[idx] : NULL;
            if (!s || cache_handle(c, s) != b->handle || cache_hot(c, s)->data != cache_user(b))
                return cache_corrupt(c, b, "block's handle back-pointer and the handle table disagree",
                                     HK_EK_CORRUPT_STRUCTURE);
            if (s->requested + CACHE_HDR + CACHE_MIN_CANARY > cache_bytes(b))
                return cache_corrupt(c, b, "requested size larger than the block", HK_EK_CORRUPT_STRUCTURE);
            if (!cache_canary_ok(c, s, 1)) return HK_ERR_CORRUPT;
            /* a free block below the hint must be followed by a locked block */
            if (after_free && !s->lock)
                return cache_corrupt(c, after_free,
                                     "free block below the compaction hint is not before a locked block",
                                     HK_EK_CORRUPT_STRUCTURE);
            after_free = NULL;
            nused++;
            used_bytes += cache_bytes(b);
            req += s->requested;
            prev_free = 0;
        }
        prev16 = b->size16;
        b = cache_next(b);
    }
    if ((unsigned char *)b != end)
        return cache_corrupt(c, b, "blocks do not tile the region", HK_EK_CORRUPT_STRUCTURE);
    if (after_free)
        return cache_corrupt(c, after_free, "free block below the compaction hint is last",
                             HK_EK_CORRUPT_STRUCTURE);
    if (c->end->magic != CACHE_MAGIC_END || c->end->size16 != 1 || c->end->prev16 != prev16)
        return cache_corrupt(c, c->end, "end sentinel damaged", HK_EK_CORRUPT_HEADER);
    if (!hint_seen && c->hint != c->end)
        return cache_corrupt(c, c->hint, "compaction hint is not a block boundary", HK_EK_CORRUPT_STRUCTURE);
    if (nfree != c->free_blocks || free_bytes != c->free_bytes || used_bytes != c->used_bytes ||
        nused != c->resident || req != c->requested_bytes) {
        hk__report(
            &c->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, lo, 0, NULL,
            "counters disagree with the blocks: free %zu/%zu blocks %zu/%zu bytes, used %zu/%zu bytes, "
            "resident %zu/%u, requested %zu/%zu",
            nfree, c->free_blocks, free_bytes, c->free_bytes, used_bytes, c->used_bytes, nused, c->resident,
            req, c->requested_bytes);
        return HK_ERR_CORRUPT;
    }
    /* the free index: every listed block is a free block of that class */
    size_t listed = 0;
    for (unsigned i = 0; i < CACHE_NBINS; i++) {
        if (((c->bin_map >> i) & 1u) != (c->bins[i] != NULL))
            return cache_corrupt(c, c->bins[i], "size-class bitmap disagrees with the lists",
                                 HK_EK_CORRUPT_STRUCTURE);
        cache_blk *prevb = NULL;
        for (cache_blk *f = c->bins[i]; f; f = cache_links_of(f)->next) {
            if ((unsigned char *)f < lo || (unsigned char *)f >= end || ((uintptr_t)f & 15) ||
                f->magic != CACHE_MAGIC_FREE || cache_log2(f->size16) != i ||
                cache_links_of(f)->prev != prevb || ++listed > nfree)
                return cache_corrupt(c, f, "free list damaged", HK_EK_CORRUPT_FREE);
            prevb = f;
        }
    }
    if (listed != nfree)
        return cache_corrupt(c, lo, "a free block is missing from the free lists", HK_EK_CORRUPT_FREE);
    return HK_OK;
}

static hk_result cache_check_locked(hk_cache *c) {
    if (c->lo) {
        hk_result r = cache_check_region(c);
        if (r != HK_OK) return r;
    } else if (c->resident || c->free_blocks || c->used_bytes) {
        return cache_corrupt(c, c, "cache without a region has blocks", HK_EK_CORRUPT_STRUCTURE);
    }
    uint32_t live = 0, resident = 0, queued = 0, retired = 0;
    for (uint32_t i = 0; i < c->high_water; i++) {
        cache_slot *s = &c->slots[i];
        if (cache_handle(c, s)) {
            if (cache_slot_index(c, cache_handle(c, s)) != i ||
                (cache_handle(c, s) >> c->idx_bits) != s->gen || s->gen < c->gen_base)
                return cache_corrupt(c, s, "handle table entry damaged (index or generation)",
                                     HK_EK_CORRUPT_STRUCTURE);
            if (cache_stamp_at(c, i) > cache_tick(c))
                return cache_corrupt(c, cache_hot(c, s), "handle's LRU stamp is ahead of the clock",
                                     HK_EK_CORRUPT_STRUCTURE);
            live++;
            if (cache_hot(c, s)->data) {
                if (!c->lo || (unsigned char *)cache_hot(c, s)->data < c->lo + CACHE_HDR ||
                    (unsigned char *)cache_hot(c, s)->data >= (unsigned char *)c->end ||
                    cache_blk_of(cache_hot(c, s)->data)->handle != cache_handle(c, s))
                    return cache_corrupt(c, cache_hot(c, s)->data, "handle points outside its block",
                                         HK_EK_CORRUPT_STRUCTURE);
                resident++;
            }
        } else {
            if (cache_hot(c, s)->key || cache_hot(c, s)->data || s->lock)
                return cache_corrupt(c, s, "unused handle slot holds a block", HK_EK_CORRUPT_STRUCTURE);
            if (s->flags & CACHE_SLOT_RETIRED) retired++;
        }
    }
    /* entries no handle has used (up to the index mask) must never match */
    for (uint32_t i = c->high_water; i <= c->v.idx_mask; i++)
        if (cache_hot_at(c, i)->key || cache_hot_at(c, i)->data)
            return cache_corrupt(c, cache_hot_at(c, i), "unused handle table entry damaged",
                                 HK_EK_CORRUPT_STRUCTURE);
    if ((uint32_t)c->v.tick_key != (c->slow ? 0xFFFFFFFFu : 0u) || (cache_tick(c) & 1u) || !cache_tick(c))
        return cache_corrupt(c, c, "control block damaged: LRU clock", HK_EK_CORRUPT_STRUCTURE);
    for (uint32_t q = c->fq_head; q; q = c->slots[q - 1u].link) {
        if (q > c->high_water || cache_hot_at(c, q - 1u)->key || ++queued > c->high_water)
            return cache_corrupt(c, c->slots, "free handle queue damaged", HK_EK_CORRUPT_STRUCTURE);
    }
    if (live != c->live || resident != c->resident || retired != c->retired ||
        live + queued + retired != c->high_water)
        return cache_corrupt(c, c->slots, "handle counts disagree with the table", HK_EK_CORRUPT_STRUCTURE);
    return HK_OK;
}

hk_result hk_cache_check(hk_cache *c) {
    if (!c) return HK_ERR_INVALID;
    hk__lock(&c->lock);
    hk_result r = cache_check_locked(c);
    hk__unlock(&c->lock);
    return r;
}

/* ---- MacsBug-style heap display -------------------------------------------------------- */

void hk_cache_dump(hk_cache *c, void *out) {
    if (!c) return;
    FILE *f = out ? (FILE *)out : stdout;
    hk__lock(&c->lock);
    cache_compute_ranks(c);
    size_t nrel = 0, nlocked = 0, npurge = 0, nfree = 0, freeb = 0, largest = 0, nempty = 0;
    fprintf(f, "Displaying cache '%s'  region %p..%p (%zu bytes)  handles %u/%u\n", c->rep.instance,
            (void *)c->lo, c->lo ? (void *)((unsigned char *)c->end + CACHE_HDR) : NULL, cache_claim_size(c),
            c->live, c->nslots);
    fprintf(f, "   Start            Length          Tag Mstr Ptr  Lock Prg  LRU  Name\n");
    if (c->lo)
        for (cache_blk *b = (cache_blk *)c->lo; b != c->end; b = cache_next(b)) {
            if (b->magic == CACHE_MAGIC_FREE) {
                fprintf(f, "   %p %08zx         F\n", (void *)b, cache_bytes(b));
                nfree++;
                freeb += cache_bytes(b);
                if (cache_bytes(b) > largest) largest = cache_bytes(b);
                continue;
            }
            cache_slot *s = cache_slot_of_blk(c, b);
            nrel++;
            if (s->lock) nlocked++;
            if (s->flags & CACHE_SLOT_PURGEABLE) npurge++;
            fprintf(f, "   %p %08zx+%04zx   R   %08x   %s    %s  %5u  %s\n", (void *)b, s->requested,
                    cache_bytes(b) - s->requested, cache_handle(c, s), s->lock ? "L" : " ",
                    (s->flags & CACHE_SLOT_PURGEABLE) ? "P" : " ", c->rank[s - c->slots], cache_nm(s->name));
        }
    for (uint32_t i = 0; i < c->high_water; i++) {
        cache_slot *s = &c->slots[i];
        if (!cache_handle(c, s) || cache_hot(c, s)->data) continue;
        if (!nempty) fprintf(f, "Empty (purged) handles:\n");
        nempty++;
        fprintf(f, "   %-16s %-15s R   %08x   %s    %s         %s\n", "(nil)", "", cache_handle(c, s),
                s->lock ? "L" : " ", (s->flags & CACHE_SLOT_PURGEABLE) ? "P" : " ", cache_nm(s->name));
    }
    fprintf(f,
            "Total blocks: %zu  relocatable %zu (locked %zu, purgeable %zu), free %zu; empty handles %zu\n"
            "Bytes: used %zu (requested %zu), free %zu, largest free %zu; moved by compaction %llu\n",
            nrel + nfree, nrel, nlocked, npurge, nfree, nempty, c->used_bytes, c->requested_bytes, freeb,
            largest, (unsigned long long)c->moved_bytes);
    hk__unlock(&c->lock);
}

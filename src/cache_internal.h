/*
 * src/cache_internal.h - what the cache's files share (heapkit/cache.h):
 * the instance, the block header and the handle slot, and the small inline
 * helpers every layer uses. Not part of the API.
 *
 * The cache is layered; a file calls only files above it in this list
 * (lower layers never call back up):
 *
 *   cache_handles.c  the handle table and the LRU clock
 *   cache_region.c   the data region: blocks, free index, carve / release,
 *                    purging one block, sanitizer open/close
 *   cache_compact.c  sliding blocks (compaction, scramble, move_high),
 *                    max_block
 *   cache_hunk.c     living in a hunk's free middle (the tenant hooks)
 *   cache_alloc.c    making room (fit, hunk, compact, purge LRU, grow) and
 *                    the calls that place blocks: alloc, resize, reallocate
 *   cache.c          create / destroy and the per-handle calls (free, deref,
 *                    lock, purge, ...)
 *   cache_check.c    check, walk, where, stats, info, dump (called by
 *                    cache.c only through the core's paranoid hook)
 *
 * Two structures, kept apart so that blocks can move:
 *
 *  - The handle table: the shared generational table (src/handles.h, in
 *    `ht`, with its own dense word array), the 8-byte hot entries that
 *    hk_cache_deref_fast reads (HK__CACHE_HOT_OFFSET bytes after the
 *    instance; 2^idx_bits of them, so handle & idx_mask always lands in the
 *    array; heapkit/detail/cache.h: a tag, handle ^ epoch, and the block's
 *    offset from the base), plus cold slots[nslots] (cache_slot:
 *    requested size, name, block address, lock count, flags, LRU stamp),
 *    and the purge list's links (lru[]). See cache_handles.c.
 *
 *  - The data region [lo, end + 16): 16-byte aligned blocks tiling [lo, end)
 *    in address order, then a 16-byte end sentinel at `end`. Every block
 *    starts with a cache_blk header {magic, handle, size16, prev16}: used
 *    blocks carry the handle (the back-pointer to their slot); free blocks
 *    carry two links right after the header (so a free block is at least 32
 *    bytes) and sit in one of CACHE_NBINS free lists, two-level segregated
 *    like TLSF's: a power of two of size16 split into CACHE_SL equal bins
 *    (sizes below 2 * CACHE_SL units have a bin each), with a bitmap of the
 *    non-empty bins of every power and one of the powers that have any
 *    (cache_bin_of, below). See cache_region.c.
 */
#ifndef HEAPKIT_CACHE_INTERNAL_H
#define HEAPKIT_CACHE_INTERNAL_H

#include "common.h"
#include "handles.h"
#include "heapkit/cache.h"

#include <string.h>

#define CACHE_HDR          16u
#define CACHE_MIN_CANARY   8u
#define CACHE_MIN_FREE     32u
#define CACHE_SL_BITS      4
#define CACHE_SL           (1u << CACHE_SL_BITS)    /* bins per power of two */
#define CACHE_NFL          (32 - CACHE_SL_BITS + 1) /* first-level classes: size16 up to 2^32 - 1 */
#define CACHE_NBINS        (CACHE_NFL * CACHE_SL)
#define CACHE_SCAN_LIMIT   16 /* blocks of the request's bin the fit looks at when nothing larger is free */
#define CACHE_MAGIC_USED   0xCAC4EB10u
#define CACHE_MAGIC_FREE   0xCAC4EF4Eu
#define CACHE_MAGIC_END    0xCAC4E4D0u
#define CACHE_LOCK_MAX     65535u
#define CACHE_GROW_ROUNDS  64
#define CACHE_DEFAULT_SIZE ((size_t)16 << 20)
#define CACHE_AGE_CAP      0x40000000u /* stamps older than this (in clock values) are raised to it */

/* PURGEABLE: set_purgeable; BUSY: being given a block (never purged then);
 * LISTED: on the purge list (resident, unlocked and purgeable). */
enum { CACHE_SLOT_PURGEABLE = 1, CACHE_SLOT_BUSY = 4, CACHE_SLOT_LISTED = 8 };

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

/* A handle's slot (its hot entry, read by deref_fast, is apart: a tag and
 * the block's offset, kept in step with `data` by cache_set_data). */
typedef struct cache_slot {
    size_t requested; /* bytes asked for */
    const char *name;
    void *data;    /* the block's user address, NULL when empty or not live */
    uint16_t lock; /* lock count */
    uint16_t flags;
    uint32_t stamp; /* LRU stamp (serial: compared by its age, tick - stamp); 0 unless live */
} cache_slot;

_Static_assert(sizeof(cache_slot) <= 32, "slot is at most 32 bytes");

struct hk_cache {
    hk__cache_view
        v; /* first: read by hk_cache_deref_fast (its hot entries follow at HK__CACHE_HOT_OFFSET) */
    cache_slot *slots;
    uint32_t nslots;        /* == ht.cap */
    uint32_t idx_bits;      /* == ht.index_bits */
    uint32_t high_water;    /* slots ever issued a handle: 0 .. high_water - 1 */
    uint32_t resident;      /* live handles with a block */
    uint32_t *order, *rank; /* scratch, nslots each */
    uint32_t *lru;          /* the purge list: next and prev of slot i at 2i, 2i + 1; nslots is its head */
    uint32_t listed;        /* slots on the purge list */
    uint32_t sweep;         /* the next hot entry the epoch sweep looks at (< high_water, or 0) */
    uint32_t sweep_n;       /* entries swept per clock value */
    hk__htab ht;            /* generations, free ring, retirement, misuse verdicts */
    unsigned char *lo;      /* data region start, NULL when the cache holds none (hunk took it) */
    cache_blk *end;         /* end sentinel */
    cache_blk *hint;        /* incremental compaction resumes here */
    cache_blk **bins;       /* nbins free lists (in the table's memory, after the purge list) */
    uint32_t nbins;         /* a multiple of CACHE_SL, enough for the largest block the region can hold */
    uint32_t fl_map;        /* bit f: some bin of first level f is non-empty */
    uint16_t sl_map[CACHE_NFL]; /* bit s of [f]: bin f * CACHE_SL + s is non-empty */
    int scramble_dir, in_grow;
    uint32_t slow; /* lock hooks, paranoid, or a region the base cannot reach: deref_fast always misses */
    size_t free_bytes, free_blocks, used_bytes, requested_bytes, peak_requested, table_bytes;
    uint64_t alloc_count, free_count, fail_count, purge_count, moved_bytes;
    hk_cache_purge_fn on_purge;
    void *purge_user;
    hk_cache_grow_fn grow;
    void *grow_user;
    hk_hunk *hunk;
    void *os_base;
    size_t os_size;
    hk__core core; /* names, reporter, lock hooks, flags, paranoid check */
};

_Static_assert(sizeof(struct hk_cache) <= HK__CACHE_HOT_OFFSET, "the hot entries follow the instance");

/* ---- sanitizer helpers ------------------------------------------------------- */

static inline void cache_poison(const void *p, size_t n) {
#ifdef HK__ASAN
    if (n) ASAN_POISON_MEMORY_REGION(p, n);
#endif
    (void)p;
    (void)n;
}
static inline void cache_unpoison(const void *p, size_t n) {
#ifdef HK__ASAN
    if (n) ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
    (void)p;
    (void)n;
}

/* ---- blocks --------------------------------------------------------------------- */

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
static inline unsigned cache_log2(uint32_t x) { return 31u - (unsigned)__builtin_clz(x); }
static inline const char *cache_nm(const char *n) { return n ? n : "(unnamed)"; }

/* Bytes of the data region, end sentinel included (0 without a region). */
static inline size_t cache_claim_size(const hk_cache *c) {
    return c->lo ? (size_t)((unsigned char *)c->end + CACHE_HDR - c->lo) : 0;
}

/* The largest request a block of block_bytes can hold. */
static inline size_t cache_req_for(size_t block_bytes) {
    return block_bytes >= CACHE_HDR + CACHE_MIN_CANARY ? block_bytes - CACHE_HDR - CACHE_MIN_CANARY : 0;
}

/* Block size in 16-byte units for a request, 0 on overflow. */
static inline uint32_t cache_need16(size_t size) {
    size_t t;
    if (!hk_size_add(size, CACHE_HDR + CACHE_MIN_CANARY, &t) || !hk_size_align(t, 16, &t)) return 0;
    t /= 16u;
    return t > UINT32_MAX ? 0 : (uint32_t)t;
}

/* ---- handle slots ------------------------------------------------------------------ */

#define CACHE_OFF_BITS 0xFFFFFFFFu /* the low half of a hot entry: the block's offset */

static inline uint32_t cache_slot_index(const hk_cache *c, uint32_t handle) { return handle & c->v.idx_mask; }
/* Hot entry idx (heapkit/detail/cache.h). */
static inline uint64_t *cache_hot_at(hk_cache *c, uint32_t idx) {
    return (uint64_t *)(void *)((unsigned char *)c + HK__CACHE_HOT_OFFSET) + idx;
}
static inline uint64_t cache_hot_get(const hk_cache *c, uint32_t idx) { return hk__cache_hot_of(c)[idx]; }
/* The slot's table word: its handle while live. */
static inline uint32_t cache_handle(const hk_cache *c, const cache_slot *s) {
    return *hk__ht_word(&c->ht, (uint32_t)(s - c->slots));
}
/* Does slot s (index < nslots) hold a live handle? */
static inline int cache_is_live(const hk_cache *c, const cache_slot *s) {
    return hk__ht_word_live(&c->ht, cache_handle(c, s));
}
static inline void *cache_data(const hk_cache *c, const cache_slot *s) {
    (void)c;
    return s->data;
}
/* The hot entry's offset half for a block at p. */
static inline uint64_t cache_hot_offset(const hk_cache *c, const void *p) {
    return ((uint64_t)(uintptr_t)p - c->v.base) >> 3;
}
/* Entry idx when it must not hit: tag idx (its index bits are those of
 * every handle landing there, and a probe always changes them), offset 0. */
static inline uint64_t cache_hot_cold(uint32_t idx) { return (uint64_t)idx << 32; }
/* Sets slot s's block address (NULL: none) and keeps its hot entry in step:
 * the offset follows the block; the tag stays while the block is resident
 * (a move keeps it hittable) and is cleared with it. A slow cache never
 * writes its entries after creation (all cold): deref_fast, which reads
 * them without the lock, then races with nothing. */
/* Tells the tools (src/track.h) that slot s's block moves to p or ends (p
 * NULL); cache_set_data calls it before the change, with a tool on. */
void hk__cache_track_set(hk_cache *c, const cache_slot *s, const void *p);

static inline void cache_set_data(hk_cache *c, cache_slot *s, void *p) {
    if (HK__TRACKED(&c->core)) hk__cache_track_set(c, s, p);
    uint32_t idx = (uint32_t)(s - c->slots);
    uint64_t *e = cache_hot_at(c, idx);
    s->data = p;
    if (c->slow) return;
    *e = p ? (*e & ~(uint64_t)CACHE_OFF_BITS) | cache_hot_offset(c, p) : cache_hot_cold(idx);
}
static inline cache_slot *cache_slot_of_blk(hk_cache *c, const cache_blk *b) {
    return &c->slots[cache_slot_index(c, b->handle)];
}

/* Resident (so live), unlocked, purgeable and not being placed right now. */
static inline int cache_purgeable(const hk_cache *c, const cache_slot *s) {
    return cache_data(c, s) && !s->lock && (s->flags & CACHE_SLOT_PURGEABLE) && !(s->flags & CACHE_SLOT_BUSY);
}

/* ---- the LRU clock (cache_handles.c explains it) ----------------------------------- */

static inline uint32_t cache_stamp_at(const hk_cache *c, uint32_t idx) { return c->slots[idx].stamp; }
static inline uint32_t cache_tick(const hk_cache *c) { return c->v.tick; }
/* How long ago a stamp was made, in clock values; every age from
 * CACHE_AGE_CAP - 2 up counts as that (the sweep raises such stamps, so a
 * live stamp's raw age stays far below 2^31 and the 32-bit clock may wrap). */
static inline uint32_t cache_age(const hk_cache *c, uint32_t stamp) {
    uint32_t a = c->v.tick - stamp;
    return a < CACHE_AGE_CAP - 2u ? a : CACHE_AGE_CAP - 2u;
}
/* The epoch deref_fast compares (heapkit/detail/cache.h). */
static inline uint32_t cache_fast_epoch(const hk_cache *c) {
    return c->slow ? c->v.epoch_max + 1u : c->v.epoch;
}
/* The sweep behind the clock: every clock value looks at sweep_n slots
 * (one in a slow cache), cyclically over the issued slots: it raises a
 * stamp older than CACHE_AGE_CAP (to an age of CACHE_AGE_CAP - 1, odd and
 * so never 0) and makes cold a hot entry's tag of any epoch but the
 * current one. sweep_n is chosen so that the sweep passes every entry
 * within epoch_max - 1 clock values, so a tag is gone before its epoch
 * comes round again (cache_handles.c). */
static inline void cache_sweep_stamp(hk_cache *c, uint32_t i) {
    uint32_t *st = &c->slots[i].stamp, t = c->v.tick;
    if (*st && t - *st > CACHE_AGE_CAP) *st = (t - CACHE_AGE_CAP) | 1u;
}
static inline void cache_sweep(hk_cache *c) {
    uint32_t hw = c->high_water, i = c->sweep, m = c->v.idx_mask, ep = c->v.epoch;
    if (!hw) return;
    if (c->slow) { /* no hot entries to sweep: one stamp */
        cache_sweep_stamp(c, i);
        c->sweep = i + 1u < hw ? i + 1u : 0u;
        return;
    }
    for (uint32_t n = c->sweep_n; n; n--) {
        uint64_t *e = cache_hot_at(c, i);
        uint32_t te = ((uint32_t)(*e >> 32) ^ i) & m; /* the tag's epoch; 0 when cold */
        if (te && te != ep) *e = (*e & CACHE_OFF_BITS) | cache_hot_cold(i);
        cache_sweep_stamp(c, i);
        if (++i >= hw) i = 0;
    }
    c->sweep = i;
}
/* A new clock value: the next epoch (every tag of the previous one stops
 * hitting, so deref_fast's next access restamps; after epoch_max they start
 * again at 1) and a step of the sweep. A slow cache's probe and entries
 * never change. */
static inline void cache_set_tick(hk_cache *c, uint32_t t) {
    c->v.tick = t;
    if (HK__UNLIKELY(++c->v.epoch > c->v.epoch_max)) c->v.epoch = 1;
    if (!c->slow) c->v.probe = ((uint64_t)c->v.epoch << 32) | c->v.idx_mask;
    cache_sweep(c);
}
static inline void cache_set_stamp(hk_cache *c, uint32_t idx, uint32_t stamp) { c->slots[idx].stamp = stamp; }

/* ---- the purge list (cache_handles.c explains it) ----------------------------------- */

static inline uint32_t cache_lru_head(const hk_cache *c) { return c->lru[2u * c->nslots]; }
static inline uint32_t cache_lru_next(const hk_cache *c, uint32_t i) { return c->lru[2u * i]; }
static inline void cache_lru_unlink(hk_cache *c, uint32_t i) {
    uint32_t n = c->lru[2u * i], p = c->lru[2u * i + 1u];
    c->lru[2u * p] = n;
    c->lru[2u * n + 1u] = p;
}
/* Links slot i last (most recent). */
static inline void cache_lru_append(hk_cache *c, uint32_t i) {
    uint32_t h = c->nslots, p = c->lru[2u * h + 1u];
    c->lru[2u * i] = h;
    c->lru[2u * i + 1u] = p;
    c->lru[2u * p] = i;
    c->lru[2u * h + 1u] = i;
}
/* Puts slot s on the purge list or takes it off, as its state says
 * (resident, unlocked, purgeable). A slot that joins goes last: `stamp`
 * says to mark it most recently used (cache_stamp, below) so the list stays
 * in stamp order; without it the caller has just stamped it. O(1). */
void hk__cache_lru_join(hk_cache *c, cache_slot *s, int stamp);
static inline void cache_lru_sync(hk_cache *c, cache_slot *s, int stamp) {
    int want = s->data && !s->lock && (s->flags & CACHE_SLOT_PURGEABLE);
    if (want == !!(s->flags & CACHE_SLOT_LISTED)) return;
    if (want) {
        hk__cache_lru_join(c, s, stamp);
    } else {
        cache_lru_unlink(c, (uint32_t)(s - c->slots));
        s->flags &= (uint16_t)~CACHE_SLOT_LISTED;
        c->listed--;
    }
}
/* A listed slot just stamped with the newest stamp goes last. */
static inline void cache_lru_touch(hk_cache *c, cache_slot *s) {
    if (!(s->flags & CACHE_SLOT_LISTED)) return;
    uint32_t i = (uint32_t)(s - c->slots);
    cache_lru_unlink(c, i);
    cache_lru_append(c, i);
}
/* The least recently used purge candidate (not the slot being placed), or NULL. O(1). */
static inline cache_slot *cache_lru_oldest(hk_cache *c) {
    uint32_t i = cache_lru_head(c);
    if (i != c->nslots && (c->slots[i].flags & CACHE_SLOT_BUSY)) i = cache_lru_next(c, i); /* at most one */
    return i != c->nslots ? &c->slots[i] : NULL;
}

/* Marks slot s most recently used. */
static inline void cache_stamp(hk_cache *c, cache_slot *s) {
    uint32_t t = cache_tick(c), n = t + 2u;
    cache_set_stamp(c, (uint32_t)(s - c->slots), t + 1u);
    cache_set_tick(c, n ? n : 2u); /* the clock wraps, skipping 0 */
    cache_lru_touch(c, s);
}

/* ---- the free-block index ------------------------------------------------------------ */

/* The bin of s16 units: the first level is the power of two (sizes below
 * 2 * CACHE_SL share levels 0 and 1, one size per bin), the second the
 * CACHE_SL_BITS bits below the top one. Every block in bin i has at least
 * cache_bin_min(i) units and fewer than cache_bin_min(i + 1). *up gets the
 * first bin whose every block holds s16 units (s16 rounded up to a bin
 * boundary: the same bin when s16 is its lower bound, else the next one;
 * CACHE_NBINS when there is none). */
static inline unsigned cache_bin_split(uint32_t s16, unsigned *up) {
    if (s16 < 2u * CACHE_SL) return *up = s16;
    unsigned l = cache_log2(s16), sh = l - CACHE_SL_BITS;
    unsigned i = ((l - CACHE_SL_BITS + 1u) << CACHE_SL_BITS) | ((s16 >> sh) & (CACHE_SL - 1u));
    *up = i + ((s16 & ((1u << sh) - 1u)) != 0u);
    return i;
}
static inline unsigned cache_bin_of(uint32_t s16) {
    unsigned up;
    return cache_bin_split(s16, &up);
}
static inline unsigned cache_bin_ceil(uint32_t need16) {
    unsigned up;
    (void)cache_bin_split(need16, &up);
    return up;
}
static inline uint32_t cache_bin_min(unsigned i) {
    unsigned f = i >> CACHE_SL_BITS, sl = i & (CACHE_SL - 1u);
    return f < 2u ? (uint32_t)i : (CACHE_SL + sl) << (f - 1u);
}
/* The head of the first non-empty bin at or above bin j, or NULL: two
 * bitmap searches. O(1). */
static inline cache_blk *cache_bin_search(const hk_cache *c, unsigned j) {
    unsigned f = j >> CACHE_SL_BITS;
    uint32_t m = (uint32_t)c->sl_map[f] & (~0u << (j & (CACHE_SL - 1u)));
    if (!m) {
        uint32_t fm = f + 1u < 32u ? c->fl_map & (~0u << (f + 1u)) : 0u;
        if (!fm) return NULL;
        f = (unsigned)__builtin_ctz(fm);
        m = c->sl_map[f];
    }
    return c->bins[(f << CACHE_SL_BITS) | (unsigned)__builtin_ctz(m)];
}

static inline void cache_bin_insert(hk_cache *c, cache_blk *b) {
    unsigned i = cache_bin_of(b->size16);
    cache_unpoison(b, CACHE_MIN_FREE);
    b->magic = CACHE_MAGIC_FREE;
    b->handle = i; /* a free block's handle field: its bin, so removing it needs no bin_of */
    cache_links *l = cache_links_of(b);
    cache_blk *h = c->bins[i];
    l->prev = NULL;
    l->next = h;
    if (h) cache_links_of(h)->prev = b;
    c->bins[i] = b;
    c->sl_map[i >> CACHE_SL_BITS] |= (uint16_t)(1u << (i & (CACHE_SL - 1u)));
    c->fl_map |= 1u << (i >> CACHE_SL_BITS);
    c->free_bytes += cache_bytes(b);
    c->free_blocks++;
}

static inline void cache_bin_remove(hk_cache *c, cache_blk *b) {
    unsigned i = b->handle; /* its bin (cache_bin_insert) */
    cache_links *l = cache_links_of(b);
    if (l->prev)
        cache_links_of(l->prev)->next = l->next;
    else
        c->bins[i] = l->next;
    if (l->next) cache_links_of(l->next)->prev = l->prev;
    if (!c->bins[i]) {
        unsigned f = i >> CACHE_SL_BITS;
        c->sl_map[f] &= (uint16_t) ~(1u << (i & (CACHE_SL - 1u)));
        if (!c->sl_map[f]) c->fl_map &= ~(1u << f);
    }
    c->free_bytes -= cache_bytes(b);
    c->free_blocks--;
}

/* Makes the fresh free block b (header fields size16 and prev16 set) known:
 * indexes it, fills its body when asked, poisons it. */
static inline void cache_add_free(hk_cache *c, cache_blk *b) {
    cache_bin_insert(c, b);
    size_t n = cache_bytes(b) - CACHE_MIN_FREE;
    if (c->core.flags & (HK_FLAG_FILL | HK_CACHE_SCRAMBLE)) {
        cache_unpoison((unsigned char *)b + CACHE_MIN_FREE, n);
        memset((unsigned char *)b + CACHE_MIN_FREE, HK_FILL_FREE, n);
    }
    cache_poison((unsigned char *)b + CACHE_MIN_FREE, n);
}

/* Writes the canary: HK_FILL_PAD from the requested size to the block's end. */
static inline void cache_fill_pad(cache_blk *b, size_t requested) {
    unsigned char *pad = cache_user(b) + requested;
    size_t n = cache_bytes(b) - CACHE_HDR - requested;
    cache_unpoison(pad, n);
    memset(pad, HK_FILL_PAD, n);
    cache_poison(pad, n);
}

/* ---- cache_handles.c: the handle table and the LRU clock ---------------------------- */

/* Table geometry for nslots handles: index bits and bytes (hot entries, cold
 * slots and the two scratch arrays). */
uint32_t hk__cache_table_bits(uint32_t nslots);
size_t hk__cache_table_bytes(uint32_t nslots, uint32_t idx_bits, uint32_t nbins);
/* Free lists for a region that never spans more than `span` bytes: every
 * bin up to that of the largest block it can hold, whole first levels
 * (at most CACHE_NBINS). */
uint32_t hk__cache_nbins_for(size_t span);
/* Lays the (zeroed) table out at `mem` (hk__cache_table_bytes of it, at
 * HK__CACHE_HOT_OFFSET from c) and initialises the shared handle table in
 * it. c->v.base and c->slow must be set. */
hk_result hk__cache_table_init(hk_cache *c, void *mem, uint32_t nslots, uint32_t idx_bits, uint32_t nbins);

/* Reports a handle that is not live (none, foreign, stale, or freed again
 * when `freeing`) for `op`, with the shared table's verdict (src/handles.h),
 * and returns the result the call gives. */
hk_result hk__cache_bad_handle(hk_cache *c, hk_cache_handle h, const char *op, int freeing);

/* The live slot of h, or NULL (no report). */
static inline cache_slot *cache_live(hk_cache *c, hk_cache_handle h) {
    uint32_t i = hk__ht_find(&c->ht, h.value);
    return i != HK__HT_NONE ? &c->slots[i] : NULL;
}

/* The live slot of h, or NULL after a report (its result in *err). */
static inline cache_slot *cache_lookup(hk_cache *c, hk_cache_handle h, const char *op, hk_result *err) {
    cache_slot *s = cache_live(c, h);
    if (HK__LIKELY(s != NULL)) return s;
    hk_result r = hk__cache_bad_handle(c, h, op, 0);
    if (err) *err = r;
    return NULL;
}

/* A fresh live, empty handle (most recently used), or NULL when the table is full. */
cache_slot *hk__cache_slot_new(hk_cache *c);
/* Makes s's handle stale (s holds no block). */
void hk__cache_slot_release(hk_cache *c, cache_slot *s);

/* Fills rank[] for every resident slot (0 = most recently used). */
void hk__cache_compute_ranks(hk_cache *c);

/* ---- cache_region.c: blocks, the free index, purging one block ------------------------- */

void hk__cache_region_init(hk_cache *c, unsigned char *lo, unsigned char *hi);
cache_blk *hk__cache_fit(hk_cache *c, uint32_t need16);
cache_blk *hk__cache_carve(hk_cache *c, cache_blk *f, uint32_t need16, int high);
void hk__cache_release(hk_cache *c, cache_blk *b);
/* Releases slot s's block (counters included); the handle stays live and empty. */
void hk__cache_drop_block(hk_cache *c, cache_slot *s);
/* The purge callback, then hk__cache_drop_block. */
void hk__cache_purge_slot(hk_cache *c, cache_slot *s);
/* Is the canary of s's block intact? Reports (when `report`) if not. */
int hk__cache_canary_ok(hk_cache *c, cache_slot *s, int report);
/* Unpoison the whole region before many blocks move; poison it again from
 * a walk afterwards (ASan only). */
void hk__cache_san_open(hk_cache *c);
void hk__cache_san_close(hk_cache *c);

/* ---- cache_compact.c: sliding blocks ----------------------------------------------------- */

/* Slides unlocked blocks down (from the hint, or the bottom) within the
 * budget; returns 1 when work remains. */
int hk__cache_slide_down(hk_cache *c, int from_bottom, size_t max_bytes, uint64_t max_ns, size_t *moved_out);
/* Slides every unlocked block up: free space gathers at the bottom. */
void hk__cache_slide_up(hk_cache *c);
/* HeapQC's scramble (HK_CACHE_SCRAMBLE). */
void hk__cache_scramble(hk_cache *c);
/* Moves s's unlocked block to the highest free block above it that holds it. */
hk_result hk__cache_move_high(hk_cache *c, cache_slot *s, const char *op);

/* Where new blocks go in a free block: at its bottom, except in scramble
 * mode after a slide up (the packed blocks are above: join them). */
static inline int cache_place_high(const hk_cache *c) {
    return (c->core.flags & HK_CACHE_SCRAMBLE) && c->scramble_dir;
}

/* ---- cache_hunk.c: living in a hunk --------------------------------------------------------- */

/* Takes whatever the hunk's middle offers beyond the region. 1 if it grew. */
int hk__cache_hunk_expand(hk_cache *c);
/* The hunk's reclaim hook (hk_hunk_set_tenant). */
size_t hk__cache_hunk_reclaim(void *user, int high, size_t bytes);

/* ---- cache_check.c ------------------------------------------------------------------------ */

/* The full check without the lock (the core's paranoid hook). */
hk_result hk__cache_check(void *self);

#endif /* HEAPKIT_CACHE_INTERNAL_H */

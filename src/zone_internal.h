/*
 * src/zone_internal.h - the zone's data layout and the inline helpers that
 * read it, shared by every src/zone*.c file; the interfaces between the
 * zone's files. docs/zone.md ("Source map") says which file owns what; the
 * invariants each file maintains open that file.
 *
 * The files form layers; each calls only into the layers below it, never
 * back up (no two files call each other):
 *
 *   zone_check.c    check, walk, where, dump (reads everything, calls no
 *                   other zone file)
 *   zone.c          public entry points: create/destroy, alloc/free dispatch,
 *                   realloc, stats, info (it hands zone_check.c's check to
 *                   the instance core as the paranoid hook; never calls it)
 *   zone_tags.c     tag records and lists, owners, ending a block, purge,
 *                   free_tags, change_tag, tag
 *   zone_lookup.c   user pointer -> block, and the report when it is none
 *   zone_heaps.c    per-thread heaps of small blocks: lookup, adoption,
 *                   thread exit, fork (interface: zone_heaps.h)
 *   zone_small.c    headerless small blocks: runs of one granule each in a
 *                   reserved space, their slots (interface: zone_small.h)
 *   zone_region.c   regions, growth from the OS, prefault
 *   zone_decay.c    free pages back to the OS: decay epochs, sweeps (calls
 *                   zone_region.c's region lookup, zone_tlsf.c's lists and
 *                   the OS layer)
 *   zone_tlsf.c     free blocks: size classes, lists, take, split, merge
 *
 * Block layout (every offset a multiple of 16; B is the block address):
 *
 *   B+0   prev_size  size of the previous block; meaningful only while that
 *                    block is free (a used previous block owns these bytes)
 *   B+8   size16     block size / 16 (header included)
 *   B+12  tag        1..255 for used blocks, 0 for free ones
 *   B+13  bits       USED, PREV_USED, EXT, log2(alignment) - 4 in bits 3..7
 *   B+14  chk        slack (bits 0..5: user area - requested) and a 10-bit
 *                    hash of the address, size, tag, bits (PREV_USED
 *                    excluded) and slack
 *   B+16  user bytes (used)  /  next_free, prev_free links (free)
 *
 * A used block's user area runs from B+16 to B+size+8 (it overlaps the next
 * block's prev_size) for an untracked block, or to B+size-48 for a tracked
 * one (EXT), whose 56-byte record (tag-list links, block address, owner,
 * name, site, sequence) sits at B+size-48 and also overlaps the next
 * prev_size. Small untracked blocks (up to ZS_MAX bytes) are no TLSF blocks:
 * they are headerless slots of runs in the zone's space (zone_small.h).
 *
 * Each region is [base, end) tiled by blocks, followed by a 16-byte epilogue
 * header at `end` (size 0, USED) so every block has a next header.
 */
#ifndef HEAPKIT_ZONE_INTERNAL_H
#define HEAPKIT_ZONE_INTERNAL_H

#include "common.h"
#include "os.h"
#include "heapkit/zone.h"
#include "zone_small.h"

#include <string.h>

#define ZONE_HDR            16u
#define ZONE_OVERLAP        8u
#define ZONE_MIN_BLOCK      32u
#define ZONE_EXT_SIZE       56u
#define ZONE_EXT_OFF        48u /* record starts this far below the block end */
#define ZONE_PLAIN_OVH      (ZONE_HDR - ZONE_OVERLAP)
#define ZONE_EXT_OVH        (ZONE_HDR + ZONE_EXT_OFF)
#define ZONE_SL_LOG2        5u
#define ZONE_SL_COUNT       32u
#define ZONE_FL_SHIFT       9u /* sizes below 1 << 9 are in exact 16-byte classes */
#define ZONE_SMALL          (1u << ZONE_FL_SHIFT)
#define ZONE_FL_COUNT       28u
#define ZONE_MAX_BLOCK      ((size_t)UINT32_MAX << 4)
#define ZONE_MAX_REQUEST    (ZONE_MAX_BLOCK - 256u)
#define ZONE_MAX_ALIGN      ((size_t)1 << 34) /* log2 - 4 = 30 */
#define ZONE_GROW_CHUNK_MAX ((size_t)256 << 20)
#define ZONE_RESERVE        ((size_t)1 << 36) /* address space reserved for a growing zone (64-bit hosts) */
#define ZONE_NTAGS          256u
#define ZONE_TAG_WAYS       8u /* each tag's blocks are dealt round-robin over this many lists */
/* Debug flags that send every block to the TLSF core (no small-block
 * layer), and the layer's own switch. */
#define ZONE_SMALL_OFF                                                                                       \
    (HK_FLAG_FILL | HK_FLAG_CANARY | HK_FLAG_ZERO | HK_FLAG_PARANOID | HK_FLAG_RECORD_SITE |                 \
     HK_ZONE_TRACK_ALL | HK_ZONE_NO_RUNS)
#define ZONE_SMALL_SPAN ((size_t)1 << 36) /* address space reserved for small blocks (64-bit hosts) */

#define ZB_USED        1u
#define ZB_PREV_USED   2u
#define ZB_EXT         4u
#define ZB_ALIGN_SHIFT 3u
/* A free block's alignment field is unused: zone_decay.c keeps two bits of
 * it. CLEAN: every whole page of the block past its first 32 bytes (header
 * and links; zone_free_span) has been given back to the OS and not touched
 * since. EPOCH: the decay epoch in which the block was last dirtied (freed
 * or merged), compared with z->decay_young. */
#define ZB_FREE_CLEAN 8u
#define ZB_FREE_EPOCH 16u
#define ZB_FREE_STATE (ZB_FREE_CLEAN | ZB_FREE_EPOCH)

/* ---- data layout ------------------------------------------------------------ */

typedef struct zone_blk {
    uint64_t prev_size;
    uint32_t size16;
    uint8_t tag;
    uint8_t bits;
    uint16_t chk;
    struct zone_blk *next_free; /* free blocks only */
    struct zone_blk *prev_free;
} zone_blk;

typedef struct zone_ext {
    /* Circular per-tag list of records (not blocks): following it costs one
     * cache miss per block, and the block's header (blk) can be fetched in
     * parallel. A tag's blocks are dealt over ZONE_TAG_WAYS lists by
     * sequence number (seq % ZONE_TAG_WAYS), so free_tags follows that many
     * chains at once; tag_head[tag][w] is the oldest of list w. */
    struct zone_ext *next, *prev;
    zone_blk *blk; /* the block this record belongs to */
    void **owner;
    const char *name;
    const char *file;
    int32_t line;
    uint32_t seq; /* allocation order, for LRU purging */
} zone_ext;

_Static_assert(sizeof(zone_blk) == 32, "zone block header + links is 32 bytes");
_Static_assert(sizeof(zone_ext) == ZONE_EXT_SIZE, "zone record is 56 bytes");

typedef struct zone_region {
    unsigned char *base; /* first block */
    unsigned char *end;  /* epilogue header */
    void *os_base;       /* mapping to release on destroy/shrink, or NULL */
    size_t os_size;
    int dedicated; /* grown for one request larger than the growth chunk */
    unsigned char
        *reserve_end; /* end of the address space reserved after the region (grows in place), or NULL */
} zone_region;

struct hk_zone {
    /* First what the small-block fast paths read (the struct is 64-byte
     * aligned): how to take them, the space's bounds, and the zone's own
     * heap (a plain zone's, or a threads zone's for threads without one). */
    int fast;     /* ZONE_FAST_*: which lock-free path hk_zone_alloc/free take (fixed at create) */
    int small_on; /* small untracked blocks come from the space (fixed at create) */
    uint64_t zid; /* unique per threads zone ever created: thread caches key on it (0: none) */
    zs_space small;
    zs_heap own;
    uint32_t region_hint; /* the region of the last pointer looked up */
    size_t used_req;
    /* The hint region's user pointers are the a with a - hint_lo <= hint_span
     * (hint_lo: its base + ZONE_HDR; hint_span: its end - hint_lo). Both 0
     * with no region. zone_hint_sync keeps them. */
    uintptr_t hint_lo;
    size_t hint_span;
    uint64_t free_count;
    size_t peak_used;
    uint64_t alloc_count;
    hk__core core; /* names, error hook, lock hooks, flags, paranoid check */
    uint32_t fl_map;
    uint32_t sl_map[ZONE_FL_COUNT];
    zone_blk *heads[ZONE_FL_COUNT][ZONE_SL_COUNT];
    uint64_t tag_map[ZONE_NTAGS / 64];
    zone_ext *tag_head[ZONE_NTAGS][ZONE_TAG_WAYS];
    uint32_t tag_count[ZONE_NTAGS];
    uint32_t tag_owned[ZONE_NTAGS];           /* blocks of that tag with an owner pointer */
    zone_region regions[HK_ZONE_MAX_REGIONS]; /* sorted by base */
    uint32_t nregions;
    uintptr_t lo, hi; /* bounds of all regions */
    size_t capacity, free_bytes, free_blocks;
    /* Free pages back to the OS (zone_decay.c); decay_young and decay_new
     * are written by every merge. */
    uint32_t decay_young;  /* 0 or ZB_FREE_EPOCH: the epoch bit of blocks dirtied now */
    size_t decay_new;      /* bytes freed into the core in this epoch (dirty pages, at most) */
    size_t decay_check_at; /* the free path's tick runs when decay_new reaches this */
    size_t decay_old;      /* the same for the previous epoch */
    size_t page;           /* the OS page size */
    size_t clean_bytes;    /* bytes of the clean free blocks' spans (given back) */
    size_t used_bytes;
    size_t untracked_live; /* untracked plain blocks (small blocks are counted by their heaps) */
    uint64_t fail_count, purge_count, grow_count;
    uint32_t seq;
    int purge_level;
    int bulk; /* inside free_tags/purge: no region release */
    size_t grow_size, max_size, os_grown;
    void *ctl_os; /* the control block's own mapping (with the first region) */
    size_t ctl_os_size;
    int decay_on;            /* the zone may give pages back (some OS memory, no HK_FLAG_FILL) */
    int decay_armed;         /* atomic: a sweep is due at an epoch's end */
    uint64_t decay_epoch_ns; /* half the decay time; 0: pages go back only by hk_zone_trim */
    uint64_t decay_next;     /* atomic: when the current epoch ends (hk_os_coarse_ns) */
    uint64_t decommit_count; /* spans given back to the OS */
    /* HK_ZONE_THREADS (zone_heaps.c): per-thread heaps. */
    int threads;
    zs_heap *heaps; /* every thread's heap, live or abandoned (lock held) */
    hk_os_mutex mx; /* the zone's lock when the desc gives no lock hooks */
};

/* hk_zone.fast: the small blocks' lock-free paths of a zone without lock
 * hooks (its own heap), of a threads zone (the calling thread's heap), or
 * neither (every call locks). */
enum { ZONE_FAST_NONE = 0, ZONE_FAST_OWN = 1, ZONE_FAST_THREADS = 2 };

/* The zone's reporter and flags (kept by its instance core). */
#define ZONE_REP(z)   (&(z)->core.rep)
#define ZONE_FLAGS(z) ((z)->core.flags)

/* Used plain blocks: every path that makes or ends one counts it in
 * alloc_count or free_count (small blocks are counted by their heaps). */
static inline size_t zone_live(const hk_zone *z) { return (size_t)(z->alloc_count - z->free_count); }
/* Whether any untracked block may be live: a plain one or a small one. */
static inline int zone_untracked_any(const hk_zone *z) {
    return z->untracked_live || (z->small_on && __atomic_load_n(&z->small.runs, __ATOMIC_RELAXED));
}
/* ---- sanitizer helpers (free payload and slack are off limits) ---------- */

static inline void zone_poison(const void *p, size_t n) {
#ifdef HK__ASAN
    if (n) ASAN_POISON_MEMORY_REGION(p, n);
#endif
    (void)p;
    (void)n;
}
static inline void zone_unpoison(const void *p, size_t n) {
#ifdef HK__ASAN
    if (n) ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
    (void)p;
    (void)n;
}
static inline int zone_is_poisoned(const void *p, size_t n) {
#ifdef HK__ASAN
    return __asan_region_is_poisoned((void *)(uintptr_t)p, n) != NULL;
#else
    (void)p;
    (void)n;
    return 0;
#endif
}

/* ---- headers -------------------------------------------------------------- */

static inline size_t zone_bsize(const zone_blk *b) { return (size_t)b->size16 << 4; }
static inline zone_blk *zone_next(const zone_blk *b) {
    return (zone_blk *)((unsigned char *)b + zone_bsize(b));
}
static inline zone_blk *zone_prev(const zone_blk *b) {
    return (zone_blk *)((unsigned char *)b - (size_t)b->prev_size);
}
static inline unsigned char *zone_user(const zone_blk *b) { return (unsigned char *)b + ZONE_HDR; }
static inline zone_blk *zone_from_user(const void *p) { return (zone_blk *)((unsigned char *)p - ZONE_HDR); }
static inline zone_ext *zone_ext_of(const zone_blk *b) {
    return (zone_ext *)((unsigned char *)b + zone_bsize(b) - ZONE_EXT_OFF);
}
static inline unsigned zone_slack(const zone_blk *b) { return b->chk & 63u; }
static inline size_t zone_align_of(const zone_blk *b) { return (size_t)16 << (b->bits >> ZB_ALIGN_SHIFT); }

/* The 10-bit header check: the address (so a header copied or read at the
 * wrong place fails) and every field except PREV_USED, mixed by one
 * multiply on the path after the header load (the address product does not
 * depend on the load). */
static inline uint16_t zone_chk_calc(const zone_blk *b, uint32_t size16, unsigned tag, unsigned bits,
                                     unsigned slack) {
    uint64_t h = ((uint64_t)(uintptr_t)b >> 4) * 0x9E3779B97F4A7C15ull;
    h ^= ((uint64_t)size16 << 24) | ((uint64_t)tag << 16) | ((uint64_t)(bits & ~ZB_PREV_USED) << 8) | slack;
    h *= 0xC2B2AE3D27D4EB4Full;
    return (uint16_t)((((unsigned)(h >> 54)) << 6) | (slack & 63u));
}

static inline void zone_set_hdr(zone_blk *b, size_t size, unsigned tag, unsigned bits, unsigned slack) {
    uint32_t s16 = (uint32_t)(size >> 4);
    b->size16 = s16;
    b->tag = (uint8_t)tag;
    b->bits = (uint8_t)bits;
    b->chk = zone_chk_calc(b, s16, tag, bits, slack);
}

/* Whether b's header check holds. */
static inline int zone_hdr_ok(const zone_blk *b) {
    return b->chk == zone_chk_calc(b, b->size16, b->tag, b->bits, b->chk & 63u);
}
/* User bytes of a used block; bytes asked for; its name. */
static inline size_t zone_area(const zone_blk *b) {
    return zone_bsize(b) - ((b->bits & ZB_EXT) ? ZONE_EXT_OVH : ZONE_PLAIN_OVH);
}
static inline size_t zone_requested(const zone_blk *b) { return zone_area(b) - zone_slack(b); }
static inline const char *zone_block_name(const zone_blk *b) {
    return (b->bits & ZB_EXT) ? zone_ext_of(b)->name : NULL;
}

/* ---- size classes of free blocks ------------------------------------------- */

static inline unsigned zone_msb(size_t x) { return 63u - (unsigned)__builtin_clzll((unsigned long long)x); }

static inline void zone_mapping(size_t size, unsigned *fl, unsigned *sl) {
    if (size < ZONE_SMALL) {
        *fl = 0;
        *sl = (unsigned)(size >> 4);
    } else {
        unsigned m = zone_msb(size);
        *sl = (unsigned)(size >> (m - ZONE_SL_LOG2)) ^ ZONE_SL_COUNT;
        *fl = m - (ZONE_FL_SHIFT - 1);
    }
}

/* The first class whose every block is >= size. */
static inline void zone_mapping_search(size_t size, unsigned *fl, unsigned *sl) {
    if (size >= ZONE_SMALL) size += ((size_t)1 << (zone_msb(size) - ZONE_SL_LOG2)) - 1;
    zone_mapping(size, fl, sl);
}

/* Whether block sizes a and b (a > b) fall in the same free list. */
static inline int zone_same_class(size_t a, size_t b) {
    if (b < ZONE_SMALL) return 0; /* exact classes: a > b differ */
    unsigned m = zone_msb(a);
    return zone_msb(b) == m && (a >> (m - ZONE_SL_LOG2)) == (b >> (m - ZONE_SL_LOG2));
}

/* Smallest block size in class (fl, sl). */
static inline size_t zone_class_start(unsigned fl, unsigned sl) {
    if (fl == 0) return (size_t)sl << 4;
    unsigned m = fl + ZONE_FL_SHIFT - 1;
    return ((size_t)1 << m) + ((size_t)sl << (m - ZONE_SL_LOG2));
}

/* The smallest block in the largest non-empty class (0 when no block is
 * free): a request of that block's size (less overhead) succeeds now. */
static inline size_t zone_largest_class_start(const hk_zone *z) {
    if (!z->fl_map) return 0;
    unsigned fl = zone_msb(z->fl_map);
    return zone_class_start(fl, zone_msb(z->sl_map[fl]));
}

/* Block size for a request of n bytes; 0 when n is too large. */
static inline size_t zone_need(const hk_zone *z, size_t n, int tracked) {
    if (n > ZONE_MAX_REQUEST) return 0;
    size_t need = n + (tracked ? ZONE_EXT_OVH : ZONE_PLAIN_OVH);
    if (HK__UNLIKELY(ZONE_FLAGS(z) & HK_FLAG_CANARY)) need += HK_CANARY_BYTES;
    need = (need + 15) & ~(size_t)15;
    return need < ZONE_MIN_BLOCK ? ZONE_MIN_BLOCK : need;
}

/* ---- regions ---------------------------------------------------------------- */

/* The index of the region holding p (its blocks or its end marker), or -1.
 * O(log regions). */
static inline int zone_region_index(const hk_zone *z, const void *p) {
    uintptr_t a = (uintptr_t)p;
    if (a < z->lo || a >= z->hi) return -1;
    uint32_t lo = 0, hi = z->nregions;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        const zone_region *r = &z->regions[mid];
        if (a < (uintptr_t)r->base)
            hi = mid;
        else if (a >= (uintptr_t)r->end + ZONE_HDR)
            lo = mid + 1;
        else
            return (int)mid;
    }
    return -1;
}

/* Sets hint_lo and hint_span from region_hint (0 when it is out of range)
 * after the regions or the hint changed. */
static inline void zone_hint_sync(hk_zone *z) {
    if (z->region_hint >= z->nregions) z->region_hint = 0;
    if (!z->nregions) {
        z->hint_lo = 0; /* a - 0 <= 0 holds for a == 0 only, never a user pointer */
        z->hint_span = 0;
        return;
    }
    const zone_region *r = &z->regions[z->region_hint];
    z->hint_lo = (uintptr_t)r->base + ZONE_HDR;
    z->hint_span = (uintptr_t)r->end - z->hint_lo;
}

/* The index of the region holding p, or -1: the region of the last lookup
 * when p is in it, else a binary search, which moves the hint (so frees
 * alternating between regions do not all search). Lock held, or no lock
 * hooks. */
static inline int zone_find_region(hk_zone *z, const void *p) {
    const zone_region *hr = &z->regions[z->region_hint];
    uintptr_t a = (uintptr_t)p; /* integers: p may be any address */
    if (HK__LIKELY(z->region_hint < z->nregions && a >= (uintptr_t)hr->base &&
                   a < (uintptr_t)hr->end + ZONE_HDR))
        return (int)z->region_hint;
    int ri = zone_region_index(z, p);
    if (ri >= 0 && (uint32_t)ri != z->region_hint) {
        z->region_hint = (uint32_t)ri;
        zone_hint_sync(z);
    }
    return ri;
}

/* ---- tag lists (the records of tracked blocks; see zone_tags.c) ------------- */

/* Appends tracked block b's record (owner set) to the newest end of tag
 * `tag`'s lists. O(1). */
static inline void zone_tag_append(hk_zone *z, zone_blk *b, unsigned tag) {
    zone_ext *e = zone_ext_of(b);
    e->seq = z->seq++;
    e->blk = b;
    zone_ext **hp = &z->tag_head[tag][e->seq & (ZONE_TAG_WAYS - 1)], *head = *hp;
    z->tag_map[tag >> 6] |= 1ull << (tag & 63);
    if (!head) {
        e->next = e->prev = e;
        *hp = e;
    } else {
        zone_ext *tail = head->prev;
        e->next = head;
        e->prev = tail;
        tail->next = e;
        head->prev = e;
    }
    z->tag_count[tag]++;
    if (e->owner) z->tag_owned[tag]++;
}

/* Unlinks tracked block b's record from tag `tag`'s lists. O(1). */
static inline void zone_tag_unlink(hk_zone *z, zone_blk *b, unsigned tag) {
    zone_ext *e = zone_ext_of(b);
    zone_ext **hp = &z->tag_head[tag][e->seq & (ZONE_TAG_WAYS - 1)];
    if (e->next == e) {
        *hp = NULL;
    } else {
        e->prev->next = e->next;
        e->next->prev = e->prev;
        if (*hp == e) *hp = e->next;
    }
    if (z->tag_count[tag] == 1) z->tag_map[tag >> 6] &= ~(1ull << (tag & 63));
    z->tag_count[tag]--;
    if (e->owner) z->tag_owned[tag]--;
}

/* ======== interfaces between the files (lowest layer first) ================ */

/* ---- zone_tlsf.c: free blocks --------------------------------------------- */

/* Puts free block b (header set, size from it) in its list; takes it out. */
void hk__zone_list_insert(hk_zone *z, zone_blk *b);
void hk__zone_list_remove(hk_zone *z, zone_blk *b);
/* Takes a free block able to hold a block of `need` bytes whose user
 * pointer is aligned to `align` and splits off the surplus. Returns the
 * block (header: its old PREV_USED, size *bsize; the next header's
 * PREV_USED set) or NULL when no free block fits. O(1). */
zone_blk *hk__zone_take(hk_zone *z, size_t need, size_t align, size_t *bsize);
/* Makes b (header gives its size; contents dead) free: merges it with free
 * neighbours and lists the result, which it returns. O(1). */
zone_blk *hk__zone_merge_insert(hk_zone *z, zone_blk *b);
/* Grows used block b (`old` bytes) in place to `need` bytes by taking its
 * free successor nx (old + size of nx >= need); the rest, when it can hold
 * a block, is listed again. Returns b's new size; the caller rewrites b's
 * header. O(1). */
size_t hk__zone_absorb_next(hk_zone *z, zone_blk *b, zone_blk *nx, size_t old, size_t need);

/* ---- zone_region.c: regions and the OS ------------------------------------ */

/* The first region's memory from the OS for a zone without caller memory
 * (`size` bytes committed, plus reserved address space for a growing zone).
 * Returns 0 when the OS refuses. */
typedef struct zone_os_map {
    void *base;     /* the mapping (NULL: none) */
    size_t size;    /* bytes committed from base */
    size_t os_size; /* bytes to release (the reservation when there is one) */
    size_t reserve; /* bytes reserved (0: none) */
} zone_os_map;
int hk__zone_os_first(const hk_zone_desc *desc, size_t size, zone_os_map *out);
/* Lays out a region in [mem, mem+size) and lists its one free block.
 * Returns the region index or -1 (reported when `report`). O(regions). */
int hk__zone_region_add(hk_zone *z, void *mem, size_t size, void *os_base, size_t os_size, int report);
/* Grows the zone from the OS so that a block of `need` bytes can be taken;
 * 0 when it may not or the OS refuses. O(regions) plus one mmap. */
int hk__zone_grow(hk_zone *z, size_t need);
/* Returns a dedicated OS region to the OS when free block m (just merged)
 * spans it whole. O(log regions). */
void hk__zone_maybe_release(hk_zone *z, zone_blk *m);
/* Gives back every dedicated OS region that is entirely free. O(regions). */
void hk__zone_release_empty_regions(hk_zone *z);
/* Releases every OS mapping of the zone (destroy). */
void hk__zone_release_all(hk_zone *z);

/* The test after a block was freed: does merged block m span a whole region
 * (PREV_USED set, the region's end marker next) in a zone of several? Only
 * then is hk__zone_maybe_release worth calling. */
static inline int zone_spans_region(const hk_zone *z, const zone_blk *m) {
    return HK__UNLIKELY(z->nregions > 1) && (m->bits & ZB_PREV_USED) && zone_next(m)->size16 == 0;
}

/* ---- zone_decay.c: free pages back to the OS --------------------------------- */

#define ZONE_DECAY_DEFAULT_MS 500u                /* decay time when the desc gives 0 */
#define ZONE_DECAY_ARM        ((size_t)1 << 20)   /* bytes freed before the decay clock runs */
#define ZONE_DECAY_MIN_SPAN   ((size_t)16 << 10)  /* a decay sweep skips smaller spans */
#define ZONE_DECAY_CHECK      ((size_t)256 << 10) /* bytes freed between clock reads on the free path */

/* The whole pages of free block b (`size` bytes) past its header and links:
 * their first address in *lo, their bytes returned (0: none). */
static inline size_t zone_free_span(const hk_zone *z, const zone_blk *b, size_t size, uintptr_t *lo) {
    uintptr_t m = (uintptr_t)z->page - 1;
    uintptr_t a = ((uintptr_t)b + sizeof(zone_blk) + m) & ~m, e = ((uintptr_t)b + size) & ~m;
    *lo = a;
    return e > a ? (size_t)(e - a) : 0;
}

/* Whether block b lies in memory the zone took from the OS (its first
 * region when it made it, grown regions; never caller memory). */
static inline int zone_own_memory(const hk_zone *z, const zone_blk *b) {
    int ri = zone_region_index(z, b);
    if (ri < 0) return 0;
    const zone_region *r = &z->regions[ri];
    if (r->os_base) return 1;
    const unsigned char *c = (const unsigned char *)z->ctl_os;
    return c && r->base >= c && r->base < c + z->ctl_os_size;
}

/* Sets up decay at create: decay_ms from the desc (0: the default,
 * negative: never by time). */
void hk__zone_decay_init(hk_zone *z, int decay_ms);
/* Gives back the spans of the free blocks in the zone's OS memory: every
 * dirty one (all), else those of the previous epoch of at least
 * ZONE_DECAY_MIN_SPAN bytes. Returns the bytes given back. Lock held.
 * O(free blocks of a page or more) plus one madvise per span. */
size_t hk__zone_sweep(hk_zone *z, int all);
/* After blocks were freed into the core (decay_new reached
 * decay_check_at), lock held: arms the decay when enough was freed, reads
 * the clock and ends the epoch when it is over; the next tick comes after
 * ZONE_DECAY_CHECK more bytes. O(1) unless a sweep is due. */
void hk__zone_decay_tick(hk_zone *z);
/* The free path's tick: one compare unless enough was freed since the last. */
static inline void zone_decay_tick(hk_zone *z) {
    if (HK__UNLIKELY(z->decay_new >= z->decay_check_at)) hk__zone_decay_tick(z);
}
/* The clock's epoch end of an armed zone, the clock read (now), from a
 * path that may not hold the lock (`locked` says whether it does): the
 * small blocks' frees poll it. */
void hk__zone_decay_poll_at(hk_zone *z, uint64_t now, int locked);

/* ---- zone_lookup.c: user pointers ------------------------------------------ */

/* The used block or slot whose user pointer is p; otherwise reports what p
 * is (foreign, interior, free space, damaged header; `op` names the call)
 * and returns NULL with the result in *res. O(1) for a valid p. */
zone_blk *hk__zone_lookup(hk_zone *z, const void *p, const char *op, hk_result *res);
/* Whether the canary of used plain block b is intact; reports (with `when`,
 * e.g. "free of") and returns 0 when not. */
int hk__zone_canary_ok(hk_zone *z, zone_blk *b, const char *when);
/* Whether p is the user pointer of a used block or slot (hk_zone_owns);
 * never reports. O(log regions). */
bool hk__zone_is_block(hk_zone *z, const void *p);

/* ---- zone_tags.c: records, tags, owners -------------------------------------- */

/* Ends validated used plain block b: clears its owner when clear_owner > 0,
 * unlinks its record unless clear_owner < 0 (free_tags detached the list),
 * fills and merges it. Returns the merged free block. O(1). */
zone_blk *hk__zone_release(hk_zone *z, zone_blk *b, int clear_owner);
/* Purges the oldest purgeable block with tag >= level; 1 when one was. */
int hk__zone_purge_one(hk_zone *z, int level);
/* Re-lays out used block b at size bsize for n requested bytes (old_req
 * before), restoring its record from *saved (the record before, at olde
 * when it was tracked: its list neighbours are relinked when it moved). */
void hk__zone_relayout(hk_zone *z, zone_blk *b, size_t bsize, size_t n, const zone_ext *saved,
                       const zone_ext *olde, size_t old_req);

/* ---- zone_check.c: introspection -------------------------------------------- */

/* The full check of zone z, lock held, reporting the first problem: the
 * paranoid hook zone.c registers with the instance core. */
hk_result hk__zone_check_core(void *z);

#endif /* HEAPKIT_ZONE_INTERNAL_H */

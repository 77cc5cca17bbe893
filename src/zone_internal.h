/*
 * src/zone_internal.h - the zone's block layout and the helpers shared by
 * src/zone.c (the allocator) and src/zone_check.c (walk, check, where, dump).
 * See src/zone.c for the invariants.
 */
#ifndef HEAPKIT_ZONE_INTERNAL_H
#define HEAPKIT_ZONE_INTERNAL_H

#include "heapkit/zone.h"
#include "internal.h"

#include <stdio.h>
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
#define ZONE_MAX_ALIGN      ((size_t)1 << 35)
#define ZONE_GROW_CHUNK_MAX ((size_t)256 << 20)
#define ZONE_RESERVE        ((size_t)1 << 36) /* address space reserved for a growing zone (64-bit hosts) */
#define ZONE_NTAGS          256u
#define ZONE_TAG_WAYS       8u    /* each tag's blocks are dealt round-robin over this many lists */
#define HK_ZONE_FRONT_CACHE 0u /* the front cache is being replaced by runs */
#define ZONE_FC_MAX         1024u /* largest block size kept by the front cache */
#define ZONE_FC_DEPTH       32u   /* blocks per size */
#define ZONE_FC_BYTES       ((size_t)256 << 10) /* bytes in all */
#define ZONE_FC_OFF                                                                                          \
    (HK_FLAG_FILL | HK_FLAG_CANARY | HK_FLAG_ZERO | HK_FLAG_PARANOID | HK_FLAG_RECORD_SITE |                 \
     HK_ZONE_TRACK_ALL)

#define ZB_USED        1u
#define ZB_PREV_USED   2u
#define ZB_EXT         4u
#define ZB_ALIGN_SHIFT 3u

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
    uint32_t fl_map;
    uint32_t sl_map[ZONE_FL_COUNT];
    zone_blk *heads[ZONE_FL_COUNT][ZONE_SL_COUNT];
    uint64_t tag_map[ZONE_NTAGS / 64];
    zone_ext *tag_head[ZONE_NTAGS][ZONE_TAG_WAYS];
    uint32_t tag_count[ZONE_NTAGS];
    uint32_t tag_owned[ZONE_NTAGS];           /* blocks of that tag with an owner pointer */
    zone_region regions[HK_ZONE_MAX_REGIONS]; /* sorted by base */
    uint32_t nregions;
    uint32_t region_hint; /* the region of the last pointer looked up */
    uintptr_t lo, hi;     /* bounds of all regions */
    size_t capacity, free_bytes, free_blocks;
    size_t used_req, used_bytes, peak_used, live, untracked_live;
    uint64_t alloc_count, free_count, fail_count, purge_count, grow_count;
    uint32_t seq;
    uint32_t flags;
    int purge_level;
    int bulk;  /* inside free_tags/purge: no region release */
    int fc_on; /* HK_ZONE_FRONT_CACHE in effect */
    /* Front cache: singly linked (through next_free) LIFO stacks of cached
     * blocks by size16. A cached block keeps USED in its header with tag 0. */
    zone_blk *fc_head[ZONE_FC_MAX / 16 + 1];
    uint32_t fc_count[ZONE_FC_MAX / 16 + 1];
    size_t fc_bytes, fc_blocks;
    size_t grow_size, max_size, os_grown;
    void *ctl_os; /* the control block's own mapping (with the first region) */
    size_t ctl_os_size;
    hk__reporter rep;
    hk_lock_hooks lock;
};

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
static inline size_t zone_area(const zone_blk *b) {
    return zone_bsize(b) - ((b->bits & ZB_EXT) ? ZONE_EXT_OVH : ZONE_PLAIN_OVH);
}
static inline size_t zone_requested(const zone_blk *b) { return zone_area(b) - zone_slack(b); }
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

static inline int zone_hdr_ok(const zone_blk *b) {
    return b->chk == zone_chk_calc(b, b->size16, b->tag, b->bits, b->chk & 63u);
}

/* A block kept by the front cache: used in the heap's structure, free for
 * the user. */
static inline int zone_is_cached(const zone_blk *b) { return (b->bits & ZB_USED) && b->tag == 0; }

static inline const char *zone_block_name(const zone_blk *b) {
    return (b->bits & ZB_EXT) ? zone_ext_of(b)->name : NULL;
}

/* ---- size classes and free lists ---------------------------------------- */

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

/* Runs the full check when the zone is paranoid (or HK_DEBUG >= 3); reports
 * what broke. Defined in zone_check.c. */
hk_result hk__zone_check_locked(hk_zone *z);

static inline void zone_check_after(hk_zone *z) {
    if (HK__UNLIKELY(z->flags & HK_FLAG_PARANOID) || HK_DEBUG >= 3) (void)hk__zone_check_locked(z);
}

#endif /* HEAPKIT_ZONE_INTERNAL_H */

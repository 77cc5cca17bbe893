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
 *   zone_runs.c     small-block runs and their slots (interface: zone_runs.h)
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
 * prev_size. A slot of a run (zone_runs.h) has the same 8-byte header at
 * user - 8, marked by the alignment field's top value.
 *
 * Each region is [base, end) tiled by blocks, followed by a 16-byte epilogue
 * header at `end` (size 0, USED) so every block has a next header.
 */
#ifndef HEAPKIT_ZONE_INTERNAL_H
#define HEAPKIT_ZONE_INTERNAL_H

#include "common.h"
#include "os.h"
#include "heapkit/zone.h"

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
#define ZONE_MAX_ALIGN      ((size_t)1 << 34) /* log2 - 4 = 30: the field value 31 marks runs */
#define ZONE_GROW_CHUNK_MAX ((size_t)256 << 20)
#define ZONE_RESERVE        ((size_t)1 << 36) /* address space reserved for a growing zone (64-bit hosts) */
#define ZONE_NTAGS          256u
#define ZONE_TAG_WAYS       8u /* each tag's blocks are dealt round-robin over this many lists */
/* Small-block runs (see zone_runs.h) */
#define ZONE_RUN_HDR        112u /* bytes of a run block before its slots (at most; see zone_run_of_block) */
#define ZONE_RUN_SLOT0      48u  /* run struct to slot 0's block address */
#define ZONE_RUN_XOFF       128u /* threads zones: the run's extension is this far below its struct */
#define ZONE_RUN_MAX_STRIDE 16384u /* largest slot */
#define ZONE_RUN_MAX_REQ    (ZONE_RUN_MAX_STRIDE - ZONE_OVERLAP)
#define ZONE_CLS_LIN_LOG2   8u /* slots grow in 16-byte steps up to 256 bytes */
#define ZONE_CLS_LIN        (1u << ZONE_CLS_LIN_LOG2)
#define ZONE_CLS_NLIN       (ZONE_CLS_LIN / 16u - 1u) /* 32 .. 256: 15 classes */
#define ZONE_CLS_LOG2K      3u                        /* then 8 classes per doubling */
#define ZONE_NCLS           (ZONE_CLS_NLIN + ((14u - ZONE_CLS_LIN_LOG2) << ZONE_CLS_LOG2K)) /* to 16 KiB */
#define ZONE_RUN_FIRST                                                                                       \
    ((size_t)16 << 10) /* bytes of slots of a class's first run, before the slot limits                      \
                        */
#define ZONE_RUN_TARGET     ((size_t)32 << 10)  /* runs replacing full ones double up to this, */
#define ZONE_RUN_SHARE_LOG2 6u                  /* or to 1/64 of the bytes of their owner's runs, */
#define ZONE_RUN_TARGET_MAX ((size_t)128 << 10) /* but not past this */
#define ZONE_RUN_BUSY_X     32u  /* threads zones: or, for larger slots, up to this many of them */
#define ZONE_RUN_CAP_SLOTS  512u /* slots per run at most */
#define ZONE_RUN_MIN_SLOTS  4u
#define ZONE_CARVE_SPAN     4096u /* a carve fills the slots of the pages it touches, at this granularity */
#define ZONE_CARVE_MAX      8u    /* slots a carve makes at most (a bound on its work) */
#define ZONE_RUN_MAX_SLOTS  4095u /* slot index is 12 bits */
#define ZONE_RUN_OFF                                                                                         \
    (HK_FLAG_FILL | HK_FLAG_CANARY | HK_FLAG_ZERO | HK_FLAG_PARANOID | HK_FLAG_RECORD_SITE |                 \
     HK_ZONE_TRACK_ALL | HK_ZONE_NO_RUNS)

#define ZB_USED        1u
#define ZB_PREV_USED   2u
#define ZB_EXT         4u
#define ZB_ALIGN_SHIFT 3u
/* The alignment field's top value marks a run: a used block with it (and no
 * EXT) is a run block; a header with it and EXT is a slot header. */
#define ZONE_RUN_ALOG 31u
#define ZB_RUN_MARK   (ZONE_RUN_ALOG << ZB_ALIGN_SHIFT)
#define ZB_SLOT_MASK  (ZB_RUN_MARK | ZB_EXT)
#define ZB_SLOT_FREE  (ZB_RUN_MARK | ZB_EXT)
#define ZB_SLOT_USED  (ZB_RUN_MARK | ZB_EXT | ZB_USED)
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

/* A run: one used block of the TLSF core cut into `nslots` slots of one
 * class. The struct sits in the block's user area (block + 16); slot i's
 * block address is first + i * stride, its 8-byte header at +8, its user
 * bytes at +16 (up to +stride+8, overlapping the next slot's first 8 bytes,
 * as plain blocks overlap their successor's prev_size). */
typedef struct zone_run {
    /* hot: read by every slot allocation and free (one cache line: the
     * struct is 64-byte aligned) */
    unsigned char *free;  /* free slots' user pointers, LIFO, linked through their first 8 bytes */
    unsigned char *first; /* slot 0's block address (the struct + ZONE_RUN_SLOT0); NULL once released */
    uint32_t stride, nslots;
    uint32_t used; /* slots in use */
    uint32_t bump; /* slots carved so far; slots past it have no header yet */
    uint16_t cls;
    uint8_t state; /* ZONE_RUN_CUR, _PARTIAL, _FULL or _SPARE */
    uint8_t lead;  /* run block address to the struct: 16..64 (+ ZONE_RUN_XOFF, threads) */
    uint32_t ntag; /* threads zones: used or remote slots with a tag other than HK_TAG_STATIC (owner only) */
    struct zone_run *next, *prev; /* the class's list of partial runs (NULL-terminated) */
} zone_run;

enum { ZONE_RUN_CUR = 1, ZONE_RUN_PARTIAL = 2, ZONE_RUN_FULL = 3, ZONE_RUN_SPARE = 4 };

typedef struct zone_cls {
    zone_run *cur;     /* the run allocations come from (may be empty, never on the partial list) */
    zone_run *partial; /* runs with free slots, other than cur */
    zone_run *spare;   /* one empty run kept for the next refill, or NULL */
} zone_cls;

_Static_assert(sizeof(zone_run) == 56, "run struct is 56 bytes");
_Static_assert(ZONE_RUN_CAP_SLOTS <= ZONE_RUN_MAX_SLOTS, "slot indices fit the header's 12 bits");
_Static_assert(sizeof(zone_run) <= ZONE_RUN_SLOT0 + ZONE_OVERLAP,
               "the run struct ends before slot 0's header");
_Static_assert(64 + ZONE_RUN_SLOT0 <= ZONE_RUN_HDR, "slot 0 starts within the run header bytes");

/* The run layer's state (zone_runs.c): the classes and what the runs hold. */
typedef struct zone_runset {
    zone_cls cls[ZONE_NCLS];
    /* classes whose current run may be empty or that may have a spare
     * (set when a run of the class empties; cleared by hk__zone_runs_trim,
     * which visits only these: its cost does not depend on the class count) */
    uint64_t trim_map[(ZONE_NCLS + 63) / 64];
    size_t run_bytes; /* bytes of the TLSF blocks that are runs (not in used_bytes) */
    size_t nruns;
} zone_runset;

/* HK_ZONE_THREADS: a batch of slots freed by a thread other than their
 * owner's (zone_remote.c). Nodes live in pages of their own, outside the
 * zone's regions (so that no user write, and no reuse of a slot by its
 * owner, can reach a batch), and belong to a pool (zone_rsrc) they go back
 * to after their slots are collected. 256 bytes. */
#define ZONE_RNODE_SLOTS 29u
typedef struct zone_rnode {
    struct zone_rnode *next; /* on an inbox, a pool's free list or its give-back stack */
    struct zone_rsrc *home;  /* the pool it comes from */
    uint32_t n;              /* atomic (relaxed; stats read it): entries filled */
    uint32_t spare_;
    void *slot[ZONE_RNODE_SLOTS]; /* atomic (relaxed): user pointers of slots with a remote header */
} zone_rnode;
_Static_assert(sizeof(zone_rnode) == 256, "a node is 256 bytes");

/* What a thread freeing other heaps' slots holds (zone_remote.c): one
 * filling node per destination heap (direct-mapped ways) and a pool of
 * nodes. In each heap (its owner's only), and in the zone for threads
 * without a heap (lock held). */
#define ZONE_OUT_WAYS 8u
typedef struct zone_outbox {
    struct zone_heap *to; /* the heap the node's slots belong to */
    zone_rnode *node;     /* filling, or NULL */
} zone_outbox;
typedef struct zone_rsrc {
    zone_outbox out[ZONE_OUT_WAYS];
    zone_rnode *nodes; /* free nodes */
    zone_rnode *back;  /* atomic stack: nodes given back by the heaps that collected them */
    void *pages;       /* the pool's node pages, linked through their first word (freed at destroy) */
    unsigned char *carve, *carve_end; /* the newest page's nodes not made yet */
} zone_rsrc;

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
    /* The first cache line (the struct is 64-byte aligned): everything the
     * lock-free slot alloc and free of a plain zone read or write besides
     * the class table, the run and the slot. The counters a free or an
     * alloc changes together are not neighbours: GCC would otherwise pair
     * them into vector instructions that cost more than they save. */
    int fast;             /* ZONE_FAST_*: which lock-free path hk_zone_alloc/free take (fixed at create) */
    uint32_t region_hint; /* the region of the last pointer looked up */
    size_t used_req;
    /* The hint region's user pointers are the a with a - hint_lo <= hint_span
     * (hint_lo: its base + ZONE_HDR; hint_span: its end - hint_lo): the
     * fast free's bounds test in one compare. Both 0 with no region.
     * zone_hint_sync keeps them. */
    uintptr_t hint_lo;
    /* strides of the used slots, kept by the slot paths under the lock;
     * read by a plain zone's stats only (a threads zone sums its runs'
     * used counts: its heaps keep no such counter) */
    size_t slot_bytes;
    size_t hint_span;
    uint64_t free_count;
    size_t peak_used;
    uint64_t alloc_count;
    int runs_on;   /* small blocks come from runs (not HK_ZONE_NO_RUNS, no debug flag) */
    hk__core core; /* names, error hook, lock hooks, flags, paranoid check */
    zone_runset runs;
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
    size_t untracked_live; /* untracked plain blocks (used slots are counted by slot_bytes) */
    uint64_t fail_count, purge_count, grow_count;
    uint32_t seq;
    int purge_level;
    int bulk; /* inside free_tags/purge: no region release */
    size_t grow_size, max_size, os_grown;
    void *ctl_os; /* the control block's own mapping (with the first region) */
    size_t ctl_os_size;
    int decay_on;            /* the zone may give pages back (some OS memory, no HK_FLAG_FILL) */
    int decay_armed;         /* atomic: a sweep is due at an epoch's end (the slow paths poll the clock) */
    uint64_t decay_epoch_ns; /* half the decay time; 0: pages go back only by hk_zone_trim */
    uint64_t decay_next;     /* atomic: when the current epoch ends (hk_os_coarse_ns) */
    uint64_t decommit_count; /* spans given back to the OS */
    /* A threads zone's own runs (threads without a heap, under the lock)
     * poll the decay clock as a heap does (zone_threads.c). */
    uint64_t decay_poll_at, decay_poll_ns, decay_poll_fc;
    /* HK_ZONE_THREADS (zone_threads.c): per-thread heaps. Cold for a zone
     * without it (the single-threaded paths never read these). */
    int threads;
    uint64_t zid;          /* unique per zone ever created: thread caches key on it */
    unsigned char *thr_lo; /* the first region's base (fixed) */
    size_t thr_span; /* atomic: its user pointers are thr_lo + ZONE_HDR + [0, thr_span] (grows in place) */
    struct zone_heap *heaps;  /* every heap, live or abandoned (lock held) */
    struct zone_run_x *xruns; /* every run's extension (lock held) */
    zone_rsrc rs;             /* remote frees of threads without a heap (lock held) */
    size_t rnodes_made;       /* atomic: nodes made in every pool (bounds stats' walk of the inboxes) */
    hk_os_mutex mx;           /* the zone's lock when the desc gives no lock hooks */
};
_Static_assert(offsetof(struct hk_zone, runs_on) == 64,
               "the fast paths' zone fields fill the first cache line");

/* hk_zone.fast: the runs' fast paths of a zone without lock hooks, the
 * per-thread heaps of a threads zone, or neither (every call locks). */
enum { ZONE_FAST_NONE = 0, ZONE_FAST_RUNS = 1, ZONE_FAST_THREADS = 2 };

/* The zone's reporter and flags (kept by its instance core). */
#define ZONE_REP(z)   (&(z)->core.rep)
#define ZONE_FLAGS(z) ((z)->core.flags)

/* Used blocks and slots: every path that makes or ends one counts it in
 * alloc_count or free_count, so the difference needs no counter of its own. */
static inline size_t zone_live(const hk_zone *z) { return (size_t)(z->alloc_count - z->free_count); }
/* Whether any untracked block is live: a plain one or a slot (or may be:
 * a threads zone counts its slots in its heaps). */
static inline int zone_untracked_any(const hk_zone *z) {
    return z->untracked_live || z->slot_bytes || (z->threads && z->runs.nruns);
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

/* A slot header's 16-bit check: its address, word, tag and bits folded
 * with xors (cheaper than the block check's multiplies; the free path
 * also verifies the slot's place in its run, which binds it further). */
static inline uint16_t zone_slot_chk(const zone_blk *b, uint32_t word, unsigned tag, unsigned bits) {
    uint64_t a = (uint64_t)(uintptr_t)b >> 4;
    uint32_t h = word ^ (uint32_t)a ^ (uint32_t)(a >> 21) ^ ((tag << 8) | bits) ^ 0x6b5au;
    return (uint16_t)(h ^ (h >> 16));
}

/* The header's second word (size16 or slot word, tag, bits, check) in one
 * atomic load: a threads zone's owner rewrites its slots' headers without
 * the lock, so the locked paths and `owns` judge a header from this
 * snapshot rather than from field reads that could race with it. */
typedef uint64_t zone_word __attribute__((may_alias));
static inline uint64_t zone_hdr_snap(const zone_blk *b) {
    return __atomic_load_n((const zone_word *)((const unsigned char *)b + 8), __ATOMIC_RELAXED);
}
static inline unsigned zone_snap_bits(uint64_t w) { return (unsigned)(w >> 40) & 0xffu; }
static inline unsigned zone_snap_tag(uint64_t w) { return (unsigned)(w >> 32) & 0xffu; }
static inline int zone_snap_is_slot(uint64_t w) { return (zone_snap_bits(w) & ZB_SLOT_MASK) == ZB_SLOT_MASK; }
/* zone_hdr_ok on a snapshot w of b's header. */
static inline int zone_hdr_ok_w(const zone_blk *b, uint64_t w) {
    uint32_t s = (uint32_t)w;
    unsigned tag = zone_snap_tag(w), bits = zone_snap_bits(w);
    uint16_t chk = (uint16_t)(w >> 48);
    if ((bits & ZB_SLOT_MASK) == ZB_SLOT_MASK) return chk == zone_slot_chk(b, s, tag, bits);
    return chk == zone_chk_calc(b, s, tag, bits, chk & 63u);
}

static inline int zone_hdr_ok(const zone_blk *b) {
    if ((b->bits & ZB_SLOT_MASK) == ZB_SLOT_MASK)
        return b->chk == zone_slot_chk(b, b->size16, b->tag, b->bits);
    return b->chk == zone_chk_calc(b, b->size16, b->tag, b->bits, b->chk & 63u);
}

/* ---- slot and run headers --------------------------------------------------- */

/* Slot header word (in size16's place): bits 0..11 slot index, 12..18
 * class, 19..31 slack (user area - requested). */
static inline uint32_t zone_slot_word(uint32_t idx, uint32_t cls, uint32_t slack) {
    return idx | (cls << 12) | (slack << 19);
}
static inline uint32_t zone_slot_idx(const zone_blk *b) { return b->size16 & 0xfffu; }
static inline uint32_t zone_slot_cls(const zone_blk *b) { return (b->size16 >> 12) & 0x7fu; }
static inline uint32_t zone_slot_slack(const zone_blk *b) { return b->size16 >> 19; }
static inline int zone_is_slot(const zone_blk *b) { return (b->bits & ZB_SLOT_MASK) == ZB_SLOT_MASK; }
static inline int zone_is_run(const zone_blk *b) {
    return (b->bits & (ZB_SLOT_MASK | ZB_USED)) == (ZB_RUN_MARK | ZB_USED);
}
/* A run's struct sits at the first 64-byte boundary past its block header;
 * in a threads zone, ZONE_RUN_XOFF bytes further (its extension comes
 * first, so that a run's bookkeeping shares its first pages: zone_runs.h). */
static inline zone_run *zone_run_of_block(const hk_zone *z, const zone_blk *b) {
    return (zone_run *)((((uintptr_t)b + ZONE_HDR + 63) & ~(uintptr_t)63) + (z->threads ? ZONE_RUN_XOFF : 0));
}
static inline zone_blk *zone_run_block(const zone_run *r) {
    return (zone_blk *)((unsigned char *)r - r->lead);
}

/* Slot size of each class: 16-byte steps from 32 to 256, then 8 classes
 * per doubling up to ZONE_RUN_MAX_STRIDE (a table: the free path looks the
 * stride up without branches). zone_cls_of maps a request to its class;
 * tests/test_zone_runs.c checks the two agree. The table covers every
 * value of a slot header's 7-bit class field: the classes past the last
 * have stride 0, which no run has, so the fast free's run test rejects a
 * header naming one without a test of its own. */
/* clang-format off */
#define ZONE_STRIDES(X)                                                                                      \
    X(32u) X(48u) X(64u) X(80u) X(96u) X(112u) X(128u) X(144u) X(160u) X(176u) X(192u) X(208u) X(224u)      \
    X(240u) X(256u) X(288u) X(320u) X(352u) X(384u) X(416u) X(448u) X(480u) X(512u) X(576u) X(640u)        \
    X(704u) X(768u) X(832u) X(896u) X(960u) X(1024u) X(1152u) X(1280u) X(1408u) X(1536u) X(1664u)          \
    X(1792u) X(1920u) X(2048u) X(2304u) X(2560u) X(2816u) X(3072u) X(3328u) X(3584u) X(3840u) X(4096u)     \
    X(4608u) X(5120u) X(5632u) X(6144u) X(6656u) X(7168u) X(7680u) X(8192u) X(9216u) X(10240u) X(11264u)   \
    X(12288u) X(13312u) X(14336u) X(15360u) X(16384u)
/* clang-format on */
#define ZONE_STRIDE_ENTRY(s) s,
static const uint32_t zone_stride_tab[128] = {ZONE_STRIDES(ZONE_STRIDE_ENTRY)};
/* A threads zone's heap caches at most this many freed slots of a class
 * (zone_runs.h, zone_heap): 64, or 128 KiB of them for the slots above 2
 * KiB (at least 8). */
#define ZONE_CACHE_MAX_OF(s) (131072u / ((s) > 2048u ? (s) : 2048u)),
static const uint8_t zone_cache_max_tab[128] = {ZONE_STRIDES(ZONE_CACHE_MAX_OF)};
_Static_assert(ZONE_NCLS < 128, "the 7-bit class field has strides past the last class");

static inline uint32_t zone_cls_stride(unsigned c) { return zone_stride_tab[c]; }

/* The class of each 16-byte-rounded slot need up to 1 KiB, by need / 16
 * (one load instead of the logarithm for the common small requests). */
static const uint8_t zone_cls_small_tab[65] = {
    0u,  0u,  0u,  1u,  2u,  3u,  4u,  5u,  6u,  7u,  8u,  9u,  10u, 11u, 12u, 13u, 14u,
    15u, 15u, 16u, 16u, 17u, 17u, 18u, 18u, 19u, 19u, 20u, 20u, 21u, 21u, 22u, 22u, 23u,
    23u, 23u, 23u, 24u, 24u, 24u, 24u, 25u, 25u, 25u, 25u, 26u, 26u, 26u, 26u, 27u, 27u,
    27u, 27u, 28u, 28u, 28u, 28u, 29u, 29u, 29u, 29u, 30u, 30u, 30u, 30u,
};

/* Class of a request of n <= ZONE_RUN_MAX_REQ bytes. */
static inline unsigned zone_cls_of(size_t n) {
    size_t s = (n + ZONE_OVERLAP + 15) & ~(size_t)15;
    if (HK__LIKELY(s <= 1024)) return zone_cls_small_tab[s >> 4];
    unsigned m = 63u - (unsigned)__builtin_clzll((unsigned long long)(s - 1));
    return ZONE_CLS_NLIN + ((m - ZONE_CLS_LIN_LOG2) << ZONE_CLS_LOG2K) +
           (unsigned)((s - 1 - ((size_t)1 << m)) >> (m - ZONE_CLS_LOG2K));
}

static inline zone_run *zone_run_of_slot(const zone_blk *b) {
    uint32_t stride = zone_cls_stride(zone_slot_cls(b));
    return (zone_run *)((unsigned char *)b - (size_t)zone_slot_idx(b) * stride - ZONE_RUN_SLOT0);
}

/* Whether run r's struct agrees with its block b of `size` bytes. */
static inline int zone_run_sane(const hk_zone *z, const zone_run *r, const zone_blk *b, size_t size) {
    return r == zone_run_of_block(z, b) && r->cls < ZONE_NCLS && r->stride == zone_cls_stride(r->cls) &&
           r->lead == (unsigned)((const unsigned char *)r - (const unsigned char *)b) &&
           r->first == (const unsigned char *)r + ZONE_RUN_SLOT0 && r->nslots >= 1 &&
           r->nslots <= ZONE_RUN_CAP_SLOTS &&
           (size_t)(r->first - (const unsigned char *)b) + (size_t)r->nslots * r->stride <= size &&
           r->bump <= r->nslots && r->used <= r->bump && r->state >= ZONE_RUN_CUR &&
           r->state <= ZONE_RUN_SPARE;
}

/* User bytes of a used block or slot; bytes asked for; its name. */
static inline size_t zone_area(const zone_blk *b) {
    if (HK__UNLIKELY(zone_is_slot(b))) return zone_cls_stride(zone_slot_cls(b) % ZONE_NCLS) - ZONE_OVERLAP;
    return zone_bsize(b) - ((b->bits & ZB_EXT) ? ZONE_EXT_OVH : ZONE_PLAIN_OVH);
}
static inline size_t zone_requested(const zone_blk *b) {
    if (HK__UNLIKELY(zone_is_slot(b))) return zone_area(b) - zone_slot_slack(b);
    return zone_area(b) - zone_slack(b);
}
static inline const char *zone_block_name(const zone_blk *b) {
    return ((b->bits & ZB_EXT) && !zone_is_slot(b)) ? zone_ext_of(b)->name : NULL;
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
/* The clock read and epoch end of an armed zone, from a path that may not
 * hold the lock (`locked` says whether it does). */
void hk__zone_decay_poll_slow(hk_zone *z, int locked);
/* The same with the clock already read (now). */
void hk__zone_decay_poll_at(hk_zone *z, uint64_t now, int locked);
/* The poll of the run layer's slow paths (a run emptied, a refill):
 * nothing unless armed. Any thread. */
static inline void zone_decay_poll(hk_zone *z, int locked) {
    if (HK__UNLIKELY(__atomic_load_n(&z->decay_armed, __ATOMIC_RELAXED))) hk__zone_decay_poll_slow(z, locked);
}

/* ---- zone_runs.c: small-block runs: see zone_runs.h ----------------------- */

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

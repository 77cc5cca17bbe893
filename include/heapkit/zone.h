/*
 * heapkit/zone.h - the zone: an O(1) general-purpose heap with DOOM/Quake
 * semantics (tags, purge levels, owner pointers, free-by-tag).
 *
 * Algorithm: two-level segregated fit (TLSF) with boundary tags.
 *  - Free blocks sit in 28 x 32 size classes: sizes below 512 bytes in exact
 *    16-byte classes, larger sizes in 32 subdivisions of each power of two.
 *    Two bitmaps (one word per level) find a non-empty class with two
 *    count-trailing-zeros instructions.
 *  - A freed block is merged at once with a free neighbour on either side,
 *    so two free blocks are never adjacent.
 *  - Allocation rounds the request up to the next class boundary and takes
 *    the head of the first non-empty class at or above it (good fit), then
 *    splits off the surplus. The allocation is carved from the END of an
 *    interior free block, so the free remainder keeps its address and, when
 *    its class does not change, its place in its list (no list work); the
 *    last block of a region is carved from its start, so a region's untouched
 *    tail stays untouched. Likewise a block freed after a free neighbour
 *    grows that neighbour in place when its class does not change.
 *
 * Small-block runs (on by default; off with HK_ZONE_NO_RUNS or any debug
 * flag): untracked requests of at most 16376 bytes from hk_zone_alloc,
 * hk_zone_calloc and hk_zone_realloc are served from runs. A run is one
 * used block of the TLSF core cut into equal slots of one size class (95
 * classes: slot sizes in 16-byte steps from 32 to 1024 bytes, then 8 per
 * doubling up to 16 KiB). Slots of one class are interchangeable, so a
 * freed slot needs no merging: it goes on its run's free list (LIFO) and
 * the next request of its class takes it, which keeps recently used memory
 * in the cache. A run whose last slot is freed goes back to the TLSF core
 * at once and is merged there like any block, except that each class keeps
 * its current run and one spare empty run; those are given back before any
 * allocation purges, grows or fails. Slots are carved from a run as they are
 * first needed, so its untouched pages stay untouched. A growing zone grows
 * to make a run; a zone that cannot grow gives a run at most 1/16 of its
 * capacity and otherwise serves the request from a plain block. Slots are
 * untracked blocks with tag HK_TAG_STATIC: tagged, owned, named or aligned
 * allocations (hk_zone_alloc_tagged, _ex, memalign) are always plain TLSF
 * blocks.
 *
 * Complexity: alloc, free, calloc (plus the zeroing), memalign, realloc in
 * place (plus the copy when it moves), usable_size, change_tag: O(1) in the
 * number of blocks and in the heap size. The worst case is a fixed number of
 * bit scans and list operations; pointer validation adds a binary search over
 * the regions (O(log regions), at most HK_ZONE_MAX_REGIONS). When a request
 * cannot be met, each purged block costs O(distinct purgeable tags in use)
 * and growing from the OS costs one mmap. free_tags and purge cost
 * O(blocks freed + distinct tags in the range), except that a range holding
 * HK_TAG_STATIC also walks the heap for untracked blocks (see below).
 * walk, check, where and dump are O(blocks).
 *
 * Fragmentation bound: in the TLSF core a request of n bytes never takes a
 * block of more than n + n/32 + 31 bytes (class rounding + header + 16-byte
 * granule); a free block larger than the request by at least 32 bytes is
 * always split. A slot for n bytes takes the larger of 32 and n + 23 bytes
 * at most up to 1016-byte requests, and less than n + n/8 + 9 above. Runs add at most, per class, the unused
 * slots of its partly used runs: the current run (16 KiB of slots, at least
 * 4 slots), one spare run, and the runs left with free slots after frees
 * (each holds at least one used slot). As for any good-fit allocator,
 * external fragmentation depends on the workload; an allocation fails only
 * when, after giving back every empty run, no free block of the rounded-up
 * class exists (so a request may fail while a free block up to 1/32 larger
 * than the request is available, but never when one of the next class
 * exists). Measured on the bench's game-frame trace: peak footprint / peak
 * live bytes 1.08 (see docs/zone.md).
 *
 * Per-block overhead (release build, no debug flags):
 *  - slots: 8 bytes (the slot header: index in its run, class, slack, tag,
 *    flags and a 16-bit check), plus the rounding to the slot size of the
 *    class (under 16 bytes up to 1 KiB, under 1/8 of the size above); a run
 *    adds 112 bytes for its whole set of slots.
 *  - untracked plain blocks (hk_zone_alloc & co. with the default tag, no owner, no
 *    name, no site): 8 bytes. The 16-byte header holds the size, tag, flags,
 *    slack and a 10-bit header check; its first 8 bytes (the previous
 *    block's size, needed only while that block is free) overlap the last 8
 *    bytes of the previous block. Blocks are 16-byte granular, minimum 32.
 *  - tracked blocks (a tag other than HK_TAG_STATIC, an owner, a name, a site,
 *    or any block in a zone with HK_ZONE_TRACK_ALL): 64 bytes: the header plus
 *    a 56-byte record at the end of the block (links in a per-tag list of
 *    records, the block's address, owner, name, site, allocation sequence).
 *    Each tag's records are dealt over 8 lists by allocation sequence, so
 *    free_tags follows 8 pointer chains at once instead of one.
 *  Trade-off: the per-tag lists that make free_tags and purge O(freed
 *  blocks) need two links per block; keeping them only on blocks that carry
 *  DOOM-style metadata keeps malloc-like use at 8 bytes per block. The cost:
 *  free_tags over a range that includes HK_TAG_STATIC also visits the
 *  untracked blocks with a heap walk (O(heap), skipped when there are none),
 *  and change_tag of an untracked block to another tag needs 56 spare bytes
 *  in or right after the block (see hk_zone_change_tag).
 *  HK_FLAG_CANARY adds at least 8 bytes per block.
 *  change_tag of a slot to any tag other than HK_TAG_STATIC fails: a slot
 *  has no room for a record (see hk_zone_change_tag).
 *
 * Limits: tags are 1..HK_ZONE_TAG_MAX; one block is at most 64 GiB - 16
 * bytes; a zone has at most HK_ZONE_MAX_REGIONS regions; alignment up to 2^34.
 *
 * Thread-safety: a zone is not thread-safe unless its desc carries lock
 * hooks, which every call below then takes (walk callbacks and on_error run
 * with the lock held: they must not call back into the zone). Different
 * zones are independent.
 *
 * Errors: misuse is reported through desc.on_error (or the default handler,
 * see heapkit.h) with the address and what was wrong; the zone is left
 * unchanged by the failing call, so check() still passes. Nothing aborts.
 */
#ifndef HEAPKIT_ZONE_H
#define HEAPKIT_ZONE_H

#include "heapkit/heapkit.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hk_zone hk_zone;

/* DOOM's purge tags (z_zone.h). Tags at or above the zone's purge level
 * (HK_TAG_PURGELEVEL unless the desc says otherwise) are purgeable. */
enum {
    HK_TAG_STATIC = 1,       /* stays until freed: the default tag */
    HK_TAG_SOUND = 2,        /* DOOM: static while playing */
    HK_TAG_MUSIC = 3,        /* DOOM: static while playing */
    HK_TAG_LEVEL = 50,       /* stays until the level exits */
    HK_TAG_LEVSPEC = 51,     /* a special thinker in a level */
    HK_TAG_PURGELEVEL = 100, /* tags >= this may be purged at any time */
    HK_TAG_CACHE = 101       /* cached data (DOOM's PU_CACHE) */
};

#define HK_ZONE_TAG_MAX     255 /* tags are 1..255 */
#define HK_ZONE_MAX_REGIONS 64  /* regions per zone (caller and OS regions together) */
#define HK_ZONE_MIN_REGION  256 /* a region smaller than this is refused */

/* Zone-specific desc flags, in addition to HK_FLAG_ZERO, HK_FLAG_FILL,
 * HK_FLAG_CANARY, HK_FLAG_PARANOID, HK_FLAG_RECORD_SITE and HK_FLAG_QUIET. */
enum {
    HK_ZONE_TRACK_ALL = 1u << 16, /* every block carries the 56-byte record (change_tag never needs room) */
    /* No small-block runs: every block, however small, is a boundary-tagged
     * TLSF block (see "Small-block runs" above). Slower for small blocks;
     * every untracked block can then take a tag record when it has room. */
    HK_ZONE_NO_RUNS = 1u << 17,
    /* Memory the zone takes from the OS (its first region without `memory`,
     * and every growth) is faulted in when it is taken (hk_os_prefault),
     * not on first use: no later allocation or free takes a page fault in
     * it, at the price of resident memory for the whole capacity and a
     * slower create and growth (about 0.25 ms per MiB on the test
     * machine). For real-time programs that size the zone up front. Caller
     * memory is left as it is. */
    HK_ZONE_PREFAULT = 1u << 18
};

/* Zero-initialisable. */
typedef struct hk_zone_desc {
    /* The first region. With `memory` the control block (about 31 KiB) lives
     * at its start and the rest is the heap; the OS is never called unless
     * grow_size is set. Without `memory`, `size` bytes (0: 1 MiB) are taken
     * from the OS. */
    void *memory;
    size_t size;
    /* Growth from the OS when a request cannot be met (after purging):
     * 0 never grows; otherwise the zone grows by chunks of at least
     * grow_size bytes, doubling with the OS memory taken so far, each up to
     * 256 MiB. A zone without `memory` reserves address space (64 GiB, or
     * max_size) after its first region on 64-bit hosts and grows that region
     * in place (commit the chunk; the old tail merges with it): one region,
     * so pointer checks stay cheap. Where the reservation is refused or used
     * up, chunks become new regions. A request larger than the chunk gets a
     * region of its own, returned to the OS as soon as it is entirely free
     * again; other memory is kept for reuse until destroy. */
    size_t grow_size;
    size_t max_size;  /* cap on the total capacity when growing (0: no cap) */
    int purge_level;  /* tags >= this are purgeable (0: HK_TAG_PURGELEVEL) */
    uint32_t flags;   /* HK_FLAG_*, HK_ZONE_* */
    const char *name; /* instance name for reports ("zone" when NULL); the pointer is kept */
    hk_error_fn on_error;
    void *error_user;
    hk_lock_hooks lock;
} hk_zone_desc;

/* Everything an allocation can say, for hk_zone_alloc_ex. Zero fields mean:
 * align 16, tag HK_TAG_STATIC, no owner, no name, no site. */
typedef struct hk_zone_alloc_desc {
    size_t size;      /* bytes asked for (0 gives a unique, valid pointer) */
    size_t align;     /* power of two; below 16 means 16 */
    int tag;          /* 1..HK_ZONE_TAG_MAX */
    void **owner;     /* set to the block on success, to NULL when the block is freed or purged */
    const char *name; /* kept by pointer (for dump and walk): use a string that outlives the block */
    const char *file; /* allocation site, kept only with HK_FLAG_RECORD_SITE */
    int line;
} hk_zone_alloc_desc;

/* Creates a zone. Returns NULL when desc is NULL, caller memory is too small
 * for the control block plus HK_ZONE_MIN_REGION bytes, or the OS refuses
 * memory. O(1) (plus O(size) for HK_FLAG_FILL). */
hk_zone *hk_zone_create(const hk_zone_desc *desc);

/* Destroys the zone and returns its OS memory; caller regions are left
 * alone. All blocks become invalid (owners are not cleared). NULL is ignored.
 * O(regions). */
void hk_zone_destroy(hk_zone *z);

/* Adds caller memory [memory, memory + size) as another region (16-byte
 * aligned inside; at most 64 GiB is used). The memory must not overlap
 * another region. Returns HK_ERR_INVALID (reported) for NULL, overlap or a
 * size below HK_ZONE_MIN_REGION, HK_ERR_NOMEM when the zone already has
 * HK_ZONE_MAX_REGIONS regions. O(regions). */
hk_result hk_zone_add_region(hk_zone *z, void *memory, size_t size);

/* Allocates `size` bytes, 16-byte aligned, tag HK_TAG_STATIC (Quake's
 * Z_Malloc). Returns NULL on failure and reports HK_EK_NOMEM with the request
 * size, or HK_EK_OVERFLOW for sizes above 64 GiB. Before failing, purgeable
 * blocks are purged oldest first, then the zone grows (if allowed), and the
 * allocation is retried. O(1) (see above). */
void *hk_zone_alloc(hk_zone *z, size_t size);

/* DOOM's Z_Malloc(size, tag, user): a block with a tag, an owner pointer
 * (may be NULL unless the tag is purgeable: a purgeable block needs an owner
 * to learn about the purge, as in DOOM) and a name (may be NULL). Bad tags
 * or a purgeable tag without owner report HK_EK_INVALID_ARG and return NULL. */
void *hk_zone_alloc_tagged(hk_zone *z, size_t size, int tag, void **owner, const char *name);

/* The general form; the others are shorthands for it. Also reports a
 * non-power-of-two alignment (HK_EK_INVALID_ARG). */
void *hk_zone_alloc_ex(hk_zone *z, const hk_zone_alloc_desc *d);

/* Allocates with the call site recorded (kept with HK_FLAG_RECORD_SITE). */
#define HK_ZONE_ALLOC(z, size)                                                                               \
    hk_zone_alloc_ex((z), &(hk_zone_alloc_desc){(size), 0, HK_TAG_STATIC, NULL, NULL, __FILE__, __LINE__})

/* count * size zeroed bytes; overflow of the product reports HK_EK_OVERFLOW
 * and returns NULL. O(1) plus the zeroing. */
void *hk_zone_calloc(hk_zone *z, size_t count, size_t size);

/* `size` bytes aligned to `align` (a power of two up to 2^34); the
 * alignment is kept when the block is reallocated. Bad alignment reports
 * HK_EK_INVALID_ARG and returns NULL. O(1). */
void *hk_zone_memalign(hk_zone *z, size_t align, size_t size);

/* Resizes the block at p. Shrinks in place (the surplus, if 32 bytes or
 * more, becomes free); grows in place into a free block right after it;
 * otherwise allocates a new block with the same tag, owner, name and
 * alignment, copies, and frees the old one (the owner then points to the new
 * block). A slot (see "Small-block runs") stays in place while the new size
 * fits it and uses at least half of it (or belongs to its class), and otherwise moves to the class of
 * the new size (or to a plain block above 16376 bytes). p NULL acts as
 * alloc; size 0 keeps a minimal block (it does not free). On failure
 * returns NULL and the block at p is unchanged. A bad p is
 * reported as by hk_zone_free and NULL returned. O(1) plus the copy. */
void *hk_zone_realloc(hk_zone *z, void *p, size_t size);

/* Frees the block at p and merges it with free neighbours; its owner, if
 * any, is set to NULL (DOOM's Z_Free). p NULL is a no-op returning HK_OK.
 * Returns and reports: HK_ERR_FOREIGN for a pointer outside the zone's
 * regions (HK_EK_FOREIGN_PTR), HK_ERR_INVALID for a pointer inside a block
 * (HK_EK_INTERIOR_PTR), HK_ERR_DOUBLE_FREE for a block already free or a
 * pointer into free space, HK_ERR_CORRUPT for a damaged header (the block is
 * left alone). A damaged canary or free-fill is reported (HK_ERR_CORRUPT)
 * and the block is freed anyway. O(1). */
hk_result hk_zone_free(hk_zone *z, void *p);

/* Bytes usable at p (at least the size asked for; exactly that size with
 * HK_FLAG_CANARY). 0 for NULL or a bad pointer (reported as by free). O(1). */
size_t hk_zone_usable_size(hk_zone *z, const void *p);

/* True when p is the start of a used block of this zone. Does not report.
 * O(log regions). */
bool hk_zone_owns(hk_zone *z, const void *p);

/* DOOM's Z_ChangeTag. A block that becomes purgeable must have an owner
 * (HK_ERR_INVALID otherwise). The block moves to the newest end of the new
 * tag's list (it is purged last among its peers). An untracked block
 * (allocated with the default tag and no owner/name/site) gets its 56-byte
 * record from its own slack or the free block after it; when neither has
 * room, returns HK_ERR_NOMEM (reported) and the tag is unchanged: allocate
 * such blocks with hk_zone_alloc_tagged or use HK_ZONE_TRACK_ALL. A slot
 * (a small block from hk_zone_alloc, see "Small-block runs") never has
 * room: any tag but HK_TAG_STATIC gives HK_ERR_NOMEM (HK_ERR_INVALID for a
 * purgeable tag, which needs an owner). O(1). */
hk_result hk_zone_change_tag(hk_zone *z, void *p, int tag);

/* The tag of the block at p, or 0 for a bad pointer (reported). O(1). */
int hk_zone_tag(hk_zone *z, const void *p);

/* DOOM's Z_FreeTags: frees every block with lo <= tag <= hi, clearing
 * owners first (all owners are cleared before any block is freed). Returns
 * the number of blocks freed. O(blocks freed + tags in range), plus a heap
 * walk when the range holds HK_TAG_STATIC and untracked blocks exist. */
size_t hk_zone_free_tags(hk_zone *z, int lo, int hi);

/* Purges every purgeable block whose tag is >= level (level below the
 * zone's purge level means the purge level), oldest first, clearing owners.
 * Returns the number of blocks purged. O(blocks purged x purgeable tags). */
size_t hk_zone_purge(hk_zone *z, int level);

/* Introspection (see heapkit.h). stats is O(1): largest_free is the largest
 * request guaranteed to succeed now without purging or growing. walk visits
 * every block, used and free, region by region in address order. check
 * verifies every header check, size, boundary tag (a free block's size is
 * repeated in the next header and that header says its predecessor is free),
 * the no-two-free-neighbours rule, every free list (links, class, bitmap
 * bits both ways, counts), every tag list (links, tags, order, counts), every
 * canary (HK_FLAG_CANARY), every free fill (HK_FLAG_FILL) and the counters;
 * it reports the first problem and returns HK_ERR_CORRUPT. */
hk_result hk_zone_stats(const hk_zone *z, hk_stats *out);
int hk_zone_walk(hk_zone *z, hk_walk_fn fn, void *user);
hk_result hk_zone_check(hk_zone *z);

/* Finds the block (used or free) containing addr, header included. Returns
 * HK_OK and fills *info, or HK_ERR_FOREIGN. O(blocks in that region). */
hk_result hk_zone_where(hk_zone *z, const void *addr, hk_block_info *info);

/* Z_DumpHeap: prints every block (address, size, tag, owner, name, site)
 * and totals per tag to `out` (a FILE*; NULL means stdout). */
void hk_zone_dump(hk_zone *z, void *out);

#ifdef __cplusplus
}
#endif

#endif /* HEAPKIT_ZONE_H */

/*
 * heapkit/zone.h - the zone: an O(1) general-purpose heap with DOOM/Quake
 * semantics (tags, purge levels, owner pointers, free-by-tag).
 *
 * Algorithm: two-level segregated fit (TLSF) with boundary tags: free
 * blocks sit in size classes found with two bit scans; a freed block is
 * merged at once with free neighbours. Small untracked requests (at most
 * 16384 bytes, from hk_zone_alloc, hk_zone_calloc and hk_zone_realloc) are
 * "small blocks": slots of 72 size classes (8-byte steps to 64 bytes, then
 * steps of at most 12.5%) in 64 KiB runs, each run one aligned granule of
 * address space the zone reserves for them, with no header in front of a
 * block: a free finds the run by masking the address and checks the block
 * in the run's side tables (foreign, interior, double free: every free is
 * checked). On by default in a zone that may take memory from the OS (no
 * `memory` in the desc, or a grow_size); off with HK_ZONE_NO_RUNS, any
 * debug flag, and in a zone confined to caller memory, where every block
 * is a TLSF block. A small block of n bytes is aligned to the largest
 * power of two, up to 16, that divides n rounded up to 8 (a 24-byte block
 * to 8, a 48-byte one to 16): what C asks of an object of its size. Every
 * other block is 16-byte aligned (or as asked). Tagged, owned, named,
 * site-recorded or aligned allocations (hk_zone_alloc_tagged, _ex,
 * _aligned) are TLSF blocks. Untracked TLSF blocks (default tag, no owner,
 * name or site) carry an 8-byte header; tracked ones also a record that
 * links them into their tag's lists. docs/zone.md gives the layout, the
 * byte costs, the fragmentation bound and measurements.
 *
 * Complexity: alloc, free, calloc (plus the zeroing), alloc_aligned, realloc
 * in place (plus the copy when it moves), usable_size, change_tag: O(1) in
 * the number of blocks and in the heap size: a fixed number of bit scans
 * and list operations; pointer validation adds a binary search over the
 * regions (O(log regions), at most HK_ZONE_MAX_REGIONS). When a request
 * cannot be met, each purged block costs O(distinct purgeable tags in use)
 * and growing from the OS costs one mmap. free_tags and purge cost
 * O(blocks freed + distinct tags in the range), except that a range holding
 * HK_TAG_STATIC also walks the heap for untracked blocks (see
 * hk_zone_free_tags). walk, check, where and dump are O(blocks).
 *
 * When allocation fails: only when, after purging every purgeable block
 * (oldest first) and growing (if the desc allows), no free block of the
 * request's rounded-up size class exists (a small request the small-block
 * space cannot serve falls back to a TLSF block). So
 * a request may fail while a free block up to 1/32 larger than the request
 * is available, but never when one of the next class exists.
 *
 * Limits: tags are 1..HK_ZONE_TAG_MAX; one block is at most 64 GiB - 16
 * bytes; a zone has at most HK_ZONE_MAX_REGIONS regions; alignment up to 2^34.
 *
 * Thread-safety: a zone is not thread-safe unless its desc carries lock
 * hooks, which every call below then takes (walk callbacks, dump output and
 * on_error run with the lock held: they must not call back into the zone),
 * or HK_ZONE_THREADS. With HK_ZONE_THREADS each thread has its own heap of
 * small-block runs: hk_zone_alloc, calloc, realloc and free of small blocks
 * take no lock and no atomic read-modify-write on the thread's own blocks;
 * a block freed by another thread sets its bit in its run's remote bitmap
 * (one atomic or, still checked) and goes back to its heap's free lists
 * when the owner next runs short of blocks in that run or that class, or
 * at the latest about 5,000 of the owner's allocations later (its first
 * poll once 1,024 have passed; or when it calls hk_zone_trim; a misuse
 * found there is reported then). Every other path
 * takes the zone's lock (the hooks, or the zone's own mutex). alloc*,
 * calloc, realloc, free, usable_size, owns, tag, change_tag, stats and
 * get_info may run concurrently from any threads; free_tags, purge, check,
 * walk, dump, where and destroy need the other threads quiescent (not
 * inside a call on this zone), e.g. a level unload between frames. A
 * thread's heap is abandoned when it exits (its empty runs given back) and
 * adopted by the next thread that needs one; its blocks stay valid and may
 * be freed from anywhere. One race is not caught: a block freed by two
 * threads at the same instant, whose owner also reuses it before it
 * collects the other thread's free, is freed again under its new user
 * (every other double free is reported, at the latest at the collection).
 * Different zones are independent.
 *
 * Errors: misuse is reported through desc.on_error (or the default handler,
 * see heapkit.h) with the address and what was wrong; the zone is left
 * unchanged by the failing call, so check() still passes. Nothing aborts.
 *
 * Ownership: the zone never frees caller memory (the desc's `memory`,
 * regions added with hk_zone_add_region); it keeps the name, owner and
 * site pointers it is given, so those must outlive the zone or the block.
 */
#ifndef HEAPKIT_ZONE_H
#define HEAPKIT_ZONE_H

#include "heapkit/heapkit.h"

#ifdef __cplusplus
extern "C" {
#endif
HK_API_BEGIN

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
    HK_ZONE_TRACK_ALL = 1u << 16, /* every block carries a tag record (change_tag never needs room) */
    /* No small blocks: every block, however small, is a boundary-tagged
     * TLSF block (16-byte aligned, an 8-byte header). Slower for small
     * blocks; every untracked block can then take a tag record when it has
     * room (see hk_zone_change_tag). */
    HK_ZONE_NO_RUNS = 1u << 17,
    /* Memory the zone takes from the OS (its first region without `memory`,
     * and every growth) is faulted in when it is taken, not on first use:
     * no later allocation or free takes a page fault in it, at the price of
     * resident memory for the whole capacity and a slower create and growth
     * (O(bytes taken); docs/zone.md has the cost measured). For real-time
     * programs that size the zone up front. Caller memory is left as it is.
     * Such a zone gives no free page back by decay unless decay_ms is set;
     * pages given back by hk_zone_trim fault again when reused. */
    HK_ZONE_PREFAULT = 1u << 18,
    /* Per-thread heaps: any number of threads use the zone at once with no
     * user lock. Each thread allocates small untracked blocks (hk_zone_alloc,
     * calloc, realloc up to 16384 bytes) from runs of its own heap and frees
     * its own blocks with no lock and no atomic read-modify-write; a block
     * freed by another thread is handed to its owner lock-free (and still
     * checked). Everything else (tagged, owned, named, aligned and large
     * blocks, free_tags, purge, walk, check, dump, where, stats) goes
     * through the zone's lock: the desc's lock hooks, or the zone's own
     * mutex when the desc has none. See "Thread-safety" above. Ignored
     * (the zone is then only locked) where small blocks are off. */
    HK_ZONE_THREADS = 1u << 19
};

/* Zero-initialisable. */
typedef struct hk_zone_desc {
    /* The first region. With `memory` the control block (its size is
     * hk_zone_info.control_bytes) lives at its start and the rest is the
     * heap; the OS is never called unless grow_size is set. Without
     * `memory`, `size` bytes (0: 1 MiB) are taken from the OS. */
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
     * again; other memory keeps its address space until destroy, while its
     * free pages go back to the OS by decay (decay_ms) or hk_zone_trim. */
    size_t grow_size;
    size_t max_size;  /* cap on the total capacity when growing (0: no cap) */
    int purge_level;  /* tags >= this are purgeable (0: HK_TAG_PURGELEVEL) */
    uint32_t flags;   /* HK_FLAG_*, HK_ZONE_* */
    const char *name; /* instance name for reports ("zone" when NULL); the pointer is kept */
    hk_error_fn on_error;
    void *error_user;
    hk_lock_hooks lock;
    /* Decay time in milliseconds of free memory the zone took from the OS:
     * pages that stay free this long are given back to the OS (their
     * address space kept), between half of it and all of it after they
     * were freed, when the zone is called meanwhile (see hk_zone_trim). 0
     * means 500 ms, or never with HK_ZONE_PREFAULT (whose promise of no
     * page fault on reuse a decay would break); negative: never by time,
     * only by hk_zone_trim. Caller memory is never given back; nothing is
     * with HK_FLAG_FILL. */
    int decay_ms;
} hk_zone_desc;

/* Everything an allocation can say, for hk_zone_alloc_ex. Zero fields mean:
 * align 16, tag HK_TAG_STATIC, no owner, no name, no site. */
typedef struct hk_zone_alloc_desc {
    size_t size;      /* bytes asked for (0 gives a unique, valid pointer) */
    size_t align;     /* 0 or a power of two; below 16 means 16 */
    int tag;          /* 1..HK_ZONE_TAG_MAX */
    void **owner;     /* set to the block on success, to NULL when the block is freed or purged */
    const char *name; /* kept by pointer (for dump and walk): use a string that outlives the block */
    const char *file; /* allocation site, kept only with HK_FLAG_RECORD_SITE */
    int line;
} hk_zone_alloc_desc;

/* Creates a zone. Returns NULL when desc is NULL, and after a report
 * through desc.on_error when the desc has only one of lock/unlock
 * (HK_EK_INVALID_ARG), caller memory is too small for the control block
 * plus HK_ZONE_MIN_REGION bytes (HK_EK_INVALID_ARG), or the OS refuses
 * memory (HK_EK_NOMEM). O(1) (plus O(size) for HK_FLAG_FILL or
 * HK_ZONE_PREFAULT). */
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

/* Allocates `size` bytes, tag HK_TAG_STATIC (Quake's Z_Malloc): 16-byte
 * aligned, or a small block aligned as its size asks (see above). Returns NULL on failure and reports
 * HK_EK_NOMEM with the request size, or HK_EK_OVERFLOW for sizes above 64 GiB. Before failing, purgeable
 * blocks are purged oldest first, then the zone grows (if allowed), and the
 * allocation is retried. O(1) (see above). */
void *hk_zone_alloc(hk_zone *z, size_t size) HK_MALLOC HK_ALLOC_SIZE(2);

/* DOOM's Z_Malloc(size, tag, user): a block with a tag, an owner pointer
 * (may be NULL unless the tag is purgeable: a purgeable block needs an owner
 * to learn about the purge, as in DOOM) and a name (may be NULL). Bad tags
 * or a purgeable tag without owner report HK_EK_INVALID_ARG and return NULL.
 * A TLSF block with its tag record, O(1) (under the lock with lock hooks or
 * HK_ZONE_THREADS). (Not declared HK_MALLOC: *owner holds the block's
 * address on return.) */
void *hk_zone_alloc_tagged(hk_zone *z, size_t size, int tag, void **owner, const char *name) HK_ALLOC_SIZE(2);

/* The general form; the others are shorthands for it. Also reports a
 * non-power-of-two alignment (HK_EK_INVALID_ARG). (Not HK_MALLOC: d->owner
 * may hold the block's address on return.) */
void *hk_zone_alloc_ex(hk_zone *z, const hk_zone_alloc_desc *d);

/* Allocates with the call site recorded (kept with HK_FLAG_RECORD_SITE). */
#define HK_ZONE_ALLOC(z, size)                                                                               \
    hk_zone_alloc_ex((z), &(hk_zone_alloc_desc){(size), 0, HK_TAG_STATIC, NULL, NULL, __FILE__, __LINE__})

/* count * size zeroed bytes; overflow of the product reports HK_EK_OVERFLOW
 * and returns NULL. O(1) plus the zeroing. */
void *hk_zone_calloc(hk_zone *z, size_t count, size_t size) HK_MALLOC HK_ALLOC_SIZE2(2, 3);

/* `size` bytes aligned to `align` (a power of two up to 2^34; 0 and powers
 * of two below 16 mean 16; any other value, 3 or 48 say, is refused), tag HK_TAG_STATIC, like C's
 * aligned_alloc (alignment first); the alignment is kept when the block is reallocated. Bad alignment reports
 * HK_EK_INVALID_ARG and returns NULL; otherwise fails as hk_zone_alloc. O(1). */
void *hk_zone_alloc_aligned(hk_zone *z, size_t align, size_t size) HK_MALLOC HK_ALLOC_ALIGN(2)
    HK_ALLOC_SIZE(3);

/* Resizes the block at p. Shrinks in place (the surplus, if 32 bytes or
 * more, becomes free); grows in place into a free block right after it;
 * otherwise allocates a new block with the same tag, owner, name and
 * alignment, copies, and frees the old one (the owner then points to the new
 * block). A small block stays in place while the new size fits it, uses at
 * least half of it (or belongs to its class) and asks no more alignment than
 * it has, and otherwise moves to the class of the new size (or to a TLSF
 * block above 16384 bytes). p NULL
 * acts as alloc; size 0 keeps a minimal block (it does not free). On failure
 * returns NULL and the block at p is unchanged. A bad p is reported as by
 * hk_zone_free and NULL returned. O(1) plus the copy. */
void *hk_zone_realloc(hk_zone *z, void *p, size_t size) HK_ALLOC_SIZE(3);

/* Frees the block at p and merges it with free neighbours; its owner, if
 * any, is set to NULL (DOOM's Z_Free). p NULL is a no-op returning HK_OK.
 * Returns and reports: HK_ERR_FOREIGN for a pointer outside the zone's
 * regions (HK_EK_FOREIGN_PTR), HK_ERR_INVALID for a pointer inside a block
 * (HK_EK_INTERIOR_PTR), HK_ERR_DOUBLE_FREE for a block already free or a
 * pointer into free space, HK_ERR_CORRUPT for a damaged header (the block is
 * left alone). A damaged canary or free-fill is reported (HK_ERR_CORRUPT)
 * and the block is freed anyway. A small block is judged in its run's side
 * tables: HK_ERR_INVALID for a pointer inside it or inside its run's header,
 * HK_ERR_DOUBLE_FREE for one already free (its first word is the free
 * list's link, encoded with the run's secret: a used block whose first word
 * happens to decode to one costs a search of its run's list), freed by
 * another thread and not collected yet, or never handed out. O(1), but
 * O(free blocks of the run) for such a search. */
hk_result hk_zone_free(hk_zone *z, void *p);

/* Bytes usable at p (at least the size asked for; exactly that size with
 * HK_FLAG_CANARY). 0 for NULL or a bad pointer (reported as by free). In a
 * heapkit built with AddressSanitizer the bytes past the size asked for
 * stay poisoned (all but the last 8 usable ones: an overrun is reported at
 * once), so there only the size asked for may be written. O(1). */
size_t hk_zone_usable_size(hk_zone *z, const void *p);

/* True when p is the start of a used block of this zone. Does not report.
 * O(log regions). */
bool hk_zone_owns(hk_zone *z, const void *p);

/* DOOM's Z_ChangeTag. A block that becomes purgeable must have an owner
 * (HK_ERR_INVALID otherwise). The block moves to the newest end of the new
 * tag's list (it is purged last among its peers). An untracked block
 * (allocated with the default tag and no owner/name/site) gets its tag
 * record from its own slack or the free block after it; when neither has
 * room, returns HK_ERR_NOMEM (reported) and the tag is unchanged: allocate
 * such blocks with hk_zone_alloc_tagged or use HK_ZONE_TRACK_ALL. A small
 * block never has room: any tag but HK_TAG_STATIC gives HK_ERR_NOMEM
 * (HK_ERR_INVALID for a purgeable tag, which needs an owner).
 * O(1). */
hk_result hk_zone_change_tag(hk_zone *z, void *p, int tag);

/* The tag of the block at p, or 0 for a bad pointer (reported). O(1). */
int hk_zone_tag(hk_zone *z, const void *p);

/* DOOM's Z_FreeTags: frees every block with lo <= tag <= hi, clearing
 * owners first (all owners are cleared before any block is freed). Returns
 * the number of blocks freed. O(blocks freed + tags in range), plus a heap
 * walk when the range holds HK_TAG_STATIC and untracked blocks exist, which
 * also frees every small block, each run at once (O(runs)). In a
 * HK_ZONE_THREADS zone the other threads must be quiescent (see
 * Thread-safety above). */
size_t hk_zone_free_tags(hk_zone *z, int lo, int hi);

/* Purges every purgeable block whose tag is >= level (level below the
 * zone's purge level means the purge level), oldest first, clearing owners.
 * Returns the number of blocks purged. O(blocks purged x purgeable tags). */
size_t hk_zone_purge(hk_zone *z, int level);

/* Introspection (see heapkit.h). stats is O(heaps + granules of the small
 * blocks' space): it sums the used slots of every run (64 KiB each, less
 * the blocks other threads freed that the owner has not collected: their
 * bits, read for the runs that have some) and each heap's allocation count
 * (a HK_ZONE_THREADS zone has one heap per thread); read
 * while other threads allocate, the small blocks' figures are near the
 * values they held, exact when those threads are quiet. A small block
 * counts its slot as the bytes asked for (no
 * header keeps the request). peak_used is the highest total seen by the
 * TLSF paths and by stats. largest_free is the largest request guaranteed
 * to succeed now without purging or growing. walk visits every TLSF block,
 * used and free, region by region in address order, then every used small
 * block, run by run. check verifies every header check, size, boundary tag
 * (a free block's size is repeated in the next header and that header says
 * its predecessor is free), the no-two-free-neighbours rule, every free
 * list (links, class, bitmap bits both ways, counts), every tag list
 * (links, tags, order, counts), every canary (HK_FLAG_CANARY), every free
 * fill (HK_FLAG_FILL), the counters, and every small-block run (its fixed
 * fields, its free list against its count, its remote bits, its class list
 * and state, the heaps' granules against the space's); it reports the first
 * problem and returns HK_ERR_CORRUPT. */
hk_result hk_zone_stats(const hk_zone *z, hk_stats *out);
int hk_zone_walk(hk_zone *z, hk_walk_fn fn, void *user);
hk_result hk_zone_check(hk_zone *z);

/* Finds the block (used or free) containing addr, header included. Returns
 * HK_OK and fills *info, or HK_ERR_FOREIGN. O(blocks in that region). */
hk_result hk_zone_where(hk_zone *z, const void *addr, hk_block_info *info);

/* Zone-specific counters (hk_zone_stats gives the common ones). */
typedef struct hk_zone_info {
    size_t control_bytes;     /* the control block at the start of the first region */
    size_t grown_bytes;       /* OS memory taken by growth (regions of one large request not counted) */
    uint32_t regions;         /* regions in use */
    int purge_level;          /* tags >= this are purgeable */
    size_t runs;              /* small-block runs (granules held by the heaps, spares included) */
    size_t run_bytes;         /* runs x 64 KiB (slots, free or used, and run headers) */
    uint64_t runs_made;       /* small-block runs laid out since creation (a granule taken for a class) */
    size_t slot_bytes;        /* bytes of the used small blocks (their slots) */
    size_t untracked_blocks;  /* live TLSF blocks without a tag record (small blocks not counted) */
    uint64_t purge_count;     /* blocks purged since creation */
    uint64_t grow_count;      /* times the zone grew from the OS */
    size_t decommitted_bytes; /* free bytes whose pages are given back to the OS now (counted in free) */
    uint64_t decommit_count;  /* page ranges given back since creation */
} hk_zone_info;
/* Fills *out. HK_ERR_INVALID for NULL arguments. O(heaps + granules), as
 * stats (slot_bytes is summed over the runs). */
hk_result hk_zone_get_info(const hk_zone *z, hk_zone_info *out);

/* Gives the zone's free memory back to the OS now, keeping its address
 * space (malloc_trim). First the small-block runs: the calling thread's
 * empty runs (its current ones too) and spares, every other heap's spares
 * (taken atomically), the abandoned heaps' empty runs (their remote frees
 * collected first), then the pages of every free granule; then every whole
 * page of every free TLSF block (past its first 32 bytes) that is not
 * given back yet, with madvise(MADV_DONTNEED) on POSIX hosts: the resident
 * size drops at once. Memory later used again faults fresh pages in.
 * Returns the bytes given back by this call (0 for NULL, for a zone on
 * caller memory only, with HK_FLAG_FILL, or when nothing was left).
 * Statistics do not change (free memory stays free, in
 * hk_zone_info.decommitted_bytes); check still passes. The OS refusing a
 * range leaves those pages resident (tried again at the next trim); no
 * report. Thread-safety: takes the zone's lock; with HK_ZONE_THREADS it
 * may run while other threads allocate and free. O(free blocks of at least
 * a page + runs + heaps), plus one madvise per range given back. Memory
 * freed later goes back by the decay (hk_zone_desc.decay_ms), which reads
 * the clock only inside zone calls (a TLSF block freed, and every few
 * small frees of a heap while something waits to go back), free granules
 * included: a new run takes a free granule whose last run was of its own
 * class when there is one (its pages are those that class touches). A
 * zone nobody calls keeps its pages until trimmed. */
size_t hk_zone_trim(hk_zone *z);

/* Z_DumpHeap: writes every block (address, size, tag, owner, name, site),
 * every run, and totals per tag to fn (NULL: hk_print_file, with user the
 * FILE*, NULL meaning stdout), a line per call. Does not allocate.
 * O(blocks). */
void hk_zone_dump(hk_zone *z, hk_print_fn fn, void *user);

HK_API_END

#ifdef __cplusplus
}
#endif

#endif /* HEAPKIT_ZONE_H */

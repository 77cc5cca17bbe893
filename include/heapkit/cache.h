/*
 * heapkit/cache.h - movable, purgeable blocks reached through handles: the
 * Macintosh Memory Manager's relocatable blocks and Quake's cache, with the
 * compaction Quake never wrote (Cache_Compact).
 *
 * A block is reached through a handle (hk_cache_handle: 32 bits, index plus
 * generation, 0 = none). The handle table lives apart from the data, so
 * blocks can move: hk_cache_deref(h) gives the block's address now.
 *
 *   hk_cache *c = hk_cache_create(&(hk_cache_desc){.size = 8 << 20});
 *   hk_cache_handle h = hk_cache_alloc(c, 4096, "skin");
 *   float *p = hk_cache_deref(c, h);          // valid until a call that moves
 *   hk_cache_set_purgeable(c, h, true);       // may be thrown out when short
 *   ...
 *   if (!hk_cache_deref(c, h)) reload(h);     // purged: refill with reallocate
 *
 * WHICH CALLS MOVE BLOCKS (and so invalidate every address obtained from
 * hk_cache_deref for an unlocked block):
 *     hk_cache_alloc, hk_cache_reallocate, hk_cache_resize, hk_cache_compact,
 *     hk_cache_compact_step, hk_cache_move_high, hk_cache_lock_high, and any
 *     allocation of the hunk the cache lives in (hk_hunk_alloc*, including
 *     the temp block).
 * Calls that may PURGE purgeable unlocked blocks (their deref becomes NULL):
 *     the same list, plus hk_cache_purge and hk_cache_purge_all.
 * Every other call leaves every block where it is. A locked block
 * (lock count > 0) never moves and is never purged; its address stays valid
 * until it is unlocked and a moving call runs.
 *
 * Allocation when space is short follows the Mac's order: fit a free block;
 * else compact (slide unlocked blocks down around locked ones); else purge
 * purgeable unlocked blocks, least recently used first (alloc, reallocate,
 * deref, deref_fast and touch make a block most recently used, and so does
 * becoming a purge candidate: set_purgeable(true) on an unlocked block, the
 * last unlock of a purgeable one); else call the grow callback and start
 * again while it reports progress; else fail cleanly (NULL handle, reported
 * as HK_EK_NOMEM).
 *
 * Layout: the data region is a sequence of 16-byte aligned blocks tiling it
 * in address order, each with a header (handle back-pointer, sizes) and a
 * canary after the user bytes; free blocks are coalesced. The handle table
 * lives apart from the region (its size is fixed at creation by
 * max_handles). Bytes per block and per handle: docs/cache.md;
 * hk_cache_get_info reports the table's bytes.
 *
 * Thread-safety: an instance is not thread-safe unless its desc carries lock
 * hooks; every call then takes the lock (hk_cache_deref_fast defers to
 * hk_cache_deref, which takes it). Callbacks: see hk_cache_desc.
 * Errors: misuse is reported through desc.on_error (heapkit.h) and the cache
 * stays consistent. Nothing here aborts.
 */
#ifndef HEAPKIT_CACHE_H
#define HEAPKIT_CACHE_H

#include "heapkit/detail/cache.h"
#include "heapkit/heapkit.h"
#include "heapkit/hunk.h"

#ifdef __cplusplus
extern "C" {
#endif
HK_API_BEGIN

typedef struct hk_cache hk_cache;

/* A block's handle: 0 = none, else index + generation from heapkit's shared
 * generational handle table (the one under pool IDs and gc references). A
 * freed handle's slot is not reused while fresh slots remain, then only in
 * FIFO order; a slot whose generations run out is retired, never reused.
 * Compare values with ==.
 *
 * Misuse of a handle is answered the same way by every call (the table's
 * verdict; each is reported once through on_error and changes nothing):
 *
 *   handle                                      result              kind
 *   the none handle (0)                         HK_ERR_INVALID      HK_EK_INVALID_ARG
 *   another cache's, or one never issued        HK_ERR_FOREIGN      HK_EK_FOREIGN_PTR
 *   freed, then freed again (its slot not yet   HK_ERR_DOUBLE_FREE  HK_EK_DOUBLE_FREE
 *     reused)
 *   freed, then used by any other call, or      HK_ERR_STALE        HK_EK_STALE
 *     freed after its slot was reused
 *
 * Calls that return no hk_result (deref, size, lock_count) return NULL or 0
 * after the same report; hk_cache_is_purged reports nothing. A purged
 * handle is not misuse: it stays live and empty. */
typedef struct hk_cache_handle {
    uint32_t value;
} hk_cache_handle;

/* Cache flags, in addition to HK_FLAG_ZERO, HK_FLAG_FILL, HK_FLAG_PARANOID,
 * HK_FLAG_QUIET (canaries are always on). With HK_FLAG_PARANOID (or
 * HK_DEBUG >= 3) every call that changes blocks, handles, lock counts or
 * flags ends with the full check (reads, deref and touch do not), and
 * hk_cache_deref_fast always takes hk_cache_deref. */
enum {
    /* HeapQC's scramble: every call that may move blocks first moves every
     * unlocked block that has room to move (alternately to the top and to
     * the bottom of the region) and fills all free space with HK_FILL_FREE,
     * so a raw address held across such a call reads garbage at once. Slow:
     * O(region) per allocation. For tests. */
    HK_CACHE_SCRAMBLE = 1u << 16
};

/* Called when a block is purged (by the cache when space is short, by a
 * hunk allocation, or by hk_cache_purge/purge_all), just before its bytes
 * are released: `data` and `size` are still readable. The handle stays
 * valid and becomes empty. Runs inside the cache operation with its lock
 * held: it must not call the cache. */
typedef void (*hk_cache_purge_fn)(hk_cache *c, hk_cache_handle h, void *data, size_t size, void *user);

/* The Mac's grow-zone procedure: called when an allocation of `needed`
 * bytes (block size) still fails after compacting and purging. It may free
 * or purge blocks of this cache, unlock them, make them purgeable, or (for a
 * cache inside a hunk) free hunk memory so the cache can take more of the
 * middle. It returns non-zero when it did something, and the cache then
 * tries again (fit, compact, purge, grow: at most 64 rounds per
 * allocation); 0 ends the attempt. The lock is released while it runs, so
 * it may call the cache; a nested allocation does not call it again. */
typedef size_t (*hk_cache_grow_fn)(hk_cache *c, size_t needed, void *user);

/* Zero-initialisable. */
typedef struct hk_cache_desc {
    /* Memory for the whole cache: control block, handle table and data
     * region (or, with `hunk`, only the control block and the table). NULL:
     * the OS provides it. */
    void *memory;
    /* Bytes of `memory`; without memory, bytes of the data region to get
     * from the OS (0: 16 MiB). Ignored for the data region with `hunk`. */
    size_t size;
    /* When set, the data region is the free middle of this hunk (Quake): the
     * cache claims all of it at creation and gives bytes back when hunk
     * allocations reach into it (moving blocks out of the way, purging
     * purgeable ones that cannot move; locked or unmovable non-purgeable
     * blocks make the hunk allocation fail). It takes more of the middle
     * again, when the hunk has freed some, on an allocation that does not
     * fit. At most one cache per hunk; destroy the cache before the hunk. */
    hk_hunk *hunk;
    /* Handle table capacity (0: data bytes / 1024 rounded down to 2^k - 1,
     * from 63 to 2^20 - 1; at most 2^24 - 1). The hot entries are counted
     * in the power of two above max_handles, so 2^k - 1 wastes none. */
    uint32_t max_handles;
    uint32_t flags;   /* HK_FLAG_* and HK_CACHE_* */
    const char *name; /* instance name for reports ("cache" when NULL); the pointer is kept */
    hk_cache_purge_fn on_purge;
    void *purge_user;
    hk_cache_grow_fn grow;
    void *grow_user;
    hk_error_fn on_error;
    void *error_user;
    hk_lock_hooks lock;
} hk_cache_desc;

/* Creates a cache. Returns NULL when desc is NULL, its lock hooks have only
 * one of lock and unlock (reported as HK_EK_INVALID_ARG), the memory is too small
 * for the control block, a table of 64 handles and 64 bytes of data (or, with
 * a hunk, the control block and table), the hunk already has a tenant, memory
 * + size runs past the end of the address space (reported as
 * HK_EK_INVALID_ARG; checked before a byte is written), or the OS refuses
 * (reported as HK_EK_NOMEM). With `hunk` and no memory, the control block and table come
 * from the OS. O(max_handles) (the table is cleared). */
hk_cache *hk_cache_create(const hk_cache_desc *desc);

/* Destroys the cache: every handle becomes invalid; OS memory is released,
 * caller memory is left alone; a hunk gets its middle back. NULL is
 * ignored. O(1). */
void hk_cache_destroy(hk_cache *c);

/* Allocates a block of `size` bytes (16-byte aligned address; 0 allowed)
 * named `name` (the pointer is kept: pass a string that outlives the block;
 * NULL is allowed) and returns its handle, not locked, not purgeable, most
 * recently used. MAY MOVE AND PURGE BLOCKS (see the top of this file).
 * Returns the none handle (value 0) and reports HK_EK_NOMEM when the space
 * cannot be found (see the allocation order) or the handle table is full,
 * HK_EK_OVERFLOW for sizes near SIZE_MAX. O(1) when a free block fits (a
 * good fit from two-level free lists: the head of the request's bin, else
 * the first non-empty bin above it found by two bitmaps, else at most 16
 * blocks of its bin when nothing larger is free; docs/cache.md);
 * O(region) when no block fits and it compacts; O(1) per block purged
 * when it purges (the least recently used candidate is at the head of a
 * list; docs/realtime.md has the bounds). */
hk_cache_handle hk_cache_alloc(hk_cache *c, size_t size, const char *name);

/* Frees the block and its handle (purged handles too); the handle becomes
 * stale. Returns HK_ERR_LOCKED (reported, nothing freed) for a locked block,
 * HK_ERR_CORRUPT (reported, freed anyway) when the canary was damaged, and
 * for a handle that is not live (reported) HK_ERR_DOUBLE_FREE, HK_ERR_STALE,
 * HK_ERR_FOREIGN or HK_ERR_INVALID as in the table at hk_cache_handle. Never
 * moves other blocks. O(1). */
hk_result hk_cache_free(hk_cache *c, hk_cache_handle h);

/* The block's current address, and marks it most recently used (Quake
 * Cache_Check). NULL, without a report, when the handle is empty (purged);
 * NULL with a report (HK_EK_STALE, HK_EK_FOREIGN_PTR, HK_EK_INVALID_ARG for
 * the none handle: the table at hk_cache_handle) when the handle is not
 * live. Never moves anything. O(1). */
void *hk_cache_deref(hk_cache *c, hk_cache_handle h);

/* Marks the block most recently used without returning its address.
 * HK_OK for live handles (purged ones too), otherwise HK_ERR_STALE,
 * HK_ERR_FOREIGN or HK_ERR_INVALID (reported). O(1). */
hk_result hk_cache_touch(hk_cache *c, hk_cache_handle h);

/* Requested size of the block; 0 for empty (purged) or invalid handles
 * (invalid ones are reported). O(1). */
size_t hk_cache_size(hk_cache *c, hk_cache_handle h);

/* True when the handle is live and empty (its block was purged, or
 * hk_cache_purge emptied it): refill it with hk_cache_reallocate. No report
 * for invalid handles (false). O(1). */
bool hk_cache_is_purged(hk_cache *c, hk_cache_handle h);

/* Changes the block's size to `size`, keeping min(old, new) bytes. Grows or
 * shrinks in place when the next block is free (or when shrinking); else,
 * when the block is unlocked, moves it (MAY MOVE AND PURGE OTHER BLOCKS).
 * Returns HK_ERR_LOCKED (reported) for a locked block that cannot grow in
 * place, HK_ERR_NOMEM (reported) when no space is found (the block is kept
 * unchanged), HK_ERR_STATE (reported) for an empty handle (use reallocate),
 * HK_ERR_OVERFLOW, HK_ERR_STALE, HK_ERR_FOREIGN. O(1) in place, else as alloc. */
hk_result hk_cache_resize(hk_cache *c, hk_cache_handle h, size_t size);

/* The Mac's ReallocateHandle: gives the live handle a new block of `size`
 * bytes (contents undefined, or per HK_FLAG_ZERO/FILL), releasing its
 * current block first if it has one. The typical use is refilling a purged
 * handle. Purgeable flag and lock count are kept (a locked handle with a
 * block is refused with HK_ERR_LOCKED). MAY MOVE AND PURGE BLOCKS. On
 * HK_ERR_NOMEM the handle is left empty. O(as alloc). */
hk_result hk_cache_reallocate(hk_cache *c, hk_cache_handle h, size_t size);

/* Counted pins: a locked block never moves and is never purged. lock
 * increments the count (up to 65535: HK_ERR_OVERFLOW beyond, reported);
 * unlock decrements it and returns HK_ERR_STATE (reported) when it is
 * already 0. The last unlock of a resident purgeable block makes it most
 * recently used (it becomes a purge candidate again, the newest). Locking
 * an empty handle is allowed (it pins the block a later reallocate gives
 * it). Never move anything. O(1). */
hk_result hk_cache_lock(hk_cache *c, hk_cache_handle h);
hk_result hk_cache_unlock(hk_cache *c, hk_cache_handle h);
uint32_t hk_cache_lock_count(hk_cache *c, hk_cache_handle h); /* 0 for invalid handles (reported) */

/* The Mac's MoveHHi: moves an unlocked block to the highest free block above
 * it that can hold it (it stays where it is when none can), so that locking
 * it afterwards does not split the free space. HK_ERR_LOCKED (reported) for
 * a locked block, HK_ERR_STATE for an empty handle. MOVES THIS BLOCK.
 * O(blocks). hk_cache_lock_high does move_high then lock (Mac HLockHi). */
hk_result hk_cache_move_high(hk_cache *c, hk_cache_handle h);
hk_result hk_cache_lock_high(hk_cache *c, hk_cache_handle h);

/* Purgeable flag (Mac HPurge / HNoPurge). Setting it on a resident unlocked
 * block that was not purgeable makes the block most recently used (it
 * joins the purge order as the newest). Never moves anything. O(1). */
hk_result hk_cache_set_purgeable(hk_cache *c, hk_cache_handle h, bool purgeable);

/* Purges the block now (Mac EmptyHandle): the purge callback runs, the
 * bytes are released, the handle stays live and empty. Works on any unlocked
 * block, purgeable or not; HK_ERR_LOCKED (reported) when locked; HK_OK for an
 * already empty handle. O(1). */
hk_result hk_cache_purge(hk_cache *c, hk_cache_handle h);

/* Purges every purgeable unlocked block (Quake Cache_Flush for purgeable
 * data), least recently used first. Returns the number of blocks purged.
 * O(blocks purged). */
size_t hk_cache_purge_all(hk_cache *c);

/* Full compaction: slides every unlocked block toward the bottom, around
 * locked blocks, so the free space becomes one block above the last unlocked
 * block (plus the holes right below locked blocks that nothing after them can
 * fill). MOVES BLOCKS. Returns HK_OK. O(region). */
hk_result hk_cache_compact(hk_cache *c);

/* Incremental compaction: does the same work in slices. Each call moves
 * blocks until `max_bytes` bytes were spent or `max_ns` nanoseconds passed
 * (0 = no limit of that kind) and adds the bytes moved to *moved (may be
 * NULL). The bytes spent are the bytes moved plus 64 for every block the
 * slice passes without moving it (a free block, a locked block, a block
 * already in place), so a slice over locked blocks and holes also ends
 * within its budget. Each call gets past at least one block when there is
 * work (it moves one block larger than the budget whole). Returns 1 when
 * work remains, 0 when the region is compacted. Other calls may run between
 * slices. MOVES BLOCKS. O(max_bytes + the largest block moved) per call,
 * independent of the region's size (docs/realtime.md has the bound). */
int hk_cache_compact_step(hk_cache *c, size_t max_bytes, uint64_t max_ns, size_t *moved);

/* What an allocation could get (the Mac's MaxBlock and PurgeSpace): the
 * largest request that fits now, after a full compaction, and after purging
 * every purgeable unlocked block and compacting. Computed without moving
 * anything. O(blocks). */
typedef struct hk_cache_space {
    size_t now;
    size_t compacted;
    size_t purged;
} hk_cache_space;
hk_result hk_cache_max_block(hk_cache *c, hk_cache_space *out);

/* Introspection (heapkit.h). stats: O(1) except largest_free, which scans
 * the largest non-empty free list (capacity = data region bytes; live_blocks counts
 * resident blocks; overhead = headers, canaries and the handle table).
 * walk: every block in address order (free space included, HK_BLOCK_USED
 * clear), each used block with its handle (id), lock count, flags
 * (HK_BLOCK_LOCKED, HK_BLOCK_PURGEABLE) and LRU rank (0 = most recently
 * used; the number of newer blocks, so blocks stamped together share one,
 * and so do blocks not reached for 2^29 clock steps), then every empty handle
 * (HK_BLOCK_PURGED, address NULL). O(blocks + handles log handles). The callback must not call the cache.
 * check: the handle table and the blocks agree (back-pointers, addresses,
 * sizes, counts), headers and the previous-size chain are intact, free
 * blocks are coalesced and indexed, canaries are intact; reports the first
 * problem and returns HK_ERR_CORRUPT. O(blocks + handles).
 * where: the block holding addr (header, user bytes or canary; free space
 * too), HK_ERR_FOREIGN when outside the data region. O(blocks). */
hk_result hk_cache_stats(const hk_cache *c, hk_stats *out);
int hk_cache_walk(hk_cache *c, hk_walk_fn fn, void *user);
hk_result hk_cache_check(hk_cache *c);
hk_result hk_cache_where(hk_cache *c, const void *addr, hk_block_info *info);

/* Counters of the cache that hk_stats has no field for. O(1). */
typedef struct hk_cache_info {
    size_t region_bytes;      /* data region (the hunk claim, for a cache in a hunk) */
    size_t table_bytes;       /* handle table (hot entries, slots, scratch) */
    uint32_t max_handles;     /* table capacity */
    uint32_t live_handles;    /* handles allocated and not freed */
    uint32_t empty_handles;   /* live handles without a block (purged) */
    uint32_t retired_handles; /* slots whose generations ran out: never reused */
    uint64_t purge_count;     /* blocks purged since creation */
    uint64_t moved_bytes;     /* bytes moved by compaction, scramble, move_high and hunk reclaims */
} hk_cache_info;
/* Fills *out. HK_ERR_INVALID for NULL arguments. Takes the lock. */
hk_result hk_cache_get_info(const hk_cache *c, hk_cache_info *out);

/* Writes the heap in the style of MacsBug's `hd` (heap display) to fn (NULL:
 * hk_print_file, with user the FILE*): one line per block (address, length
 * with its overhead, R relocatable / F free, handle, lock and purge marks,
 * LRU rank, name), the empty handles, then a summary. Does not allocate.
 * O(blocks + handles log handles). */
void hk_cache_dump(hk_cache *c, hk_print_fn fn, void *user);

/* ---- inline deref -----------------------------------------------------------
 * hk_cache_deref_fast is hk_cache_deref inlined for the common case: two
 * loads of the cache (its probe word and base), one load of the handle's
 * 8-byte hot entry (eight to a cache line, in handle order), one compare and
 * one add (heapkit/detail/cache.h). It returns the address at once
 * when the handle is live, its block resident, and the block already stamped
 * in the LRU clock's current epoch; otherwise it calls hk__cache_deref_miss,
 * which stamps a live resident block with the current clock value (writing
 * its entry once per clock value, so repeated accesses dirty nothing) and
 * defers every other case (empty, stale, foreign, none, lock hooks,
 * paranoid) to hk_cache_deref, so reports and results are the same. LRU:
 * deref_fast marks the block most recently used like hk_cache_deref, except
 * that blocks reached with deref_fast between two calls that advance the
 * clock (alloc, reallocate, deref, touch) share one rank, newer than
 * anything stamped before. `c` must not be NULL. With lock hooks or
 * HK_FLAG_PARANOID, or when the data region (for a cache in a hunk: the
 * hunk's block area) spans more than 32 GiB, it always takes hk_cache_deref
 * (and the lock, if any). O(1). */
static inline void *hk_cache_deref_fast(hk_cache *c, hk_cache_handle h) {
    const hk__cache_view *v = (const hk__cache_view *)(const void *)c;
    uint64_t p = v->probe;                      /* epoch << 32 | index mask */
    uint32_t x = h.value ^ (uint32_t)(p >> 32); /* the tag of a hit */
    uint64_t w = hk__cache_hot_of(c)[h.value & (uint32_t)p];
    if (HK__CACHE_LIKELY((uint32_t)(w >> 32) == x)) return hk__cache_hit(v->base, w);
    return hk__cache_deref_miss(c, h.value);
}

/* ---- reader: deref_fast for loops ---------------------------------------------
 * hk_cache_deref_fast loads two words of the cache on every call: the call
 * out of line on a miss may change the cache, so a compiler cannot keep
 * them in registers across a loop. A reader is a copy of them in a local
 * variable (whose address the cache never sees), so a loop
 *
 *   hk_cache_reader r = hk_cache_reader_of(c);
 *   for (...) sum += *(int *)hk_cache_reader_deref(&r, h[i]);
 *
 * does one load of the handle's hot entry and one compare per access.
 * Results, reports and the lock are those of hk_cache_deref_fast (a miss
 * calls the same out-of-line path, then the reader takes the epoch again).
 * LRU: a hit marks the block as recent as of the clock value the reader
 * holds, which is the clock when it was made or last missed: blocks reached
 * through a reader after other calls advanced the clock rank below blocks
 * reached since, until the reader misses (make a new reader after such calls
 * when that matters). A reader stays usable as long as its cache exists,
 * across any call. With lock hooks or HK_FLAG_PARANOID every access takes
 * hk_cache_deref. O(1). */
typedef struct hk_cache_reader {
    hk_cache *cache; /* PRIVATE, all fields */
    uint64_t base;
    uint32_t idx_mask;
    uint32_t epoch;
} hk_cache_reader;

/* A reader of cache `c` (not NULL). O(1). */
static inline hk_cache_reader hk_cache_reader_of(hk_cache *c) {
    const hk__cache_view *v = (const hk__cache_view *)(const void *)c;
    hk_cache_reader r;
    r.cache = c;
    r.base = v->base;
    r.idx_mask = (uint32_t)v->probe;
    r.epoch = (uint32_t)(v->probe >> 32);
    return r;
}

/* hk_cache_deref_fast through a reader (see above). */
static inline void *hk_cache_reader_deref(hk_cache_reader *r, hk_cache_handle h) {
    uint32_t x = h.value ^ r->epoch;
    uint64_t w = hk__cache_hot_of(r->cache)[h.value & r->idx_mask];
    if (HK__CACHE_LIKELY((uint32_t)(w >> 32) == x)) return hk__cache_hit(r->base, w);
    void *p = hk__cache_deref_miss(r->cache, h.value);
    r->epoch = (uint32_t)(((const hk__cache_view *)(const void *)r->cache)->probe >> 32);
    return p;
}

HK_API_END

#ifdef __cplusplus
}
#endif

#endif /* HEAPKIT_CACHE_H */

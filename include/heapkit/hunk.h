/*
 * heapkit/hunk.h - Quake's hunk: one region allocated from both ends, like
 * two stacks growing toward each other, with named blocks, marks, and a
 * temp block on the high end.
 *
 *   low end                                              high end
 *   [hdr|block][hdr|block] ...........free........... [hdr|block]
 *   ^ base      low_used ->            <- high_used       base+size ^
 *
 * Every block carries a header right before its user bytes: the sentinel
 * 0x1df001ed ("id fooled", as in Quake), a sequence number, the requested
 * size, the name (as an index into the hunk's name table) and flags; the
 * user bytes are rounded up to 16 (a block of n bytes takes
 * 16 + round_up(max(n, 1), 16) bytes, as Quake's did). With HK_FLAG_CANARY
 * a block also carries 8 to 23 canary bytes of HK_FILL_PAD after its user
 * bytes (16 + round_up(n + 8, 16) bytes). Alignment above 16 adds a padding
 * block of its own. hk_hunk_check verifies every sentinel, size and flag
 * and, for blocks made with HK_FLAG_CANARY, every canary; without it an
 * overrun is found when it reaches the next block's header. Bytes per
 * block and of the control block: docs/hunk.md.
 *
 * Names: the hunk keeps a table of up to HK_HUNK_NAMES distinct names of up
 * to HK_HUNK_NAME_MAX bytes (copied, so the caller's string need not
 * outlive the call); a block records its name's index. Once the table is
 * full, further new names show as "(other)". NULL shows as "unknown".
 *
 * Complexity: every call is O(1) except walk, check, dump (O(blocks)), the
 * zero fill (O(size)) and a free to a mark that got no entry of its end's
 * mark stack (on caller memory: marks nested past 32 distinct levels of
 * one end) and is older than more than 8 cuts to rising levels (O(blocks):
 * see hk_hunk_free_to_low_mark).
 * Thread-safety: an instance is not thread-safe unless the desc carries lock
 * hooks, in which case every call below takes the lock.
 * Errors: reported through desc.on_error (or the default handler), see
 * heapkit.h. Nothing here aborts.
 */
#ifndef HEAPKIT_HUNK_H
#define HEAPKIT_HUNK_H

#include "heapkit/heapkit.h"

#ifdef __cplusplus
extern "C" {
#endif
HK_API_BEGIN

typedef struct hk_hunk hk_hunk;

/* The hunk has no flags of its own; it understands, with what each costs an
 * allocation (measured figures: docs/hunk.md):
 *   (none)           the fast path: a 16-byte header, about a bump pointer.
 *   HK_FLAG_CANARY   a trailing canary per block (8..23 bytes, three 8-byte
 *                    stores, often on a second cache line), checked by
 *                    check; takes the general (out-of-line) path.
 *   HK_FLAG_ZERO / HK_FLAG_FILL  zero or fill the user bytes: O(size).
 *   HK_FLAG_PARANOID the full check after every call: O(blocks) each.
 *   HK_FLAG_QUIET    no default error handler; free.
 * Lock hooks, a sanitizer, Valgrind or a tenant also take the general path. */

#define HK_HUNK_NAME_MAX      16  /* names are truncated to this many bytes (NUL excluded) */
#define HK_HUNK_NAMES         128 /* distinct names a hunk remembers, "unknown" and "(other)" included */
#define HK_HUNK_DEFAULT_ALIGN 16

/* Zero-initialisable. */
typedef struct hk_hunk_desc {
    void *memory;   /* caller memory for the whole hunk (control block included); NULL: reserve from the OS */
    size_t size;    /* bytes of `memory`, or bytes to reserve (0 with memory NULL: 64 MiB) */
    uint32_t flags; /* HK_FLAG_* */
    const char *name; /* instance name for reports ("hunk" when NULL); the pointer is kept */
    hk_error_fn on_error;
    void *error_user;
    hk_lock_hooks lock;
} hk_hunk_desc;

/* A position on one end of the hunk, as returned by the mark queries.
 * Opaque; compare only with ==. */
typedef struct hk_hunk_mark {
    size_t offset;     /* bytes used on that end when the mark was taken */
    size_t user_bytes; /* bytes requested on that end then (restored by free-to-mark) */
    size_t blocks;     /* blocks on that end then */
    size_t edge;       /* low end: offset of the last block's header then */
    uint32_t end;      /* 0 low, 1 high; | 0x100 when the mark has an entry in the end's mark stack */
    uint32_t seq;  /* with an entry: its depth; else the sequence number of the block at the mark's edge */
    uint32_t hunk; /* the hunk that issued the mark (0: none): detects foreign marks */
    uint32_t cuts; /* with an entry: its stamp; else the cuts of that end when the mark was taken */
} hk_hunk_mark;

/* Creates a hunk. With desc->memory the control block (about 3.5 KiB: the
 * name table, and 512 bytes of mark stacks, 32 levels of 8 bytes per end)
 * lives at the start of that memory (so the usable capacity is that much
 * smaller than size) and the OS is never called. Returns NULL when desc is
 * NULL, its lock hooks have only one of lock and unlock (reported as
 * HK_EK_INVALID_ARG), the memory is too small (under 4 KiB), or the OS
 * refuses the reservation (reported as HK_EK_NOMEM). O(1). */
hk_hunk *hk_hunk_create(const hk_hunk_desc *desc);

/* Destroys the hunk; OS memory is released, caller memory is left alone.
 * All blocks become invalid. NULL is ignored. O(1). */
void hk_hunk_destroy(hk_hunk *h);

/* Allocates `size` bytes from the low end, 16-byte aligned, named `name`
 * (NULL gives "unknown"; truncated to HK_HUNK_NAME_MAX bytes). size 0 is allowed
 * and returns a unique, valid pointer. Returns NULL and reports HK_EK_NOMEM
 * ("asked N, low L, high H, capacity C") when the block does not fit, or
 * HK_EK_OVERFLOW for sizes near SIZE_MAX. A low-end allocation that does
 * not fit while a temp block exists releases the temp block and retries, when
 * that makes room (otherwise the temp block is kept).
 * O(1) (plus O(size) for zero or fill). */
void *hk_hunk_alloc(hk_hunk *h, size_t size, const char *name) HK_MALLOC HK_ALLOC_SIZE(2);

/* Same, from the high end. Releases the temp block first. */
void *hk_hunk_alloc_high(hk_hunk *h, size_t size, const char *name) HK_MALLOC HK_ALLOC_SIZE(2);

/* Low/high allocation with alignment `align` (a power of two up to 1 GiB;
 * 0 and values below 16 mean 16), alignment before size as in C's
 * aligned_alloc. Any other alignment reports HK_EK_INVALID_ARG and returns
 * NULL. Otherwise as hk_hunk_alloc / hk_hunk_alloc_high. O(1). */
void *hk_hunk_alloc_aligned(hk_hunk *h, size_t align, size_t size, const char *name) HK_MALLOC
    HK_ALLOC_ALIGN(2) HK_ALLOC_SIZE(3);
void *hk_hunk_alloc_high_aligned(hk_hunk *h, size_t align, size_t size, const char *name) HK_MALLOC
    HK_ALLOC_ALIGN(2) HK_ALLOC_SIZE(3);

/* The temp block (Quake Hunk_TempAlloc): one block on the high end that is
 * released automatically by the next hk_hunk_alloc_temp, high-end allocation,
 * high-mark query or free to a high mark. NULL on exhaustion (reported).
 * Its contents are not preserved. */
void *hk_hunk_alloc_temp(hk_hunk *h, size_t size) HK_MALLOC HK_ALLOC_SIZE(2);

/* Releases the temp block now, if there is one. O(1). */
void hk_hunk_free_temp(hk_hunk *h);

/* Current marks. The high-mark query releases the temp block first (Quake).
 * O(1). A mark at a new level takes an entry of the end's mark stack (see
 * below). On OS memory, past every level committed so far (2,048 per end
 * at creation) it commits 16 KiB more (one OS call). On caller memory the
 * stack is fixed: 32 levels per end. When the stack is full (or the OS
 * refuses), the mark is still made, without an entry. */
hk_hunk_mark hk_hunk_low_mark(hk_hunk *h);
hk_hunk_mark hk_hunk_high_mark(hk_hunk *h);

/* Frees every block allocated on that end after the mark was taken.
 * Returns HK_ERR_INVALID (and reports) for a mark of another hunk (or of
 * none), a mark from the other end, a mark beyond the current top, or a
 * stale mark (one taken above a position that was freed since: a mark is
 * stale exactly when a cut of its end since, a free to a mark or a reset,
 * went below it). A mark equal to the current top is a no-op. Staleness
 * is decided from what the hunk itself recorded, never from bytes a
 * block's owner may hold. For a mark with an entry of the end's mark stack:
 * O(1) whatever the cuts. Every mark gets one unless the stack is full: on
 * caller memory (or when the OS refused the stacks' reservation at create),
 * when the end's valid marks sit at 32 distinct levels already (the fixed
 * stack); on OS memory only when the OS refuses to commit the stack's next
 * 16 KiB, or on a 32-bit host past an end's 65,536 levels.
 * For a mark without an entry: O(1) when that end was not cut since the
 * mark was taken, or when its log of the last 8 cuts covers them (kept on
 * caller memory); only for such a mark older than more than 8 cuts to
 * rising levels, a walk over that end's headers (O(blocks below the mark)
 * on the low end, O(blocks above it) on the high end). */
hk_result hk_hunk_free_to_low_mark(hk_hunk *h, hk_hunk_mark mark);
hk_result hk_hunk_free_to_high_mark(hk_hunk *h, hk_hunk_mark mark);

/* Frees everything on both ends (and the temp block). O(1). */
void hk_hunk_reset(hk_hunk *h);

/* Counters of the hunk that hk_stats has no field for. */
typedef struct hk_hunk_info {
    size_t capacity;     /* bytes of the block area (the control block excluded) */
    size_t low_used;     /* bytes taken from the low end, headers and canaries included */
    size_t high_used;    /* bytes taken from the high end (the temp block included) */
    size_t low_blocks;   /* blocks on the low end (alignment padding not counted) */
    size_t high_blocks;  /* blocks on the high end */
    size_t temp_bytes;   /* bytes of the temp block, 0 when there is none */
    size_t tenant_bytes; /* bytes of the tenant's claim in the free middle (free to the hunk) */
    uint32_t names_used; /* entries of the name table in use ("unknown" included) */
} hk_hunk_info;

/* Fills *out. HK_ERR_INVALID for NULL arguments. O(1); takes the lock. */
hk_result hk_hunk_get_info(const hk_hunk *h, hk_hunk_info *out);

/* The free middle between the two ends: [*start, *start + *size).
 * Used by a cache that lives inside a hunk (heapkit/cache.h). O(1). */
void hk_hunk_free_range(const hk_hunk *h, void **start, size_t *size);

/* ---- tenant: a cache living in the free middle (heapkit/cache.h) ----------
 *
 * A tenant (one at most per hunk) claims the range [start, start + size) of
 * the free middle. The hunk keeps its allocations out of the claim: when a
 * low allocation would end above the claim's start, or a high allocation
 * would begin below the claim's end, the hunk first calls
 *
 *     released = reclaim(user, high, bytes)
 *
 * asking the tenant to give up `bytes` bytes of its claim from the bottom
 * (high == 0) or the top (high == 1). The tenant moves or discards what lies
 * there and returns how many bytes it gave up from that side (0 to the whole
 * claim; more than asked is allowed, a multiple of 16 is expected). The hunk
 * shrinks the claim by that amount; a claim shrunk to nothing is forgotten
 * (the tenant then holds no memory). If the tenant gave up less than asked,
 * the allocation fails as out of memory. The callback runs with the hunk's
 * lock held and must not call the hunk.
 *
 * The claim never grows by itself: when the middle widens (free to a mark,
 * reset), the tenant takes more with hk_hunk_set_tenant_range. Stats, marks,
 * walks and hk_hunk_free_range ignore the claim (to the hunk it is free
 * space); hk_hunk_check verifies it lies inside the free middle. Destroy the
 * tenant before the hunk. Thread-safety: when both are shared between
 * threads, give them the same recursive lock (the hunk calls the tenant under
 * its lock, and the tenant calls hk_hunk_set_tenant_range under its own). */
typedef size_t (*hk_hunk_reclaim_fn)(void *user, int high, size_t bytes);

/* Installs the tenant with its first claim, or removes it when fn is NULL
 * (start and size are then ignored). The claim must lie inside the free
 * middle and start and size must be multiples of 16. Returns HK_ERR_INVALID
 * (reported) for a bad range, HK_ERR_STATE (reported) when another tenant is
 * installed. O(1). */
hk_result hk_hunk_set_tenant(hk_hunk *h, hk_hunk_reclaim_fn fn, void *user, void *start, size_t size);

/* Replaces the installed tenant's claim (size 0 forgets it). Same range
 * rules; HK_ERR_STATE when there is no tenant. O(1). */
hk_result hk_hunk_set_tenant_range(hk_hunk *h, void *start, size_t size);

/* Introspection (see heapkit.h): stats O(1); walk visits low blocks from the
 * bottom up, then high blocks from the most recent (lowest) up, O(blocks);
 * check (O(bytes of canaries + blocks)) verifies every
 * sentinel, size and flag, and every canary of blocks made with
 * HK_FLAG_CANARY, and reports the first damaged block by name and
 * address, returning HK_ERR_CORRUPT. */
hk_result hk_hunk_stats(const hk_hunk *h, hk_stats *out);
int hk_hunk_walk(hk_hunk *h, hk_walk_fn fn, void *user);
hk_result hk_hunk_check(hk_hunk *h);

/* Finds the block containing `addr` (its user bytes, header or canary).
 * Returns HK_OK and fills *info, or HK_ERR_FOREIGN when no block holds it. */
hk_result hk_hunk_where(hk_hunk *h, const void *addr, hk_block_info *info);

/* Writes every block and then totals per name (Quake Hunk_Print) to fn
 * (NULL: hk_print_file, with user the FILE*). Does not allocate. O(blocks). */
void hk_hunk_dump(hk_hunk *h, hk_print_fn fn, void *user);

HK_API_END

#ifdef __cplusplus
}
#endif

#endif /* HEAPKIT_HUNK_H */

/*
 * heapkit/guard.h - the guard heap: a page-protected debug heap in the line
 * of Electric Fence, DUMA, PageHeap and GWP-ASan.
 *
 * Every guarded block sits on its own page(s) between two inaccessible guard
 * pages:
 *
 *   [guard][....pad.... user bytes pad][guard]      side END (default)
 *   [guard][user bytes ......pad.......][guard]     side START
 *
 * With side END the block ends against the trailing guard, so an overrun
 * past the (aligned) end faults at once; with side START an underrun faults
 * at once; side RANDOM picks per allocation. A block is aligned only as
 * much as its size needs (the largest power of two dividing it, within
 * [desc.align_min, desc.align]), so by default its end is the guard page's
 * first byte and a read or write just past it faults. The slack between
 * the block and the page edges (before it; after it when align_min or an
 * aligned request leaves some) is filled with HK_FILL_PAD and checked on
 * free, by hk_guard_check and at exit, so an overwrite there is still
 * caught (late). Alignment 1 ("exact mode") leaves no padding after any
 * block, aligned requests included.
 *
 * Freed blocks are filled with HK_FILL_FREE, made inaccessible and kept in
 * a FIFO quarantine bounded by bytes and by count; only the oldest leave it,
 * and their address range is then reused. Quarantined pages stay resident
 * (like ASan's quarantine: up to quarantine_bytes of memory); up to 16 MiB of
 * evicted pages are kept for reuse, the rest are given back to the OS. With
 * HK_GUARD_DISCARD_FREED a freed block's pages go back to the OS at the free
 * (one mmap call discards and protects them): the quarantine then costs
 * address space only, at the price of a page fault per allocation.
 * Unguarded blocks get HK_FILL_FREE over their first 64 bytes when freed.
 * Fresh blocks are filled with HK_FILL_ALLOC so uninitialized reads show.
 *
 * Metadata (slot records, the page map, stack traces) lives in mappings of
 * its own, apart from user pages, behind uncommitted pages; every slot record
 * carries a checksum verified on each use and by hk_guard_check.
 *
 * Mapping limit: all slots are carved from ONE address-space reservation.
 * Up to max_guarded / 2 slots get data pages that are a kernel mapping of
 * their own (mapped without MAP_NORESERVE, so the kernel never merges them
 * with the guard pages): alloc and free then change the protection of a
 * whole mapping instead of splitting and re-merging one. Such a slot
 * costs two mappings whether live, quarantined or free; any other slot
 * costs two while live (its pages split from the inaccessible run) and
 * none otherwise. The heap keeps (own-mapping slots + other live slots) <=
 * max_guarded (default (vm.max_map_count - 8192) / 2), which bounds its
 * mappings; live guarded blocks are capped by max_guarded too, and at least
 * max_guarded / 2 can always be live. Allocations beyond the cap, and the
 * ones sampling passes over, are served unguarded by the backing allocator
 * with a 16-byte header and an 8-byte canary (checked on free), so a program
 * with 100,000 live blocks keeps running (docs/guard.md has the figures).
 *
 * Stack traces (allocation and free): by default a walker that reads return
 * addresses off the stack using frame sizes it learned, per return address,
 * from earlier exact DWARF unwinds (_Unwind_Backtrace), an order of
 * magnitude cheaper per frame (docs/guard.md). A site never seen, a frame size seen to vary (alloca,
 * VLAs, signal frames) or a frame outside the part of the thread's stack
 * already unwound makes it unwind exactly (and learn). Limit: a function
 * whose frame size varies but that was seen only once can give a wrong
 * frame beyond it, until an exact unwind sees the variation; set
 * HK_GUARD_EXACT_STACKS to unwind every stack exactly. The stack at a fault
 * is always unwound exactly. Symbolization (dladdr, addr2line) happens only
 * when a report is written.
 *
 * Sampling mode (sample_rate N > 1): one allocation in N on average (random
 * per-thread countdown, as GWP-ASan) is guarded; the rest go to the backing
 * allocator. For long runs and production.
 *
 * Plain unguarded blocks (HK_GUARD_PLAIN_UNGUARDED; the preload sets it in
 * sampling mode): unguarded blocks are handed out by the backing allocator
 * as they are, with no header and no canary, and freed straight back to it
 * (one range compare tells a guarded pointer from the others). They cost
 * little more than the backing allocator's own, but overruns of them,
 * double frees and foreign frees of pointers outside the reservation are
 * left to the backing allocator; hk_guard_usable_size gives the backing's
 * usable size for them, hk_guard_owns answers true for any pointer outside
 * the reservation, and stats/info do not count them (only guarded blocks).
 *
 * Faults: with HK_GUARD_FAULT_HANDLER the heap installs a SIGSEGV/SIGBUS
 * handler (on an alternate stack) that turns a fault in a guard, quarantine
 * or freed page into a report: kind, read/write (x86-64), address, offset
 * from the block, block size, the faulting stack, the allocation stack and
 * for freed blocks the free stack, symbolized with dladdr and, when
 * `addr2line` is on PATH, file:line. It then aborts.
 *
 * Complexity: alloc and free are O(1) plus the fill (O(pages)), one or two
 * mprotect/madvise calls and the stack capture (O(frames)); walk and check
 * are O(blocks); leak detection is O(scanned memory).
 * Thread-safety: every call is thread-safe (an internal mutex, or the desc's
 * lock hooks when given: both lock and unlock, or neither).
 * Paranoid mode: with HK_FLAG_PARANOID (or HK_DEBUG >= 3) every alloc,
 * free and realloc ends with hk_guard_check, so damage to padding or
 * metadata is reported at the next call after it happens (slow: O(blocks
 * + their pages) per call). hk_guard_alloc_unguarded, which must not take
 * the lock, is exempt.
 * Errors: misuse (double free, foreign/interior/stack/global pointer, realloc
 * of a freed block, damaged padding) is reported through desc.on_error as
 * one line; with HK_GUARD_REPORT a multi-line report with stack traces goes
 * to report_fd as well; with HK_GUARD_ABORT the process then aborts.
 * Otherwise the call does nothing and the heap stays consistent.
 */
#ifndef HEAPKIT_GUARD_H
#define HEAPKIT_GUARD_H

#include "heapkit/heapkit.h"

#ifdef __cplusplus
extern "C" {
#endif
HK_API_BEGIN

typedef struct hk_guard hk_guard;

/* Which page edge a block is placed against. */
typedef enum hk_guard_side {
    HK_GUARD_SIDE_END = 0,   /* against the trailing guard: overruns fault at once (default) */
    HK_GUARD_SIDE_START = 1, /* against the leading guard: underruns fault at once */
    HK_GUARD_SIDE_RANDOM = 2 /* one or the other, at random per allocation */
} hk_guard_side;

/* Guard-specific desc flags, combined with HK_FLAG_ZERO, HK_FLAG_QUIET,
 * HK_FLAG_PARANOID. Filling (HK_FLAG_FILL) is always on unless HK_GUARD_NO_FILL. */
enum {
    HK_GUARD_REPORT = 1u << 16,             /* write multi-line reports with stack traces to report_fd */
    HK_GUARD_ABORT = 1u << 17,              /* abort() after any report */
    HK_GUARD_FAULT_HANDLER = 1u << 18,      /* install the process-wide SIGSEGV/SIGBUS reporter */
    HK_GUARD_NO_FILL = 1u << 19,            /* do not fill fresh and freed blocks */
    HK_GUARD_NO_TRACES = 1u << 20,          /* do not record allocation/free stacks (faster) */
    HK_GUARD_NO_SYMBOLIZE_LINES = 1u << 21, /* never run addr2line for file:line */
    HK_GUARD_DISCARD_FREED = 1u << 22,      /* give freed pages back to the OS at the free: the quarantine
                                              costs no memory, but every allocation then takes a page fault */
    HK_GUARD_EXACT_STACKS = 1u << 23,       /* unwind every allocation/free stack with the DWARF unwinder
                                               (slower) instead of the learned-frame-size walker */
    HK_GUARD_PLAIN_UNGUARDED = 1u << 24,    /* unguarded blocks are the backing allocator's own: no header,
                                             no canary, no checks (see "Plain unguarded blocks" above) */
    HK_GUARD_FAST_REUSE = 1u << 25          /* for a run that only looks before blocks (side START): a freed
                                               block's pages stay accessible and its slot is reused next (no
                                               quarantine, no protection change at free or reuse), padding is
                                               neither painted nor checked, a block on fresh pages is left
                                               zero (not filled); guard pages fault as always */
};

/* Defaults, used where the desc field is zero. */
#define HK_GUARD_DEFAULT_RESERVE           ((size_t)64 << 30) /* 64 GiB of address space */
#define HK_GUARD_DEFAULT_ALIGN             16u                /* malloc's alignment on x86-64 */
#define HK_GUARD_DEFAULT_QUARANTINE_BYTES  ((size_t)8 << 20)  /* 8 MiB of freed pages (see docs/guard.md) */
#define HK_GUARD_DEFAULT_QUARANTINE_BLOCKS ((size_t)8192)
#define HK_GUARD_DEFAULT_FRAMES            16
#define HK_GUARD_MAX_FRAMES                32

/* The allocator that serves unguarded blocks (sampling mode, over the cap).
 * The first four are set, or none (then the C library's malloc family is
 * used). usable_size is optional; HK_GUARD_PLAIN_UNGUARDED with a custom
 * backing needs it (hk_guard_create fails without). */
typedef struct hk_guard_backing {
    void *(*malloc)(size_t n);
    void (*free)(void *p);
    void *(*realloc)(void *p, size_t n);
    void *(*memalign)(size_t align, size_t n);
    size_t (*usable_size)(void *p);
} hk_guard_backing;

/* Zero-initialisable; every zero field means the default in brackets. */
typedef struct hk_guard_desc {
    size_t reserve;       /* address space for guarded slots [64 GiB] */
    uint32_t flags;       /* HK_FLAG_* | HK_GUARD_* */
    const char *name;     /* instance name for reports ["guard"]; pointer kept */
    hk_error_fn on_error; /* one-line reports [default handler] */
    void *error_user;
    hk_lock_hooks lock;       /* [internal mutex] */
    hk_guard_side side;       /* [HK_GUARD_SIDE_END] */
    size_t align;             /* most alignment a block gets, power of two; 1 = exact mode [16]. A block of
                                 n bytes from hk_guard_alloc/realloc is aligned to the largest power of two
                                 dividing n, within [align_min, align], so with side END it ends on the
                                 trailing guard whenever align_min divides n */
    size_t quarantine_bytes;  /* freed bytes (whole pages) kept inaccessible [8 MiB]; SIZE_MAX: unbounded */
    size_t quarantine_blocks; /* freed blocks kept inaccessible [8192]; SIZE_MAX: unbounded */
    uint32_t sample_rate;     /* 0 or 1: guard every allocation; N: one in N on average */
    size_t max_guarded;       /* cap on live guarded blocks [(vm.max_map_count - 8192) / 2] */
    int frames;               /* stack frames kept per trace, 1..HK_GUARD_MAX_FRAMES [16] */
    int report_fd;            /* where HK_GUARD_REPORT reports go; 0 means stderr (fd 2) */
    int skip_frames;          /* innermost frames to drop from recorded stacks (wrappers) [0] */
    hk_guard_backing backing; /* allocator for unguarded blocks [C library] */
    uint64_t seed;            /* randomness for side RANDOM and sampling [fixed] */
    size_t align_min;         /* least alignment a block gets, power of two <= align [1]; align_min = align
                                 aligns every block alike (glibc's 16: reads past odd-sized blocks then land
                                 in padding, unseen) */
} hk_guard_desc;

/* Creates a guard heap. Returns NULL when desc is NULL, or after a report
 * through desc.on_error (HK_EK_INVALID_ARG) when align is not a power of
 * two (or exceeds the page size), backing or the lock hooks are partly set,
 * side or frames are out of range; or (HK_EK_NOMEM) when the OS refuses
 * the reservations. With HK_GUARD_FAULT_HANDLER the instance is
 * registered with the process-wide fault reporter (up to 8 instances).
 * Not thread-safe with hk_guard_destroy of another instance. */
hk_guard *hk_guard_create(const hk_guard_desc *desc);

/* Releases every page and record. Blocks still live become invalid; do not
 * destroy a heap whose blocks may still be touched. NULL is ignored. */
void hk_guard_destroy(hk_guard *g);

/* Allocates `size` bytes aligned to the largest power of two dividing
 * `size`, at least desc.align_min and at most desc.align (size 0: align).
 * size 0 returns a unique pointer whose every byte is off limits. Returns
 * NULL (reporting HK_EK_OVERFLOW or HK_EK_NOMEM) when the size overflows or
 * neither the reservation nor the backing allocator can serve it. Fresh
 * bytes are HK_FILL_ALLOC (zero with HK_FLAG_ZERO). O(1) + O(pages). */
void *hk_guard_alloc(hk_guard *g, size_t size) HK_MALLOC HK_ALLOC_SIZE(2);

/* Same with alignment `align` (power of two; below what the size needs,
 * as for hk_guard_alloc, means that), given before the size as in
 * aligned_alloc: the block is aligned to at least `align`. Non power
 * of two: HK_EK_INVALID_ARG, NULL. Alignments above the page size are
 * served unguarded by the backing allocator. */
void *hk_guard_alloc_aligned(hk_guard *g, size_t align, size_t size) HK_MALLOC HK_ALLOC_ALIGN(2)
    HK_ALLOC_SIZE(3);

/* Serves `size` bytes from the backing allocator (16-byte header, 8-byte
 * canary, not page-protected) without taking the heap's lock: for reentrant
 * calls (a preload's malloc called from inside the heap). Freed with
 * hk_guard_free like any block. NULL on exhaustion or overflow. */
void *hk_guard_alloc_unguarded(hk_guard *g, size_t size) HK_MALLOC HK_ALLOC_SIZE(2);

/* Frees p (NULL is ignored). A guarded block's padding is checked (damage is
 * reported as HK_EK_HEAP_OVERFLOW / HK_EK_HEAP_UNDERFLOW, result
 * HK_ERR_CORRUPT, and the block is still freed), then it is filled, made
 * inaccessible and quarantined. Returns HK_OK, or reports and returns
 * HK_ERR_DOUBLE_FREE (block already freed), HK_ERR_FOREIGN (interior
 * pointer, pointer into a guard page, stack/global or unknown address).
 * O(1) + O(pages). */
hk_result hk_guard_free(hk_guard *g, void *p);

/* Resizes: a new block, the contents copied, the old block freed (and
 * quarantined, so stale pointers to it fault). p NULL acts as alloc; size 0
 * frees p and returns a fresh size-0 block. A freed or foreign p is
 * reported (HK_EK_USE_AFTER_FREE "realloc of a freed block" /
 * HK_EK_FOREIGN_PTR) and NULL returned, p untouched. NULL on exhaustion, p kept. */
void *hk_guard_realloc(hk_guard *g, void *p, size_t size) HK_ALLOC_SIZE(3);

/* Bytes usable at p: exactly the requested size (writing more is an
 * overflow). 0 for NULL; foreign pointers report and return 0. O(1). */
size_t hk_guard_usable_size(hk_guard *g, const void *p);

/* True when p is the start of a live block of this heap (guarded or not). */
bool hk_guard_owns(hk_guard *g, const void *p);

/* Introspection (heapkit.h). stats is O(1) and counts guarded and unguarded
 * blocks; walk visits guarded blocks, live and quarantined
 * (HK_BLOCK_QUARANTINED), in address order of their slots, with
 * site/name NULL; check verifies every slot record's checksum, every live
 * block's padding, the quarantine and free lists and the counters, reporting
 * the first problem and returning HK_ERR_CORRUPT. where finds the guarded
 * slot holding addr (user bytes, padding or its leading guard page). */
hk_result hk_guard_stats(const hk_guard *g, hk_stats *out);
int hk_guard_walk(hk_guard *g, hk_walk_fn fn, void *user);
hk_result hk_guard_check(hk_guard *g);
hk_result hk_guard_where(hk_guard *g, const void *addr, hk_block_info *info);

/* Checks the padding of every live guarded block (what hk_guard_check does
 * for the first damaged one, and free for the block it frees) and reports
 * each damaged block: the one-line report through the error hook and, with
 * HK_GUARD_REPORT, the detailed one (the block, its allocation stack, the
 * first and last damaged offsets), "found at exit". Never aborts. Returns
 * the number of damaged blocks. O(live guarded blocks' padding). Takes the
 * lock (the error hook runs under it). The preload calls it at exit when
 * the leak check is off (hk_guard_leaks does it too). */
size_t hk_guard_check_padding(hk_guard *g);

/* Guard-specific counters: hk_guard_get_info fills *out (O(1)); returns
 * HK_ERR_INVALID (out zeroed when not NULL) for a NULL g or out. */
typedef struct hk_guard_info {
    size_t live_guarded;      /* live blocks between guard pages */
    size_t live_unguarded;    /* live blocks served by the backing allocator */
    size_t max_guarded;       /* the cap in force */
    size_t quarantine_blocks; /* blocks in quarantine */
    size_t quarantine_bytes;  /* their pages' bytes */
    size_t reserve_used;      /* bytes of the reservation carved into slots */
    size_t reserve_size;      /* bytes reserved for slots: desc.reserve, or less under an address-space
                                 limit (create halves it until the OS agrees, down to 16 MiB, and
                                 reports HK_EK_NOMEM saying how much it got) */
    size_t traces;            /* distinct stack traces recorded */
    uint64_t reports;         /* reports made (errors, faults, leaks) */
    uint64_t over_cap;        /* allocations served unguarded because of the cap */
} hk_guard_info;
hk_result hk_guard_get_info(const hk_guard *g, hk_guard_info *out);

/* Leak detection. Mode HK_GUARD_LEAKS_ALL treats every live guarded block as
 * a leak (for programs that free everything); HK_GUARD_LEAKS_UNREACHABLE
 * reports only blocks no pointer reaches: it scans the process's writable
 * private mappings (data segments, stacks, the backing heap) except the
 * heap's own, then the reached blocks, conservatively (interior pointers
 * count). Also checks every live block's padding. Writes the report (blocks
 * grouped by allocation stack, counts and bytes, largest first) to
 * report_fd when HK_GUARD_REPORT is set, and a one-line HK_EK_LEAK summary
 * through on_error. Returns the number of leaked blocks; *bytes (may be NULL)
 * gets their bytes. O(scanned bytes + blocks log blocks). Holds the lock:
 * other threads' allocations wait. Unguarded blocks are not tracked. */
typedef enum hk_guard_leak_mode { HK_GUARD_LEAKS_UNREACHABLE = 0, HK_GUARD_LEAKS_ALL = 1 } hk_guard_leak_mode;
size_t hk_guard_leaks(hk_guard *g, hk_guard_leak_mode mode, size_t *bytes);

/* fork() support for processes whose threads share the heap: call prepare
 * before fork (takes the lock), parent in the parent and child in the child
 * afterwards (both release it: the child's one thread is the one that took
 * it). pthread_atfork hooks are the usual place. */
void hk_guard_fork_prepare(hk_guard *g);
void hk_guard_fork_parent(hk_guard *g);
void hk_guard_fork_child(hk_guard *g);

/* Turns g into the heap of `heapkit guard`'s second run from now on: new
 * blocks sit against the leading guard page, with HK_GUARD_FAST_REUSE (a
 * freed block's slot is reused at once, padding neither painted nor
 * checked) and no quarantine; blocks made before keep their place, and a
 * freed one joins the fast path too. For a process forked to become that
 * run (the preload's constructor). Takes the lock; O(1) but for one
 * madvise probe. Cannot fail: where the kernel lacks MADV_GUARD_INSTALL
 * the new slots are mappings of their own, as in the first run. */
void hk_guard_lead_from_now(hk_guard *g);

/* Number of reports this instance made (errors, faults, leaks). O(1). */
uint64_t hk_guard_report_count(const hk_guard *g);

HK_API_END

#ifdef __cplusplus
}
#endif

#endif /* HEAPKIT_GUARD_H */

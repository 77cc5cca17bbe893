/*
 * src/zone_small.h - the headerless small-block layer: blocks of up to
 * ZS_MAX bytes as slots of runs, each run one ZS_RUN-byte, ZS_RUN-aligned
 * granule of a reserved address range (a "space"). Nothing sits in front of
 * a slot: a free finds the slot's run header in the space's table by a
 * shift of its offset, once one compare has placed it in the space. The
 * checks a free makes read the header's first line (and the remote bitmap
 * when remote frees wait) and the slot's first word:
 *
 *   foreign   not in the space (the caller's other checks decide);
 *   interior  offset not a multiple of the stride (a multiply by the
 *             stride's reciprocal, no divide), or inside the granule's
 *             remote bitmap;
 *   double    a free slot's first word is its free-list link, stored
 *             encoded with the run's secret: a first word that decodes to
 *             a slot of the same run (or the list's end) marks a slot that
 *             may be free, and the run's list is searched to be sure; a
 *             slot freed by another thread and not collected yet has its
 *             remote bit set.
 *
 * src/zone_small.c holds the invariants and the slow paths; the fast paths
 * are inline here.
 *
 * Sanitizers: free slots are poisoned for AddressSanitizer. Valgrind gets
 * no client requests here: a zone that a tool watches keeps every block in
 * its TLSF core instead (src/track.h), so these paths stay free of them.
 *
 * Threads: a run belongs to one heap (zs_heap), whose owner thread alone
 * allocates from it and frees into its free list. Another thread's free
 * sets the slot's bit in the run's remote bitmap (one atomic or) and, the
 * first time, queues the run on its heap's collection stack; the owner
 * collects a dry current run's own, and the queued runs when a class has
 * no partial run left or ZS_COLLECT_GAP allocations after the last time
 * (hk__zs_alloc_slow, hk__zs_poll). The owner's
 * own alloc and free take no atomic read-modify-write.
 */
#ifndef HEAPKIT_ZONE_SMALL_H
#define HEAPKIT_ZONE_SMALL_H

#include "internal.h"

#include <stddef.h>
#include <stdint.h>

#define ZS_RUN_LOG2     16u
#define ZS_RUN          ((size_t)1 << ZS_RUN_LOG2) /* bytes of a run, and its alignment */
#define ZS_MAX          16384u                     /* largest small request */
#define ZS_DIRECT_MAX   1024u /* requests up to this find their run in one load (zs_heap.direct) */
#define ZS_NCLS         72u   /* 8..64 in 8-byte steps, then 8 classes per doubling */
#define ZS_NDIRTY       64u   /* dirty-granule lists: one per class, the classes from 63 up share one */
#define ZS_META_LOG2    8u
#define ZS_META         ((size_t)1 << ZS_META_LOG2) /* bytes of a run's header (its table entry) */
#define ZS_WORDS        64u                         /* 64-bit words of the remote bitmap */
#define ZS_SLOTS        (ZS_WORDS * 64u)            /* slots of a run at most */
#define ZS_RBITS        0u                          /* granule base to the remote bitmap */
#define ZS_FIRST        (ZS_RBITS + ZS_WORDS * 8u) /* granule base to slot 0 of colour 0 (a multiple of 64) */
#define ZS_COLORS       32u /* slot 0 of a run starts 64 * (granule number % ZS_COLORS) bytes past ZS_FIRST */
#define ZS_MAGIC        0x5a53u /* "ZS" */
#define ZS_TAIL_POLL    8u      /* settling frees between two calls of the space's poll from them */
#define ZS_CARVE_MAX    16u     /* slots one carve puts on a run's list at most (a bound on its work) */
#define ZS_ORPHAN_BATCH 64u     /* frees waiting in an abandoned heap before a freer collects them */
#define ZS_COLLECT_GAP  1024u   /* allocations after which a heap's stack is collected unasked */
#define ZS_SPARES       4u      /* empty granules a heap keeps for its next runs */
#define ZS_SPARE_AGE    65536u  /* a heap's allocations after which an unused spare goes back */

/* Slot sizes: 8-byte steps to 64 bytes, then 8 classes per doubling (a
 * step of at most 12.5% of the class below). A slot is aligned to the
 * largest power of two dividing its size, at most 16 (slot 0 starts on a
 * 64-byte boundary): what C asks of an object of that size. */
/* clang-format off */
static const uint16_t zs_stride_tab[ZS_NCLS] = {
    8, 16, 24, 32, 40, 48, 56, 64,
    72, 80, 88, 96, 104, 112, 120, 128,
    144, 160, 176, 192, 208, 224, 240, 256,
    288, 320, 352, 384, 416, 448, 480, 512,
    576, 640, 704, 768, 832, 896, 960, 1024,
    1152, 1280, 1408, 1536, 1664, 1792, 1920, 2048,
    2304, 2560, 2816, 3072, 3328, 3584, 3840, 4096,
    4608, 5120, 5632, 6144, 6656, 7168, 7680, 8192,
    9216, 10240, 11264, 12288, 13312, 14336, 15360, 16384,
};
/* clang-format on */

/* An owner's update of its heap's counters, which stats read from other
 * threads without synchronization (each read gets a value the counter held:
 * aligned 64-bit accesses are single-copy atomic on the hosts heapkit
 * supports); relaxed atomics under ThreadSanitizer, so that it checks
 * everything else. */
#ifdef HK__TSAN
#define ZS_STAT_ADD(f, d)                                                                                    \
    __atomic_store_n(&(f), __atomic_load_n(&(f), __ATOMIC_RELAXED) + (d), __ATOMIC_RELAXED)
#define ZS_STAT_SUB(f, d)                                                                                    \
    __atomic_store_n(&(f), __atomic_load_n(&(f), __ATOMIC_RELAXED) - (d), __ATOMIC_RELAXED)
#else
#define ZS_STAT_ADD(f, d) ((f) += (d))
#define ZS_STAT_SUB(f, d) ((f) -= (d))
#endif
#define ZS_STAT_READ(f) __atomic_load_n(&(f), __ATOMIC_RELAXED)
/* A relaxed load on the fast paths: a plain one outside TSan, so that the
 * compiler may fold it into a compare (the same instruction on the hosts
 * heapkit supports, where aligned loads are single-copy atomic). */
#ifdef HK__TSAN
#define ZS_LOAD(f) __atomic_load_n(&(f), __ATOMIC_RELAXED)
#else
#define ZS_LOAD(f) (f)
#endif

/* Class of a request by (n + 7) / 8, n <= ZS_MAX (one load; 0 -> class 0).
 * Filled by hk__zs_init_tables (idempotent: zone.c calls it before each
 * space's init). */
extern uint8_t hk__zs_cls_tab[ZS_MAX / 8u + 1u];
void hk__zs_init_tables(void);
static inline unsigned zs_cls_of(size_t n) { return hk__zs_cls_tab[(n + 7u) >> 3]; }
/* Slots of a run of stride s whose slot 0 is `first` bytes into it. */
static inline uint32_t zs_nslots(uint32_t s, uint32_t first) {
    uint32_t n = (uint32_t)((ZS_RUN - first) / s);
    return n < ZS_SLOTS ? n : ZS_SLOTS;
}

enum { ZS_CUR = 1, ZS_PARTIAL = 2, ZS_FULL = 3 };

struct zs_heap;

/* A run's header: one ZS_META-byte entry of the space's header table (the
 * entries of consecutive granules are neighbours, so the headers of the
 * runs a program uses share no cache set by their alignment). Line 0 holds
 * what every free reads and no alloc or free writes; line 1 what the
 * owner's alloc and free write (the free list and count) and its lists;
 * line 2 what a remote freer writes when it queues the run; line 3 is
 * never touched. So the line the owner writes on every call has its own
 * header's lines on both sides: with 128-byte headers it neighboured the
 * next granule's line 0, often another thread's run, and the cores'
 * prefetch of neighbouring lines made two threads that never share a
 * block slow each other (churn at 2 threads, 10 M iterations: runs near
 * 360 M/s against 450 otherwise, in 8 of 9 interleaved runs of one set, 3
 * of 9 of another; with 256 bytes none below 405 in 9).
 * The granule itself holds the remote bitmap (bit i: slot i freed by
 * another thread, not collected) at ZS_RBITS, then the slots from
 * ZS_FIRST plus the run's colour on (zs_first).
 *
 * The free list: `free` is the first free slot, or the granule's base
 * when there is none (the end marker: the bitmap is there, no slot);
 * each free slot's first 8 bytes hold the next one's address xor `key`.
 * key = base ^ secret, the secret random with its low ZS_RUN_LOG2 bits 0
 * and its top bit 1: so an encoded link xor secret is the next slot's
 * offset in the granule, below ZS_RUN, and a word that is no link passes
 * that test with odds of 2^-47; an allocation zeroes the word (zero never
 * passes). */
typedef struct zs_run {
    /* line 0: fixed while the granule is a run, or written rarely; read by
     * every free, the remote ones included, so no per-operation write lands
     * here (a line the owner wrote on each alloc and free would move to the
     * remote freer's core and back at each remote free) */
    uint32_t stride; /* atomic stores: stats read it */
    uint32_t recip;  /* ceil(2^32 / stride): slot index = off * recip >> 32, exact for off < ZS_RUN */
    /* atomic (relaxed): bump * stride, the carved slots' end (from slot 0):
     * an offset past it is no slot handed out (written by the owner's
     * carve, read by any free) */
    uint32_t limit;
    uint32_t nslots; /* atomic stores: stats read it */
    uint64_t key;    /* base ^ secret */
    uint64_t secret; /* random, low ZS_RUN_LOG2 bits 0, top bit 1 */
    /* atomic: the owner heap; NULL while the granule is no run (given back:
     * a free into it goes to the slow path, which reports it) */
    struct zs_heap *heap;
    unsigned char *base; /* the granule (fixed for the entry) */
    /* atomic: ZS_RQUEUED (on the stack, or about to be) plus the remote
     * freers between their bit and their queueing (the low 32 bits); not 0
     * while a remote free may wait in the bitmap (the owner's free reads it) */
    uint64_t rpend;
    /* the low 32 bits of slot 0's address (base + ZS_FIRST + the run's
     * colour, zs_run_format): a free's offset from slot 0 is the low 32
     * bits of its pointer minus org, one subtraction */
    uint32_t org;
    /* line 1: the owner's */
    unsigned char *free; /* first free slot, or base (none) */
    /* Slots handed out and not back on the free list (remote frees
     * included until collected), but 1 while the run is full (ZS_FULL:
     * every slot used): a free that leaves it 0 settles the run, emptied or
     * full no more (zs_used gives the count). Relaxed atomic updates under
     * TSan: stats read it, and state, from any thread. */
    uint32_t used;
    uint32_t magic;             /* ZS_MAGIC << 16 | class (zs_rcls): check's proof */
    uint32_t bump;              /* slots carved (atomic relaxed store: check reads it) */
    uint32_t state;             /* ZS_CUR, ZS_PARTIAL or ZS_FULL (zs_set_state; atomic relaxed stores) */
    struct zs_run *next, *prev; /* the class's partial list */
    struct zs_run *all_next, *all_prev; /* every run of the heap */
    unsigned char line1_end_[8];
    /* line 2: a remote freer's, when it queues the run (read by the owner's collection) */
    struct zs_run *rnext;           /* on the heap's collection stack */
    unsigned char unused_[56 + 64]; /* and line 3: the gap to the next header */
} zs_run;
_Static_assert(sizeof(zs_run) == ZS_META, "a header is one table entry");
_Static_assert(offsetof(zs_run, free) == 64, "the owner's words start line 1");
_Static_assert(offsetof(zs_run, rnext) == 128, "the remote freer's word starts line 2");
#define ZS_RQUEUED ((uint64_t)1 << 32)
#ifdef HK__TSAN
#define ZS_USED_SET(r, v) __atomic_store_n(&(r)->used, (v), __ATOMIC_RELAXED)
#else
#define ZS_USED_SET(r, v) ((r)->used = (v))
#endif
/* Used slots of run r (its owner, or stats: a value near what it held). */
static inline uint32_t zs_used(const zs_run *r) {
    return __atomic_load_n(&r->state, __ATOMIC_RELAXED) == ZS_FULL
               ? __atomic_load_n(&r->nslots, __ATOMIC_RELAXED)
               : __atomic_load_n(&r->used, __ATOMIC_RELAXED);
}

/* A class of a heap. */
typedef struct zs_cls {
    zs_run *cur;     /* allocations come from here; never NULL (hk__zs_empty_run when none) */
    zs_run *partial; /* runs with free slots, other than cur */
} zs_cls;

/* The space: [lo, lo + span) reserved for runs, and the header table
 * beside it; the first `bump` granules have been runs (their headers stay
 * committed, so any header below lo + used can be read, and their first
 * page too); the ones given back are on the dirty lists or the clean stack
 * with a NULL heap. Granules are made and given back under
 * the space's lock; `used` is read without it. */
typedef struct zs_space {
    uintptr_t lo;
    size_t used;         /* atomic: bump << ZS_RUN_LOG2 */
    unsigned char *meta; /* the header table: entry g is granule g's (reserved for the span) */
    size_t meta_commit;  /* its bytes committed (at least bump entries; never given back) */
    size_t meta_size;    /* its bytes reserved */
    size_t span;
    size_t bump; /* granules ever used */
    /* Free granules: dirty (freed in this epoch, or the one before: their
     * pages still resident) and clean (their pages but the first given
     * back). An epoch is epoch_ns long (0: none; only a trim cleans).
     * dirty[young][c]: the granules whose last run, of class c, ended in
     * this epoch; dirty[!young][c]: in the one before (c: zs_dcls of the
     * class). dmask[e] has bit c set when dirty[e][c] is not empty. A new
     * run of class c takes one of its own class first: its pages are those
     * the class touched. */
    uint32_t dirty[2][ZS_NDIRTY]; /* granule number + 1 of each list's first; 0: empty */
    uint64_t dmask[2];
    unsigned young;
    size_t ndirty, nclean; /* atomic (stats read them) */
    uint32_t *cstack;      /* the clean granules' numbers (zone_small.c) */
    size_t cs_size, cs_commit;
    uint64_t epoch_ns, next_epoch; /* next_epoch: atomic */
    int prefault;                  /* fault a fresh granule's pages in when it is taken */
    /* the reservations are readable and writable from the start
     * (hk_os_reserve_rw): taking a granule or a table page commits nothing */
    int lazy;
    size_t runs;   /* atomic: granules that heaps hold (runs and spares) */
    uint64_t made; /* atomic: runs made (laid out for a class) since the space's init */
    void *os_base;
    size_t os_size;
    hk__reporter *rep;
    /* taken around a report made by a heap not used under the owner's lock
     * (zs_heap.locked == 0, or no heap): the zone's lock in a threads zone */
    void (*lock)(void *), (*unlock)(void *);
    void *lock_user;
    /* called by an owner every poll_left allocations (its return: the
     * next count), and every ZS_TAIL_POLL frees that unfill a run or empty
     * one other than a current run (so that a thread that has gone quiet after a burst, freeing and
     * allocating now and then, still ages the free granules); NULL: never.
     * The zone's decay clock. */
    uint32_t (*poll)(void *user, struct zs_heap *h);
    void *poll_user;
    hk_os_mutex mx;
} zs_space;

/* A heap: its owner's classes and counters, and the stack other threads
 * queue runs on. */
typedef struct zs_heap {
    /* direct[(n + 7) / 8]: the current run of the class of a request of n
     * <= ZS_DIRECT_MAX bytes (cls[].cur, kept equal by zs_set_cur) */
    zs_run *direct[ZS_DIRECT_MAX / 8u + 1u];
    zs_cls cls[ZS_NCLS];
    zs_space *sp;
    /* Allocations since the heap was made: alloc_base - poll_left
     * (zs_alloc_count; stats derive the frees, the runs' used counts being
     * the blocks live). poll_left counts down to the space's poll; the
     * owner writes it on every allocation, tail_left on some frees. */
    uint32_t poll_left; /* allocations until the space's poll (atomic stores under TSan) */
    uint32_t tail_left; /* settling frees until the next poll from them */
    uint64_t alloc_base;
    zs_run *all;         /* every run of the heap */
    uint64_t secret;     /* the next run's secret comes from it */
    uint64_t collect_ac; /* zs_alloc_count at the last collection of rstack */
    /* rarely written: 88 bytes that, with the 40 above, keep what other
     * threads' frees touch (below) off the line the owner writes on every
     * call: a remote free reads `abandoned` and may push on `rstack` */
    uint64_t poll_ns, poll_ac; /* the poll's own state: its last clock read, and alloc count then */
    /* atomic: empty granules kept for the next runs (NULL: none); the
     * owner puts them there and takes them, trim may take any (an atomic
     * exchange). spare_tag[i]: the class of spare i's last run (low 8
     * bits) and the heap's allocation count, in 256s, when it became a
     * spare (the owner's own words: it reads them, not the granule's
     * header, which trim may hand to another heap meanwhile). */
    zs_run *spare[ZS_SPARES];
    uint32_t spare_tag[ZS_SPARES];
    uint32_t spare_due; /* the allocation count, in 256s, from which the oldest spare may be due to go back */
    struct zs_heap *next; /* the zone's list of heaps */
    size_t os_size;       /* bytes of the heap's own mapping (0: embedded) */
    int locked;           /* used only under the zone's lock (reports take no lock) */
    int abandoned;        /* atomic: its thread is gone; the next one adopts it */
    zs_run *rstack;       /* atomic: runs with remote frees to collect */
    /* atomic: frees into it since its last collection while it is
     * abandoned (invariant 8 of zone_small.c) */
    uint64_t orphan_frees;
} zs_heap;

extern zs_run hk__zs_empty_run;
/* The heap of a thread that has none: every direct entry is the empty run
 * (an allocation from it misses), and it owns no run (a free into it goes
 * to the slow path, which takes it for NULL). Never written. */
extern zs_heap hk__zs_none_heap;

/* ---- the space (zone_space.c) ------------------------------------------------ */

/* Reserves `span` bytes (rounded to granules) for runs. HK_ERR_NOMEM when
 * the OS refuses. rep: where misuse goes. O(1). */
hk_result hk__zs_space_init(zs_space *sp, size_t span, hk__reporter *rep);
/* Releases the reservation (every heap must be finished). */
void hk__zs_space_fini(zs_space *sp);
/* Ends the space's epoch when it is over at `now` (hk_os_coarse_ns): the
 * granules free for a whole epoch give their pages back. Any thread. O(1),
 * plus one system call per granule cleaned. */
void hk__zs_space_age(zs_space *sp, uint64_t now);
/* Gives back the pages of every free granule now. Returns the granules
 * cleaned. Any thread. */
size_t hk__zs_space_trim(zs_space *sp);
/* A granule for a new run of class c, counted among the granules heaps
 * hold (its header's base set; the caller formats it), or NULL when the
 * space has none left or the OS refuses a commit: a dirty one of class c
 * (its pages resident), else of the nearest class, else a clean one, else
 * a fresh one. Takes the space's lock. O(1). */
zs_run *hk__zs_granule_take(zs_space *sp, unsigned c);
/* Gives granule r (no run any more, no heap's spare) back to the space,
 * dirty: its pages go back to the OS when it stays free (hk__zs_space_age)
 * or by hk__zs_space_trim, not at once, so that a program that frees its
 * small blocks at the end of a frame and allocates them again in the next
 * finds them resident. Its header stays for racing frees to read. Takes
 * the space's lock. O(1). */
void hk__zs_granule_give(zs_space *sp, zs_run *r);

/* ---- heaps (zone_small.c) ------------------------------------------------------ */

void hk__zs_heap_init(zs_heap *h, zs_space *sp);
/* Collects, then gives back every empty run and the spare; returns the
 * slots still used. */
size_t hk__zs_heap_fini(zs_heap *h);
/* Frees every used slot of h and gives back all its runs (free_tags of the
 * static tag, destroy). Returns the slots freed. */
size_t hk__zs_heap_free_all(zs_heap *h);
/* Collects every run of h with a remote bit set, queued or not (an
 * abandoned heap, the child of a fork), gives back its empty runs (its
 * current ones too) and its spare. Owner, or h's owner gone and the
 * caller holding what adoption takes. Returns the granules given back. */
size_t hk__zs_heap_shrink(zs_heap *h);
/* In a fork's child, before anything else touches h: the threads that
 * were between setting a remote bit and queueing its run are gone, so
 * every run's in-flight count and queued flag (rpend) are dropped after every
 * waiting remote free of h is collected. O(runs of h). */
void hk__zs_heap_fork_reset(zs_heap *h);
/* Gives h's spare granule back to the space (any thread: an atomic
 * exchange against its owner's). Returns 1 when there was one. */
size_t hk__zs_heap_take_spare(zs_heap *h);

/* ---- slow paths --------------------------------------------------------------- */

/* Class c's current run has no free slot: collects its remote frees,
 * switches to the first partial run when that one has freed slots on its
 * list, or carves; else takes a partial run (collecting the heap's remote
 * frees first when the class has none, or ZS_COLLECT_GAP allocations after
 * the last collection), or makes a new run (a spare of the class, a
 * granule of the space, a spare of another class). A slot, or NULL when no
 * granule can be had. O(1) but for the collection (O(bitmap words) per
 * queued run). */
void *hk__zs_alloc_slow(zs_heap *h, unsigned c);
/* The space's poll, and the next count. */
void hk__zs_poll(zs_heap *h);
/* The same, returning u (a tail call from the allocation's fast path). */
void *hk__zs_poll_ret(zs_heap *h, void *u);
/* Allocations h made (its owner, or stats: a value near what it held). */
static inline uint64_t zs_alloc_count(const zs_heap *h) {
    return __atomic_load_n(&h->alloc_base, __ATOMIC_RELAXED) -
           __atomic_load_n(&h->poll_left, __ATOMIC_RELAXED);
}
/* The end of a free that emptied run r, or made it not full: settles it,
 * and counts down to the heap's poll. HK_OK. */
hk_result hk__zs_free_tail(zs_heap *h, zs_run *r);
/* Gives run r back when a free emptied it (a partial run, quiet). */
void hk__zs_settle(zs_heap *h, zs_run *r);
/* A free the fast path did not take: misuse (reported, HK_ERR_*), a
 * remote free, or the owner's free of a slot whose first word looks like
 * a link (HK_OK). p is in a granule of the space. O(1), but O(free slots
 * of the run) for a first word that looks like a link. */
hk_result hk__zs_free_slow(zs_space *sp, zs_heap *h, zs_run *r, void *p, const char *op);
/* Collects every queued run's remote frees into their free lists. Returns
 * the slots collected. Owner only. */
size_t hk__zs_collect(zs_heap *h);
/* The used slots of every run of the space and their bytes (strides),
 * less the remote frees not collected yet (their bits). Any thread: a run
 * made or ended meanwhile may be counted or not. O(granules of the space,
 * plus the bitmap of each run with remote frees waiting). */
void hk__zs_sum_runs(const zs_space *sp, uint64_t *slots, uint64_t *bytes);
/* Every invariant of heap h's runs (owner quiescent), adding the granules
 * it holds (runs and spare) to *granules. HK_OK or HK_ERR_CORRUPT,
 * reported. O(runs x slots). */
hk_result hk__zs_check_heap(const zs_heap *h, hk__reporter *rep, size_t *granules);
/* The same for a set of heaps that are all the space's, and their granules
 * against the space's count. */
hk_result hk__zs_check(zs_heap *const *heaps, size_t nheaps, hk__reporter *rep);
/* Calls fn for every used slot of run r / of h's runs, in address order
 * within a run (owners quiescent). Returns fn's first non-zero value, -1
 * for a damaged free list (check reports it), else 0. */
int hk__zs_walk_run(const zs_run *r, hk_walk_fn fn, void *user);
int hk__zs_walk(const zs_heap *h, hk_walk_fn fn, void *user);
/* Describes what addr falls in when it is in a run of the space (a slot,
 * used or free, or the run's header): 1, else 0. */
int hk__zs_where(const zs_space *sp, const void *addr, hk_block_info *info);

/* ---- fast paths ---------------------------------------------------------------- */

/* The header of the granule at offset off (< used) of the space. */
static inline zs_run *zs_run_at(const zs_space *sp, uintptr_t off) {
    return (zs_run *)(sp->meta + ((off >> ZS_RUN_LOG2) << ZS_META_LOG2));
}
/* The header of the granule of a pointer of the space (a run, or one given
 * back: its heap is NULL), or NULL when p is not in the space's used part. */
static inline zs_run *zs_run_of(const zs_space *sp, const void *p) {
    uintptr_t off = (uintptr_t)p - sp->lo;
    if (HK__UNLIKELY(off >= __atomic_load_n(&sp->used, __ATOMIC_RELAXED))) return NULL;
    return zs_run_at(sp, off);
}

static inline uint64_t *zs_rbits(zs_run *r) { return (uint64_t *)(r->base + ZS_RBITS); }
/* Granule base to slot 0 of run r. */
static inline uint32_t zs_first(const zs_run *r) { return r->org - (uint32_t)(uintptr_t)r->base; }
static inline unsigned char *zs_slot(const zs_run *r, uint32_t i) {
    return r->base + zs_first(r) + (size_t)i * r->stride;
}
/* The class of run r. */
static inline unsigned zs_rcls(const zs_run *r) { return r->magic & 0xffffu; }
/* Slot index of offset off (run base to the pointer) when it is exactly a
 * slot's start, else UINT32_MAX. With recip = 2^32 / stride + e (0 <= e <
 * 1) and o < 2^16, the product o * recip is i * 2^32 + j * 2^32 / stride +
 * o * e for o = i * stride + j: its low 32 bits are below 2^16 exactly
 * when j == 0 (else at least 2^32 / ZS_MAX = 2^18). A multiply, no divide. */
static inline uint32_t zs_index_in(const zs_run *r, uint32_t off, uint32_t lim) {
    uint32_t o = off - zs_first(r); /* wraps past lim for a pointer into the header */
    uint64_t q = (uint64_t)o * r->recip;
    if (HK__UNLIKELY(o >= lim) || HK__UNLIKELY((uint32_t)q >= 65536u)) return UINT32_MAX;
    return (uint32_t)(q >> 32);
}
/* The same among the carved slots (below limit). */
static inline uint32_t zs_index(const zs_run *r, uint32_t off) {
    return zs_index_in(r, off, __atomic_load_n(&r->limit, __ATOMIC_RELAXED));
}
_Static_assert(ZS_RUN <= 65536u && ((uint64_t)1 << 32) / ZS_MAX >= 65536u, "zs_index's exactness test");

/* A run becomes full with every slot used (its count set to 1, the trap
 * of the next free), and leaves that state with them all used still. */
static inline void zs_set_state(zs_run *r, uint32_t state) {
    if (state == ZS_FULL)
        ZS_USED_SET(r, 1u);
    else if (r->state == ZS_FULL)
        ZS_USED_SET(r, r->nslots);
    __atomic_store_n(&r->state, state, __ATOMIC_RELAXED);
}

/* Makes r class c's current run in h (and the direct entries of c). */
void hk__zs_set_cur(zs_heap *h, unsigned c, zs_run *r);

/* A slot's first word: a free slot's link, or a used slot's data that a
 * free reads to tell the two apart. Atomic relaxed (a remote freer of a
 * block freed already may read it while the owner writes it; plain moves
 * on x86), and not checked by ASan: a free slot stays poisoned, and the
 * shadow is not touched here, because a remote freer's unpoison, then read,
 * would race with the owner's poisoning of the same slot (a double free
 * from two threads at once, reported, must not fault the checker). */
static inline HK__NO_ASAN uint64_t zs_word(const void *u) {
    return __atomic_load_n((const uint64_t *)u, __ATOMIC_RELAXED);
}
static inline HK__NO_ASAN void zs_link(void *u, uint64_t w) {
    __atomic_store_n((uint64_t *)u, w, __ATOMIC_RELAXED);
}
/* Whether first word w of a slot of run r may be a free-list link. */
static inline int zs_maybe_link(const zs_run *r, uint64_t w) { return (w ^ r->secret) < ZS_RUN; }

/* Pops a slot of run r (its free list not empty) for h. */
static inline void *zs_pop(zs_heap *h, zs_run *r, unsigned char *u) {
    r->free = (unsigned char *)(uintptr_t)(zs_word(u) ^ r->key);
    zs_link(u, 0); /* no link left behind: a free reads this word */
    ZS_USED_SET(r, r->used + 1);
    hk__asan_unpoison(u, r->stride);
#ifdef HK__TSAN
    uint32_t left = __atomic_load_n(&h->poll_left, __ATOMIC_RELAXED) - 1;
    __atomic_store_n(&h->poll_left, left, __ATOMIC_RELAXED);
#else
    uint32_t left = --h->poll_left;
#endif
    if (HK__UNLIKELY(left == 0)) return hk__zs_poll_ret(h, u);
    return u;
}

/* n <= ZS_MAX bytes from h; NULL when no run can be had. O(1). */
static inline void *zs_alloc(zs_heap *h, size_t n) {
    unsigned c = zs_cls_of(n);
    zs_run *r = h->cls[c].cur;
    unsigned char *u = r->free;
    if (HK__UNLIKELY(u == r->base)) return hk__zs_alloc_slow(h, c);
    return zs_pop(h, r, u);
}

/* The same for n <= ZS_DIRECT_MAX: the run in one load. */
static inline void *zs_alloc_direct(zs_heap *h, size_t n) {
    zs_run *r = h->direct[(n + 7u) >> 3];
    unsigned char *u = r->free;
    if (HK__UNLIKELY(u == r->base)) return hk__zs_alloc_slow(h, zs_cls_of(n));
    return zs_pop(h, r, u);
}

/* Whether a free of slot `off` (from the run's base) of run r, by its owner
 * h, must go to the slow path: not a carved slot's start (an interior or
 * foreign pointer, or a slot never handed out), another heap's run, a remote
 * free of it not collected, or a first word that may be a free-list link
 * (a double free, or data that looks like one). */
static inline int zs_free_odd(const zs_heap *h, zs_run *r, const void *p) {
    uint32_t o = (uint32_t)(uintptr_t)p - r->org; /* wraps in the header (p is in r's granule) */
    uint64_t q = (uint64_t)o * r->recip;
    if (HK__UNLIKELY(o >= ZS_LOAD(r->limit)) || HK__UNLIKELY((uint32_t)q >= 65536u) ||
        HK__UNLIKELY(r->heap != h))
        return 1;
    if (HK__UNLIKELY(ZS_LOAD(r->rpend) != 0)) {
        /* remote frees wait: is this one of them? */
        uint32_t i = (uint32_t)(q >> 32);
        if ((__atomic_load_n(zs_rbits(r) + (i >> 6), __ATOMIC_RELAXED) >> (i & 63u)) & 1u) return 1;
    }
    return zs_maybe_link(r, zs_word(p));
}

/* Frees p, a pointer into granule r (zs_run_of), for heap h (the calling
 * thread's, or NULL when it has none). The owner's free of a used slot is
 * done here; anything else (another heap's run, misuse, a first
 * word that looks like a link) goes to hk__zs_free_slow. O(1). */
static inline hk_result zs_free(zs_space *sp, zs_heap *h, zs_run *r, void *p, const char *op) {
#ifndef HK_ZONE_UNCHECKED
    if (HK__UNLIKELY(zs_free_odd(h, r, p))) return hk__zs_free_slow(sp, h, r, p, op);
#else
    /* HK_ZONE_UNCHECKED (a build for measuring what the checks cost, never
     * shipped): the owner's free takes the block on trust */
    if (HK__UNLIKELY(r->heap != h)) return hk__zs_free_slow(sp, h, r, p, op);
#endif
    hk__asan_poison(p, r->stride);
    zs_link(p, (uint64_t)(uintptr_t)r->free ^ r->key);
    r->free = (unsigned char *)p;
    uint32_t used = r->used - 1;
    ZS_USED_SET(r, used);
    /* it emptied, or was full; a current run that empties stays as it is
     * (a batch that frees all it took empties its classes' current runs),
     * counted toward the tail's poll only */
    if (HK__UNLIKELY(used == 0) && (r->state != ZS_CUR || --h->tail_left == 0)) return hk__zs_free_tail(h, r);
    return HK_OK;
}

/* Usable bytes of the used slot at p (granule r), or 0 when p is no used
 * slot, as judged by heap h (the caller's, or NULL): O(1), but
 * O(free slots) for h's own run when p's first word looks like a link; in
 * another heap's run such a block is taken for free. */
size_t hk__zs_usable(const zs_heap *h, zs_run *r, const void *p);

#endif /* HEAPKIT_ZONE_SMALL_H */

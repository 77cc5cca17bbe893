/*
 * src/guard_internal.h - the guard heap's shared state and the calls between
 * its files. Not part of the public API.
 *
 * The guard heap is split by concept; each file calls only files below it
 * in this list (no two call each other):
 *   guard.c           the public API: create/destroy, alloc/free/realloc,
 *                     sampling, stats, info, fork hooks, the paranoid
 *                     after-op check
 *   guard_leak.c      leak detection (hk_guard_leaks)
 *   guard_check.c     check, walk, where
 *   guard_fault.c     the fault callback: a SIGSEGV in a guard page -> report
 *   guard_slots.c     guarded blocks: slots, page map, quarantine, padding
 *   guard_fallback.c  unguarded blocks (backing allocator) and their
 *                     batched counters
 *   guard_report.c    report text: formatting, stacks symbolized, misuse
 *   guard_trace.c     stack capture and the trace depot
 * and all of them call the host layer (src/os.h), never the OS directly.
 *
 * Address space: ONE reservation ("arena") carved, from its start, into
 * slots. A slot is one guard page followed by `pages` data pages:
 *
 *   arena: [G|D D][G|D][G|D D D][G|D] ... bump ... (never carved, inaccessible)
 *
 * The guard page of the next slot (or the uncarved space) is the trailing
 * guard of the one before it, so a block with k data pages costs k + 1
 * pages of address space.
 *
 * Invariants (verified by hk_guard_check):
 *  - slots tile [arena, arena + bump) with no gap; pagemap[i] is the id of
 *    the slot holding arena page i (its guard page included) for every
 *    page below bump; ids are never reused for another range.
 *  - a slot is LIVE (data pages read/write, user block at data + user_off,
 *    requested bytes, the rest of the data pages HK_FILL_PAD), QUAR (freed,
 *    data pages inaccessible, on the quarantine FIFO) or FREE (evicted,
 *    pages inaccessible, on bins[pages] or the large list; with
 *    HK_GUARD_FAST_REUSE an own-mapping slot is FREE at once and stays
 *    read/write, GUARD_SLOT_OPEN).
 *    Guard pages are always inaccessible.
 *  - every slot record's `sum` is the checksum of its other fields keyed by
 *    the instance secret: a stray write into the metadata is detected on
 *    the next use of the record.
 *  - live_guarded / used_guarded / q_blocks / q_bytes equal the sums over the
 *    slots in those states; q_bytes <= quarantine_bytes and q_blocks <=
 *    quarantine_blocks after every free.
 *  - (own-mapping slots + live shared slots) <= max_guarded, so the
 *    process's mapping count stays under vm.max_map_count.
 *
 * Locking: one lock (the desc's hooks, or the instance's mutex installed as
 * the core's hooks) around every state change; the unguarded path takes no
 * lock (its counters are batched per thread). The fault callback reads the
 * metadata without the lock: it only runs when the program is about to die.
 */
#ifndef HEAPKIT_GUARD_INTERNAL_H
#define HEAPKIT_GUARD_INTERNAL_H

#include "heapkit/guard.h"
#include "common.h"
#include "internal.h"

#define GUARD_STATE_LIVE    1u
#define GUARD_STATE_QUAR    2u
#define GUARD_STATE_FREE    3u
#define GUARD_SLOT_RESIDENT 1u /* the data pages hold memory (inaccessible unless LIVE) */
#define GUARD_SLOT_OWN      2u /* the data pages are a kernel mapping of their own (hk_os_map_own) */
#define GUARD_SLOT_PADDED                                                                                    \
    4u /* resident pages hold HK_FILL_PAD everywhere but [user_off, user_off + requested) */
#define GUARD_SLOT_OPEN 8u /* FREE with HK_GUARD_FAST_REUSE: still read/write */
#define GUARD_SLOT_GI                                                                                        \
    16u /* HK_GUARD_FAST_REUSE, side START: carved from the read/write open chunk, its guard page installed  \
           (hk_os_guard_install); never protected, no mapping of its own */
#define GUARD_OPEN_CHUNK     ((size_t)2 << 20) /* the open chunk grows by this much */
#define GUARD_GI_BATCH_PAGES 64                /* GUARD_SLOT_GI slots are carved this many pages at a time, */
#define GUARD_GI_BATCH       32                /* and at most this many slots */
#define GUARD_RESIDENT_POOL  ((size_t)16 << 20) /* evicted pages kept for reuse without a page fault */
#define GUARD_BINS           64
#define GUARD_FB_HDR         16u
#define GUARD_FB_CANARY      8u
#define GUARD_FB_MAGIC       0x6b680a11u
#define GUARD_FB_DEAD        0x6b68deadu
#define GUARD_TRACE_BUCKETS  (1u << 16) /* at most; the table starts at GUARD_TRACE_BUCKETS0 and doubles */
#define GUARD_TRACE_BUCKETS0 (1u << 10) /* one page: a short run touches one */
#define GUARD_TRACE_RESERVE  ((size_t)64 << 20)
#define GUARD_TRACE_HDR      16u /* bytes before the frames of a depot record */
#define GUARD_COMMIT_CHUNK   ((size_t)1 << 20)
#define GUARD_MAX_INSTANCES  8
#define GUARD_MIN_RESERVE    ((size_t)16 << 20) /* the smallest arena create settles for */

typedef struct guard_slot { /* 40 bytes: per live block, this and 8 bytes of page map */
    size_t requested;       /* bytes asked for (LIVE, QUAR; kept while FREE for reports) */
    uint32_t base_page;     /* arena page index of the slot's leading guard page */
    uint32_t pages;         /* data pages after the guard */
    uint32_t user_off;      /* user pointer - first data page */
    uint32_t next;          /* free-list / quarantine link (slot id, 0 = none) */
    uint32_t alloc_trace, free_trace;
    uint16_t state;  /* GUARD_STATE_* */
    uint16_t sflags; /* GUARD_SLOT_* */
    uint32_t sum;    /* keyed checksum of the fields above */
} guard_slot;
_Static_assert(sizeof(guard_slot) == 40, "slot records are 40 bytes");

typedef struct guard_fb_hdr { /* before each checked unguarded block */
    uint64_t size;
    uint32_t off;   /* user - raw */
    uint32_t magic; /* GUARD_FB_MAGIC ^ address bits (live) or GUARD_FB_DEAD ^ address bits (freed) */
} guard_fb_hdr;

typedef struct guard_region { /* a metadata reservation committed from its start */
    unsigned char *base;      /* reservation start (its first page is never committed) */
    size_t size;              /* reserved bytes */
    size_t committed;         /* bytes committed after the first page */
} guard_region;

struct hk_guard {
    hk__core core;     /* names, error hook, lock hooks, flags, paranoid check */
    hk_os_mutex mutex; /* the lock when the desc has no hooks */
    bool own_mutex;
    /* configuration */
    hk_guard_side side;
    size_t align, align_min, page; /* a block's alignment: a power of two in [align_min, align] */
    size_t q_max_bytes, q_max_blocks;
    uint32_t sample_rate;
    size_t max_guarded;
    int frames, report_fd, skip;
    hk_guard_backing backing;
    uint64_t rng, secret;
    /* address space */
    unsigned char *arena;
    size_t arena_size, bump;
    /* metadata */
    guard_region slot_reg, map_reg, trace_reg, bucket_reg;
    guard_slot *slots; /* slots[0] unused */
    uint32_t nslots;   /* ids handed out so far (including 0) */
    uint32_t *pagemap;
    uint32_t bins[GUARD_BINS + 1];
    uint32_t large;
    uint32_t q_head, q_tail;
    size_t q_blocks, q_bytes;
    size_t resident_free;  /* data bytes of FREE slots whose pages are kept resident */
    size_t n_own, own_max; /* slots whose data pages are a mapping of their own, and the cap */
    size_t open_end;       /* GUARD_SLOT_GI carving: arena bytes from its start mapped read/write */
    int gi;             /* GUARD_SLOT_GI carving: 1 on (FAST_REUSE, side START, the kernel has it), 0 off */
    size_t live_shared; /* LIVE slots without a mapping of their own */
    size_t trace_stride;
    uint32_t ntraces;
    uint32_t nbuckets; /* a power of two: doubled (and the chains rebuilt) when ntraces passes it */
    uint32_t *buckets;
    /* counters (guarded path, under the lock) */
    size_t live_guarded, used_guarded, peak_used;
    uint64_t alloc_count, free_count, fail_count, over_cap;
    /* unguarded-path counters: an entry of guard_fallback.c's table */
    uint32_t ctr;
    uint64_t ctr_gen;
    uint64_t reports;    /* atomic */
    bool fault_attached; /* registered with the installed fault handler: protected calls protect */
    size_t self_size;
};

/* A copy of a slot's facts, taken under the lock, for reports. */
typedef struct guard_blockinfo {
    int valid;
    uintptr_t user;
    size_t requested;
    uint32_t state;
    uint32_t alloc_trace, free_trace;
} guard_blockinfo;

/* ---- small shared helpers ------------------------------------------------------ */

static inline void guard_lock(hk_guard *g) { hk__core_lock(&g->core); }
static inline void guard_unlock(hk_guard *g) { hk__core_unlock(&g->core); }

static inline uint64_t guard_mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

static inline uint64_t guard_rand(uint64_t *s) {
    uint64_t x = *s ? *s : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static inline uint32_t guard_slot_hash(const hk_guard *g, const guard_slot *s) {
    uint64_t h = g->secret;
    h = guard_mix(h ^ ((uint64_t)s->base_page << 32 | s->pages));
    h = guard_mix(h ^ (uint64_t)s->requested);
    h = guard_mix(h ^ ((uint64_t)s->user_off << 32 | s->next));
    h = guard_mix(h ^ ((uint64_t)s->alloc_trace << 32 | s->free_trace));
    h = guard_mix(h ^ ((uint64_t)s->sflags << 16 | s->state));
    return (uint32_t)(h ^ (h >> 32));
}
static inline void guard_seal(const hk_guard *g, guard_slot *s) { s->sum = guard_slot_hash(g, s); }
static inline bool guard_slot_ok(const hk_guard *g, const guard_slot *s) {
    return s->sum == guard_slot_hash(g, s);
}

static inline bool guard_in_arena(const hk_guard *g, const void *p) {
    return (uintptr_t)p - (uintptr_t)g->arena < g->arena_size;
}
static inline uintptr_t guard_base(const hk_guard *g, const guard_slot *s) {
    return (uintptr_t)g->arena + (uintptr_t)s->base_page * g->page;
}
static inline uintptr_t guard_data(const hk_guard *g, const guard_slot *s) {
    return guard_base(g, s) + g->page;
}
static inline uintptr_t guard_user(const hk_guard *g, const guard_slot *s) {
    return guard_data(g, s) + s->user_off;
}
static inline size_t guard_data_bytes(const hk_guard *g, const guard_slot *s) {
    return (size_t)s->pages * g->page;
}

/* Slot id of the arena page holding p, 0 when none (not carved yet). */
static inline uint32_t guard_slot_of(const hk_guard *g, const void *p) {
    if (!guard_in_arena(g, p)) return 0;
    size_t off = (size_t)((uintptr_t)p - (uintptr_t)g->arena);
    if (off >= g->bump) return 0;
    return g->pagemap[off / g->page];
}

static inline void guard_blockinfo_from(const hk_guard *g, const guard_slot *s, guard_blockinfo *b) {
    b->valid = 1;
    b->user = guard_user(g, s);
    b->requested = s->requested;
    b->state = s->state;
    b->alloc_trace = s->alloc_trace;
    b->free_trace = s->free_trace;
}

/* Metadata regions: a reservation whose first page is never committed,
 * committed from there in chunks as it fills. */
static inline unsigned char *guard_region_data(const guard_region *r, size_t page) { return r->base + page; }
static inline bool guard_region_init(guard_region *r, size_t bytes, size_t page) {
    size_t sz;
    if (!hk_size_add(bytes, 2 * page, &sz) || !hk_size_align(sz, page, &sz)) return false;
    r->base = (unsigned char *)hk_os_reserve(sz);
    if (!r->base) return false;
    r->size = sz;
    r->committed = 0;
    return true;
}
static inline void guard_region_free(guard_region *r) {
    if (r->base) hk_os_release(r->base, r->size);
    r->base = NULL;
}
/* Makes the first `need` bytes after the leading guard page usable. */
static inline bool guard_region_ensure(guard_region *r, size_t need, size_t page) {
    if (need <= r->committed) return true;
    size_t want;
    if (!hk_size_align(need, GUARD_COMMIT_CHUNK, &want)) return false;
    if (want > r->size - 2 * page) want = r->size - 2 * page;
    if (want < need) return false;
    if (hk_os_commit(guard_region_data(r, page) + r->committed, want - r->committed) != HK_OK) return false;
    r->committed = want;
    return true;
}

/* ---- guard_trace.c: stacks ------------------------------------------------------- */

/* Captures the stack of the public entry point's caller: this call, the
 * `depth` heapkit frames above it (1 when called from the public entry
 * point itself, 2 from a helper it calls; never through a tail call) and
 * desc.skip_frames are dropped. At most g->frames; none with
 * HK_GUARD_NO_TRACES. */
HK__HIDDEN int hk__guard_capture(const hk_guard *g, void **frames, int depth);
/* Interns a stack in the depot (under the lock). 0 when none or full. */
HK__HIDDEN uint32_t hk__guard_trace_put(hk_guard *g, void *const *frames, int n);
/* The frames of trace id (NULL and *n = 0 when none). */
HK__HIDDEN const void *const *hk__guard_trace_get(const hk_guard *g, uint32_t id, int *n);

/* ---- guard_report.c: report text --------------------------------------------------- */

/* A bounded output buffer; appends never overrun (they truncate) and never
 * allocate: async-signal-safe. */
typedef struct guard_out {
    char *buf;
    size_t n, cap;
} guard_out;
HK__HIDDEN void hk__guard_out_mem(guard_out *o, const char *s, size_t n);
HK__HIDDEN void hk__guard_out_str(guard_out *o, const char *s);
HK__HIDDEN void hk__guard_out_dec(guard_out *o, uint64_t v);
HK__HIDDEN void hk__guard_out_sdec(guard_out *o, int64_t v); /* with its sign, "+5" / "-5" */
HK__HIDDEN void hk__guard_out_hex(guard_out *o, uint64_t v); /* "0x..." */
HK__HIDDEN void hk__guard_out_ptr(guard_out *o, const void *p);

/* Non-zero while this thread writes a report: allocations made meanwhile
 * (the symbolizer's, when the heap is the process's malloc) are served
 * unguarded, without the lock and without a stack capture. */
extern _Thread_local int hk__guard_tl_reporting __attribute__((tls_model("initial-exec")));

/* Once per process, before the first report: which module we are. */
HK__HIDDEN void hk__guard_report_init(void);
/* The report buffer and symbol table are process-wide: one report at a
 * time. begin returns the buffer to write into (an empty guard_out). */
HK__HIDDEN guard_out hk__guard_report_begin(void);
HK__HIDDEN void hk__guard_report_end(void);
/* "==pid== heapkit guard: " */
HK__HIDDEN void hk__guard_out_prefix(guard_out *o);
/* Finishes a detailed report whose headline is in o: the current stack
 * (cur, under "  <label>:" when label is not NULL; fault: cur[0] is a
 * faulting pc, not a return address), the block's
 * allocation and free stacks, "aborting" when `aborting`; then writes it
 * to report_fd. Caller is between report_begin and report_end. */
HK__HIDDEN void hk__guard_report_finish(hk_guard *g, guard_out *o, const char *label, void *const *cur,
                                        int ncur, int fault, const guard_blockinfo *b, bool aborting);
/* "1 byte" / "2 bytes" */
HK__HIDDEN void hk__guard_out_count(guard_out *o, uint64_t n, const char *one, const char *many);
/* One misuse: the one-line report through the core's reporter and, with
 * HK_GUARD_REPORT, the detailed one; then abort with HK_GUARD_ABORT.
 * Returns res. Call without the lock. */
HK__HIDDEN hk_result hk__guard_misuse(hk_guard *g, hk_result res, hk_error_kind kind, const void *addr,
                                      size_t size, const guard_blockinfo *b, void *const *cur, int ncur,
                                      const char *what);
/* hk__guard_misuse that aborts (with HK_GUARD_ABORT) only when may_abort. */
HK__HIDDEN hk_result hk__guard_misuse_ex(hk_guard *g, hk_result res, hk_error_kind kind, const void *addr,
                                         size_t size, const guard_blockinfo *b, void *const *cur, int ncur,
                                         const char *what, bool may_abort);
/* Damaged padding of block b (dmg > 0 after its end, < 0 before its start),
 * damaged bytes first..last, found "at free" (may abort), "by check" or
 * "at exit" (never abort): the one-line and the detailed report. */
HK__HIDDEN hk_result hk__guard_pad_report(hk_guard *g, const guard_blockinfo *b, int dmg, uintptr_t first,
                                          uintptr_t last, const char *found, void *const *cur, int ncur);
/* Formats "<lead> <p>[: offset +k of N-byte block 0x...]<tail>" into buf. */
HK__HIDDEN const char *hk__guard_fmt_what(char *buf, size_t n, const char *lead, const void *p,
                                          const guard_blockinfo *b, const char *tail);
/* A one-line HK_ERR_CORRUPT report "<what> (a, b)" (counted in reports). */
HK__HIDDEN hk_result hk__guard_corrupt(hk_guard *g, hk_error_kind kind, const void *addr, const char *what,
                                       uint64_t a, uint64_t b);

/* ---- guard_fallback.c: unguarded blocks ------------------------------------------ */

/* Claims / releases this instance's entry of the unguarded-path counters. */
HK__HIDDEN bool hk__guard_ctr_claim(hk_guard *g);
HK__HIDDEN void hk__guard_ctr_release(hk_guard *g);
/* Folds the calling thread's batched counts into the table, then reads
 * this instance's (live blocks, bytes, allocations, frees). */
HK__HIDDEN void hk__guard_ctr_read(const hk_guard *g, size_t *live, size_t *used, uint64_t *allocs,
                                   uint64_t *frees);
/* The C library's malloc family, for a desc without backing. */
HK__HIDDEN hk_guard_backing hk__guard_libc_backing(void);
/* An unguarded block (16-byte header, 8-byte canary; or plain with
 * HK_GUARD_PLAIN_UNGUARDED). NULL on exhaustion or overflow (reported). */
HK__HIDDEN void *hk__guard_fb_alloc(hk_guard *g, size_t size, size_t align);
/* Reads the header of a would-be unguarded block: 1 live, 2 freed, 0 not ours. */
HK__HIDDEN int hk__guard_fb_read(const hk_guard *g, const void *p, guard_fb_hdr *h);
/* hk__guard_fb_read() == 1 under the header's stripe lock: safe against a
 * free of p in another thread (hk_guard_owns). */
HK__HIDDEN bool hk__guard_fb_owns(const hk_guard *g, const void *p);
/* Frees p when it is a sound live unguarded block (canary intact): true.
 * Otherwise does nothing and returns false. No stack needed. */
HK__HIDDEN bool hk__guard_fb_free_sound(hk_guard *g, void *p);
/* Frees an unguarded (or plain) block, reporting double, foreign and
 * damaged frees with the stack cur. */
HK__HIDDEN hk_result hk__guard_fb_free(hk_guard *g, void *p, void *const *cur, int ncur);
/* Resizes a live checked unguarded block in place through the backing
 * realloc (header at 16 bytes, heap alignment <= 16). *done = false when
 * not applicable (then nothing happened). */
HK__HIDDEN void *hk__guard_fb_resize(hk_guard *g, void *p, const guard_fb_hdr *h, size_t size, bool *done);

/* ---- guard_slots.c: guarded blocks ------------------------------------------------- */

/* Checks a live slot's padding: 0 intact, 1 overflow (after the block),
 * -1 underflow (before it); *first and *last (may be NULL) get the lowest
 * and highest damaged byte of that side. */
HK__HIDDEN int hk__guard_pads_damaged(const hk_guard *g, const guard_slot *s, uintptr_t *first,
                                      uintptr_t *last);
/* A guarded block (or an unguarded one when over the cap / out of address
 * space / too big). Takes the lock. */
HK__HIDDEN void *hk__guard_alloc_guarded(hk_guard *g, size_t size, size_t align, void *const *frames,
                                         int nframes);
/* Frees a pointer in the arena, reporting misuse. Takes the lock. */
HK__HIDDEN hk_result hk__guard_free_guarded(hk_guard *g, void *p, void *const *cur, int ncur);
/* HK_GUARD_FAST_REUSE (the second run) only: frees p when it is the start
 * of a LIVE block in a slot that goes straight back to its bin, without a
 * free stack (nothing in that mode reports one; a misuse is never taken
 * here). Returns false, having done nothing, in every other case: the
 * caller then frees with its stack. O(1), takes the lock. */
HK__HIDDEN bool hk__guard_free_quick(hk_guard *g, void *p);

/* ---- guard_check.c ----------------------------------------------------------------- */

/* Reports every live block whose padding is damaged (found "at exit", ...);
 * returns their number. Lock held. */
HK__HIDDEN size_t hk__guard_check_pads_locked(hk_guard *g, const char *found);
/* hk_guard_check without the lock (the core's paranoid check). */
HK__HIDDEN hk_result hk__guard_check_locked(hk_guard *g);

/* ---- guard_fault.c ----------------------------------------------------------------- */

/* Registers g with the fault callback (installing it with the host layer
 * on first use): faults in its arena are reported. false when 8 instances
 * are registered already, or the handler could not be installed (then
 * hk_os_protected_call does not protect). detach is a no-op for an unregistered g. */
HK__HIDDEN bool hk__guard_fault_attach(hk_guard *g);
HK__HIDDEN void hk__guard_fault_detach(hk_guard *g);

#endif /* HEAPKIT_GUARD_INTERNAL_H */

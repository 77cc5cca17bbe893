/*
 * src/zone_runs.h - the run layer's interface: small untracked blocks as
 * slots of size-class runs (src/zone_runs.c holds the invariants and the
 * slow paths; the slot fast paths are inline here so that hk_zone_alloc and
 * hk_zone_free inline them).
 *
 * The layer's state is one zone_runset (z->runs). It asks the TLSF core for
 * exactly two things: a block for a new run (hk__zone_take, growing the zone
 * with hk__zone_grow when allowed) and taking an empty run's block back
 * (hk__zone_merge_insert, hk__zone_maybe_release). It also keeps the zone's
 * counters of live memory (used_req, peak_used, alloc_count, free_count)
 * for the slots it hands out. Everything else (which requests come here,
 * locking, reports) is its callers' business.
 *
 * Slots of one class are interchangeable, so a freed slot needs no merging:
 * it goes on its run's free list (LIFO) and the next request of its class
 * takes it.
 */
#ifndef HEAPKIT_ZONE_RUNS_H
#define HEAPKIT_ZONE_RUNS_H

#include "zone_internal.h"

/* ---- threads zones: a run's extension and a per-thread heap's table ---------- */

/* A slot header whose slot was freed by another thread and awaits its
 * owner's collection: slot marks, USED clear, PREV_USED (unused by slots)
 * set. Its slack is kept (stats subtract the pending bytes). */
#define ZB_SLOT_REMOTE (ZB_RUN_MARK | ZB_EXT | ZB_PREV_USED)
/* What turns a used slot header into the remote one by one xor: the bits
 * change by USED ^ PREV_USED, and the check (zone_slot_chk folds its
 * inputs with xors; a change below bit 16 folds onto itself) by the same.
 * tests/test_zone_threads.c compares it with zone_hdr_make. */
#define ZONE_W_REMOTE_K                                                                                      \
    (((uint64_t)(ZB_SLOT_USED ^ ZB_SLOT_REMOTE) << 40) ^ ((uint64_t)(ZB_SLOT_USED ^ ZB_SLOT_REMOTE) << 48))

struct zone_heap;

/* A run's extension in a threads zone: just below its run struct
 * (zone_run_ext), on a cache line of its own: what a remote freer checks a
 * slot against (copies of the run's address, stride and carved count), the
 * owner heap and the links. A remote freer reads only this line (and
 * writes only the slot's header), never the run struct's line, which the
 * owner rewrites on every operation. */
typedef struct zone_run_x {
    struct zone_heap *heap;           /* owner heap (fixed for the run's life); NULL: the zone's own runs */
    zone_run *run;                    /* atomic: the run while it is one; NULL once released */
    uint32_t stride;                  /* r->stride */
    uint32_t bump;                    /* atomic: r->bump (the carve stores both) */
    struct zone_run_x *anext, *aprev; /* z->xruns, lock held */
    /* owner only: the bytes requested by the run's tagged slots (used or
     * remote), so that free_tags can free a run holding only slots of its
     * tags without reading their headers */
    uint32_t treq;
    /* hk_zone_check's scratch: the run's slots it found in its heap's
     * cache (zone_check.c) */
    uint32_t ccached;
} zone_run_x;

typedef struct zone_heap {
    /* The owner's cache of the slots it freed (untagged) or collected
     * from other threads' frees (zone_remote.c), per class: LIFO
     * lists linked through the slots' first 8 bytes. A cached slot has a
     * free header but stays counted in its run's `used` (so no run holding
     * one is settled or given back); allocations of its class take it
     * first. ncache (atomic: stats read it) counts each list; a list
     * holds at most zone_cache_max_tab[class] slots: a slot freed or
     * collected while its list is full goes to its run's free list (each
     * slot handled once). The lists go back to their runs only at thread
     * exit, the owner's trim and free_tags (hk__zone_thr_cache_flush). */
    unsigned char *cache[ZONE_NCLS];
    uint32_t ncache[ZONE_NCLS];
    zone_cls cls[ZONE_NCLS]; /* owner only */
    zone_rnode *inbox;       /* atomic stack of batches of this heap's slots freed by other threads */
    /* no thread owns it; the next heap request adopts it (atomic stores,
     * lock held). Beside the inbox: a pusher reads it after its push, on
     * the line it has just written, not on the owner's counters' line. */
    int abandoned;
    zone_rsrc rs; /* owner only: its own frees of other heaps' slots */
    /* Counters of the owner's slots (relaxed atomic stores by the owner,
     * relaxed loads by stats; summed with the zone's at read time; a
     * heap's own used_req may wrap: only the sum means anything). The
     * slots' bytes have no counter: stats sum the runs' used counts. */
    size_t used_req;
    uint64_t alloc_count, free_count;
    struct zone_heap *next; /* z->heaps, lock held */
    hk_zone *z;
    size_t os_size;
    /* The decay clock (zone_decay.c), polled by the owner's frees: when
     * free_count reaches decay_poll_at (atomic: the thread arming the decay
     * resets it to 0) the owner reads the clock, about every 4 ms while the
     * decay is armed (decay_poll_ns, decay_poll_fc: its last poll). */
    uint64_t decay_poll_at;
    uint64_t decay_poll_ns, decay_poll_fc;
    /* owner only: alloc_count from which the next collection of remote
     * frees is due before a carve or a refill (zone_thr_collect_due) */
    uint64_t collect_at;
    /* Bit t: this heap made tagged slots of tag t (set by the owner;
     * read and cleared by free_tags while the owners are quiescent). */
    uint64_t tagmap[4];
    /* Bytes of the blocks of this heap's runs (lock held: runs are made
     * and given back under it): the larger a heap, the larger its new runs
     * may be (zone_runs.c, zone_run_slots). */
    size_t run_bytes;
} zone_heap;

/* The extension sits ZONE_RUN_XOFF bytes below the run struct, between the
 * block header and the struct: a new run writes only its first page or
 * two, and the slots it has not carved yet stay untouched (an extension
 * past the last slot faulted in one more page per run). The extension
 * and the run struct are on different cache lines. */
static inline zone_run_x *zone_run_ext(const zone_run *r) {
    return (zone_run_x *)((uintptr_t)r - ZONE_RUN_XOFF);
}
_Static_assert(sizeof(zone_run_x) <= ZONE_RUN_XOFF && ZONE_RUN_XOFF % 64u == 0,
               "the extension fits below the run struct, which stays 64-byte aligned");
/* Whether run r has an extension (a threads zone's: its struct sits
 * ZONE_RUN_XOFF further into its block). */
static inline int zone_run_has_ext(const zone_run *r) { return r->lead >= ZONE_RUN_XOFF; }
/* Bytes a threads zone's run block needs for the extension. */
#define ZONE_RUN_XBYTES ((size_t)ZONE_RUN_XOFF)

/* The class table run r belongs to (its heap's or the zone's). */
static inline zone_cls *zone_run_cls(hk_zone *z, const zone_run *r) {
    if (z->threads) {
        zone_heap *h = zone_run_ext(r)->heap;
        if (h) return &h->cls[r->cls];
    }
    return &z->runs.cls[r->cls];
}

/* A class's list of partial runs (the zone's under the lock; a heap's by
 * its owner, or with the owner quiescent). */
static inline void zone_partial_push(zone_cls *c, zone_run *r) {
    r->prev = NULL;
    r->next = c->partial;
    if (c->partial) c->partial->prev = r;
    c->partial = r;
    r->state = ZONE_RUN_PARTIAL;
}
static inline void zone_partial_unlink(zone_cls *c, zone_run *r) {
    if (r->prev)
        r->prev->next = r->next;
    else
        c->partial = r->next;
    if (r->next) r->next->prev = r->prev;
}

/* ---- slow paths (zone_runs.c) ------------------------------------------------ */

/* The current run of class ci is exhausted or absent: makes a partial,
 * spare or new run current and takes a slot from it (its user pointer; its
 * run in *out, its header word in *word). NULL when no run can be had
 * (nothing is purged for a run; the caller falls back to a plain block). */
unsigned char *hk__zone_slot_refill(hk_zone *z, unsigned ci, zone_run **out, uint32_t *word);
/* A run's state after a slot of it was freed (full -> partial; an empty
 * partial run becomes the class's spare or goes back to the core). */
void hk__zone_run_settle(hk_zone *z, zone_run *r);
/* Carves run r's next untouched slot (its user pointer, its header word,
 * slack 0, in *word; the caller writes its used header), and the slots
 * after it whose header and link lie in the pages that slot touches
 * (ZONE_CARVE_SPAN-aligned), ZONE_CARVE_MAX slots in all at most, onto r's
 * free list, lowest address first, with free headers: the next
 * allocations pop them, and no page is faulted in ahead of use. NULL when
 * r has no untouched slot. `bump` is stored with a relaxed atomic store
 * (remote freers read it). O(ZONE_CARVE_MAX). */
unsigned char *hk__zone_run_carve(zone_run *r, uint32_t *word);
/* Gives back every class's spare run and its current run when empty (before
 * any purge, growth or failure). Returns 1 when it gave back a run, else 0.
 * O(classes). */
int hk__zone_runs_trim(hk_zone *z);
/* The current run of class ci has no freed slot and the class's first
 * partial run has: makes that run current (the old one goes on the partial
 * list, or is marked full when it has no uncarved slot) and returns it, so
 * that freed slots are reused before untouched ones are carved. O(1). */
zone_run *hk__zone_slot_reuse(hk_zone *z, unsigned ci);
/* Frees every used slot of run r at once and takes r off its class (the
 * caller then releases it). Returns the slots freed. O(slots of r). */
size_t hk__zone_run_free_all(hk_zone *z, zone_run *r);
/* A new run of class ci (heap h in a threads zone, else NULL), on no
 * list, or NULL; larger than the full run of `prev` slots it replaces (0:
 * none; zone_runs.c's zone_run_slots gives the sizes). Lock held. */
zone_run *hk__zone_run_new(hk_zone *z, unsigned ci, struct zone_heap *h, uint32_t prev);
/* Gives the empty run r (on no list) back to the TLSF core. Returns the
 * merged free block. */
zone_blk *hk__zone_run_release(hk_zone *z, zone_run *r);

/* ---- fast paths ------------------------------------------------------------------ */

/* The slot header as one word (atomic access: a threads zone's owner
 * rewrites its slots' headers while other threads may read them). */
static inline uint64_t zone_hdr_load(const zone_blk *b) {
    return __atomic_load_n((const zone_word *)((const unsigned char *)b + 8), __ATOMIC_RELAXED);
}
static inline void zone_hdr_store(zone_blk *b, uint64_t w) {
    __atomic_store_n((zone_word *)((unsigned char *)b + 8), w, __ATOMIC_RELEASE);
}
static inline uint64_t zone_hdr_make(const zone_blk *b, uint32_t word, unsigned tag, unsigned bits) {
    return (uint64_t)word | ((uint64_t)tag << 32) | ((uint64_t)bits << 40) |
           ((uint64_t)zone_slot_chk(b, word, tag, bits) << 48);
}
static inline unsigned zone_w_bits(uint64_t w) { return (unsigned)(w >> 40) & 0xffu; }
static inline unsigned zone_w_tag(uint64_t w) { return (unsigned)(w >> 32) & 0xffu; }

/* What turns a free slot's header word into the used header of the same
 * slot with `slack`, and back, by one xor: the slack goes into the word
 * (bits 19..31), the tag from 0 to static, the bits from free to used, and
 * the check changes by the fold of all that (zone_slot_chk xors its inputs
 * and folds by h ^ (h >> 16): the slack's fold lands on check bits 3..15,
 * the tag and bits' on bits 0..15 as they are). tests/test_zone_threads.c
 * compares it with zone_hdr_make for every class and slack. */
#define ZONE_W_USE_DBITS ((uint64_t)(ZB_SLOT_USED ^ ZB_SLOT_FREE))
#define ZONE_W_USE_KT(tag)                                                                                   \
    (((uint64_t)(tag) << 32) ^ (ZONE_W_USE_DBITS << 40) ^ ((((uint64_t)(tag) << 8) ^ ZONE_W_USE_DBITS) << 48))
#define ZONE_W_USE_K ZONE_W_USE_KT(HK_TAG_STATIC)
static inline uint64_t zone_w_use_delta(uint32_t slack) {
    return ((uint64_t)slack << 19) ^ ((uint64_t)slack << 51) ^ ZONE_W_USE_K;
}
/* The same for a tagged slot (a threads zone's) of tag `tag`. */
static inline uint64_t zone_w_use_delta_tag(uint32_t slack, unsigned tag) {
    return ((uint64_t)slack << 19) ^ ((uint64_t)slack << 51) ^ ZONE_W_USE_KT(tag);
}

static inline void zone_slot_set(zone_blk *b, uint32_t word, unsigned tag, unsigned bits) {
    b->size16 = word;
    b->tag = (uint8_t)tag;
    b->bits = (uint8_t)bits;
    b->chk = zone_slot_chk(b, word, tag, bits);
}

/* A slot of run r (its user pointer), with its header word (index and
 * class) in *word, or NULL when r has none left: the free list's first,
 * else a carve (hk__zone_run_carve). */
static inline unsigned char *zone_slot_pop(zone_run *r, uint32_t *word) {
    unsigned char *u = r->free;
    if (u) {
        zone_unpoison(u, sizeof(void *));
        r->free = *(unsigned char **)u;
        *word = zone_from_user(u)->size16 & 0x7ffffu;
        return u;
    }
    return hk__zone_run_carve(r, word);
}

/* The rest of making slot u of run r a used block of n bytes, its header
 * written: the run's count, the poisoning, the zone's counters. */
static inline void *zone_slot_count(hk_zone *z, zone_run *r, unsigned char *u, uint32_t slack, size_t n) {
    r->used++;
    zone_unpoison(u, n);
    if (slack > ZONE_OVERLAP) zone_poison(u + n, slack - ZONE_OVERLAP);
    z->slot_bytes += r->stride;
    z->used_req += n;
    z->alloc_count++;
    if (z->used_req > z->peak_used) z->peak_used = z->used_req;
    return u;
}

/* Makes slot u (just popped from run r, header word `word`) a used block
 * of n bytes. */
static inline void *zone_slot_finish(hk_zone *z, zone_run *r, unsigned char *u, uint32_t word, size_t n) {
    uint32_t slack = r->stride - ZONE_OVERLAP - (uint32_t)n;
    zone_slot_set(zone_from_user(u), word | (slack << 19), HK_TAG_STATIC, ZB_SLOT_USED);
    return zone_slot_count(z, r, u, slack, n);
}

/* n <= ZONE_RUN_MAX_REQ bytes from the free list of the current run of n's
 * class, or NULL when it is empty (or there is no current run). O(1). */
static inline void *zone_slot_alloc_fast(hk_zone *z, size_t n) {
    zone_run *r = z->runs.cls[zone_cls_of(n)].cur;
    if (HK__LIKELY(r != NULL)) {
        unsigned char *u = r->free;
        if (HK__LIKELY(u != NULL)) {
            /* a freed slot: its free header becomes the used one by one xor */
            zone_unpoison(u, sizeof(void *));
            r->free = *(unsigned char **)u;
            uint32_t slack = r->stride - ZONE_OVERLAP - (uint32_t)n;
            zone_hdr_store(zone_from_user(u), zone_hdr_load(zone_from_user(u)) ^ zone_w_use_delta(slack));
            return zone_slot_count(z, r, u, slack, n);
        }
    }
    return NULL; /* slots not carved yet and refills: zone_slot_alloc */
}

/* n <= ZONE_RUN_MAX_REQ bytes from a run, refilling the class when needed;
 * NULL (no report) when no run can be had. O(1). */
static inline void *zone_slot_alloc(hk_zone *z, size_t n) {
    unsigned ci = zone_cls_of(n);
    zone_run *r = z->runs.cls[ci].cur;
    if (r && !r->free && z->runs.cls[ci].partial && z->runs.cls[ci].partial->free)
        r = hk__zone_slot_reuse(z, ci);
    uint32_t word;
    unsigned char *u = r ? zone_slot_pop(r, &word) : NULL;
    if (HK__UNLIKELY(!u)) {
        u = hk__zone_slot_refill(z, ci, &r, &word);
        if (!u) return NULL;
    }
    return zone_slot_finish(z, r, u, word, n);
}

/* Where the run of the slot at b would be, by arithmetic only (nothing
 * read), from its header word `word`: *r, and *stride the class's slot
 * size; 0 when the run struct, or the `below` bytes before it (0, or
 * ZONE_RUN_XOFF for a threads zone's extension), would start below lo. lo
 * is the lowest user pointer of b's region (its base + ZONE_HDR), b's user
 * pointer is at least lo and at most the region's end. The run struct is
 * below b (b - idx * stride - ZONE_RUN_SLOT0), so its bytes lie inside the
 * region once its address is at least lo: no upper bound is needed, and
 * the lower one is tested on the distance, which cannot wrap. */
static inline int zone_slot_run_at(uintptr_t lo, const zone_blk *b, uint32_t word, uintptr_t below,
                                   zone_run **r, uint32_t *stride) {
    uintptr_t a = (uintptr_t)b + ZONE_HDR;
    *stride = zone_cls_stride((word >> 12) & 0x7fu);
    uintptr_t off = (uintptr_t)(word & 0xfffu) * *stride + ZONE_RUN_SLOT0 + ZONE_HDR;
    if (off + below > a - lo) return 0;
    *r = (zone_run *)(a - off);
    return 1;
}

/* Whether r is a live run of `stride`-byte slots (a class past the last
 * has stride 0: no run matches). The caller also tests the slot's index
 * against the run's carved count (`bump`). */
static inline int zone_run_is(const zone_run *r, uint32_t stride) {
    return r->first == (unsigned char *)r + ZONE_RUN_SLOT0 && r->stride == stride;
}

/* The run of the slot at b whose header word is `word`, or NULL when it
 * names none (zone_slot_run_at, zone_run_is, then the index against the
 * carved count, read atomically: a threads zone's owner may be carving). */
static inline zone_run *zone_slot_run_w(uintptr_t lo, const zone_blk *b, uint32_t word) {
    zone_run *r;
    uint32_t stride;
    if (!zone_slot_run_at(lo, b, word, 0, &r, &stride) || !zone_run_is(r, stride) ||
        (word & 0xfffu) >= __atomic_load_n(&r->bump, __ATOMIC_RELAXED))
        return NULL;
    return r;
}

/* The run of the used slot whose user pointer is p (b = its header), when
 * p lies in the region whose lowest user pointer is lo, 16-aligned (the
 * caller checked both), and the header says so; NULL otherwise (the locked
 * lookup then decides and reports). The header's tag and bits must be a
 * used untracked slot's, and its index and class must place a run struct
 * in the region whose first slot and stride agree and whose carved slots
 * include the index. That binds p to exactly one slot of a genuine run: an
 * interior or foreign pointer would need bytes laid out as a run struct
 * (its own address + ZONE_RUN_SLOT0, the stride) at that distance. So the
 * 16-bit check is not recomputed here: a header damaged only in its slack
 * passes, frees with a wrong byte count and leaves a free header whose
 * check fails, which hk_zone_check reports. *w gets the header word. */
static inline zone_run *zone_slot_used_run(uintptr_t lo, const zone_blk *b, uint64_t *w) {
    uint64_t hw = zone_hdr_load(b);
    *w = hw;
    if (HK__UNLIKELY(((hw >> 32) & 0xffffu) != (HK_TAG_STATIC | (ZB_SLOT_USED << 8)))) return NULL;
    return zone_slot_run_w(lo, b, (uint32_t)hw);
}

/* A plain zone's lock-free test of a pointer to free or resize
 * (ZONE_FAST_RUNS): the run of the used slot whose user pointer is p (its
 * header word in *w), or NULL (anything else: the locked path decides and
 * reports). p is validated as an integer before any header is read: inside
 * the hint region (a zone of several regions moves the hint to p's), 16-
 * aligned; then zone_slot_used_run. O(1); O(log regions) when the hint
 * moves. */
static inline zone_run *zone_fast_slot(hk_zone *z, const void *p, uint64_t *w) {
    uintptr_t a = (uintptr_t)p, lo = z->hint_lo;
    if (HK__UNLIKELY(a - lo > z->hint_span)) {
        if (z->nregions < 2 || zone_find_region(z, p) < 0) return NULL;
        lo = z->hint_lo;
        if (a - lo > z->hint_span) return NULL;
    }
    if (HK__UNLIKELY(a & 15)) return NULL;
    zone_blk *b = zone_from_user(p);
    if (zone_is_poisoned(b, ZONE_HDR)) return NULL;
    return zone_slot_used_run(lo, b, w);
}

/* The next entry of a free list (a run's, or a heap's cache) after free
 * slot u: its first 8 bytes, unpoisoned for the read only. */
static inline unsigned char *zone_free_next(unsigned char *u) {
    zone_unpoison(u, sizeof(void *));
    unsigned char *n = *(unsigned char **)u;
    zone_poison(u, sizeof(void *));
    return n;
}

/* Frees used slot b of run r (both validated), its header word being w.
 * O(1). */
static inline void zone_slot_free_w(hk_zone *z, zone_blk *b, zone_run *r, uint64_t w) {
    uint32_t stride = r->stride, slack = (uint32_t)w >> 19;
    unsigned char *u = zone_user(b);
    z->used_req -= stride - ZONE_OVERLAP - slack;
    zone_hdr_store(b, w ^ zone_w_use_delta(slack));
    zone_unpoison(u, sizeof(void *));
    *(unsigned char **)u = r->free;
    r->free = u;
    zone_poison(u, stride - ZONE_HDR);
    z->slot_bytes -= stride;
    z->free_count++;
    if (--r->used == 0 || r->state == ZONE_RUN_FULL) hk__zone_run_settle(z, r);
}

/* Frees the validated used slot b of run r (its header read here). O(1). */
static inline void zone_slot_free(hk_zone *z, zone_blk *b, zone_run *r) {
    zone_slot_free_w(z, b, r, zone_hdr_load(b));
}

/* Whether a used slot of `area` user bytes, header word w, takes n bytes
 * in place: n fits and wastes at most half the slot, or is of the slot's
 * own class (a smaller class would not save a slot). */
static inline int zone_slot_fits(uint64_t w, size_t area, size_t n) {
    return n <= area && (n >= area / 2 || zone_cls_of(n) == (((uint32_t)w >> 12) & 0x7fu));
}

/* Makes used slot b (header word w, `area` user bytes) hold n <= area
 * bytes: its slack changes in the header (one xor: the check folds the
 * slack at the same two places as zone_w_use_delta) and in the poisoning.
 * The caller adjusts the counters. */
static inline void zone_slot_resize_w(zone_blk *b, uint64_t w, size_t area, size_t n) {
    uint32_t d = ((uint32_t)w >> 19) ^ (uint32_t)(area - n);
    zone_hdr_store(b, w ^ ((uint64_t)d << 19) ^ ((uint64_t)d << 51));
    zone_unpoison(zone_user(b), n);
    if (area - n > ZONE_OVERLAP) zone_poison(zone_user(b) + n, area - n - ZONE_OVERLAP);
}

/* Resizes used slot b in place to n bytes when zone_slot_fits: returns 1.
 * Otherwise 0 and the slot is unchanged (the caller moves it). O(1). */
static inline int zone_slot_resize(hk_zone *z, zone_blk *b, size_t n) {
    uint64_t w = zone_hdr_load(b);
    size_t area = zone_run_of_slot(b)->stride - ZONE_OVERLAP, old_req = area - ((uint32_t)w >> 19);
    if (!zone_slot_fits(w, area, n)) return 0;
    zone_slot_resize_w(b, w, area, n);
    z->used_req = z->used_req - old_req + n;
    if (z->used_req > z->peak_used) z->peak_used = z->used_req;
    return 1;
}

#endif /* HEAPKIT_ZONE_RUNS_H */

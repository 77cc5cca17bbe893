/*
 * src/zone_threads.h - per-thread heaps of a HK_ZONE_THREADS zone: the data
 * layout and the owner's fast paths (inline, so hk_zone_alloc's slow branch
 * inlines them); slow paths, abandonment and adoption are in
 * src/zone_threads.c, remote frees and their collection in
 * src/zone_remote.c, whose opening comments give the protocol and its
 * invariants. docs/zone.md ("Threads") has the picture.
 *
 * In short: each (thread, zone) pair has a heap (zone_heap): its own class
 * table of runs. Only its owner thread touches the table, the runs' free
 * lists, their `used`, `bump` and `state`: with plain loads and stores (and
 * relaxed atomic loads/stores where another thread may read the word), no
 * lock, no read-modify-write. A slot freed by another thread is claimed by
 * a compare-and-swap on its header (used -> remote) and put in a batch
 * (node) of the freer's for the owner heap; full batches go on the owner
 * heap's inbox; the owner takes the inbox before a carve or refill (at
 * most every ZONE_COLLECT_EVERY allocations) and turns the slots free.
 */
#ifndef HEAPKIT_ZONE_THREADS_H
#define HEAPKIT_ZONE_THREADS_H

#include "zone_runs.h"

/* The calling thread's last (zone id, heap) pair: the heap lookup of the
 * fast paths (one compare). */
typedef struct zone_tl_ent {
    uint64_t zid;
    zone_heap *h;
} zone_tl_ent;
extern _Thread_local zone_tl_ent hk__zone_tl_cur __attribute__((tls_model("initial-exec")));

/* A header read that may race with a locked writer of a plain block (the
 * caller only acts on it once it names a slot, whose header is then read
 * atomically). */
static inline HK__NO_TSAN uint64_t zone_hdr_peek(const zone_blk *b) {
    return *(volatile const zone_word *)((const unsigned char *)b + 8);
}

/* A tagged slot of run r asking `req` bytes is no longer used (its
 * owner's free, a collection, free_tags). */
static inline void zone_thr_untag(zone_run *r, uint32_t req) {
    r->ntag--;
    zone_run_ext(r)->treq -= req;
}

/* ---- remote frees and collection (zone_remote.c) -------------------------- */

/* The totals of the slot counters (zone_threads.c sums them; zone_remote.c
 * adds what waits in batches). */
typedef struct zone_sums {
    size_t used_req, slot_bytes;
    uint64_t alloc_count, free_count;
} zone_sums;
/* A run of h whose used count dropped (its owner's free, a collection, or
 * free_tags): full -> partial; an empty partial run becomes the class's
 * spare or goes back to the core (under the lock: `locked` says whether the
 * caller holds it). */
void hk__zone_thr_settle(hk_zone *z, zone_heap *h, zone_run *r, int locked);
/* The remote free of used slot b (header word w, checked) of a run of
 * heap h, by a thread whose pool is s (its own heap's, or the zone's with
 * the lock held; `locked`: the caller holds the lock): HK_OK;
 * HK_ERR_DOUBLE_FREE (unreported) when another free claimed the header
 * first; HK_ERR_NOMEM (unreported, nothing done) when s has no node and
 * none can be mapped. A node it pushes on an abandoned heap's inbox is
 * collected at once, under the lock. */
hk_result hk__zone_thr_remote(hk_zone *z, zone_blk *b, zone_heap *h, uint64_t w, zone_rsrc *s, int locked);
/* Pushes every partly filled node of pool s on its heap's inbox (s's
 * owner, or anyone with the owner quiescent or gone), collecting an
 * abandoned heap's at once (the lock taken unless `locked`). */
void hk__zone_out_flush(zone_rsrc *s, int locked);
/* Collects heap h's inbox: its owner, or any thread with the lock held
 * while h is abandoned or its owner quiescent (`locked`). */
void hk__zone_thr_collect(hk_zone *z, zone_heap *h, int locked);
/* Sets *s to what the slots waiting in batches (outboxes and inboxes) add
 * to the frees: their requested bytes, slot bytes and count. O(heaps +
 * nodes in flight). */
void hk__zone_thr_pending(const hk_zone *z, zone_sums *s);
/* Unmaps pool s's node pages (destroy). */
void hk__zone_rsrc_fini(zone_rsrc *s);

/* ---- slow paths (zone_threads.c) ------------------------------------------ */

/* The calling thread's heap in z: adopts an abandoned one or makes one.
 * NULL when none can be had (the caller uses the zone's own runs under the
 * lock). */
zone_heap *hk__zone_heap_get(hk_zone *z);
/* Fork hooks (the malloc shim): prepare takes the registry and zone locks;
 * the child abandons every heap but its own thread's, collecting their
 * inboxes. */
void hk__zone_fork_prepare(hk_zone *z);
void hk__zone_fork_parent(hk_zone *z);
void hk__zone_fork_child(hk_zone *z);
/* Refill of class ci of heap h (collection first). */
unsigned char *hk__zone_thr_refill(hk_zone *z, zone_heap *h, unsigned ci, zone_run **out, uint32_t *word);
/* Frees p when it is a used slot seen without the lock (owner or remote
 * path): 1; otherwise 0 and nothing done (the locked path decides and
 * reports, also when the remote path had no memory for a batch). */
int hk__zone_thr_free_fast(hk_zone *z, void *p);
/* Frees used slot b (found by the locked lookup) from any thread: HK_OK,
 * or HK_ERR_DOUBLE_FREE (not reported) when another thread's free won. */
hk_result hk__zone_thr_free_slot(hk_zone *z, zone_blk *b, int locked);
/* realloc of p in place when p is a slot of the calling thread's heap and
 * n fits it: 1; 0 (p is a slot: *old_req and *tag set; move it); -1 (not a
 * slot seen without the lock). */
int hk__zone_thr_resize(hk_zone *z, void *p, size_t n, size_t *old_req, unsigned *tag);
/* Setup at create (lock, registry) and teardown at destroy. 0: refused. */
int hk__zone_thr_init(hk_zone *z);
void hk__zone_thr_fini(hk_zone *z);
/* Lock held, any threads running: takes every heap's spare runs (an atomic
 * exchange each: their owners may be refilling) and gives them back to the
 * core; an abandoned heap is first collected, then its empty current runs
 * go too (hk_zone_trim). O(heaps x classes). */
void hk__zone_thr_trim(hk_zone *z);
/* Lock held, other threads quiescent: pushes every pool's batches,
 * collects every heap's inbox and moves every heap's cached slots to their
 * runs (free_tags calls it before touching runs). */
void hk__zone_thr_collect_all(hk_zone *z);
/* The totals of the slot counters over the zone and every heap (in a
 * threads zone the slot bytes from every run's used count), less the
 * slots freed remotely and not collected yet (`pending`; lock held).
 * O(heaps + runs + nodes in flight). */
void hk__zone_thr_sums(const hk_zone *z, zone_sums *s, int pending);
/* Allocations of a heap between two collections of its inbox when the
 * class has other slots to give (a refill that finds no partial run
 * collects whenever batches wait): collecting at most this often lets one
 * exchange of the inbox take several batches. The price: between two
 * collections a class may carve fresh slots while freed ones wait, at
 * most 64 allocations' worth (plus the rest of a carve's batch). */
#define ZONE_COLLECT_EVERY 64u

/* ---- the owner's fast paths ------------------------------------------------- */

/* The slow half of the owner's alloc (zone_threads.c), when zone_thr_pop
 * returned NULL: the heap lookup when the thread's cached entry is for
 * another zone, a carve from the current run's untouched slots, or a
 * refill. NULL: use the locked path. */
void *hk__zone_thr_alloc_slow(hk_zone *z, size_t n);
/* A tagged slot: n <= ZONE_RUN_MAX_REQ bytes of tag `tag` (not
 * HK_TAG_STATIC, below the purge level; no owner, no name) from the
 * calling thread's heap, no lock, as an untagged slot but for the header's
 * tag, the run's ntag and the heap's tagmap. NULL: use the locked path
 * (a tracked block). */
void *hk__zone_thr_alloc_tagged(hk_zone *z, size_t n, unsigned tag);
/* Frees, with the lock held and every other thread quiescent, each slot of
 * a tag in [lo, hi] from the runs holding tagged slots (HK_TAG_STATIC's
 * among them when in the range): O(runs + slots of those runs). Returns
 * the slots freed. zone_tags.c's region walk skips those runs. */
size_t hk__zone_thr_free_tags(hk_zone *z, int lo, int hi);

/* Free slot u (header already free) of run r of heap h goes back onto
 * the run's free list: the run counts one used slot less and is settled
 * when that empties it or it was full (`locked`: hk__zone_thr_settle).
 * The collection, the owner's frees to runs and the cache's flushes all
 * end so. */
static inline void zone_thr_run_put(hk_zone *z, zone_heap *h, zone_run *r, unsigned char *u, int locked) {
    zone_unpoison(u, sizeof(void *));
    *(unsigned char **)u = r->free;
    r->free = u;
    zone_poison(u, r->stride - ZONE_HDR);
    if (--r->used == 0 || r->state == ZONE_RUN_FULL) hk__zone_thr_settle(z, h, r, locked);
}

/* Moves the newest slots of class ci's cache of heap h to their runs'
 * free lists until `keep` are left, settling the runs: h's owner (`locked` 0),
 * or any thread with the lock held while h has no owner (`locked` 1).
 * O(slots moved). */
void hk__zone_thr_cache_flush(hk_zone *z, zone_heap *h, unsigned ci, uint32_t keep, int locked);
/* Every class's cache of heap h, the same way. O(classes + slots). */
void hk__zone_thr_cache_flush_all(hk_zone *z, zone_heap *h, int locked);

/* Makes slot u (of a run of h, counted in its `used` already) a used
 * block of n bytes, its header word being `w`; returns u. */
static inline void *zone_thr_finish_hdr(zone_heap *h, unsigned char *u, uint64_t w, size_t n) {
    zone_hdr_store(zone_from_user(u), w);
    uint32_t slack = (uint32_t)w >> 19;
    zone_unpoison(u, n);
    if (slack > ZONE_OVERLAP) zone_poison(u + n, slack - ZONE_OVERLAP);
    __atomic_store_n(&h->used_req, h->used_req + n, __ATOMIC_RELAXED);
    __atomic_store_n(&h->alloc_count, h->alloc_count + 1, __ATOMIC_RELAXED);
    return u;
}

/* Makes slot u of run r (owned by h) a used block of n bytes, its header
 * word being `w`; returns u. */
static inline void *zone_thr_finish(zone_heap *h, zone_run *r, unsigned char *u, uint64_t w, size_t n) {
    r->used++;
    return zone_thr_finish_hdr(h, u, w, n);
}

/* Free slot u (header already free; its run still counts it) of class
 * ci, whose stride is `stride`, on heap h's cache (the owner only; the
 * caller checked the limit). */
static inline void zone_thr_cache_push(zone_heap *h, unsigned ci, unsigned char *u, uint32_t stride) {
    zone_unpoison(u, sizeof(void *));
    *(unsigned char **)u = h->cache[ci];
    h->cache[ci] = u;
    zone_poison(u, stride - ZONE_HDR);
    __atomic_store_n(&h->ncache[ci], h->ncache[ci] + 1, __ATOMIC_RELAXED);
}

/* The newest slot of heap h's cache of class ci (not empty) made a used
 * untagged block of n bytes (the owner only). */
static inline void *zone_thr_cache_pop(zone_heap *h, unsigned ci, size_t n) {
    unsigned char *u = h->cache[ci];
    zone_unpoison(u, sizeof(void *));
    h->cache[ci] = *(unsigned char **)u;
    __atomic_store_n(&h->ncache[ci], h->ncache[ci] - 1, __ATOMIC_RELAXED);
    uint32_t slack = zone_cls_stride(ci) - ZONE_OVERLAP - (uint32_t)n;
    return zone_thr_finish_hdr(h, u, zone_hdr_load(zone_from_user(u)) ^ zone_w_use_delta(slack), n);
}

/* The owner's inline alloc: n <= ZONE_RUN_MAX_REQ bytes popped from the
 * heap's cache of n's class (untagged only), else from the free list of
 * the current run of n's class in the calling thread's heap,
 * its free header turned into the used one of tag `tag` by one xor (a
 * tagged slot unless HK_TAG_STATIC: its run's ntag and its heap's tagmap
 * count it; callers pass a constant or the tag of alloc_tagged); NULL when
 * there is none (then hk__zone_thr_alloc_slow or _tagged, which the caller
 * reaches by a tail call so that nothing stays live across it). No lock,
 * no read-modify-write. */
static inline void *zone_thr_pop_tag(hk_zone *z, size_t n, unsigned tag) {
    if (HK__LIKELY(hk__zone_tl_cur.zid == z->zid)) {
        zone_heap *h = hk__zone_tl_cur.h;
        unsigned ci = zone_cls_of(n);
        if (tag == HK_TAG_STATIC && HK__LIKELY(h->cache[ci] != NULL)) return zone_thr_cache_pop(h, ci, n);
        zone_run *r = h->cls[ci].cur;
        unsigned char *u;
        if (HK__LIKELY(r != NULL && (u = r->free) != NULL)) {
            zone_unpoison(u, sizeof(void *));
            r->free = *(unsigned char **)u;
            if (tag != HK_TAG_STATIC) {
                r->ntag++;
                zone_run_ext(r)->treq += (uint32_t)n;
                h->tagmap[tag >> 6] |= 1ull << (tag & 63u);
            }
            uint32_t slack = r->stride - ZONE_OVERLAP - (uint32_t)n;
            return zone_thr_finish(h, r, u,
                                   zone_hdr_load(zone_from_user(u)) ^ zone_w_use_delta_tag(slack, tag), n);
        }
    }
    return NULL;
}
static inline void *zone_thr_pop(hk_zone *z, size_t n) { return zone_thr_pop_tag(z, n, HK_TAG_STATIC); }

/* The rare end of an owner free (zone_threads.c) of slot u of run r,
 * its header already free and the heap's counters updated: the cache of
 * its class is full (zone_cache_max_tab: u goes on its run's free list,
 * which settles the run), or h's free count fc reached h->decay_poll_at
 * (u is cached when there is room, then the decay clock is polled). One
 * call in tail position, so the inline free keeps nothing live across
 * it. */
hk_result hk__zone_thr_free_tail(zone_heap *h, zone_run *r, unsigned char *u, uint64_t fc);

/* The owner's free of the last used slot of run r (the inline free's
 * rare case): onto the run's free list, the run settled (given back or
 * kept as the spare) and the decay clock polled, so that a run its owner
 * empties goes back as it did without the cache. */
hk_result hk__zone_thr_free_last(zone_heap *h, zone_blk *b, zone_run *r, uint64_t w);

/* Frees used untagged slot b (header word w, verified) of run r owned by
 * h, the calling thread's heap: its header says free, and it goes on the
 * heap's cache of its class (its run still counts it: see zone_heap),
 * unless it is its run's last used slot or the cache is full (then on its
 * run, as before there was a cache: a burst of frees handles each slot
 * once). */
static inline hk_result zone_thr_free_owner(zone_heap *h, zone_blk *b, zone_run *r, uint64_t w) {
    /* no zone argument: the tail calls find it in h (one register fewer) */
    if (HK__UNLIKELY(r->used == 1)) return hk__zone_thr_free_last(h, b, r, w);
    /* from here on only h, b and w: the stride from the class table */
    uint32_t word = (uint32_t)w;
    unsigned ci = (word >> 12) & 0x7fu;
    uint32_t stride = zone_cls_stride(ci);
    unsigned char *u = zone_user(b);
    zone_hdr_store(b, w ^ zone_w_use_delta(word >> 19));
    __atomic_store_n(&h->used_req, h->used_req - (stride - ZONE_OVERLAP - (word >> 19)), __ATOMIC_RELAXED);
    uint64_t fc = h->free_count + 1;
    __atomic_store_n(&h->free_count, fc, __ATOMIC_RELAXED);
    if (HK__UNLIKELY(h->ncache[ci] >= zone_cache_max_tab[ci] ||
                     fc >= __atomic_load_n(&h->decay_poll_at, __ATOMIC_RELAXED)))
        return hk__zone_thr_free_tail(h, r, u, fc); /* a tail call: nothing stays live across it */
    zone_thr_cache_push(h, ci, u, stride);
    return HK_OK;
}

/* The owner heap a run's extension names, read where the caller has not
 * verified the run yet (a stale or forged pointer may lead to a user's
 * bytes, written without atomics): a plain read kept out of
 * ThreadSanitizer's view. A genuine run's `heap` never changes. */
static inline HK__NO_TSAN zone_heap *zone_thr_heap_peek(const zone_run *r) {
    return *(zone_heap *volatile const *)&zone_run_ext(r)->heap;
}

/* The used slot at p when it belongs to a run of the calling thread's own
 * heap (its header word in *w, its run in *rp), or not: another thread's
 * slot, a plain block, a bad pointer (the caller goes on to paths that
 * decide and report). p is validated as an integer before any header is
 * read: inside the first region, 16-aligned, a used slot's tag and bits.
 * Ownership is read from the run's extension before anything of the run
 * struct: another heap's slot goes to the remote path without touching
 * the line that its owner rewrites on every operation. Then the run
 * checks (zone_run_is, the carved count) bind p to one slot of a genuine
 * run of this heap; the 16-bit check is not recomputed. Returns 1 (the
 * slot's header is at p - ZONE_HDR, the heap in *hp) or 0. */
static inline int zone_thr_owned_slot(hk_zone *z, const void *p, uint64_t *w, zone_run **rp, zone_heap **hp) {
    if (HK__UNLIKELY(hk__zone_tl_cur.zid != z->zid)) return 0;
    zone_heap *me = hk__zone_tl_cur.h; /* read once: the run checks' atomic load would have it read again */
    /* the first region's user pointers: lo + [0, thr_span] */
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)z->thr_lo + ZONE_HDR;
    if (HK__UNLIKELY(a - lo > __atomic_load_n(&z->thr_span, __ATOMIC_RELAXED) || (a & 15))) return 0;
    zone_blk *b = zone_from_user(p);
    if (zone_is_poisoned(b, ZONE_HDR)) return 0;
#ifdef HK__TSAN
    /* a plain block's header is written under the lock without atomics:
     * look before the atomic load (the same load without TSan) */
    if (((zone_hdr_peek(b) >> 32) & 0xffffu) != (HK_TAG_STATIC | (ZB_SLOT_USED << 8))) return 0;
#endif
    uint64_t hw = zone_hdr_load(b);
    if (HK__UNLIKELY(((hw >> 32) & 0xffffu) != (HK_TAG_STATIC | (ZB_SLOT_USED << 8)))) return 0;
    zone_run *r;
    uint32_t stride;
    if (HK__UNLIKELY(!zone_slot_run_at(lo, b, (uint32_t)hw, ZONE_RUN_XOFF, &r, &stride) ||
                     zone_thr_heap_peek(r) != me))
        return 0;
    /* this heap's run: its own line, which this thread keeps writing (its
     * carved count too: a plain read) */
    if (HK__UNLIKELY(!zone_run_is(r, stride) || ((uint32_t)hw & 0xfffu) >= r->bump)) return 0;
    *w = hw;
    *rp = r;
    *hp = me;
    return 1;
}

#endif /* HEAPKIT_ZONE_THREADS_H */

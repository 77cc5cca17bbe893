/*
 * src/zone_threads.c - per-thread heaps of a HK_ZONE_THREADS zone: heap
 * lookup, adoption and abandonment, refill, lock-free frees (owner and
 * remote) and their collection, and the sums that keep statistics exact.
 * Calls down into zone_runs.c only (a run's block); zone.c dispatches to it
 * and keeps the locked paths, which report bad pointers.
 *
 * Protocol (docs/zone.md, "Threads", has the picture):
 *  - owner alloc: pop the class's current run (plain; `bump` and its copy
 *    in the extension stored with relaxed atomic stores because remote
 *    freers read them), write the slot header with one relaxed 64-bit
 *    store. Before a fresh slot is carved from the run's untouched end,
 *    the inbox of remote frees is collected when due and a run of the
 *    class with freed slots is preferred (zone_thr_reuse: used memory
 *    before new pages). Refill (no lock): collect the inbox when due or
 *    when the class has no partial run (pushing this thread's own batches
 *    for other heaps first), then partial run, spare run, else a new run
 *    from the TLSF core under the zone lock.
 *  - owner free: relaxed load of the header, verify, relaxed store of the
 *    free header, push on the run's free list.
 *  - remote free (the slot's run belongs to another heap, live or
 *    abandoned): verify against the run's extension only (the run
 *    struct's line is the owner's), then zone_remote.c: claim the header
 *    by a compare-and-swap (used -> remote: exactly one of two freers
 *    wins, the other goes to the locked path, which reports the double
 *    free) and put the slot in this thread's batch for the owner heap.
 *  - counters: the owner counts its allocations and frees in its heap
 *    (relaxed stores); collection counts the remote frees in the collecting
 *    heap; paths under the lock count in the zone. Only the sum means
 *    anything; hk_zone_stats sums at read time and subtracts the slots
 *    freed remotely and not collected yet (the batches' entries whose
 *    header says remote).
 *  - thread exit: the thread's heaps are marked abandoned, then collected
 *    and their batches pushed; a run keeps pointing at its heap, so an
 *    abandoned heap's live slots are freed through the remote path from
 *    anywhere (a batch pushed on an abandoned heap is collected by its
 *    pusher, zone_remote.c), and the next thread that needs a heap in that
 *    zone adopts the whole heap, runs and all.
 *
 * Invariants (verified by hk_zone_check while no other thread is inside a
 * zone call):
 *  - every run of a threads zone has an extension (zone_run_ext) linked on
 *    z->xruns; its heap is NULL (the zone's own runs, used under the lock
 *    by a thread without a heap) or one of z->heaps, whose class table
 *    holds it as cur/partial/spare per its state.
 *  - a run goes back to the core only when it is empty; a slot freed by
 *    another thread counts as used until its owner collects it, so nobody
 *    holds a reference into a run that goes (zone_remote.c).
 *  - heaps are freed only by hk_zone_destroy; a thread's cache entry names
 *    the zone by zid, so a destroyed zone's entry never matches again.
 *  - decay (zone_decay.c): a heap's spare run is read and set by its owner
 *    and taken by hk_zone_trim, all with atomic operations (only the owner
 *    makes it non-NULL); the owner polls the decay clock when its
 *    free_count reaches decay_poll_at, which the arming thread resets to 0
 *    after setting decay_armed (both sequentially consistent, as is the
 *    owner's store of its next threshold before it reads decay_armed).
 */
#include "zone_threads.h"

_Thread_local zone_tl_ent hk__zone_tl_cur __attribute__((tls_model("initial-exec")));

/* The zones a thread holds heaps in (checked against the registry at exit). */
#define ZONE_TL_HELD 8u
static _Thread_local zone_tl_ent zone_tl_held[ZONE_TL_HELD] __attribute__((tls_model("initial-exec")));

/* Registry of live threads zones: a thread's exit touches a heap only while
 * its zone is registered (destroy unregisters first). A spin lock: taken
 * at zone create/destroy, heap creation and thread exit only. */
#define ZONE_REG_MAX 256u
static struct {
    uint64_t zid;
    hk_zone *z;
} zone_reg[ZONE_REG_MAX];
static int zone_reg_lock_word;
static uint64_t zone_next_zid = 1;

static void zone_reg_lock(void) {
    while (__atomic_exchange_n(&zone_reg_lock_word, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(&zone_reg_lock_word, __ATOMIC_RELAXED)) {
        }
}
static void zone_reg_unlock(void) { __atomic_store_n(&zone_reg_lock_word, 0, __ATOMIC_RELEASE); }

static hk_zone *zone_reg_find(uint64_t zid) {
    for (unsigned i = 0; i < ZONE_REG_MAX; i++)
        if (zone_reg[i].zid == zid) return zone_reg[i].z;
    return NULL;
}

/* ---- the decay poll ------------------------------------------------------------ */

#define ZONE_POLL_IDLE   64u      /* frees between polls while the decay is not armed */
#define ZONE_POLL_MAX    4096u    /* at most this many while armed */
#define ZONE_POLL_PERIOD 4000000u /* armed: aim at one clock read per this many ns */

/* The frees until the next poll while armed: about ZONE_POLL_PERIOD at
 * the free rate since the last poll (every free when frees are rare).
 * The clock is coarse: dt 0 means the n frees took less than its tick, so
 * the skip doubles. */
static uint64_t zone_poll_skip(uint64_t now, uint64_t last_ns, uint64_t n) {
    uint64_t dt = now - last_ns, skip = ZONE_POLL_MAX;
    if (n < ZONE_POLL_MAX) skip = dt ? n * ZONE_POLL_PERIOD / dt : 2 * n;
    return skip < 1 ? 1 : skip > ZONE_POLL_MAX ? ZONE_POLL_MAX : skip;
}

static void zone_thr_poll(hk_zone *z, zone_heap *h, uint64_t fc, int locked) {
    __atomic_store_n(&h->decay_poll_at, fc + ZONE_POLL_IDLE, __ATOMIC_SEQ_CST);
    if (!__atomic_load_n(&z->decay_armed, __ATOMIC_SEQ_CST)) return;
    uint64_t now = hk_os_coarse_ns();
    __atomic_store_n(&h->decay_poll_at, fc + zone_poll_skip(now, h->decay_poll_ns, fc - h->decay_poll_fc),
                     __ATOMIC_RELAXED);
    h->decay_poll_ns = now;
    h->decay_poll_fc = fc;
    hk__zone_decay_poll_at(z, now, locked);
}

/* The same for the zone's own runs (a thread without a heap), lock held. */
static void zone_own_poll(hk_zone *z) {
    uint64_t fc = z->free_count;
    z->decay_poll_at = fc + ZONE_POLL_IDLE;
    if (!z->decay_armed) return;
    uint64_t now = hk_os_coarse_ns();
    z->decay_poll_at = fc + zone_poll_skip(now, z->decay_poll_ns, fc - z->decay_poll_fc);
    z->decay_poll_ns = now;
    z->decay_poll_fc = fc;
    hk__zone_decay_poll_at(z, now, 1);
}

static zone_heap *zone_tl_find(const hk_zone *z);

/* ---- the heap's cache of freed slots ------------------------------------------ */

void hk__zone_thr_cache_flush(hk_zone *z, zone_heap *h, unsigned ci, uint32_t keep, int locked) {
    /* the newest go: no walk to a split point, and in a burst of frees
     * (what fills a list) they are the slots still in the cache */
    uint32_t n = h->ncache[ci], moved = 0;
    unsigned char *u = h->cache[ci];
    for (; u && moved + keep < n; moved++) {
        unsigned char *next = zone_free_next(u);
        zone_thr_run_put(z, h, zone_run_of_slot(zone_from_user(u)), u, locked);
        u = next;
    }
    h->cache[ci] = u;
    __atomic_store_n(&h->ncache[ci], n - moved, __ATOMIC_RELAXED);
}

void hk__zone_thr_cache_flush_all(hk_zone *z, zone_heap *h, int locked) {
    for (unsigned ci = 0; ci < ZONE_NCLS; ci++)
        if (h->cache[ci]) hk__zone_thr_cache_flush(z, h, ci, 0, locked);
}

hk_result hk__zone_thr_free_tail(zone_heap *h, zone_run *r, unsigned char *u, uint64_t fc) {
    hk_zone *z = h->z;
    unsigned ci = r->cls;
    if (h->ncache[ci] < zone_cache_max_tab[ci]) /* here for the poll only */
        zone_thr_cache_push(h, ci, u, r->stride);
    else
        zone_thr_run_put(z, h, r, u, 0);
    if (fc >= __atomic_load_n(&h->decay_poll_at, __ATOMIC_RELAXED)) zone_thr_poll(z, h, fc, 0);
    return HK_OK;
}

void hk__zone_thr_trim(hk_zone *z) {
    /* the calling thread's own cached slots go back to their runs first */
    zone_heap *mine = zone_tl_find(z);
    if (mine) hk__zone_thr_cache_flush_all(z, mine, 1);
    for (zone_heap *h = z->heaps; h; h = h->next) {
        /* an abandoned heap has no owner (adoption takes the lock) and
         * nothing cached or in flight (zone_heap_abandon): its empty
         * current runs go as well */
        for (unsigned ci = 0; ci < ZONE_NCLS; ci++) {
            zone_cls *c = &h->cls[ci];
            /* taken only when the exchange finds it there still (its
             * owner may be refilling from it) */
            zone_run *r = __atomic_load_n(&c->spare, __ATOMIC_ACQUIRE);
            if (r &&
                __atomic_compare_exchange_n(&c->spare, &r, NULL, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                hk__zone_run_release(z, r);
            if (h->abandoned && (r = c->cur) != NULL && r->used == 0) {
                c->cur = NULL;
                hk__zone_run_release(z, r);
            }
        }
    }
}

void hk__zone_thr_collect_all(hk_zone *z) {
    hk__zone_out_flush(&z->rs, 1);
    for (zone_heap *h = z->heaps; h; h = h->next) hk__zone_out_flush(&h->rs, 1);
    for (zone_heap *h = z->heaps; h; h = h->next) {
        hk__zone_thr_collect(z, h, 1);
        hk__zone_thr_cache_flush_all(z, h, 1);
    }
}

/* ---- tagged slots: free_tags ------------------------------------------------- */

/* Whether a heap made tagged slots of a tag in [lo, hi]. */
static int zone_tagmap_any(const zone_heap *h, int lo, int hi) {
    for (int t = lo; t <= hi; t++)
        if ((h->tagmap[(unsigned)t >> 6] >> ((unsigned)t & 63u)) & 1u) return 1;
    return 0;
}

/* Whether every tag heap h made tagged slots of is in [lo, hi]. */
static int zone_tagmap_within(const zone_heap *h, int lo, int hi) {
    for (unsigned w = 0; w < 4; w++) {
        uint64_t m = h->tagmap[w];
        for (; m; m &= m - 1) {
            int t = (int)(w * 64 + (unsigned)__builtin_ctzll(m));
            if (t < lo || t > hi) return 0;
        }
    }
    return 1;
}

/* Frees the used slots of run r (heap h) whose tag is in [lo, hi], as
 * its owner would (the owner is quiescent), counting in the zone; then
 * settles the run. Returns the slots freed. A run whose used slots are
 * all tagged, of a heap that made slots of no tag outside the range, is
 * emptied at once (its counts say what it held): no header is read, its
 * slots are uncarved (a carve rewrites them) and it is settled as an
 * emptied run, so free_tags costs O(runs) for level data. `within` says
 * whether h's tags are all in the range. */
static size_t zone_thr_run_free_tags(hk_zone *z, zone_heap *h, zone_run *r, int lo, int hi, int within) {
    zone_run_x *x = zone_run_ext(r);
    if (within && r->ntag == r->used) {
        size_t n = r->used;
        z->used_req -= x->treq;
        z->free_count += n;
        r->used = r->ntag = 0;
        x->treq = 0;
        r->free = NULL;
        r->bump = 0;
        __atomic_store_n(&x->bump, 0, __ATOMIC_RELAXED);
        if (r->state == ZONE_RUN_FULL || r->state == ZONE_RUN_PARTIAL) hk__zone_thr_settle(z, h, r, 1);
        return n;
    }
    size_t n = 0, req = 0;
    for (uint32_t i = 0; i < r->bump; i++) {
        zone_blk *s = (zone_blk *)(r->first + (size_t)i * r->stride);
        if (i + 4 < r->bump)
            __builtin_prefetch(r->first + (size_t)(i + 4) * r->stride, 1); /* misses overlap */
        uint64_t w = zone_hdr_load(s);
        int tag = (int)zone_w_tag(w);
        if (zone_w_bits(w) != ZB_SLOT_USED || tag < lo || tag > hi) continue;
        zone_hdr_store(s, zone_hdr_make(s, (uint32_t)w & 0x7ffffu, 0, ZB_SLOT_FREE));
        if (tag != HK_TAG_STATIC) zone_thr_untag(r, r->stride - ZONE_OVERLAP - ((uint32_t)w >> 19));
        unsigned char *u = zone_user(s);
        zone_unpoison(u, sizeof(void *));
        *(unsigned char **)u = r->free;
        r->free = u;
        zone_poison(u, r->stride - ZONE_HDR);
        r->used--;
        req += r->stride - ZONE_OVERLAP - ((uint32_t)w >> 19);
        n++;
    }
    z->used_req -= req;
    z->free_count += n;
    if (n && (r->state == ZONE_RUN_FULL || r->state == ZONE_RUN_PARTIAL)) hk__zone_thr_settle(z, h, r, 1);
    return n;
}

size_t hk__zone_thr_free_tags(hk_zone *z, int lo, int hi) {
    /* Nothing to walk unless a heap made tagged slots of a tag in the
     * range, or of any tag when HK_TAG_STATIC is in it (the runs holding
     * tagged slots hold static ones too, and the region walk skips them). */
    int tlo = lo > HK_TAG_STATIC ? lo : HK_TAG_STATIC + 1, any = 0;
    for (const zone_heap *h = z->heaps; h && !any; h = h->next)
        any = zone_tagmap_any(h, tlo, lo <= HK_TAG_STATIC ? HK_ZONE_TAG_MAX : hi);
    if (!any) return 0;
    size_t n = 0;
    for (zone_run_x *x = z->xruns, *next; x; x = next) {
        next = x->anext; /* settling may release the run */
        zone_run *r = x->run;
        if (r->ntag && x->heap)
            n += zone_thr_run_free_tags(z, x->heap, r, lo, hi, zone_tagmap_within(x->heap, lo, hi));
    }
    /* every slot of those tags is gone */
    for (zone_heap *h = z->heaps; h; h = h->next)
        for (int t = tlo; t <= hi; t++) h->tagmap[(unsigned)t >> 6] &= ~(1ull << ((unsigned)t & 63u));
    return n;
}

/* Whether the owner of h should collect before it carves or refills: frees
 * are queued and the last collection was ZONE_COLLECT_EVERY allocations
 * ago. */
static inline int zone_thr_collect_due(const zone_heap *h) {
    return h->alloc_count >= h->collect_at && __atomic_load_n(&h->inbox, __ATOMIC_RELAXED);
}

/* A refill of class c collects first: when due, or when the class has no
 * partial run and batches wait (the frees may spare a new run). */
static inline int zone_thr_refill_collects(const zone_heap *h, const zone_cls *c) {
    return zone_thr_collect_due(h) || (!c->partial && __atomic_load_n(&h->inbox, __ATOMIC_RELAXED));
}

/* The owner's collection: its own batches for other heaps pushed, then
 * every batch on its inbox; the next one due in ZONE_COLLECT_EVERY
 * allocations. */
static void zone_thr_collect_own(hk_zone *z, zone_heap *h) {
    h->collect_at = h->alloc_count + ZONE_COLLECT_EVERY;
    hk__zone_out_flush(&h->rs, 0); /* this thread's own remote frees go too */
    hk__zone_thr_collect(z, h, 0);
}

HK__NOINLINE unsigned char *hk__zone_thr_refill(hk_zone *z, zone_heap *h, unsigned ci, zone_run **out,
                                                uint32_t *word) {
    zone_cls *c = &h->cls[ci];
    if (zone_thr_refill_collects(h, c)) zone_thr_collect_own(z, h);
    zone_run *r = c->cur;
    uint32_t prev = r ? r->nslots : 0; /* a new run replacing a full one is larger */
    if (r) {
        unsigned char *u = zone_slot_pop(r, word); /* collection may have refilled it */
        if (u) {
            *out = r;
            return u;
        }
        r->state = ZONE_RUN_FULL;
        c->cur = NULL;
    }
    r = c->partial;
    if (r) {
        zone_partial_unlink(c, r);
    } else if ((r = __atomic_exchange_n(&c->spare, NULL, __ATOMIC_ACQUIRE)) != NULL) {
        /* the exchange: hk_zone_trim may be taking the spare right now */
    } else {
        /* the heap grows: its batches of other heaps' slots go first, so
         * that their owners can reuse them */
        hk__zone_out_flush(&h->rs, 0);
        hk__core_lock(&z->core);
        zone_decay_poll(z, 1); /* a new run: the clock, when a sweep is due */
        r = hk__zone_run_new(z, ci, h, prev);
        /* the peak, at run granularity: the total when a heap grows
         * (O(heaps): the runs are not summed for it) */
        size_t used = z->used_req;
        for (const zone_heap *o = z->heaps; o; o = o->next)
            used += __atomic_load_n(&o->used_req, __ATOMIC_RELAXED);
        if (used > z->peak_used) z->peak_used = used;
        hk__core_unlock(&z->core);
        if (!r) return NULL;
    }
    r->state = ZONE_RUN_CUR;
    c->cur = r;
    *out = r;
    return zone_slot_pop(r, word); /* never NULL: partial and spare runs have a free slot */
}

/* The current run of class ci has no freed slot, and the class's first
 * partial run has some or a collection is due: collects remote frees before a
 * fresh slot is carved, and when the current run got none back but another
 * run of the class has freed slots, makes that run current (the old one
 * goes on the partial list, or is marked full). Slots that were used
 * before are reused before untouched memory is faulted in: a producer
 * whose blocks other threads free, or a thread whose frees land in older
 * runs, would otherwise carve every run to its end first. Returns the
 * class's current run. */
static zone_run *zone_thr_reuse(hk_zone *z, zone_heap *h, unsigned ci) {
    if (zone_thr_collect_due(h)) zone_thr_collect_own(z, h);
    zone_cls *c = &h->cls[ci];
    zone_run *r = c->cur, *p = c->partial;
    if (r->free || !p || !p->free) return r; /* nothing freed to reuse: carve */
    zone_partial_unlink(c, p);
    if (r->bump < r->nslots)
        zone_partial_push(c, r);
    else
        r->state = ZONE_RUN_FULL;
    p->state = ZONE_RUN_CUR;
    c->cur = p;
    return p;
}

/* The slow half of the owner's alloc beyond a carve: the heap lookup,
 * reuse of freed slots, a carve after them, or a refill; a slot of tag
 * `tag` (a tagged slot unless HK_TAG_STATIC: counted in its run's ntag and
 * the heap's tagmap). */
static HK__NOINLINE void *zone_thr_alloc_full(hk_zone *z, size_t n, unsigned tag) {
    zone_heap *h = hk__zone_tl_cur.zid == z->zid ? hk__zone_tl_cur.h : hk__zone_heap_get(z);
    if (HK__UNLIKELY(!h)) return NULL;
    unsigned ci = zone_cls_of(n);
    zone_run *r = h->cls[ci].cur;
    unsigned char *u = NULL;
    uint32_t word = 0;
    if (r && !r->free && ((h->cls[ci].partial && h->cls[ci].partial->free) || zone_thr_collect_due(h)))
        r = zone_thr_reuse(z, h, ci);
    /* a collection may have put slots in the cache */
    if (tag == HK_TAG_STATIC && h->cache[ci]) return zone_thr_cache_pop(h, ci, n);
    if (r) u = zone_slot_pop(r, &word);
    if (!u && tag == HK_TAG_STATIC && zone_thr_refill_collects(h, &h->cls[ci])) {
        zone_thr_collect_own(z, h); /* the refill's collection, here so the cache can serve */
        if (h->cache[ci]) return zone_thr_cache_pop(h, ci, n);
        if (r) u = zone_slot_pop(r, &word);
    }
    if (!u) {
        u = hk__zone_thr_refill(z, h, ci, &r, &word);
        if (!u) return NULL;
    }
    uint32_t slack = r->stride - ZONE_OVERLAP - (uint32_t)n;
    zone_blk *b = zone_from_user(u);
    if (tag != HK_TAG_STATIC) {
        r->ntag++;
        zone_run_ext(r)->treq += (uint32_t)n;
        h->tagmap[tag >> 6] |= 1ull << (tag & 63u);
    }
    return zone_thr_finish(h, r, u, zone_hdr_make(b, word | (slack << 19), tag, ZB_SLOT_USED), n);
}

void *hk__zone_thr_alloc_tagged(hk_zone *z, size_t n, unsigned tag) { return zone_thr_alloc_full(z, n, tag); }

/* When the current run of the cached heap's class for n has an empty free
 * list, the next untouched slot of it is carved here (a short path: most
 * of these calls end here while a heap grows), unless freed slots are to
 * be reused first (a partial run of the class with freed ones, or remote
 * frees queued) or the run has none left: zone_thr_alloc_full. */
HK__NOINLINE void *hk__zone_thr_alloc_slow(hk_zone *z, size_t n) {
    zone_heap *h = hk__zone_tl_cur.zid == z->zid ? hk__zone_tl_cur.h : NULL;
    zone_run *r = h ? h->cls[zone_cls_of(n)].cur : NULL;
    if (HK__LIKELY(r != NULL)) {
        zone_cls *c = &h->cls[r->cls];
        if (HK__LIKELY(r->bump < r->nslots && !(c->partial && c->partial->free) &&
                       !zone_thr_collect_due(h))) {
            uint32_t word;
            unsigned char *u = hk__zone_run_carve(r, &word); /* and the rest of its page */
            uint32_t slack = r->stride - ZONE_OVERLAP - (uint32_t)n;
            return zone_thr_finish(
                h, r, u, zone_hdr_make(zone_from_user(u), word | (slack << 19), HK_TAG_STATIC, ZB_SLOT_USED),
                n);
        }
    }
    return zone_thr_alloc_full(z, n, HK_TAG_STATIC);
}

/* ---- heaps: lookup, creation, adoption, abandonment ------------------------- */

/* Abandons heap h, whose thread is gone (lock held): marked first, so
 * that a batch pushed from now on is collected by its pusher
 * (zone_out_push) and one pushed before by this collection; then its
 * cache goes back to its runs and its own batches to their heaps. An
 * abandoned heap holds nothing cached, nothing in its outboxes and nothing
 * on its inbox (hk_zone_check verifies it). */
static void zone_heap_abandon(hk_zone *z, zone_heap *h) {
    __atomic_store_n(&h->abandoned, 1, __ATOMIC_SEQ_CST);
    hk__zone_thr_collect(z, h, 1);
    hk__zone_thr_cache_flush_all(z, h, 1);
    hk__zone_out_flush(&h->rs, 1);
}

/* Abandons every heap the exiting thread holds (registered zones only). */
static void zone_thread_exit(void) {
    zone_reg_lock();
    for (unsigned i = 0; i < ZONE_TL_HELD; i++) {
        zone_tl_ent *e = &zone_tl_held[i];
        if (!e->h) continue;
        hk_zone *z = zone_reg_find(e->zid);
        if (z) {
            hk__core_lock(&z->core);
            zone_heap_abandon(z, e->h);
            hk__core_unlock(&z->core);
        }
        e->zid = 0;
        e->h = NULL;
    }
    hk__zone_tl_cur.zid = 0;
    hk__zone_tl_cur.h = NULL;
    zone_reg_unlock();
}

/* The calling thread's heap in z if it has one (no creation). */
static zone_heap *zone_tl_find(const hk_zone *z) {
    if (hk__zone_tl_cur.zid == z->zid) return hk__zone_tl_cur.h;
    for (unsigned i = 0; i < ZONE_TL_HELD; i++)
        if (zone_tl_held[i].zid == z->zid) {
            hk__zone_tl_cur = zone_tl_held[i];
            return zone_tl_held[i].h;
        }
    return NULL;
}

HK__NOINLINE zone_heap *hk__zone_heap_get(hk_zone *z) {
    zone_heap *h = zone_tl_find(z);
    if (h) return h;
    /* a free entry, or one whose zone is gone */
    zone_tl_ent *slot = NULL;
    zone_reg_lock();
    for (unsigned i = 0; i < ZONE_TL_HELD && !slot; i++)
        if (!zone_tl_held[i].h || !zone_reg_find(zone_tl_held[i].zid)) slot = &zone_tl_held[i];
    zone_reg_unlock();
    if (!slot || hk_os_on_thread_exit(zone_thread_exit) != HK_OK) return NULL;
    hk__core_lock(&z->core);
    for (h = z->heaps; h && !h->abandoned; h = h->next) {
    }
    if (h) {
        __atomic_store_n(&h->abandoned, 0, __ATOMIC_RELAXED); /* adopted, runs and all */
    } else {
        size_t size = (sizeof(zone_heap) + hk_os_page_size() - 1) & ~(hk_os_page_size() - 1);
        h = (zone_heap *)hk_os_alloc(size);
        if (h) {
            memset(h, 0, sizeof *h);
            h->z = z;
            h->os_size = size;
            h->next = z->heaps;
            z->heaps = h;
        }
    }
    hk__core_unlock(&z->core);
    if (!h) return NULL;
    slot->zid = z->zid;
    slot->h = h;
    hk__zone_tl_cur = *slot;
    return h;
}

int hk__zone_thr_init(hk_zone *z) {
    zone_reg_lock();
    unsigned i = 0;
    while (i < ZONE_REG_MAX && zone_reg[i].zid) i++;
    if (i == ZONE_REG_MAX) {
        zone_reg_unlock();
        return 0;
    }
    z->zid = zone_next_zid++;
    zone_reg[i].zid = z->zid;
    zone_reg[i].z = z;
    zone_reg_unlock();
    z->thr_lo = z->regions[0].base;
    __atomic_store_n(&z->thr_span, (size_t)(z->regions[0].end - z->regions[0].base) - ZONE_HDR,
                     __ATOMIC_RELEASE);
    return 1;
}

void hk__zone_thr_fini(hk_zone *z) {
    zone_reg_lock();
    for (unsigned i = 0; i < ZONE_REG_MAX; i++)
        if (zone_reg[i].zid == z->zid) {
            zone_reg[i].zid = 0;
            zone_reg[i].z = NULL;
        }
    zone_reg_unlock();
    if (hk__zone_tl_cur.zid == z->zid) hk__zone_tl_cur.h = NULL, hk__zone_tl_cur.zid = 0;
    for (unsigned i = 0; i < ZONE_TL_HELD; i++)
        if (zone_tl_held[i].zid == z->zid) zone_tl_held[i].zid = 0, zone_tl_held[i].h = NULL;
    zone_heap *h = z->heaps;
    z->heaps = NULL;
    hk__zone_rsrc_fini(&z->rs);
    while (h) {
        zone_heap *n = h->next;
        hk__zone_rsrc_fini(&h->rs);
        hk_os_release(h, h->os_size);
        h = n;
    }
}

/* ---- fork ------------------------------------------------------------------------ */

void hk__zone_fork_prepare(hk_zone *z) {
    zone_reg_lock();
    hk__core_lock(&z->core);
}
void hk__zone_fork_parent(hk_zone *z) {
    hk__core_unlock(&z->core);
    zone_reg_unlock();
}
void hk__zone_fork_child(hk_zone *z) {
    /* the child's one thread keeps its heap; the others' threads are gone */
    zone_heap *mine = z->threads ? zone_tl_find(z) : NULL;
    for (zone_heap *h = z->heaps; h; h = h->next)
        if (h != mine && !h->abandoned) zone_heap_abandon(z, h); /* as its thread's exit would have */
    hk__core_unlock(&z->core);
    zone_reg_unlock();
}

/* ---- free and realloc -------------------------------------------------------------- */

/* The header word of the block at user pointer p, read without the lock:
 * a plain peek first (a plain block's header may be rewritten under the
 * lock meanwhile: its PREV_USED bit, by a neighbour's free; such a word is
 * only looked at, never acted on), then, for a slot header, an acquire load
 * (slot headers are written atomically: it orders this thread after the
 * free that wrote it). Kept out of ThreadSanitizer's view for the peek. */

/* The used slot at p, verified without the lock (header word in *w, run in
 * *rp), or NULL: p is anything else (the locked path decides and reports). */
static zone_blk *zone_thr_slot_at(hk_zone *z, const void *p, uint64_t *w, zone_run **rp) {
    uintptr_t lo = (uintptr_t)z->thr_lo + ZONE_HDR;
    zone_blk *b = zone_from_user(p);
    if ((uintptr_t)p - lo > __atomic_load_n(&z->thr_span, __ATOMIC_ACQUIRE) || ((uintptr_t)p & 15) ||
        zone_is_poisoned(b, ZONE_HDR))
        return NULL;
    uint64_t v = zone_hdr_peek(b);
    if ((zone_w_bits(v) & ZB_SLOT_MASK) != ZB_SLOT_MASK) return NULL;
    v = __atomic_load_n((const zone_word *)((const unsigned char *)b + 8), __ATOMIC_ACQUIRE);
    uint32_t word = (uint32_t)v;
    if (zone_w_bits(v) != ZB_SLOT_USED || zone_w_tag(v) == 0 ||
        (uint16_t)(v >> 48) != zone_slot_chk(b, word, zone_w_tag(v), ZB_SLOT_USED))
        return NULL;
    /* the run is checked through its extension (zone_run_x): a remote
     * freer does not read the run struct's line, which its owner keeps
     * rewriting */
    zone_run *r;
    uint32_t stride;
    if (!zone_slot_run_at(lo, b, word, ZONE_RUN_XOFF, &r, &stride)) return NULL;
    const zone_run_x *x = zone_run_ext(r);
    if (__atomic_load_n(&x->run, __ATOMIC_RELAXED) != r || x->stride != stride ||
        (word & 0xfffu) >= __atomic_load_n(&x->bump, __ATOMIC_RELAXED))
        return NULL;
    *w = v;
    *rp = r;
    return b;
}

/* Frees used slot b (header word w) of run r from any thread (`mine`: the
 * calling thread's heap in z, or NULL): the owner's path or the remote one
 * (HK_ERR_DOUBLE_FREE, unreported, when another thread's free won the
 * header; HK_ERR_NOMEM, unreported, when no batch could be had). */
static hk_result zone_thr_free_slot(hk_zone *z, zone_blk *b, zone_run *r, uint64_t w, int locked,
                                    zone_heap *mine) {
    zone_run_x *x = zone_run_ext(r);
    zone_heap *h = __atomic_load_n(&x->heap, __ATOMIC_RELAXED);
    if (h && h == mine) {
        uint32_t stride = r->stride, word = (uint32_t)w;
        unsigned char *u = zone_user(b);
        zone_hdr_store(b, zone_hdr_make(b, word & 0x7ffffu, 0, ZB_SLOT_FREE));
        if (zone_w_tag(w) != HK_TAG_STATIC) zone_thr_untag(r, stride - ZONE_OVERLAP - (word >> 19));
        __atomic_store_n(&h->used_req, h->used_req - (stride - ZONE_OVERLAP - (word >> 19)),
                         __ATOMIC_RELAXED);
        uint64_t fc = h->free_count + 1;
        __atomic_store_n(&h->free_count, fc, __ATOMIC_RELAXED);
        zone_thr_run_put(z, h, r, u, locked);
        if (HK__UNLIKELY(fc >= __atomic_load_n(&h->decay_poll_at, __ATOMIC_RELAXED)))
            zone_thr_poll(z, h, fc, locked);
        return HK_OK;
    }
    if (h) {
        /* another heap's slot: into a batch of the calling thread's heap
         * (a thread without one gets one), else of the zone's under the lock */
        if (!mine && !locked) mine = hk__zone_heap_get(z);
        if (mine) return hk__zone_thr_remote(z, b, h, w, &mine->rs, locked);
        if (!locked) hk__core_lock(&z->core);
        hk_result res = hk__zone_thr_remote(z, b, h, w, &z->rs, 1);
        hk__zone_out_flush(&z->rs, 1); /* no owner to push it later: at once */
        if (!locked) hk__core_unlock(&z->core);
        return res;
    }
    /* the zone's own run: under the lock */
    if (!locked) hk__core_lock(&z->core);
    zone_slot_free(z, b, r);
    if (HK__UNLIKELY(z->free_count >= z->decay_poll_at)) zone_own_poll(z);
    if (!locked) hk__core_unlock(&z->core);
    return HK_OK;
}

hk_result hk__zone_thr_free_last(zone_heap *h, zone_blk *b, zone_run *r, uint64_t w) {
    return zone_thr_free_slot(h->z, b, r, w, 0, h); /* the owner's branch: run, settle, decay poll */
}

hk_result hk__zone_thr_free_slot(hk_zone *z, zone_blk *b, int locked) {
    /* one atomic read of the header (its owner rewrites it without the
     * lock): the lookup saw it used, but the owner may have freed it since
     * (a double free racing the owner's own free): then nothing is done */
    uint64_t w = zone_hdr_load(b);
    if (zone_w_bits(w) != ZB_SLOT_USED || zone_w_tag(w) == 0) return HK_ERR_DOUBLE_FREE;
    uint32_t word = (uint32_t)w; /* a slot's index and class never change */
    zone_run *r = (zone_run *)((unsigned char *)b -
                               (size_t)(word & 0xfffu) * zone_cls_stride(((word >> 12) & 0x7fu) % ZONE_NCLS) -
                               ZONE_RUN_SLOT0);
    return zone_thr_free_slot(z, b, r, w, locked, zone_tl_find(z));
}

int hk__zone_thr_free_fast(hk_zone *z, void *p) {
    uint64_t w;
    zone_run *r;
    zone_blk *b = zone_thr_slot_at(z, p, &w, &r);
    if (HK__UNLIKELY(b == NULL)) return 0;
    zone_heap *mine = zone_tl_find(z);
    if (mine != NULL && zone_run_ext(r)->heap == mine && zone_w_tag(w) == HK_TAG_STATIC) {
        zone_thr_free_owner(mine, b, r, w);
        return 1;
    }
    return zone_thr_free_slot(z, b, r, w, 0, mine) == HK_OK;
}

int hk__zone_thr_resize(hk_zone *z, void *p, size_t n, size_t *old_req, unsigned *tag) {
    uint64_t w;
    zone_run *r;
    zone_blk *b = zone_thr_slot_at(z, p, &w, &r);
    if (!b) return -1;
    uint32_t word = (uint32_t)w;
    size_t area = r->stride - ZONE_OVERLAP;
    *old_req = area - (word >> 19);
    *tag = zone_w_tag(w);
    zone_heap *h = zone_tl_find(z);
    if (!h || zone_run_ext(r)->heap != h || n > area ||
        (n < area / 2 && zone_cls_of(n) != ((word >> 12) & 0x7fu)))
        return 0;
    uint32_t slack = (uint32_t)(area - n);
    zone_hdr_store(b, zone_hdr_make(b, (word & 0x7ffffu) | (slack << 19), *tag, ZB_SLOT_USED));
    if (*tag != HK_TAG_STATIC) zone_run_ext(r)->treq += (uint32_t)(n - *old_req);
    zone_unpoison(p, n);
    if (slack > ZONE_OVERLAP) zone_poison((unsigned char *)p + n, slack - ZONE_OVERLAP);
    __atomic_store_n(&h->used_req, h->used_req - *old_req + n, __ATOMIC_RELAXED);
    return 1;
}

/* ---- sums ------------------------------------------------------------------------ */

/* A run's used count, read by another thread than its owner's (stats,
 * under the lock): the owner updates it with plain stores, one aligned
 * word, so the read gets a value it held; kept out of ThreadSanitizer's
 * view. */
static inline HK__NO_TSAN uint32_t zone_run_used_peek(const zone_run *r) {
    return *(volatile const uint32_t *)&r->used;
}

void hk__zone_thr_sums(const hk_zone *z, zone_sums *s, int pending) {
    s->used_req = z->used_req;
    s->slot_bytes = z->slot_bytes;
    s->alloc_count = z->alloc_count;
    s->free_count = z->free_count;
    if (!z->threads) return;
    for (const zone_heap *h = z->heaps; h; h = h->next) {
        s->used_req += __atomic_load_n(&h->used_req, __ATOMIC_RELAXED);
        s->alloc_count += __atomic_load_n(&h->alloc_count, __ATOMIC_RELAXED);
        s->free_count += __atomic_load_n(&h->free_count, __ATOMIC_RELAXED);
    }
    /* slot bytes: from the runs' used counts (no counter on the owner's
     * paths); every run of a threads zone, the heaps' and the zone's own,
     * is on z->xruns */
    s->slot_bytes = 0;
    for (const zone_run_x *x = z->xruns; x; x = x->anext) {
        const zone_run *r = __atomic_load_n(&x->run, __ATOMIC_RELAXED);
        s->slot_bytes += (size_t)zone_run_used_peek(r) * x->stride;
    }
    /* less the slots in the heaps' caches, which their runs count (read
     * while owners run, the two sums may disagree for a moment: no wrap) */
    size_t cached = 0;
    for (const zone_heap *h = z->heaps; h; h = h->next)
        for (unsigned ci = 0; ci < ZONE_NCLS; ci++)
            cached += (size_t)__atomic_load_n(&h->ncache[ci], __ATOMIC_RELAXED) * zone_cls_stride(ci);
    s->slot_bytes = cached < s->slot_bytes ? s->slot_bytes - cached : 0;
    if (!pending) return;
    /* slots freed by other threads and not collected yet are free already */
    zone_sums p;
    hk__zone_thr_pending(z, &p);
    s->used_req -= p.used_req;
    s->slot_bytes -= p.slot_bytes;
    s->free_count += p.free_count;
}

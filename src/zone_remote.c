/*
 * src/zone_remote.c - a HK_ZONE_THREADS zone's frees across threads: the
 * remote free of a slot, the batches (nodes) that carry freed slots to
 * their owner heap, their collection by the owner, and the settling of a
 * heap's run whose used count dropped. Calls down into zone_runs.c (giving
 * an emptied run back) and zone_decay.c (the decay poll) only;
 * zone_threads.c and zone_tags.c call it.
 *
 * Protocol:
 *  - remote free (thread F frees slot s of a run of heap H != F's heap):
 *    F has checked s against the run's extension; it makes sure its
 *    outbox for H has a node with room (taking one from its pool, or
 *    first pushing the node of another heap that shares the way), claims
 *    s by a compare-and-swap of its header, used -> remote (one winner
 *    among any number of freers), and appends s's user pointer to the
 *    node. A full node is pushed on H's inbox (a compare-and-swap on one
 *    word); so are F's partly filled nodes when F's own allocations take
 *    a slow path, when F exits, and before free_tags, purge and trim. One
 *    atomic read-modify-write per remote free (the claim), plus one per
 *    node pushed. When H is abandoned (its owner exited), the pusher
 *    collects H's inbox itself, under the lock, right after the push: no
 *    batch waits for an adoption (the exit marks H before its last
 *    collection; the push, the read of the mark, the mark and the
 *    collection's exchange are sequentially consistent).
 *  - collection (H's owner, before a carve or a refill; any thread for an
 *    abandoned heap or with every other thread quiescent, lock held): take
 *    the inbox (one exchange); for each entry whose header says remote,
 *    turn the slot free (counters) and put it where the owner's own free
 *    would: the heap's cache of its class while that has room and the
 *    slot is not its run's last used one (only the owner, not a locked
 *    collector), else its run's free list (used count), settling the run;
 *    then give the node back to its pool (a push on the pool's give-back
 *    stack). Through the cache the class's next allocations reuse the
 *    slots before the current run carves fresh ones, whatever run they
 *    are in.
 *  - the pools: a heap's pool is its owner's; the zone's (for threads
 *    without a heap) is used under the zone lock. Nodes come from pages of
 *    their own (hk_os_alloc), freed with the zone.
 *
 * Invariants (verified by hk_zone_check while no other thread is inside a
 * zone call):
 *  - every slot whose header says remote is in exactly one node: in the
 *    outbox of some pool, or on the inbox of the heap owning its run
 *    (never an abandoned heap's: it holds no batch); it
 *    counts as used in its run (so its run is never given back while it
 *    waits: nobody holds a reference into a run whose used count is 0).
 *  - a node entry whose header does not say remote lost a race against
 *    the owner's own free of the same block (a double free: both passed
 *    their checks); the collection reports it once and drops it. The
 *    remote free counts nothing, so no counter counts a free twice.
 *  - a freer touches a node only until it pushes it; a collector only
 *    until it gives it back. Nodes are never freed before the zone.
 */
#include "zone_threads.h"

/* ---- a heap's runs: settling ------------------------------------------------ */

void hk__zone_thr_settle(hk_zone *z, zone_heap *h, zone_run *r, int locked) {
    zone_cls *c = &h->cls[r->cls];
    if (r->used == 0) zone_decay_poll(z, locked);
    if (r->state == ZONE_RUN_FULL) {
        if (r->used < r->nslots) zone_partial_push(c, r);
    }
    if (r->state == ZONE_RUN_PARTIAL && r->used == 0) {
        zone_partial_unlink(c, r);
        /* only the owner makes the spare non-NULL; hk_zone_trim may take it
         * (an atomic exchange) at any time */
        if (!__atomic_load_n(&c->spare, __ATOMIC_RELAXED)) {
            r->state = ZONE_RUN_SPARE;
            __atomic_store_n(&c->spare, r, __ATOMIC_RELEASE);
        } else {
            if (!locked) hk__core_lock(&z->core);
            hk__zone_run_release(z, r);
            if (!locked) hk__core_unlock(&z->core);
        }
    }
}

/* ---- node pools ------------------------------------------------------------------ */

#define ZONE_NODE_PAGE ((size_t)64 << 10) /* 255 nodes after the page's link, carved as needed */

/* A node of pool s with no entry, or NULL (no memory for a page). */
static zone_rnode *zone_node_get(hk_zone *z, zone_rsrc *s) {
    zone_rnode *n = s->nodes;
    if (!n) n = __atomic_exchange_n(&s->back, NULL, __ATOMIC_ACQUIRE);
    if (!n) {
        /* a new node from the pool's page, carved one at a time: a page's
         * untouched nodes cost no memory */
        if (s->carve == s->carve_end) {
            unsigned char *page = (unsigned char *)hk_os_alloc(ZONE_NODE_PAGE);
            if (!page) return NULL;
            *(void **)page = s->pages;
            s->pages = page;
            s->carve = page + sizeof(zone_rnode);
            s->carve_end = page + ZONE_NODE_PAGE;
        }
        n = (zone_rnode *)s->carve;
        s->carve += sizeof(zone_rnode);
        n->home = s;
        __atomic_store_n(&n->next, NULL, __ATOMIC_RELAXED);
        __atomic_fetch_add(&z->rnodes_made, 1, __ATOMIC_RELAXED);
    }
    s->nodes = n->next;
    __atomic_store_n(&n->next, NULL, __ATOMIC_RELAXED);
    __atomic_store_n(&n->n, 0, __ATOMIC_RELAXED);
    return n;
}

void hk__zone_rsrc_fini(zone_rsrc *s) {
    while (s->pages) {
        void *next = *(void **)s->pages;
        hk_os_release(s->pages, ZONE_NODE_PAGE);
        s->pages = next;
    }
}

/* Gives node n back to its pool (any thread). */
static void zone_node_give_back(zone_rnode *n) {
    zone_rsrc *s = n->home;
    zone_rnode *head = __atomic_load_n(&s->back, __ATOMIC_RELAXED);
    do {
        __atomic_store_n(&n->next, head, __ATOMIC_RELAXED);
    } while (!__atomic_compare_exchange_n(&s->back, &head, n, true, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

/* ---- outboxes ------------------------------------------------------------------- */

static inline unsigned zone_out_way(const zone_heap *to) {
    return (unsigned)((uintptr_t)to >> 12) & (ZONE_OUT_WAYS - 1u);
}

/* Collects abandoned heap h's inbox under the lock (taken unless held):
 * its owner is gone, so nobody else would until a thread adopts it. */
static void zone_collect_abandoned(zone_heap *h, int locked) {
    hk_zone *z = h->z;
    if (!locked) hk__core_lock(&z->core);
    if (h->abandoned) hk__zone_thr_collect(z, h, 1); /* unless adopted meanwhile */
    if (!locked) hk__core_unlock(&z->core);
}

/* Pushes the node of outbox o on its heap's inbox (o keeps no node); when
 * that heap is abandoned, collects it at once (`locked`: the caller holds
 * the lock). */
static void zone_out_push(zone_outbox *o, int locked) {
    zone_rnode *n = o->node;
    __atomic_store_n(&o->node, NULL, __ATOMIC_RELAXED); /* stats may be reading the way */
    zone_heap *to = o->to;
    zone_rnode *head = __atomic_load_n(&to->inbox, __ATOMIC_RELAXED);
    /* the push and the load of the mark after it are sequentially
     * consistent, as a thread exit's mark and collection (zone_thread_exit):
     * either this load sees the mark or that collection's exchange sees
     * this node */
    do {
        __atomic_store_n(&n->next, head, __ATOMIC_RELAXED);
    } while (!__atomic_compare_exchange_n(&to->inbox, &head, n, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    if (HK__UNLIKELY(__atomic_load_n(&to->abandoned, __ATOMIC_SEQ_CST))) zone_collect_abandoned(to, locked);
}

void hk__zone_out_flush(zone_rsrc *s, int locked) {
    for (unsigned i = 0; i < ZONE_OUT_WAYS; i++) {
        zone_outbox *o = &s->out[i];
        if (o->node && o->node->n) zone_out_push(o, locked);
    }
}

/* ---- the remote free ------------------------------------------------------------- */

hk_result hk__zone_thr_remote(hk_zone *z, zone_blk *b, zone_heap *h, uint64_t w, zone_rsrc *s, int locked) {
    zone_outbox *o = &s->out[zone_out_way(h)];
    if (o->to != h) {
        /* the way's other heap gets its batch now (an empty node serves any heap) */
        if (o->node && o->node->n) zone_out_push(o, locked);
        o->to = h;
    }
    if (!o->node) {
        zone_rnode *fresh = zone_node_get(z, s);
        if (!fresh) return HK_ERR_NOMEM;
        __atomic_store_n(&o->node, fresh, __ATOMIC_RELAXED);
    }
    uint64_t want = w ^ ZONE_W_REMOTE_K;
    if (!__atomic_compare_exchange_n((zone_word *)((unsigned char *)b + 8), &w, want, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return HK_ERR_DOUBLE_FREE; /* another free won: the caller reports */
    zone_rnode *n = o->node;
    uint32_t k = n->n;
    __atomic_store_n(&n->slot[k], (void *)zone_user(b), __ATOMIC_RELAXED);
    __atomic_store_n(&n->n, k + 1, __ATOMIC_RELAXED);
    if (k + 1 == ZONE_RNODE_SLOTS) zone_out_push(o, locked);
    return HK_OK;
}

/* ---- collection ----------------------------------------------------------------- */

/* Reports a double free found by a collection (lock taken for the reporter
 * unless held). */
static void zone_report_late(hk_zone *z, zone_blk *b, int locked) {
    if (!locked) hk__core_lock(&z->core);
    hk__report(ZONE_REP(z), HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, zone_user(b), 0, NULL,
               "free(%p): block freed by two threads at once (its owner and another); the second free "
               "was ignored",
               (void *)zone_user(b));
    if (!locked) hk__core_unlock(&z->core);
}

#define ZONE_COLLECT_AHEAD 8u /* slots whose headers a collection asks for ahead */

void hk__zone_thr_collect(hk_zone *z, zone_heap *h, int locked) {
    zone_rnode *n = __atomic_exchange_n(&h->inbox, NULL, __ATOMIC_SEQ_CST); /* see zone_out_push */
    size_t req = 0, nfreed = 0;
    while (n) {
        zone_rnode *next = n->next;
        uint32_t cnt = n->n;
        /* the slots' lines were last written by their freers: ask for a
         * few ahead, so that their misses overlap */
        for (uint32_t i = 0; i < cnt && i < ZONE_COLLECT_AHEAD; i++)
            __builtin_prefetch((unsigned char *)n->slot[i] - ZONE_HDR, 1);
        for (uint32_t i = 0; i < cnt; i++) {
            if (i + ZONE_COLLECT_AHEAD < cnt)
                __builtin_prefetch((unsigned char *)n->slot[i + ZONE_COLLECT_AHEAD] - ZONE_HDR, 1);
            zone_blk *s = zone_from_user(n->slot[i]);
            uint64_t w = zone_hdr_load(s);
            if (zone_w_bits(w) != ZB_SLOT_REMOTE ||
                (uint16_t)(w >> 48) != zone_slot_chk(s, (uint32_t)w, zone_w_tag(w), ZB_SLOT_REMOTE)) {
                zone_report_late(z, s, locked);
                continue;
            }
            uint32_t word = (uint32_t)w;
            zone_run *r = zone_run_of_slot(s);
            zone_hdr_store(s, zone_hdr_make(s, word & 0x7ffffu, 0, ZB_SLOT_FREE));
            if (zone_w_tag(w) != HK_TAG_STATIC) zone_thr_untag(r, r->stride - ZONE_OVERLAP - (word >> 19));
            req += r->stride - ZONE_OVERLAP - (word >> 19);
            nfreed++;
            unsigned ci = r->cls;
            if (!locked && r->used > 1 && h->ncache[ci] < zone_cache_max_tab[ci]) {
                zone_thr_cache_push(h, ci, zone_user(s), r->stride);
                continue;
            }
            zone_thr_run_put(z, h, r, zone_user(s), locked);
        }
        zone_node_give_back(n);
        n = next;
    }
    if (!nfreed) return;
    __atomic_store_n(&h->used_req, h->used_req - req, __ATOMIC_RELAXED);
    __atomic_store_n(&h->free_count, h->free_count + nfreed, __ATOMIC_RELAXED);
}

/* ---- what stats subtract ---------------------------------------------------------- */

/* Adds to *s the slots of node n whose header says remote. */
static void zone_node_pending(const zone_rnode *n, zone_sums *s) {
    uint32_t cnt = __atomic_load_n(&n->n, __ATOMIC_RELAXED);
    if (cnt > ZONE_RNODE_SLOTS) cnt = ZONE_RNODE_SLOTS;
    for (uint32_t i = 0; i < cnt; i++) {
        const zone_blk *b = zone_from_user(__atomic_load_n(&n->slot[i], __ATOMIC_RELAXED));
        uint64_t w = zone_hdr_load(b);
        if (zone_w_bits(w) != ZB_SLOT_REMOTE) continue;
        uint32_t stride = zone_cls_stride(((uint32_t)w >> 12) & 0x7fu);
        s->used_req += stride - ZONE_OVERLAP - ((uint32_t)w >> 19);
        s->slot_bytes += stride;
        s->free_count++;
    }
}

static void zone_rsrc_pending(const zone_rsrc *rs, zone_sums *s) {
    for (unsigned i = 0; i < ZONE_OUT_WAYS; i++) {
        const zone_rnode *n = __atomic_load_n(&rs->out[i].node, __ATOMIC_RELAXED);
        if (n) zone_node_pending(n, s);
    }
}

void hk__zone_thr_pending(const hk_zone *z, zone_sums *s) {
    memset(s, 0, sizeof *s);
    /* a walk bounded by the nodes made: under concurrency a node may move
     * from stack to stack while this reads (the figures are then only
     * approximate, as documented) */
    size_t budget = __atomic_load_n(&z->rnodes_made, __ATOMIC_RELAXED);
    zone_rsrc_pending(&z->rs, s);
    for (const zone_heap *h = z->heaps; h; h = h->next) {
        zone_rsrc_pending(&h->rs, s);
        for (const zone_rnode *n = __atomic_load_n(&h->inbox, __ATOMIC_ACQUIRE); n && budget; budget--) {
            zone_node_pending(n, s);
            n = __atomic_load_n(&n->next, __ATOMIC_RELAXED);
        }
    }
}

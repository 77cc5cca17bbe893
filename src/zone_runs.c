/*
 * src/zone_runs.c - small-block runs: the slow paths of the run layer
 * (interface and fast paths: src/zone_runs.h). Calls down into
 * zone_tlsf.c (a run's block) and zone_region.c (growth, release) only.
 *
 * Small untracked blocks (hk_zone_alloc, calloc and realloc of at most
 * ZONE_RUN_MAX_REQ bytes, in a zone without debug flags or HK_ZONE_NO_RUNS)
 * live in runs: a run is one used block of the TLSF core, cut into slots of
 * one size class (63 classes: 16-byte steps up to 256 bytes, then 8 per
 * doubling up to 16 KiB). A run that becomes empty goes back to the TLSF
 * core at once (and is merged there as any block), except each class's
 * current run and one spare empty run (given back before any purge or
 * growth). Slots are carved lazily (`bump`), so a run's untouched pages stay
 * untouched.
 *
 * A slot's 8-byte header sits where a TLSF header's size/tag/bits/chk sit
 * (user pointer - 8) and carries a 16-bit check (zone_slot_chk), so every
 * pointer check (double free, foreign, interior, damaged header) works alike
 * for both.
 *
 * Invariants (verified by hk_zone_check):
 *  - a used block whose alignment field is ZONE_RUN_ALOG (and without EXT)
 *    is a run; its bytes count in runs.run_bytes, not used_bytes; nruns
 *    counts the runs. Its struct is sane (zone_run_sane: first slot
 *    address, class, stride, nslots fit the block, used <= bump <= nslots <=
 *    ZONE_RUN_CAP_SLOTS).
 *  - slots below bump have slot headers (used or free) naming their index
 *    and class; `used` counts the used ones, which carry tag HK_TAG_STATIC
 *    (in a threads zone also a tag below the purge level: tagged slots,
 *    which the run's `ntag` counts; zone_threads.c); the run's free list
 *    holds exactly the free ones.
 *  - the class's cur run has state CUR; a PARTIAL run is on its class's
 *    partial list and has a used slot and a free or uncarved one (a run
 *    still being carved goes there when a run with freed slots is made
 *    current before it: hk__zone_slot_reuse); a FULL run has every slot
 *    used; a SPARE run is its class's spare and empty.
 *  - slot_bytes is the sum of the strides of the used slots.
 *  - in a threads zone, each heap's run_bytes is the sum of the block
 *    sizes of the runs whose extension names it.
 */
#include "zone_runs.h"

/* Slots for a new run of `stride`-byte slots: ZONE_RUN_FIRST bytes of
 * them for a class's first run; a run that replaces a full one of `prev`
 * slots gets twice that one's bytes, up to a target: ZONE_RUN_TARGET, or
 * 1/64 of `owned` (the bytes of the runs its owner, heap or zone, already
 * holds) when that is more, up to ZONE_RUN_TARGET_MAX; at most
 * ZONE_RUN_CAP_SLOTS and at least ZONE_RUN_MIN_SLOTS; in a zone that
 * cannot grow, at most 1/16 of the capacity (0: no run). A busy class's
 * larger runs make its allocations switch runs less often, and a large
 * heap's classes span fewer runs; a rarely used class keeps a small run,
 * whose address space (a run's untouched slots cost address space only:
 * slots are carved as they are first used) does not push the zone's high
 * water up, and a heap of less than 2 MiB of runs keeps the 32 KiB
 * target, so that a run's unused slots stay small beside the heap. */
static size_t zone_run_slots(const hk_zone *z, uint32_t stride, uint32_t prev, size_t owned) {
    size_t bytes = prev ? (size_t)prev * stride * 2 : ZONE_RUN_FIRST;
    size_t target = owned >> ZONE_RUN_SHARE_LOG2;
    if (target < ZONE_RUN_TARGET) target = ZONE_RUN_TARGET;
    if (target > ZONE_RUN_TARGET_MAX) target = ZONE_RUN_TARGET_MAX;
    /* a threads zone's heap takes the zone lock for each new run: a busy
     * class of large slots doubles on to ZONE_RUN_BUSY_X slots */
    if (z->threads && (size_t)stride * ZONE_RUN_BUSY_X > target) target = (size_t)stride * ZONE_RUN_BUSY_X;
    if (bytes < ZONE_RUN_FIRST) bytes = ZONE_RUN_FIRST;
    if (bytes > target) bytes = target;
    size_t n = bytes / stride, cap = z->capacity / 16;
    if (z->threads) cap = cap > ZONE_RUN_XBYTES ? cap - ZONE_RUN_XBYTES : 0;
    if (n > ZONE_RUN_CAP_SLOTS) n = ZONE_RUN_CAP_SLOTS;
    if (n < ZONE_RUN_MIN_SLOTS) n = ZONE_RUN_MIN_SLOTS;
    if (ZONE_RUN_HDR + n * stride > cap && !z->grow_size) {
        if (cap < ZONE_RUN_HDR + (size_t)ZONE_RUN_MIN_SLOTS * stride) return 0;
        n = (cap - ZONE_RUN_HDR) / stride;
    }
    return n;
}

/* A new run of class ci from the TLSF core, or NULL (the caller falls back
 * to a plain block). Nothing is purged for a run; a growing zone grows.
 * O(1) (plus one mmap when growing). */
zone_run *hk__zone_run_new(hk_zone *z, unsigned ci, struct zone_heap *h, uint32_t prev) {
    uint32_t stride = zone_cls_stride(ci);
    /* the owner's runs: the heap's, or the zone's (in a threads zone the
     * zone's own runs, for a thread without a heap, count every heap's) */
    size_t n = zone_run_slots(z, stride, prev, h ? h->run_bytes : z->runs.run_bytes), bsize;
    if (!n) return NULL;
    size_t need = ZONE_RUN_HDR + n * stride + (z->threads ? ZONE_RUN_XBYTES : 0);
    zone_blk *b = hk__zone_take(z, need, 16, &bsize);
    /* a growing zone grows for a run rather than serve the class from plain
     * blocks for good */
    if (!b && z->grow_size && hk__zone_grow(z, need)) b = hk__zone_take(z, need, 16, &bsize);
    if (!b) return NULL;
    zone_set_hdr(b, bsize, HK_TAG_STATIC, ZB_USED | (b->bits & ZB_PREV_USED) | ZB_RUN_MARK, 0);
    zone_run *r = zone_run_of_block(z, b);
    zone_unpoison(r, sizeof *r);
    r->free = NULL;
    r->next = r->prev = NULL;
    r->first = (unsigned char *)r + ZONE_RUN_SLOT0;
    r->stride = stride;
    r->nslots = (uint32_t)n;
    r->used = 0;
    r->bump = 0;
    r->ntag = 0;
    r->cls = (uint16_t)ci;
    r->state = 0;
    r->lead = (uint8_t)((unsigned char *)r - (unsigned char *)b);
    if (z->threads) {
        /* the extension: owner heap, copies for remote freers, link on the zone's list */
        zone_run_x *x = zone_run_ext(r);
        zone_unpoison(x, sizeof *x);
        memset(x, 0, sizeof *x);
        x->heap = h;
        x->stride = stride;
        __atomic_store_n(&x->run, r, __ATOMIC_RELAXED);
        x->anext = z->xruns;
        if (z->xruns) z->xruns->aprev = x;
        z->xruns = x;
    }
    z->runs.run_bytes += bsize;
    z->runs.nruns++;
    if (h) h->run_bytes += bsize;
    return r;
}

zone_blk *hk__zone_run_release(hk_zone *z, zone_run *r) {
    zone_blk *b = zone_run_block(r);
    size_t size = zone_bsize(b);
    z->runs.run_bytes -= size;
    z->runs.nruns--;
    if (z->threads) {
        zone_run_x *x = zone_run_ext(r);
        if (x->heap) x->heap->run_bytes -= size;
        if (x->aprev)
            x->aprev->anext = x->anext;
        else
            z->xruns = x->anext;
        if (x->anext) x->anext->aprev = x->aprev;
        __atomic_store_n(&x->run, NULL, __ATOMIC_RELAXED); /* nor through the extension */
    }
    r->first = NULL; /* a stale slot pointer into it no longer finds a run */
    zone_unpoison(zone_user(b), size - ZONE_HDR);
    zone_blk *m = hk__zone_merge_insert(z, b);
    if (zone_spans_region(z, m))
        hk__zone_maybe_release(z, m);
    else
        zone_decay_tick(z); /* free pages back to the OS when due */
    return m;
}

int hk__zone_runs_trim(hk_zone *z) {
    int released = 0;
    for (unsigned w = 0; w < sizeof z->runs.trim_map / sizeof z->runs.trim_map[0]; w++) {
        uint64_t m = z->runs.trim_map[w];
        z->runs.trim_map[w] = 0;
        for (; m; m &= m - 1) {
            zone_cls *cl = &z->runs.cls[w * 64u + (unsigned)__builtin_ctzll(m)];
            zone_run *r = cl->cur;
            if (r && r->used == 0) {
                cl->cur = NULL;
                hk__zone_run_release(z, r);
                released = 1;
            }
            if ((r = cl->spare) != NULL) {
                cl->spare = NULL;
                hk__zone_run_release(z, r);
                released = 1;
            }
        }
    }
    return released;
}

HK__NOINLINE unsigned char *hk__zone_run_carve(zone_run *r, uint32_t *word) {
    uint32_t i = r->bump, stride = r->stride;
    if (i >= r->nslots) return NULL;
    unsigned char *u = r->first + (size_t)i * stride + ZONE_HDR;
    /* the header and the 8 bytes before it (the previous slot's last
     * bytes, like a plain block's overlap) stay addressable */
    zone_unpoison(u - ZONE_HDR, ZONE_HDR);
    uintptr_t end = ((uintptr_t)u - ZONE_HDR + stride + ZONE_OVERLAP + ZONE_CARVE_SPAN - 1) &
                    ~(uintptr_t)(ZONE_CARVE_SPAN - 1);
    /* k: the slots after i whose header and link end by `end`, at most
     * ZONE_CARVE_MAX - 1 (a bound on the carve's work: one page of the
     * smallest class would be 128 slots) */
    uint32_t k = 0;
    uintptr_t f1 = (uintptr_t)u + stride + sizeof(void *); /* slot i + 1's link end */
    if (i + 1 < r->nslots && f1 <= end) {
        k = (uint32_t)((end - f1) / stride) + 1;
        if (k > r->nslots - i - 1) k = r->nslots - i - 1;
        if (k > ZONE_CARVE_MAX - 1) k = ZONE_CARVE_MAX - 1;
    }
    for (uint32_t j = i + k; j > i; j--) {
        unsigned char *f = r->first + (size_t)j * stride + ZONE_HDR;
        zone_blk *fb = zone_from_user(f);
        zone_unpoison(f - ZONE_HDR, ZONE_HDR + sizeof(void *));
        zone_hdr_store(fb, zone_hdr_make(fb, zone_slot_word(j, r->cls, 0), 0, ZB_SLOT_FREE));
        *(unsigned char **)f = r->free;
        r->free = f;
        zone_poison(f, stride - ZONE_HDR);
    }
    __atomic_store_n(&r->bump, i + 1 + k, __ATOMIC_RELAXED);
    if (zone_run_has_ext(r)) __atomic_store_n(&zone_run_ext(r)->bump, i + 1 + k, __ATOMIC_RELAXED);
    *word = zone_slot_word(i, r->cls, 0);
    return u;
}

HK__NOINLINE zone_run *hk__zone_slot_reuse(hk_zone *z, unsigned ci) {
    zone_cls *c = &z->runs.cls[ci];
    zone_run *r = c->cur, *p = c->partial;
    zone_partial_unlink(c, p);
    if (r->bump < r->nslots)
        zone_partial_push(c, r);
    else
        r->state = ZONE_RUN_FULL;
    p->state = ZONE_RUN_CUR;
    c->cur = p;
    return p;
}

HK__NOINLINE unsigned char *hk__zone_slot_refill(hk_zone *z, unsigned ci, zone_run **out, uint32_t *word) {
    zone_cls *c = &z->runs.cls[ci];
    uint32_t prev = c->cur ? c->cur->nslots : 0; /* a new run replacing a full one is larger */
    if (c->cur) {
        c->cur->state = ZONE_RUN_FULL;
        c->cur = NULL;
    }
    zone_run *r = c->partial;
    if (r) {
        zone_partial_unlink(c, r);
    } else if ((r = c->spare) != NULL) {
        c->spare = NULL;
    } else {
        zone_decay_poll(z, 1); /* a new run: the clock, when a sweep is due */
        if (!(r = hk__zone_run_new(z, ci, NULL, prev))) return NULL;
    }
    r->state = ZONE_RUN_CUR;
    c->cur = r;
    *out = r;
    return zone_slot_pop(r, word);
}

void hk__zone_run_settle(hk_zone *z, zone_run *r) {
    zone_cls *c = &z->runs.cls[r->cls];
    if (r->used == 0) {
        zone_decay_poll(z, 1);
        z->runs.trim_map[r->cls >> 6] |= 1ull << (r->cls & 63u); /* an empty cur or a spare to trim */
    }
    if (r->state == ZONE_RUN_FULL) {
        zone_partial_push(c, r);
    } else if (r->state == ZONE_RUN_PARTIAL && r->used == 0) {
        zone_partial_unlink(c, r);
        if (!c->spare) {
            r->state = ZONE_RUN_SPARE;
            c->spare = r;
        } else {
            hk__zone_run_release(z, r);
        }
    }
}

size_t hk__zone_run_free_all(hk_zone *z, zone_run *r) {
    size_t n = 0;
    for (uint32_t i = 0; i < r->bump; i++) {
        zone_blk *s = (zone_blk *)(r->first + (size_t)i * r->stride);
        if ((s->bits & ZB_USED) || s->bits == ZB_SLOT_REMOTE) {
            z->used_req -= r->stride - ZONE_OVERLAP - zone_slot_slack(s);
            if (s->bits & ZB_USED) {
                uint64_t w = zone_hdr_load(s); /* used -> free by one xor */
                zone_hdr_store(s, w ^ zone_w_use_delta((uint32_t)w >> 19));
            } else /* freed by another thread, not collected (a threads zone) */
                zone_slot_set(s, s->size16 & 0x7ffffu, 0, ZB_SLOT_FREE);
            n++;
        }
    }
    r->used = 0;
    z->slot_bytes -= n * r->stride;
    z->free_count += n;
    zone_cls *c = zone_run_cls(z, r);
    if (c->cur == r)
        c->cur = NULL;
    else if (c->spare == r)
        c->spare = NULL;
    else if (r->state == ZONE_RUN_PARTIAL)
        zone_partial_unlink(c, r);
    return n;
}

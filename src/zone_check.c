/*
 * src/zone_check.c - the zone's introspection: check, walk, where, dump. The
 * top of the zone's layers (see src/zone_internal.h): it reads every
 * structure through the inline helpers of zone_internal.h and zone_runs.h
 * and calls no other zone file but zone_threads.c's read-only counter sum
 * (a threads zone is checked while no other thread is inside a call); zone.c registers hk__zone_check_core as
 * the instance core's paranoid hook.
 *
 * Everything here reads the heap without trusting it: a header is used only
 * after its check bits and size were verified, and a list pointer is followed
 * only when it points into a region at a 16-byte boundary. The invariants
 * being verified are stated at the top of the file that maintains each
 * (zone_tlsf.c, zone_region.c, zone_runs.c, zone_tags.c, zone.c). Nothing
 * here writes to the heap (the sanitizer poisoning of bytes it reads is
 * restored) or allocates.
 */
#include "zone_threads.h"

#include <stdio.h>

#define ZONE_CORRUPT(kind, addr, ...)                                                                        \
    do {                                                                                                     \
        hk__report(ZONE_REP(z), HK_ERR_CORRUPT, (kind), (addr), 0, NULL, __VA_ARGS__);                       \
        return HK_ERR_CORRUPT;                                                                               \
    } while (0)

/* A list pointer that may be followed: inside a region's blocks, aligned,
 * header readable and intact. */
static int zone_ptr_sane(const hk_zone *z, const zone_blk *b) {
    int ri = zone_region_index(z, b);
    if (ri < 0 || ((uintptr_t)b & 15) || (const unsigned char *)b >= z->regions[ri].end) return 0;
    if (zone_is_poisoned(b, ZONE_HDR) || !zone_hdr_ok(b)) return 0;
    return zone_bsize(b) >= ZONE_MIN_BLOCK &&
           zone_bsize(b) <= (size_t)(z->regions[ri].end - (const unsigned char *)b);
}

/* Offset of the first byte of [p, p+n) that is not `fill`, or n. The bytes
 * are poisoned again afterwards when `repoison` says so. */
static size_t zone_scan_fill(const unsigned char *p, size_t n, unsigned fill, size_t repoison) {
    zone_unpoison(p, n);
    size_t off = hk__fill_find(p, n, fill);
    zone_poison(p, repoison);
    return off;
}

typedef struct zone_tally {
    size_t nfree, free_bytes, used_bytes, used_req, live, untracked, tracked, capacity;
    size_t run_bytes, nruns, slot_bytes, runs_cur, runs_partial, runs_spare;
    size_t heap_run_bytes; /* bytes of the runs that heaps own (threads zones) */
    size_t remote_slots;   /* slots freed by another thread, not collected yet */
    size_t clean_bytes;    /* spans of the clean free blocks (given back to the OS) */
} zone_tally;

/* A threads zone's heap caches (zone_runs.h, zone_heap): each entry of
 * heap h's list of class ci is a free slot of that class in a run of h,
 * each list holds as many as its count says; each run's extension gets
 * the number of its slots found (ccached), which zone_check_run adds to
 * the used slots its headers show. Lock held, owners quiescent. */
static hk_result zone_check_caches(hk_zone *z) {
    for (zone_run_x *x = z->xruns; x; x = x->anext) x->ccached = 0;
    for (zone_heap *h = z->heaps; h; h = h->next)
        for (unsigned ci = 0; ci < ZONE_NCLS; ci++) {
            uint32_t n = 0;
            for (unsigned char *u = h->cache[ci]; u; n++) {
                uintptr_t a = (uintptr_t)u;
                int ri = zone_find_region(z, u);
                const zone_blk *b = zone_from_user(u);
                zone_run *r = NULL;
                uint32_t stride;
                if (n >= h->ncache[ci] || ri < 0 || (a & 15) ||
                    a < (uintptr_t)z->regions[ri].base + ZONE_HDR || zone_is_poisoned(b, ZONE_HDR) ||
                    !zone_hdr_ok(b) || !zone_is_slot(b) || (b->bits & ZB_USED) || b->bits == ZB_SLOT_REMOTE ||
                    zone_slot_cls(b) != ci ||
                    !zone_slot_run_at((uintptr_t)z->regions[ri].base + ZONE_HDR, b, b->size16, ZONE_RUN_XOFF,
                                      &r, &stride) ||
                    !zone_run_is(r, stride) || zone_slot_idx(b) >= r->bump || zone_run_ext(r)->run != r ||
                    zone_run_ext(r)->heap != h)
                    ZONE_CORRUPT(
                        HK_EK_CORRUPT_FREE, u,
                        "the cache of freed %u-byte slots of heap %p reaches %p, not one of its free "
                        "slots (entry %u of %u)",
                        zone_cls_stride(ci), (void *)h, (void *)u, n, h->ncache[ci]);
                zone_run_ext(r)->ccached++;
                u = zone_free_next(u);
            }
            if (n != h->ncache[ci])
                ZONE_CORRUPT(HK_EK_CORRUPT_FREE, h,
                             "the cache of freed %u-byte slots of heap %p holds %u, its count says %u",
                             zone_cls_stride(ci), (void *)h, n, h->ncache[ci]);
        }
    return HK_OK;
}

/* Checks run block b (its struct, every carved slot's header, the free
 * list, the state) and tallies its slots. */
static hk_result zone_check_run(hk_zone *z, zone_blk *b, size_t size, zone_tally *t) {
    zone_run *r = zone_run_of_block(z, b);
    if (!zone_run_sane(z, r, b, size))
        ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, r, "small-block run %p (block of %zu bytes) is damaged",
                     (void *)r, size);
    size_t used = 0, ntag = 0, treq = 0;
    const zone_run_x *x = z->threads ? zone_run_ext(r) : NULL;
    if (x) {
        const zone_heap *h = z->heaps;
        while (h && h != x->heap) h = h->next;
        if (x->run != r || (x->heap && !h))
            ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, r, "run %p's extension names no heap of this zone",
                         (void *)r);
        if (x->stride != r->stride || x->bump != r->bump)
            ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, r,
                         "run %p's extension says stride %u, %u slots carved; the run %u, %u", (void *)r,
                         x->stride, x->bump, r->stride, r->bump);
        if (x->heap) t->heap_run_bytes += size;
    }
    const zone_cls *rc = zone_run_cls(z, r);
    for (uint32_t i = 0; i < r->bump; i++) {
        zone_blk *s = (zone_blk *)(r->first + (size_t)i * r->stride);
        if (!zone_hdr_ok(s) || !zone_is_slot(s) || zone_slot_idx(s) != i || zone_slot_cls(s) != r->cls)
            ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, zone_user(s),
                         "header of block %p (slot %u of run %p) damaged (overrun of the block before?)",
                         (void *)zone_user(s), i, (void *)r);
        if (s->bits & ZB_USED) {
            /* tagged slots (a threads zone's): a kept tag, counted by ntag */
            int tag_ok = s->tag == HK_TAG_STATIC || (x && x->heap && s->tag != 0 && s->tag < z->purge_level &&
                                                     ((x->heap->tagmap[s->tag >> 6] >> (s->tag & 63u)) & 1u));
            if (!tag_ok || zone_slot_slack(s) > r->stride - ZONE_OVERLAP)
                ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, zone_user(s),
                             "block %p (slot %u of run %p) has tag %u, slack %u", (void *)zone_user(s), i,
                             (void *)r, s->tag, zone_slot_slack(s));
            if (s->tag != HK_TAG_STATIC) ntag++, treq += zone_requested(s);
            used++;
            t->used_req += zone_requested(s);
        } else if (s->bits == ZB_SLOT_REMOTE) {
            /* freed by another thread, awaiting its owner in a batch
             * (zone_check_batches): still counted as used */
            if (!x || !x->heap)
                ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, zone_user(s),
                             "block %p (slot %u of run %p) was freed by another thread but its run has no "
                             "owner heap",
                             (void *)zone_user(s), i, (void *)r);
            t->remote_slots++;
            if (s->tag != HK_TAG_STATIC) ntag++, treq += zone_requested(s);
            used++;
            t->used_req += zone_requested(s);
        } else if (s->tag || zone_slot_slack(s)) {
            ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, zone_user(s), "free slot %p of run %p has used-block fields",
                         (void *)zone_user(s), (void *)r);
        }
    }
    /* its count includes the slots in its heap's cache (zone_check_caches) */
    if (used + (x ? x->ccached : 0) != r->used)
        ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, r, "run %p has %zu used slots and %u cached, its count says %u",
                     (void *)r, used, x ? x->ccached : 0u, r->used);
    if (ntag != r->ntag || (x && treq != x->treq))
        ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, r,
                     "run %p has %zu tagged slots asking %zu bytes, its counts say %u and %u", (void *)r,
                     ntag, treq, r->ntag, x ? x->treq : 0u);
    size_t nfree = 0;
    for (unsigned char *u = r->free; u;) {
        uintptr_t off = (uintptr_t)(u - r->first - ZONE_HDR);
        if (++nfree > r->bump - r->used || u < r->first + ZONE_HDR || off % r->stride ||
            off / r->stride >= r->bump || (zone_from_user(u)->bits & ZB_USED))
            ZONE_CORRUPT(HK_EK_CORRUPT_FREE, u, "free list of run %p reaches %p, not one of its free slots",
                         (void *)r, (void *)u);
        u = zone_free_next(u);
    }
    if (nfree != r->bump - r->used)
        ZONE_CORRUPT(HK_EK_CORRUPT_FREE, r, "free list of run %p holds %zu slots, it has %u free", (void *)r,
                     nfree, r->bump - r->used);
    if ((r->state == ZONE_RUN_FULL && r->used != r->nslots) ||
        /* in a heap only: an empty partial run (a current run that
         * free_tags emptied and uncarved, set aside by zone_thr_reuse for a
         * run with freed slots); a partial run may be partly carved (set aside as
         * current for a run with freed slots: hk__zone_slot_reuse,
         * zone_thr_reuse) */
        (r->state == ZONE_RUN_PARTIAL && ((r->used == 0 && !(x && x->heap)) || r->used == r->nslots)) ||
        (r->state == ZONE_RUN_CUR && rc->cur != r) ||
        (r->state == ZONE_RUN_SPARE && (rc->spare != r || r->used != 0)))
        ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, r, "run %p is in state %u with %u of %u slots used", (void *)r,
                     r->state, r->used, r->nslots);
    t->live += used;
    t->slot_bytes += used * r->stride;
    t->run_bytes += size;
    t->nruns++;
    if (r->state == ZONE_RUN_CUR) t->runs_cur++;
    if (r->state == ZONE_RUN_PARTIAL) t->runs_partial++;
    if (r->state == ZONE_RUN_SPARE) t->runs_spare++;
    return HK_OK;
}

static hk_result zone_check_region(hk_zone *z, uint32_t ri, zone_tally *t) {
    const zone_region *r = &z->regions[ri];
    if (ri > 0 && z->regions[ri - 1].end + ZONE_HDR > r->base)
        ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, r->base, "regions %u and %u overlap or are out of order",
                     ri - 1, ri);
    t->capacity += (size_t)(r->end - r->base);
    zone_blk *b = (zone_blk *)r->base;
    unsigned prev_used = 1;
    size_t prev_size = 0;
    while ((unsigned char *)b < r->end) {
        if ((size_t)(r->end - (unsigned char *)b) < ZONE_MIN_BLOCK)
            ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, b, "block at %p runs into the end of region %u", (void *)b,
                         ri);
        if (!zone_hdr_ok(b))
            ZONE_CORRUPT(
                HK_EK_CORRUPT_HEADER, zone_user(b),
                "header of block %p damaged (its check bits do not match; overrun of the block before?)",
                (void *)zone_user(b));
        size_t size = zone_bsize(b);
        unsigned used = b->bits & ZB_USED;
        if (size < ZONE_MIN_BLOCK || size > (size_t)(r->end - (unsigned char *)b) ||
            (used && !zone_is_slot(b) &&
             size < ((b->bits & ZB_EXT) ? ZONE_EXT_OVH : ZONE_PLAIN_OVH) + zone_slack(b)))
            ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, zone_user(b), "block %p has an impossible size %zu",
                         (void *)zone_user(b), size);
        if (((b->bits & ZB_PREV_USED) != 0) != (prev_used != 0))
            ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, zone_user(b),
                         "block %p says the block before it is %s, but it is %s", (void *)zone_user(b),
                         (b->bits & ZB_PREV_USED) ? "used" : "free", prev_used ? "used" : "free");
        if (!prev_used && b->prev_size != prev_size)
            ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, zone_user(b),
                         "boundary tag before block %p says %llu bytes, the free block before it has %zu",
                         (void *)zone_user(b), (unsigned long long)b->prev_size, prev_size);
        if (used && zone_is_slot(b)) {
            ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, zone_user(b), "block %p has a slot header outside any run",
                         (void *)zone_user(b));
        } else if (used && zone_is_run(b)) {
            if (!z->runs_on)
                ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, zone_user(b), "run %p in a zone without runs",
                             (void *)zone_user(b));
            hk_result rr = zone_check_run(z, b, size, t);
            if (rr != HK_OK) return rr;
        } else if (used) {
            t->live++;
            t->used_bytes += size;
            t->used_req += zone_requested(b);
            if (b->tag == 0)
                ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, zone_user(b), "used block %p has tag 0",
                             (void *)zone_user(b));
            if (b->bits & ZB_EXT)
                t->tracked++;
            else {
                t->untracked++;
                if (b->tag != HK_TAG_STATIC)
                    ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, zone_user(b), "untracked block %p has tag %u",
                                 (void *)zone_user(b), b->tag);
            }
            if (ZONE_FLAGS(z) & HK_FLAG_CANARY) {
                size_t area = zone_area(b), req = zone_requested(b), n = area - req;
                size_t pe = (b->bits & ZB_EXT) ? n : (n > ZONE_OVERLAP ? n - ZONE_OVERLAP : 0);
                size_t off = n < HK_CANARY_BYTES ? 0 : zone_scan_fill(zone_user(b) + req, n, HK_FILL_PAD, pe);
                if (off != n) {
                    const char *name = zone_block_name(b);
                    hk__report(ZONE_REP(z), HK_ERR_CORRUPT, HK_EK_CORRUPT_CANARY, zone_user(b), req, name,
                               "block %p (%zu bytes, tag %u%s%s%s): canary damaged at byte %zu past the end",
                               (void *)zone_user(b), req, b->tag, name ? ", '" : "", name ? name : "",
                               name ? "'" : "", off);
                    return HK_ERR_CORRUPT;
                }
            }
        } else {
            if (!prev_used)
                ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, b, "free blocks %p and %p are adjacent (not merged)",
                             (void *)((unsigned char *)b - prev_size), (void *)b);
            if (b->tag || zone_slack(b) || (b->bits & ~(ZB_PREV_USED | ZB_FREE_STATE)))
                ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, b,
                             "free block %p has used-block fields (tag %u, bits %#x)", (void *)b, b->tag,
                             (unsigned)b->bits);
            if (b->bits & ZB_FREE_CLEAN) {
                /* given back to the OS: only the zone's own memory (a block
                 * without a whole page is clean when carved from a clean one) */
                uintptr_t lo;
                if (!z->decay_on || !zone_own_memory(z, b))
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, b,
                                 "free block %p (%zu bytes) is marked as given back to the OS, which %s",
                                 (void *)b, size,
                                 !z->decay_on ? "this zone never does" : "it may not do with caller memory");
                t->clean_bytes += zone_free_span(z, b, size, &lo);
            }
            t->nfree++;
            t->free_bytes += size;
            if (ZONE_FLAGS(z) & HK_FLAG_FILL) {
                size_t n = size - sizeof(zone_blk);
                size_t off = zone_scan_fill((unsigned char *)b + sizeof(zone_blk), n, HK_FILL_FREE, n);
                if (off != n)
                    ZONE_CORRUPT(HK_EK_CORRUPT_FREE, (unsigned char *)b + sizeof(zone_blk) + off,
                                 "free block %p (%zu bytes) was written after free at %p", (void *)b, size,
                                 (void *)((unsigned char *)b + sizeof(zone_blk) + off));
            }
        }
        prev_used = used;
        prev_size = size;
        b = zone_next(b);
    }
    if ((unsigned char *)b != r->end)
        ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, b, "blocks of region %u overrun its end %p", ri, (void *)r->end);
    if (!zone_hdr_ok(b) || b->size16 != 0 || !(b->bits & ZB_USED))
        ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, b, "end marker of region %u at %p damaged", ri, (void *)b);
    if (((b->bits & ZB_PREV_USED) != 0) != (prev_used != 0) || (!prev_used && b->prev_size != prev_size))
        ZONE_CORRUPT(HK_EK_CORRUPT_HEADER, b, "end marker of region %u disagrees with its last block", ri);
    return HK_OK;
}

static hk_result zone_check_free_lists(hk_zone *z, const zone_tally *t) {
    size_t seen = 0;
    if (z->fl_map >> ZONE_FL_COUNT)
        ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "first-level bitmap %#x has bits past level %u", z->fl_map,
                     ZONE_FL_COUNT);
    for (unsigned fl = 0; fl < ZONE_FL_COUNT; fl++) {
        if (((z->fl_map >> fl) & 1u) != (z->sl_map[fl] != 0))
            ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "first-level bit %u is %u but level %u has bitmap %#x",
                         fl, (z->fl_map >> fl) & 1u, fl, z->sl_map[fl]);
        for (unsigned sl = 0; sl < ZONE_SL_COUNT; sl++) {
            zone_blk *b = z->heads[fl][sl], *prev = NULL;
            if (((z->sl_map[fl] >> sl) & 1u) != (b != NULL))
                ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "bitmap bit (%u,%u) is %u but the list is %s", fl,
                             sl, (z->sl_map[fl] >> sl) & 1u, b ? "not empty" : "empty");
            for (; b; prev = b, b = b->next_free) {
                if (++seen > t->nfree)
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, b,
                                 "free lists hold more blocks than the %zu free blocks in the heap (cycle?)",
                                 t->nfree);
                if (!zone_ptr_sane(z, b))
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, b, "free list (%u,%u) points to %p, not a block",
                                 fl, sl, (void *)b);
                unsigned f, s;
                zone_mapping(zone_bsize(b), &f, &s);
                if (b->bits & ZB_USED)
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, b, "free list (%u,%u) holds used block %p", fl, sl,
                                 (void *)zone_user(b));
                if (f != fl || s != sl)
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, b,
                                 "free block %p of %zu bytes is in list (%u,%u), not (%u,%u)", (void *)b,
                                 zone_bsize(b), fl, sl, f, s);
                if (prev && b->prev_free != prev) /* a head's back link is not kept (see zone_remove) */
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, b, "free block %p: back link %p should be %p",
                                 (void *)b, (void *)b->prev_free, (void *)prev);
            }
        }
    }
    if (seen != t->nfree)
        ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "free lists hold %zu blocks, the heap has %zu free blocks",
                     seen, t->nfree);
    return HK_OK;
}

/* One class table's current, spare and partial runs (counted). */
static hk_result zone_check_cls_table(hk_zone *z, const zone_cls *tab, const zone_tally *t, size_t *pcur,
                                      size_t *ppartial, size_t *pspare) {
    size_t cur = *pcur, partial = *ppartial, spare = *pspare;
    for (unsigned c = 0; c < ZONE_NCLS; c++) {
        zone_run *r = tab[c].cur;
        if (r) {
            zone_blk *b = zone_run_block(r);
            if (!zone_ptr_sane(z, b) || !zone_is_run(b) || r->cls != c || r->state != ZONE_RUN_CUR)
                ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "class %u's current run %p is not a run of it", c,
                             (void *)r);
            cur++;
        }
        if ((r = tab[c].spare) != NULL) {
            zone_blk *b = zone_run_block(r);
            if (!zone_ptr_sane(z, b) || !zone_is_run(b) || r->cls != c || r->state != ZONE_RUN_SPARE)
                ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "class %u's spare run %p is not a spare run of it",
                             c, (void *)r);
            spare++;
        }
        zone_run *prev = NULL;
        for (r = tab[c].partial; r; prev = r, r = r->next) {
            zone_blk *b = zone_run_block(r);
            if (++partial > t->runs_partial || !zone_ptr_sane(z, b) || !zone_is_run(b) || r->cls != c ||
                r->state != ZONE_RUN_PARTIAL || r->prev != prev)
                ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z,
                             "class %u's partial list reaches %p, not a partial run "
                             "of it",
                             c, (void *)r);
        }
    }
    *pcur = cur;
    *ppartial = partial;
    *pspare = spare;
    return HK_OK;
}

/* The entries of node n, bound for heap `to` (zone_remote.c): each one
 * is a slot pointer of the first region (the freer checked it), and each
 * one whose header says remote is a slot of a run of that heap (the
 * others lost a race to their owner's free and are dropped by the
 * collection). Adds those to *remote. */
static hk_result zone_check_node(hk_zone *z, const zone_rnode *n, const zone_heap *to, size_t *remote) {
    if (n->n > ZONE_RNODE_SLOTS)
        ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, n, "remote-free batch %p holds %u entries", (const void *)n,
                     n->n);
    uintptr_t lo = (uintptr_t)z->thr_lo + ZONE_HDR;
    for (uint32_t i = 0; i < n->n; i++) {
        uintptr_t a = (uintptr_t)n->slot[i];
        if (a - lo > z->thr_span || (a & 15))
            ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, n,
                         "remote-free batch %p lists %p, outside the first region", (const void *)n,
                         n->slot[i]);
        const zone_blk *b = zone_from_user(n->slot[i]);
        uint64_t w = zone_hdr_load(b);
        if (zone_w_bits(w) != ZB_SLOT_REMOTE) continue;
        zone_run *r;
        uint32_t stride;
        if (!zone_slot_run_at(lo, b, (uint32_t)w, ZONE_RUN_XOFF, &r, &stride) || zone_run_ext(r)->heap != to)
            ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, n,
                         "remote-free batch %p for heap %p lists %p, not a slot of that heap",
                         (const void *)n, (const void *)to, n->slot[i]);
        (*remote)++;
    }
    return HK_OK;
}

/* A pool's outboxes and free nodes (counted in *nodes). */
static hk_result zone_check_pool(hk_zone *z, const zone_rsrc *rs, size_t made, size_t *nodes,
                                 size_t *remote) {
    for (unsigned i = 0; i < ZONE_OUT_WAYS; i++) {
        const zone_rnode *n = rs->out[i].node;
        if (!n) continue;
        (*nodes)++;
        if (n->home != rs)
            ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, n, "remote-free batch %p fills in a pool not its own",
                         (const void *)n);
        hk_result res = zone_check_node(z, n, rs->out[i].to, remote);
        if (res != HK_OK) return res;
    }
    for (const zone_rnode *n = rs->nodes; n && *nodes <= made; n = n->next) (*nodes)++;
    for (const zone_rnode *n = rs->back; n && *nodes <= made; n = n->next) (*nodes)++;
    return HK_OK;
}

/* The batches of remote frees: every pool's outboxes and free nodes, every
 * heap's inbox; every slot freed by another thread is in one of them, and
 * every node made is in one place. */
static hk_result zone_check_batches(hk_zone *z, const zone_tally *t) {
    size_t remote = 0, nodes = 0, made = z->rnodes_made;
    hk_result res = zone_check_pool(z, &z->rs, made, &nodes, &remote);
    for (const zone_heap *h = z->heaps; h && res == HK_OK; h = h->next) {
        res = zone_check_pool(z, &h->rs, made, &nodes, &remote);
        if (res == HK_OK && h->abandoned) {
            int held = h->inbox != NULL;
            for (unsigned c = 0; c < ZONE_NCLS; c++) held |= h->cache[c] != NULL || h->ncache[c] != 0;
            for (unsigned i = 0; i < ZONE_OUT_WAYS; i++) held |= h->rs.out[i].node && h->rs.out[i].node->n;
            if (held)
                ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, h,
                             "heap %p has no owner, yet holds cached slots or remote-free batches (its "
                             "abandonment empties them, its pushers collect them)",
                             (const void *)h);
        }
        for (const zone_rnode *n = h->inbox; n && nodes <= made && res == HK_OK; n = n->next) {
            nodes++;
            res = zone_check_node(z, n, h, &remote);
        }
    }
    if (res != HK_OK) return res;
    if (nodes != made)
        ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "%zu remote-free batches were made, %zu are found", made,
                     nodes);
    if (remote != t->remote_slots)
        ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z,
                     "%zu blocks freed by other threads wait for their owners, the batches list %zu",
                     t->remote_slots, remote);
    return HK_OK;
}

/* Every class table's runs (the zone's and every heap's). */
static hk_result zone_check_classes(hk_zone *z, const zone_tally *t) {
    size_t cur = 0, partial = 0, spare = 0;
    hk_result res = zone_check_cls_table(z, z->runs.cls, t, &cur, &partial, &spare);
    for (unsigned c = 0; c < ZONE_NCLS && res == HK_OK; c++) {
        const zone_cls *cl = &z->runs.cls[c];
        if (((cl->cur && cl->cur->used == 0) || cl->spare) && !((z->runs.trim_map[c >> 6] >> (c & 63u)) & 1u))
            ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z,
                         "class %u has an empty run to give back but is not marked for the trim", c);
    }
    for (const zone_heap *h = z->threads ? z->heaps : NULL; h && res == HK_OK; h = h->next)
        res = zone_check_cls_table(z, h->cls, t, &cur, &partial, &spare);
    if (res == HK_OK && z->threads) res = zone_check_batches(z, t);
    if (res != HK_OK) return res;
    if (cur != t->runs_cur || partial != t->runs_partial || spare != t->runs_spare)
        ZONE_CORRUPT(
            HK_EK_CORRUPT_STRUCTURE, z,
            "classes list %zu current, %zu partial and %zu spare runs, the heap has %zu, %zu and %zu", cur,
            partial, spare, t->runs_cur, t->runs_partial, t->runs_spare);
    return HK_OK;
}

static hk_result zone_check_tag_lists(hk_zone *z, const zone_tally *t) {
    size_t seen = 0;
    for (unsigned tag = 0; tag < ZONE_NTAGS; tag++) {
        int any = 0;
        for (unsigned w = 0; w < ZONE_TAG_WAYS; w++) any |= z->tag_head[tag][w] != NULL;
        if (((z->tag_map[tag >> 6] >> (tag & 63)) & 1u) != (unsigned)any)
            ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "tag bitmap bit %u disagrees with its lists", tag);
        if (!any) {
            if (z->tag_count[tag])
                ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "tag %u counts %u blocks but its lists are empty",
                             tag, z->tag_count[tag]);
            continue;
        }
        if (tag == 0) ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "tag 0 has a list");
        size_t cnt = 0, owned = 0;
        for (unsigned w = 0; w < ZONE_TAG_WAYS; w++) {
            zone_ext *h = z->tag_head[tag][w];
            if (!h) continue;
            zone_ext *e = h, *prev = NULL;
            uint32_t prev_seq = 0;
            do {
                /* the record must be where its block says (checked before following its links) */
                int ri = zone_region_index(z, e);
                zone_blk *b =
                    ri >= 0 && !((uintptr_t)e & 7) && !zone_is_poisoned(e, sizeof *e) ? e->blk : NULL;
                if (++seen > t->tracked || !b || !zone_ptr_sane(z, b) || !(b->bits & ZB_USED) ||
                    !(b->bits & ZB_EXT) || zone_ext_of(b) != e)
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, e,
                                 "list %u of tag %u reaches %p, not the record of a tracked used block", w,
                                 tag, (void *)e);
                if (b->tag != tag)
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, zone_user(b),
                                 "block %p with tag %u is in a list of tag %u", (void *)zone_user(b), b->tag,
                                 tag);
                if ((e->seq & (ZONE_TAG_WAYS - 1)) != w)
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, zone_user(b),
                                 "block %p (sequence %u) is in list %u of tag %u", (void *)zone_user(b),
                                 e->seq, w, tag);
                if (prev && e->prev != prev)
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, zone_user(b),
                                 "tag %u list: back link of %p is wrong", tag, (void *)zone_user(b));
                if (prev && (int32_t)(e->seq - prev_seq) < 0)
                    ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, zone_user(b),
                                 "tag %u list is out of allocation order at %p", tag, (void *)zone_user(b));
                prev = e;
                prev_seq = e->seq;
                cnt++;
                if (e->owner) owned++;
                e = e->next;
            } while (e != h);
            if (h->prev != prev)
                ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, zone_user(h->blk),
                             "tag %u list %u: head's back link is not the tail", tag, w);
        }
        if (owned != z->tag_owned[tag])
            ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z,
                         "tag %u list has %zu blocks with owners, its count says %u", tag, owned,
                         z->tag_owned[tag]);
        if (cnt != z->tag_count[tag])
            ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "tag %u list has %zu blocks, its count says %u", tag,
                         cnt, z->tag_count[tag]);
    }
    if (seen != t->tracked)
        ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "tag lists hold %zu blocks, the heap has %zu tracked blocks",
                     seen, t->tracked);
    return HK_OK;
}

/* The full check, lock held. */
static hk_result zone_check_all(hk_zone *z) {
    zone_tally t;
    memset(&t, 0, sizeof t);
    if (z->nregions > HK_ZONE_MAX_REGIONS)
        ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z, "control block damaged: %u regions", z->nregions);
    if (z->threads) {
        hk_result c = zone_check_caches(z);
        if (c != HK_OK) return c;
    }
    for (uint32_t i = 0; i < z->nregions; i++) {
        hk_result r = zone_check_region(z, i, &t);
        if (r != HK_OK) return r;
    }
    hk_result r = zone_check_free_lists(z, &t);
    if (r == HK_OK) r = zone_check_tag_lists(z, &t);
    if (r == HK_OK) r = zone_check_classes(z, &t);
    if (r != HK_OK) return r;
    zone_sums sm; /* a threads zone's counters are spread over its heaps */
    hk__zone_thr_sums(z, &sm, 0);
    size_t heap_run_bytes = 0;
    for (const zone_heap *h = z->threads ? z->heaps : NULL; h; h = h->next) heap_run_bytes += h->run_bytes;
    if (heap_run_bytes != t.heap_run_bytes)
        ZONE_CORRUPT(HK_EK_CORRUPT_STRUCTURE, z,
                     "the heaps count %zu bytes of runs; the runs that name a heap have %zu", heap_run_bytes,
                     t.heap_run_bytes);
    if (t.capacity != z->capacity || t.free_bytes != z->free_bytes || t.nfree != z->free_blocks ||
        t.used_bytes != z->used_bytes || t.used_req != sm.used_req ||
        t.live != (size_t)(sm.alloc_count - sm.free_count) || t.untracked != z->untracked_live ||
        t.run_bytes != z->runs.run_bytes || t.nruns != z->runs.nruns || t.slot_bytes != sm.slot_bytes ||
        t.used_bytes + t.free_bytes + t.run_bytes != t.capacity || t.clean_bytes != z->clean_bytes)
        ZONE_CORRUPT(
            HK_EK_CORRUPT_STRUCTURE, z,
            "counters disagree with the heap: capacity %zu/%zu, free %zu/%zu in %zu/%zu blocks, used "
            "%zu/%zu (%zu/%zu asked) in %zu/%zu blocks, runs %zu/%zu (%zu/%zu bytes, slots %zu/%zu bytes), "
            "given back to the OS %zu/%zu bytes",
            z->capacity, t.capacity, z->free_bytes, t.free_bytes, z->free_blocks, t.nfree, z->used_bytes,
            t.used_bytes, sm.used_req, t.used_req, (size_t)(sm.alloc_count - sm.free_count), t.live,
            z->runs.nruns, t.nruns, z->runs.run_bytes, t.run_bytes, sm.slot_bytes, t.slot_bytes,
            z->clean_bytes, t.clean_bytes);
    return HK_OK;
}

hk_result hk__zone_check_core(void *z) { return zone_check_all((hk_zone *)z); }

hk_result hk_zone_check(hk_zone *z) {
    if (!z) return HK_ERR_INVALID;
    hk__core_lock(&z->core);
    hk_result r = zone_check_all(z);
    hk__core_unlock(&z->core);
    return r;
}

/* ---- walk and where ---------------------------------------------------------- */

static void zone_info(const hk_zone *z, const zone_blk *b, hk_block_info *info) {
    memset(info, 0, sizeof *info);
    info->address = zone_user(b);
    if (zone_is_slot(b)) {
        size_t area = zone_area(b);
        info->size = area;
        info->overhead = ZONE_OVERLAP;
        if (b->bits & ZB_USED) {
            info->requested = zone_requested(b);
            info->overhead += area - info->requested;
            info->flags = HK_BLOCK_USED;
            info->tag = b->tag;
        }
        return;
    }
    size_t size = zone_bsize(b);
    if (b->bits & ZB_USED) {
        size_t req = zone_requested(b);
        info->requested = req;
        info->size = (ZONE_FLAGS(z) & HK_FLAG_CANARY) ? req : zone_area(b);
        info->overhead = size - req;
        info->flags = HK_BLOCK_USED;
        info->tag = b->tag;
        if (b->tag >= z->purge_level) info->flags |= HK_BLOCK_PURGEABLE;
        if (b->bits & ZB_EXT) {
            const zone_ext *e = zone_ext_of(b);
            info->owner = (void *)e->owner;
            info->name = e->name;
            info->site_file = e->file;
            info->site_line = e->line;
        }
    } else {
        info->size = size - ZONE_HDR;
        info->overhead = ZONE_HDR;
    }
}

/* What a visited span is: a block (TLSF block, slot, or the uncarved part
 * of a run, shown as one free block), or a run's own header. */
enum { ZONE_SPAN_BLOCK, ZONE_SPAN_RUN };

/* Visits the spans of region ri in address order; stops at damage
 * (reported) or when fn returns non-zero. Returns fn's value, -1 on damage,
 * 0 at the end. A span is [start, start + len). */
typedef int (*zone_visit_fn)(const hk_zone *z, int kind, const unsigned char *start, size_t len,
                             const hk_block_info *info, void *user);

static int zone_visit_run(hk_zone *z, zone_blk *b, zone_visit_fn fn, void *user) {
    size_t size = zone_bsize(b);
    zone_run *r = zone_run_of_block(z, b);
    hk_block_info info;
    if (!zone_run_sane(z, r, b, size)) {
        hk__report(ZONE_REP(z), HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, r, 0, NULL,
                   "walk stopped at small-block run %p: damaged", (void *)r);
        return -1;
    }
    memset(&info, 0, sizeof info);
    info.address = r;
    info.overhead = (size_t)(r->first - (unsigned char *)b) + ZONE_OVERLAP;
    info.tag = HK_TAG_STATIC;
    info.name = "(small-block run)";
    int v = fn(z, ZONE_SPAN_RUN, (unsigned char *)b, info.overhead, &info, user);
    if (v) return v;
    for (uint32_t i = 0; i < r->bump; i++) {
        zone_blk *s = (zone_blk *)(r->first + (size_t)i * r->stride);
        if (!zone_hdr_ok(s) || !zone_is_slot(s) || zone_slot_idx(s) != i) {
            hk__report(ZONE_REP(z), HK_ERR_CORRUPT, HK_EK_CORRUPT_HEADER, s, 0, NULL,
                       "walk stopped at block %p: damaged header", (void *)zone_user(s));
            return -1;
        }
        zone_info(z, s, &info);
        v = fn(z, ZONE_SPAN_BLOCK, (unsigned char *)s + ZONE_OVERLAP, r->stride, &info, user);
        if (v) return v;
    }
    unsigned char *tail = r->first + (size_t)r->bump * r->stride + ZONE_OVERLAP,
                  *end = (unsigned char *)b + size;
    if (end > tail + ZONE_OVERLAP) {
        memset(&info, 0, sizeof info);
        info.address = tail + ZONE_OVERLAP;
        info.size = (size_t)(end - tail) - ZONE_OVERLAP;
        info.overhead = ZONE_OVERLAP;
        v = fn(z, ZONE_SPAN_BLOCK, tail, (size_t)(end - tail), &info, user);
    }
    return v;
}

static int zone_visit_region(hk_zone *z, uint32_t ri, zone_visit_fn fn, void *user) {
    const zone_region *r = &z->regions[ri];
    zone_blk *b = (zone_blk *)r->base;
    while ((unsigned char *)b < r->end) {
        if (!zone_hdr_ok(b) || zone_is_slot(b) || zone_bsize(b) < ZONE_MIN_BLOCK ||
            zone_bsize(b) > (size_t)(r->end - (unsigned char *)b)) {
            hk__report(ZONE_REP(z), HK_ERR_CORRUPT, HK_EK_CORRUPT_HEADER, b, 0, NULL,
                       "walk stopped at block %p: damaged header", (void *)zone_user(b));
            return -1;
        }
        int v;
        if (zone_is_run(b)) {
            v = zone_visit_run(z, b, fn, user);
        } else {
            hk_block_info info;
            zone_info(z, b, &info);
            v = fn(z, ZONE_SPAN_BLOCK, (unsigned char *)b, zone_bsize(b), &info, user);
        }
        if (v) return v;
        b = zone_next(b);
    }
    return 0;
}

typedef struct zone_walk_ctx {
    hk_walk_fn fn;
    void *user;
} zone_walk_ctx;

static int zone_walk_visit(const hk_zone *z, int kind, const unsigned char *start, size_t len,
                           const hk_block_info *info, void *user) {
    (void)z;
    (void)start;
    (void)len;
    if (kind != ZONE_SPAN_BLOCK) return 0;
    zone_walk_ctx *c = (zone_walk_ctx *)user;
    return c->fn(info, c->user);
}

int hk_zone_walk(hk_zone *z, hk_walk_fn fn, void *user) {
    if (!z || !fn) return -1;
    hk__core_lock(&z->core);
    zone_walk_ctx c = {fn, user};
    int v = 0;
    for (uint32_t i = 0; i < z->nregions && !v; i++) v = zone_visit_region(z, i, zone_walk_visit, &c);
    hk__core_unlock(&z->core);
    return v;
}

typedef struct zone_where_ctx {
    const unsigned char *addr;
    hk_block_info *info;
} zone_where_ctx;

static int zone_where_visit(const hk_zone *z, int kind, const unsigned char *start, size_t len,
                            const hk_block_info *info, void *user) {
    (void)z;
    (void)kind;
    zone_where_ctx *c = (zone_where_ctx *)user;
    if (c->addr >= start && c->addr < start + len) {
        *c->info = *info;
        return 1;
    }
    return 0;
}

hk_result hk_zone_where(hk_zone *z, const void *addr, hk_block_info *info) {
    if (!z || !info) return HK_ERR_INVALID;
    hk__core_lock(&z->core);
    int ri = zone_region_index(z, addr);
    int v = 0;
    if (ri >= 0) {
        zone_where_ctx c = {(const unsigned char *)addr, info};
        v = zone_visit_region(z, (uint32_t)ri, zone_where_visit, &c);
    }
    hk__core_unlock(&z->core);
    return v == 1 ? HK_OK : HK_ERR_FOREIGN;
}

/* ---- dump (Z_DumpHeap) ---------------------------------------------------------- */

/* One formatted piece of the dump to fn (a line is at most 511 bytes:
 * longer ones are cut; no allocation). */
static void zone_out(hk_print_fn fn, void *user, const char *fmt, ...) HK__PRINTF(3, 4);
static void zone_out(hk_print_fn fn, void *user, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fn(line, user);
}

typedef struct zone_dump_ctx {
    hk_print_fn fn;
    void *user;
    size_t count[ZONE_NTAGS], bytes[ZONE_NTAGS];
    size_t free_count, free_bytes;
} zone_dump_ctx;

static int zone_dump_visit(const hk_zone *z, int kind, const unsigned char *start, size_t len,
                           const hk_block_info *i, void *user) {
    (void)z;
    zone_dump_ctx *c = (zone_dump_ctx *)user;
    if (kind == ZONE_SPAN_RUN) {
        const zone_run *r = (const zone_run *)i->address;
        zone_out(c->fn, c->user, "  %p %12zu  run of %u-byte blocks: %u of %u used, %u carved\n",
                 (const void *)start, zone_bsize((const zone_blk *)start), r->stride - ZONE_OVERLAP, r->used,
                 r->nslots, r->bump);
        return 0;
    }
    if (!(i->flags & HK_BLOCK_USED)) {
        c->free_count++;
        c->free_bytes += len;
        zone_out(c->fn, c->user, "  %p %12zu  free\n", i->address, len);
        return 0;
    }
    c->count[i->tag]++;
    c->bytes[i->tag] += i->requested;
    char site[300] = "";
    if (i->site_file) snprintf(site, sizeof site, "  at %s:%d", i->site_file, i->site_line);
    zone_out(c->fn, c->user, "  %p %12zu  tag %3d%s  owner %-14p  %s%s\n", i->address, i->requested, i->tag,
             (i->flags & HK_BLOCK_PURGEABLE) ? " (purgeable)" : "", i->owner, i->name ? i->name : "-", site);
    return 0;
}

void hk_zone_dump(hk_zone *z, hk_print_fn fn, void *user) {
    if (!z) return;
    if (!fn) fn = hk_print_file;
    hk__core_lock(&z->core);
    zone_dump_ctx c; /* on the stack: dumping must not allocate */
    memset(&c, 0, sizeof c);
    c.fn = fn;
    c.user = user;
    zone_sums sm;
    hk__zone_thr_sums(z, &sm, 1);
    zone_out(fn, user,
             "zone '%s': capacity %zu in %u regions, used %zu (%zu with headers) in %zu blocks, free %zu in "
             "%zu blocks, peak %zu, purge level %d, %llu purged, %llu grown\n",
             ZONE_REP(z)->instance, z->capacity, z->nregions, sm.used_req, z->used_bytes,
             (size_t)(sm.alloc_count - sm.free_count), z->free_bytes, z->free_blocks, z->peak_used,
             z->purge_level, (unsigned long long)z->purge_count, (unsigned long long)z->grow_count);
    zone_out(fn, user, "  %-14s %12s  %s\n", "address", "bytes", "tag, owner, name, site");
    int v = 0;
    for (uint32_t i = 0; i < z->nregions && !v; i++) {
        zone_out(fn, user, " region %u: %p .. %p\n", i, (void *)z->regions[i].base,
                 (void *)z->regions[i].end);
        v = zone_visit_region(z, i, zone_dump_visit, &c);
    }
    if (v < 0) zone_out(fn, user, "  (dump stopped: the zone is damaged, see the report)\n");
    zone_out(fn, user, "totals per tag:\n");
    for (unsigned t = 1; t < ZONE_NTAGS; t++)
        if (c.count[t])
            zone_out(fn, user, "  tag %3u%s %8zu blocks %14zu bytes\n", t,
                     (int)t >= z->purge_level ? " (purgeable)" : "", c.count[t], c.bytes[t]);
    zone_out(fn, user, "  free    %8zu blocks %14zu bytes\n", c.free_count, c.free_bytes);
    hk__core_unlock(&z->core);
}

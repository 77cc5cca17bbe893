/*
 * src/cache_region.c - the cache's data region (heapkit/cache.h; layout in
 * src/cache_internal.h): finding, carving and releasing blocks, purging one.
 *
 * Invariants (verified by hk__cache_check):
 *  - blocks tile [lo, end) exactly; size16 >= 2; prev16 of a block (and of
 *    the sentinel) is the size16 of the block before it, 0 for the first.
 *  - no two free blocks are adjacent; every free block is in the list of its
 *    bin (cache_bin_of its size16, which its handle field holds) and
 *    nothing else is; bit s of sl_map[f]
 *    is set iff bins[f * CACHE_SL + s] != NULL, and bit f of fl_map iff
 *    sl_map[f] != 0.
 *  - a used block's handle names a slot whose handle equals it and whose
 *    data is the block's user address (header + 16); requested + 16 + 8 <=
 *    block bytes; the bytes from requested to the block's end are
 *    HK_FILL_PAD (the canary).
 *  - a live slot with data != NULL has exactly one block.
 *  - counters (free_bytes, free_blocks, used_bytes, requested_bytes,
 *    resident) equal the sums over blocks and slots.
 *  - `hint` is a block boundary in [lo, end]; every free block below it is
 *    followed by a locked block (so incremental compaction resumes at hint).
 *
 * Sanitizers: under AddressSanitizer the canary bytes of used blocks and the
 * bodies of free blocks (past their links) are poisoned; headers and user
 * bytes are not. Operations that move many blocks unpoison the region first
 * and poison it again from a walk afterwards (hk__cache_san_open/close).
 */
#include "cache_internal.h"

/* Sets up a region holding one free block and the sentinel. */
void hk__cache_region_init(hk_cache *c, unsigned char *lo, unsigned char *hi) {
    c->lo = lo;
    c->end = (cache_blk *)(hi - CACHE_HDR);
    cache_unpoison(c->end, CACHE_HDR);
    c->end->magic = CACHE_MAGIC_END;
    c->end->handle = 0;
    c->end->size16 = 1;
    c->end->prev16 = 0;
    c->hint = (cache_blk *)lo;
    if (hi - lo > CACHE_HDR) {
        cache_blk *f = (cache_blk *)lo;
        cache_unpoison(f, CACHE_HDR);
        f->size16 = (uint32_t)((size_t)(hi - CACHE_HDR - lo) / 16u);
        f->prev16 = 0;
        c->end->prev16 = f->size16;
        cache_add_free(c, f);
    }
    if (HK__TRACKED(&c->core)) hk__track_heap(&c->core, lo, (size_t)(hi - lo), 1); /* written: now its own */
}

/* A free block of at least need16 units, or NULL, in O(1): the head of the
 * request's own bin when it is large enough (the closest fit at hand: every
 * block of that bin is within 1/CACHE_SL of the request); else the head of
 * the first non-empty bin from the request rounded up to the next bin
 * boundary (every block there holds it; two bitmap searches); else, with
 * nothing larger free anywhere, the next blocks of the request's bin, at
 * most CACHE_SCAN_LIMIT in all. NULL sends the caller to compaction and the
 * purge (cache_alloc.c), which are O(n) by design. */
cache_blk *hk__cache_fit(hk_cache *c, uint32_t need16) {
    unsigned j, i = cache_bin_split(need16, &j); /* its bin, and the bin it rounds up to */
    if (i >= c->nbins) return NULL;              /* larger than the region can hold */
    cache_blk *b = c->bins[i];
    if (b && b->size16 >= need16) return b;
    cache_blk *r = j < c->nbins ? cache_bin_search(c, j) : NULL;
    if (r) return r;
    for (int k = 1; b && k < CACHE_SCAN_LIMIT; k++)
        if ((b = cache_links_of(b)->next) != NULL && b->size16 >= need16) return b;
    return NULL;
}

/* Takes need16 units from the free block f, at its bottom (high == 0) or its
 * top. Returns the block (header size16/prev16 set, magic and handle to be
 * written by the caller). */
cache_blk *hk__cache_carve(hk_cache *c, cache_blk *f, uint32_t need16, int high) {
    cache_bin_remove(c, f);
    uint32_t rem = f->size16 - need16;
    cache_blk *u = f;
    if ((size_t)rem * 16u >= CACHE_MIN_FREE) {
        if (!high) {
            cache_blk *r = (cache_blk *)((unsigned char *)f + (size_t)need16 * 16u);
            cache_unpoison(r, CACHE_HDR);
            r->size16 = rem;
            r->prev16 = need16;
            cache_next(r)->prev16 = rem;
            f->size16 = need16;
            cache_bin_insert(c, r);
        } else {
            u = (cache_blk *)((unsigned char *)f + (size_t)rem * 16u);
            cache_unpoison(u, CACHE_HDR);
            u->size16 = need16;
            u->prev16 = rem;
            cache_next(u)->prev16 = need16;
            f->size16 = rem;
            cache_bin_insert(c, f);
            /* f is now followed by an unlocked block: compaction must see it */
            if ((unsigned char *)f < (unsigned char *)c->hint) c->hint = f;
        }
    }
    cache_unpoison(u, cache_bytes(u));
    return u;
}

/* Turns the block b (used, or a piece being given back) into free space,
 * coalescing with its neighbours. Counters of used bytes are the caller's. */
void hk__cache_release(hk_cache *c, cache_blk *b) {
    cache_unpoison(b, cache_bytes(b));
    cache_blk *n = cache_next(b);
    if (n->magic == CACHE_MAGIC_FREE) {
        cache_bin_remove(c, n);
        if (c->hint == n) c->hint = b;
        b->size16 += n->size16;
    }
    cache_blk *p = cache_prev(c, b);
    if (p && p->magic == CACHE_MAGIC_FREE) {
        cache_bin_remove(c, p);
        if (c->hint == b) c->hint = p;
        cache_unpoison(p, cache_bytes(p));
        p->size16 += b->size16;
        b = p;
    }
    cache_next(b)->prev16 = b->size16;
    if ((unsigned char *)b < (unsigned char *)c->hint) c->hint = b;
    cache_add_free(c, b);
}

void hk__cache_drop_block(hk_cache *c, cache_slot *s) {
    cache_blk *b = cache_blk_of(cache_data(c, s));
    c->used_bytes -= cache_bytes(b);
    c->requested_bytes -= s->requested;
    c->resident--;
    c->free_count++;
    cache_set_data(c, s, NULL);
    cache_lru_sync(c, s, 0); /* off the purge list */
    s->requested = 0;
    hk__cache_release(c, b);
}

void hk__cache_purge_slot(hk_cache *c, cache_slot *s) {
    if (c->on_purge)
        c->on_purge(c, (hk_cache_handle){cache_handle(c, s)}, cache_data(c, s), s->requested, c->purge_user);
    c->purge_count++;
    hk__cache_drop_block(c, s);
}

int hk__cache_canary_ok(hk_cache *c, cache_slot *s, int report) {
    cache_blk *b = cache_blk_of(cache_data(c, s));
    unsigned char *pad = cache_user(b) + s->requested;
    size_t n = cache_bytes(b) - CACHE_HDR - s->requested;
    cache_unpoison(pad, n);
    size_t at = hk__fill_find(pad, n, HK_FILL_PAD);
    cache_poison(pad, n);
    if (at == n) return 1;
    if (report)
        hk__report(&c->core.rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_CANARY, cache_data(c, s), s->requested,
                   s->name,
                   "block '%s' at %p (handle 0x%08x, %zu bytes): canary damaged %zu bytes past the end",
                   cache_nm(s->name), cache_data(c, s), cache_handle(c, s), s->requested, at);
    return 0;
}

/* ---- sanitizer: whole-region open/close -------------------------------------------- */

void hk__cache_san_open(hk_cache *c) {
#ifdef HK__ASAN
    if (c->lo) cache_unpoison(c->lo, cache_claim_size(c));
#else
    (void)c;
#endif
}

void hk__cache_san_close(hk_cache *c) {
#ifdef HK__ASAN
    if (!c->lo) return;
    for (cache_blk *b = (cache_blk *)c->lo; b < c->end; b = cache_next(b)) {
        if (b->magic == CACHE_MAGIC_FREE)
            cache_poison((unsigned char *)b + CACHE_MIN_FREE, cache_bytes(b) - CACHE_MIN_FREE);
        else if (b->magic == CACHE_MAGIC_USED) {
            cache_slot *s = cache_slot_of_blk(c, b);
            cache_poison(cache_user(b) + s->requested, cache_bytes(b) - CACHE_HDR - s->requested);
        }
        if (b->size16 == 0) break;
    }
#else
    (void)c;
#endif
}

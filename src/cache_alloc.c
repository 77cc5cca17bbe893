/*
 * src/cache_alloc.c - placing blocks (heapkit/cache.h): making room when
 * space is short, and the calls that give a handle a block: alloc, resize,
 * reallocate.
 *
 * Making room follows the Mac's order: fit a free block; (take more of the
 * hunk's middle); compact when the free total suffices; purge purgeable
 * unlocked blocks, least recently used first, compacting as soon as the free
 * total suffices; call the grow callback (lock released) and start again
 * while it reports progress, at most CACHE_GROW_ROUNDS rounds; else fail.
 *
 * Invariants kept: those of src/cache_region.c and src/cache_handles.c. A
 * slot being given a block carries CACHE_SLOT_BUSY while room is made, so
 * the purge never takes the block it is resizing; a failed call leaves the
 * handle as documented (alloc: no handle; resize: block unchanged;
 * reallocate: handle empty).
 *
 * Calls only the layers below it: cache_hunk.c, cache_compact.c,
 * cache_region.c, cache_handles.c.
 */
#include "cache_internal.h"

/* ---- making room ------------------------------------------------------------------- */

/* A free block of at least need16 units: fit, (take more of the hunk),
 * compact, purge LRU, grow callback. NULL when none can be had. */
static cache_blk *cache_make_room(hk_cache *c, uint32_t need16) {
    size_t need = (size_t)need16 * 16u;
    for (int round = 0; round < CACHE_GROW_ROUNDS; round++) {
        cache_blk *f = c->lo ? hk__cache_fit(c, need16) : NULL;
        if (f) return f;
        if (c->hunk && hk__cache_hunk_expand(c) && (f = hk__cache_fit(c, need16)) != NULL) return f;
        if (!c->lo) goto grow;
        if (c->free_bytes >= need) {
            (void)hk__cache_slide_down(c, 0, 0, 0, NULL);
            if ((f = hk__cache_fit(c, need16)) != NULL) return f;
        }
        for (cache_slot *s; (s = cache_lru_oldest(c)) != NULL;) { /* least recently used first */
            hk__cache_purge_slot(c, s);
            if (c->free_bytes < need) continue;
            if ((f = hk__cache_fit(c, need16)) != NULL) return f;
            (void)hk__cache_slide_down(c, 0, 0, 0, NULL);
            if ((f = hk__cache_fit(c, need16)) != NULL) return f;
        }
    grow:
        if (!c->grow || c->in_grow) return NULL;
        c->in_grow = 1;
        hk__core_unlock(&c->core);
        size_t r = c->grow(c, need, c->grow_user);
        hk__core_lock(&c->core);
        c->in_grow = 0;
        if (!r) return NULL;
    }
    return NULL;
}

/* Gives slot s a block of `size` bytes (need16 units) from room f. */
static void cache_place(hk_cache *c, cache_slot *s, cache_blk *f, uint32_t need16, size_t size) {
    cache_blk *b = hk__cache_carve(c, f, need16, cache_place_high(c));
    b->magic = CACHE_MAGIC_USED;
    b->handle = cache_handle(c, s);
    unsigned char *u = cache_user(b);
    if (c->core.flags & HK_FLAG_ZERO)
        memset(u, 0, size);
    else if (c->core.flags & HK_FLAG_FILL)
        memset(u, HK_FILL_ALLOC, size);
    cache_fill_pad(b, size);
    cache_set_data(c, s, u);
    s->requested = size;
    if (HK__TRACKED(&c->core)) hk__track_alloc(&c->core, u, size, (c->core.flags & HK_FLAG_ZERO) != 0);
    cache_stamp(c, s);
    cache_lru_sync(c, s, 0); /* a purgeable unlocked handle: on the purge list, just stamped */
    c->used_bytes += cache_bytes(b);
    c->requested_bytes += size;
    if (c->requested_bytes > c->peak_requested) c->peak_requested = c->requested_bytes;
    c->resident++;
    c->alloc_count++;
}

static void cache_fail_nomem(hk_cache *c, size_t size, const char *name, const char *why) {
    c->fail_count++;
    hk__report(
        &c->core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, size, name,
        "allocation of %zu bytes for '%s' failed: %s (region %zu, free %zu in %zu blocks, %u handles live)",
        size, cache_nm(name), why, cache_claim_size(c), c->free_bytes, c->free_blocks, hk__ht_nlive(&c->ht));
}

static void cache_fail_overflow(hk_cache *c, size_t size, const char *name) {
    c->fail_count++;
    hk__report(&c->core.rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, NULL, size, name,
               "allocation of %zu bytes for '%s' overflows with the block overhead", size, cache_nm(name));
}

/* ---- alloc ---------------------------------------------------------------------- */

hk_cache_handle hk_cache_alloc(hk_cache *c, size_t size, const char *name) {
    hk_cache_handle h = {0};
    if (!c) return h;
    hk__core_lock(&c->core);
    uint32_t need16 = cache_need16(size);
    if (!need16) {
        cache_fail_overflow(c, size, name);
        goto out;
    }
    cache_slot *s = hk__cache_slot_new(c);
    if (!s) {
        cache_fail_nomem(c, size, name, "the handle table is full");
        goto out;
    }
    s->name = name;
    s->flags |= CACHE_SLOT_BUSY;
    if (c->core.flags & HK_CACHE_SCRAMBLE) hk__cache_scramble(c);
    cache_blk *f = cache_make_room(c, need16);
    s->flags &= (uint16_t)~CACHE_SLOT_BUSY;
    if (!f) {
        hk__cache_slot_release(c, s);
        cache_fail_nomem(c, size, name, "no room even after compacting and purging");
        goto out;
    }
    cache_place(c, s, f, need16, size);
    h.value = cache_handle(c, s);
out:
    hk__core_after(&c->core);
    hk__core_unlock(&c->core);
    return h;
}

/* ---- resize / reallocate ------------------------------------------------------------ */

/* Shrinks block b of slot s to need16 units, giving the tail back. */
static void cache_shrink_in_place(hk_cache *c, cache_blk *b, uint32_t need16) {
    uint32_t rem = b->size16 - need16;
    if ((size_t)rem * 16u < CACHE_MIN_FREE) return;
    cache_blk *t = (cache_blk *)((unsigned char *)b + (size_t)need16 * 16u);
    cache_unpoison(t, CACHE_HDR);
    t->magic = CACHE_MAGIC_USED;
    t->size16 = rem;
    t->prev16 = need16;
    b->size16 = need16;
    c->used_bytes -= (size_t)rem * 16u;
    hk__cache_release(c, t);
}

/* Grows block b in place into a free next block if it is big enough. */
static int cache_grow_in_place(hk_cache *c, cache_blk *b, uint32_t need16) {
    cache_blk *n = cache_next(b);
    if (n->magic != CACHE_MAGIC_FREE || (uint64_t)b->size16 + n->size16 < need16) return 0;
    uint32_t old16 = b->size16;
    cache_bin_remove(c, n);
    cache_unpoison(n, cache_bytes(n));
    b->size16 += n->size16;
    cache_next(b)->prev16 = b->size16;
    if (c->hint == n) c->hint = b;
    c->used_bytes += cache_bytes(b) - (size_t)old16 * 16u;
    cache_shrink_in_place(c, b, need16);
    return 1;
}

static void cache_set_requested(hk_cache *c, cache_slot *s, size_t size) {
    cache_blk *b = cache_blk_of(cache_data(c, s));
    if (size > s->requested) {
        unsigned char *u = cache_user(b);
        cache_unpoison(u + s->requested, size - s->requested);
        if (c->core.flags & HK_FLAG_ZERO)
            memset(u + s->requested, 0, size - s->requested);
        else if (c->core.flags & HK_FLAG_FILL)
            memset(u + s->requested, HK_FILL_ALLOC, size - s->requested);
    }
    c->requested_bytes = c->requested_bytes - s->requested + size;
    if (c->requested_bytes > c->peak_requested) c->peak_requested = c->requested_bytes;
    s->requested = size;
    cache_fill_pad(b, size);
}

hk_result hk_cache_resize(hk_cache *c, hk_cache_handle h, size_t size) {
    if (!c) return HK_ERR_INVALID;
    hk__core_lock(&c->core);
    hk_result r = HK_OK;
    cache_slot *s = cache_lookup(c, h, "resize", &r);
    size_t old_req = s ? s->requested : 0;
    if (!s) goto out;
    if (!cache_data(c, s)) {
        r = hk__report(&c->core.rep, HK_ERR_STATE, HK_EK_STATE, NULL, size, s->name,
                       "resize of empty (purged) handle 0x%08x '%s': use reallocate", cache_handle(c, s),
                       cache_nm(s->name));
        goto out;
    }
    uint32_t need16 = cache_need16(size);
    if (!need16) {
        c->fail_count++;
        r = hk__report(&c->core.rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, cache_data(c, s), size, s->name,
                       "resize of '%s' to %zu bytes overflows with the block overhead", cache_nm(s->name),
                       size);
        goto out;
    }
    cache_blk *b = cache_blk_of(cache_data(c, s));
    if (need16 <= b->size16) {
        if (size < s->requested) cache_unpoison(cache_data(c, s), s->requested);
        cache_set_requested(c, s, size);
        cache_shrink_in_place(c, b, need16);
        cache_fill_pad(b, size);
        goto out;
    }
    if (cache_grow_in_place(c, b, need16)) {
        cache_set_requested(c, s, size);
        goto out;
    }
    if (s->lock) {
        r = hk__report(
            &c->core.rep, HK_ERR_LOCKED, HK_EK_LOCKED, cache_data(c, s), size, s->name,
            "resize of locked block '%s' at %p (handle 0x%08x) from %zu to %zu bytes: it cannot grow in "
            "place and a locked block does not move",
            cache_nm(s->name), cache_data(c, s), cache_handle(c, s), s->requested, size);
        goto out;
    }
    s->flags |= CACHE_SLOT_BUSY;
    if (c->core.flags & HK_CACHE_SCRAMBLE) hk__cache_scramble(c);
    b = cache_blk_of(cache_data(c, s));
    if (cache_grow_in_place(c, b, need16)) {
        s->flags &= (uint16_t)~CACHE_SLOT_BUSY;
        cache_set_requested(c, s, size);
        goto out;
    }
    cache_blk *f = cache_make_room(c, need16);
    s->flags &= (uint16_t)~CACHE_SLOT_BUSY;
    if (!f) {
        c->fail_count++;
        r = hk__report(
            &c->core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, cache_data(c, s), size, s->name,
            "resize of '%s' from %zu to %zu bytes failed: no room even after compacting and purging "
            "(the block is unchanged)",
            cache_nm(s->name), s->requested, size);
        goto out;
    }
    b = cache_blk_of(cache_data(c, s)); /* compaction may have moved it */
    {
        size_t keep = s->requested;
        cache_blk *nb = hk__cache_carve(c, f, need16, cache_place_high(c));
        nb->magic = CACHE_MAGIC_USED;
        nb->handle = cache_handle(c, s);
        memcpy(cache_user(nb), cache_user(b), keep);
        c->used_bytes += cache_bytes(nb);
        c->used_bytes -= cache_bytes(b);
        hk__cache_release(c, b);
        cache_set_data(c, s, cache_user(nb));
        if (c->core.flags & HK_FLAG_ZERO)
            memset(cache_user(nb) + keep, 0, size - keep);
        else if (c->core.flags & HK_FLAG_FILL)
            memset(cache_user(nb) + keep, HK_FILL_ALLOC, size - keep);
        c->requested_bytes = c->requested_bytes - keep + size;
        if (c->requested_bytes > c->peak_requested) c->peak_requested = c->requested_bytes;
        s->requested = size;
        cache_fill_pad(nb, size);
    }
out:
    if (HK__TRACKED(&c->core) && s && r == HK_OK && cache_data(c, s))
        hk__track_realloc(&c->core, cache_data(c, s), old_req, cache_data(c, s), s->requested);
    hk__core_after(&c->core);
    hk__core_unlock(&c->core);
    return r;
}

hk_result hk_cache_reallocate(hk_cache *c, hk_cache_handle h, size_t size) {
    if (!c) return HK_ERR_INVALID;
    hk__core_lock(&c->core);
    hk_result r = HK_OK;
    cache_slot *s = cache_lookup(c, h, "reallocate", &r);
    if (!s) goto out;
    uint32_t need16 = cache_need16(size);
    if (!need16) {
        c->fail_count++;
        r = hk__report(&c->core.rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, cache_data(c, s), size, s->name,
                       "reallocate of '%s' to %zu bytes overflows with the block overhead", cache_nm(s->name),
                       size);
        goto out;
    }
    if (cache_data(c, s) && s->lock) {
        r = hk__report(&c->core.rep, HK_ERR_LOCKED, HK_EK_LOCKED, cache_data(c, s), size, s->name,
                       "reallocate of locked block '%s' at %p (handle 0x%08x) refused", cache_nm(s->name),
                       cache_data(c, s), cache_handle(c, s));
        goto out;
    }
    if (cache_data(c, s)) hk__cache_drop_block(c, s);
    s->flags |= CACHE_SLOT_BUSY;
    if (c->core.flags & HK_CACHE_SCRAMBLE) hk__cache_scramble(c);
    cache_blk *f = cache_make_room(c, need16);
    s->flags &= (uint16_t)~CACHE_SLOT_BUSY;
    if (!f) {
        cache_fail_nomem(c, size, s->name,
                         "no room even after compacting and purging (the handle stays empty)");
        r = HK_ERR_NOMEM;
        goto out;
    }
    cache_place(c, s, f, need16, size);
out:
    hk__core_after(&c->core);
    hk__core_unlock(&c->core);
    return r;
}

/*
 * src/cache_compact.c - moving blocks (heapkit/cache.h): compaction, its
 * incremental slices, HeapQC's scramble, move_high, and max_block.
 *
 * Invariants kept: blocks still tile the region, free blocks are coalesced
 * and indexed, every moved block's slot points at its new user address, and
 * every free block below the hint is followed by a locked block (see
 * src/cache_region.c). A block moves only by memmove of the whole block
 * (header, bytes, canary), or of a run of adjacent blocks, with its slot's
 * data pointer updated; locked blocks never move.
 *
 * Calls only the layers below it: cache_region.c and cache_handles.c.
 */
#include "cache_internal.h"

/* Bytes of a compaction slice's budget that passing a block without moving
 * it costs (about what reading its header and slot costs against memmove). */
enum { CACHE_STEP_PASS = 64 };

/* Slides unlocked blocks down from the hint (or the bottom), around locked
 * blocks, until the budget is spent. Returns 1 when work remains.
 *
 * Adjacent movable blocks form a run that moves with ONE memmove: the scan
 * reads each block's header (size, handle, lock), points its slot at the
 * block's address-to-be and, for the first block of a run, writes the new
 * prev16 into the header before it moves (the prev16 links inside a run stay
 * right as they are); a free block, a locked block, the end or the budget
 * flushes the run. The moved bytes are touched once, by memmove: no canary
 * checks, and no fills of the vacated space unless HK_FLAG_FILL or scramble
 * asks for them (cache_add_free).
 *
 * The budget: max_bytes counts the bytes moved plus CACHE_STEP_PASS bytes
 * for every block passed without moving it (free, locked, already in
 * place), so that a slice over locked blocks and holes, where nothing can
 * move, also ends within its budget. A slice ends only before a block it
 * would move (after at least one moved) or before a used block that stays
 * (after at least one such block passed), never at a free block (free blocks stay
 * coalesced), and each slice gets past at least one block, so slices make
 * progress. */
int hk__cache_slide_down(hk_cache *c, int from_bottom, size_t max_bytes, uint64_t max_ns, size_t *moved_out) {
    if (!c->lo) return 0;
    hk__cache_san_open(c);
    unsigned char *end = (unsigned char *)c->end;
    cache_blk *cur = from_bottom ? (cache_blk *)c->lo : c->hint;
    /* blocks passed without moving them, each worth CACHE_STEP_PASS bytes of
     * the budget: a slice over locked blocks and holes stays in budget */
    size_t passed = 0;
    while ((unsigned char *)cur < end && cur->magic != CACHE_MAGIC_FREE) {
        if (max_bytes && passed && passed * CACHE_STEP_PASS >= max_bytes) {
            c->hint = cur; /* no free block was passed: the hint's rule holds */
            hk__cache_san_close(c);
            return 1;
        }
        passed++;
        cur = cache_next(cur);
    }
    if ((unsigned char *)cur >= end) {
        c->hint = c->end;
        hk__cache_san_close(c);
        return 0;
    }
    unsigned char *dst = (unsigned char *)cur;
    unsigned char *run = NULL; /* source of the pending run, whose bytes go to dst */
    size_t run_len = 0;
    uint32_t prevsize = cur->prev16;
    size_t moved = 0;
    uint64_t t0 = max_ns ? hk_os_now_ns() : 0;
    unsigned nb = 0;
    int stopped = 0;
    size_t stays = 0; /* used blocks passed that stay where they are */
    while ((unsigned char *)cur < end) {
        cache_blk *nx = cache_next(cur);
        /* a used block that will not move (locked, or already in place):
         * the slice may end before it when the budget is spent */
        if (stays && cur->magic != CACHE_MAGIC_FREE &&
            (cache_slot_of_blk(c, cur)->lock || dst == (unsigned char *)cur) &&
            ((max_bytes && moved + run_len + passed * CACHE_STEP_PASS >= max_bytes) ||
             (max_ns && (++nb & 7u) == 0 && hk_os_now_ns() - t0 >= max_ns))) {
            stopped = 1;
            break;
        }
        passed++;
        if (cur->magic == CACHE_MAGIC_FREE) {
            if (run_len) {
                memmove(dst, run, run_len);
                dst += run_len;
                moved += run_len;
                run_len = 0;
            }
            cache_bin_remove(c, cur);
            cur = nx;
            continue;
        }
        cache_slot *s = cache_slot_of_blk(c, cur);
        if (s->lock || dst == (unsigned char *)cur) stays++;
        if (s->lock) {
            if (run_len) {
                memmove(dst, run, run_len);
                dst += run_len;
                moved += run_len;
                run_len = 0;
            }
            if (dst < (unsigned char *)cur) {
                cache_blk *f = (cache_blk *)dst;
                f->size16 = (uint32_t)(((unsigned char *)cur - dst) / 16u);
                f->prev16 = prevsize;
                cache_add_free(c, f);
                prevsize = f->size16;
            }
            cur->prev16 = prevsize;
            prevsize = cur->size16;
            dst = (unsigned char *)nx;
            cur = nx;
            continue;
        }
        size_t sz = cache_bytes(cur);
        if (dst == (unsigned char *)cur) { /* in place (right after a locked block) */
            cur->prev16 = prevsize;
            prevsize = cur->size16;
            dst = (unsigned char *)nx;
            cur = nx;
            continue;
        }
        passed--; /* a block that moves is counted by its bytes */
        size_t pending = moved + run_len;
        if (pending && ((max_bytes && pending + (passed * CACHE_STEP_PASS) + sz > max_bytes) ||
                        (max_ns && (++nb & 7u) == 0 && hk_os_now_ns() - t0 >= max_ns))) {
            stopped = 1;
            break;
        }
        if (!run_len) {
            run = (unsigned char *)cur;
            cur->prev16 = prevsize; /* travels with the header */
        }
        cache_set_data(c, s, dst + run_len + CACHE_HDR);
        run_len += sz;
        prevsize = cur->size16;
        cur = nx;
    }
    if (run_len) {
        memmove(dst, run, run_len);
        dst += run_len;
        moved += run_len;
    }
    if (dst < (unsigned char *)cur) {
        cache_blk *f = (cache_blk *)dst;
        f->size16 = (uint32_t)(((unsigned char *)cur - dst) / 16u);
        f->prev16 = prevsize;
        cur->prev16 = f->size16;
        cache_add_free(c, f);
        c->hint = f;
    } else {
        cur->prev16 = prevsize;
        c->hint = cur;
    }
    c->moved_bytes += moved;
    if (moved_out) *moved_out += moved;
    hk__cache_san_close(c);
    return stopped;
}

/* Slides every unlocked block up, around locked blocks: free space gathers at
 * the bottom (and right above each locked block). */
void hk__cache_slide_up(hk_cache *c) {
    if (!c->lo || (unsigned char *)c->end == c->lo) return;
    hk__cache_san_open(c);
    cache_blk *cur = cache_prev(c, c->end);
    unsigned char *dst_end = (unsigned char *)c->end;
    cache_blk *above = c->end;
    while (cur) {
        cache_blk *pv = cache_prev(c, cur);
        size_t sz = cache_bytes(cur);
        if (cur->magic == CACHE_MAGIC_FREE) {
            cache_bin_remove(c, cur);
            cur = pv;
            continue;
        }
        cache_slot *s = cache_slot_of_blk(c, cur);
        if (s->lock) {
            unsigned char *ce = (unsigned char *)cur + sz;
            if (ce < dst_end) {
                cache_blk *f = (cache_blk *)ce;
                f->size16 = (uint32_t)((dst_end - ce) / 16u);
                f->prev16 = cur->size16;
                above->prev16 = f->size16;
                cache_add_free(c, f);
            } else {
                above->prev16 = cur->size16;
            }
            above = cur;
            dst_end = (unsigned char *)cur;
            cur = pv;
            continue;
        }
        unsigned char *nd = dst_end - sz;
        if (nd != (unsigned char *)cur) {
            memmove(nd, cur, sz);
            cache_set_data(c, s, nd + CACHE_HDR);
            c->moved_bytes += sz;
        }
        above->prev16 = ((cache_blk *)nd)->size16;
        above = (cache_blk *)nd;
        dst_end = nd;
        cur = pv;
    }
    if (dst_end > c->lo) {
        cache_blk *f = (cache_blk *)c->lo;
        f->size16 = (uint32_t)((dst_end - c->lo) / 16u);
        f->prev16 = 0;
        above->prev16 = f->size16;
        cache_add_free(c, f);
    } else {
        above->prev16 = 0;
    }
    c->hint = (cache_blk *)c->lo;
    hk__cache_san_close(c);
}

/* HeapQC's scramble: move everything that can move, alternately up and
 * down, and fill all free space with the freed pattern. */
void hk__cache_scramble(hk_cache *c) {
    if (!c->lo) return;
    uint64_t before = c->moved_bytes;
    if (c->scramble_dir)
        (void)hk__cache_slide_down(c, 1, 0, 0, NULL);
    else
        hk__cache_slide_up(c);
    /* Turn round only when something moved (an empty heap has nothing to
     * scramble). New blocks are then placed next to the packed ones (see
     * cache_place_high) so the next slide, the other way, moves them too. */
    if (c->moved_bytes != before) c->scramble_dir ^= 1;
    for (unsigned i = 0; i < c->nbins; i++)
        for (cache_blk *b = c->bins[i]; b; b = cache_links_of(b)->next) {
            size_t n = cache_bytes(b) - CACHE_MIN_FREE;
            cache_unpoison((unsigned char *)b + CACHE_MIN_FREE, n);
            memset((unsigned char *)b + CACHE_MIN_FREE, HK_FILL_FREE, n);
            cache_poison((unsigned char *)b + CACHE_MIN_FREE, n);
        }
}

/* ---- move_high ----------------------------------------------------------------- */

hk_result hk__cache_move_high(hk_cache *c, cache_slot *s, const char *op) {
    if (!cache_data(c, s))
        return hk__report(&c->core.rep, HK_ERR_STATE, HK_EK_STATE, NULL, 0, s->name,
                          "%s of empty (purged) handle 0x%08x '%s'", op, cache_handle(c, s),
                          cache_nm(s->name));
    if (s->lock)
        return hk__report(&c->core.rep, HK_ERR_LOCKED, HK_EK_LOCKED, cache_data(c, s), s->requested, s->name,
                          "%s of locked block '%s' at %p (handle 0x%08x): a locked block does not move", op,
                          cache_nm(s->name), cache_data(c, s), cache_handle(c, s));
    cache_blk *b = cache_blk_of(cache_data(c, s)), *best = NULL;
    for (cache_blk *x = cache_next(b); x != c->end; x = cache_next(x))
        if (x->magic == CACHE_MAGIC_FREE && x->size16 >= b->size16) best = x;
    if (!best) return HK_OK;
    uint32_t n16 = b->size16;
    cache_blk *nb = hk__cache_carve(c, best, n16, 1);
    nb->magic = CACHE_MAGIC_USED;
    nb->handle = cache_handle(c, s);
    cache_unpoison(b, cache_bytes(b));
    memcpy(cache_user(nb), cache_user(b), cache_bytes(b) - CACHE_HDR);
    cache_set_data(c, s, cache_user(nb));
    c->moved_bytes += cache_bytes(b);
    c->used_bytes += cache_bytes(nb) - cache_bytes(b); /* nb may have taken a sliver more */
    hk__cache_release(c, b);
    cache_fill_pad(nb, s->requested);
    return HK_OK;
}

hk_result hk_cache_move_high(hk_cache *c, hk_cache_handle h) {
    if (!c) return HK_ERR_INVALID;
    hk__core_lock(&c->core);
    hk_result r = HK_OK;
    cache_slot *s = cache_lookup(c, h, "move_high", &r);
    if (s) r = hk__cache_move_high(c, s, "move_high");
    hk__core_after(&c->core);
    hk__core_unlock(&c->core);
    return r;
}

/* ---- compaction API ---------------------------------------------------------------- */

hk_result hk_cache_compact(hk_cache *c) {
    if (!c) return HK_ERR_INVALID;
    hk__core_lock(&c->core);
    (void)hk__cache_slide_down(c, 1, 0, 0, NULL);
    hk__core_after(&c->core);
    hk__core_unlock(&c->core);
    return HK_OK;
}

int hk_cache_compact_step(hk_cache *c, size_t max_bytes, uint64_t max_ns, size_t *moved) {
    if (!c) return 0;
    hk__core_lock(&c->core);
    int more = hk__cache_slide_down(c, 0, max_bytes, max_ns, moved);
    hk__core_after(&c->core);
    hk__core_unlock(&c->core);
    return more;
}

hk_result hk_cache_max_block(hk_cache *c, hk_cache_space *out) {
    if (!c || !out) return HK_ERR_INVALID;
    hk__core_lock(&c->core);
    memset(out, 0, sizeof *out);
    size_t best_now = 0, best_comp = 0, best_purge = 0, run_free = 0, run_purge = 0;
    if (c->lo) {
        for (cache_blk *b = (cache_blk *)c->lo;; b = cache_next(b)) {
            int boundary = b == c->end;
            if (!boundary && b->magic == CACHE_MAGIC_FREE) {
                if (cache_bytes(b) > best_now) best_now = cache_bytes(b);
                run_free += cache_bytes(b);
                run_purge += cache_bytes(b);
                continue;
            }
            if (!boundary) {
                cache_slot *s = cache_slot_of_blk(c, b);
                if (!s->lock) {
                    if (cache_purgeable(c, s)) run_purge += cache_bytes(b);
                    continue;
                }
            }
            if (run_free > best_comp) best_comp = run_free;
            if (run_purge > best_purge) best_purge = run_purge;
            run_free = run_purge = 0;
            if (boundary) break;
        }
    }
    out->now = cache_req_for(best_now);
    out->compacted = cache_req_for(best_comp);
    out->purged = cache_req_for(best_purge);
    hk__core_unlock(&c->core);
    return HK_OK;
}

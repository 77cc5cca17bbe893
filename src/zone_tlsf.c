/*
 * src/zone_tlsf.c - the zone's free blocks: two-level segregated fit with
 * boundary tags. Taking a block (good fit, split), making one free (merge
 * with both neighbours), growing a used block into its free successor. The
 * block layout is in src/zone_internal.h. Calls nothing of the other zone
 * files.
 *
 * Invariants (verified by hk_zone_check):
 *  - blocks tile each region exactly; every header's check matches.
 *  - a block's PREV_USED bit equals its predecessor's USED bit (the first
 *    block of a region has PREV_USED); when the predecessor is free,
 *    prev_size equals its size (the boundary tag).
 *  - no two free blocks are adjacent (merging is immediate).
 *  - every free block is in exactly the list heads[fl][sl] given by
 *    zone_mapping(size); sl_map[fl] bit sl is set iff that list is non-empty;
 *    fl_map bit fl is set iff sl_map[fl] != 0. Lists are doubly linked
 *    except that a head's back link is stale (heads[][] identifies heads).
 *  - free_bytes and free_blocks are the sums over the free blocks.
 *  - with HK_FLAG_FILL every free block's payload past its links holds
 *    HK_FILL_FREE (the merge keeps it so: a swallowed header is filled).
 *  - decay state (zone_decay.c): a free block made or grown by a merge is
 *    dirty (not ZB_FREE_CLEAN) with the epoch bit z->decay_young, and its
 *    bytes count in decay_new; a block carved from a free one keeps the
 *    free one's state for its free remainder (the remainder's span lies
 *    inside the old span, and only its header, outside its span, is
 *    written). clean_bytes is the sum of the clean blocks' spans: listing
 *    or unlisting a clean block, and carving one, adjust it.
 */
#include "zone_internal.h"

/* clean_bytes moves by a clean block's span (out of line: rare). */
static HK__NOINLINE void zone_clean_add(hk_zone *z, const zone_blk *b, size_t size, int sign) {
    uintptr_t lo;
    size_t span = zone_free_span(z, b, size, &lo);
    z->clean_bytes = sign > 0 ? z->clean_bytes + span : z->clean_bytes - span;
}

static inline void zone_insert(hk_zone *z, zone_blk *b) {
    unsigned fl, sl;
    size_t size = zone_bsize(b);
    zone_mapping(size, &fl, &sl);
    zone_blk *head = z->heads[fl][sl];
    b->next_free = head;
    b->prev_free = NULL;
    if (head) head->prev_free = b;
    z->heads[fl][sl] = b;
    z->sl_map[fl] |= 1u << sl;
    z->fl_map |= 1u << fl;
    z->free_bytes += size;
    z->free_blocks++;
    if (HK__UNLIKELY(b->bits & ZB_FREE_CLEAN)) zone_clean_add(z, b, size, 1);
    zone_poison((unsigned char *)b + sizeof(zone_blk), size - sizeof(zone_blk));
}

/* A clean block's span is counted out before its header changes. */
static inline void zone_unclean(hk_zone *z, const zone_blk *b, size_t size) {
    if (HK__UNLIKELY(b->bits & ZB_FREE_CLEAN)) zone_clean_add(z, b, size, -1);
}

/* The head of a list is recognised by heads[fl][sl], not by its back link:
 * a head's prev_free is stale and never read. So popping the head (the
 * allocation path) does not touch the next block in the list: one cache miss
 * fewer per allocation. */
static inline void zone_remove(hk_zone *z, zone_blk *b) {
    unsigned fl, sl;
    size_t size = zone_bsize(b);
    zone_mapping(size, &fl, &sl);
    zone_blk *n = b->next_free;
    zone_blk **hp = &z->heads[fl][sl];
    if (*hp == b) {
        *hp = n;
        if (!n) {
            z->sl_map[fl] &= ~(1u << sl);
            if (!z->sl_map[fl]) z->fl_map &= ~(1u << fl);
        }
    } else {
        zone_blk *p = b->prev_free;
        p->next_free = n;
        if (n) n->prev_free = p;
    }
    z->free_bytes -= size;
    z->free_blocks--;
    zone_unclean(z, b, size);
}

void hk__zone_list_insert(hk_zone *z, zone_blk *b) { zone_insert(z, b); }
void hk__zone_list_remove(hk_zone *z, zone_blk *b) { zone_remove(z, b); }

/* A free block of at least `size` bytes, or NULL. O(1). */
static inline zone_blk *zone_find(const hk_zone *z, size_t size) {
    unsigned fl, sl;
    if (size >= ZONE_SMALL) {
        /* Good fit first: the head of the request's own class often fits
         * (the rounded-up search skips that class entirely), and using it
         * spares a split of a bigger block. One extra load. */
        zone_mapping(size, &fl, &sl);
        zone_blk *h = fl < ZONE_FL_COUNT ? z->heads[fl][sl] : NULL;
        if (h && zone_bsize(h) >= size) return h;
    }
    zone_mapping_search(size, &fl, &sl);
    if (fl >= ZONE_FL_COUNT) return NULL;
    uint32_t slm = z->sl_map[fl] & (~0u << sl);
    if (!slm) {
        uint32_t flm = z->fl_map & (~0u << (fl + 1));
        if (!flm) return NULL;
        fl = (unsigned)__builtin_ctz(flm);
        slm = z->sl_map[fl];
    }
    return z->heads[fl][(unsigned)__builtin_ctz(slm)];
}

/* ---- carving ------------------------------------------------------------------ */

zone_blk *hk__zone_take(hk_zone *z, size_t need, size_t align, size_t *bsize) {
    size_t search = align > 16 ? need + align + ZONE_MIN_BLOCK : need;
    zone_blk *b = zone_find(z, search);
    if (!b) return NULL;
    size_t total = zone_bsize(b);
    unsigned keep = b->bits & ZB_FREE_STATE; /* the free remainder's decay state */
    if (align <= 16) {
        zone_blk *nx = zone_next(b);
        if (total - need >= ZONE_MIN_BLOCK && HK__LIKELY(nx->size16 != 0)) {
            /* Carve from the end: the free remainder keeps its address (and,
             * when its class is unchanged, its list position: no list work at
             * all). The region's last block is carved from the start instead,
             * so the untouched tail of a region stays untouched. */
            size_t rem = total - need;
            zone_blk *a = (zone_blk *)((unsigned char *)b + rem);
            if (zone_same_class(total, rem)) {
                if (HK__UNLIKELY(keep & ZB_FREE_CLEAN)) {
                    /* the span loses the pages between the two ends (inline:
                     * a growing zone carves its fresh, clean tail this way) */
                    uintptr_t m = (uintptr_t)z->page - 1, lo = ((uintptr_t)b + sizeof(zone_blk) + m) & ~m;
                    uintptr_t e1 = ((uintptr_t)b + total) & ~m, e2 = ((uintptr_t)b + rem) & ~m;
                    z->clean_bytes -= (e1 > lo ? e1 : lo) - (e2 > lo ? e2 : lo);
                }
                zone_set_hdr(b, rem, 0, b->bits & (ZB_PREV_USED | ZB_FREE_STATE), 0);
                z->free_bytes -= need;
            } else {
                zone_remove(z, b);
                zone_set_hdr(b, rem, 0, b->bits & (ZB_PREV_USED | ZB_FREE_STATE), 0);
                zone_insert(z, b);
            }
            zone_unpoison(a, sizeof(zone_blk));
            a->prev_size = rem;
            zone_set_hdr(a, need, 0, 0, 0);
            nx->bits |= ZB_PREV_USED;
            *bsize = need;
            return a;
        }
        zone_remove(z, b);
    } else {
        zone_remove(z, b);
        uintptr_t u = hk_align_ptr((uintptr_t)b + ZONE_HDR, align);
        size_t gap = u - ZONE_HDR - (uintptr_t)b;
        if (gap && gap < ZONE_MIN_BLOCK) {
            u = hk_align_ptr((uintptr_t)b + ZONE_HDR + ZONE_MIN_BLOCK, align);
            gap = u - ZONE_HDR - (uintptr_t)b;
        }
        if (gap) {
            zone_blk *a = (zone_blk *)(u - ZONE_HDR);
            zone_unpoison(a, sizeof(zone_blk));
            a->prev_size = gap;
            zone_set_hdr(a, total - gap, 0, 0, 0);
            zone_set_hdr(b, gap, 0, b->bits & (ZB_PREV_USED | ZB_FREE_STATE), 0);
            zone_insert(z, b);
            b = a;
            total -= gap;
        }
    }
    if (total - need >= ZONE_MIN_BLOCK) {
        zone_blk *r = (zone_blk *)((unsigned char *)b + need);
        zone_unpoison(r, sizeof(zone_blk));
        zone_set_hdr(r, total - need, 0, ZB_PREV_USED | keep, 0);
        zone_next(r)->prev_size = total - need;
        zone_insert(z, r);
        *bsize = need;
        zone_set_hdr(b, need, 0, b->bits & ZB_PREV_USED, 0);
    } else {
        zone_next(b)->bits |= ZB_PREV_USED;
        *bsize = total;
    }
    return b;
}

/* ---- merging ------------------------------------------------------------------ */

zone_blk *hk__zone_merge_insert(hk_zone *z, zone_blk *b) {
    size_t size = zone_bsize(b);
    unsigned prev_used = b->bits & ZB_PREV_USED;
    z->decay_new += size;
    zone_blk *n = zone_next(b);
    if (!(n->bits & ZB_USED)) {
        zone_remove(z, n);
        size += zone_bsize(n);
        if (ZONE_FLAGS(z) & HK_FLAG_FILL) {
            zone_unpoison(n, sizeof(zone_blk));
            memset(n, HK_FILL_FREE, sizeof(zone_blk));
        }
    }
    if (!prev_used) {
        zone_blk *p = zone_prev(b);
        size_t psize = zone_bsize(p);
        if (ZONE_FLAGS(z) & HK_FLAG_FILL) {
            zone_unpoison(b, sizeof(zone_blk));
            memset(b, HK_FILL_FREE, sizeof(zone_blk));
        } else {
            /* the old header stays readable inside the merged block: make it
             * say "free" so a second free of it is caught as a double free */
            zone_set_hdr(b, zone_bsize(b), 0, 0, 0);
        }
        if (zone_same_class(psize + size, psize)) {
            /* The merged block stays in p's list, in p's place: no list work
             * (and no cache misses on p's list neighbours). */
            zone_poison(b, size);
            z->free_bytes += size;
            zone_unclean(z, p, psize);
            size += psize;
            zone_set_hdr(p, size, 0, (p->bits & ZB_PREV_USED) | z->decay_young, 0);
            n = zone_next(p);
            n->prev_size = size;
            n->bits &= (uint8_t)~ZB_PREV_USED;
            return p;
        }
        zone_remove(z, p);
        size += psize;
        prev_used = p->bits & ZB_PREV_USED;
        b = p;
    }
    zone_set_hdr(b, size, 0, prev_used | z->decay_young, 0);
    n = zone_next(b);
    n->prev_size = size;
    n->bits &= (uint8_t)~ZB_PREV_USED;
    zone_insert(z, b);
    return b;
}

size_t hk__zone_absorb_next(hk_zone *z, zone_blk *b, zone_blk *nx, size_t old, size_t need) {
    size_t total = old + zone_bsize(nx);
    unsigned keep = nx->bits & ZB_FREE_STATE;
    zone_remove(z, nx);
    zone_unpoison(nx, sizeof(zone_blk));
    if (total - need >= ZONE_MIN_BLOCK) {
        zone_blk *r = (zone_blk *)((unsigned char *)b + need);
        zone_unpoison(r, sizeof(zone_blk));
        zone_set_hdr(r, total - need, 0, ZB_PREV_USED | keep, 0);
        zone_next(r)->prev_size = total - need;
        zone_insert(z, r);
        total = need;
    } else {
        zone_next(nx)->bits |= ZB_PREV_USED;
    }
    z->used_bytes += total - old;
    return total;
}

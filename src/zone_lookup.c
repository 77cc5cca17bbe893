/*
 * src/zone_lookup.c - from a user pointer to its TLSF block, and the report
 * when it names none: foreign pointer, interior pointer, pointer into free
 * space (double free), damaged header; and the canary check of a block
 * handed back. Reads the heap and reports; changes nothing (except the
 * region hint) and calls no other zone file. Pointers into the small-block
 * space never come here (zone_small.c judges them).
 *
 * Invariants: a pointer is accepted only when it is 16-byte aligned inside
 * a region, its header's check matches, and its size fits the region. The
 * slow path that names what a bad pointer is walks only the pointer's
 * region and trusts a header only after its check bits and size were
 * verified.
 */
#include "zone_internal.h"

int hk__zone_canary_ok(hk_zone *z, zone_blk *b, const char *when) {
    size_t area = zone_area(b), req = area - zone_slack(b);
    unsigned char *pad = zone_user(b) + req;
    size_t n = area - req;
    zone_unpoison(pad, n);
    size_t off = hk__fill_find(pad, n, HK_FILL_PAD);
    if (off == n) {
        size_t pe = (b->bits & ZB_EXT) ? n : (n > ZONE_OVERLAP ? n - ZONE_OVERLAP : 0);
        zone_poison(pad, pe);
        return 1;
    }
    const char *name = zone_block_name(b);
    hk__report(
        ZONE_REP(z), HK_ERR_CORRUPT, HK_EK_CORRUPT_CANARY, zone_user(b), req, name,
        "%s block at %p (%zu bytes, tag %u%s%s%s): canary damaged at byte %zu past the end (write past the "
        "end of the block)",
        when, (void *)zone_user(b), req, b->tag, name ? ", '" : "", name ? name : "", name ? "'" : "", off);
    return 0;
}

/* Describes where p falls when it is not a valid block start (slow path:
 * walks p's region), and reports. */
static hk_result zone_classify_bad(hk_zone *z, const void *p, int ri, const char *op) {
    zone_region *r = &z->regions[ri];
    const unsigned char *a = (const unsigned char *)p;
    zone_blk *b = (zone_blk *)r->base;
    while ((unsigned char *)b < r->end) {
        if (!zone_hdr_ok(b) || zone_bsize(b) < ZONE_MIN_BLOCK ||
            zone_bsize(b) > (size_t)(r->end - (unsigned char *)b)) {
            if (a <= (unsigned char *)b + ZONE_HDR)
                return hk__report(ZONE_REP(z), HK_ERR_CORRUPT, HK_EK_CORRUPT_HEADER, p, 0, NULL,
                                  "%s(%p): the header of that block (at %p) is damaged; block left alone", op,
                                  p, (void *)b);
            return hk__report(ZONE_REP(z), HK_ERR_CORRUPT, HK_EK_CORRUPT_HEADER, p, 0, NULL,
                              "%s(%p): damaged block header at %p found before reaching it; nothing freed",
                              op, p, (void *)b);
        }
        unsigned char *bs = (unsigned char *)b, *be = bs + zone_bsize(b);
        if (a >= bs && a < be) {
            if ((b->bits & ZB_USED) && b->tag != 0) {
                const char *name = zone_block_name(b);
                return hk__report(
                    ZONE_REP(z), HK_ERR_INVALID, HK_EK_INTERIOR_PTR, p, zone_requested(b), name,
                    "%s(%p): pointer is %td bytes into block %p (%zu bytes, tag %u%s%s%s), not its "
                    "start",
                    op, p, a - zone_user(b), (void *)zone_user(b), zone_requested(b), b->tag,
                    name ? ", '" : "", name ? name : "", name ? "'" : "");
            }
            return hk__report(ZONE_REP(z), HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, p, zone_bsize(b), NULL,
                              "%s(%p): pointer is in free space (free block %p of %zu bytes): freed already?",
                              op, p, (void *)bs, zone_bsize(b));
        }
        b = (zone_blk *)be;
    }
    return hk__report(ZONE_REP(z), HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, p, 0, NULL,
                      "%s(%p): pointer is the end marker of a region of this zone, not a block", op, p);
}

zone_blk *hk__zone_lookup(hk_zone *z, const void *p, const char *op, hk_result *res) {
    int ri = zone_find_region(z, p);
    if (HK__UNLIKELY(ri < 0)) {
        *res = hk__report(ZONE_REP(z), HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, p, 0, NULL,
                          "%s(%p): pointer does not belong to this zone", op, p);
        return NULL;
    }
    const zone_region *r = &z->regions[ri];
    uintptr_t a = (uintptr_t)p;
    if (HK__UNLIKELY((a & 15) || a < (uintptr_t)r->base + ZONE_HDR || a > (uintptr_t)r->end)) {
        *res = zone_classify_bad(z, p, ri, op);
        return NULL;
    }
    zone_blk *b = zone_from_user(p);
    if (HK__UNLIKELY(zone_is_poisoned(b, ZONE_HDR))) {
        *res = zone_classify_bad(z, p, ri, op);
        return NULL;
    }
    if (HK__UNLIKELY(!zone_hdr_ok(b))) {
        *res = zone_classify_bad(z, p, ri, op);
        return NULL;
    }
    if (HK__UNLIKELY(zone_bsize(b) < ZONE_MIN_BLOCK ||
                     zone_bsize(b) > (size_t)(r->end - (unsigned char *)b))) {
        *res = zone_classify_bad(z, p, ri, op);
        return NULL;
    }
    if (HK__UNLIKELY(!(b->bits & ZB_USED) || b->tag == 0)) {
        *res = hk__report(ZONE_REP(z), HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, p, zone_bsize(b), NULL,
                          "%s(%p): block %p (%zu bytes) is already free", op, p, p, zone_bsize(b));
        return NULL;
    }
    *res = HK_OK;
    return b;
}

bool hk__zone_is_block(hk_zone *z, const void *p) {
    int ri = zone_region_index(z, p);
    uintptr_t a = (uintptr_t)p;
    if (ri < 0 || (a & 15) || a < (uintptr_t)z->regions[ri].base + ZONE_HDR ||
        a > (uintptr_t)z->regions[ri].end)
        return false;
    const zone_region *r = &z->regions[ri];
    zone_blk *b = zone_from_user(p);
    if (zone_is_poisoned(b, ZONE_HDR)) return false;
    if (!zone_hdr_ok(b)) return false;
    return (b->bits & ZB_USED) && b->tag != 0 && zone_bsize(b) >= ZONE_MIN_BLOCK &&
           zone_bsize(b) <= (size_t)(r->end - (unsigned char *)b);
}

/*
 * src/zone_region.c - the zone's regions and its memory from the OS: laying
 * out a region, growing (in place into reserved address space, or by a new
 * region), giving a dedicated region back, prefaulting. The only zone file
 * that calls the OS layer. Calls down into zone_tlsf.c only.
 *
 * Invariants (verified by hk_zone_check):
 *  - regions[0 .. nregions) are sorted by base and do not overlap; each is
 *    [base, end) tiled by blocks, with a 16-byte end marker at `end` (size
 *    0, USED); lo/hi bound them all.
 *  - capacity is the sum of the regions' end - base.
 *  - a region with os_base owns that mapping (released when the zone drops
 *    the region or is destroyed); a dedicated one was grown for a single
 *    request larger than the growth chunk and is released as soon as it is
 *    one free block again (other grown memory is kept until destroy).
 *  - a growing zone's first region may have reserved address space after
 *    its end marker (reserve_end), committed chunk by chunk as it grows;
 *    os_grown is the OS memory taken by growth (not dedicated regions).
 *  - region_hint < nregions, or 0; hint_lo and hint_span describe that
 *    region (zone_bounds runs after every change of the regions).
 *  - memory fresh from the OS (a new region or an in-place extension,
 *    without HK_ZONE_PREFAULT) is untouched past its headers: its free
 *    block starts clean (zone_decay.c) when nothing merged into it, and
 *    growth is not counted as freed memory for the decay.
 */
#include "zone_internal.h"

/* lo, hi and the hint's bounds after the regions changed. */
static void zone_bounds(hk_zone *z) {
    zone_hint_sync(z);
    if (!z->nregions) {
        z->lo = z->hi = 0;
        return;
    }
    z->lo = (uintptr_t)z->regions[0].base;
    z->hi = (uintptr_t)z->regions[z->nregions - 1].end + ZONE_HDR;
}

/* With HK_ZONE_PREFAULT, faults in [p, p+n) of fresh OS memory; 0 when the
 * OS cannot back it. */
static int zone_prefault(uint32_t flags, void *p, size_t n) {
    return !(flags & HK_ZONE_PREFAULT) || hk_os_prefault(p, n) == HK_OK;
}

int hk__zone_os_first(const hk_zone_desc *desc, size_t size, zone_os_map *out) {
    void *os = NULL;
    size_t reserve = 0;
    memset(out, 0, sizeof *out);
    if (desc->grow_size && sizeof(void *) >= 8) {
        /* A growing zone reserves address space after its first region and
         * grows that region in place (see hk__zone_grow); the pages are
         * committed chunk by chunk. */
        size_t res = ZONE_RESERVE;
        if (desc->max_size && desc->max_size < ZONE_RESERVE / 2) {
            size_t r2;
            if (hk_size_add(desc->max_size, size, &r2) && hk_size_align(r2, hk_os_page_size(), &r2)) res = r2;
        }
        /* Under an address-space limit (ulimit -v, valgrind) the full
         * reservation may be refused: halve it down to 16x the first region
         * rather than fall back to growing by separate regions, which the
         * per-thread fast paths (first region only) do not serve. */
        size_t floor = size <= SIZE_MAX / 16 ? size * 16 : size;
        while (res > size) {
            os = hk_os_reserve(res);
            if (os && hk_os_commit(os, size) != HK_OK) {
                hk_os_release(os, res);
                os = NULL;
                break; /* committing failed: memory, not address space */
            }
            if (os) {
                reserve = res;
                break;
            }
            if (res / 2 < floor || !hk_size_align(res / 2, hk_os_page_size(), &res)) break;
        }
    }
    if (!os) os = hk_os_alloc(size);
    if (!os) return 0;
    size_t os_size = reserve ? reserve : size;
    if (!zone_prefault(desc->flags, os, size)) {
        hk_os_release(os, os_size);
        return 0;
    }
    out->base = os;
    out->size = size;
    out->os_size = os_size;
    out->reserve = reserve;
    return 1;
}

int hk__zone_region_add(hk_zone *z, void *mem, size_t size, void *os_base, size_t os_size, int report) {
    uintptr_t base = hk_align_ptr((uintptr_t)mem, 16);
    uintptr_t lim = ((uintptr_t)mem + size) & ~(uintptr_t)15;
    if (!mem || size < HK_ZONE_MIN_REGION || lim <= base || lim - base < ZONE_MIN_BLOCK + ZONE_HDR) {
        if (report)
            hk__report(ZONE_REP(z), HK_ERR_INVALID, HK_EK_INVALID_ARG, mem, size, NULL,
                       "region %p of %zu bytes refused: smaller than %u bytes", mem, size,
                       HK_ZONE_MIN_REGION);
        return -1;
    }
    if (z->nregions >= HK_ZONE_MAX_REGIONS) {
        if (report)
            hk__report(ZONE_REP(z), HK_ERR_NOMEM, HK_EK_NOMEM, mem, size, NULL,
                       "region %p of %zu bytes refused: the zone already has %u regions", mem, size,
                       HK_ZONE_MAX_REGIONS);
        return -1;
    }
    uintptr_t end = lim - ZONE_HDR;
    if (end - base > ZONE_MAX_BLOCK) end = base + (ZONE_MAX_BLOCK & ~(size_t)15);
    uint32_t at = 0;
    while (at < z->nregions && (uintptr_t)z->regions[at].base < base) at++;
    if ((at > 0 && (uintptr_t)z->regions[at - 1].end + ZONE_HDR > (uintptr_t)mem) ||
        (at < z->nregions && (uintptr_t)z->regions[at].base < (uintptr_t)mem + size)) {
        if (report)
            hk__report(ZONE_REP(z), HK_ERR_INVALID, HK_EK_INVALID_ARG, mem, size, NULL,
                       "region %p of %zu bytes refused: it overlaps a region of this zone", mem, size);
        return -1;
    }
    memmove(&z->regions[at + 1], &z->regions[at], (z->nregions - at) * sizeof(zone_region));
    zone_region *r = &z->regions[at];
    r->base = (unsigned char *)base;
    r->end = (unsigned char *)end;
    r->os_base = os_base;
    r->os_size = os_size;
    r->dedicated = 0;
    r->reserve_end = NULL;
    z->nregions++;
    zone_bounds(z);
    size_t bsize = end - base;
    zone_blk *b = (zone_blk *)base, *epi = (zone_blk *)end;
    zone_unpoison(b, sizeof(zone_blk));
    zone_unpoison(epi, ZONE_HDR);
    /* the zone's own fresh OS memory has no resident page past its header */
    unsigned clean =
        z->decay_on && !(ZONE_FLAGS(z) & HK_ZONE_PREFAULT) && zone_own_memory(z, b) ? ZB_FREE_CLEAN : 0;
    zone_set_hdr(b, bsize, 0, ZB_PREV_USED | clean, 0);
    epi->prev_size = bsize;
    zone_set_hdr(epi, 0, 0, ZB_USED, 0);
    if (ZONE_FLAGS(z) & HK_FLAG_FILL)
        memset((unsigned char *)b + sizeof(zone_blk), HK_FILL_FREE, bsize - sizeof(zone_blk));
    z->capacity += bsize;
    hk__zone_list_insert(z, b);
    if (HK__TRACKED(&z->core)) hk__track_heap(&z->core, (void *)base, (size_t)(lim - base), 1);
    return (int)at;
}

static void zone_region_drop(hk_zone *z, uint32_t i) {
    zone_region r = z->regions[i];
    z->capacity -= (size_t)(r.end - r.base);
    memmove(&z->regions[i], &z->regions[i + 1], (z->nregions - i - 1) * sizeof(zone_region));
    z->nregions--;
    z->region_hint = 0; /* the fast free path trusts the hint's region to be live */
    zone_bounds(z);
    zone_unpoison(r.base, (size_t)(r.end - r.base) + ZONE_HDR);
    if (r.os_base) hk_os_release(r.os_base, r.os_size);
}

/* Returns a dedicated OS region (grown for one large request) to the OS
 * when it is one free block again. Other grown regions are kept: giving them
 * back and faulting them in again on the next growth costs more than it
 * saves (like glibc, which returns only its mmapped chunks). */
void hk__zone_maybe_release(hk_zone *z, zone_blk *b) {
    if (z->bulk || z->nregions < 2) return;
    int i = zone_region_index(z, b);
    if (i < 0) return;
    zone_region *r = &z->regions[i];
    size_t size = zone_bsize(b);
    if (!r->os_base || !r->dedicated || (unsigned char *)b != r->base || r->base + size != r->end) return;
    hk__zone_list_remove(z, b);
    zone_region_drop(z, (uint32_t)i);
}

void hk__zone_release_empty_regions(hk_zone *z) {
    for (uint32_t i = z->nregions; i-- > 0;) {
        zone_region *r = &z->regions[i];
        zone_blk *b = (zone_blk *)r->base;
        if (r->os_base && !(b->bits & ZB_USED) && r->base + zone_bsize(b) == r->end)
            hk__zone_maybe_release(z, b);
    }
}

void hk__zone_release_all(hk_zone *z) {
    while (z->nregions) {
        zone_region *r = &z->regions[z->nregions - 1];
        zone_unpoison(r->base, (size_t)(r->end - r->base) + ZONE_HDR);
        if (HK__TRACKED(&z->core))
            hk__track_heap(&z->core, r->base, (size_t)(r->end - r->base) + ZONE_HDR, 0);
        if (r->os_base) hk_os_release(r->os_base, r->os_size);
        z->nregions--;
    }
    zone_bounds(z);
}

/* Grows region r in place by `add` bytes of freshly committed memory right
 * after its epilogue: the old epilogue becomes the header of a free block
 * (merged with a free last block), and a new epilogue closes the region. One
 * region instead of many keeps pointer lookups on the hint and lets the
 * tail block span the growth. O(1) (plus O(add) with HK_FLAG_FILL). */
static void zone_region_extend(hk_zone *z, zone_region *r, size_t add) {
    zone_blk *b = (zone_blk *)r->end;
    unsigned char *nend = r->end + add;
    zone_blk *ne = (zone_blk *)nend;
    zone_unpoison(b, sizeof(zone_blk));
    zone_set_hdr(b, add, 0, b->bits & ZB_PREV_USED, 0);
    if (ZONE_FLAGS(z) & HK_FLAG_FILL)
        memset((unsigned char *)b + sizeof(zone_blk), HK_FILL_FREE, add - sizeof(zone_blk));
    zone_unpoison(ne, ZONE_HDR);
    zone_set_hdr(ne, 0, 0, ZB_USED, 0);
    if (HK__TRACKED(&z->core)) hk__track_heap(&z->core, b, add + ZONE_HDR, 1);
    r->end = nend;
    z->capacity += add;
    zone_bounds(z);
    zone_blk *m = hk__zone_merge_insert(z, b);
    z->decay_new -= add; /* fresh memory, not freed memory */
    if (m == b && z->decay_on && !(ZONE_FLAGS(z) & HK_ZONE_PREFAULT)) {
        /* nothing merged: past its header (the old end marker's page) the
         * block is fresh from the OS, so clean */
        hk__zone_list_remove(z, b);
        zone_set_hdr(b, add, 0, (b->bits & ZB_PREV_USED) | ZB_FREE_CLEAN, 0);
        hk__zone_list_insert(z, b);
    }
}

int hk__zone_grow(hk_zone *z, size_t need) {
    if (!z->grow_size || z->nregions >= HK_ZONE_MAX_REGIONS) return 0;
    if (need >= ZONE_SMALL) { /* the search rounds up to a class boundary: the new block must reach it */
        size_t step = (size_t)1 << (zone_msb(need) - ZONE_SL_LOG2);
        need = (need + step - 1) & ~(step - 1);
    }
    size_t page = hk_os_page_size();
    size_t want, chunk = z->grow_size > z->os_grown ? z->grow_size : z->os_grown;
    if (chunk > ZONE_GROW_CHUNK_MAX) chunk = ZONE_GROW_CHUNK_MAX;
    if (!hk_size_add(need, ZONE_HDR + 64, &want) || !hk_size_align(want, page, &want)) return 0;
    int dedicated = want > chunk;
    if (want < chunk) want = chunk;
    if (z->max_size) {
        if (z->capacity >= z->max_size) return 0;
        size_t room = (z->max_size - z->capacity) & ~(page - 1);
        if (want > room) want = room;
        if (want < need + ZONE_HDR + 64) return 0;
    }
    if (!dedicated) {
        for (uint32_t i = 0; i < z->nregions; i++) {
            zone_region *r = &z->regions[i];
            unsigned char *cend = r->end + ZONE_HDR; /* committed up to here (page-aligned) */
            if (!r->reserve_end || (size_t)(r->reserve_end - cend) < want ||
                (size_t)(r->end - r->base) + want > ZONE_MAX_BLOCK)
                continue;
            if (hk_os_commit(cend, want) != HK_OK) break;
            if (!zone_prefault(ZONE_FLAGS(z), cend, want)) { /* out of memory: a new region would fail too */
                hk_os_decommit(cend, want);
                return 0;
            }
            zone_region_extend(z, r, want);
            z->os_grown += want;
            z->grow_count++;
            return 1;
        }
    }
    void *m = hk_os_alloc(want);
    if (!m) return 0;
    int ri = zone_prefault(ZONE_FLAGS(z), m, want) ? hk__zone_region_add(z, m, want, m, want, 0) : -1;
    if (ri < 0) {
        hk_os_release(m, want);
        return 0;
    }
    z->regions[ri].dedicated = dedicated;
    if (!dedicated) z->os_grown += want;
    z->grow_count++;
    return 1;
}

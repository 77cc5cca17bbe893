/*
 * src/zone.c - the zone: two-level segregated fit with boundary tags, plus
 * DOOM's tags, owners, purge levels and free-by-tag.
 *
 * Block layout (every offset a multiple of 16; B is the block address):
 *
 *   B+0   prev_size  size of the previous block; meaningful only while that
 *                    block is free (a used previous block owns these bytes)
 *   B+8   size16     block size / 16 (header included)
 *   B+12  tag        1..255 for used blocks, 0 for free ones
 *   B+13  bits       USED, PREV_USED, EXT, log2(alignment) - 4 in bits 3..7
 *   B+14  chk        slack (bits 0..5: user area - requested) and a 10-bit
 *                    hash of the address, size, tag, bits (PREV_USED
 *                    excluded) and slack
 *   B+16  user bytes (used)  /  next_free, prev_free links (free)
 *
 * A used block's user area runs from B+16 to B+size+8 (it overlaps the next
 * block's prev_size) for an untracked block, or to B+size-48 for a tracked
 * one (EXT), whose 56-byte record (tag-list links, block address, owner,
 * name, site, sequence) sits at B+size-48 and also overlaps the next
 * prev_size.
 *
 * Each region is [base, end) tiled by blocks, followed by a 16-byte epilogue
 * header at `end` (size 0, USED) so every block has a next header.
 *
 * Invariants (all verified by hk_zone_check):
 *  - blocks tile each region exactly; every header's check matches.
 *  - a block's PREV_USED bit equals its predecessor's USED bit (the first
 *    block of a region has PREV_USED); when the predecessor is free,
 *    prev_size equals its size (the boundary tag).
 *  - no two free blocks are adjacent (merging is immediate).
 *  - every free block is in exactly the list heads[fl][sl] given by
 *    zone_mapping(size); sl_map[fl] bit sl is set iff that list is non-empty;
 *    fl_map bit fl is set iff sl_map[fl] != 0. Lists are doubly linked
 *    except that a head's back link is stale (heads[][] identifies heads).
 *  - every used EXT block's record is in the circular list
 *    tag_head[tag][seq % ZONE_TAG_WAYS], oldest first (sequence numbers
 *    non-decreasing from the head), and points back to its block; tag_map
 *    bit t is set iff one of tag t's lists is non-empty; tag_count[t] is the
 *    lists' total length.
 *  - a used block whose alignment field is ZONE_RUN_ALOG (and without EXT)
 *    is a run (see "runs" below); its bytes count in run_bytes, not
 *    used_bytes. Its struct is sane (first slot address, class, stride,
 *    nslots fit the block, used <= bump <= nslots); slots below bump have slot headers
 *    (used or free) naming their index and class; `used` counts the used
 *    ones; the free list holds exactly the free ones. The class's cur run
 *    has state CUR; a run with state PARTIAL is in its class's partial list
 *    and has a free slot and a used one; a FULL run has every slot used.
 *  - untracked used blocks (no EXT) carry tag HK_TAG_STATIC.
 *  - free_bytes/free_blocks/used_bytes/used_req/untracked_live/slot_bytes
 *    equal the sums over the blocks (untracked_live counts untracked plain
 *    blocks, slot_bytes the strides of used slots); alloc_count -
 *    free_count is the number of used blocks and slots (every path that
 *    makes or ends a block counts in both, so no separate live counter);
 *    used_bytes + free_bytes + run_bytes = capacity.
 *  - a growing zone's first region may have reserved address space after
 *    its end marker (reserve_end), committed chunk by chunk as it grows.
 *  - with HK_FLAG_CANARY every used block's slack holds HK_FILL_PAD; with
 *    HK_FLAG_FILL every free block's payload past its links holds
 *    HK_FILL_FREE.
 */
#include "zone_internal.h"

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
    zone_poison((unsigned char *)b + sizeof(zone_blk), size - sizeof(zone_blk));
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
}

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

/* ---- regions --------------------------------------------------------------- */

static void zone_bounds(hk_zone *z) {
    if (!z->nregions) {
        z->lo = z->hi = 0;
        return;
    }
    z->lo = (uintptr_t)z->regions[0].base;
    z->hi = (uintptr_t)z->regions[z->nregions - 1].end + ZONE_HDR;
}

/* Lays out a region in [mem, mem+size) and puts its one free block in the
 * lists. Returns the region index or -1 (reported unless quiet). */
static int zone_region_add(hk_zone *z, void *mem, size_t size, void *os_base, size_t os_size, int report) {
    uintptr_t base = hk_align_ptr((uintptr_t)mem, 16);
    uintptr_t lim = ((uintptr_t)mem + size) & ~(uintptr_t)15;
    if (!mem || size < HK_ZONE_MIN_REGION || lim <= base || lim - base < ZONE_MIN_BLOCK + ZONE_HDR) {
        if (report)
            hk__report(&z->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, mem, size, NULL,
                       "region %p of %zu bytes refused: smaller than %u bytes", mem, size,
                       HK_ZONE_MIN_REGION);
        return -1;
    }
    if (z->nregions >= HK_ZONE_MAX_REGIONS) {
        if (report)
            hk__report(&z->rep, HK_ERR_NOMEM, HK_EK_NOMEM, mem, size, NULL,
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
            hk__report(&z->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, mem, size, NULL,
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
    zone_set_hdr(b, bsize, 0, ZB_PREV_USED, 0);
    epi->prev_size = bsize;
    zone_set_hdr(epi, 0, 0, ZB_USED, 0);
    if (z->flags & HK_FLAG_FILL)
        memset((unsigned char *)b + sizeof(zone_blk), HK_FILL_FREE, bsize - sizeof(zone_blk));
    z->capacity += bsize;
    zone_insert(z, b);
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
static void zone_maybe_release(hk_zone *z, zone_blk *b) {
    if (z->bulk || z->nregions < 2) return;
    int i = zone_region_index(z, b);
    if (i < 0) return;
    zone_region *r = &z->regions[i];
    size_t size = zone_bsize(b);
    if (!r->os_base || !r->dedicated || (unsigned char *)b != r->base || r->base + size != r->end) return;
    zone_remove(z, b);
    zone_region_drop(z, (uint32_t)i);
}

static void zone_release_empty_regions(hk_zone *z) {
    for (uint32_t i = z->nregions; i-- > 0;) {
        zone_region *r = &z->regions[i];
        zone_blk *b = (zone_blk *)r->base;
        if (r->os_base && !(b->bits & ZB_USED) && r->base + zone_bsize(b) == r->end) zone_maybe_release(z, b);
    }
}

static zone_blk *zone_merge_insert(hk_zone *z, zone_blk *b);

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
    if (z->flags & HK_FLAG_FILL)
        memset((unsigned char *)b + sizeof(zone_blk), HK_FILL_FREE, add - sizeof(zone_blk));
    zone_unpoison(ne, ZONE_HDR);
    zone_set_hdr(ne, 0, 0, ZB_USED, 0);
    r->end = nend;
    z->capacity += add;
    zone_bounds(z);
    zone_merge_insert(z, b);
}

/* With HK_ZONE_PREFAULT, faults in [p, p+n) of fresh OS memory; 0 when the
 * OS cannot back it. */
static int zone_prefault(uint32_t flags, void *p, size_t n) {
    return !(flags & HK_ZONE_PREFAULT) || hk_os_prefault(p, n) == HK_OK;
}

static int zone_grow(hk_zone *z, size_t need) {
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
            if (!zone_prefault(z->flags, cend, want)) { /* out of memory: a new region would fail too */
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
    int ri = zone_prefault(z->flags, m, want) ? zone_region_add(z, m, want, m, want, 0) : -1;
    if (ri < 0) {
        hk_os_release(m, want);
        return 0;
    }
    z->regions[ri].dedicated = dedicated;
    if (!dedicated) z->os_grown += want;
    z->grow_count++;
    return 1;
}

/* ---- tag lists ------------------------------------------------------------- */

static inline void zone_tag_append(hk_zone *z, zone_blk *b, unsigned tag) {
    zone_ext *e = zone_ext_of(b);
    e->seq = z->seq++;
    e->blk = b;
    zone_ext **hp = &z->tag_head[tag][e->seq & (ZONE_TAG_WAYS - 1)], *head = *hp;
    z->tag_map[tag >> 6] |= 1ull << (tag & 63);
    if (!head) {
        e->next = e->prev = e;
        *hp = e;
    } else {
        zone_ext *tail = head->prev;
        e->next = head;
        e->prev = tail;
        tail->next = e;
        head->prev = e;
    }
    z->tag_count[tag]++;
    if (e->owner) z->tag_owned[tag]++;
}

static inline void zone_tag_unlink(hk_zone *z, zone_blk *b, unsigned tag) {
    zone_ext *e = zone_ext_of(b);
    zone_ext **hp = &z->tag_head[tag][e->seq & (ZONE_TAG_WAYS - 1)];
    if (e->next == e) {
        *hp = NULL;
    } else {
        e->prev->next = e->next;
        e->next->prev = e->prev;
        if (*hp == e) *hp = e->next;
    }
    if (z->tag_count[tag] == 1) z->tag_map[tag >> 6] &= ~(1ull << (tag & 63));
    z->tag_count[tag]--;
    if (e->owner) z->tag_owned[tag]--;
}

/* Next tag >= t (up to hi) whose list is non-empty, or -1. */
static int zone_next_tag(const hk_zone *z, int t, int hi) {
    while (t <= hi) {
        unsigned w = (unsigned)t >> 6;
        uint64_t m = z->tag_map[w] & (~0ull << ((unsigned)t & 63));
        if (m) {
            int f = (int)(w * 64 + (unsigned)__builtin_ctzll(m));
            return f <= hi ? f : -1;
        }
        t = (int)((w + 1) * 64);
    }
    return -1;
}

/* ---- carving and merging --------------------------------------------------- */

/* Takes a free block able to hold a block of `need` bytes whose user pointer
 * is aligned to `align`; splits off the surplus (and the lead gap for
 * alignment). Returns the block with its old header (PREV_USED correct,
 * size set in *bsize) or NULL. The next header's PREV_USED is set. */
static zone_blk *zone_take(hk_zone *z, size_t need, size_t align, size_t *bsize) {
    size_t search = align > 16 ? need + align + ZONE_MIN_BLOCK : need;
    zone_blk *b = zone_find(z, search);
    if (!b) return NULL;
    size_t total = zone_bsize(b);
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
                zone_set_hdr(b, rem, 0, b->bits & ZB_PREV_USED, 0);
                z->free_bytes -= need;
            } else {
                zone_remove(z, b);
                zone_set_hdr(b, rem, 0, b->bits & ZB_PREV_USED, 0);
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
            zone_set_hdr(b, gap, 0, b->bits & ZB_PREV_USED, 0);
            zone_insert(z, b);
            b = a;
            total -= gap;
        }
    }
    if (total - need >= ZONE_MIN_BLOCK) {
        zone_blk *r = (zone_blk *)((unsigned char *)b + need);
        zone_unpoison(r, sizeof(zone_blk));
        zone_set_hdr(r, total - need, 0, ZB_PREV_USED, 0);
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

/* Makes b (whose header gives its size; its contents are dead) free:
 * merges with free neighbours and puts the result in the lists. Returns the
 * merged block. */
static zone_blk *zone_merge_insert(hk_zone *z, zone_blk *b) {
    size_t size = zone_bsize(b);
    unsigned prev_used = b->bits & ZB_PREV_USED;
    zone_blk *n = zone_next(b);
    if (!(n->bits & ZB_USED)) {
        zone_remove(z, n);
        size += zone_bsize(n);
        if (z->flags & HK_FLAG_FILL) {
            zone_unpoison(n, sizeof(zone_blk));
            memset(n, HK_FILL_FREE, sizeof(zone_blk));
        }
    }
    if (!prev_used) {
        zone_blk *p = zone_prev(b);
        size_t psize = zone_bsize(p);
        if (z->flags & HK_FLAG_FILL) {
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
            size += psize;
            zone_set_hdr(p, size, 0, p->bits & ZB_PREV_USED, 0);
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
    zone_set_hdr(b, size, 0, prev_used, 0);
    n = zone_next(b);
    n->prev_size = size;
    n->bits &= (uint8_t)~ZB_PREV_USED;
    zone_insert(z, b);
    return b;
}

/* Block size for a request of n bytes; 0 when n is too large. */
static inline size_t zone_need(const hk_zone *z, size_t n, int tracked) {
    if (n > ZONE_MAX_REQUEST) return 0;
    size_t need = n + (tracked ? ZONE_EXT_OVH : ZONE_PLAIN_OVH);
    if (HK__UNLIKELY(z->flags & HK_FLAG_CANARY)) need += HK_CANARY_BYTES;
    need = (need + 15) & ~(size_t)15;
    return need < ZONE_MIN_BLOCK ? ZONE_MIN_BLOCK : need;
}

/* ---- reports ----------------------------------------------------------------- */

static void *zone_fail(hk_zone *z, hk_result r, hk_error_kind k, size_t n, const char *fmt_why) {
    z->fail_count++;
    if (k == HK_EK_NOMEM) {
        size_t largest = 0;
        if (z->fl_map) {
            unsigned fl = zone_msb(z->fl_map);
            largest = zone_class_start(fl, zone_msb(z->sl_map[fl]));
        }
        hk__report(
            &z->rep, r, k, NULL, n, NULL,
            "cannot allocate %zu bytes%s: capacity %zu, free %zu in %zu blocks, largest free block %zu", n,
            fmt_why ? fmt_why : "", z->capacity, z->free_bytes, z->free_blocks, largest);
    } else {
        hk__report(&z->rep, r, k, NULL, n, NULL, "request of %zu bytes refused: %s", n, fmt_why);
    }
    return NULL;
}

/* ---- allocation --------------------------------------------------------------- */

static int zone_purge_one(hk_zone *z, int level);

static void zone_runs_trim(hk_zone *z);

/* Gets a block of `need` bytes, purging then growing when needed. */
static zone_blk *zone_obtain(hk_zone *z, size_t need, size_t align, size_t *bsize) {
    zone_blk *b = zone_take(z, need, align, bsize);
    if (HK__LIKELY(b != NULL)) return b;
    if (z->nruns) {
        zone_runs_trim(z); /* empty runs kept for reuse go back first */
        b = zone_take(z, need, align, bsize);
        if (b) return b;
    }
    while (zone_purge_one(z, z->purge_level)) {
        b = zone_take(z, need, align, bsize);
        if (b) return b;
    }
    size_t grow_need = align > 16 ? need + align + ZONE_MIN_BLOCK : need;
    if (zone_grow(z, grow_need)) return zone_take(z, need, align, bsize);
    return NULL;
}

/* Turns a taken block into a used one and prepares its bytes. */
static void *zone_finish(hk_zone *z, zone_blk *b, size_t bsize, size_t n, unsigned tag, unsigned alog,
                         int tracked, void **owner, const char *name, const char *file, int line) {
    unsigned bits = ZB_USED | (b->bits & ZB_PREV_USED) | (alog << ZB_ALIGN_SHIFT);
    size_t area = bsize - (tracked ? ZONE_EXT_OVH : ZONE_PLAIN_OVH);
    unsigned char *user = zone_user(b);
    zone_unpoison(user, bsize - ZONE_HDR);
    if (tracked) {
        bits |= ZB_EXT;
        zone_set_hdr(b, bsize, tag, bits, (unsigned)(area - n));
        zone_ext *e = zone_ext_of(b);
        e->owner = owner;
        e->name = name;
        if (z->flags & HK_FLAG_RECORD_SITE) {
            e->file = file;
            e->line = line;
        } else {
            e->file = NULL;
            e->line = 0;
        }
        zone_tag_append(z, b, tag);
    } else {
        zone_set_hdr(b, bsize, tag, bits, (unsigned)(area - n));
        z->untracked_live++;
    }
    if (HK__UNLIKELY(z->flags & (HK_FLAG_ZERO | HK_FLAG_FILL | HK_FLAG_CANARY))) {
        if (z->flags & HK_FLAG_ZERO)
            memset(user, 0, n);
        else if (z->flags & HK_FLAG_FILL)
            memset(user, HK_FILL_ALLOC, n);
        if (z->flags & HK_FLAG_CANARY) memset(user + n, HK_FILL_PAD, area - n);
    }
    {
        size_t pad_end = tracked ? area : (area > ZONE_OVERLAP ? area - ZONE_OVERLAP : 0);
        if (pad_end > n) zone_poison(user + n, pad_end - n);
    }
    z->used_req += n;
    z->used_bytes += bsize;
    z->alloc_count++;
    if (z->used_req > z->peak_used) z->peak_used = z->used_req;
    if (owner) *owner = user;
    return user;
}

static void *zone_alloc_impl(hk_zone *z, size_t n, size_t align, int tag, void **owner, const char *name,
                             const char *file, int line) {
    if (tag == 0) tag = HK_TAG_STATIC;
    if (HK__UNLIKELY(tag < 1 || tag > HK_ZONE_TAG_MAX)) {
        z->fail_count++;
        hk__report(&z->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, n, name,
                   "allocation of %zu bytes%s%s refused: tag %d is outside 1..%d", n, name ? " for " : "",
                   name ? name : "", tag, HK_ZONE_TAG_MAX);
        return NULL;
    }
    if (HK__UNLIKELY(tag >= z->purge_level && !owner)) {
        z->fail_count++;
        hk__report(&z->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, n, name,
                   "allocation of %zu bytes%s%s refused: purgeable tag %d needs an owner pointer", n,
                   name ? " for " : "", name ? name : "", tag);
        return NULL;
    }
    if (align < 16) align = 16;
    if (HK__UNLIKELY(!hk_is_pow2(align) || align > ZONE_MAX_ALIGN)) {
        z->fail_count++;
        hk__report(&z->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, align, name,
                   "alignment %zu is not a power of two up to 2^34 (request of %zu bytes)", align, n);
        return NULL;
    }
    int tracked =
        tag != HK_TAG_STATIC || owner || name || (z->flags & (HK_ZONE_TRACK_ALL | HK_FLAG_RECORD_SITE)) != 0;
    size_t need = zone_need(z, n, tracked);
    if (HK__UNLIKELY(!need))
        return zone_fail(z, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, n, "larger than a zone block (64 GiB)");
    size_t bsize;
    zone_blk *b = zone_obtain(z, need, align, &bsize);
    if (HK__UNLIKELY(!b)) return zone_fail(z, HK_ERR_NOMEM, HK_EK_NOMEM, n, NULL);
    unsigned alog = zone_msb(align) - 4;
    return zone_finish(z, b, bsize, n, (unsigned)tag, alog, tracked, owner, name, file, line);
}

/* ---- freeing ----------------------------------------------------------------- */

/* Frees a validated used block. Clears the owner when asked. Returns the
 * merged free block. */
static zone_blk *zone_release(hk_zone *z, zone_blk *b, int clear_owner) {
    size_t size = zone_bsize(b), area = zone_area(b);
    z->used_req -= area - zone_slack(b);
    z->used_bytes -= size;
    z->free_count++;
    if (b->bits & ZB_EXT) {
        zone_ext *e = zone_ext_of(b);
        if (clear_owner && e->owner) *e->owner = NULL;
        /* clear_owner < 0: the caller (free_tags) has detached the whole tag
         * list already */
        if (clear_owner >= 0) zone_tag_unlink(z, b, b->tag);
    } else {
        z->untracked_live--;
    }
    zone_unpoison(zone_user(b), size - ZONE_HDR);
    if (HK__UNLIKELY(z->flags & HK_FLAG_FILL)) memset(zone_user(b), HK_FILL_FREE, size - ZONE_HDR);
    return zone_merge_insert(z, b);
}

/* ---- runs -------------------------------------------------------------------- */

/*
 * Small untracked blocks (hk_zone_alloc, calloc and realloc of at most
 * ZONE_RUN_MAX_REQ bytes, in a zone without debug flags or HK_ZONE_NO_RUNS)
 * live in runs: a run is one used block of the TLSF core, cut into slots of
 * one size class (95 classes: 16-byte steps up to 1 KiB, then 8 per
 * doubling up to 16 KiB). Slots of one class are all alike, so a freed slot
 * needs no merging: it goes on its run's free list and is reused by the next
 * request of its class. A run that becomes empty goes back to the TLSF core
 * at once (and is merged there as any block), except each class's current
 * run and one spare empty run (given back before any purge or growth).
 * Slots are carved lazily (`bump`), so a run's untouched pages stay
 * untouched.
 *
 * A slot's 8-byte header sits where a TLSF header's size/tag/bits/chk sit
 * (user pointer - 8) and carries a 16-bit check (zone_slot_chk), so every
 * pointer check (double free, foreign, interior, damaged header) works alike
 * for both.
 */

static inline void zone_slot_set(zone_blk *b, uint32_t word, unsigned tag, unsigned bits) {
    b->size16 = word;
    b->tag = (uint8_t)tag;
    b->bits = (uint8_t)bits;
    b->chk = zone_slot_chk(b, word, tag, bits);
}

/* Turns the (verified) header of used slot b into its free header: index
 * and class kept, slack 0, tag 0, bits ZB_SLOT_FREE. zone_slot_chk is an
 * xor of its inputs folded by h ^ (h >> 16), so the new check is the old
 * one xor the fold of what changed: the slack (word bits 19..31 fold onto
 * bits 3..15), the tag (bits 8..15) and ZB_USED. This spares the free path
 * a rehash; check verifies every free slot's header with the full hash. */
static inline void zone_slot_mark_free(zone_blk *b) {
    uint32_t w = b->size16;
    b->chk = (uint16_t)(b->chk ^ ((w >> 19) << 3) ^ ((unsigned)b->tag << 8) ^ ZB_USED);
    b->size16 = w & 0x7ffffu;
    b->tag = 0;
    b->bits = ZB_SLOT_FREE;
}

static inline void zone_partial_push(zone_cls *c, zone_run *r) {
    r->prev = NULL;
    r->next = c->partial;
    if (c->partial) c->partial->prev = r;
    c->partial = r;
    r->state = ZONE_RUN_PARTIAL;
}

static inline void zone_partial_unlink(zone_cls *c, zone_run *r) {
    if (r->prev)
        r->prev->next = r->next;
    else
        c->partial = r->next;
    if (r->next) r->next->prev = r->prev;
}

/* A new run of class ci from the TLSF core, or NULL (the caller falls back
 * to a plain block). Nothing is purged for a run; a growing zone grows. In a
 * zone that cannot grow a run takes at most 1/16 of the capacity. O(1)
 * (plus one mmap when growing). */
static size_t zone_run_slots(const hk_zone *z, uint32_t stride) {
    size_t n = ZONE_RUN_TARGET / stride, cap = z->capacity / 16;
    if (n > ZONE_RUN_MAX_SLOTS) n = ZONE_RUN_MAX_SLOTS;
    if (n < ZONE_RUN_MIN_SLOTS) n = ZONE_RUN_MIN_SLOTS;
    if (ZONE_RUN_HDR + n * stride > cap && !z->grow_size) {
        if (cap < ZONE_RUN_HDR + (size_t)ZONE_RUN_MIN_SLOTS * stride) return 0;
        n = (cap - ZONE_RUN_HDR) / stride;
    }
    return n;
}

static zone_run *zone_run_new(hk_zone *z, unsigned ci) {
    uint32_t stride = zone_cls_stride(ci);
    size_t n = zone_run_slots(z, stride), bsize;
    if (!n) return NULL;
    zone_blk *b = zone_take(z, ZONE_RUN_HDR + n * stride, 16, &bsize);
    /* a growing zone grows for a run rather than serve the class from plain
     * blocks for good */
    if (!b && z->grow_size && zone_grow(z, ZONE_RUN_HDR + n * stride))
        b = zone_take(z, ZONE_RUN_HDR + n * stride, 16, &bsize);
    if (!b) return NULL;
    zone_set_hdr(b, bsize, HK_TAG_STATIC, ZB_USED | (b->bits & ZB_PREV_USED) | ZB_RUN_MARK, 0);
    zone_run *r = zone_run_of_block(b);
    zone_unpoison(r, sizeof *r);
    r->free = NULL;
    r->next = r->prev = NULL;
    r->first = (unsigned char *)r + ZONE_RUN_SLOT0;
    r->stride = stride;
    r->nslots = (uint32_t)n;
    r->used = 0;
    r->bump = 0;
    r->cls = (uint16_t)ci;
    r->state = 0;
    r->lead = (uint8_t)((unsigned char *)r - (unsigned char *)b);
    z->run_bytes += bsize;
    z->nruns++;
    return r;
}

/* Gives the empty run r (on no list) back to the TLSF core. Returns the
 * merged free block. */
static zone_blk *zone_run_release(hk_zone *z, zone_run *r) {
    zone_blk *b = zone_run_block(r);
    size_t size = zone_bsize(b);
    z->run_bytes -= size;
    z->nruns--;
    r->first = NULL; /* a stale slot pointer into it no longer finds a run */
    zone_unpoison(zone_user(b), size - ZONE_HDR);
    zone_blk *m = zone_merge_insert(z, b);
    if (HK__UNLIKELY(z->nregions > 1) && (m->bits & ZB_PREV_USED) && zone_next(m)->size16 == 0)
        zone_maybe_release(z, m);
    return m;
}

/* Gives back every class's spare run and its current run when empty.
 * O(classes). */
static void zone_runs_trim(hk_zone *z) {
    for (unsigned c = 0; c < ZONE_NCLS; c++) {
        zone_run *r = z->cls[c].cur;
        if (r && r->used == 0) {
            z->cls[c].cur = NULL;
            zone_run_release(z, r);
        }
        if ((r = z->cls[c].spare) != NULL) {
            z->cls[c].spare = NULL;
            zone_run_release(z, r);
        }
    }
}

/* A slot of run r (its user pointer), with its header word (index and
 * class) in *word, or NULL when r has none left. */
static inline unsigned char *zone_slot_pop(zone_run *r, uint32_t *word) {
    unsigned char *u = r->free;
    if (u) {
        zone_unpoison(u, sizeof(void *));
        r->free = *(unsigned char **)u;
        *word = zone_from_user(u)->size16 & 0x7ffffu;
        return u;
    }
    if (r->bump < r->nslots) {
        u = r->first + (size_t)r->bump * r->stride + ZONE_HDR;
        /* the header and the 8 bytes before it (the previous slot's last
         * bytes, like a plain block's overlap) stay addressable */
        zone_unpoison(u - ZONE_HDR, ZONE_HDR);
        *word = zone_slot_word(r->bump, r->cls, 0);
        r->bump++;
        return u;
    }
    return NULL;
}

/* The current run of class ci is exhausted (or absent): makes a partial or
 * new run current and takes a slot from it. NULL when no run can be had. */
static HK__NOINLINE unsigned char *zone_slot_refill(hk_zone *z, unsigned ci, zone_run **out, uint32_t *word) {
    zone_cls *c = &z->cls[ci];
    if (c->cur) {
        c->cur->state = ZONE_RUN_FULL;
        c->cur = NULL;
    }
    zone_run *r = c->partial;
    if (r) {
        zone_partial_unlink(c, r);
    } else if ((r = c->spare) != NULL) {
        c->spare = NULL;
    } else if (!(r = zone_run_new(z, ci))) {
        return NULL;
    }
    r->state = ZONE_RUN_CUR;
    c->cur = r;
    *out = r;
    return zone_slot_pop(r, word);
}

/* Makes slot u (just popped from run r, header word `word`) a used block
 * of n bytes. */
static inline void *zone_slot_finish(hk_zone *z, zone_run *r, unsigned char *u, uint32_t word, size_t n) {
    uint32_t slack = r->stride - ZONE_OVERLAP - (uint32_t)n;
    zone_slot_set(zone_from_user(u), word | (slack << 19), HK_TAG_STATIC, ZB_SLOT_USED);
    r->used++;
    zone_unpoison(u, n);
    if (slack > ZONE_OVERLAP) zone_poison(u + n, slack - ZONE_OVERLAP);
    z->slot_bytes += r->stride;
    z->used_req += n;
    z->alloc_count++;
    if (z->used_req > z->peak_used) z->peak_used = z->used_req;
    return u;
}

/* Allocates n <= ZONE_RUN_MAX_REQ bytes from a run, or returns NULL (no
 * report) when no run can be had. O(1). */
static inline void *zone_slot_alloc(hk_zone *z, size_t n) {
    unsigned ci = zone_cls_of(n);
    zone_run *r = z->cls[ci].cur;
    uint32_t word;
    unsigned char *u = r ? zone_slot_pop(r, &word) : NULL;
    if (HK__UNLIKELY(!u)) {
        u = zone_slot_refill(z, ci, &r, &word);
        if (!u) return NULL;
    }
    return zone_slot_finish(z, r, u, word, n);
}

/* A run's state after a slot of it was freed: a full run becomes partial;
 * an empty partial run becomes the class's spare, or goes back to the core
 * when there is one already (the current run stays). */
static void zone_run_settle(hk_zone *z, zone_run *r) {
    zone_cls *c = &z->cls[r->cls];
    if (r->state == ZONE_RUN_FULL) {
        zone_partial_push(c, r);
    } else if (r->state == ZONE_RUN_PARTIAL && r->used == 0) {
        zone_partial_unlink(c, r);
        if (!c->spare) {
            r->state = ZONE_RUN_SPARE;
            c->spare = r;
        } else {
            zone_run_release(z, r);
        }
    }
}

/* Frees the validated used slot b of run r. O(1). */
static inline void zone_slot_free(hk_zone *z, zone_blk *b, zone_run *r) {
    uint32_t stride = r->stride;
    unsigned char *u = zone_user(b);
    z->used_req -= stride - ZONE_OVERLAP - zone_slot_slack(b);
    zone_slot_mark_free(b);
    zone_unpoison(u, sizeof(void *));
    *(unsigned char **)u = r->free;
    r->free = u;
    zone_poison(u, stride - ZONE_HDR);
    z->slot_bytes -= stride;
    z->free_count++;
    if (--r->used == 0 || r->state == ZONE_RUN_FULL) zone_run_settle(z, r);
}

/* Frees every used slot of run r at once (free_tags over HK_TAG_STATIC) and
 * takes r off its class; the caller releases it. Returns the slots freed. */
static size_t zone_run_free_all(hk_zone *z, zone_run *r) {
    size_t n = 0;
    for (uint32_t i = 0; i < r->bump; i++) {
        zone_blk *s = (zone_blk *)(r->first + (size_t)i * r->stride);
        if (s->bits & ZB_USED) {
            z->used_req -= r->stride - ZONE_OVERLAP - zone_slot_slack(s);
            zone_slot_mark_free(s);
            n++;
        }
    }
    r->used = 0;
    z->slot_bytes -= n * r->stride;
    z->free_count += n;
    zone_cls *c = &z->cls[r->cls];
    if (c->cur == r)
        c->cur = NULL;
    else if (c->spare == r)
        c->spare = NULL;
    else if (r->state == ZONE_RUN_PARTIAL)
        zone_partial_unlink(c, r);
    return n;
}

/* The run of the slot whose (check-verified) header is b, or NULL when it
 * names none in region r. */
static inline zone_run *zone_slot_run(const zone_region *rg, const zone_blk *b) {
    if (zone_slot_cls(b) >= ZONE_NCLS) return NULL;
    zone_run *r = zone_run_of_slot(b);
    if ((unsigned char *)r < rg->base + ZONE_HDR || (unsigned char *)r + sizeof *r > rg->end) return NULL;
    if (r->first != (unsigned char *)r + ZONE_RUN_SLOT0 || r->stride != zone_cls_stride(zone_slot_cls(b)) ||
        zone_slot_idx(b) >= r->bump)
        return NULL;
    return r;
}

/* Verifies the canary of a used block; reports and returns 0 when damaged. */
static int zone_canary_ok(hk_zone *z, zone_blk *b, const char *when) {
    size_t area = zone_area(b), req = area - zone_slack(b);
    unsigned char *pad = zone_user(b) + req;
    size_t n = area - req;
    zone_unpoison(pad, n);
    size_t off = hk_fill_check(pad, n, HK_FILL_PAD);
    if (off == n) {
        size_t pe = (b->bits & ZB_EXT) ? n : (n > ZONE_OVERLAP ? n - ZONE_OVERLAP : 0);
        zone_poison(pad, pe);
        return 1;
    }
    const char *name = zone_block_name(b);
    hk__report(
        &z->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_CANARY, zone_user(b), req, name,
        "%s block at %p (%zu bytes, tag %u%s%s%s): canary damaged at byte %zu past the end (write past the "
        "end of the block)",
        when, (void *)zone_user(b), req, b->tag, name ? ", '" : "", name ? name : "", name ? "'" : "", off);
    return 0;
}

/* Reports what p, which falls inside run block b, points at. */
static hk_result zone_classify_in_run(hk_zone *z, const void *p, zone_blk *b, const char *op) {
    zone_run *r = zone_run_of_block(b);
    const unsigned char *a = (const unsigned char *)p;
    if (!zone_run_sane(r, b, zone_bsize(b)))
        return hk__report(&z->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, p, 0, NULL,
                          "%s(%p): the small-block run %p holding it is damaged; nothing freed", op, p,
                          (void *)r);
    if (a < r->first + ZONE_HDR)
        return hk__report(&z->rep, HK_ERR_INVALID, HK_EK_INTERIOR_PTR, p, 0, NULL,
                          "%s(%p): pointer is inside the header of small-block run %p, not a block", op, p,
                          (void *)r);
    size_t idx = (size_t)(a - r->first - ZONE_OVERLAP) / r->stride;
    if (idx >= r->bump)
        return hk__report(&z->rep, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, p, 0, NULL,
                          "%s(%p): pointer is in free space (the unused part of small-block run %p): freed "
                          "already?",
                          op, p, (void *)r);
    zone_blk *s = (zone_blk *)(r->first + idx * r->stride);
    if (!zone_hdr_ok(s) || !zone_is_slot(s))
        return hk__report(&z->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_HEADER, p, 0, NULL,
                          "%s(%p): the header of that block (at %p) is damaged; block left alone", op, p,
                          (void *)((unsigned char *)s + ZONE_OVERLAP));
    if (!(s->bits & ZB_USED))
        return hk__report(
            &z->rep, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, p, zone_area(s), NULL,
            "%s(%p): pointer is in free space (free block %p of %zu bytes in a small-block run): "
            "freed already?",
            op, p, (void *)zone_user(s), zone_area(s));
    if (a == zone_user(s))
        return hk__report(&z->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_HEADER, p, 0, NULL,
                          "%s(%p): the header of that block does not match its run; block left alone", op, p);
    return hk__report(&z->rep, HK_ERR_INVALID, HK_EK_INTERIOR_PTR, p, zone_requested(s), NULL,
                      "%s(%p): pointer is %td bytes into block %p (%zu bytes, tag %u), not its start", op, p,
                      a - zone_user(s), (void *)zone_user(s), zone_requested(s), s->tag);
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
                return hk__report(&z->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_HEADER, p, 0, NULL,
                                  "%s(%p): the header of that block (at %p) is damaged; block left alone", op,
                                  p, (void *)b);
            return hk__report(&z->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_HEADER, p, 0, NULL,
                              "%s(%p): damaged block header at %p found before reaching it; nothing freed",
                              op, p, (void *)b);
        }
        unsigned char *bs = (unsigned char *)b, *be = bs + zone_bsize(b);
        if (a >= bs && a < be && zone_is_run(b)) return zone_classify_in_run(z, p, b, op);
        if (a >= bs && a < be) {
            if ((b->bits & ZB_USED) && b->tag != 0) {
                const char *name = zone_block_name(b);
                return hk__report(
                    &z->rep, HK_ERR_INVALID, HK_EK_INTERIOR_PTR, p, zone_requested(b), name,
                    "%s(%p): pointer is %td bytes into block %p (%zu bytes, tag %u%s%s%s), not its "
                    "start",
                    op, p, a - zone_user(b), (void *)zone_user(b), zone_requested(b), b->tag,
                    name ? ", '" : "", name ? name : "", name ? "'" : "");
            }
            return hk__report(&z->rep, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, p, zone_bsize(b), NULL,
                              "%s(%p): pointer is in free space (free block %p of %zu bytes): freed already?",
                              op, p, (void *)bs, zone_bsize(b));
        }
        b = (zone_blk *)be;
    }
    return hk__report(&z->rep, HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, p, 0, NULL,
                      "%s(%p): pointer is the end marker of a region of this zone, not a block", op, p);
}

/* The index of the region holding p, or -1: the region of the last lookup
 * when p is in it, else a binary search, which moves the hint (so frees
 * alternating between regions do not all search). Lock held, or no lock
 * hooks. */
static inline int zone_find_region(hk_zone *z, const void *p) {
    const zone_region *hr = &z->regions[z->region_hint];
    if (HK__LIKELY(z->region_hint < z->nregions && (const unsigned char *)p >= hr->base &&
                   (const unsigned char *)p < hr->end + ZONE_HDR))
        return (int)z->region_hint;
    int ri = zone_region_index(z, p);
    if (ri >= 0) z->region_hint = (uint32_t)ri;
    return ri;
}

/* Finds the used block whose user pointer is p, or reports why not. */
static zone_blk *zone_lookup(hk_zone *z, const void *p, const char *op, hk_result *res) {
    int ri = zone_find_region(z, p);
    if (HK__UNLIKELY(ri < 0)) {
        *res = hk__report(&z->rep, HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, p, 0, NULL,
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
    if (HK__UNLIKELY(zone_is_poisoned(b, ZONE_HDR) || !zone_hdr_ok(b))) {
        *res = zone_classify_bad(z, p, ri, op);
        return NULL;
    }
    if (zone_is_slot(b)) {
        if (HK__UNLIKELY(!(b->bits & ZB_USED))) {
            size_t n = zone_area(b);
            *res =
                hk__report(&z->rep, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, p, n, NULL,
                           "%s(%p): block %p (%zu bytes, in a small-block run) is already free", op, p, p, n);
            return NULL;
        }
        if (HK__UNLIKELY(b->tag != HK_TAG_STATIC || !zone_slot_run(r, b))) {
            *res = hk__report(&z->rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_HEADER, p, 0, NULL,
                              "%s(%p): the header of that block names no small-block run (damaged or "
                              "stale); block left alone",
                              op, p);
            return NULL;
        }
        *res = HK_OK;
        return b;
    }
    if (HK__UNLIKELY(zone_bsize(b) < ZONE_MIN_BLOCK ||
                     zone_bsize(b) > (size_t)(r->end - (unsigned char *)b))) {
        *res = zone_classify_bad(z, p, ri, op);
        return NULL;
    }
    if (HK__UNLIKELY(zone_is_run(b))) {
        *res = hk__report(&z->rep, HK_ERR_INVALID, HK_EK_INTERIOR_PTR, p, 0, NULL,
                          "%s(%p): pointer is the header of a small-block run, not a block", op, p);
        return NULL;
    }
    if (HK__UNLIKELY(!(b->bits & ZB_USED) || b->tag == 0)) {
        *res = hk__report(&z->rep, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, p, zone_bsize(b), NULL,
                          "%s(%p): block %p (%zu bytes) is already free", op, p, p, zone_bsize(b));
        return NULL;
    }
    *res = HK_OK;
    return b;
}

/* ---- public: create / destroy ------------------------------------------------- */

static void zone_init_ctl(hk_zone *z, const hk_zone_desc *desc) {
    memset(z, 0, sizeof *z);
    z->flags = desc->flags;
    z->runs_on = !(desc->flags & ZONE_RUN_OFF);
    z->purge_level = desc->purge_level > 0 ? desc->purge_level : HK_TAG_PURGELEVEL;
    z->grow_size = desc->grow_size;
    z->max_size = desc->max_size;
    z->seq = 1;
    hk__reporter_init(&z->rep, "zone", desc->name, desc->on_error, desc->error_user, desc->flags);
    z->lock = desc->lock;
}

hk_zone *hk_zone_create(const hk_zone_desc *desc) {
    if (!desc) return NULL;
    if ((desc->lock.lock == NULL) != (desc->lock.unlock == NULL)) return NULL;
    unsigned char *mem;
    size_t size;
    void *os = NULL;
    size_t os_size = 0, reserve = 0;
    size_t ctl = (sizeof(hk_zone) + 63) & ~(size_t)63;
    if (desc->memory) {
        mem = (unsigned char *)desc->memory;
        size = desc->size;
    } else {
        size = desc->size ? desc->size : (desc->grow_size ? desc->grow_size : (size_t)1 << 20);
        if (!hk_size_add(size, ctl + 64, &size) || !hk_size_align(size, hk_os_page_size(), &size))
            return NULL;
        if (desc->grow_size && sizeof(void *) >= 8) {
            /* A growing zone reserves address space after its first region
             * and grows that region in place (see zone_grow); the pages are
             * committed chunk by chunk as before. */
            size_t res = ZONE_RESERVE;
            if (desc->max_size && desc->max_size < ZONE_RESERVE / 2) {
                size_t r2;
                if (hk_size_add(desc->max_size, size, &r2) && hk_size_align(r2, hk_os_page_size(), &r2))
                    res = r2;
            }
            if (res > size) {
                os = hk_os_reserve(res);
                if (os && hk_os_commit(os, size) != HK_OK) {
                    hk_os_release(os, res);
                    os = NULL;
                }
                if (os) reserve = res;
            }
        }
        if (!os) os = hk_os_alloc(size);
        if (!os) return NULL;
        os_size = reserve ? reserve : size;
        if (!zone_prefault(desc->flags, os, size)) {
            hk_os_release(os, os_size);
            return NULL;
        }
        mem = (unsigned char *)os;
    }
    uintptr_t start = hk_align_ptr((uintptr_t)mem, 64);
    if (size < start - (uintptr_t)mem + ctl + HK_ZONE_MIN_REGION) {
        if (os) hk_os_release(os, os_size);
        return NULL;
    }
    hk_zone *z = (hk_zone *)start;
    zone_init_ctl(z, desc);
    z->ctl_os = os;
    z->ctl_os_size = os_size;
    unsigned char *rmem = (unsigned char *)start + ctl;
    size_t rsize = size - (size_t)(rmem - mem);
    if (zone_region_add(z, rmem, rsize, NULL, 0, 0) < 0) {
        if (os) hk_os_release(os, os_size);
        return NULL;
    }
    if (reserve) z->regions[0].reserve_end = (unsigned char *)os + reserve;
    return z;
}

void hk_zone_destroy(hk_zone *z) {
    if (!z) return;
    void *os = z->ctl_os;
    size_t os_size = z->ctl_os_size;
    while (z->nregions) {
        zone_region *r = &z->regions[z->nregions - 1];
        zone_unpoison(r->base, (size_t)(r->end - r->base) + ZONE_HDR);
        if (r->os_base) hk_os_release(r->os_base, r->os_size);
        z->nregions--;
    }
    if (os) hk_os_release(os, os_size);
}

hk_result hk_zone_add_region(hk_zone *z, void *memory, size_t size) {
    if (!z) return HK_ERR_INVALID;
    hk__lock(&z->lock);
    hk_result r = HK_OK;
    if (zone_region_add(z, memory, size, NULL, 0, 1) < 0)
        r = (memory && size >= HK_ZONE_MIN_REGION && z->nregions >= HK_ZONE_MAX_REGIONS) ? HK_ERR_NOMEM
                                                                                         : HK_ERR_INVALID;
    zone_check_after(z);
    hk__unlock(&z->lock);
    return r;
}

/* ---- public: allocation ------------------------------------------------------- */

/* The malloc-like path (untracked, 16-aligned), lock held. */
static void *zone_alloc_plain(hk_zone *z, size_t size) {
    if (HK__LIKELY(z->runs_on && size <= ZONE_RUN_MAX_REQ)) {
        void *u = zone_slot_alloc(z, size);
        if (HK__LIKELY(u != NULL)) return u;
    }
    if (HK__LIKELY(!(z->flags & (HK_ZONE_TRACK_ALL | HK_FLAG_RECORD_SITE | HK_FLAG_CANARY | HK_FLAG_ZERO |
                                 HK_FLAG_FILL | HK_FLAG_PARANOID)) &&
                   size <= ZONE_MAX_REQUEST)) {
        /* The plain block path: no debug work. */
        size_t need = (size + ZONE_PLAIN_OVH + 15) & ~(size_t)15;
        if (need < ZONE_MIN_BLOCK) need = ZONE_MIN_BLOCK;
        size_t bsize;
        zone_blk *b = zone_take(z, need, 16, &bsize);
        if (HK__LIKELY(b != NULL)) {
            unsigned char *user = zone_user(b);
            zone_unpoison(user, bsize - ZONE_HDR);
            zone_set_hdr(b, bsize, HK_TAG_STATIC, ZB_USED | (b->bits & ZB_PREV_USED),
                         (unsigned)(bsize - ZONE_PLAIN_OVH - size));
            if (bsize - ZONE_HDR > size) zone_poison(user + size, bsize - ZONE_HDR - size);
            z->untracked_live++;
            z->used_req += size;
            z->used_bytes += bsize;
            z->alloc_count++;
            if (z->used_req > z->peak_used) z->peak_used = z->used_req;
            return user;
        }
    }
    return zone_alloc_impl(z, size, 16, HK_TAG_STATIC, NULL, NULL, NULL, 0);
}

static HK__NOINLINE void *zone_alloc_locked(hk_zone *z, size_t size) {
    hk__lock(&z->lock);
    void *p = zone_alloc_plain(z, size);
    zone_check_after(z);
    hk__unlock(&z->lock);
    return p;
}

void *hk_zone_alloc(hk_zone *z, size_t size) {
    if (HK__UNLIKELY(!z)) return NULL;
    /* Fast path: a slot from the class's current run, no lock hooks (runs
     * are off with every debug flag, so no check after). */
    if (HK__LIKELY(z->runs_on && size <= ZONE_RUN_MAX_REQ && !z->lock.lock)) {
        zone_run *r = z->cls[zone_cls_of(size)].cur;
        if (HK__LIKELY(r != NULL)) {
            uint32_t word;
            unsigned char *u = zone_slot_pop(r, &word);
            if (HK__LIKELY(u != NULL)) return zone_slot_finish(z, r, u, word, size);
        }
    }
    return zone_alloc_locked(z, size);
}

void *hk_zone_alloc_tagged(hk_zone *z, size_t size, int tag, void **owner, const char *name) {
    if (!z) return NULL;
    hk__lock(&z->lock);
    void *p = zone_alloc_impl(z, size, 16, tag, owner, name, NULL, 0);
    zone_check_after(z);
    hk__unlock(&z->lock);
    return p;
}

void *hk_zone_alloc_ex(hk_zone *z, const hk_zone_alloc_desc *d) {
    if (!z) return NULL;
    hk__lock(&z->lock);
    void *p;
    if (!d) {
        z->fail_count++;
        hk__report(&z->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, 0, NULL, "alloc_ex with a NULL desc");
        p = NULL;
    } else {
        p = zone_alloc_impl(z, d->size, d->align, d->tag, d->owner, d->name, d->file, d->line);
    }
    zone_check_after(z);
    hk__unlock(&z->lock);
    return p;
}

void *hk_zone_calloc(hk_zone *z, size_t count, size_t size) {
    if (!z) return NULL;
    size_t n;
    if (!hk_size_mul(count, size, &n)) {
        hk__lock(&z->lock);
        z->fail_count++;
        hk__report(&z->rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, NULL, size, NULL,
                   "calloc(%zu, %zu): the product overflows", count, size);
        hk__unlock(&z->lock);
        return NULL;
    }
    void *p = hk_zone_alloc(z, n);
    if (p) memset(p, 0, n);
    return p;
}

void *hk_zone_memalign(hk_zone *z, size_t align, size_t size) {
    if (!z) return NULL;
    hk__lock(&z->lock);
    void *p = zone_alloc_impl(z, size, align, HK_TAG_STATIC, NULL, NULL, NULL, 0);
    zone_check_after(z);
    hk__unlock(&z->lock);
    return p;
}

/* ---- public: free -------------------------------------------------------------- */

static HK__NOINLINE hk_result zone_free_locked(hk_zone *z, void *p) {
    hk__lock(&z->lock);
    zone_blk *b;
    hk_result res;
    b = zone_lookup(z, p, "free", &res);
    if (HK__LIKELY(b != NULL) && zone_is_slot(b)) {
        zone_slot_free(z, b, zone_run_of_slot(b));
    } else if (HK__LIKELY(b != NULL)) {
        if (HK__UNLIKELY((z->flags & HK_FLAG_CANARY) && !zone_canary_ok(z, b, "free of")))
            res = HK_ERR_CORRUPT;
        zone_blk *m = zone_release(z, b, 1);
        /* a block spanning a whole region starts with PREV_USED set and ends
         * at the region's end marker (size 0): only then look further */
        if (HK__UNLIKELY(z->nregions > 1) && (m->bits & ZB_PREV_USED) && zone_next(m)->size16 == 0)
            zone_maybe_release(z, m);
    }
    zone_check_after(z);
    hk__unlock(&z->lock);
    return res;
}

hk_result hk_zone_free(hk_zone *z, void *p) {
    if (HK__UNLIKELY(!z)) return HK_ERR_INVALID;
    if (HK__UNLIKELY(!p)) return HK_OK;
    /* Fast path: a used slot, no lock hooks. Anything unusual goes through
     * zone_lookup, which reports. A pointer outside the hinted region (a
     * zone of several regions) finds its region by zone_find_region, which
     * moves the hint, and stays on this path. */
    if (HK__LIKELY(!z->lock.lock)) {
        const zone_region *hr = &z->regions[z->region_hint];
        zone_blk *b = zone_from_user(p);
        int in = (const unsigned char *)b >= hr->base && (const unsigned char *)p <= hr->end;
        if (HK__UNLIKELY(!in) && z->nregions > 1) {
            int ri = zone_find_region(z, p);
            if (ri >= 0) {
                hr = &z->regions[ri];
                in = (const unsigned char *)b >= hr->base && (const unsigned char *)p <= hr->end;
            }
        }
        if (HK__LIKELY(in && !((uintptr_t)p & 15) && !zone_is_poisoned(b, ZONE_HDR) &&
                       (b->bits & (ZB_SLOT_MASK | ZB_USED)) == ZB_SLOT_USED && b->tag == HK_TAG_STATIC &&
                       zone_hdr_ok(b))) {
            zone_run *r = zone_slot_run(hr, b);
            if (HK__LIKELY(r != NULL)) {
                zone_slot_free(z, b, r);
                return HK_OK;
            }
        }
    }
    return zone_free_locked(z, p);
}

size_t hk_zone_usable_size(hk_zone *z, const void *p) {
    if (!z || !p) return 0;
    hk__lock(&z->lock);
    hk_result res;
    zone_blk *b = zone_lookup(z, p, "usable_size", &res);
    size_t n = 0;
    if (b) n = (z->flags & HK_FLAG_CANARY) ? zone_requested(b) : zone_area(b);
    hk__unlock(&z->lock);
    return n;
}

bool hk_zone_owns(hk_zone *z, const void *p) {
    if (!z || !p) return false;
    hk__lock(&z->lock);
    bool ok = false;
    int ri = zone_region_index(z, p);
    uintptr_t a = (uintptr_t)p;
    if (ri >= 0 && !(a & 15) && a >= (uintptr_t)z->regions[ri].base + ZONE_HDR &&
        a <= (uintptr_t)z->regions[ri].end) {
        zone_blk *b = zone_from_user(p);
        if (zone_is_poisoned(b, ZONE_HDR) || !zone_hdr_ok(b))
            ok = false;
        else if (zone_is_slot(b))
            ok = (b->bits & ZB_USED) && b->tag == HK_TAG_STATIC && zone_slot_run(&z->regions[ri], b) != NULL;
        else
            ok = (b->bits & ZB_USED) && b->tag != 0 && !zone_is_run(b) && zone_bsize(b) >= ZONE_MIN_BLOCK &&
                 zone_bsize(b) <= (size_t)(z->regions[ri].end - (unsigned char *)b);
    }
    hk__unlock(&z->lock);
    return ok;
}

/* ---- public: realloc ------------------------------------------------------------ */

/* Re-lays out used block b at its (possibly new) size bsize for n requested
 * bytes, keeping its record. `saved` is the record copied beforehand. */
static void zone_relayout(hk_zone *z, zone_blk *b, size_t bsize, size_t n, const zone_ext *saved,
                          const zone_ext *olde, size_t old_req) {
    int tracked = (b->bits & ZB_EXT) != 0;
    size_t area = bsize - (tracked ? ZONE_EXT_OVH : ZONE_PLAIN_OVH);
    unsigned char *user = zone_user(b);
    zone_unpoison(user, bsize - ZONE_HDR);
    zone_set_hdr(b, bsize, b->tag, b->bits, (unsigned)(area - n));
    if (tracked) {
        zone_ext *e = zone_ext_of(b);
        if (olde && e != olde) {
            /* the record moved with the block's end: relink its neighbours */
            zone_ext **hp = &z->tag_head[b->tag][saved->seq & (ZONE_TAG_WAYS - 1)];
            *e = *saved;
            if (saved->next == olde) {
                e->next = e->prev = e;
            } else {
                e->prev->next = e;
                e->next->prev = e;
            }
            if (*hp == olde) *hp = e;
            e->blk = b;
        } else {
            *e = *saved;
        }
    }
    if (HK__UNLIKELY(z->flags & HK_FLAG_FILL) && n > old_req)
        memset(user + old_req, HK_FILL_ALLOC, n - old_req);
    if (HK__UNLIKELY(z->flags & HK_FLAG_CANARY)) memset(user + n, HK_FILL_PAD, area - n);
    size_t pad_end = tracked ? area : (area > ZONE_OVERLAP ? area - ZONE_OVERLAP : 0);
    if (pad_end > n) zone_poison(user + n, pad_end - n);
    z->used_req = z->used_req - old_req + n;
    if (z->used_req > z->peak_used) z->peak_used = z->used_req;
}

/* Grows the used block b (`old` bytes) in place to at least `need` bytes by
 * taking its free successor nx (old + size of nx >= need); what is left
 * beyond `need`, when it can hold a block, goes back to the free lists.
 * Returns b's new size; the caller rewrites b's header. */
static size_t zone_absorb_next(hk_zone *z, zone_blk *b, zone_blk *nx, size_t old, size_t need) {
    size_t total = old + zone_bsize(nx);
    zone_remove(z, nx);
    zone_unpoison(nx, sizeof(zone_blk));
    if (total - need >= ZONE_MIN_BLOCK) {
        zone_blk *r = (zone_blk *)((unsigned char *)b + need);
        zone_unpoison(r, sizeof(zone_blk));
        zone_set_hdr(r, total - need, 0, ZB_PREV_USED, 0);
        zone_next(r)->prev_size = total - need;
        zone_insert(z, r);
        total = need;
    } else {
        zone_next(nx)->bits |= ZB_PREV_USED;
    }
    z->used_bytes += total - old;
    return total;
}

/* realloc of the used slot b: stays in place while n fits and wastes at
 * most half the slot (or n is of the slot's own class), else moves (to
 * another class or a block). */
static void *zone_slot_realloc(hk_zone *z, zone_blk *b, size_t n) {
    zone_run *r = zone_run_of_slot(b);
    unsigned char *u = zone_user(b);
    size_t area = r->stride - ZONE_OVERLAP, old_req = area - zone_slot_slack(b);
    if (n <= area && (n >= area / 2 || zone_cls_of(n) == zone_slot_cls(b))) {
        size_t slack = area - n;
        zone_slot_set(b, zone_slot_word(zone_slot_idx(b), zone_slot_cls(b), (uint32_t)slack), HK_TAG_STATIC,
                      ZB_SLOT_USED);
        zone_unpoison(u, n);
        if (slack > ZONE_OVERLAP) zone_poison(u + n, slack - ZONE_OVERLAP);
        z->used_req = z->used_req - old_req + n;
        if (z->used_req > z->peak_used) z->peak_used = z->used_req;
        return u;
    }
    if (n > ZONE_MAX_REQUEST)
        return zone_fail(z, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, n, "larger than a zone block (64 GiB)");
    void *q = zone_alloc_plain(z, n);
    if (!q) return NULL; /* reported; the block is unchanged */
    memcpy(q, u, n < old_req ? n : old_req);
    zone_slot_free(z, b, r);
    return q;
}

static void *zone_realloc_impl(hk_zone *z, void *p, size_t n) {
    hk_result res;
    zone_blk *b = zone_lookup(z, p, "realloc", &res);
    if (!b) return NULL;
    if (zone_is_slot(b)) return zone_slot_realloc(z, b, n);
    if ((z->flags & HK_FLAG_CANARY) && !zone_canary_ok(z, b, "realloc of")) {
        /* repair the canary so the block stays usable; the report was made */
        size_t area = zone_area(b), req = area - zone_slack(b);
        zone_unpoison(zone_user(b) + req, area - req);
        memset(zone_user(b) + req, HK_FILL_PAD, area - req);
    }
    int tracked = (b->bits & ZB_EXT) != 0;
    size_t need = zone_need(z, n, tracked);
    if (!need) return zone_fail(z, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, n, "larger than a zone block (64 GiB)");
    size_t old = zone_bsize(b), old_req = zone_requested(b);
    zone_ext saved;
    memset(&saved, 0, sizeof saved);
    zone_ext *olde = tracked ? zone_ext_of(b) : NULL;
    if (tracked) saved = *olde;
    if (need <= old) {
        if (old - need >= ZONE_MIN_BLOCK) {
            z->used_bytes -= old - need;
            zone_set_hdr(b, need, b->tag, b->bits, 0);
            zone_blk *r = zone_next(b);
            zone_unpoison(r, sizeof(zone_blk));
            zone_set_hdr(r, old - need, 0, ZB_PREV_USED, 0);
            zone_unpoison(zone_user(r), old - need - ZONE_HDR);
            if (z->flags & HK_FLAG_FILL) memset(zone_user(r), HK_FILL_FREE, old - need - ZONE_HDR);
            zone_merge_insert(z, r);
            zone_relayout(z, b, need, n, &saved, olde, old_req);
        } else {
            zone_relayout(z, b, old, n, &saved, olde, old_req);
        }
        return p;
    }
    zone_blk *nx = zone_next(b);
    if (!(nx->bits & ZB_USED) && old + zone_bsize(nx) >= need) {
        size_t total = zone_absorb_next(z, b, nx, old, need);
        zone_set_hdr(b, total, b->tag, b->bits, 0);
        zone_relayout(z, b, total, n, &saved, olde, old_req);
        return p;
    }
    /* Move. Keep b out of the purge candidates while allocating. */
    unsigned tag = b->tag;
    if (tracked) zone_tag_unlink(z, b, tag);
    size_t bsize;
    zone_blk *nb = zone_obtain(z, need, zone_align_of(b), &bsize);
    if (tracked) {
        /* b may have moved in the list order; re-append it (it was just used) */
        zone_tag_append(z, b, tag);
    }
    if (!nb) return zone_fail(z, HK_ERR_NOMEM, HK_EK_NOMEM, n, " (realloc; the block is unchanged)");
    void *q = zone_finish(z, nb, bsize, n, tag, b->bits >> ZB_ALIGN_SHIFT, tracked, saved.owner, saved.name,
                          saved.file, saved.line);
    memcpy(q, p, n < old_req ? n : old_req);
    zone_release(z, b, 0);
    return q;
}

void *hk_zone_realloc(hk_zone *z, void *p, size_t size) {
    if (!z) return NULL;
    if (!p) return hk_zone_alloc(z, size);
    hk__lock(&z->lock);
    void *q = zone_realloc_impl(z, p, size);
    zone_check_after(z);
    hk__unlock(&z->lock);
    return q;
}

/* ---- public: tags, purge ------------------------------------------------------- */

hk_result hk_zone_change_tag(hk_zone *z, void *p, int tag) {
    if (!z) return HK_ERR_INVALID;
    hk__lock(&z->lock);
    hk_result res;
    zone_blk *b = zone_lookup(z, p, "change_tag", &res);
    if (!b) goto out;
    if (tag < 1 || tag > HK_ZONE_TAG_MAX) {
        res = hk__report(&z->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, p, zone_requested(b), zone_block_name(b),
                         "change_tag(%p, %d): tag outside 1..%d", p, tag, HK_ZONE_TAG_MAX);
        goto out;
    }
    if (zone_is_slot(b) && tag != HK_TAG_STATIC && tag < z->purge_level) {
        res = hk__report(&z->rep, HK_ERR_NOMEM, HK_EK_NOMEM, p, zone_requested(b), NULL,
                         "change_tag(%p, %d): the block lives in a small-block run, which has no room for "
                         "a tag record (allocate it with hk_zone_alloc_tagged, or use HK_ZONE_TRACK_ALL or "
                         "HK_ZONE_NO_RUNS)",
                         p, tag);
        goto out;
    }
    if ((b->bits & ZB_EXT) && !zone_is_slot(b)) {
        zone_ext *e = zone_ext_of(b);
        if (tag >= z->purge_level && !e->owner) {
            res = hk__report(&z->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, p, zone_requested(b), e->name,
                             "change_tag(%p, %d): a purgeable block needs an owner pointer", p, tag);
            goto out;
        }
        zone_tag_unlink(z, b, b->tag);
        zone_set_hdr(b, zone_bsize(b), (unsigned)tag, b->bits, zone_slack(b));
        zone_tag_append(z, b, (unsigned)tag);
        goto out;
    }
    if (tag == HK_TAG_STATIC) goto out;
    if (tag >= z->purge_level) {
        res = hk__report(&z->rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, p, zone_requested(b), NULL,
                         "change_tag(%p, %d): a purgeable block needs an owner pointer (this block has none)",
                         p, tag);
        goto out;
    }
    {
        /* Untracked -> tracked: find room for the 56-byte record. */
        size_t req = zone_requested(b), old = zone_bsize(b);
        size_t need = zone_need(z, req, 1);
        zone_ext none;
        memset(&none, 0, sizeof none);
        size_t bsize = old;
        if (need > old) {
            zone_blk *nx = zone_next(b);
            if ((nx->bits & ZB_USED) || old + zone_bsize(nx) < need) {
                res = hk__report(
                    &z->rep, HK_ERR_NOMEM, HK_EK_NOMEM, p, req, NULL,
                    "change_tag(%p, %d): the untracked block has no room for its tag record (allocate "
                    "it with a tag, or use HK_ZONE_TRACK_ALL)",
                    p, tag);
                goto out;
            }
            bsize = zone_absorb_next(z, b, nx, old, need);
        }
        z->untracked_live--;
        zone_set_hdr(b, bsize, (unsigned)tag, b->bits | ZB_EXT, 0);
        zone_relayout(z, b, bsize, req, &none, NULL, req);
        zone_tag_append(z, b, (unsigned)tag);
    }
out:
    zone_check_after(z);
    hk__unlock(&z->lock);
    return res;
}

int hk_zone_tag(hk_zone *z, const void *p) {
    if (!z) return 0;
    hk__lock(&z->lock);
    hk_result res;
    zone_blk *b = zone_lookup(z, p, "tag", &res);
    int t = b ? b->tag : 0;
    hk__unlock(&z->lock);
    return t;
}

/* Purges the oldest purgeable block with tag >= level. Returns 1 if one was
 * purged. */
static int zone_purge_one(hk_zone *z, int level) {
    if (level < z->purge_level) level = z->purge_level;
    zone_ext *best = NULL;
    uint32_t best_seq = 0;
    for (int t = zone_next_tag(z, level, HK_ZONE_TAG_MAX); t >= 0;
         t = zone_next_tag(z, t + 1, HK_ZONE_TAG_MAX)) {
        for (unsigned w = 0; w < ZONE_TAG_WAYS; w++) {
            zone_ext *h = z->tag_head[t][w];
            if (h && (!best || (int32_t)(h->seq - best_seq) < 0)) {
                best = h;
                best_seq = h->seq;
            }
        }
    }
    if (!best) return 0;
    z->purge_count++;
    zone_release(z, best->blk, 1);
    return 1;
}

/* Frees the untracked blocks whose tag is in range (walks every region). */
static size_t zone_free_untracked(hk_zone *z) {
    size_t n = 0;
    for (uint32_t i = 0; i < z->nregions && zone_untracked_any(z); i++) {
        zone_region *r = &z->regions[i];
        zone_blk *b = (zone_blk *)r->base;
        while ((unsigned char *)b < r->end) {
            if (zone_is_run(b)) {
                zone_run *run = zone_run_of_block(b);
                n += zone_run_free_all(z, run);
                b = zone_run_release(z, run);
            } else if ((b->bits & (ZB_USED | ZB_EXT)) == ZB_USED && b->tag != 0) {
                b = zone_release(z, b, 0);
                n++;
            }
            b = zone_next(b);
        }
    }
    return n;
}

size_t hk_zone_free_tags(hk_zone *z, int lo, int hi) {
    if (!z) return 0;
    if (lo < 1) lo = 1;
    if (hi > HK_ZONE_TAG_MAX) hi = HK_ZONE_TAG_MAX;
    if (lo > hi) return 0;
    hk__lock(&z->lock);
    size_t n = 0;
    z->bulk = 1;
    /* Pass 1: clear owners while every block is still allocated (an owner
     * may live inside another block being freed). */
    for (int t = zone_next_tag(z, lo, hi); t >= 0; t = zone_next_tag(z, t + 1, hi)) {
        if (!z->tag_owned[t]) continue; /* nobody to tell: skip the extra pass */
        for (unsigned w = 0; w < ZONE_TAG_WAYS; w++) {
            zone_ext *h = z->tag_head[t][w], *e = h;
            if (h) do {
                    if (e->owner) *e->owner = NULL;
                    e = e->next;
                } while (e != h);
        }
    }
    /* Pass 2: free. Each tag's list is detached whole, then walked once:
     * no per-block unlinking (which would touch the next block's record),
     * and the next block's header is fetched while this one is merged. */
    for (int t = zone_next_tag(z, lo, hi); t >= 0; t = zone_next_tag(z, t + 1, hi)) {
        /* Software pipeline over the tag's ZONE_TAG_WAYS lists, one block
         * from each in turn: a block's header and the next record of its
         * list are prefetched a full round before the block is released,
         * so that many cache misses are in flight at once. The records are
         * read before any block is released, and releasing a block never
         * writes inside another used block. */
        zone_ext *cur[ZONE_TAG_WAYS], *head[ZONE_TAG_WAYS];
        zone_blk *pend[ZONE_TAG_WAYS];
        unsigned active = 0;
        for (unsigned w = 0; w < ZONE_TAG_WAYS; w++) {
            head[w] = cur[w] = z->tag_head[t][w];
            z->tag_head[t][w] = NULL;
            pend[w] = NULL;
            if (cur[w]) active++;
        }
        z->tag_map[(unsigned)t >> 6] &= ~(1ull << ((unsigned)t & 63));
        z->tag_count[t] = 0;
        z->tag_owned[t] = 0;
        while (active) {
            for (unsigned w = 0; w < ZONE_TAG_WAYS; w++) {
                if (pend[w]) {
                    zone_release(z, pend[w], -1);
                    pend[w] = NULL;
                }
                zone_ext *e = cur[w];
                if (!e) continue;
                zone_ext *nx = e->next;
                zone_blk *b = e->blk;
                __builtin_prefetch(b);
                __builtin_prefetch(nx);
                pend[w] = b;
                n++;
                if (nx == head[w]) {
                    cur[w] = NULL;
                    active--;
                } else {
                    cur[w] = nx;
                }
            }
        }
        for (unsigned w = 0; w < ZONE_TAG_WAYS; w++)
            if (pend[w]) zone_release(z, pend[w], -1);
    }
    if (lo <= HK_TAG_STATIC && HK_TAG_STATIC <= hi && zone_untracked_any(z)) n += zone_free_untracked(z);
    z->bulk = 0;
    zone_release_empty_regions(z);
    zone_check_after(z);
    hk__unlock(&z->lock);
    return n;
}

size_t hk_zone_purge(hk_zone *z, int level) {
    if (!z) return 0;
    hk__lock(&z->lock);
    size_t n = 0;
    z->bulk = 1;
    while (zone_purge_one(z, level)) n++;
    z->bulk = 0;
    zone_release_empty_regions(z);
    zone_check_after(z);
    hk__unlock(&z->lock);
    return n;
}

/* ---- public: stats ------------------------------------------------------------ */

hk_result hk_zone_stats(const hk_zone *z, hk_stats *out) {
    if (!z || !out) return HK_ERR_INVALID;
    hk__lock(&z->lock);
    memset(out, 0, sizeof *out);
    out->size = (uint32_t)sizeof *out;
    out->version = HK_STATS_VERSION;
    out->allocator = "zone";
    out->capacity = z->capacity;
    out->used = z->used_req;
    out->used_blocks_bytes = z->used_bytes + z->slot_bytes;
    /* free slots and the uncarved part of runs are free for the user */
    out->free = z->free_bytes + (z->run_bytes - z->slot_bytes - z->nruns * ZONE_RUN_HDR);
    if (z->fl_map) {
        unsigned fl = zone_msb(z->fl_map);
        size_t cs = zone_class_start(fl, zone_msb(z->sl_map[fl]));
        size_t ovh =
            ((z->flags & (HK_ZONE_TRACK_ALL | HK_FLAG_RECORD_SITE)) ? ZONE_EXT_OVH : ZONE_PLAIN_OVH) +
            ((z->flags & HK_FLAG_CANARY) ? HK_CANARY_BYTES : 0);
        out->largest_free = cs > ovh ? cs - ovh : 0;
    }
    out->peak_used = z->peak_used;
    out->overhead = out->used_blocks_bytes - z->used_req + sizeof(hk_zone) + z->nregions * ZONE_HDR +
                    z->nruns * ZONE_RUN_HDR;
    out->live_blocks = zone_live(z);
    out->free_blocks = z->free_blocks;
    out->alloc_count = z->alloc_count;
    out->free_count = z->free_count;
    out->fail_count = z->fail_count;
    out->error_count = z->rep.error_count;
    hk__unlock(&z->lock);
    return HK_OK;
}

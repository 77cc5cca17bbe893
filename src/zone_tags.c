/*
 * src/zone_tags.c - DOOM's side of the zone: tag records and the per-tag
 * lists, owner pointers, ending a used plain block, purging, free_tags,
 * change_tag and tag. Calls down into zone_lookup.c, zone_small.c,
 * zone_region.c and zone_tlsf.c; never back into zone.c.
 *
 * Invariants (verified by hk_zone_check):
 *  - every used EXT (tracked) block's record is in the circular list
 *    tag_head[tag][seq % ZONE_TAG_WAYS], oldest first (sequence numbers
 *    non-decreasing from the head), and points back to its block; tag_map
 *    bit t is set iff one of tag t's lists is non-empty; tag_count[t] is the
 *    lists' total length and tag_owned[t] the number of them with an owner.
 *  - untracked used blocks (no EXT) carry tag HK_TAG_STATIC; untracked_live
 *    counts the plain ones (small blocks are counted by their heaps and are
 *    all of tag HK_TAG_STATIC).
 *  - a block with a purgeable tag (>= purge_level) has an owner.
 *  - an owner pointer is cleared before its block is freed, purged or freed
 *    by tag; free_tags clears every owner of the range before it frees the
 *    first block (an owner may live inside another block of the range).
 *  - used_req, used_bytes: the sums over the used plain blocks (requested
 *    bytes, block bytes).
 */
#include "zone_heaps.h"

/* ---- tag lists --------------------------------------------------------------- */

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

/* ---- ending a block, relaying it out ------------------------------------------ */

static inline zone_blk *zone_release(hk_zone *z, zone_blk *b, int clear_owner) {
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
    if (HK__UNLIKELY(ZONE_FLAGS(z) & HK_FLAG_FILL)) memset(zone_user(b), HK_FILL_FREE, size - ZONE_HDR);
    return hk__zone_merge_insert(z, b);
}

/* The entry for the other files; free_tags and purge inline zone_release
 * (free_tags with clear_owner -1 constant). */
zone_blk *hk__zone_release(hk_zone *z, zone_blk *b, int clear_owner) {
    return zone_release(z, b, clear_owner);
}

void hk__zone_relayout(hk_zone *z, zone_blk *b, size_t bsize, size_t n, const zone_ext *saved,
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
    if (HK__UNLIKELY(ZONE_FLAGS(z) & HK_FLAG_FILL) && n > old_req)
        memset(user + old_req, HK_FILL_ALLOC, n - old_req);
    if (HK__UNLIKELY(ZONE_FLAGS(z) & HK_FLAG_CANARY)) memset(user + n, HK_FILL_PAD, area - n);
    size_t pad_end = tracked ? area : (area > ZONE_OVERLAP ? area - ZONE_OVERLAP : 0);
    if (pad_end > n) zone_poison(user + n, pad_end - n);
    z->used_req = z->used_req - old_req + n;
    if (z->used_req > z->peak_used) z->peak_used = z->used_req;
}

/* ---- purging ------------------------------------------------------------------ */

int hk__zone_purge_one(hk_zone *z, int level) {
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
    if (HK__TRACKED(&z->core)) hk__track_free(&z->core, zone_user(best->blk));
    zone_release(z, best->blk, 1);
    return 1;
}

size_t hk_zone_purge(hk_zone *z, int level) {
    if (!z) return 0;
    hk__core_lock(&z->core);
    size_t n = 0;
    z->bulk = 1;
    while (hk__zone_purge_one(z, level)) n++;
    z->bulk = 0;
    hk__zone_release_empty_regions(z);
    hk__core_after(&z->core);
    hk__core_unlock(&z->core);
    return n;
}

/* ---- free_tags ------------------------------------------------------------------- */

/* Frees every untracked block: plain ones (walks every region; skipped once
 * none is left) and every small one (each heap's runs whole: other threads
 * quiescent, as for any free_tags). */
static size_t zone_free_untracked(hk_zone *z) {
    size_t n = 0;
    if (z->small_on) {
        n += hk__zs_heap_free_all(&z->own);
        for (zs_heap *h = z->heaps; h; h = h->next) n += hk__zs_heap_free_all(h);
    }
    for (uint32_t i = 0; i < z->nregions && z->untracked_live; i++) {
        zone_region *r = &z->regions[i];
        zone_blk *b = (zone_blk *)r->base;
        while ((unsigned char *)b < r->end) {
            if ((b->bits & (ZB_USED | ZB_EXT)) == ZB_USED && b->tag != 0) {
                if (HK__TRACKED(&z->core)) hk__track_free(&z->core, zone_user(b));
                b = zone_release(z, b, 0);
                n++;
            }
            b = zone_next(b);
        }
    }
    return n;
}

/* Frees every block of tag t, whose owners are cleared already. Each of the
 * tag's lists is detached whole, then walked once: no per-block unlinking
 * (which would touch the next block's record). A software pipeline over the
 * ZONE_TAG_WAYS lists, one block from each in turn: a block's header and
 * the next record of its list are prefetched a full round before the block
 * is released, so that many cache misses are in flight at once. The records
 * are read before any block is released, and releasing a block never
 * writes inside another used block. */
static size_t zone_free_tag_lists(hk_zone *z, int t) {
    zone_ext *cur[ZONE_TAG_WAYS], *head[ZONE_TAG_WAYS];
    zone_blk *pend[ZONE_TAG_WAYS];
    unsigned active = 0;
    size_t n = 0;
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
                if (HK__TRACKED(&z->core)) hk__track_free(&z->core, zone_user(pend[w]));
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
        if (pend[w]) {
            if (HK__TRACKED(&z->core)) hk__track_free(&z->core, zone_user(pend[w]));
            zone_release(z, pend[w], -1);
        }
    return n;
}

size_t hk_zone_free_tags(hk_zone *z, int lo, int hi) {
    if (!z) return 0;
    if (lo < 1) lo = 1;
    if (hi > HK_ZONE_TAG_MAX) hi = HK_ZONE_TAG_MAX;
    if (lo > hi) return 0;
    hk__core_lock(&z->core);
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
    /* Pass 2: free. */
    for (int t = zone_next_tag(z, lo, hi); t >= 0; t = zone_next_tag(z, t + 1, hi))
        n += zone_free_tag_lists(z, t);
    if (lo <= HK_TAG_STATIC && HK_TAG_STATIC <= hi && zone_untracked_any(z)) n += zone_free_untracked(z);
    z->bulk = 0;
    hk__zone_release_empty_regions(z);
    hk__core_after(&z->core);
    hk__core_unlock(&z->core);
    return n;
}

/* ---- change_tag, tag -------------------------------------------------------------- */

/* change_tag of an untracked plain block to tag (not HK_TAG_STATIC, not
 * purgeable): finds room for the 56-byte record in its slack or the free
 * block after it. */
static hk_result zone_track(hk_zone *z, zone_blk *b, void *p, int tag) {
    size_t req = zone_requested(b), old = zone_bsize(b);
    size_t need = zone_need(z, req, 1);
    zone_ext none;
    memset(&none, 0, sizeof none);
    size_t bsize = old;
    if (need > old) {
        zone_blk *nx = zone_next(b);
        if ((nx->bits & ZB_USED) || old + zone_bsize(nx) < need)
            return hk__report(ZONE_REP(z), HK_ERR_NOMEM, HK_EK_NOMEM, p, req, NULL,
                              "change_tag(%p, %d): the untracked block has no room for its tag record "
                              "(allocate it with a tag, or use HK_ZONE_TRACK_ALL)",
                              p, tag);
        bsize = hk__zone_absorb_next(z, b, nx, old, need);
    }
    z->untracked_live--;
    zone_set_hdr(b, bsize, (unsigned)tag, b->bits | ZB_EXT, 0);
    hk__zone_relayout(z, b, bsize, req, &none, NULL, req);
    zone_tag_append(z, b, (unsigned)tag);
    return HK_OK;
}

/* A small block's tag calls: it has no header, so its tag is always
 * HK_TAG_STATIC. The used block's tag, or 0 after a report of what p is. */
static int zone_small_tag(hk_zone *z, zs_run *r, const void *p, const char *op) {
    if (hk__zs_usable(z->threads ? hk__zone_heap_find(z) : &z->own, r, p)) return HK_TAG_STATIC;
    hk__report(ZONE_REP(z), HK_ERR_INVALID, HK_EK_DOUBLE_FREE, p, 0, NULL,
               "%s(%p): pointer is in the small-block space but no block in use starts there", op, p);
    return 0;
}

static hk_result zone_change_tag_locked(hk_zone *z, void *p, int tag) {
    zs_run *sr = z->small_on ? zs_run_of(&z->small, p) : NULL;
    if (sr) {
        if (!zone_small_tag(z, sr, p, "change_tag")) return HK_ERR_INVALID;
        if (tag == HK_TAG_STATIC) return HK_OK;
        if (tag < 1 || tag > HK_ZONE_TAG_MAX)
            return hk__report(ZONE_REP(z), HK_ERR_INVALID, HK_EK_INVALID_ARG, p, 0, NULL,
                              "change_tag(%p, %d): tag outside 1..%d", p, tag, HK_ZONE_TAG_MAX);
        if (tag >= z->purge_level)
            return hk__report(
                ZONE_REP(z), HK_ERR_INVALID, HK_EK_INVALID_ARG, p, 0, NULL,
                "change_tag(%p, %d): a purgeable block needs an owner pointer (this block has none)", p, tag);
        return hk__report(
            ZONE_REP(z), HK_ERR_NOMEM, HK_EK_NOMEM, p, 0, NULL,
            "change_tag(%p, %d): the block is a small block (no header), which has no room for a "
            "tag record and keeps the static tag; allocate it with a tag, an owner or a name, or "
            "use HK_ZONE_NO_RUNS",
            p, tag);
    }
    hk_result res;
    zone_blk *b = hk__zone_lookup(z, p, "change_tag", &res);
    if (!b) return res;
    if (tag < 1 || tag > HK_ZONE_TAG_MAX)
        return hk__report(ZONE_REP(z), HK_ERR_INVALID, HK_EK_INVALID_ARG, p, zone_requested(b),
                          zone_block_name(b), "change_tag(%p, %d): tag outside 1..%d", p, tag,
                          HK_ZONE_TAG_MAX);
    if (b->bits & ZB_EXT) {
        zone_ext *e = zone_ext_of(b);
        if (tag >= z->purge_level && !e->owner)
            return hk__report(ZONE_REP(z), HK_ERR_INVALID, HK_EK_INVALID_ARG, p, zone_requested(b), e->name,
                              "change_tag(%p, %d): a purgeable block needs an owner pointer", p, tag);
        zone_tag_unlink(z, b, b->tag);
        zone_set_hdr(b, zone_bsize(b), (unsigned)tag, b->bits, zone_slack(b));
        zone_tag_append(z, b, (unsigned)tag);
        return HK_OK;
    }
    if (tag == HK_TAG_STATIC) return HK_OK;
    if (tag >= z->purge_level)
        return hk__report(
            ZONE_REP(z), HK_ERR_INVALID, HK_EK_INVALID_ARG, p, zone_requested(b), NULL,
            "change_tag(%p, %d): a purgeable block needs an owner pointer (this block has none)", p, tag);
    return zone_track(z, b, p, tag);
}

hk_result hk_zone_change_tag(hk_zone *z, void *p, int tag) {
    if (!z) return HK_ERR_INVALID;
    hk__core_lock(&z->core);
    hk_result res = zone_change_tag_locked(z, p, tag);
    hk__core_after(&z->core);
    hk__core_unlock(&z->core);
    return res;
}

int hk_zone_tag(hk_zone *z, const void *p) {
    if (!z) return 0;
    hk__core_lock(&z->core);
    hk_result res;
    zs_run *sr = z->small_on ? zs_run_of(&z->small, p) : NULL;
    zone_blk *b = sr ? NULL : hk__zone_lookup(z, p, "tag", &res);
    int t = sr ? zone_small_tag(z, sr, p, "tag") : b ? b->tag : 0;
    hk__core_unlock(&z->core);
    return t;
}

/*
 * src/cache_check.c - looking at a cache (heapkit/cache.h): check, stats,
 * info, walk, where, and the MacsBug-style dump.
 *
 * Verifies the invariants stated in src/cache_handles.c (the handle table
 * and the LRU clock) and src/cache_region.c (blocks, free index, counters,
 * compaction hint). Reads the cache and writes nothing but the scratch
 * rank[] / order[] arrays; reports the first problem it finds (one report
 * per check) and returns HK_ERR_CORRUPT. hk__cache_check is the core's
 * paranoid hook: it takes no lock (the mutating call that runs it holds it).
 *
 * Calls only the layers below it: cache_region.c (the canary compare) and
 * cache_handles.c (LRU ranks).
 */
#include "cache_internal.h"

#include <stdio.h>

/* ---- check ------------------------------------------------------------------------------ */

static hk_result cache_corrupt(hk_cache *c, const void *at, const char *what, hk_error_kind kind) {
    return hk__report(&c->core.rep, HK_ERR_CORRUPT, kind, at, 0, NULL, "%s (at %p)", what, at);
}

static hk_result cache_check_region(hk_cache *c) {
    unsigned char *lo = c->lo, *end = (unsigned char *)c->end;
    if (((uintptr_t)lo & 15) || ((uintptr_t)end & 15) || end < lo)
        return cache_corrupt(c, lo, "control block damaged: region bounds", HK_EK_CORRUPT_STRUCTURE);
    size_t nfree = 0, free_bytes = 0, used_bytes = 0, req = 0, nused = 0;
    uint32_t prev16 = 0;
    int prev_free = 0, hint_seen = 0;
    cache_blk *b = (cache_blk *)lo, *after_free = NULL;
    while ((unsigned char *)b < end) {
        if ((size_t)(end - (unsigned char *)b) < CACHE_MIN_FREE)
            return cache_corrupt(c, b, "block header runs past the end of the region", HK_EK_CORRUPT_HEADER);
        if (b == c->hint) hint_seen = 1;
        if (b->magic != CACHE_MAGIC_USED && b->magic != CACHE_MAGIC_FREE)
            return cache_corrupt(c, b,
                                 "block header magic damaged (underrun, or overrun of the block before)",
                                 HK_EK_CORRUPT_HEADER);
        if (b->size16 < 2 || cache_bytes(b) > (size_t)(end - (unsigned char *)b))
            return cache_corrupt(c, b, "block size damaged", HK_EK_CORRUPT_HEADER);
        if (b->prev16 != prev16)
            return cache_corrupt(c, b, "previous-size link disagrees with the block before",
                                 HK_EK_CORRUPT_HEADER);
        if (b->magic == CACHE_MAGIC_FREE) {
            if (prev_free)
                return cache_corrupt(c, b, "two adjacent free blocks (not coalesced)",
                                     HK_EK_CORRUPT_STRUCTURE);
            nfree++;
            free_bytes += cache_bytes(b);
            prev_free = 1;
            if (!hint_seen && b != c->hint) after_free = b;
        } else {
            uint32_t idx = cache_slot_index(c, b->handle);
            cache_slot *s = idx < c->high_water ? &c->slots[idx] : NULL;
            if (!s || cache_handle(c, s) != b->handle || cache_data(c, s) != cache_user(b))
                return cache_corrupt(c, b, "block's handle back-pointer and the handle table disagree",
                                     HK_EK_CORRUPT_STRUCTURE);
            if (s->requested + CACHE_HDR + CACHE_MIN_CANARY > cache_bytes(b))
                return cache_corrupt(c, b, "requested size larger than the block", HK_EK_CORRUPT_STRUCTURE);
            if (!hk__cache_canary_ok(c, s, 1)) return HK_ERR_CORRUPT;
            /* a free block below the hint must be followed by a locked block */
            if (after_free && !s->lock)
                return cache_corrupt(c, after_free,
                                     "free block below the compaction hint is not before a locked block",
                                     HK_EK_CORRUPT_STRUCTURE);
            after_free = NULL;
            nused++;
            used_bytes += cache_bytes(b);
            req += s->requested;
            prev_free = 0;
        }
        prev16 = b->size16;
        b = cache_next(b);
    }
    if ((unsigned char *)b != end)
        return cache_corrupt(c, b, "blocks do not tile the region", HK_EK_CORRUPT_STRUCTURE);
    if (after_free)
        return cache_corrupt(c, after_free, "free block below the compaction hint is last",
                             HK_EK_CORRUPT_STRUCTURE);
    if (c->end->magic != CACHE_MAGIC_END || c->end->size16 != 1 || c->end->prev16 != prev16)
        return cache_corrupt(c, c->end, "end sentinel damaged", HK_EK_CORRUPT_HEADER);
    if (!hint_seen && c->hint != c->end)
        return cache_corrupt(c, c->hint, "compaction hint is not a block boundary", HK_EK_CORRUPT_STRUCTURE);
    if (nfree != c->free_blocks || free_bytes != c->free_bytes || used_bytes != c->used_bytes ||
        nused != c->resident || req != c->requested_bytes) {
        hk__report(
            &c->core.rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, lo, 0, NULL,
            "counters disagree with the blocks: free %zu/%zu blocks %zu/%zu bytes, used %zu/%zu bytes, "
            "resident %zu/%u, requested %zu/%zu",
            nfree, c->free_blocks, free_bytes, c->free_bytes, used_bytes, c->used_bytes, nused, c->resident,
            req, c->requested_bytes);
        return HK_ERR_CORRUPT;
    }
    /* the free index: every listed block is a free block of that bin, and
     * the two bitmaps say exactly which bins and levels hold blocks */
    size_t listed = 0;
    for (unsigned f = 0; f < 32u; f++) {
        uint32_t sm = f < CACHE_NFL ? c->sl_map[f] : 0u;
        if (sm && f >= c->nbins / CACHE_SL)
            return cache_corrupt(c, lo, "free-list bitmap names a bin beyond the lists",
                                 HK_EK_CORRUPT_STRUCTURE);
        if (((c->fl_map >> f) & 1u) != (sm != 0u))
            return cache_corrupt(c, lo, "first-level bitmap disagrees with the second-level one",
                                 HK_EK_CORRUPT_STRUCTURE);
    }
    for (unsigned i = 0; i < c->nbins; i++) {
        if ((((uint32_t)c->sl_map[i >> CACHE_SL_BITS] >> (i & (CACHE_SL - 1u))) & 1u) !=
            (c->bins[i] ? 1u : 0u))
            return cache_corrupt(c, c->bins[i], "free-list bitmap disagrees with the lists",
                                 HK_EK_CORRUPT_STRUCTURE);
        cache_blk *prevb = NULL;
        for (cache_blk *f = c->bins[i]; f; f = cache_links_of(f)->next) {
            if ((unsigned char *)f < lo || (unsigned char *)f >= end || ((uintptr_t)f & 15) ||
                f->magic != CACHE_MAGIC_FREE || cache_bin_of(f->size16) != i || f->handle != i ||
                cache_links_of(f)->prev != prevb || ++listed > nfree)
                return cache_corrupt(c, f, "free list damaged", HK_EK_CORRUPT_FREE);
            prevb = f;
        }
    }
    if (listed != nfree)
        return cache_corrupt(c, lo, "a free block is missing from the free lists", HK_EK_CORRUPT_FREE);
    return HK_OK;
}

/* Every invariant; `table` adds the shared handle table's own check
 * (hk__ht_check: its free ring and state bytes, O(slots)), which the walk
 * leaves out: it does not use them, and a walk of a big, mostly unused
 * table should not pay for them. */
static hk_result cache_check_all(hk_cache *c, int table) {
    if (c->lo) {
        hk_result r = cache_check_region(c);
        if (r != HK_OK) return r;
    } else if (c->resident || c->free_blocks || c->used_bytes) {
        return cache_corrupt(c, c, "cache without a region has blocks", HK_EK_CORRUPT_STRUCTURE);
    }
    if (table) {
        hk_result r = hk__ht_check(&c->ht, &c->core.rep, "handle");
        if (r != HK_OK) return r;
    }
    if (c->ht.cap != c->nslots || c->ht.index_mask != c->v.idx_mask || c->idx_bits != c->ht.index_bits ||
        c->high_water > c->nslots)
        return cache_corrupt(c, c, "control block damaged: handle table geometry", HK_EK_CORRUPT_STRUCTURE);
    uint32_t resident = 0, emax = c->v.epoch_max;
    if ((cache_tick(c) & 1u) || !cache_tick(c) || c->v.epoch < 1u || c->v.epoch > emax ||
        emax != c->v.idx_mask - 1u || c->v.probe != (((uint64_t)cache_fast_epoch(c) << 32) | c->v.idx_mask) ||
        (c->v.base & 15u))
        return cache_corrupt(c, c, "control block damaged: LRU clock", HK_EK_CORRUPT_STRUCTURE);
    if (c->sweep >= (c->high_water ? c->high_water : 1u) || !c->sweep_n ||
        (uint64_t)c->sweep_n * (emax - 1u) < c->nslots)
        return cache_corrupt(c, c, "control block damaged: epoch sweep", HK_EK_CORRUPT_STRUCTURE);
    uint32_t candidates = 0;
    for (uint32_t i = 0; i < c->high_water; i++) {
        cache_slot *s = &c->slots[i];
        uint64_t e = cache_hot_get(c, i);
        int cand = cache_is_live(c, s) && s->data && !s->lock && (s->flags & CACHE_SLOT_PURGEABLE);
        if (cand != !!(s->flags & CACHE_SLOT_LISTED))
            return cache_corrupt(c, s,
                                 cand ? "purgeable unlocked block missing from the purge list"
                                      : "handle on the purge list is not a purgeable unlocked block",
                                 HK_EK_CORRUPT_STRUCTURE);
        candidates += (uint32_t)cand;
        if (cache_is_live(c, s)) {
            if (cache_tick(c) - s->stamp >= 0x80000000u) /* raised by the sweep long before */
                return cache_corrupt(c, s, "handle's LRU stamp is ahead of the clock",
                                     HK_EK_CORRUPT_STRUCTURE);
            if (s->data) {
                if (!c->lo || (unsigned char *)s->data < c->lo + CACHE_HDR ||
                    (unsigned char *)s->data >= (unsigned char *)c->end ||
                    cache_blk_of(s->data)->handle != cache_handle(c, s))
                    return cache_corrupt(c, s->data, "handle points outside its block",
                                         HK_EK_CORRUPT_STRUCTURE);
                resident++;
            }
            /* the hot entry deref_fast reads: the block's offset and a cold
             * tag, or a tag of this handle in an epoch that has been (the
             * current one only with the current stamp) */
            uint32_t tag = (uint32_t)(e >> 32), ep = tag ^ cache_handle(c, s);
            int ok = e == cache_hot_cold(i);
            if (s->data && !c->slow && (e & CACHE_OFF_BITS) == cache_hot_offset(c, s->data))
                ok = tag == i || (ep >= 1u && ep <= emax && (ep != c->v.epoch || s->stamp == cache_tick(c)));
            if (!ok)
                return cache_corrupt(c, cache_hot_at(c, i), "handle's hot entry disagrees with its slot",
                                     HK_EK_CORRUPT_STRUCTURE);
        } else if (s->stamp || s->data || s->lock || e != cache_hot_cold(i)) {
            return cache_corrupt(c, s, "dead handle slot holds a block, a stamp or a lock count",
                                 HK_EK_CORRUPT_STRUCTURE);
        }
    }
    /* slots never issued a handle: dead, nothing attached */
    for (uint32_t i = c->high_water; i < c->nslots; i++) {
        const cache_slot *s = &c->slots[i];
        if (hk__ht_word_live(&c->ht, cache_handle(c, s)) || s->stamp || s->data ||
            cache_hot_get(c, i) != cache_hot_cold(i))
            return cache_corrupt(c, s, "handle slot above the high-water mark is in use",
                                 HK_EK_CORRUPT_STRUCTURE);
    }
    /* entries past the table (up to the index mask) must never match */
    for (uint32_t i = c->nslots; i <= c->v.idx_mask; i++)
        if (cache_hot_get(c, i) != cache_hot_cold(i))
            return cache_corrupt(c, cache_hot_at(c, i), "handle table entry past the last slot damaged",
                                 HK_EK_CORRUPT_STRUCTURE);
    if (resident != c->resident)
        return cache_corrupt(c, c->slots, "resident count disagrees with the handle table",
                             HK_EK_CORRUPT_STRUCTURE);
    /* the purge list: every candidate once, oldest first, links both ways */
    uint32_t n = 0, prev = c->nslots, last_age = CACHE_AGE_CAP;
    for (uint32_t i = cache_lru_head(c); i != c->nslots; prev = i, i = cache_lru_next(c, i)) {
        if (i >= c->high_water || ++n > candidates || !(c->slots[i].flags & CACHE_SLOT_LISTED) ||
            c->lru[2u * i + 1u] != prev || cache_age(c, c->slots[i].stamp) > last_age)
            return cache_corrupt(c, c->lru, "purge list damaged (links, members or stamp order)",
                                 HK_EK_CORRUPT_STRUCTURE);
        last_age = cache_age(c, c->slots[i].stamp);
    }
    if (n != candidates || c->listed != candidates || c->lru[2u * c->nslots + 1u] != prev)
        return cache_corrupt(c, c->lru, "purge list damaged (members missing)", HK_EK_CORRUPT_STRUCTURE);
    return HK_OK;
}

hk_result hk__cache_check(void *self) { return cache_check_all((hk_cache *)self, 1); }

hk_result hk_cache_check(hk_cache *c) {
    if (!c) return HK_ERR_INVALID;
    hk__core_lock(&c->core);
    hk_result r = cache_check_all(c, 1);
    hk__core_unlock(&c->core);
    return r;
}

/* ---- introspection ------------------------------------------------------------------ */

hk_result hk_cache_stats(const hk_cache *c, hk_stats *out) {
    if (!c || !out) return HK_ERR_INVALID;
    hk_cache *m = (hk_cache *)(uintptr_t)c;
    hk__core_lock(&m->core);
    memset(out, 0, sizeof *out);
    out->size = (uint32_t)sizeof *out;
    out->version = HK_STATS_VERSION;
    out->allocator = "cache";
    out->capacity = cache_claim_size(c);
    out->used = c->requested_bytes;
    out->used_blocks_bytes = c->used_bytes;
    out->free = c->free_bytes;
    if (c->fl_map) {
        unsigned f = cache_log2(c->fl_map), top = (f << CACHE_SL_BITS) | cache_log2(c->sl_map[f]);
        size_t mx = 0;
        for (cache_blk *b = c->bins[top]; b; b = cache_links_of(b)->next)
            if (cache_bytes(b) > mx) mx = cache_bytes(b);
        out->largest_free = cache_req_for(mx);
    }
    out->peak_used = c->peak_requested;
    out->overhead = (c->used_bytes - c->requested_bytes) + c->table_bytes + HK__CACHE_HOT_OFFSET +
                    (c->lo ? CACHE_HDR * (c->free_blocks + 1) : 0);
    out->live_blocks = c->resident;
    out->free_blocks = c->free_blocks;
    out->alloc_count = c->alloc_count;
    out->free_count = c->free_count;
    out->fail_count = c->fail_count;
    out->error_count = c->core.rep.error_count;
    hk__core_unlock(&m->core);
    return HK_OK;
}

static void cache_info_blk(hk_cache *c, cache_blk *b, hk_block_info *info) {
    memset(info, 0, sizeof *info);
    info->address = cache_user(b);
    info->size = cache_bytes(b) - CACHE_HDR;
    if (b->magic != CACHE_MAGIC_USED) {
        info->overhead = CACHE_HDR;
        return;
    }
    cache_slot *s = cache_slot_of_blk(c, b);
    info->requested = s->requested;
    info->overhead = cache_bytes(b) - s->requested;
    info->flags = HK_BLOCK_USED | (s->lock ? HK_BLOCK_LOCKED : 0u) |
                  ((s->flags & CACHE_SLOT_PURGEABLE) ? HK_BLOCK_PURGEABLE : 0u);
    info->id = cache_handle(c, s);
    info->lock_count = s->lock;
    info->rank = c->rank[s - c->slots];
    info->name = s->name;
}

static void cache_info_empty(const hk_cache *c, const cache_slot *s, hk_block_info *info) {
    memset(info, 0, sizeof *info);
    info->flags = HK_BLOCK_PURGED | (s->lock ? HK_BLOCK_LOCKED : 0u) |
                  ((s->flags & CACHE_SLOT_PURGEABLE) ? HK_BLOCK_PURGEABLE : 0u);
    info->id = cache_handle(c, s);
    info->lock_count = s->lock;
    info->name = s->name;
}

int hk_cache_walk(hk_cache *c, hk_walk_fn fn, void *user) {
    if (!c || !fn) return -1;
    hk__core_lock(&c->core);
    int r = 0;
    if (cache_check_all(c, 0) != HK_OK) { /* the blocks and slots the walk reads */
        r = -1;
        goto out;
    }
    hk__cache_compute_ranks(c);
    hk_block_info info;
    if (c->lo)
        for (cache_blk *b = (cache_blk *)c->lo; b != c->end && !r; b = cache_next(b)) {
            cache_info_blk(c, b, &info);
            r = fn(&info, user);
        }
    for (uint32_t i = 0; i < c->high_water && !r; i++) {
        cache_slot *s = &c->slots[i];
        if (!cache_is_live(c, s) || cache_data(c, s)) continue;
        cache_info_empty(c, s, &info);
        r = fn(&info, user);
    }
out:
    hk__core_unlock(&c->core);
    return r;
}

hk_result hk_cache_where(hk_cache *c, const void *addr, hk_block_info *info) {
    if (!c || !info) return HK_ERR_INVALID;
    hk__core_lock(&c->core);
    hk_result r = HK_ERR_FOREIGN;
    const unsigned char *a = (const unsigned char *)addr;
    if (c->lo && a >= c->lo && a < (unsigned char *)c->end) {
        for (cache_blk *b = (cache_blk *)c->lo; b != c->end; b = cache_next(b))
            if (a < (unsigned char *)cache_next(b)) {
                hk__cache_compute_ranks(c);
                cache_info_blk(c, b, info);
                r = HK_OK;
                break;
            }
    }
    hk__core_unlock(&c->core);
    return r;
}

hk_result hk_cache_get_info(const hk_cache *c, hk_cache_info *out) {
    if (!c || !out) return HK_ERR_INVALID;
    hk_cache *m = (hk_cache *)(uintptr_t)c;
    hk__core_lock(&m->core);
    memset(out, 0, sizeof *out);
    out->region_bytes = cache_claim_size(c);
    out->table_bytes = c->table_bytes;
    out->max_handles = c->nslots;
    out->live_handles = hk__ht_nlive(&c->ht);
    out->empty_handles = out->live_handles - c->resident;
    out->retired_handles = c->ht.nretired;
    out->purge_count = c->purge_count;
    out->moved_bytes = c->moved_bytes;
    hk__core_unlock(&m->core);
    return HK_OK;
}

/* ---- MacsBug-style heap display -------------------------------------------------------- */

/* One formatted piece of the dump to fn (a line is at most 255 bytes: longer
 * ones are cut; no allocation). */
static void cache_out(hk_print_fn fn, void *user, const char *fmt, ...) HK__PRINTF(3, 4);
static void cache_out(hk_print_fn fn, void *user, const char *fmt, ...) {
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fn(line, user);
}

void hk_cache_dump(hk_cache *c, hk_print_fn fn, void *user) {
    if (!c) return;
    if (!fn) fn = hk_print_file;
    hk__core_lock(&c->core);
    hk__cache_compute_ranks(c);
    size_t nrel = 0, nlocked = 0, npurge = 0, nfree = 0, freeb = 0, largest = 0, nempty = 0;
    cache_out(fn, user, "Displaying cache '%s'  region %p..%p (%zu bytes)  handles %u/%u\n",
              c->core.rep.instance, (void *)c->lo,
              c->lo ? (void *)((unsigned char *)c->end + CACHE_HDR) : NULL, cache_claim_size(c),
              hk__ht_nlive(&c->ht), c->nslots);
    cache_out(fn, user, "   Start            Length          Tag Mstr Ptr  Lock Prg  LRU  Name\n");
    if (c->lo)
        for (cache_blk *b = (cache_blk *)c->lo; b != c->end; b = cache_next(b)) {
            if (b->magic == CACHE_MAGIC_FREE) {
                cache_out(fn, user, "   %p %08zx         F\n", (void *)b, cache_bytes(b));
                nfree++;
                freeb += cache_bytes(b);
                if (cache_bytes(b) > largest) largest = cache_bytes(b);
                continue;
            }
            cache_slot *s = cache_slot_of_blk(c, b);
            nrel++;
            if (s->lock) nlocked++;
            if (s->flags & CACHE_SLOT_PURGEABLE) npurge++;
            cache_out(fn, user, "   %p %08zx+%04zx   R   %08x   %s    %s  %5u  %s\n", (void *)b, s->requested,
                      cache_bytes(b) - s->requested, cache_handle(c, s), s->lock ? "L" : " ",
                      (s->flags & CACHE_SLOT_PURGEABLE) ? "P" : " ", c->rank[s - c->slots],
                      cache_nm(s->name));
        }
    for (uint32_t i = 0; i < c->high_water; i++) {
        cache_slot *s = &c->slots[i];
        if (!cache_is_live(c, s) || cache_data(c, s)) continue;
        if (!nempty) cache_out(fn, user, "Empty (purged) handles:\n");
        nempty++;
        cache_out(fn, user, "   %-16s %-15s R   %08x   %s    %s         %s\n", "(nil)", "",
                  cache_handle(c, s), s->lock ? "L" : " ", (s->flags & CACHE_SLOT_PURGEABLE) ? "P" : " ",
                  cache_nm(s->name));
    }
    cache_out(fn, user,
              "Total blocks: %zu  relocatable %zu (locked %zu, purgeable %zu), free %zu; empty handles %zu\n",
              nrel + nfree, nrel, nlocked, npurge, nfree, nempty);
    cache_out(fn, user,
              "Bytes: used %zu (requested %zu), free %zu, largest free %zu; moved by compaction %llu\n",
              c->used_bytes, c->requested_bytes, freeb, largest, (unsigned long long)c->moved_bytes);
    hk__core_unlock(&c->core);
}

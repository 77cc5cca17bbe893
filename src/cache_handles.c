/*
 * src/cache_handles.c - the cache's handle table and its LRU clock
 * (heapkit/cache.h; layout in src/cache_internal.h).
 *
 * The handles are the shared generational table's (src/handles.h): index +
 * generation, fresh slots handed out in index order before freed ones come
 * back through a FIFO ring, ABA-safe retirement of a slot whose generations
 * ran out, an instance tag so another cache's handle is recognised as
 * foreign, and one verdict for every misuse (the table in docs/cache.md).
 * The table keeps its own dense word array; what hk_cache_deref_fast
 * reads is the hot entry (heapkit/detail/cache.h): one 64-bit word per
 * index, HK__CACHE_HOT_OFFSET bytes after the instance, holding a tag
 * (handle ^ epoch) and the block's offset from the base in 8-byte units.
 *
 * Invariants (verified by hk__cache_check, with hk__ht_check for the table):
 *  - slot i < nslots: a live slot holds its block's user address (NULL when
 *    empty: purged) and a non-zero stamp whose age (tick - stamp, 32-bit)
 *    is below 2^31; a dead slot holds data NULL, stamp 0 and lock 0.
 *  - hot entry i (every i <= idx_mask): cold (tag i, offset 0) unless slot
 *    i is live, resident and the cache not slow; then its offset is
 *    (data - base) / 8 and its tag is i (cold) or handle ^ e with
 *    1 <= e <= epoch_max, and when e is the current epoch, the slot's stamp
 *    is the tick (a deref_fast hit changes no rank). A probe h ^ fast_epoch
 *    never has i's index bits (fast_epoch is never 0 and below
 *    2^idx_bits), so a cold tag never hits; nor does a live one of another
 *    generation or epoch.
 *  - every slot at or above high_water is fresh (never issued a handle).
 *  - the tick is even and non-zero; 1 <= epoch <= epoch_max; the probe is
 *    fast_epoch << 32 | idx_mask, fast_epoch the epoch (epoch_max + 1 when
 *    slow).
 *  - the purge list holds exactly the live, resident, unlocked, purgeable
 *    slots (flag CACHE_SLOT_LISTED), linked both ways, ages non-increasing.
 *  - sweep < high_water (0 when none), sweep_n * (epoch_max - 1) >= nslots.
 *
 * The LRU clock: a 32-bit tick (the view's) and stamps in the slots. Slow
 * stamps (alloc, deref, touch, reallocate) are odd: tick + 1, and the tick
 * then moves on by 2, so the tick is always even. Every new tick value is a
 * new epoch: hk_cache_deref_fast hits only entries tagged in the current
 * epoch, and hk__cache_deref_miss stamps a block with the current tick and
 * tags its entry with the current epoch, without advancing either: an
 * increment per access would chain every access through memory, and a tag
 * written only when the epoch changed dirties nothing on repeated accesses.
 * Epochs run 1 .. epoch_max (2^idx_bits - 2, so that an epoch changes only
 * the tag's index bits) and then start again at 1. An old tag must never
 * meet its epoch again (it would hit with an old stamp), so every clock
 * value also sweeps sweep_n hot entries, cyclically over the issued slots,
 * and makes cold any tag of another epoch than the current one
 * (cache_sweep). A tag written in epoch e is looked at by the sweep within
 * the next epoch_max - 1 clock values, all of other epochs, because
 * sweep_n * (epoch_max - 1) >= nslots >= high_water; so it is gone before e
 * comes round again, and no call pays more than sweep_n entries (2, or up
 * to 3 for a table of 3 handles). The tick wraps (skipping 0): stamps are
 * compared by their age, tick - stamp (cache_age), and every age from
 * CACHE_AGE_CAP - 2 (2^30 - 2 clock values, 2^29 stamps) up counts as that
 * one; the same sweep raises a stamp older than CACHE_AGE_CAP to that
 * age (sweep_n slots per clock value, one in a slow cache), so between two
 * visits (at most nslots clock values) no live stamp's raw age reaches 2^31
 * and no call pays for the wrap. Blocks not reached for 2^29 stamps share the oldest rank; the purge
 * order (below) keeps their order exactly.
 *
 * The purge list: a doubly linked list through lru[] (next, prev of slot i
 * at 2i and 2i + 1; the head is entry nslots) of exactly the slots that are
 * live, resident, unlocked and purgeable (flag CACHE_SLOT_LISTED), in
 * stamp order (non-decreasing), least recently used first. A stamp is
 * always the newest, so a stamped slot moves to the end (cache_lru_touch);
 * a slot that becomes a candidate (placed while purgeable, set purgeable,
 * unlocked for the last time) joins at the end and is stamped, so becoming
 * a candidate counts as a use (cache_lru_sync); one that stops being one
 * leaves. Making room purges from the head: O(1) per block purged, no sort.
 */
#include "cache_internal.h"

/* ---- geometry and set-up ---------------------------------------------------------- */

uint32_t hk__cache_table_bits(uint32_t nslots) {
    uint32_t idx_bits = 2;                             /* at least one epoch (heapkit/detail/cache.h) */
    while ((1u << idx_bits) - 1u < nslots) idx_bits++; /* the all-ones index is never a slot */
    return idx_bits;
}

/* Bytes of the hot entries, cold slots, scratch, the purge list and the
 * free lists' heads (the table's storage follows). */
static size_t cache_table_head(uint32_t nslots, uint32_t idx_bits, uint32_t nbins) {
    size_t nhot = (size_t)1 << idx_bits; /* every handle & idx_mask lands in the array */
    return nhot * sizeof(uint64_t) + (size_t)nslots * (sizeof(cache_slot) + 2u * sizeof(uint32_t)) +
           ((size_t)nslots + 1u) * 2u * sizeof(uint32_t) /* the purge list */
           + (size_t)nbins * sizeof(cache_blk *);        /* a multiple of CACHE_SL: 8-byte aligned */
}

uint32_t hk__cache_nbins_for(size_t span) {
    size_t u = span / 16u;
    return ((cache_bin_of(u > UINT32_MAX ? UINT32_MAX : (uint32_t)(u | 1u)) >> CACHE_SL_BITS) + 1u) *
           CACHE_SL;
}

size_t hk__cache_table_bytes(uint32_t nslots, uint32_t idx_bits, uint32_t nbins) {
    size_t ht = hk__ht_storage_size(nslots, 1), n;
    if (!ht || !hk_size_add(cache_table_head(nslots, idx_bits, nbins), ht, &n)) return 0;
    return n;
}

hk_result hk__cache_table_init(hk_cache *c, void *mem, uint32_t nslots, uint32_t idx_bits, uint32_t nbins) {
    size_t nhot = (size_t)1 << idx_bits;
    if ((unsigned char *)mem != (unsigned char *)c + HK__CACHE_HOT_OFFSET) return HK_ERR_INVALID;
    c->slots = (cache_slot *)(void *)((uint64_t *)mem + nhot);
    c->order = (uint32_t *)(void *)(c->slots + nslots);
    c->rank = c->order + nslots;
    c->lru = c->rank + nslots;
    c->lru[2u * nslots] = c->lru[2u * nslots + 1u] = nslots;               /* the purge list: empty */
    c->bins = (cache_blk **)(void *)(c->lru + 2u * ((size_t)nslots + 1u)); /* zeroed: every bin empty */
    c->nbins = nbins;
    c->listed = 0;
    c->nslots = nslots;
    c->idx_bits = idx_bits;
    c->v.idx_mask = (1u << idx_bits) - 1u;
    c->v.epoch_max = (1u << idx_bits) - 2u;
    c->v.epoch = 0; /* the first clock value below makes it 1 */
    /* the sweep passes every slot within epoch_max - 1 clock values */
    c->sweep = 0;
    c->sweep_n = (nslots + c->v.epoch_max - 2u) / (c->v.epoch_max - 1u);
    c->v.probe = ((uint64_t)(c->slow ? c->v.epoch_max + 1u : 0u) << 32) | c->v.idx_mask;
    for (uint32_t i = 0; i <= c->v.idx_mask; i++) *cache_hot_at(c, i) = cache_hot_cold(i);
    c->table_bytes = hk__cache_table_bytes(nslots, idx_bits, nbins);
    hk__ht_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.index_bits = idx_bits;
    cfg.cap = nslots;
    cfg.memory = c->bins + nbins;
    cfg.size = hk__ht_storage_size(nslots, 1); /* the table's own words */
    cache_set_tick(c, 2u);                     /* epoch 1 */
    return hk__ht_init(&c->ht, &cfg);
}

/* ---- misuse --------------------------------------------------------------------------- */

hk_result hk__cache_bad_handle(hk_cache *c, hk_cache_handle h, const char *op, int freeing) {
    return hk__ht_report(&c->ht, &c->core.rep, h.value, freeing, op, "handle", NULL, 0, NULL);
}

/* ---- issuing and retiring handles ------------------------------------------------------ */

cache_slot *hk__cache_slot_new(hk_cache *c) {
    uint32_t h = hk__ht_alloc(&c->ht);
    if (!h) return NULL;
    uint32_t idx = h & c->v.idx_mask;
    if (idx >= c->high_water) c->high_water = idx + 1u;
    cache_slot *s = &c->slots[idx];
    cache_set_data(c, s, NULL);
    s->requested = 0;
    s->name = NULL;
    s->lock = 0;
    s->flags = 0;
    cache_stamp(c, s);
    return s;
}

void hk__cache_slot_release(hk_cache *c, cache_slot *s) {
    uint32_t idx = (uint32_t)(s - c->slots);
    cache_set_data(c, s, NULL);
    s->stamp = 0;
    s->lock = 0;
    s->flags = 0;
    s->name = NULL;
    s->requested = 0;
    (void)hk__ht_free(&c->ht, idx); /* dead word; FIFO reuse or retirement */
}

/* ---- LRU order ------------------------------------------------------------------------------ */

/* Heap sort of order[0..n) by the stamps' ages, youngest first: no
 * allocation, O(n log n). */
static int cache_stamp_before(const hk_cache *c, uint32_t a, uint32_t b) {
    return cache_age(c, cache_stamp_at(c, a)) < cache_age(c, cache_stamp_at(c, b));
}
static void cache_sift(hk_cache *c, uint32_t *o, size_t i, size_t n) {
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && cache_stamp_before(c, o[m], o[l])) m = l;
        if (l + 1 < n && cache_stamp_before(c, o[m], o[l + 1])) m = l + 1;
        if (m == i) return;
        uint32_t t = o[i];
        o[i] = o[m];
        o[m] = t;
        i = m;
    }
}
static void cache_sort(hk_cache *c, size_t n) {
    uint32_t *o = c->order;
    for (size_t i = n / 2; i-- > 0;) cache_sift(c, o, i, n);
    for (size_t k = n; k > 1; k--) {
        uint32_t t = o[0];
        o[0] = o[k - 1];
        o[k - 1] = t;
        cache_sift(c, o, 0, k - 1);
    }
}

void hk__cache_compute_ranks(hk_cache *c) {
    size_t n = 0;
    for (uint32_t i = 0; i < c->high_water; i++)
        if (c->slots[i].data) c->order[n++] = i; /* resident, so live */
    cache_sort(c, n);
    /* rank = how many blocks are newer: blocks of one age share a rank */
    for (size_t k = 0; k < n; k++)
        c->rank[c->order[k]] = k && cache_age(c, cache_stamp_at(c, c->order[k])) ==
                                           cache_age(c, cache_stamp_at(c, c->order[k - 1]))
                                   ? c->rank[c->order[k - 1]]
                                   : (uint32_t)k;
}

/* The tools' announcement of a slot's block moving or ending (here, with
 * the slots, so that cache_region.c and this file do not call each other). */
void hk__cache_track_set(hk_cache *c, const cache_slot *s, const void *p) {
    if (!s->data || s->data == p) return; /* a new block is announced by cache_place */
    if (p)
        hk__track_move(&c->core, s->data, p, s->requested);
    else
        hk__track_free(&c->core, s->data);
}

void hk__cache_lru_join(hk_cache *c, cache_slot *s, int stamp) {
    cache_lru_append(c, (uint32_t)(s - c->slots));
    s->flags |= CACHE_SLOT_LISTED;
    c->listed++;
    if (stamp) cache_stamp(c, s);
}

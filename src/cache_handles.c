/*
 * src/cache_handles.c - the cache's handle table and its LRU clock
 * (heapkit/cache.h; layout in src/cache_internal.h).
 *
 * The handles are the shared generational table's (src/handles.h): index +
 * generation, fresh slots handed out in index order before freed ones come
 * back through a FIFO ring, ABA-safe retirement of a slot whose generations
 * ran out, an instance tag so another cache's handle is recognised as
 * foreign, and one verdict for every misuse (the table in docs/cache.md).
 * The table's word for slot i is kept in the cache's hot entry i
 * (hk__cache_hot.handle, step 4 words), next to the block address and the
 * LRU stamp that hk_cache_deref_fast reads with it in one load.
 *
 * Invariants (verified by hk__cache_check, with hk__ht_check for the table):
 *  - hot entry i < nslots: a live slot holds its handle, its block's user
 *    address (NULL when empty: purged) and a stamp <= the tick; a dead slot
 *    holds the table's dead word, stamp 0, data NULL, and its cold slot has
 *    lock 0. Entries from nslots to idx_mask stay all zero (no handle can
 *    match them: a handle is never 0 and the handle with index idx_mask is
 *    never issued).
 *  - every slot at or above high_water is fresh (never issued a handle).
 *  - the tick is even and non-zero.
 *
 * The LRU clock: a 32-bit tick kept in the view's tick_key (high half) and
 * stamps in the hot entries. Slow stamps (alloc, deref, touch, reallocate)
 * are odd: tick + 1, and the tick then moves on by 2, so the tick is always
 * even. hk_cache_deref_fast hits only entries stamped with the current (even)
 * tick and hk__cache_deref_miss stamps with it without advancing it: an
 * increment per access would chain every access through memory, and a stamp
 * written only when it changes dirties nothing on repeated accesses. Before
 * the tick would wrap, the stamps of live slots are renumbered in order
 * (hk__cache_renumber). Dead entries have stamp 0 and the tick is never 0,
 * so they never hit, even when their dead word is all ones.
 */
#include "cache_internal.h"

/* ---- geometry and set-up ---------------------------------------------------------- */

uint32_t hk__cache_table_bits(uint32_t nslots) {
    uint32_t idx_bits = 1;
    while ((1u << idx_bits) - 1u < nslots) idx_bits++; /* the all-ones index is never a slot */
    return idx_bits;
}

/* Bytes of the hot entries, cold slots and scratch (the table's storage follows). */
static size_t cache_table_head(uint32_t nslots, uint32_t idx_bits) {
    size_t nhot = (size_t)1 << idx_bits; /* every handle & idx_mask lands in the array */
    return nhot * sizeof(hk__cache_hot) + (size_t)nslots * (sizeof(cache_slot) + 2u * sizeof(uint32_t));
}

size_t hk__cache_table_bytes(uint32_t nslots, uint32_t idx_bits) {
    size_t ht = hk__ht_storage_size(nslots, 0), n;
    if (!ht || !hk_size_add(cache_table_head(nslots, idx_bits), ht, &n)) return 0;
    return n;
}

hk_result hk__cache_table_init(hk_cache *c, void *mem, uint32_t nslots, uint32_t idx_bits) {
    size_t nhot = (size_t)1 << idx_bits;
    c->v.hot = (hk__cache_hot *)mem;
    c->slots = (cache_slot *)(void *)(c->v.hot + nhot);
    c->order = (uint32_t *)(void *)(c->slots + nslots);
    c->rank = c->order + nslots;
    c->nslots = nslots;
    c->idx_bits = idx_bits;
    c->v.idx_mask = (1u << idx_bits) - 1u;
    c->table_bytes = hk__cache_table_bytes(nslots, idx_bits);
    hk__ht_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.index_bits = idx_bits;
    cfg.cap = nslots;
    cfg.memory = c->rank + nslots;
    cfg.size = hk__ht_storage_size(nslots, 0);
    cfg.words = &c->v.hot[0].handle;
    cfg.step = (uint32_t)(sizeof(hk__cache_hot) / sizeof(uint32_t));
    cache_set_tick(c, 2u);
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
    cache_hot_at(c, idx)->data = NULL;
    s->requested = 0;
    s->name = NULL;
    s->lock = 0;
    s->flags = 0;
    cache_stamp(c, s);
    return s;
}

void hk__cache_slot_release(hk_cache *c, cache_slot *s) {
    uint32_t idx = (uint32_t)(s - c->slots);
    hk__cache_hot *e = cache_hot_at(c, idx);
    e->data = NULL;
    e->stamp = 0;
    s->lock = 0;
    s->flags = 0;
    s->name = NULL;
    s->requested = 0;
    (void)hk__ht_free(&c->ht, idx); /* dead word; FIFO reuse or retirement */
}

/* ---- LRU order ------------------------------------------------------------------------------ */

/* Heap sort of order[0..n) by slot stamp: no allocation, O(n log n). */
static int cache_stamp_before(const hk_cache *c, uint32_t a, uint32_t b, int desc) {
    uint32_t x = cache_stamp_at(c, a), y = cache_stamp_at(c, b);
    return desc ? x > y : x < y;
}
static void cache_sift(hk_cache *c, uint32_t *o, size_t i, size_t n, int desc) {
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && cache_stamp_before(c, o[m], o[l], desc)) m = l;
        if (l + 1 < n && cache_stamp_before(c, o[m], o[l + 1], desc)) m = l + 1;
        if (m == i) return;
        uint32_t t = o[i];
        o[i] = o[m];
        o[m] = t;
        i = m;
    }
}
static void cache_sort(hk_cache *c, size_t n, int desc) {
    uint32_t *o = c->order;
    for (size_t i = n / 2; i-- > 0;) cache_sift(c, o, i, n, desc);
    for (size_t k = n; k > 1; k--) {
        uint32_t t = o[0];
        o[0] = o[k - 1];
        o[k - 1] = t;
        cache_sift(c, o, 0, k - 1, desc);
    }
}

void hk__cache_compute_ranks(hk_cache *c) {
    size_t n = 0;
    for (uint32_t i = 0; i < c->high_water; i++)
        if (cache_hot_at(c, i)->data) c->order[n++] = i; /* resident, so live */
    cache_sort(c, n, 1);
    /* rank = how many blocks are newer: blocks with one stamp share a rank */
    for (size_t k = 0; k < n; k++)
        c->rank[c->order[k]] = k && cache_stamp_at(c, c->order[k]) == cache_stamp_at(c, c->order[k - 1])
                                   ? c->rank[c->order[k - 1]]
                                   : (uint32_t)k;
}

/* Renumbers the stamps of the live slots 1, 3, 5, ... in their order (equal
 * stamps stay equal) and sets the tick above them, before it would wrap. */
void hk__cache_renumber(hk_cache *c) {
    size_t n = 0;
    for (uint32_t i = 0; i < c->high_water; i++)
        if (cache_is_live(c, &c->slots[i])) c->order[n++] = i;
    cache_sort(c, n, 0);
    uint32_t next = 1, prev = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t st = cache_stamp_at(c, c->order[k]);
        if (k && st != prev) next += 2;
        prev = st;
        cache_set_stamp(c, c->order[k], next);
    }
    cache_set_tick(c, next + 1u);
}

size_t hk__cache_purge_candidates(hk_cache *c) {
    size_t n = 0;
    for (uint32_t i = 0; i < c->high_water; i++)
        if (cache_purgeable(c, &c->slots[i])) c->order[n++] = i;
    cache_sort(c, n, 0);
    return n;
}

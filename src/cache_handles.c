/*
 * src/cache_handles.c - the cache's handle table and its LRU clock
 * (heapkit/cache.h; layout in src/cache_internal.h).
 *
 * Invariants (verified by hk__cache_check):
 *  - A live handle's value is (gen << idx_bits) | index with
 *    gen_base <= gen <= gen_max (never 0); its hot entry's key holds the
 *    value in the low half and the LRU stamp in the high half; its data is
 *    the block's user address, or NULL when the handle is empty (purged).
 *  - Unused entries (also past nslots, up to idx_mask) have key 0 and data
 *    NULL, so no handle ever matches them. Slots never used are handed out
 *    first (high_water); freed slots wait in a FIFO queue (fq_head/fq_tail),
 *    so a freed handle's slot is reused as late as possible; a slot whose
 *    generation would pass gen_max is retired for good.
 *  - live + queued + retired == high_water.
 *  - No stamp is ahead of the tick, which is even and non-zero.
 *
 * The LRU clock: a 32-bit tick kept in the view's tick_key (high half) and
 * stamps in the hot entries' keys (high half). Slow stamps (alloc, deref,
 * touch, reallocate) are odd: tick + 1, and the tick then moves on by 2, so
 * the tick is always even. hk_cache_deref_fast hits only entries stamped
 * with the current (even) tick and hk__cache_deref_miss stamps with it
 * without advancing it: an increment per access would chain every access
 * through memory, and a stamp written only when it changes dirties nothing
 * on repeated accesses. Before the tick would wrap, the stamps of live
 * slots are renumbered in order (hk__cache_renumber). Unused entries have
 * key 0 and the tick is never 0, so they never hit.
 *
 * Each instance starts its generations at its own offset, so a handle from
 * another cache is usually reported as foreign rather than stale.
 */
#include "cache_internal.h"

/* ---- geometry and set-up ---------------------------------------------------------- */

uint32_t hk__cache_table_bits(uint32_t nslots) {
    uint32_t idx_bits = 1;
    while ((1u << idx_bits) < nslots) idx_bits++;
    return idx_bits;
}

size_t hk__cache_table_bytes(uint32_t nslots, uint32_t idx_bits) {
    size_t nhot = (size_t)1 << idx_bits; /* every handle & idx_mask lands in the table */
    return nhot * sizeof(hk__cache_hot) + (size_t)nslots * (sizeof(cache_slot) + 2u * sizeof(uint32_t));
}

static uint32_t cache_instances;

void hk__cache_table_init(hk_cache *c, void *mem, uint32_t nslots, uint32_t idx_bits) {
    size_t nhot = (size_t)1 << idx_bits;
    c->v.hot = (hk__cache_hot *)mem;
    c->slots = (cache_slot *)(void *)(c->v.hot + nhot);
    c->order = (uint32_t *)(void *)(c->slots + nslots);
    c->rank = c->order + nslots;
    c->nslots = nslots;
    c->idx_bits = idx_bits;
    c->v.idx_mask = (1u << idx_bits) - 1u;
    c->gen_max = (uint32_t)((1ull << (32u - idx_bits)) - 2u);
    uint32_t k = __atomic_fetch_add(&cache_instances, 1u, __ATOMIC_RELAXED);
    c->gen_base = 1u + (uint32_t)(((uint64_t)k * 2654435761u) % ((uint64_t)c->gen_max / 4u + 1u));
    c->table_bytes = hk__cache_table_bytes(nslots, idx_bits);
    cache_set_tick(c, 2u);
}

/* ---- misuse --------------------------------------------------------------------------- */

hk_result hk__cache_bad_handle(hk_cache *c, hk_cache_handle h, const char *op) {
    if (h.value == 0)
        return hk__report(&c->core.rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, 0, NULL,
                          "%s: the none handle (0)", op);
    uint32_t idx = cache_slot_index(c, h.value), g = h.value >> c->idx_bits;
    if (idx < c->high_water && g >= c->gen_base && g < c->slots[idx].gen) {
        const cache_slot *s = &c->slots[idx];
        return hk__report(
            &c->core.rep, HK_ERR_STALE, HK_EK_STALE, (const void *)(uintptr_t)h.value, 0, NULL,
            "%s: handle 0x%08x is stale: its block was freed (slot %u is now at generation %u%s)", op,
            h.value, idx + 1, s->gen, (s->flags & CACHE_SLOT_RETIRED) ? ", retired" : "");
    }
    return hk__report(&c->core.rep, HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, (const void *)(uintptr_t)h.value, 0,
                      NULL,
                      "%s: handle 0x%08x does not belong to this cache (slot %u, generation %u never issued)",
                      op, h.value, idx + 1, g);
}

/* ---- issuing and retiring handles ------------------------------------------------------ */

cache_slot *hk__cache_slot_new(hk_cache *c) {
    uint32_t idx;
    if (c->high_water < c->nslots) {
        idx = c->high_water++;
        c->slots[idx].gen = c->gen_base;
    } else if (c->fq_head) {
        idx = c->fq_head - 1u;
        c->fq_head = c->slots[idx].link;
        if (!c->fq_head) c->fq_tail = 0;
    } else {
        return NULL;
    }
    cache_slot *s = &c->slots[idx];
    hk__cache_hot *e = cache_hot_at(c, idx);
    e->key = (s->gen << c->idx_bits) | idx;
    e->data = NULL;
    s->requested = 0;
    s->name = NULL;
    s->lock = 0;
    s->flags = 0;
    s->link = 0;
    cache_stamp(c, s);
    c->live++;
    return s;
}

void hk__cache_slot_release(hk_cache *c, cache_slot *s) {
    uint32_t idx = (uint32_t)(s - c->slots);
    cache_hot_at(c, idx)->key = 0;
    cache_hot_at(c, idx)->data = NULL;
    s->lock = 0;
    s->name = NULL;
    s->requested = 0;
    c->live--;
    if (s->gen >= c->gen_max) {
        s->gen = c->gen_max + 1u;
        s->flags = CACHE_SLOT_RETIRED;
        c->retired++;
        return;
    }
    s->gen++;
    s->flags = 0;
    s->link = 0;
    if (c->fq_tail)
        c->slots[c->fq_tail - 1u].link = idx + 1u;
    else
        c->fq_head = idx + 1u;
    c->fq_tail = idx + 1u;
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
        if (cache_hot_at(c, i)->key && cache_hot_at(c, i)->data) c->order[n++] = i;
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
        if (cache_hot_at(c, i)->key) c->order[n++] = i;
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

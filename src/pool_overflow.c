/*
 * src/pool_overflow.c - the pool's overflow path: objects allocated from
 * the backing hooks once every fast slot is taken, addressed by IDs whose
 * index bits are the overflow mark (2^index_bits - 1) and whose generation
 * field is a key from the pool's sequence.
 *
 * Invariants (verified by hk_pool_check, pool_check.c):
 *  - Every ALIVE or DYING overflow slot s has an object (its pool_ovf .raw),
 *    its ID (key << index_bits) | mark with key != 0 in the ID hash (oid,
 *    key = ID) and its object address in the address hash (optr), both
 *    mapping to s; no other keys are in the hashes.
 *  - Overflow slots live in segments that never move (segment k: 64 << k
 *    slots); slots ohigh .. ocap - 1 were never used and are not
 *    initialised. FREE overflow slots below ohigh hold no memory and sit on
 *    the free list (ofree_head through meta.next); they keep the ID of
 *    their last occupant.
 *  - Keys are issued in the handle table's sequence order after okey_last,
 *    skipping keys still live; okey_issued counts keys issued (saturating
 *    at gmax), so a key is "issued" iff its ordinal is <= okey_last's.
 *  - Hash tables: open addressing, linear probing, load <= 1/2, deletion by
 *    backward shift, key 0 is the empty marker. While a table grows, the
 *    next one (twice the size) is zeroed POOL_HASH_ZERO_STEP buckets per
 *    insert, then becomes the table, and the previous one is moved into it
 *    POOL_HASH_MOVE_STEP buckets per insert; a key is in the table, or not
 *    yet moved from the previous one (where deleted keys are tombstones,
 *    POOL_HASH_TOMB, the only place they exist); n counts the live keys.
 */
#include "pool_internal.h"

/* ---- overflow segments ---------------------------------------------------------- */

/* Overflow slot o: its segment (64 << k slots from slot 64 * (2^k - 1)),
 * the slot's place in it and the segment's slot count. */
static inline unsigned char *pool_oseg(const hk_pool *p, uint32_t o, uint32_t *off, uint32_t *n) {
    uint32_t q = (o >> POOL_OSEG_SHIFT) + 1u, k = 31u - (uint32_t)__builtin_clz(q);
    *n = POOL_OSEG0 << k;
    *off = o - (*n - POOL_OSEG0);
    return p->oseg[k];
}
pool_ovf *hk__pool_oo(const hk_pool *p, uint32_t o) {
    uint32_t off, n;
    unsigned char *g = pool_oseg(p, o, &off, &n);
    return (pool_ovf *)(void *)g + off;
}
pool_meta *hk__pool_om(const hk_pool *p, uint32_t o) {
    uint32_t off, n;
    unsigned char *g = pool_oseg(p, o, &off, &n);
    return (pool_meta *)(void *)(g + (size_t)n * sizeof(pool_ovf)) + off;
}
pool_link *hk__pool_ol(const hk_pool *p, uint32_t o, uint32_t link) {
    uint32_t off, n;
    unsigned char *g = pool_oseg(p, o, &off, &n);
    return (pool_link *)(void *)(g + (size_t)n * (sizeof(pool_ovf) + sizeof(pool_meta))) +
           (size_t)off * p->links + link;
}

/* ---- hash tables -------------------------------------------------------------- */

#define POOL_HASH_TOMB      1u  /* a deleted key in a table being moved (never a real key) */
#define POOL_HASH_FIRST     64u /* buckets of the first table */
#define POOL_HASH_ZERO_STEP 64u /* buckets of the next table zeroed per insert */
#define POOL_HASH_MOVE_STEP 16u /* buckets of the previous table moved per insert */

static inline uint32_t pool_hash_pos(uint64_t key, uint32_t shift) {
    return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> shift);
}

uint32_t hk__pool_hash_find(const pool_hash *h, uint64_t key) {
    /* 0 (empty) and 1 (a tombstone) are no real key: a lookup of address 1
     * (hk_pool_id_of of a wild pointer) must not find a tombstone's slot */
    if (key <= POOL_HASH_TOMB) return POOL_NIL;
    if (h->size) {
        uint32_t mask = h->size - 1, i = pool_hash_pos(key, h->shift);
        for (;;) {
            uint64_t k = h->keys[i];
            if (k == key) return h->vals[i];
            if (k == 0) break;
            i = (i + 1) & mask;
        }
    }
    if (h->okeys) { /* not moved yet */
        uint32_t mask = h->osize - 1, i = pool_hash_pos(key, h->oshift);
        for (;;) {
            uint64_t k = h->okeys[i];
            if (k == key) return h->ovals[i];
            if (k == 0) break;
            i = (i + 1) & mask;
        }
    }
    return POOL_NIL;
}

static void pool_hash_put_raw(pool_hash *h, uint64_t key, uint32_t val) {
    uint32_t mask = h->size - 1, i = pool_hash_pos(key, h->shift);
    while (h->keys[i] != 0) i = (i + 1) & mask;
    h->keys[i] = key;
    h->vals[i] = val;
    h->count++;
}

static void pool_hash_free_arrays(hk_pool *p, uint64_t *keys, uint32_t *vals, uint32_t size) {
    if (!keys) return;
    hk__core_backing_free(&p->core, keys, (size_t)size * sizeof(uint64_t));
    hk__core_backing_free(&p->core, vals, (size_t)size * sizeof(uint32_t));
    p->table_bytes -= (size_t)size * (sizeof(uint64_t) + sizeof(uint32_t));
}

/* Allocates the next table (twice the size), not zeroed yet. */
static int pool_hash_start(hk_pool *p, pool_hash *h) {
    uint32_t nsize = h->size ? h->size * 2 : POOL_HASH_FIRST;
    if (nsize == 0 || nsize > (1u << 30)) return 0;
    size_t kb = (size_t)nsize * sizeof(uint64_t), vb = (size_t)nsize * sizeof(uint32_t);
    uint64_t *keys = (uint64_t *)hk__core_backing_alloc(&p->core, kb);
    uint32_t *vals = keys ? (uint32_t *)hk__core_backing_alloc(&p->core, vb) : NULL;
    if (!vals) {
        hk__core_backing_free(&p->core, keys, kb);
        return 0;
    }
    h->nkeys = keys;
    h->nvals = vals;
    h->nsize = nsize;
    h->nzeroed = 0;
    p->table_bytes += kb + vb;
    return 1;
}

/* One step of a running growth: zero POOL_HASH_ZERO_STEP buckets of the
 * next table (switching to it when it is all zeroed), or move
 * POOL_HASH_MOVE_STEP buckets of the previous one (freeing it when all
 * are). O(step). */
static void pool_hash_work(hk_pool *p, pool_hash *h) {
    if (h->nkeys) {
        uint32_t n = h->nsize - h->nzeroed;
        if (n > POOL_HASH_ZERO_STEP) n = POOL_HASH_ZERO_STEP;
        memset(h->nkeys + h->nzeroed, 0, (size_t)n * sizeof(uint64_t));
        h->nzeroed += n;
        if (h->nzeroed < h->nsize) return;
        HK__ASSERT(!h->okeys);
        if (h->size) {
            h->okeys = h->keys;
            h->ovals = h->vals;
            h->osize = h->size;
            h->oshift = h->shift;
            h->omoved = 0;
        }
        h->keys = h->nkeys;
        h->vals = h->nvals;
        h->size = h->nsize;
        h->shift = 64u - (uint32_t)__builtin_ctz(h->nsize);
        h->count = 0;
        h->nkeys = NULL;
        h->nvals = NULL;
        h->nsize = h->nzeroed = 0;
    } else if (h->okeys) {
        uint32_t end =
            h->osize - h->omoved > POOL_HASH_MOVE_STEP ? h->omoved + POOL_HASH_MOVE_STEP : h->osize;
        for (; h->omoved < end; h->omoved++) {
            uint64_t k = h->okeys[h->omoved];
            if (k > POOL_HASH_TOMB) pool_hash_put_raw(h, k, h->ovals[h->omoved]);
        }
        if (h->omoved < h->osize) return;
        pool_hash_free_arrays(p, h->okeys, h->ovals, h->osize);
        h->okeys = NULL;
        h->ovals = NULL;
        h->osize = h->oshift = h->omoved = 0;
    }
}

/* Makes room for one more key (load <= 1/2), doing one step of a running
 * growth and starting one at load 3/8: a growth's zeroing ends before the
 * table reaches 1/2 and its move before the next table reaches 3/8, so an
 * insert never waits for one. Only the first insert (a table of
 * POOL_HASH_FIRST buckets) and one after a failed start finish a growth in
 * place. Returns 0 when memory fails. */
static int pool_hash_reserve(hk_pool *p, pool_hash *h) {
    pool_hash_work(p, h);
    if ((size_t)(h->count + 1) * 2 <= h->size) {
        if (!h->nkeys && !h->okeys && (size_t)(h->count + 1) * 8 > (size_t)h->size * 3)
            (void)pool_hash_start(p, h); /* retried at the next insert when memory fails */
        return 1;
    }
    if (!h->nkeys && !h->okeys && !pool_hash_start(p, h)) return 0;
    while (h->nkeys || (h->okeys && (size_t)(h->count + 1) * 2 > h->size)) pool_hash_work(p, h);
    return (size_t)(h->count + 1) * 2 <= h->size;
}

static void pool_hash_insert(pool_hash *h, uint64_t key, uint32_t val) {
    pool_hash_put_raw(h, key, val);
    h->n++;
}

static void pool_hash_del(pool_hash *h, uint64_t key) {
    h->n--;
    if (h->okeys) { /* a tombstone where it waits to be moved (or was moved from) */
        uint32_t mask = h->osize - 1, i = pool_hash_pos(key, h->oshift);
        for (uint64_t k; (k = h->okeys[i]) != 0; i = (i + 1) & mask)
            if (k == key) {
                h->okeys[i] = POOL_HASH_TOMB;
                break;
            }
    }
    if (!h->size) return;
    uint32_t mask = h->size - 1, i = pool_hash_pos(key, h->shift);
    while (h->keys[i] != key) {
        if (h->keys[i] == 0) return;
        i = (i + 1) & mask;
    }
    /* backward-shift: move later entries of the run into the hole */
    uint32_t hole = i;
    for (uint32_t j = (i + 1) & mask; h->keys[j] != 0; j = (j + 1) & mask) {
        uint32_t home = pool_hash_pos(h->keys[j], h->shift);
        /* j may move to hole when home is not in (hole, j] cyclically */
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            h->keys[hole] = h->keys[j];
            h->vals[hole] = h->vals[j];
            hole = j;
        }
    }
    h->keys[hole] = 0;
    h->count--;
}

static void pool_hash_release(hk_pool *p, pool_hash *h) {
    pool_hash_free_arrays(p, h->keys, h->vals, h->size);
    pool_hash_free_arrays(p, h->nkeys, h->nvals, h->nsize);
    pool_hash_free_arrays(p, h->okeys, h->ovals, h->osize);
    memset(h, 0, sizeof *h);
}

/* ---- overflow slots -------------------------------------------------------------- */

static size_t pool_oseg_bytes(const hk_pool *p, uint32_t k) {
    return (size_t)(POOL_OSEG0 << k) * (sizeof(pool_ovf) + sizeof(pool_meta) + p->links * sizeof(pool_link));
}

/* Makes sure a free overflow slot exists: a freed one, one never used, or
 * a new segment (not initialised: slots are, one at a time, when first
 * used). O(1) + a backing allocation. */
static int pool_ovf_grow(hk_pool *p) {
    if (p->ofree_head != POOL_NIL || p->ohigh < p->ocap) return 1;
    uint32_t k = p->nosegs, n = POOL_OSEG0 << k;
    if (k >= POOL_OSEGS || (uint64_t)p->cap + p->ocap + n > (uint64_t)POOL_NIL - 1u) return 0;
    size_t bytes = pool_oseg_bytes(p, k);
    unsigned char *g = (unsigned char *)hk__core_backing_alloc(&p->core, bytes);
    if (!g) return 0;
    p->oseg[k] = g;
    p->nosegs++;
    p->ocap += n;
    p->table_bytes += bytes;
    return 1;
}

/* Takes the free overflow slot pool_ovf_grow made sure of. */
static uint32_t pool_ovf_take(hk_pool *p) {
    uint32_t s = p->ofree_head;
    if (s != POOL_NIL) {
        p->ofree_head = pool_m(p, s)->next;
        return s;
    }
    s = p->cap + p->ohigh++;
    pool_meta *m = pool_m(p, s);
    memset(m, 0, sizeof *m);
    m->state = POOL_FREE;
    m->parent = m->first_child = m->last_child = m->next_sib = m->prev_sib = POOL_NIL;
    memset(pool_oo(p, s - p->cap), 0, sizeof(pool_ovf));
    return s;
}

void hk__pool_ovf_prepare(hk_pool *p) {
    (void)(pool_ovf_grow(p) && pool_hash_reserve(p, &p->oid) && pool_hash_reserve(p, &p->optr));
}

uint32_t hk__pool_ovf_alloc(hk_pool *p, void **obj_out) {
    const hk__htab *t = &p->hot.ht;
    if (p->ovf_live + (p->npending - t->nheld) >= (size_t)t->gmax - 1)
        return POOL_NIL; /* every key is live */
    if (!pool_ovf_grow(p) || !pool_hash_reserve(p, &p->oid) || !pool_hash_reserve(p, &p->optr))
        return POOL_NIL;
    size_t extra = p->align > POOL_DEFAULT_ALIGN ? p->align - 1 : 0, raw_size;
    if (!hk_size_add(p->elem_size, extra, &raw_size)) return POOL_NIL;
    void *raw = hk__core_backing_alloc(&p->core, raw_size);
    if (!raw) return POOL_NIL;
    void *obj = (void *)hk_align_ptr((uintptr_t)raw, p->align);
    uint32_t key = p->okey_last, id;
    do {
        key = hk__ht_gen_next(t, key);
        id = (key << p->index_bits) | p->mark;
    } while (hk__pool_hash_find(&p->oid, id) != POOL_NIL);
    p->okey_last = key;
    if (p->okey_issued < t->gmax) p->okey_issued++;
    uint32_t s = pool_ovf_take(p);
    pool_meta *m = pool_m(p, s);
    HK__ASSERT(m->parent == POOL_NIL && m->first_child == POOL_NIL && m->nlinked == 0);
    m->next = POOL_NIL;
    m->id = id;
    m->state = POOL_ALIVE;
    m->mflags = 0;
    for (uint32_t k = 0; k < p->links; k++) {
        pool_link *l = pool_l(p, s, k);
        l->prev = l->next = POOL_NIL;
        l->list = 0;
    }
    pool_ovf *o = pool_oo(p, s - p->cap);
    o->obj = obj;
    o->raw = raw;
    o->raw_size = raw_size;
    pool_hash_insert(&p->oid, id, s);
    pool_hash_insert(&p->optr, (uint64_t)(uintptr_t)obj, s);
    p->ovf_live++;
    p->ovf_allocs++;
    p->ovf_bytes += raw_size;
    if (p->ovf_live > p->ovf_peak) p->ovf_peak = p->ovf_live;
    *obj_out = obj;
    return s;
}

void hk__pool_ovf_release(hk_pool *p, uint32_t s) {
    pool_meta *m = pool_m(p, s);
    pool_ovf *o = pool_oo(p, s - p->cap);
    pool_hash_del(&p->oid, m->id);
    pool_hash_del(&p->optr, (uint64_t)(uintptr_t)o->obj);
    if (pool_flags(p) & HK_FLAG_FILL) hk_fill(o->obj, p->elem_size, HK_FILL_FREE);
    hk__core_backing_free(&p->core, o->raw, o->raw_size);
    p->ovf_bytes -= o->raw_size;
    memset(o, 0, sizeof *o);
    m->state = POOL_FREE; /* m->id stays: the double-free verdict reads it */
    m->next = p->ofree_head;
    p->ofree_head = s;
}

hk_result hk__pool_ovf_report(hk_pool *p, uint32_t v, int freeing, const char *what) {
    const hk__htab *t = &p->hot.ht;
    uint32_t g = v >> p->index_bits;
    uint32_t o = hk__pool_hash_find(&p->oid, v);
    if (o != POOL_NIL) { /* DYING: freed inside a defer scope */
        void *obj = pool_oo(p, o - p->cap)->obj;
        if (freeing)
            return hk__report(
                &p->core.rep, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, obj, p->elem_size, NULL,
                "%s of ID 0x%08x: it was already freed (overflow object at %p, release pending)", what, v,
                obj);
        return hk__report(&p->core.rep, HK_ERR_STALE, HK_EK_STALE, obj, p->elem_size, NULL,
                          "%s of stale ID 0x%08x: it was freed (overflow object at %p, release pending)",
                          what, v, obj);
    }
    if (g != 0 && p->okey_issued &&
        (p->okey_issued >= t->gmax || hk__ht_gen_ord(t, g) <= hk__ht_gen_ord(t, p->okey_last))) {
        /* issued and released: a double free when its overflow slot still
         * names it (free, not reused since); the error path may scan */
        for (uint32_t i = 0; freeing && i < p->ohigh; i++) {
            if (pool_om(p, i)->state == POOL_FREE && pool_om(p, i)->id == v)
                return hk__report(&p->core.rep, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE,
                                  (const void *)(uintptr_t)v, p->elem_size, NULL,
                                  "%s of ID 0x%08x: it was already freed (overflow slot %u, free)", what, v,
                                  i);
        }
        return hk__report(&p->core.rep, HK_ERR_STALE, HK_EK_STALE, (const void *)(uintptr_t)v, 0, NULL,
                          "%s of stale ID 0x%08x: the overflow object it named was freed", what, v);
    }
    return hk__report(
        &p->core.rep, HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, (const void *)(uintptr_t)v, 0, NULL,
        "%s of ID 0x%08x: overflow key %u was never issued by this pool (another pool's ID, or a "
        "damaged one)",
        what, v, g);
}

void hk__pool_ovf_destroy(hk_pool *p) {
    pool_hash_release(p, &p->oid);
    pool_hash_release(p, &p->optr);
    for (uint32_t i = 0; i < p->ohigh; i++) {
        pool_ovf *o = pool_oo(p, i);
        if (o->raw) hk__core_backing_free(&p->core, o->raw, o->raw_size);
    }
    for (uint32_t k = 0; k < p->nosegs; k++)
        hk__core_backing_free(&p->core, p->oseg[k], pool_oseg_bytes(p, k));
    p->nosegs = p->ocap = p->ohigh = 0;
}

/*
 * src/pool_overflow.c - the pool's overflow path: objects allocated from
 * the backing hooks once every fast slot is taken, addressed by IDs whose
 * index bits are the overflow mark (2^index_bits - 1) and whose generation
 * field is a key from the pool's sequence.
 *
 * Invariants (verified by hk_pool_check, pool_check.c):
 *  - Every ALIVE or DYING overflow slot s has an object (oobj[s - cap].raw),
 *    its ID (key << index_bits) | mark with key != 0 in the ID hash (oid,
 *    key = ID) and its object address in the address hash (optr), both
 *    mapping to s; no other keys are in the hashes.
 *  - FREE overflow slots hold no memory and sit on the free list (ofree_head
 *    through meta.next); they keep the ID of their last occupant.
 *  - Keys are issued in the handle table's sequence order after okey_last,
 *    skipping keys still live; okey_issued counts keys issued (saturating
 *    at gmax), so a key is "issued" iff its ordinal is <= okey_last's.
 *  - Hash tables: open addressing, linear probing, load <= 1/2, deletion by
 *    backward shift (no tombstones), key 0 is the empty marker.
 */
#include "pool_internal.h"

/* ---- hash tables -------------------------------------------------------------- */

static inline uint32_t pool_hash_pos(const pool_hash *h, uint64_t key) {
    return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> h->shift);
}

uint32_t hk__pool_hash_find(const pool_hash *h, uint64_t key) {
    if (!h->size) return POOL_NIL;
    uint32_t mask = h->size - 1, i = pool_hash_pos(h, key);
    for (;;) {
        uint64_t k = h->keys[i];
        if (k == key) return h->vals[i];
        if (k == 0) return POOL_NIL;
        i = (i + 1) & mask;
    }
}

static void pool_hash_put_raw(pool_hash *h, uint64_t key, uint32_t val) {
    uint32_t mask = h->size - 1, i = pool_hash_pos(h, key);
    while (h->keys[i] != 0) i = (i + 1) & mask;
    h->keys[i] = key;
    h->vals[i] = val;
    h->count++;
}

/* Makes room for one more key (load <= 1/2). Returns 0 when memory fails. */
static int pool_hash_reserve(hk_pool *p, pool_hash *h) {
    if ((size_t)(h->count + 1) * 2 <= h->size) return 1;
    uint32_t nsize = h->size ? h->size * 2 : 64;
    if (nsize == 0 || nsize > (1u << 30)) return 0;
    size_t kb = (size_t)nsize * sizeof(uint64_t), vb = (size_t)nsize * sizeof(uint32_t);
    uint64_t *keys = (uint64_t *)hk__core_backing_alloc(&p->core, kb);
    uint32_t *vals = keys ? (uint32_t *)hk__core_backing_alloc(&p->core, vb) : NULL;
    if (!vals) {
        hk__core_backing_free(&p->core, keys, kb);
        return 0;
    }
    memset(keys, 0, kb);
    pool_hash old = *h;
    h->keys = keys;
    h->vals = vals;
    h->size = nsize;
    h->count = 0;
    h->shift = 64u - (uint32_t)__builtin_ctz(nsize);
    for (uint32_t i = 0; i < old.size; i++)
        if (old.keys[i]) pool_hash_put_raw(h, old.keys[i], old.vals[i]);
    if (old.size) {
        hk__core_backing_free(&p->core, old.keys, (size_t)old.size * sizeof(uint64_t));
        hk__core_backing_free(&p->core, old.vals, (size_t)old.size * sizeof(uint32_t));
    }
    p->table_bytes += kb + vb - (size_t)old.size * (sizeof(uint64_t) + sizeof(uint32_t));
    return 1;
}

static void pool_hash_del(pool_hash *h, uint64_t key) {
    if (!h->size) return;
    uint32_t mask = h->size - 1, i = pool_hash_pos(h, key);
    while (h->keys[i] != key) {
        if (h->keys[i] == 0) return;
        i = (i + 1) & mask;
    }
    /* backward-shift: move later entries of the run into the hole */
    uint32_t hole = i;
    for (uint32_t j = (i + 1) & mask; h->keys[j] != 0; j = (j + 1) & mask) {
        uint32_t home = pool_hash_pos(h, h->keys[j]);
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
    if (h->size) {
        hk__core_backing_free(&p->core, h->keys, (size_t)h->size * sizeof(uint64_t));
        hk__core_backing_free(&p->core, h->vals, (size_t)h->size * sizeof(uint32_t));
    }
    memset(h, 0, sizeof *h);
}

/* ---- overflow slots -------------------------------------------------------------- */

/* Grows the overflow tables so that a free overflow slot exists. */
static int pool_ovf_grow(hk_pool *p) {
    if (p->ofree_head != POOL_NIL) return 1;
    uint32_t ncap = p->ocap ? p->ocap * 2 : 64;
    if (ncap > (POOL_NIL - 1) - p->cap || ncap < p->ocap) return 0;
    size_t mb = (size_t)ncap * sizeof(pool_meta), lb = (size_t)ncap * p->links * sizeof(pool_link),
           ob = (size_t)ncap * sizeof(pool_ovf);
    pool_meta *nm = (pool_meta *)hk__core_backing_alloc(&p->core, mb);
    pool_link *nl = nm && lb ? (pool_link *)hk__core_backing_alloc(&p->core, lb) : NULL;
    pool_ovf *no = nm && (nl || !lb) ? (pool_ovf *)hk__core_backing_alloc(&p->core, ob) : NULL;
    if (!no) {
        hk__core_backing_free(&p->core, nl, lb);
        hk__core_backing_free(&p->core, nm, mb);
        return 0;
    }
    size_t omb = (size_t)p->ocap * sizeof(pool_meta), olb = (size_t)p->ocap * p->links * sizeof(pool_link),
           oob = (size_t)p->ocap * sizeof(pool_ovf);
    if (p->ocap) {
        memcpy(nm, p->ometa, omb);
        if (lb) memcpy(nl, p->olk, olb);
        memcpy(no, p->oobj, oob);
        hk__core_backing_free(&p->core, p->ometa, omb);
        hk__core_backing_free(&p->core, p->olk, olb);
        hk__core_backing_free(&p->core, p->oobj, oob);
    }
    for (uint32_t i = p->ocap; i < ncap; i++) {
        memset(&nm[i], 0, sizeof nm[i]);
        nm[i].state = POOL_FREE;
        nm[i].next = i + 1 < ncap ? p->cap + i + 1 : POOL_NIL;
        nm[i].parent = nm[i].first_child = nm[i].last_child = nm[i].next_sib = nm[i].prev_sib = POOL_NIL;
        memset(&no[i], 0, sizeof no[i]);
    }
    if (lb) memset(nl + (size_t)p->ocap * p->links, 0, lb - olb);
    p->ofree_head = p->cap + p->ocap;
    p->ometa = nm;
    p->olk = lb ? nl : NULL;
    p->oobj = no;
    p->table_bytes += (mb + lb + ob) - (omb + olb + oob);
    p->ocap = ncap;
    return 1;
}

uint32_t hk__pool_ovf_alloc(hk_pool *p, void **obj_out) {
    const hk__htab *t = &p->hot.ht;
    if (p->ovf_live + (p->npending - t->nheld) >= (size_t)t->gmax - 1) return POOL_NIL; /* every key is live */
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
    uint32_t s = p->ofree_head;
    pool_meta *m = pool_m(p, s);
    p->ofree_head = m->next;
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
    pool_ovf *o = &p->oobj[s - p->cap];
    o->obj = obj;
    o->raw = raw;
    o->raw_size = raw_size;
    pool_hash_put_raw(&p->oid, id, s);
    pool_hash_put_raw(&p->optr, (uint64_t)(uintptr_t)obj, s);
    p->ovf_live++;
    p->ovf_allocs++;
    p->ovf_bytes += raw_size;
    if (p->ovf_live > p->ovf_peak) p->ovf_peak = p->ovf_live;
    *obj_out = obj;
    return s;
}

void hk__pool_ovf_release(hk_pool *p, uint32_t s) {
    pool_meta *m = pool_m(p, s);
    pool_ovf *o = &p->oobj[s - p->cap];
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
        void *obj = p->oobj[o - p->cap].obj;
        if (freeing)
            return hk__report(&p->core.rep, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, obj, p->elem_size, NULL,
                              "%s of ID 0x%08x: it was already freed (overflow object at %p, release pending)",
                              what, v, obj);
        return hk__report(&p->core.rep, HK_ERR_STALE, HK_EK_STALE, obj, p->elem_size, NULL,
                          "%s of stale ID 0x%08x: it was freed (overflow object at %p, release pending)", what, v,
                          obj);
    }
    if (g != 0 && p->okey_issued &&
        (p->okey_issued >= t->gmax || hk__ht_gen_ord(t, g) <= hk__ht_gen_ord(t, p->okey_last))) {
        /* issued and released: a double free when its overflow slot still
         * names it (free, not reused since); the error path may scan */
        for (uint32_t i = 0; freeing && i < p->ocap; i++) {
            if (p->ometa[i].state == POOL_FREE && p->ometa[i].id == v)
                return hk__report(&p->core.rep, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE,
                                  (const void *)(uintptr_t)v, p->elem_size, NULL,
                                  "%s of ID 0x%08x: it was already freed (overflow slot %u, free)", what, v, i);
        }
        return hk__report(&p->core.rep, HK_ERR_STALE, HK_EK_STALE, (const void *)(uintptr_t)v, 0, NULL,
                          "%s of stale ID 0x%08x: the overflow object it named was freed", what, v);
    }
    return hk__report(&p->core.rep, HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR, (const void *)(uintptr_t)v, 0, NULL,
                      "%s of ID 0x%08x: overflow key %u was never issued by this pool (another pool's ID, or a "
                      "damaged one)",
                      what, v, g);
}

void hk__pool_ovf_destroy(hk_pool *p) {
    pool_hash_release(p, &p->oid);
    pool_hash_release(p, &p->optr);
    for (uint32_t i = 0; i < p->ocap; i++)
        if (p->oobj[i].raw) hk__core_backing_free(&p->core, p->oobj[i].raw, p->oobj[i].raw_size);
    if (p->ocap) {
        hk__core_backing_free(&p->core, p->ometa, (size_t)p->ocap * sizeof(pool_meta));
        hk__core_backing_free(&p->core, p->olk, (size_t)p->ocap * p->links * sizeof(pool_link));
        hk__core_backing_free(&p->core, p->oobj, (size_t)p->ocap * sizeof(pool_ovf));
    }
    p->ocap = 0;
}

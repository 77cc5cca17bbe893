/*
 * src/pool_tree.c - the pool's parent / child API (heapkit/pool.h, "parent /
 * child"): allocating a child, reparenting with a cycle check, and the tree
 * queries.
 *
 * Invariants kept here (see pool_internal.h): only ALIVE objects have a
 * parent or children (both IDs are resolved first; freeing detaches,
 * pool_slots.c); the parent chain never has a cycle (set_parent walks up
 * from the new parent before linking); a child is its parent's last child
 * after set_parent.
 */
#include "pool_internal.h"

hk_pool_id hk_pool_alloc_child(hk_pool *p, hk_pool_id parent, void **obj) {
    hk_pool_id id = {0};
    if (obj) *obj = NULL;
    if (!p) return id;
    /* The fast case, as the inline hk_pool_alloc: a plain pool (alloc_ok:
     * no lock hooks, hooks or debug flags, no sanitizer), a live fast
     * parent, a free fast slot whose generation does not wrap. Nothing the
     * hot block derives changes but the peak. */
    hk__pool_hot *h = &p->hot;
    uint32_t pv = parent.value, ps = pv & p->imask;
    if (HK__LIKELY(h->alloc_ok && ps < p->cap && h->ht.words[ps] == pv)) {
        POOL_PREFETCH_AHEAD(p);
        uint32_t s, v = hk__ht_alloc_fast(&h->ht, &s);
        if (HK__LIKELY(v != 0)) {
            size_t held = h->hold_base - (size_t)(h->ht.tail - h->ht.head);
            if (held > h->peak) h->peak = held;
            hk__pool_attach(p, s, ps);
            if (obj) *obj = p->base + (size_t)s * p->stride;
            id.value = v;
            return id;
        }
    }
    hk__core_lock(&p->core);
    hk_result r;
    ps = pool_alive_slot(p, parent.value);
    if (ps == POOL_NIL) ps = hk__pool_resolve(p, parent, "alloc_child", 0, &r); /* reports */
    if (ps != POOL_NIL) {
        id = hk__pool_alloc_locked(p, obj);
        if (id.value) hk__pool_attach(p, pool_alive_slot(p, id.value), ps);
    }
    pool_after_op(p);
    hk__core_unlock(&p->core);
    return id;
}

hk_result hk_pool_set_parent(hk_pool *p, hk_pool_id child, hk_pool_id parent) {
    if (!p) return HK_ERR_INVALID;
    hk__core_lock(&p->core);
    hk_result r = HK_OK;
    uint32_t c = hk__pool_resolve(p, child, "set_parent (child)", 0, &r), ps = POOL_NIL;
    if (c != POOL_NIL && parent.value) ps = hk__pool_resolve(p, parent, "set_parent (parent)", 0, &r);
    if (c != POOL_NIL && r == HK_OK) {
        if (ps != POOL_NIL) {
            uint32_t x = ps;
            while (x != POOL_NIL && x != c) x = pool_m(p, x)->parent;
            if (x == c) {
                r = hk__report(&p->core.rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, pool_obj(p, c), p->elem_size,
                               NULL, "set_parent: object 0x%08x cannot become a child of 0x%08x, which is %s",
                               child.value, parent.value, ps == c ? "itself" : "in its own subtree (cycle)");
            }
        }
        if (r == HK_OK && pool_m(p, c)->parent != ps) {
            hk__pool_detach(p, c);
            if (ps != POOL_NIL) hk__pool_attach(p, c, ps);
        }
    }
    pool_after_links(p);
    hk__core_unlock(&p->core);
    return r;
}

static hk_pool_id pool_tree_query(const hk_pool *p, hk_pool_id id, int which) {
    hk_pool_id out = {0};
    if (!p) return out;
    hk__core_lock(&p->core);
    uint32_t s = pool_alive_slot(p, id.value);
    if (s != POOL_NIL) {
        const pool_meta *m = pool_m(p, s);
        uint32_t t = which == 0 ? m->parent : which == 1 ? m->first_child : m->next_sib;
        if (t != POOL_NIL) out.value = pool_id(p, t);
    }
    hk__core_unlock(&p->core);
    return out;
}

hk_pool_id hk_pool_parent(const hk_pool *p, hk_pool_id id) { return pool_tree_query(p, id, 0); }
hk_pool_id hk_pool_first_child(const hk_pool *p, hk_pool_id id) { return pool_tree_query(p, id, 1); }
hk_pool_id hk_pool_next_sibling(const hk_pool *p, hk_pool_id id) { return pool_tree_query(p, id, 2); }

uint32_t hk_pool_child_count(const hk_pool *p, hk_pool_id id) {
    if (!p) return 0;
    hk__core_lock(&p->core);
    uint32_t s = pool_alive_slot(p, id.value);
    uint32_t n = s == POOL_NIL ? 0 : pool_m(p, s)->nchildren;
    hk__core_unlock(&p->core);
    return n;
}

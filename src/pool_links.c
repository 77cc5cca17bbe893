/*
 * src/pool_links.c - the pool's link primitives: putting an object on a
 * list or taking it off (fixing up running list iterations), and attaching
 * an object under a parent or detaching it. The list and tree APIs
 * (pool_lists.c, pool_tree.c) and freeing (pool_slots.c) are built on them.
 *
 * Invariants kept here (see pool_internal.h): list links consistent both
 * ways with head/tail/count; a member's link names its list; nlinked counts
 * an object's lists; a child sits in its parent's doubly-linked child list
 * (first/last, nchildren); busy[s] follows every change; an iteration never
 * reaches a member that left its list.
 */
#include "pool_internal.h"

void hk__pool_list_unlink(hk_pool *p, uint32_t li, uint32_t s) {
    pool_lst *L = &p->lists[li];
    pool_link *l = pool_l(p, s, L->link);
    for (pool_iter *it = p->iters; it; it = it->up) {
        if (it->list != li || it->next == POOL_NIL) continue;
        if (it->next == s)
            it->next = (it->last == s) ? POOL_NIL : l->next;
        else if (it->last == s)
            it->last = l->prev;
    }
    if (l->prev != POOL_NIL)
        pool_l(p, l->prev, L->link)->next = l->next;
    else
        L->head = l->next;
    if (l->next != POOL_NIL)
        pool_l(p, l->next, L->link)->prev = l->prev;
    else
        L->tail = l->prev;
    l->prev = l->next = POOL_NIL;
    l->list = 0;
    L->count--;
    pool_m(p, s)->nlinked--;
    pool_busy_update(p, s);
}

void hk__pool_list_link(hk_pool *p, uint32_t li, uint32_t s, int front) {
    pool_lst *L = &p->lists[li];
    pool_link *l = pool_l(p, s, L->link);
    if (l->list) hk__pool_list_unlink(p, l->list - 1, s);
    l->list = li + 1;
    if (front) {
        l->prev = POOL_NIL;
        l->next = L->head;
        if (L->head != POOL_NIL)
            pool_l(p, L->head, L->link)->prev = s;
        else
            L->tail = s;
        L->head = s;
    } else {
        l->next = POOL_NIL;
        l->prev = L->tail;
        if (L->tail != POOL_NIL)
            pool_l(p, L->tail, L->link)->next = s;
        else
            L->head = s;
        L->tail = s;
    }
    L->count++;
    pool_m(p, s)->nlinked++;
    if (s < p->cap) p->busy[s] = 1; /* on a list now */
}

void hk__pool_detach(hk_pool *p, uint32_t s) {
    pool_meta *m = pool_m(p, s);
    if (m->parent == POOL_NIL) return;
    pool_meta *pm = pool_m(p, m->parent);
    if (m->prev_sib != POOL_NIL)
        pool_m(p, m->prev_sib)->next_sib = m->next_sib;
    else
        pm->first_child = m->next_sib;
    if (m->next_sib != POOL_NIL)
        pool_m(p, m->next_sib)->prev_sib = m->prev_sib;
    else
        pm->last_child = m->prev_sib;
    pm->nchildren--;
    uint32_t ps = m->parent;
    m->parent = m->next_sib = m->prev_sib = POOL_NIL;
    pool_busy_update(p, s);
    pool_busy_update(p, ps);
}

void hk__pool_attach(hk_pool *p, uint32_t s, uint32_t parent) {
    pool_meta *m = pool_m(p, s), *pm = pool_m(p, parent);
    m->parent = parent;
    m->next_sib = POOL_NIL;
    m->prev_sib = pm->last_child;
    if (pm->last_child != POOL_NIL)
        pool_m(p, pm->last_child)->next_sib = s;
    else
        pm->first_child = s;
    pm->last_child = s;
    pm->nchildren++;
    if (s < p->cap) p->busy[s] = 1; /* in a tree now, both */
    if (parent < p->cap) p->busy[parent] = 1;
}

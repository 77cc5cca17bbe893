/*
 * src/pool_lists.c - the pool's lists (heapkit/pool.h, "Lists"): create and
 * destroy, push and remove, queries, and iteration inside a defer scope.
 *
 * Invariants kept here (see pool_internal.h): a list handle is
 * (gen << 16) | (index + 1) with the list's current gen, so a destroyed
 * list's handle is stale; nlists counts the lists in use; only ALIVE objects
 * are members (push resolves the ID first; freeing unlinks, pool_slots.c);
 * an iteration visits the members present when it started and still there
 * when their turn comes (the unlink primitive fixes its frame up); an
 * hk_pool_iter is on the pool's iteration stack and inside a defer scope
 * exactly while it is running (state 1: from its first step to its last
 * step or hk_pool_iter_end).
 */
#include "pool_internal.h"

/* Returns the list index of a valid handle, or reports and returns POOL_NIL. */
static uint32_t pool_list_resolve(hk_pool *p, hk_pool_list list, const char *what, hk_result *res) {
    uint32_t v = list.value, idx = (v & 0xFFFFu), gen = v >> 16;
    if (idx == 0 || idx > p->max_lists) {
        *res = hk__report(&p->core.rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, 0, NULL,
                          "%s: list handle 0x%08x is not a list of this pool (max %u lists)", what, v,
                          p->max_lists);
        return POOL_NIL;
    }
    pool_lst *L = &p->lists[idx - 1];
    if (!L->used || L->gen != gen) {
        *res = hk__report(&p->core.rep, HK_ERR_STALE, HK_EK_STALE, NULL, 0, L->used ? L->name : NULL,
                          "%s: list handle 0x%08x is stale (that list was destroyed)", what, v);
        return POOL_NIL;
    }
    return idx - 1;
}

static inline uint32_t pool_list_index(const hk_pool *p, hk_pool_list list) {
    uint32_t idx = list.value & 0xFFFFu;
    if (idx == 0 || idx > p->max_lists) return POOL_NIL;
    const pool_lst *L = &p->lists[idx - 1];
    return (L->used && L->gen == (list.value >> 16)) ? idx - 1 : POOL_NIL;
}

hk_pool_list hk_pool_list_create(hk_pool *p, uint32_t link, const char *name) {
    hk_pool_list out = {0};
    if (!p) return out;
    hk__core_lock(&p->core);
    if (link >= p->links) {
        hk__report(&p->core.rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, 0, name,
                   "list_create '%s': link slot %u out of range (the pool's objects have %u)",
                   name ? name : "?", link, p->links);
    } else if (p->nlists >= p->max_lists) {
        hk__report(&p->core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, 0, name,
                   "list_create '%s': all %u lists in use (raise desc.max_lists)", name ? name : "?",
                   p->max_lists);
    } else {
        for (uint32_t i = 0; i < p->max_lists; i++) {
            pool_lst *L = &p->lists[i];
            if (L->used) continue;
            L->used = 1;
            L->gen = (uint16_t)(L->gen + 1u);
            if (L->gen == 0) L->gen = 1;
            L->link = (uint8_t)link;
            L->name = name;
            L->head = L->tail = POOL_NIL;
            L->count = 0;
            p->nlists++;
            out.value = ((uint32_t)L->gen << 16) | (i + 1);
            break;
        }
    }
    pool_after_links(p);
    hk__core_unlock(&p->core);
    return out;
}

static void pool_list_clear_locked(hk_pool *p, uint32_t li) {
    while (p->lists[li].head != POOL_NIL) hk__pool_list_unlink(p, li, p->lists[li].head);
}

hk_result hk_pool_list_destroy(hk_pool *p, hk_pool_list list) {
    if (!p) return HK_ERR_INVALID;
    hk__core_lock(&p->core);
    hk_result r = HK_OK;
    uint32_t li = pool_list_resolve(p, list, "list_destroy", &r);
    if (li != POOL_NIL) {
        pool_list_clear_locked(p, li);
        p->lists[li].used = 0;
        p->lists[li].name = NULL;
        p->nlists--;
    }
    pool_after_links(p);
    hk__core_unlock(&p->core);
    return r;
}

hk_result hk_pool_list_clear(hk_pool *p, hk_pool_list list) {
    if (!p) return HK_ERR_INVALID;
    hk__core_lock(&p->core);
    hk_result r = HK_OK;
    uint32_t li = pool_list_resolve(p, list, "list_clear", &r);
    if (li != POOL_NIL) pool_list_clear_locked(p, li);
    pool_after_links(p);
    hk__core_unlock(&p->core);
    return r;
}

static hk_result pool_list_push(hk_pool *p, hk_pool_list list, hk_pool_id id, int front) {
    if (!p) return HK_ERR_INVALID;
    hk__core_lock(&p->core);
    hk_result r = HK_OK;
    const char *what = front ? "list_push_front" : "list_push_back";
    uint32_t li = pool_list_resolve(p, list, what, &r);
    uint32_t s = pool_alive_slot(p, id.value);
    if (s == POOL_NIL && li != POOL_NIL) s = hk__pool_resolve(p, id, what, 0, &r); /* reports */
    if (s != POOL_NIL && li != POOL_NIL) hk__pool_list_link(p, li, s, front);
    pool_after_links(p);
    hk__core_unlock(&p->core);
    return r;
}

hk_result hk_pool_list_push_back(hk_pool *p, hk_pool_list list, hk_pool_id id) {
    return pool_list_push(p, list, id, 0);
}
hk_result hk_pool_list_push_front(hk_pool *p, hk_pool_list list, hk_pool_id id) {
    return pool_list_push(p, list, id, 1);
}

hk_result hk_pool_list_remove(hk_pool *p, hk_pool_list list, hk_pool_id id) {
    if (!p) return HK_ERR_INVALID;
    hk__core_lock(&p->core);
    hk_result r = HK_OK;
    uint32_t li = pool_list_resolve(p, list, "list_remove", &r);
    uint32_t s = li != POOL_NIL ? hk__pool_resolve(p, id, "list_remove", 0, &r) : POOL_NIL;
    if (s != POOL_NIL) {
        pool_link *l = pool_l(p, s, p->lists[li].link);
        if (l->list != li + 1) {
            const char *ln = p->lists[li].name;
            r = hk__report(&p->core.rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, pool_obj(p, s), p->elem_size, ln,
                           "list_remove: object 0x%08x at %p is not on list '%s'", id.value, pool_obj(p, s),
                           ln ? ln : "?");
        } else {
            hk__pool_list_unlink(p, li, s);
        }
    }
    pool_after_links(p);
    hk__core_unlock(&p->core);
    return r;
}

size_t hk_pool_list_count(const hk_pool *p, hk_pool_list list) {
    if (!p) return 0;
    hk__core_lock(&p->core);
    uint32_t li = pool_list_index(p, list);
    size_t n = li == POOL_NIL ? 0 : p->lists[li].count;
    hk__core_unlock(&p->core);
    return n;
}

hk_pool_list hk_pool_list_of(const hk_pool *p, hk_pool_id id, uint32_t link) {
    hk_pool_list out = {0};
    if (!p || link >= p->links) return out;
    hk__core_lock(&p->core);
    uint32_t s = pool_alive_slot(p, id.value);
    if (s != POOL_NIL) {
        uint32_t li = pool_l(p, s, link)->list;
        if (li) out.value = ((uint32_t)p->lists[li - 1].gen << 16) | li;
    }
    hk__core_unlock(&p->core);
    return out;
}

hk_pool_id hk_pool_list_first(const hk_pool *p, hk_pool_list list) {
    hk_pool_id out = {0};
    if (!p) return out;
    hk__core_lock(&p->core);
    uint32_t li = pool_list_index(p, list);
    if (li != POOL_NIL && p->lists[li].head != POOL_NIL) out.value = pool_id(p, p->lists[li].head);
    hk__core_unlock(&p->core);
    return out;
}

hk_pool_id hk_pool_list_next(const hk_pool *p, hk_pool_list list, hk_pool_id id) {
    hk_pool_id out = {0};
    if (!p) return out;
    hk__core_lock(&p->core);
    uint32_t li = pool_list_index(p, list);
    uint32_t s = li == POOL_NIL ? POOL_NIL : pool_alive_slot(p, id.value);
    if (s != POOL_NIL) {
        const pool_link *l = pool_l(p, s, p->lists[li].link);
        if (l->list == li + 1 && l->next != POOL_NIL) out.value = pool_id(p, l->next);
    }
    hk__core_unlock(&p->core);
    return out;
}

int hk_pool_list_each(hk_pool *p, hk_pool_list list, hk_pool_visit_fn fn, void *user) {
    if (!p || !fn) return -1;
    hk__core_lock(&p->core);
    hk_result r = HK_OK;
    uint32_t li = pool_list_resolve(p, list, "list_each", &r);
    if (li == POOL_NIL) {
        hk__core_unlock(&p->core);
        return -1;
    }
    pool_iter it;
    it.list = li;
    it.next = p->lists[li].head;
    it.last = p->lists[li].tail;
    it.up = p->iters;
    p->iters = &it;
    hk__pool_scope_begin(p);
    int ret = 0;
    while (it.next != POOL_NIL) {
        uint32_t cur = it.next;
        it.next = cur == it.last ? POOL_NIL : pool_l(p, cur, p->lists[li].link)->next;
        ret = fn(p, (hk_pool_id){pool_id(p, cur)}, pool_obj(p, cur), user);
        if (ret) break;
    }
    p->iters = it.up;
    hk__pool_scope_end(p);
    pool_after_op(p);
    hk__core_unlock(&p->core);
    return ret;
}

/* ---- inline iteration (hk_pool_iter, pool.h) ------------------------------ */

hk_pool_iter hk_pool_iter_begin(hk_pool *p, hk_pool_list list) {
    hk_pool_iter it;
    memset(&it, 0, sizeof it);
    it.f.next = HK__POOL_ITER_END; /* out of line until started */
    it.state = 2;
    if (!p) return it;
    hk__core_lock(&p->core);
    hk_result r = HK_OK;
    uint32_t li = pool_list_resolve(p, list, "iter_begin", &r);
    if (li != POOL_NIL) {
        it.p = p;
        it.handle = list.value;
        it.f.list = li;
        it.f.next = HK__POOL_ITER_START;
        it.state = 0;
        it.lnext = (const unsigned char *)pool_l(p, 0, p->lists[li].link) + offsetof(pool_link, next);
        it.rstride = p->rstride;
        it.words = p->hot.ht.words;
        it.base = p->base;
        it.stride = p->stride;
    }
    hk__core_unlock(&p->core);
    return it;
}

/* Takes the frame off the pool's iteration stack (iterations may end in
 * any order). */
static void pool_iter_unregister(hk_pool *p, pool_iter *f) {
    for (pool_iter **pp = &p->iters; *pp; pp = &(*pp)->up) {
        if (*pp == f) {
            *pp = f->up;
            return;
        }
    }
}

static void *pool_iter_finish(hk_pool *p, hk_pool_iter *it) {
    pool_iter_unregister(p, &it->f);
    it->state = 2;
    it->f.next = HK__POOL_ITER_END;
    it->cap = 0;
    it->obj = NULL;
    it->id.value = 0;
    hk__pool_scope_end(p);
    pool_after_op(p);
    return NULL;
}

void *hk__pool_iter_step(hk_pool_iter *it) {
    if (!it || it->state == 2) return NULL;
    hk_pool *p = it->p;
    hk__core_lock(&p->core);
    if (it->state == 0) {
        /* the list may have been destroyed since begin */
        hk_result r = HK_OK;
        uint32_t li = pool_list_resolve(p, (hk_pool_list){it->handle}, "iter_next", &r);
        if (li == POOL_NIL) {
            it->state = 2;
            it->f.next = HK__POOL_ITER_END;
            hk__core_unlock(&p->core);
            return NULL;
        }
        it->state = 1;
        it->f.next = p->lists[li].head;
        it->f.last = p->lists[li].tail;
        it->f.up = p->iters;
        p->iters = &it->f;
        hk__pool_scope_begin(p);
        it->cap = p->core.locked_hooks ? 0 : p->cap;
    }
    void *obj;
    uint32_t cur = it->f.next;
    if (cur == POOL_NIL) {
        obj = pool_iter_finish(p, it);
    } else {
        it->f.next = cur == it->f.last ? POOL_NIL : pool_l(p, cur, p->lists[it->f.list].link)->next;
        it->id.value = pool_id(p, cur);
        obj = it->obj = pool_obj(p, cur);
    }
    hk__core_unlock(&p->core);
    return obj;
}

void hk_pool_iter_end(hk_pool_iter *it) {
    if (!it || it->state == 2) return;
    if (it->state == 0) { /* never started: nothing to undo in the pool */
        it->state = 2;
        it->f.next = HK__POOL_ITER_END;
        return;
    }
    hk_pool *p = it->p;
    hk__core_lock(&p->core);
    pool_iter_finish(p, it);
    hk__core_unlock(&p->core);
}

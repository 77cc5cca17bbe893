/*
 * src/pool_slots.c - the pool's objects: layout and creation, allocation
 * (the full path behind the inline hk_pool_alloc), freeing and release with
 * deferred destruction, lookups, defer scopes and whole-pool iteration,
 * recycle, clear, destroy and the counters.
 *
 * Invariants kept here (the full list is in pool_internal.h):
 *  - A fast slot's identity is its handle table word: the ID while ALIVE,
 *    dead (all-ones index bits, last generation kept) otherwise; the table's
 *    HELD state is the pool's DYING, its ring the FIFO free queue.
 *  - An object is freed in two steps: kill (dead to every lookup, off every
 *    list and out of its tree, appended to the pending queue) and release
 *    (on_destroy has run; memory filled or poisoned; slot back to the table
 *    or the overflow free list). Outside a defer scope both happen in the
 *    same call; inside, release waits for the outermost scope to close.
 *  - A FREE or RETIRED slot's meta is clean: no links, no children. Its
 *    next and mflags are stale (they mean something only while DYING;
 *    pool_kill sets them).
 *  - The hot block (hot.*) mirrors what the inline paths may do: alloc_ok,
 *    free_cap and get_cap are refreshed by pool_after_op after every
 *    full-path call and whenever a scope opens.
 */
#include "pool_internal.h"

#include <stdlib.h>

/* ---- layout and creation ---------------------------------------------------------- */

typedef struct pool_layout {
    size_t elem_size, align, stride;
    uint32_t cap, index_bits, links, max_lists;
    size_t ht_size;
    size_t rstride; /* bytes per slot record (meta and links) */
    size_t off_lists, off_fl, off_ht, off_busy, off_pend, off_rec, off_base, total;
} pool_layout;

/* Plans the pool's block; returns NULL, or what is wrong with the desc. */
static const char *pool_plan(const hk_pool_desc *d, pool_layout *L) {
    if (!d) return "no desc";
    if (d->elem_size == 0) return "elem_size is 0";
    L->elem_size = d->elem_size;
    L->align = d->align ? d->align : POOL_DEFAULT_ALIGN;
    if (!hk_is_pow2(L->align) || L->align > 4096) return "align is not a power of two <= 4096";
    L->index_bits = d->index_bits ? d->index_bits : HK_POOL_DEFAULT_INDEX_BITS;
    if (L->index_bits < HK_POOL_MIN_INDEX_BITS || L->index_bits > HK_POOL_MAX_INDEX_BITS)
        return "index_bits is outside 2..24";
    uint32_t mark = (1u << L->index_bits) - 1u;
    L->cap = d->capacity ? d->capacity : mark;
    if (L->cap > mark) return "capacity is above 2^index_bits - 1";
    L->links = d->links ? d->links : HK_POOL_DEFAULT_LINKS;
    if (L->links > HK_POOL_MAX_LINKS) return "links is above 8";
    L->max_lists = d->max_lists ? d->max_lists : HK_POOL_DEFAULT_MAX_LISTS;
    if (L->max_lists > HK_POOL_MAX_LISTS) return "max_lists is above 65535";
    static const char *const too_big = "the pool's size overflows";
    if (!hk_size_align(L->elem_size, L->align, &L->stride)) return too_big;
    size_t off = sizeof(hk_pool), n;
    if (!hk_size_align(off, 16, &off)) return too_big;
    L->off_lists = off;
    if (!hk_size_mul(L->max_lists, sizeof(pool_lst), &n) || !hk_size_add(off, n, &off)) return too_big;
    if (!hk_size_align(off, 16, &off)) return too_big;
    L->off_fl = off;
    if (!hk_size_mul(L->max_lists, sizeof(hk__pool_fl), &n) || !hk_size_add(off, n, &off)) return too_big;
    if (!hk_size_align(off, 16, &off)) return too_big;
    L->off_ht = off;
    L->ht_size = hk__ht_storage_size(L->cap, 1);
    if (!L->ht_size || !hk_size_add(off, L->ht_size, &off)) return too_big;
    L->off_busy = off;
    if (!hk_size_add(off, L->cap, &off) || !hk_size_align(off, 16, &off)) return too_big;
    L->off_pend = off;
    if (!hk_size_mul(L->cap, sizeof(uint32_t), &n) || !hk_size_add(off, n, &off)) return too_big;
    /* One record per slot, its meta then its links: 64 bytes (one cache
     * line, 64-aligned) while they fit, else a multiple of 16. */
    L->rstride = sizeof(pool_meta) + (size_t)L->links * sizeof(pool_link);
    L->rstride = L->rstride <= 64 ? 64 : (L->rstride + 15) & ~(size_t)15;
    if (!hk_size_align(off, 64, &off)) return too_big;
    L->off_rec = off;
    if (!hk_size_mul(L->cap, L->rstride, &n) || !hk_size_add(off, n, &off)) return too_big;
    if (!hk_size_align(off, L->align, &off)) return too_big;
    L->off_base = off;
    if (!hk_size_mul(L->cap, L->stride, &n) || !hk_size_add(off, n, &off)) return too_big;
    /* room to align the start of caller memory */
    if (!hk_size_add(off, L->align > 64 ? L->align : 64, &L->total)) return too_big;
    return NULL;
}

size_t hk_pool_memory_size(const hk_pool_desc *desc) {
    pool_layout L;
    return pool_plan(desc, &L) ? 0 : L.total;
}

hk_pool *hk_pool_create(const hk_pool_desc *desc) {
    if (!desc) return NULL;
    hk__core core;
    if (hk__core_init(&core, "pool", desc->name, desc->flags, desc->on_error, desc->error_user, &desc->lock,
                      &desc->backing, hk__pool_check, NULL) != HK_OK)
        return NULL;
    pool_layout L;
    const char *bad = pool_plan(desc, &L);
    if (bad) {
        hk__report(&core.rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, desc->elem_size, NULL, "create: %s",
                   bad);
        return NULL;
    }
    unsigned char *mem;
    void *os_base = NULL;
    size_t os_size = 0;
    if (desc->memory) {
        if (desc->size < L.total) {
            hk__report(&core.rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, desc->memory, desc->size, NULL,
                       "create: desc.memory holds %zu bytes, the pool needs %zu (hk_pool_memory_size)",
                       desc->size, L.total);
            return NULL;
        }
        mem = (unsigned char *)desc->memory;
    } else {
        os_base = hk_os_alloc(L.total);
        if (!os_base) {
            hk__report(&core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, L.total, NULL,
                       "create: the OS refused %zu bytes", L.total);
            return NULL;
        }
        os_size = L.total;
        mem = (unsigned char *)os_base;
    }
    /* align the start so that every offset keeps its alignment */
    size_t a = L.align > 64 ? L.align : 64;
    unsigned char *start = (unsigned char *)hk_align_ptr((uintptr_t)mem, a);
    hk_pool *p = (hk_pool *)start;
    memset(p, 0, sizeof *p);
    p->core = core;
    p->core.self = p;
    hk__ht_config hc;
    memset(&hc, 0, sizeof hc);
    hc.index_bits = L.index_bits;
    hc.cap = L.cap;
    hc.flags = (desc->flags & HK_POOL_WRAP) ? HK__HT_WRAP : 0u;
    hc.memory = start + L.off_ht;
    hc.size = L.ht_size;
    if (hk__ht_init(&p->hot.ht, &hc) != HK_OK) { /* cannot happen: the plan checked it all */
        if (os_base) hk_os_release(os_base, os_size);
        return NULL;
    }
    p->elem_size = L.elem_size;
    p->align = L.align;
    p->stride = L.stride;
    p->cap = L.cap;
    p->index_bits = L.index_bits;
    p->imask = (1u << L.index_bits) - 1u;
    p->mark = p->imask;
    p->links = L.links;
    p->max_lists = L.max_lists;
    p->lists = (pool_lst *)(void *)(start + L.off_lists);
    p->busy = start + L.off_busy;
    p->rec = start + L.off_rec;
    p->pend = (uint32_t *)(void *)(start + L.off_pend);
    p->pend_ok = 1;
    p->rstride = L.rstride;
    p->base = start + L.off_base;
    memset(p->lists, 0, (size_t)L.max_lists * sizeof(pool_lst));
    p->fl = (hk__pool_fl *)(void *)(start + L.off_fl);
    memset(p->fl, 0, (size_t)L.max_lists * sizeof(hk__pool_fl));
    for (uint32_t i = 0; i < L.max_lists; i++) p->lists[i].head = p->lists[i].tail = POOL_NIL;
    memset(p->rec, 0, (size_t)L.cap * L.rstride);
    memset(p->busy, 0, L.cap);
    for (uint32_t s = 0; s < L.cap; s++) {
        pool_meta *m = pool_m(p, s);
        m->next = POOL_NIL;
        m->parent = m->first_child = m->last_child = m->next_sib = m->prev_sib = POOL_NIL;
    }
    hk__pool_hot *h = &p->hot;
    h->busy = p->busy;
    h->base = p->base;
    h->stride = p->stride;
    h->fl = p->fl;
    h->nfl = L.max_lists;
    p->pend_head = p->pend_tail = POOL_NIL;
    p->ofree_head = POOL_NIL;
    p->on_destroy = desc->on_destroy;
    p->destroy_user = desc->destroy_user;
    p->os_base = os_base;
    p->os_size = os_size;
    p->table_bytes = L.off_base;
    p->san = hk__asan_enabled() || p->core.track;
    if (HK__TRACKED(&p->core)) hk__track_create(&p->core);
    p->slow = p->core.locked_hooks || desc->on_destroy || (desc->flags & HK_FLAG_FILL) || p->core.paranoid;
    if (desc->flags & HK_FLAG_FILL) hk_fill(p->base, (size_t)L.cap * L.stride, HK_FILL_FREE);
    hk__san_noaccess(p->base, (size_t)L.cap * L.stride);
    if (!(desc->flags & HK_POOL_NO_OVERFLOW)) hk__pool_ovf_prepare(p);
    pool_hot_update(p);
    return p;
}

/* ---- ID classification ------------------------------------------------------------ */

uint32_t hk__pool_resolve(hk_pool *p, hk_pool_id id, const char *what, int freeing, hk_result *res) {
    uint32_t v = id.value, s = pool_alive_slot(p, v);
    if (s != POOL_NIL) return s;
    uint32_t idx = v & p->imask;
    if (v != 0 && idx == p->mark) {
        *res = hk__pool_ovf_report(p, v, freeing, what);
    } else {
        int fast = idx < p->cap;
        *res = hk__ht_report(&p->hot.ht, &p->core.rep, v, freeing, what, "ID",
                             fast ? (const void *)(p->base + (size_t)idx * p->stride) : NULL,
                             fast ? p->elem_size : 0, NULL);
    }
    return POOL_NIL;
}

/* ---- allocation ------------------------------------------------------------------- */

/* A fast slot's object handed out / ended, for ASan and the tools
 * (src/track.h); only when p->san. */
static HK__NOINLINE void pool_san_alloc(hk_pool *p, void *o) {
    hk__asan_unpoison(o, p->elem_size);
    if (HK__TRACKED(&p->core))
        hk__track_alloc(&p->core, o, p->elem_size, (pool_flags(p) & HK_FLAG_ZERO) != 0);
}
static HK__NOINLINE void pool_san_free(hk_pool *p, void *o) {
    hk__asan_poison(o, p->stride);
    if (HK__TRACKED(&p->core)) hk__track_free(&p->core, o);
}

hk_pool_id hk__pool_alloc_locked(hk_pool *p, void **obj) {
    hk_pool_id id = {0};
    void *o;
    POOL_PREFETCH_AHEAD(p);
    uint32_t v = hk__ht_alloc(&p->hot.ht);
    if (HK__LIKELY(v != 0)) {
        /* a FREE slot is on no list and in no tree, its meta clean */
        uint32_t s = v & p->imask;
        HK__ASSERT(pool_m(p, s)->parent == POOL_NIL && pool_m(p, s)->first_child == POOL_NIL &&
                   !pool_m(p, s)->nlinked);
        id.value = v;
        o = p->base + (size_t)s * p->stride;
        if (p->san) pool_san_alloc(p, o);
    } else {
        uint32_t s = (pool_flags(p) & HK_POOL_NO_OVERFLOW) ? POOL_NIL : hk__pool_ovf_alloc(p, &o);
        if (s == POOL_NIL) {
            p->fail_count++;
            hk__report(&p->core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, p->elem_size, NULL,
                       "allocation failed: all %u fast slots in use (%u retired), overflow %s (%zu live)",
                       p->cap, p->hot.ht.nretired,
                       (pool_flags(p) & HK_POOL_NO_OVERFLOW) ? "disabled" : "allocation failed", p->ovf_live);
            if (obj) *obj = NULL;
            return id;
        }
        id.value = pool_m(p, s)->id;
    }
    if (pool_flags(p) & HK_FLAG_ZERO)
        memset(o, 0, p->elem_size);
    else if (pool_flags(p) & HK_FLAG_FILL)
        memset(o, HK_FILL_ALLOC, p->elem_size);
    if (obj) *obj = o;
    return id;
}

/* The full path behind the inline hk_pool_alloc (pool.h). */
hk_pool_id hk__pool_alloc(hk_pool *p, void **obj) {
    if (!p) {
        if (obj) *obj = NULL;
        return (hk_pool_id){0};
    }
    hk__core_lock(&p->core);
    hk_pool_id id = hk__pool_alloc_locked(p, obj);
    pool_after_op(p);
    hk__core_unlock(&p->core);
    return id;
}

/* ---- freeing and release ---------------------------------------------------------- */

/* Makes an ALIVE object DYING: dead to every lookup, off every list, out of
 * its tree, appended to the pending queue. */
static void pool_kill(hk_pool *p, uint32_t s, int subtree) {
    pool_meta *m = pool_m(p, s);
    m->mflags = (uint8_t)(subtree ? POOL_MF_SUBTREE : 0);
    if (s < p->cap) {
        hk__ht_kill(&p->hot.ht, s);
    } else {
        m->state = POOL_DYING;
        p->ovf_live--;
    }
    if (m->nlinked) { /* objects only on frame lists skip all of this */
#if defined(__GNUC__) || defined(__clang__)
        /* The list neighbours' records are written by the unlinks below and are
         * often out of the cache (a draw layer's neighbours are far apart):
         * start fetching them all before the first unlink waits for one. */
        for (uint32_t k = 0; k < p->links; k++) {
            const pool_link *l = pool_l(p, s, k);
            if (!l->list) continue;
            if (l->prev < p->cap) __builtin_prefetch(p->rec + (size_t)l->prev * p->rstride);
            if (l->next < p->cap) __builtin_prefetch(p->rec + (size_t)l->next * p->rstride);
        }
#endif
        for (uint32_t k = 0; k < p->links; k++) {
            pool_link *l = pool_l(p, s, k);
            if (l->list) hk__pool_list_unlink(p, l->list - 1, s);
        }
    }
    hk__pool_detach(p, s);
    if (!subtree)
        while (m->first_child != POOL_NIL) hk__pool_detach(p, m->first_child);
    m->next = POOL_NIL;
    if (p->pend_tail != POOL_NIL)
        pool_m(p, p->pend_tail)->next = s;
    else
        p->pend_head = s;
    p->pend_tail = s;
    p->npending++;
    if (s < p->cap && p->pend_ok)
        p->pend[p->npend++] = s;
    else
        p->pend_ok = 0;
}

/* Kills s and (subtree) every descendant, breadth first through the pending
 * queue: no recursion, O(subtree). A dying parent's children are not
 * detached one by one (each detach rewrites the parent's child list and
 * the next sibling's back link): the parent's child list is dropped whole
 * and each child's tree links cleared as it is killed. */
static void pool_kill_tree(hk_pool *p, uint32_t s, int subtree) {
    pool_kill(p, s, subtree);
    if (!subtree) return;
    for (uint32_t q = s; q != POOL_NIL; q = pool_m(p, q)->next) {
        pool_meta *qm = pool_m(p, q);
        uint32_t c = qm->first_child;
        if (c == POOL_NIL) continue;
        qm->first_child = qm->last_child = POOL_NIL;
        qm->nchildren = 0;
        if (q < p->cap) p->busy[q] = 0; /* DYING: on no list, and now in no tree */
        while (c != POOL_NIL) {
            pool_meta *cm = pool_m(p, c);
            uint32_t next = cm->next_sib;
            cm->parent = cm->next_sib = cm->prev_sib = POOL_NIL;
            pool_kill(p, c, 1);
            pool_busy_update(p, c); /* stays set while it has children of its own */
            c = next;
        }
    }
}

/* Releases DYING slot s. A fast slot's record is not written: its next
 * and mflags mean something only while it is DYING, and pool_kill sets
 * them afresh (so a release pass over the dense pending copy touches no
 * record, which by then is usually out of the cache). */
static void pool_release(hk_pool *p, uint32_t s, int front) {
    HK__ASSERT(pool_state(p, s) == POOL_DYING);
    p->npending--;
    if (s < p->cap) {
        void *o = p->base + (size_t)s * p->stride;
        if (pool_flags(p) & HK_FLAG_FILL) {
            hk__san_access(o, p->stride);
            hk_fill(o, p->stride, HK_FILL_FREE);
        }
        if (p->san) pool_san_free(p, o);
        /* queued (at the front with HK_POOL_HOT_REUSE), or retired when it
         * used every generation */
        if (!front)
            (void)hk__ht_release(&p->hot.ht, s);
        else if (hk__ht_release_front(&p->hot.ht, s) == 0)
            p->front_released++;
    } else {
        hk__pool_ovf_release(p, s);
    }
}

/* Runs on_destroy for every pending object (frees made by it join the queue),
 * then releases them all. Called when the outermost scope closes. */
static void pool_flush(hk_pool *p, int scope) {
    /* HK_POOL_HOT_REUSE: the release pass of a scope queues at the front */
    int front = scope && (pool_flags(p) & HK_POOL_HOT_REUSE);
    if (p->flushing || p->pend_head == POOL_NIL) return;
    p->flushing = 1;
    p->defer_depth++;
    if (p->on_destroy) {
        for (uint32_t q = p->pend_head; q != POOL_NIL; q = pool_m(p, q)->next) {
            pool_meta *m = pool_m(p, q);
            if (m->mflags & POOL_MF_NOTIFIED) continue;
            m->mflags |= POOL_MF_NOTIFIED;
            p->on_destroy(p, (hk_pool_id){pool_id(p, q)}, pool_obj(p, q), p->destroy_user);
        }
    }
    if (p->pend_ok && p->npend == p->npending && !p->on_destroy) {
        /* every pending slot is a fast one and no hook can add more: the
         * dense copy of the queue, no chase through cold records */
        if (!p->san && !(pool_flags(p) & HK_FLAG_FILL)) {
            /* nothing to fill or poison: the table's release alone */
            hk__htab *t = &p->hot.ht;
            if (front) {
                for (uint32_t i = 0; i < p->npend; i++)
                    p->front_released += hk__ht_release_front(t, p->pend[i]) == 0;
            } else {
                for (uint32_t i = 0; i < p->npend; i++) (void)hk__ht_release(t, p->pend[i]);
            }
            p->npending -= p->npend;
        } else {
            for (uint32_t i = 0; i < p->npend; i++) pool_release(p, p->pend[i], front);
        }
        p->pend_head = POOL_NIL;
    }
    while (p->pend_head != POOL_NIL) {
        uint32_t q = p->pend_head;
        p->pend_head = pool_m(p, q)->next;
        pool_release(p, q, front);
    }
    p->pend_tail = POOL_NIL;
    p->npend = 0;
    p->pend_ok = 1;
    p->defer_depth--;
    p->flushing = 0;
}

/* The full path behind the inline hk_pool_free (pool.h). */
hk_result hk__pool_free(hk_pool *p, hk_pool_id id, hk_pool_children children) {
    if (!p) return HK_ERR_INVALID;
    hk__core_lock(&p->core);
    hk_result r = HK_OK;
    uint32_t s = POOL_NIL;
    if (HK__UNLIKELY((unsigned)children > (unsigned)HK_POOL_DETACH)) /* before anything is touched */
        r = hk__report(&p->core.rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, (size_t)(unsigned)children,
                       NULL,
                       "free of id %#x refused: children mode %u is neither FREE_SUBTREE (0) nor DETACH (1)",
                       id.value, (unsigned)children);
    else
        s = hk__pool_resolve(p, id, "free", 1, &r);
    if (s != POOL_NIL) {
        pool_kill_tree(p, s, children != HK_POOL_DETACH);
        if (p->defer_depth == 0) pool_flush(p, 0); /* a free outside any scope */
    }
    pool_after_op(p);
    hk__core_unlock(&p->core);
    return r;
}

/* ---- lookups ------------------------------------------------------------------------ */

const hk__pool_hot hk__pool_none = {0};

/* The full path behind the inline hk_pool_get (pool.h). */
void *hk__pool_get(const hk_pool *p, hk_pool_id id) {
    if (HK__UNLIKELY(!p)) return NULL;
    hk__core_lock(&p->core);
    uint32_t o = pool_alive_slot(p, id.value);
    void *r = o == POOL_NIL ? NULL : pool_obj(p, o);
    hk__core_unlock(&p->core);
    return r;
}

hk_pool_id hk_pool_id_of(const hk_pool *p, const void *obj) {
    hk_pool_id id = {0};
    if (!p || !obj) return id;
    hk__core_lock(&p->core);
    uintptr_t a = (uintptr_t)obj, b = (uintptr_t)p->base;
    if (a >= b && a - b < (uintptr_t)p->cap * p->stride) {
        size_t off = (size_t)(a - b);
        uint32_t s = (uint32_t)(off / p->stride);
        if (off % p->stride == 0 && hk__ht_word_live(&p->hot.ht, p->hot.ht.words[s]))
            id.value = p->hot.ht.words[s];
    } else {
        uint32_t s = hk__pool_ovf_at(p, obj);
        if (s != POOL_NIL && pool_m(p, s)->state == POOL_ALIVE) id.value = pool_m(p, s)->id;
    }
    hk__core_unlock(&p->core);
    return id;
}

uint32_t hk_pool_id_index(const hk_pool *p, hk_pool_id id) { return p ? id.value & p->imask : 0; }
uint32_t hk_pool_id_generation(const hk_pool *p, hk_pool_id id) { return p ? id.value >> p->index_bits : 0; }

/* ---- defer scopes and whole-pool iteration ------------------------------------------ */

void hk__pool_scope_begin(hk_pool *p) {
    p->defer_depth++;
    pool_hot_update(p);
}

void hk__pool_scope_end(hk_pool *p) {
    if (--p->defer_depth == 0) pool_flush(p, 1);
}

void hk_pool_defer_begin(hk_pool *p) {
    if (!p) return;
    hk__core_lock(&p->core);
    hk__pool_scope_begin(p);
    hk__core_unlock(&p->core);
}

hk_result hk_pool_defer_end(hk_pool *p) {
    if (!p) return HK_ERR_INVALID;
    hk__core_lock(&p->core);
    hk_result r = HK_OK;
    if (p->defer_depth == 0)
        r = hk__report(&p->core.rep, HK_ERR_STATE, HK_EK_STATE, NULL, 0, NULL,
                       "defer_end without a matching defer_begin");
    else
        hk__pool_scope_end(p);
    pool_after_op(p);
    hk__core_unlock(&p->core);
    return r;
}

int hk_pool_each(hk_pool *p, hk_pool_visit_fn fn, void *user) {
    if (!p || !fn) return -1;
    hk__core_lock(&p->core);
    hk__pool_scope_begin(p);
    int ret = 0;
    for (uint32_t s = 0; s < p->cap + p->ohigh && !ret; s++) {
        if (pool_state(p, s) != POOL_ALIVE) continue;
        ret = fn(p, (hk_pool_id){pool_id(p, s)}, pool_obj(p, s), user);
    }
    hk__pool_scope_end(p);
    pool_after_op(p);
    hk__core_unlock(&p->core);
    return ret;
}

/* ---- maintenance -------------------------------------------------------------------- */

long hk_pool_recycle(hk_pool *p) {
    if (!p) return HK_ERR_INVALID;
    hk__core_lock(&p->core);
    long n;
    if (p->defer_depth)
        n = hk__report(&p->core.rep, HK_ERR_STATE, HK_EK_STATE, NULL, 0, NULL,
                       "recycle inside a defer scope or iteration (depth %u): call it at a safe point",
                       p->defer_depth);
    else {
        pool_fl_drop_dead(p);                 /* the pool's own copies of dead IDs go first */
        n = (long)hk__ht_recycle(&p->hot.ht); /* the sequences restart */
    }
    pool_after_op(p);
    hk__core_unlock(&p->core);
    return n;
}

static void pool_clear_locked(hk_pool *p) {
    hk__pool_scope_begin(p);
    for (uint32_t s = 0; s < p->cap + p->ohigh; s++) {
        if (pool_state(p, s) != POOL_ALIVE || pool_m(p, s)->parent != POOL_NIL) continue;
        pool_kill_tree(p, s, 1);
    }
    hk__pool_scope_end(p);
}

void hk_pool_clear(hk_pool *p) {
    if (!p) return;
    hk__core_lock(&p->core);
    pool_clear_locked(p);
    pool_after_op(p);
    hk__core_unlock(&p->core);
}

void hk_pool_destroy(hk_pool *p) {
    if (!p) return;
    hk__core_lock(&p->core);
    p->defer_depth = 0;
    pool_clear_locked(p);
    /* objects freed by on_destroy hooks during the clear are released too */
    pool_flush(p, 0);
    hk__pool_ovf_destroy(p);
    pool_fl_destroy_all(p);
    hk__san_access(p->base, (size_t)p->cap * p->stride);
    if (HK__TRACKED(&p->core)) hk__track_destroy(&p->core); /* every object ended in the clear */
    hk__core core = p->core;
    void *os_base = p->os_base;
    size_t os_size = p->os_size;
    hk__core_unlock(&core);
    if (os_base) hk_os_release(os_base, os_size);
}

/* ---- counters ------------------------------------------------------------------------ */

hk_result hk_pool_stats(const hk_pool *p, hk_stats *out) {
    if (!p || !out) return HK_ERR_INVALID;
    hk__core_lock(&p->core);
    memset(out, 0, sizeof *out);
    out->size = (uint32_t)sizeof *out;
    out->version = HK_STATS_VERSION;
    out->allocator = "pool";
    size_t fast_bytes = (size_t)p->cap * p->stride;
    uint32_t nfree = pool_nfree(p);
    size_t fast_held = (size_t)p->cap - nfree - p->hot.ht.nretired;
    size_t held = pool_live(p) + p->npending;
    uint64_t allocs = p->hot.ht.head + p->front_released + p->ovf_allocs;
    out->capacity = fast_bytes + p->ovf_bytes;
    out->used = held * p->elem_size;
    out->used_blocks_bytes = fast_held * p->stride + p->ovf_bytes;
    out->free = (size_t)nfree * p->stride;
    out->largest_free = (nfree || !(pool_flags(p) & HK_POOL_NO_OVERFLOW)) ? p->elem_size : 0;
    out->peak_used = (held > p->hot.peak ? held : p->hot.peak) * p->elem_size;
    out->overhead = p->table_bytes;
    out->live_blocks = held;
    out->free_blocks = nfree;
    out->alloc_count = allocs;
    out->free_count = allocs - held;
    out->fail_count = p->fail_count;
    out->error_count = p->core.rep.error_count;
    hk__core_unlock(&p->core);
    return HK_OK;
}

hk_result hk_pool_get_info(const hk_pool *p, hk_pool_info *out) {
    if (!p || !out) return HK_ERR_INVALID;
    hk__core_lock(&p->core);
    memset(out, 0, sizeof *out);
    out->live = pool_live(p);
    out->fast_live = pool_fast_live(p);
    out->overflow_live = p->ovf_live;
    out->overflow_peak = p->ovf_peak;
    out->pending = p->npending;
    out->free_slots = pool_nfree(p);
    out->retired_slots = p->hot.ht.nretired;
    out->lists = p->nlists;
    out->capacity = p->cap;
    out->index_bits = p->index_bits;
    out->slot_uses = p->hot.ht.gmax;
    out->defer_depth = p->defer_depth;
    out->overflow_allocs = p->ovf_allocs;
    hk__core_unlock(&p->core);
    return HK_OK;
}

/*
 * src/pool_frame.c - the pool's frame lists (heapkit/pool.h, "frame
 * lists"): arrays of object IDs that a game rebuilds every frame, cleared
 * in O(1), appended to inline, visited in push order skipping the entries
 * whose objects have died; and their iteration (the out-of-line steps of
 * hk_pool_fiter).
 *
 * Invariants kept here (see pool_internal.h):
 *  - fl[i] exists iff fl[i].handle != 0; its handle is (gen << 16) |
 *    (i + 1) with gen != 0, and gen survives destroy, so the handle of a
 *    destroyed frame list is stale. nfl_used counts the existing ones.
 *  - count <= room; ents holds room entries (NULL iff room == 0), from the
 *    backing hooks; limit == room - room / 4 (the inline push appends below
 *    it). While next != NULL (a growth), next holds 2 * room entries, the
 *    first copied of them equal to ents' (copied <= count); entries are
 *    never changed once pushed (but by recycle, which drops the growth). Every entry was a live ID of this
 * pool when it was pushed; it may name a dead object since (frees never touch frame lists), and the iterator
 * and hk_pool_flist_live compare it with the slot's live ID before using it.
 *  - A running frame iteration (state 1) is on fiters and inside a defer
 *    scope, from its first step to its last step or hk_pool_fiter_end; its
 *    frame reads the list's current array (growth fixes it up) and
 *    i <= end <= count (clear and destroy set end to 0).
 */
#include "pool_internal.h"

#define POOL_FL_MIN_ROOM 64u

/* The index of a valid frame-list handle, or POOL_NIL after a report. */
static uint32_t pool_fl_resolve(hk_pool *p, hk_pool_flist fl, const char *what, hk_result *res) {
    uint32_t v = fl.value, idx = v & 0xFFFFu;
    if (idx == 0 || idx > p->max_lists || v >> 16 == 0) {
        *res = hk__report(&p->core.rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, 0, NULL,
                          "%s: frame list handle 0x%08x is not a frame list of this pool (max %u)", what, v,
                          p->max_lists);
        return POOL_NIL;
    }
    const hk__pool_fl *f = &p->fl[idx - 1];
    if (f->handle != v) {
        *res = hk__report(&p->core.rep, HK_ERR_STALE, HK_EK_STALE, NULL, 0, f->handle ? f->name : NULL,
                          "%s: frame list handle 0x%08x is stale (that frame list was destroyed)", what, v);
        return POOL_NIL;
    }
    return idx - 1;
}

/* The index of a valid handle, or POOL_NIL (no report). */
static uint32_t pool_fl_index(const hk_pool *p, hk_pool_flist fl) {
    uint32_t idx = fl.value & 0xFFFFu;
    if (idx == 0 || idx > p->max_lists || p->fl[idx - 1].handle != fl.value || fl.value >> 16 == 0)
        return POOL_NIL;
    return idx - 1;
}

static inline uint32_t pool_fl_limit(uint32_t room) { return room - room / 4u; }

/* Points fi's running iterations at array n. */
static void pool_fl_repoint(hk_pool *p, uint32_t fi, const uint32_t *n) {
    for (hk__pool_fiter_frame *it = p->fiters; it; it = it->up)
        if (it->fl == fi) it->ents = n;
}

/* Drops a growth in progress (its next array). */
static void pool_fl_drop_next(hk_pool *p, hk__pool_fl *f) {
    if (!f->next) return;
    hk__core_backing_free(&p->core, f->next, (size_t)f->room * 2u * sizeof(uint32_t));
    f->next = NULL;
    f->copied = 0;
}

/* The list switches to its next array (every entry copied). O(1). */
static void pool_fl_switch(hk_pool *p, uint32_t fi) {
    hk__pool_fl *f = &p->fl[fi];
    pool_fl_repoint(p, fi, f->next);
    hk__core_backing_free(&p->core, f->ents, (size_t)f->room * sizeof(uint32_t));
    f->ents = f->next;
    f->room *= 2u;
    f->limit = pool_fl_limit(f->room);
    f->next = NULL;
    f->copied = 0;
}

/* Gives frame list fi room for at least `need` entries at once (a growth
 * in progress is dropped), moving its entries and fixing up its running
 * iterations; the inline push then appends up to `need` (limit >= need).
 * O(count). 0 when the backing hooks fail (the list is unchanged). */
static int pool_fl_grow(hk_pool *p, uint32_t fi, uint32_t need) {
    hk__pool_fl *f = &p->fl[fi];
    if (need <= f->limit) return 1;
    uint64_t room = f->room ? f->room : POOL_FL_MIN_ROOM;
    while (room < 0xFFFFFFFFu && room - room / 4u < need) room *= 2;
    if (room > 0xFFFFFFFFu) room = 0xFFFFFFFFu;
    size_t bytes;
    if (pool_fl_limit((uint32_t)room) < need || !hk_size_mul((size_t)room, sizeof(uint32_t), &bytes))
        return 0;
    uint32_t *n = (uint32_t *)hk__core_backing_alloc(&p->core, bytes);
    if (!n) return 0;
    pool_fl_drop_next(p, f);
    if (f->count) memcpy(n, f->ents, (size_t)f->count * sizeof(uint32_t));
    pool_fl_repoint(p, fi, n);
    hk__core_backing_free(&p->core, f->ents, (size_t)f->room * sizeof(uint32_t));
    f->ents = n;
    f->room = (uint32_t)room;
    f->limit = pool_fl_limit(f->room);
    return 1;
}

/* Makes room for one more push, a bounded step at a time: below the limit
 * nothing; from it on, the next array (twice the room) is allocated and
 * each push copies POOL_FL_COPY_STEP entries into it, switching when all
 * are (which happens before the array is full: from 3/4 of the room, 4
 * entries per push catch up with the pushes in a quarter of the room).
 * O(1) but for the fallbacks: an empty list's first array, and a full one
 * whose next array could not be allocated (O(count), pool_fl_grow). 0 when
 * memory fails and the array is full. */
#define POOL_FL_COPY_STEP 4u
static int pool_fl_make_room(hk_pool *p, uint32_t fi) {
    hk__pool_fl *f = &p->fl[fi];
    if (f->count < f->limit) return 1;
    if (!f->room || f->room > 0x7FFFFFFFu) return pool_fl_grow(p, fi, f->count + 1u);
    if (!f->next) {
        f->next = (uint32_t *)hk__core_backing_alloc(&p->core, (size_t)f->room * 2u * sizeof(uint32_t));
        f->copied = 0;
        if (!f->next) return f->count < f->room || pool_fl_grow(p, fi, f->count + 1u);
    }
    uint32_t n = f->count - f->copied;
    if (n > POOL_FL_COPY_STEP) n = POOL_FL_COPY_STEP;
    memcpy(f->next + f->copied, f->ents + f->copied, (size_t)n * sizeof(uint32_t));
    f->copied += n;
    if (f->copied == f->count) pool_fl_switch(p, fi);
    return f->count < f->room || pool_fl_grow(p, fi, f->count + 1u);
}

/* Ends (at their next step) the running iterations of frame list fi. */
static void pool_fl_stop_iters(hk_pool *p, uint32_t fi) {
    for (hk__pool_fiter_frame *it = p->fiters; it; it = it->up)
        if (it->fl == fi) it->end = it->i = 0;
}

hk_pool_flist hk_pool_flist_create(hk_pool *p, uint32_t reserve, const char *name) {
    hk_pool_flist out = {0};
    if (!p) return out;
    hk__core_lock(&p->core);
    uint32_t fi = POOL_NIL;
    if (p->nfl_used < p->max_lists)
        for (uint32_t i = 0; i < p->max_lists && fi == POOL_NIL; i++)
            if (!p->fl[i].handle) fi = i;
    if (fi == POOL_NIL) {
        hk__report(&p->core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, 0, name,
                   "flist_create '%s': all %u frame lists in use (raise desc.max_lists)", name ? name : "?",
                   p->max_lists);
    } else if (reserve && !pool_fl_grow(p, fi, reserve)) {
        hk__report(&p->core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, (size_t)reserve * sizeof(uint32_t), name,
                   "flist_create '%s': the backing hooks refused room for %u entries", name ? name : "?",
                   reserve);
    } else {
        hk__pool_fl *f = &p->fl[fi];
        f->gen = (f->gen + 1u) & 0xFFFFu;
        if (f->gen == 0) f->gen = 1;
        f->handle = (f->gen << 16) | (fi + 1);
        f->count = 0;
        f->name = name;
        p->nfl_used++;
        out.value = f->handle;
    }
    pool_after_links(p);
    hk__core_unlock(&p->core);
    return out;
}

hk_result hk_pool_flist_destroy(hk_pool *p, hk_pool_flist fl) {
    if (!p) return HK_ERR_INVALID;
    hk__core_lock(&p->core);
    hk_result r = HK_OK;
    uint32_t fi = pool_fl_resolve(p, fl, "flist_destroy", &r);
    if (fi != POOL_NIL) {
        hk__pool_fl *f = &p->fl[fi];
        pool_fl_stop_iters(p, fi);
        for (hk__pool_fiter_frame *it = p->fiters; it; it = it->up)
            if (it->fl == fi) it->ents = NULL;
        pool_fl_drop_next(p, f);
        hk__core_backing_free(&p->core, f->ents, (size_t)f->room * sizeof(uint32_t));
        f->ents = NULL;
        f->room = f->count = f->limit = 0;
        f->handle = 0;
        f->name = NULL;
        p->nfl_used--;
    }
    pool_after_links(p);
    hk__core_unlock(&p->core);
    return r;
}

hk_result hk_pool_flist_clear(hk_pool *p, hk_pool_flist fl) {
    if (!p) return HK_ERR_INVALID;
    hk__core_lock(&p->core);
    hk_result r = HK_OK;
    uint32_t fi = pool_fl_resolve(p, fl, "flist_clear", &r);
    if (fi != POOL_NIL) {
        pool_fl_stop_iters(p, fi);
        p->fl[fi].count = 0;
        if (p->fl[fi].next) pool_fl_switch(p, fi); /* nothing left to copy: the larger room at once */
    }
    pool_after_links(p);
    hk__core_unlock(&p->core);
    return r;
}

size_t hk_pool_flist_count(const hk_pool *p, hk_pool_flist fl) {
    if (!p) return 0;
    hk__core_lock(&p->core);
    uint32_t fi = pool_fl_index(p, fl);
    size_t n = fi == POOL_NIL ? 0 : p->fl[fi].count;
    hk__core_unlock(&p->core);
    return n;
}

size_t hk_pool_flist_live(const hk_pool *p, hk_pool_flist fl) {
    if (!p) return 0;
    hk__core_lock(&p->core);
    uint32_t fi = pool_fl_index(p, fl);
    size_t n = 0;
    if (fi != POOL_NIL)
        for (uint32_t i = 0; i < p->fl[fi].count; i++) n += pool_alive_slot(p, p->fl[fi].ents[i]) != POOL_NIL;
    hk__core_unlock(&p->core);
    return n;
}

hk_result hk__pool_flist_push(hk_pool *p, hk_pool_flist fl, hk_pool_id id) {
    if (!p) return HK_ERR_INVALID;
    hk__core_lock(&p->core);
    hk_result r = HK_OK;
    uint32_t fi = pool_fl_resolve(p, fl, "flist_push", &r);
    uint32_t s = fi != POOL_NIL ? hk__pool_resolve(p, id, "flist_push", 0, &r) : POOL_NIL;
    if (s != POOL_NIL) {
        hk__pool_fl *f = &p->fl[fi];
        if (f->count == 0xFFFFFFFFu || !pool_fl_make_room(p, fi)) {
            r = hk__report(
                &p->core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, 0, f->name,
                "flist_push: frame list '%s' cannot grow beyond %u entries (backing hooks refused)",
                f->name ? f->name : "?", f->room);
        } else {
            f->ents[f->count++] = id.value;
        }
    }
    pool_after_links(p);
    hk__core_unlock(&p->core);
    return r;
}

/* ---- iteration (hk_pool_fiter, pool.h) ----------------------------------------- */

hk_pool_fiter hk_pool_fiter_begin(hk_pool *p, hk_pool_flist fl) {
    hk_pool_fiter it;
    memset(&it, 0, sizeof it);
    it.state = 2;
    if (!p) return it;
    hk__core_lock(&p->core);
    hk_result r = HK_OK;
    uint32_t fi = pool_fl_resolve(p, fl, "fiter_begin", &r);
    if (fi != POOL_NIL) {
        it.p = p;
        it.handle = fl.value;
        it.f.fl = fi;
        it.state = 0;
        it.mask = p->imask;
        it.words = p->hot.ht.words;
        it.base = p->base;
        it.stride = p->stride;
    }
    hk__core_unlock(&p->core);
    return it;
}

static void pool_fiter_finish(hk_pool *p, hk_pool_fiter *it) {
    for (hk__pool_fiter_frame **pp = &p->fiters; *pp; pp = &(*pp)->up) {
        if (*pp == &it->f) {
            *pp = it->f.up;
            break;
        }
    }
    it->state = 2;
    it->f.i = it->f.end = 0;
    it->cap = 0;
    it->obj = NULL;
    it->id.value = 0;
    hk__pool_scope_end(p);
    pool_after_op(p);
}

/* The step behind hk_pool_fiter_next and hk_pool_fiter_next_within: looks
 * at no more than `limit` entries (>= 1); NULL with the iteration still
 * running when they were all dead. */
static void *pool_fiter_step(hk_pool_fiter *it, uint32_t limit) {
    if (!it || it->state == 2) return NULL;
    hk_pool *p = it->p;
    hk__core_lock(&p->core);
    if (it->state == 0) {
        /* the frame list may have been destroyed since begin */
        hk_result r = HK_OK;
        uint32_t fi = pool_fl_resolve(p, (hk_pool_flist){it->handle}, "fiter_next", &r);
        if (fi == POOL_NIL) {
            it->state = 2;
            hk__core_unlock(&p->core);
            return NULL;
        }
        it->state = 1;
        it->f.ents = p->fl[fi].ents;
        it->f.i = 0;
        it->f.end = p->fl[fi].count;
        it->f.up = p->fiters;
        p->fiters = &it->f;
        hk__pool_scope_begin(p);
        it->cap = p->core.locked_hooks ? 0 : p->cap;
    }
    void *obj = NULL;
    uint32_t stop = it->f.end - it->f.i > limit ? it->f.i + limit : it->f.end;
    while (it->f.i < stop) {
        uint32_t v = it->f.ents[it->f.i++], s = pool_alive_slot(p, v);
        if (s != POOL_NIL) {
            it->id.value = v;
            obj = it->obj = pool_obj(p, s);
            break;
        }
    }
    if (!obj && it->f.i >= it->f.end) pool_fiter_finish(p, it);
    if (!obj) it->obj = NULL;
    hk__core_unlock(&p->core);
    return obj;
}

void *hk__pool_fiter_step(hk_pool_fiter *it) { return pool_fiter_step(it, UINT32_MAX); }

void *hk_pool_fiter_next_within(hk_pool_fiter *it, uint32_t max_entries) {
    return pool_fiter_step(it, max_entries ? max_entries : 1u);
}

void hk_pool_fiter_end(hk_pool_fiter *it) {
    if (!it || it->state == 2) return;
    if (it->state == 0) { /* never started: nothing to undo in the pool */
        it->state = 2;
        return;
    }
    hk_pool *p = it->p;
    hk__core_lock(&p->core);
    pool_fiter_finish(p, it);
    hk__core_unlock(&p->core);
}

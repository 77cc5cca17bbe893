/*
 * src/pool_check.c - the pool's introspection: hk_pool_check (every
 * invariant of pool_internal.h, the handle table's included), hk_pool_walk
 * and hk_pool_where.
 *
 * The check reads the pool and writes nothing but the handle table's
 * scratch bits (restored before it returns); walk and where only read. The
 * check is also the pool's paranoid hook (hk__pool_check, run by the core
 * after every mutating call with HK_FLAG_PARANOID), so it takes no lock.
 */
#include "pool_internal.h"

#define POOL_BAD(...)                                                                                        \
    do {                                                                                                     \
        hk__report(&p->core.rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, p, 0, NULL, __VA_ARGS__);          \
        return 0;                                                                                            \
    } while (0)

static int pool_check_pending(hk_pool *p) {
    uint32_t n = 0, last = POOL_NIL, total = p->cap + p->ohigh;
    for (uint32_t s = p->pend_head; s != POOL_NIL; s = pool_m(p, s)->next) {
        if (s >= total) POOL_BAD("pending queue: slot %u out of range after slot %u", s, last);
        if (++n > p->npending) POOL_BAD("pending queue: longer than its count %u (cycle?)", p->npending);
        if (pool_state(p, s) != POOL_DYING)
            POOL_BAD("pending queue: slot %u is in state %u", s, pool_state(p, s));
        last = s;
    }
    if (n != p->npending) POOL_BAD("pending queue: %u slots found, count says %u", n, p->npending);
    if (last != p->pend_tail)
        POOL_BAD("pending queue: tail is slot %u, the last slot found is %u", p->pend_tail, last);
    if (p->pend_ok) { /* the dense copy: the same slots in the same order */
        if (p->npend != p->npending)
            POOL_BAD("pending queue: its dense copy holds %u slots, the queue %u", p->npend, p->npending);
        uint32_t i = 0;
        for (uint32_t s = p->pend_head; s != POOL_NIL; s = pool_m(p, s)->next, i++)
            if (p->pend[i] != s)
                POOL_BAD("pending queue: entry %u of its dense copy is slot %u, not %u", i, p->pend[i], s);
    }
    return 1;
}

/* A free fast slot still holds HK_FILL_FREE (HK_FLAG_FILL). */
static int pool_check_fill(hk_pool *p, uint32_t s) {
    unsigned char *o = p->base + (size_t)s * p->stride;
    hk__san_access(o, p->stride);
    size_t bad = hk__fill_find(o, p->stride, HK_FILL_FREE);
    hk__san_noaccess(o, p->stride);
    if (bad == p->stride) return 1;
    hk__report(&p->core.rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_FREE, o + bad, p->elem_size, NULL,
               "free slot %u at %p written after free (byte %zu)", s, (void *)o, bad);
    return 0;
}

static int pool_check_slots(hk_pool *p) {
    uint32_t nfree = 0, nret = 0, nalive = 0, ndying = 0, nfdying = 0, nofree = 0;
    size_t fl = 0, ol = 0;
    const hk__htab *t = &p->hot.ht;
    for (uint32_t s = 0; s < p->cap + p->ohigh; s++) {
        pool_meta *m = pool_m(p, s);
        int fast = s < p->cap, st = pool_state(p, s);
        uint32_t id = pool_id(p, s);
        if (!fast && m->state != POOL_FREE && m->state != POOL_ALIVE && m->state != POOL_DYING)
            POOL_BAD("overflow slot %u: bad state %u", s - p->cap, m->state);
        if (fast) {
            unsigned char busy =
                (unsigned char)(m->parent != POOL_NIL || m->first_child != POOL_NIL || m->nlinked);
            if (p->busy[s] != busy)
                POOL_BAD("slot %u at %p: busy flag %u, links say %u", s, pool_obj(p, s), p->busy[s], busy);
        }
        if (st == POOL_ALIVE || st == POOL_DYING) {
            if (!fast) {
                if ((m->id & p->imask) != p->mark || m->id >> p->index_bits == 0)
                    POOL_BAD("overflow slot %u: bad ID 0x%08x", s - p->cap, m->id);
                if (hk__pool_ovf_find(p, m->id) != s)
                    POOL_BAD("overflow object 0x%08x at %p does not resolve through the ID table", m->id,
                             pool_obj(p, s));
                if (!(*pool_oo(p, s - p->cap)).raw || hk__pool_ovf_at(p, (*pool_oo(p, s - p->cap)).obj) != s)
                    POOL_BAD("overflow object 0x%08x at %p is missing from the address table", m->id,
                             pool_obj(p, s));
            }
            if (st == POOL_ALIVE) {
                nalive++;
                if (fast)
                    fl++;
                else
                    ol++;
            } else {
                ndying++;
                if (fast) nfdying++;
                if (m->parent != POOL_NIL || m->first_child != POOL_NIL)
                    POOL_BAD("pending object 0x%08x at %p is still in a tree", id, pool_obj(p, s));
            }
        } else {
            if (m->parent != POOL_NIL || m->first_child != POOL_NIL || m->nchildren)
                POOL_BAD("free slot %u still has tree links", s);
            if (st == POOL_FREE) {
                if (fast)
                    nfree++;
                else
                    nofree++;
            } else {
                nret++;
            }
            if (fast && st == POOL_FREE && (pool_flags(p) & HK_FLAG_FILL) && !pool_check_fill(p, s)) return 0;
        }
        if (!fast && m->state == POOL_FREE && (*pool_oo(p, s - p->cap)).raw)
            POOL_BAD("free overflow slot %u still holds memory", s - p->cap);
        uint32_t nl = 0;
        for (uint32_t k = 0; k < p->links; k++) nl += pool_l(p, s, k)->list != 0;
        if (nl != m->nlinked)
            POOL_BAD("object 0x%08x at %p is on %u lists, its count says %u", id, pool_obj(p, s), nl,
                     m->nlinked);
        for (uint32_t k = 0; k < p->links; k++) {
            pool_link *l = pool_l(p, s, k);
            if (l->list && st != POOL_ALIVE)
                POOL_BAD("slot %u (state %u) is still on list %u", s, st, l->list - 1);
            if (l->list &&
                (l->list > p->max_lists || !p->lists[l->list - 1].used || p->lists[l->list - 1].link != k))
                POOL_BAD("object 0x%08x at %p names list %u on link %u, which is not such a list", id,
                         pool_obj(p, s), l->list - 1, k);
        }
    }
    if (nalive != pool_live(p) || fl != pool_fast_live(p) || ol != p->ovf_live)
        POOL_BAD("counters: %u alive found (%zu fast, %zu overflow), counters say %zu (%zu, %zu)", nalive, fl,
                 ol, pool_live(p), pool_fast_live(p), p->ovf_live);
    if (ndying != p->npending || nfdying != t->nheld)
        POOL_BAD("counters: %u pending found (%u fast), counts say %u (%u)", ndying, nfdying, p->npending,
                 t->nheld);
    if (nret != t->nretired) POOL_BAD("counters: %u retired slots found, count says %u", nret, t->nretired);
    if (nfree != pool_nfree(p))
        POOL_BAD("counters: %u free slots found, the free ring holds %u", nfree, pool_nfree(p));
    size_t base = (size_t)p->cap - t->nretired + p->ovf_live + (p->npending - t->nheld);
    if (p->hot.hold_base != base)
        POOL_BAD("counters: held-objects base %zu, expected %zu", p->hot.hold_base, base);
    if (pool_live(p) + p->npending > p->hot.peak)
        POOL_BAD("counters: %zu objects held, above the peak %zu", pool_live(p) + p->npending, p->hot.peak);
    if (p->oid.n != p->ohigh - nofree)
        POOL_BAD("overflow ID table holds %u keys for %u overflow objects", p->oid.n, p->ohigh - nofree);
    if (p->optr.n != p->ohigh - nofree)
        POOL_BAD("overflow address table holds %u keys for %u overflow objects", p->optr.n,
                 p->ohigh - nofree);
    uint32_t n = 0;
    for (uint32_t s = p->ofree_head; s != POOL_NIL; s = pool_m(p, s)->next) {
        if (s < p->cap || s >= p->cap + p->ohigh || pool_m(p, s)->state != POOL_FREE)
            POOL_BAD("overflow free list: bad slot %u", s);
        if (++n > nofree)
            POOL_BAD("overflow free list: longer than the %u free overflow slots (cycle?)", nofree);
    }
    if (n != nofree) POOL_BAD("overflow free list: %u slots, %u free overflow slots", n, nofree);
    return 1;
}

static int pool_check_lists(hk_pool *p) {
    uint32_t used = 0, total = p->cap + p->ohigh;
    for (uint32_t li = 0; li < p->max_lists; li++) {
        pool_lst *L = &p->lists[li];
        if (!L->used) {
            if (L->head != POOL_NIL && L->count) POOL_BAD("deleted list %u still has members", li);
            continue;
        }
        used++;
        const char *nm = L->name ? L->name : "?";
        uint32_t n = 0, prev = POOL_NIL;
        for (uint32_t s = L->head; s != POOL_NIL; s = pool_l(p, s, L->link)->next) {
            if (s >= total) POOL_BAD("list '%s': member slot %u out of range", nm, s);
            pool_link *l = pool_l(p, s, L->link);
            if (l->list != li + 1) POOL_BAD("list '%s': member slot %u names list %u", nm, s, l->list);
            if (l->prev != prev)
                POOL_BAD("list '%s': slot %u's back link is %u, expected %u", nm, s, l->prev, prev);
            if (pool_state(p, s) != POOL_ALIVE) POOL_BAD("list '%s': member slot %u is not alive", nm, s);
            if (++n > L->count) POOL_BAD("list '%s': more members than its count %u (cycle?)", nm, L->count);
            prev = s;
        }
        if (n != L->count) POOL_BAD("list '%s': %u members found, count says %u", nm, n, L->count);
        if (prev != L->tail) POOL_BAD("list '%s': tail is slot %u, last member is %u", nm, L->tail, prev);
    }
    if (used != p->nlists) POOL_BAD("%u lists in use, count says %u", used, p->nlists);
    /* every link naming a list is on it: counts add up per list */
    for (uint32_t li = 0; li < p->max_lists; li++) {
        if (!p->lists[li].used) continue;
        uint32_t named = 0;
        for (uint32_t s = 0; s < total; s++)
            if (pool_l(p, s, p->lists[li].link)->list == li + 1) named++;
        if (named != p->lists[li].count)
            POOL_BAD("list '%s': %u objects name it, %u are on it",
                     p->lists[li].name ? p->lists[li].name : "?", named, p->lists[li].count);
    }
    return 1;
}

/* No parent chain has a cycle: every ALIVE object lies under a root. The
 * child lists were checked against the parent links (pool_check_tree), so
 * a walk down from the roots (first child, next sibling, back up through
 * parents: no stack) reaches exactly the objects whose parent chain ends at
 * a root; any other ALIVE object sits on a cycle. O(objects) whatever the
 * depth (walking up from every object was O(objects x depth)). */
static int pool_check_roots(hk_pool *p, uint32_t total) {
    size_t alive = 0, reached = 0;
    for (uint32_t s = 0; s < total; s++) alive += pool_state(p, s) == POOL_ALIVE;
    for (uint32_t s = 0; s < total; s++) {
        if (pool_state(p, s) != POOL_ALIVE || pool_m(p, s)->parent != POOL_NIL) continue;
        uint32_t x = s;
        for (;;) {
            if (++reached > alive) POOL_BAD("tree: more objects under roots than alive (%zu)", alive);
            const pool_meta *xm = pool_m(p, x);
            if (xm->first_child != POOL_NIL) {
                x = xm->first_child;
                continue;
            }
            while (x != s && pool_m(p, x)->next_sib == POOL_NIL) x = pool_m(p, x)->parent;
            if (x == s) break;
            x = pool_m(p, x)->next_sib;
        }
    }
    if (reached != alive)
        POOL_BAD("tree: %zu of %zu live objects are under no root: their parent chains form a cycle",
                 alive - reached, alive);
    return 1;
}

static int pool_check_tree(hk_pool *p) {
    uint32_t total = p->cap + p->ohigh;
    for (uint32_t s = 0; s < total; s++) {
        pool_meta *m = pool_m(p, s);
        if (pool_state(p, s) != POOL_ALIVE) continue;
        uint32_t id = pool_id(p, s);
        if (m->parent != POOL_NIL) {
            if (m->parent >= total || pool_state(p, m->parent) != POOL_ALIVE)
                POOL_BAD("object 0x%08x at %p has a dead parent (slot %u)", id, pool_obj(p, s), m->parent);
        }
        uint32_t n = 0, prev = POOL_NIL;
        for (uint32_t c = m->first_child; c != POOL_NIL; c = pool_m(p, c)->next_sib) {
            if (c >= total) POOL_BAD("object 0x%08x: child slot %u out of range", id, c);
            pool_meta *cm = pool_m(p, c);
            if (cm->parent != s || cm->prev_sib != prev)
                POOL_BAD("object 0x%08x at %p: child slot %u links back wrongly", id, pool_obj(p, s), c);
            if (++n > m->nchildren)
                POOL_BAD("object 0x%08x: more children than its count %u", id, m->nchildren);
            prev = c;
        }
        if (n != m->nchildren || prev != m->last_child)
            POOL_BAD("object 0x%08x at %p: %u children found, count %u", id, pool_obj(p, s), n, m->nchildren);
    }
    return pool_check_roots(p, total);
}

#define POOL_FL_BAD(...)                                                                                     \
    hk__report(&p->core.rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, p, 0, NULL, __VA_ARGS__)

/* The frame lists and their running iterations (pool_frame.c). */
static hk_result pool_check_frames(hk_pool *p) {
    uint32_t used = 0;
    for (uint32_t i = 0; i < p->max_lists; i++) {
        const hk__pool_fl *f = &p->fl[i];
        if (!f->handle) {
            if (f->ents || f->count || f->room)
                return POOL_FL_BAD("frame list %u: destroyed but holds %u of %u entries", i, f->count,
                                   f->room);
            continue;
        }
        used++;
        if (f->handle != ((f->gen << 16) | (i + 1)) || f->gen == 0 || f->gen > 0xFFFFu)
            return POOL_FL_BAD("frame list %u: handle 0x%08x does not match generation %u", i, f->handle,
                               f->gen);
        if (f->count > f->room || (f->room != 0) != (f->ents != NULL))
            return POOL_FL_BAD("frame list '%s': %u entries, room %u, array %p", f->name ? f->name : "?",
                               f->count, f->room, (const void *)f->ents);
        if (f->limit != f->room - f->room / 4u || f->copied > f->count || (f->copied && !f->next) ||
            (f->next && memcmp(f->next, f->ents, (size_t)f->copied * sizeof(uint32_t)) != 0))
            return POOL_FL_BAD("frame list '%s': limit %u for room %u, growth copied %u of %u entries (%s)",
                               f->name ? f->name : "?", f->limit, f->room, f->copied, f->count,
                               f->next ? "copies differ" : "no next array");
        for (uint32_t e = 0; e < f->count; e++) {
            uint32_t v = f->ents[e], s = v & p->imask;
            if ((s >= p->cap && s != p->mark) || (v >> p->index_bits) == 0)
                return POOL_FL_BAD("frame list '%s': entry %u (0x%08x) is not an ID of this pool",
                                   f->name ? f->name : "?", e, v);
        }
    }
    if (used != p->nfl_used)
        return POOL_FL_BAD("frame lists: %u exist, the count says %u", used, p->nfl_used);
    for (const hk__pool_fiter_frame *it = p->fiters; it; it = it->up) {
        if (it->end == 0) continue; /* stopped (its list cleared or destroyed): ends at its next step */
        if (it->fl >= p->max_lists || !p->fl[it->fl].handle)
            return POOL_FL_BAD("frame iteration over frame list %u, which does not exist", it->fl);
        const hk__pool_fl *f = &p->fl[it->fl];
        if ((it->ents != f->ents || it->i > it->end || it->end > f->count))
            return POOL_FL_BAD("frame iteration over '%s': entry %u of %u (list: %u), stale array",
                               f->name ? f->name : "?", it->i, it->end, f->count);
    }
    return HK_OK;
}

hk_result hk__pool_check(void *pool) {
    hk_pool *p = (hk_pool *)pool;
    if (p->hot.ht.cap != p->cap || p->hot.ht.words == NULL)
        return hk__report(&p->core.rep, HK_ERR_CORRUPT, HK_EK_CORRUPT_STRUCTURE, p, 0, NULL,
                          "control block damaged: the ID table has %u slots, the pool %u", p->hot.ht.cap,
                          p->cap);
    if (hk__ht_check(&p->hot.ht, &p->core.rep, "ID") != HK_OK) return HK_ERR_CORRUPT;
    int ok = pool_check_pending(p) && pool_check_slots(p) && pool_check_lists(p) && pool_check_tree(p);
    if (ok && pool_check_frames(p) != HK_OK) ok = 0;
    return ok ? HK_OK : HK_ERR_CORRUPT;
}

hk_result hk_pool_check(hk_pool *p) {
    if (!p) return HK_ERR_INVALID;
    hk__core_lock(&p->core);
    hk_result r = hk__pool_check(p);
    hk__core_unlock(&p->core);
    return r;
}

/* ---- walk and where ------------------------------------------------------------------- */

static void pool_info_of(const hk_pool *p, uint32_t s, hk_block_info *info) {
    memset(info, 0, sizeof *info);
    info->address = pool_obj(p, s);
    info->size = p->elem_size;
    info->name = p->core.rep.instance;
    if (s < p->cap) {
        info->overhead = p->stride - p->elem_size + sizeof(pool_meta) + 2 * sizeof(uint32_t) + 2 +
                         p->links * sizeof(pool_link);
    } else {
        info->flags |= HK_BLOCK_OVERFLOW;
        info->overhead = (*pool_oo(p, s - p->cap)).raw_size - p->elem_size + sizeof(pool_meta) +
                         sizeof(pool_ovf) + p->links * sizeof(pool_link);
    }
    int st = pool_state(p, s);
    if (st == POOL_ALIVE || st == POOL_DYING) {
        info->flags |= HK_BLOCK_USED;
        info->requested = p->elem_size;
        info->id = pool_id(p, s);
    }
}

int hk_pool_walk(hk_pool *p, hk_walk_fn fn, void *user) {
    if (!p || !fn) return -1;
    hk__core_lock(&p->core);
    int r = 0;
    hk_block_info info;
    for (uint32_t s = 0; s < p->cap + p->ohigh && !r; s++) {
        if (s >= p->cap && pool_m(p, s)->state == POOL_FREE) continue;
        pool_info_of(p, s, &info);
        r = fn(&info, user);
    }
    hk__core_unlock(&p->core);
    return r;
}

hk_result hk_pool_where(hk_pool *p, const void *addr, hk_block_info *info) {
    if (!p || !info) return HK_ERR_INVALID;
    hk__core_lock(&p->core);
    hk_result r = HK_ERR_FOREIGN;
    uintptr_t a = (uintptr_t)addr, b = (uintptr_t)p->base;
    if (a >= b && a - b < (uintptr_t)p->cap * p->stride) {
        pool_info_of(p, (uint32_t)((size_t)(a - b) / p->stride), info);
        r = HK_OK;
    } else if (addr) {
        uint32_t s = hk__pool_ovf_at(p, addr);
        for (uint32_t i = 0; s == POOL_NIL && i < p->ohigh; i++) {
            const pool_ovf *o = pool_oo(p, i);
            if (o->raw && a >= (uintptr_t)o->obj && a - (uintptr_t)o->obj < p->elem_size) s = p->cap + i;
        }
        if (s != POOL_NIL) {
            pool_info_of(p, s, info);
            r = HK_OK;
        }
    }
    hk__core_unlock(&p->core);
    return r;
}

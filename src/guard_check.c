/*
 * src/guard_check.c - the guard heap's introspection: hk_guard_check (every
 * invariant of guard_internal.h, verified slot by slot), hk_guard_walk and
 * hk_guard_where.
 *
 * Invariants: nothing here changes the heap; check reports the first
 * problem it finds (one line, HK_ERR_CORRUPT) and stops; the locked check
 * is also the instance core's paranoid after-op check.
 */
#include "guard_internal.h"

static void guard_fill_info(const hk_guard *g, const guard_slot *s, hk_block_info *info) {
    memset(info, 0, sizeof *info);
    info->address = (void *)guard_user(g, s);
    info->size = s->requested;
    info->requested = s->requested;
    info->overhead = guard_data_bytes(g, s) + g->page - s->requested;
    info->flags = HK_BLOCK_GUARDED | (s->state == GUARD_STATE_LIVE ? HK_BLOCK_USED : HK_BLOCK_QUARANTINED);
}

int hk_guard_walk(hk_guard *g, hk_walk_fn fn, void *user) {
    if (!g || !fn) return 0;
    int rc = 0;
    guard_lock(g);
    size_t npages = g->bump / g->page;
    for (size_t i = 0; i < npages && rc == 0;) {
        uint32_t id = g->pagemap[i];
        if (id == 0 || id >= g->nslots) break;
        const guard_slot *s = &g->slots[id];
        if (s->state == GUARD_STATE_LIVE || s->state == GUARD_STATE_QUAR) {
            hk_block_info info;
            guard_fill_info(g, s, &info);
            rc = fn(&info, user);
        }
        i += (size_t)s->pages + 1;
    }
    guard_unlock(g);
    return rc;
}

hk_result hk_guard_where(hk_guard *g, const void *addr, hk_block_info *info) {
    if (!g || !info) return HK_ERR_INVALID;
    guard_lock(g);
    uint32_t id = guard_slot_of(g, addr);
    hk_result r = HK_ERR_FOREIGN;
    if (id && guard_slot_ok(g, &g->slots[id]) &&
        (g->slots[id].state == GUARD_STATE_LIVE || g->slots[id].state == GUARD_STATE_QUAR)) {
        guard_fill_info(g, &g->slots[id], info);
        r = HK_OK;
    }
    guard_unlock(g);
    return r;
}

/* Padding damage found by a check, reported after the lock is released. */
typedef struct guard_pad_find {
    int dmg;
    uintptr_t first, last;
    guard_blockinfo b;
} guard_pad_find;

size_t hk__guard_check_pads_locked(hk_guard *g, const char *found) {
    size_t n = 0;
    for (uint32_t id = 1; id < g->nslots; id++) {
        const guard_slot *s = &g->slots[id];
        uintptr_t first, last;
        int d;
        if (s->state == GUARD_STATE_LIVE && (d = hk__guard_pads_damaged(g, s, &first, &last)) != 0) {
            guard_blockinfo b;
            guard_blockinfo_from(g, s, &b);
            (void)hk__guard_pad_report(g, &b, d, first, last, found, NULL, 0);
            n++;
        }
    }
    return n;
}

size_t hk_guard_check_padding(hk_guard *g) {
    if (!g) return 0;
    guard_lock(g);
    size_t n = hk__guard_check_pads_locked(g, "at exit");
    guard_unlock(g);
    return n;
}

/* The whole check; padding damage goes into *pf (not reported) when pf is
 * not NULL, else it is reported in one line like every other problem. */
static hk_result guard_check_all(hk_guard *g, guard_pad_find *pf) {
    hk_result res = HK_OK;
    size_t npages = g->bump / g->page, live = 0, used = 0, quar = 0, qbytes = 0, nfree = 0, resident = 0;
    size_t own = 0, shared_live = 0;
    for (size_t i = 0; i < npages;) {
        uint32_t id = g->pagemap[i];
        if (id == 0 || id >= g->nslots) {
            res = hk__guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g->arena + i * g->page,
                                    "page map hole or bad id", i, id);
            goto out;
        }
        guard_slot *s = &g->slots[id];
        if (!guard_slot_ok(g, s) || s->base_page != i || s->pages == 0 || i + s->pages + 1 > npages) {
            res = hk__guard_corrupt(g, HK_EK_CORRUPT_HEADER, (void *)(g->arena + i * g->page),
                                    "slot record damaged (checksum, base or size)", id, i);
            goto out;
        }
        for (size_t k = 0; k <= s->pages; k++) {
            if (g->pagemap[i + k] != id) {
                res = hk__guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, (void *)(g->arena + (i + k) * g->page),
                                        "page map disagrees with slot", id, g->pagemap[i + k]);
                goto out;
            }
        }
        if (s->sflags & GUARD_SLOT_OWN)
            own++;
        else if (s->state == GUARD_STATE_LIVE && !(s->sflags & GUARD_SLOT_GI))
            shared_live++;
        if (s->state == GUARD_STATE_LIVE) {
            uintptr_t at, last;
            int d = hk__guard_pads_damaged(g, s, &at, &last);
            if (d && pf) {
                pf->dmg = d;
                pf->first = at;
                pf->last = last;
                guard_blockinfo_from(g, s, &pf->b);
                res = HK_ERR_CORRUPT;
                goto out;
            }
            if (d) {
                __atomic_add_fetch(&g->reports, 1, __ATOMIC_RELAXED);
                res = hk__report(&g->core.rep, HK_ERR_CORRUPT,
                                 d > 0 ? HK_EK_HEAP_OVERFLOW : HK_EK_HEAP_UNDERFLOW, (void *)at, s->requested,
                                 NULL, "padding of %zu-byte block %p damaged at offset %+lld", s->requested,
                                 (void *)guard_user(g, s), (long long)(at - guard_user(g, s)));
                goto out;
            }
            if (s->alloc_trace > g->ntraces) {
                res = hk__guard_corrupt(g, HK_EK_CORRUPT_HEADER, (void *)guard_user(g, s), "bad trace id", id,
                                        s->alloc_trace);
                goto out;
            }
            live++;
            used += s->requested;
        } else if (s->state == GUARD_STATE_QUAR) {
            quar++;
            qbytes += guard_data_bytes(g, s);
        } else if (s->state == GUARD_STATE_FREE) {
            nfree++;
            if (s->sflags & GUARD_SLOT_RESIDENT) resident += guard_data_bytes(g, s);
        } else {
            res = hk__guard_corrupt(g, HK_EK_CORRUPT_HEADER, (void *)guard_base(g, s), "bad slot state", id,
                                    s->state);
            goto out;
        }
        i += (size_t)s->pages + 1;
    }
    if (live != g->live_guarded || used != g->used_guarded) {
        res = hk__guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g, "live block count/bytes disagree", live,
                                g->live_guarded);
        goto out;
    }
    if (own != g->n_own || shared_live != g->live_shared || own > g->own_max ||
        (shared_live && own + shared_live > g->max_guarded)) {
        res = hk__guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g,
                                "own-mapping / shared live slot counts disagree", own, g->n_own);
        goto out;
    }
    if (resident != g->resident_free || resident > GUARD_RESIDENT_POOL) {
        res = hk__guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g, "resident free pages disagree", resident,
                                g->resident_free);
        goto out;
    }
    if (quar != g->q_blocks || qbytes != g->q_bytes) {
        res = hk__guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g, "quarantine count/bytes disagree", quar,
                                g->q_blocks);
        goto out;
    }
    {
        size_t n = 0;
        uint32_t last = 0;
        for (uint32_t id = g->q_head; id && n <= quar; id = g->slots[id].next, n++) {
            if (id >= g->nslots || g->slots[id].state != GUARD_STATE_QUAR) {
                res = hk__guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g,
                                        "quarantine list holds a non-quarantined slot", id, n);
                goto out;
            }
            last = id;
        }
        if (n != quar || last != g->q_tail) {
            res = hk__guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g, "quarantine list length/tail wrong", n,
                                    quar);
            goto out;
        }
        n = 0;
        for (uint32_t k = 0; k <= GUARD_BINS; k++) {
            for (uint32_t id = g->bins[k]; id && n <= nfree; id = g->slots[id].next, n++) {
                if (id >= g->nslots || g->slots[id].state != GUARD_STATE_FREE || g->slots[id].pages != k) {
                    res = hk__guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g, "free bin holds a wrong slot", id,
                                            k);
                    goto out;
                }
            }
        }
        for (uint32_t id = g->large; id && n <= nfree; id = g->slots[id].next, n++) {
            if (id >= g->nslots || g->slots[id].state != GUARD_STATE_FREE ||
                g->slots[id].pages <= GUARD_BINS) {
                res = hk__guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g, "large free list holds a wrong slot",
                                        id, 0);
                goto out;
            }
        }
        if (n != nfree) {
            res = hk__guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g, "free lists miss free slots", n, nfree);
            goto out;
        }
    }
    if (g->live_guarded > g->max_guarded) {
        res = hk__guard_corrupt(g, HK_EK_CORRUPT_STRUCTURE, g, "live guarded blocks exceed the cap",
                                g->live_guarded, g->max_guarded);
        goto out;
    }
out:
    return res;
}

hk_result hk__guard_check_locked(hk_guard *g) { return guard_check_all(g, NULL); }

hk_result hk_guard_check(hk_guard *g) {
    if (!g) return HK_ERR_INVALID;
    guard_pad_find pf;
    pf.dmg = 0;
    guard_lock(g);
    hk_result res = guard_check_all(g, &pf);
    guard_unlock(g);
    if (pf.dmg) (void)hk__guard_pad_report(g, &pf.b, pf.dmg, pf.first, pf.last, "by check", NULL, 0);
    return res;
}

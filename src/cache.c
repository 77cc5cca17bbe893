/*
 * src/cache.c - the cache's instance and its per-handle calls
 * (heapkit/cache.h): create / destroy, free, deref (and deref_fast's miss),
 * touch, size, lock / unlock, purgeable, purge.
 *
 * Invariants: the instance starts with the view hk_cache_deref_fast reads
 * (base, index mask, epoch) and its hot entries start HK__CACHE_HOT_OFFSET bytes
 * after it; `slow` is set when the core has lock hooks or is paranoid, or
 * when the base (the lowest address the region can have: for a hunk, its
 * block area) is more than 32 GiB below the highest, and then deref_fast's
 * epoch is one no tag carries, so deref_fast
 * always takes hk_cache_deref (and the lock). Every mutating call
 * ends with hk__core_after (the paranoid check). None of the calls here
 * moves a block except lock_high (through cache_compact.c).
 *
 * Where the rest lives: src/cache_internal.h lists the files and their
 * layers; this file calls cache_compact.c, cache_hunk.c (the tenant hook it
 * installs), cache_region.c, cache_handles.c, and registers
 * cache_check.c's check with the core.
 */
#include "cache_internal.h"

/* ---- create / destroy ------------------------------------------------------------ */

hk_cache *hk_cache_create(const hk_cache_desc *desc) {
    if (!desc) return NULL;
    hk__core core;
    if (HK__CORE_INIT(&core, "cache", desc, hk__cache_check, NULL) != HK_OK) return NULL;
    size_t data_size =
        desc->hunk ? 0 : (desc->memory ? desc->size : (desc->size ? desc->size : CACHE_DEFAULT_SIZE));
    uint32_t nslots = desc->max_handles;
    if (!nslots) {
        size_t est = data_size / 1024u;
        if (desc->hunk) {
            size_t mn;
            hk_hunk_free_range(desc->hunk, NULL, &mn);
            est = mn / 1024u;
        }
        nslots = (uint32_t)(est < 64 ? 64 : est > ((size_t)1 << 20) ? ((size_t)1 << 20) : est);
        nslots = (1u << cache_log2(nslots)) - 1u; /* 2^k - 1: no hot entry is wasted */
    }
    if (nslots > (1u << 24) - 1u) return NULL;
    uint32_t idx_bits = hk__cache_table_bits(nslots);
    /* the free lists: enough bins for the largest block the region can
     * ever hold (a hunk's region grows into the hunk's whole block area) */
    size_t span = desc->memory ? desc->size : data_size;
    if (desc->hunk) {
        void *ms;
        size_t mn;
        hk_hunk_info hi;
        hk_hunk_free_range(desc->hunk, &ms, &mn);
        if (hk_hunk_get_info(desc->hunk, &hi) != HK_OK) return NULL;
        span = hi.low_used + mn + hi.high_used;
        if (hi.capacity > span) span = hi.capacity;
    }
    uint32_t nbins = hk__cache_nbins_for(span);
    size_t ctl = HK__CACHE_HOT_OFFSET; /* the hot entries follow the instance there */
    size_t table = hk__cache_table_bytes(nslots, idx_bits, nbins);
    size_t head = ctl + table, total;
    if (!table) return NULL;
    if (!hk_size_add(head, 16u, &total)) return NULL;
    if (!desc->hunk && !desc->memory && !hk_size_add(total, data_size, &total)) return NULL;
    unsigned char *mem;
    size_t mem_size;
    void *os_base = NULL;
    if (desc->memory) {
        mem = (unsigned char *)desc->memory;
        mem_size = desc->size;
    } else {
        os_base = hk_os_alloc(total);
        if (!os_base) {
            hk__report(&core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, total, NULL,
                       "create: the OS refused %zu bytes for the cache", total);
            return NULL;
        }
        mem = (unsigned char *)os_base;
        mem_size = total;
    }
    /* the whole range is checked before a byte of it is written: caller
     * memory whose size runs past the end of the address space is refused */
    if (mem_size > UINTPTR_MAX - (uintptr_t)mem) {
        hk__report(&core.rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, mem, mem_size, NULL,
                   "memory %p + %zu runs past the end of the address space", (void *)mem, mem_size);
        goto fail;
    }
    uintptr_t start = hk_align_ptr((uintptr_t)mem, 64);
    if (start - (uintptr_t)mem > mem_size || mem_size - (start - (uintptr_t)mem) < head) goto fail;
    if (!desc->hunk) {
        uintptr_t lo = hk_align_ptr(start + head, 16), hi = ((uintptr_t)mem + mem_size) & ~(uintptr_t)15u;
        if (hi <= lo || hi - lo < 64u) goto fail;
    }
    hk_cache *c = (hk_cache *)start;
    memset(c, 0, sizeof *c);
    c->core = core;
    c->core.self = c;
    c->slow = (c->core.locked_hooks || c->core.paranoid) ? 1u : 0u;
    if (HK__TRACKED(&c->core)) hk__track_create(&c->core);
    /* the base of the hot entries' offsets: below every address the region
     * can hold (for a hunk, its whole block area), within 32 GiB of the top */
    uintptr_t rlo = hk_align_ptr(start + head, 16), rhi = ((uintptr_t)mem + mem_size) & ~(uintptr_t)15u;
    if (desc->hunk) {
        void *ms;
        size_t mn;
        hk_hunk_info hi;
        hk_hunk_free_range(desc->hunk, &ms, &mn);
        if (hk_hunk_get_info(desc->hunk, &hi) != HK_OK) goto fail;
        rlo = (uintptr_t)ms - hi.low_used;
        rhi = (uintptr_t)ms + mn + hi.high_used;
    }
    c->v.base = (uint64_t)rlo & ~(uint64_t)15u;
    if ((uint64_t)rhi + 16u - c->v.base > ((uint64_t)1 << 35))
        c->slow = 1u;                                      /* 32-bit offsets in 8-byte units */
    if (!os_base) memset((void *)(start + ctl), 0, table); /* the OS's pages are fresh zeros */
    if (hk__cache_table_init(c, (void *)(start + ctl), nslots, idx_bits, nbins) != HK_OK) goto fail;
    c->on_purge = desc->on_purge;
    c->purge_user = desc->purge_user;
    c->grow = desc->grow;
    c->grow_user = desc->grow_user;
    c->os_base = os_base;
    c->os_size = os_base ? total : 0;
    if (desc->hunk) {
        void *ms;
        size_t mn;
        hk_hunk_free_range(desc->hunk, &ms, &mn);
        int usable = mn >= CACHE_HDR + CACHE_MIN_FREE;
        if (hk_hunk_set_tenant(desc->hunk, hk__cache_hunk_reclaim, c, usable ? ms : NULL, usable ? mn : 0) !=
            HK_OK)
            goto fail;
        c->hunk = desc->hunk;
        if (usable) hk__cache_region_init(c, (unsigned char *)ms, (unsigned char *)ms + mn);
    } else {
        unsigned char *lo = (unsigned char *)hk_align_ptr(start + head, 16);
        unsigned char *hi = (unsigned char *)(((uintptr_t)mem + mem_size) & ~(uintptr_t)15u);
        if (hi <= lo || (size_t)(hi - lo) < 64u) goto fail;
        hk__cache_region_init(c, lo, hi);
    }
    return c;
fail:
    if (os_base) hk_os_release(os_base, total);
    return NULL;
}

void hk_cache_destroy(hk_cache *c) {
    if (!c) return;
    if (HK__TRACKED(&c->core)) {
        (void)hk_cache_walk(c, hk__track_end_visit, &c->core); /* each block ends */
        if (c->lo) hk__track_heap(&c->core, c->lo, cache_claim_size(c), 0);
        hk__track_destroy(&c->core);
    }
    if (c->hunk) {
        if (c->lo) {
            size_t n = cache_claim_size(c);
            cache_unpoison(c->lo, n);
            cache_poison(c->lo, n);
        }
        (void)hk_hunk_set_tenant(c->hunk, NULL, NULL, NULL, 0);
    } else if (c->lo) {
        cache_unpoison(c->lo, cache_claim_size(c));
    }
    if (c->os_base) hk_os_release(c->os_base, c->os_size);
}

/* ---- per-handle calls ------------------------------------------------------------ */

hk_result hk_cache_free(hk_cache *c, hk_cache_handle h) {
    if (!c) return HK_ERR_INVALID;
    hk__core_lock(&c->core);
    hk_result r = HK_OK;
    cache_slot *s = cache_live(c, h);
    if (!s) r = hk__cache_bad_handle(c, h, "free", 1); /* freed twice: HK_ERR_DOUBLE_FREE */
    if (s && s->lock) {
        r = hk__report(&c->core.rep, HK_ERR_LOCKED, HK_EK_LOCKED, cache_data(c, s), s->requested, s->name,
                       "free of locked block '%s' at %p (handle 0x%08x, lock count %u) refused",
                       cache_nm(s->name), cache_data(c, s), cache_handle(c, s), (unsigned)s->lock);
    } else if (s) {
        if (cache_data(c, s) && !hk__cache_canary_ok(c, s, 1)) r = HK_ERR_CORRUPT;
        if (cache_data(c, s)) hk__cache_drop_block(c, s);
        hk__cache_slot_release(c, s);
    }
    hk__core_after(&c->core);
    hk__core_unlock(&c->core);
    return r;
}

void *hk_cache_deref(hk_cache *c, hk_cache_handle h) {
    if (!c) return NULL;
    hk__core_lock(&c->core);
    void *p = NULL;
    cache_slot *s = cache_lookup(c, h, "deref", NULL);
    if (s) {
        cache_stamp(c, s);
        p = cache_data(c, s);
    }
    hk__core_unlock(&c->core);
    return p;
}

/* hk_cache_deref_fast's miss: a live resident handle whose entry is not
 * tagged with the current epoch gets the current tick as its stamp and the
 * epoch in its tag (one write of each per clock value); everything else
 * goes to hk_cache_deref. Lock-free only when the cache has no lock hooks
 * (then it is not thread-safe anyway): with hooks, `slow` sends every call
 * there. */
void *hk__cache_deref_miss(hk_cache *c, uint32_t handle) {
    hk_cache_handle h = {handle};
    if (c && !c->slow) {
        uint32_t i = hk__ht_find(&c->ht, handle);
        if (i != HK__HT_NONE && c->slots[i].data) {
            uint64_t *e = cache_hot_at(c, i);
            c->slots[i].stamp = cache_tick(c);
            *e = (*e & CACHE_OFF_BITS) | ((uint64_t)(handle ^ c->v.epoch) << 32);
            cache_lru_touch(c, &c->slots[i]);
            return c->slots[i].data;
        }
    }
    return hk_cache_deref(c, h);
}

hk_result hk_cache_touch(hk_cache *c, hk_cache_handle h) {
    if (!c) return HK_ERR_INVALID;
    hk__core_lock(&c->core);
    hk_result r = HK_OK;
    cache_slot *s = cache_lookup(c, h, "touch", &r);
    if (s) cache_stamp(c, s);
    hk__core_unlock(&c->core);
    return r;
}

size_t hk_cache_size(hk_cache *c, hk_cache_handle h) {
    if (!c) return 0;
    hk__core_lock(&c->core);
    cache_slot *s = cache_lookup(c, h, "size", NULL);
    size_t n = s ? s->requested : 0;
    hk__core_unlock(&c->core);
    return n;
}

bool hk_cache_is_purged(hk_cache *c, hk_cache_handle h) {
    if (!c) return false;
    hk__core_lock(&c->core);
    cache_slot *s = cache_live(c, h);
    bool r = s && !cache_data(c, s);
    hk__core_unlock(&c->core);
    return r;
}

/* ---- locking, purgeable, purge -------------------------------------------------------- */

/* One more pin on s, refused (reported) when the count would overflow. */
static hk_result cache_pin(hk_cache *c, cache_slot *s, const char *op) {
    if (s->lock >= CACHE_LOCK_MAX)
        return hk__report(&c->core.rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, cache_data(c, s), s->lock, s->name,
                          "%s of '%s' (handle 0x%08x): lock count would pass %u", op, cache_nm(s->name),
                          cache_handle(c, s), CACHE_LOCK_MAX);
    s->lock++;
    cache_lru_sync(c, s, 0); /* a locked block is never purged: off the purge list */
    return HK_OK;
}

hk_result hk_cache_lock(hk_cache *c, hk_cache_handle h) {
    if (!c) return HK_ERR_INVALID;
    hk__core_lock(&c->core);
    hk_result r = HK_OK;
    cache_slot *s = cache_lookup(c, h, "lock", &r);
    if (s) r = cache_pin(c, s, "lock");
    hk__core_after(&c->core);
    hk__core_unlock(&c->core);
    return r;
}

hk_result hk_cache_unlock(hk_cache *c, hk_cache_handle h) {
    if (!c) return HK_ERR_INVALID;
    hk__core_lock(&c->core);
    hk_result r = HK_OK;
    cache_slot *s = cache_lookup(c, h, "unlock", &r);
    if (s && s->lock == 0) {
        r = hk__report(&c->core.rep, HK_ERR_STATE, HK_EK_STATE, cache_data(c, s), s->requested, s->name,
                       "unlock of block '%s' at %p (handle 0x%08x) that is not locked", cache_nm(s->name),
                       cache_data(c, s), cache_handle(c, s));
    } else if (s) {
        s->lock--;
        cache_lru_sync(c, s, 1); /* the last unlock of a purgeable block: on the purge list, newest */
        if (!s->lock && cache_data(c, s)) {
            /* blocks below the hint may now slide: resume compaction before it */
            cache_blk *b = cache_blk_of(cache_data(c, s)), *p = cache_prev(c, b);
            cache_blk *lowest = p ? p : b;
            if ((unsigned char *)lowest < (unsigned char *)c->hint) c->hint = lowest;
        }
    }
    hk__core_after(&c->core);
    hk__core_unlock(&c->core);
    return r;
}

uint32_t hk_cache_lock_count(hk_cache *c, hk_cache_handle h) {
    if (!c) return 0;
    hk__core_lock(&c->core);
    cache_slot *s = cache_lookup(c, h, "lock_count", NULL);
    uint32_t n = s ? s->lock : 0;
    hk__core_unlock(&c->core);
    return n;
}

hk_result hk_cache_lock_high(hk_cache *c, hk_cache_handle h) {
    if (!c) return HK_ERR_INVALID;
    hk__core_lock(&c->core);
    hk_result r = HK_OK;
    cache_slot *s = cache_lookup(c, h, "lock_high", &r);
    if (s && s->lock == 0 && cache_data(c, s)) r = hk__cache_move_high(c, s, "lock_high");
    if (s && r == HK_OK) r = cache_pin(c, s, "lock_high");
    hk__core_after(&c->core);
    hk__core_unlock(&c->core);
    return r;
}

hk_result hk_cache_set_purgeable(hk_cache *c, hk_cache_handle h, bool purgeable) {
    if (!c) return HK_ERR_INVALID;
    hk__core_lock(&c->core);
    hk_result r = HK_OK;
    cache_slot *s = cache_lookup(c, h, "set_purgeable", &r);
    if (s) {
        if (purgeable)
            s->flags |= CACHE_SLOT_PURGEABLE;
        else
            s->flags &= (uint16_t)~CACHE_SLOT_PURGEABLE;
        cache_lru_sync(c, s, 1); /* joins the purge list as the newest, or leaves it */
    }
    hk__core_after(&c->core);
    hk__core_unlock(&c->core);
    return r;
}

hk_result hk_cache_purge(hk_cache *c, hk_cache_handle h) {
    if (!c) return HK_ERR_INVALID;
    hk__core_lock(&c->core);
    hk_result r = HK_OK;
    cache_slot *s = cache_lookup(c, h, "purge", &r);
    if (s && cache_data(c, s) && s->lock)
        r = hk__report(&c->core.rep, HK_ERR_LOCKED, HK_EK_LOCKED, cache_data(c, s), s->requested, s->name,
                       "purge of locked block '%s' at %p (handle 0x%08x) refused", cache_nm(s->name),
                       cache_data(c, s), cache_handle(c, s));
    else if (s && cache_data(c, s))
        hk__cache_purge_slot(c, s);
    hk__core_after(&c->core);
    hk__core_unlock(&c->core);
    return r;
}

size_t hk_cache_purge_all(hk_cache *c) {
    if (!c) return 0;
    hk__core_lock(&c->core);
    size_t n = 0;
    for (cache_slot *s; (s = cache_lru_oldest(c)) != NULL; n++) hk__cache_purge_slot(c, s); /* takes it off */
    hk__core_after(&c->core);
    hk__core_unlock(&c->core);
    return n;
}

/*
 * src/cache_hunk.c - a cache living in the free middle of a hunk (Quake),
 * through the hunk's tenant hooks (heapkit/hunk.h).
 *
 * Invariants: the cache's region [lo, end + 16) is exactly the hunk's tenant
 * claim (hk_hunk_set_tenant_range is called whenever the region changes,
 * except when the hunk itself shrinks the claim after a reclaim); a cache
 * whose region was taken whole has lo == NULL and holds no block. Bytes
 * given back to the hunk are poisoned under ASan.
 *
 * Lock order: hunk, then cache (the hunk calls hk__cache_hunk_reclaim with
 * its lock held). Calls only the layers below it: cache_compact.c,
 * cache_region.c, cache_handles.c.
 */
#include "cache_internal.h"

/* Takes whatever the hunk's middle offers beyond the region. 1 if it grew. */
int hk__cache_hunk_expand(hk_cache *c) {
    hk_hunk *hk = c->hunk;
    void *ms;
    size_t mn;
    hk_hunk_free_range(hk, &ms, &mn);
    unsigned char *m0 = (unsigned char *)ms, *m1 = m0 + mn;
    if (!c->lo) {
        if (mn < CACHE_HDR + CACHE_MIN_FREE) return 0;
        hk__cache_region_init(c, m0, m1);
        (void)hk_hunk_set_tenant_range(hk, m0, mn);
        return 1;
    }
    int grew = 0;
    hk__cache_san_open(c);
    if (m0 < c->lo && (size_t)(c->lo - m0) >= CACHE_MIN_FREE) {
        cache_blk *n = (cache_blk *)m0, *first = (cache_blk *)c->lo;
        cache_unpoison(m0, (size_t)(c->lo - m0));
        n->size16 = (uint32_t)((size_t)(c->lo - m0) / 16u);
        n->prev16 = 0;
        if (first != c->end && first->magic == CACHE_MAGIC_FREE) {
            cache_bin_remove(c, first);
            n->size16 += first->size16;
        }
        unsigned char *old_lo = c->lo;
        c->lo = m0;
        cache_next(n)->prev16 = n->size16;
        cache_add_free(c, n);
        if (HK__TRACKED(&c->core)) hk__track_heap(&c->core, m0, (size_t)(old_lo - m0), 1); /* now its own */
        grew = 1;
    }
    unsigned char *hi = (unsigned char *)c->end + CACHE_HDR;
    if (m1 > hi && (size_t)(m1 - hi) >= CACHE_MIN_FREE) {
        cache_blk *old = c->end, *ns = (cache_blk *)(m1 - CACHE_HDR);
        cache_unpoison(hi, (size_t)(m1 - hi));
        cache_blk *last = cache_prev(c, old);
        cache_blk *f;
        if (last && last->magic == CACHE_MAGIC_FREE) {
            cache_bin_remove(c, last);
            f = last;
            f->size16 += (uint32_t)((size_t)((unsigned char *)ns - (unsigned char *)old) / 16u);
        } else {
            f = old;
            f->size16 = (uint32_t)((size_t)((unsigned char *)ns - (unsigned char *)old) / 16u);
            /* prev16 of the old sentinel is already the last block's size */
        }
        ns->magic = CACHE_MAGIC_END;
        ns->handle = 0;
        ns->size16 = 1;
        ns->prev16 = f->size16;
        c->end = ns;
        cache_add_free(c, f);
        if (HK__TRACKED(&c->core)) hk__track_heap(&c->core, hi, (size_t)(m1 - hi), 1); /* now its own */
        grew = 1;
    }
    if (grew) {
        c->hint = (cache_blk *)c->lo;
        (void)hk_hunk_set_tenant_range(hk, c->lo, cache_claim_size(c));
    }
    hk__cache_san_close(c);
    return grew;
}

/* Can the bottom `need` bytes go? Sets *cut to where the region would start. */
static int cache_low_free(hk_cache *c, size_t need, unsigned char **cut) {
    cache_blk *f = (cache_blk *)c->lo;
    if (f == c->end || f->magic != CACHE_MAGIC_FREE || cache_bytes(f) < need) return 0;
    size_t rem = cache_bytes(f) - need;
    *cut = c->lo + (rem == 16 ? cache_bytes(f) : need);
    return 1;
}

static int cache_high_free(hk_cache *c, size_t need, unsigned char **ns) {
    cache_blk *l = cache_prev(c, c->end);
    if (!l || l->magic != CACHE_MAGIC_FREE || cache_bytes(l) < need) return 0;
    size_t rem = cache_bytes(l) - need;
    *ns = (unsigned char *)l + (rem == 16 ? 0 : rem);
    return 1;
}

/* Purges purgeable unlocked blocks overlapping [a, b). Returns how many. */
static size_t cache_purge_range(hk_cache *c, unsigned char *a, unsigned char *b) {
    size_t n = 0;
    cache_blk *x = (cache_blk *)c->lo;
    while (x != c->end) {
        cache_blk *nx = cache_next(x);
        unsigned char *xs = (unsigned char *)x, *xe = (unsigned char *)nx;
        if (xe > a && xs < b && x->magic == CACHE_MAGIC_USED) {
            cache_slot *s = cache_slot_of_blk(c, x);
            if (cache_purgeable(c, s)) {
                cache_blk *p = cache_prev(c, x);
                hk__cache_purge_slot(c, s);
                n++;
                nx = p ? p : (cache_blk *)c->lo; /* the walk restarts at the merged block */
            }
        }
        x = nx;
    }
    return n;
}

static size_t cache_release_all(hk_cache *c) {
    for (uint32_t i = 0; i < c->high_water; i++) {
        cache_slot *s = &c->slots[i];
        if (cache_data(c, s) && !cache_purgeable(c, s)) return 0;
    }
    for (uint32_t i = 0; i < c->high_water; i++)
        if (cache_purgeable(c, &c->slots[i])) hk__cache_purge_slot(c, &c->slots[i]);
    size_t n = cache_claim_size(c);
    cache_unpoison(c->lo, n);
    cache_poison(c->lo, n);
    memset(c->bins, 0, c->nbins * sizeof *c->bins);
    c->fl_map = 0;
    memset(c->sl_map, 0, sizeof c->sl_map);
    c->free_blocks = 0;
    c->free_bytes = 0;
    c->lo = NULL;
    c->end = c->hint = NULL;
    return n;
}

/* The hunk's reclaim hook (hk_hunk_set_tenant): give back `bytes` from the
 * bottom (high == 0) or top of the region. */
size_t hk__cache_hunk_reclaim(void *user, int high, size_t bytes) {
    hk_cache *c = (hk_cache *)user;
    size_t got = 0, need;
    hk__core_lock(&c->core);
    if (!c->lo || !hk_size_align(bytes, 16, &need)) goto out;
    if (need + CACHE_HDR + CACHE_MIN_FREE > cache_claim_size(c)) {
        got = cache_release_all(c);
        goto out;
    }
    for (int attempt = 0;; attempt++) {
        unsigned char *edge;
        if (!high && cache_low_free(c, need, &edge)) {
            cache_blk *f = (cache_blk *)c->lo;
            cache_blk *n = cache_next(f);
            cache_bin_remove(c, f);
            got = (size_t)(edge - c->lo);
            cache_unpoison(c->lo, got);
            cache_poison(c->lo, got);
            c->lo = edge;
            if (edge < (unsigned char *)n) {
                cache_blk *r = (cache_blk *)edge;
                cache_unpoison(r, CACHE_HDR);
                r->size16 = (uint32_t)((size_t)((unsigned char *)n - edge) / 16u);
                r->prev16 = 0;
                n->prev16 = r->size16;
                cache_add_free(c, r);
            } else {
                n->prev16 = 0;
            }
            break;
        }
        if (high && cache_high_free(c, need, &edge)) {
            cache_blk *l = cache_prev(c, c->end);
            unsigned char *old_hi = (unsigned char *)c->end + CACHE_HDR;
            uint32_t lprev = l->prev16;
            cache_bin_remove(c, l);
            cache_blk *ns = (cache_blk *)edge;
            if (edge > (unsigned char *)l) {
                l->size16 = (uint32_t)((size_t)(edge - (unsigned char *)l) / 16u);
                cache_add_free(c, l);
            }
            cache_unpoison(ns, CACHE_HDR);
            ns->magic = CACHE_MAGIC_END;
            ns->handle = 0;
            ns->size16 = 1;
            ns->prev16 = edge > (unsigned char *)l ? l->size16 : ((unsigned char *)l == c->lo ? 0 : lprev);
            c->end = ns;
            got = (size_t)(old_hi - (edge + CACHE_HDR));
            cache_unpoison(edge + CACHE_HDR, got);
            cache_poison(edge + CACHE_HDR, got);
            break;
        }
        unsigned char *a = high ? (unsigned char *)c->end + CACHE_HDR - need : c->lo;
        unsigned char *b = high ? (unsigned char *)c->end + CACHE_HDR : c->lo + need;
        if (attempt == 0) {
            /* move what can move out of the way */
        } else if (attempt == 1) {
            if (!cache_purge_range(c, a, b)) continue; /* nothing purgeable in the way: next stage */
        } else {
            /* purge least recently used purgeable blocks elsewhere to make room */
            if (!cache_lru_oldest(c)) break;
            for (cache_slot *s; (s = cache_lru_oldest(c)) != NULL;) {
                hk__cache_purge_slot(c, s);
                if (c->free_bytes >= need + CACHE_MIN_FREE) break;
            }
        }
        if (high)
            (void)hk__cache_slide_down(c, 1, 0, 0, NULL);
        else
            hk__cache_slide_up(c);
    }
    c->hint = c->lo ? (cache_blk *)c->lo : NULL;
out:
    hk__core_after(&c->core);
    hk__core_unlock(&c->core);
    return got;
}

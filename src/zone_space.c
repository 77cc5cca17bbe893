/*
 * src/zone_space.c - the small blocks' space: the reserved range of
 * ZS_RUN-byte granules that runs are laid out in, their header table, and
 * the free granules (dirty lists by class and epoch, the clean stack), with
 * their decay and trim. The runs, heaps and slow paths that use it are in
 * src/zone_small.c; the types in src/zone_small.h.
 *
 * Invariants (the space's lock held to change any list):
 *
 *  1. Granules below lo + used have been taken at least once; their
 *     header entries are committed (meta_commit) and never given back, and
 *     so is each one's first page (its remote bitmap), so any thread may
 *     read any of them. `used` only grows.
 *  2. A granule that is no run and no heap's spare is on exactly one list:
 *     the dirty list of its last run's class (zs_dcls) for the epoch it was
 *     given back in (dirty[young] or dirty[!young]; dmask[e] bit d set iff
 *     dirty[e][d] is not empty), or the clean stack. ndirty and nclean
 *     count them; runs counts the granules that heaps hold (runs and
 *     spares), so bump == runs + ndirty + nclean.
 *  3. A dirty granule's pages are resident (what its last run touched); a
 *     clean one's are given back to the OS (hk_os_unback: they stay
 *     mapped and read as zero), so the clean ones are numbered on a stack
 *     beside the space, and the dirty lists link through each granule's
 *     first word (its bitmap's: never poisoned for ASan, read and written
 *     atomically, zone_small.c invariant 10).
 *  4. An epoch lasts epoch_ns (0: none, only trim cleans): at its end the
 *     previous epoch's dirty granules are cleaned, so a granule stays
 *     resident between one and two epochs after it is given back.
 */
#include "zone_small.h"

#include <string.h>

/* The dirty lists of the space (its lock held), a granule number + 1 at
 * their heads (0: empty) and in the first word of each granule's remote
 * bitmap (its first page is never given back to the OS while dirty). */
static uint64_t *zs_glink(const zs_space *sp, uint32_t n) {
    return (uint64_t *)(sp->lo + ((uintptr_t)(n - 1u) << ZS_RUN_LOG2) + ZS_RBITS);
}
static void zs_gpush(zs_space *sp, uint32_t *list, void *g) {
    uint32_t n = (uint32_t)(((uintptr_t)g - sp->lo) >> ZS_RUN_LOG2) + 1u;
    __atomic_store_n(zs_glink(sp, n), (uint64_t)*list, __ATOMIC_RELAXED); /* invariant 3 */
    *list = n;
}
static void *zs_gpop(zs_space *sp, uint32_t *list) {
    uint32_t n = *list;
    if (!n) return NULL;
    *list = (uint32_t)__atomic_load_n(zs_glink(sp, n), __ATOMIC_RELAXED);
    return (void *)(sp->lo + ((uintptr_t)(n - 1u) << ZS_RUN_LOG2));
}

/* Makes [p, p + n) of the space's reservations usable: a commit, or
 * nothing in a lazy space but the failure point (an acquisition). */
static hk_result zs_commit(const zs_space *sp, void *p, size_t n) {
    if (!sp->lazy) return hk_os_commit(p, n);
    return hk_os_fail_now() ? HK_ERR_NOMEM : HK_OK;
}

/* The clean granules: a stack of granule numbers beside the space (their
 * pages, all of them, are given back, so nothing can be linked through
 * them), committed a page at a time as it grows. 0 when the stack has no
 * room (the granule then stays dirty). */
static int zs_clean_push(zs_space *sp, void *g) {
    size_t need = (sp->nclean + 1) * sizeof(uint32_t);
    if (need > sp->cs_commit) {
        size_t pg = hk_os_page_size();
        if (need > sp->cs_size || zs_commit(sp, (unsigned char *)sp->cstack + sp->cs_commit, pg) != HK_OK)
            return 0;
        sp->cs_commit += pg;
    }
    size_t pg = hk_os_page_size();
    if (pg < ZS_RUN) (void)hk_os_unback(g, ZS_RUN);
    sp->cstack[sp->nclean] = (uint32_t)(((uintptr_t)g - sp->lo) >> ZS_RUN_LOG2);
    __atomic_store_n(&sp->nclean, sp->nclean + 1, __ATOMIC_RELAXED);
    return 1;
}
static void *zs_clean_pop(zs_space *sp) {
    if (!sp->nclean) return NULL;
    __atomic_store_n(&sp->nclean, sp->nclean - 1, __ATOMIC_RELAXED);
    return (void *)(sp->lo + ((uintptr_t)sp->cstack[sp->nclean] << ZS_RUN_LOG2));
}

/* The dirty list of class c's granules: the classes of 8 KiB and more
 * share one (their slots cover most of a granule's pages anyway), so a
 * list's number fits a 64-bit mask. */
static unsigned zs_dcls(unsigned c) { return c < ZS_NDIRTY - 1u ? c : ZS_NDIRTY - 1u; }
_Static_assert(ZS_NDIRTY <= 64u, "a bit of a 64-bit mask per dirty list");

/* A dirty granule for a run of class c (space lock held), or NULL: of
 * class c, this epoch's first; else of the nearest class above c, else
 * below (a run of another class may touch pages the last one did not, or
 * leave resident ones it does not use). O(1). */
static void *zs_dirty_take(zs_space *sp, unsigned c) {
    c = zs_dcls(c);
    for (unsigned k = 0; k < 2; k++) {
        unsigned e = k ? !sp->young : sp->young;
        uint64_t m = sp->dmask[e];
        if (!m) continue;
        uint64_t up = m & (~(uint64_t)0 << c);
        unsigned d = up ? (unsigned)__builtin_ctzll(up) : 63u - (unsigned)__builtin_clzll(m);
        void *g = zs_gpop(sp, &sp->dirty[e][d]);
        if (!sp->dirty[e][d]) sp->dmask[e] &= ~((uint64_t)1 << d);
        __atomic_store_n(&sp->ndirty, sp->ndirty - 1, __ATOMIC_RELAXED);
        return g;
    }
    return NULL;
}

/* A granule for a run of class c (space lock held): a dirty one (its pages
 * still resident: no page fault), a clean one, else a fresh one committed
 * (and faulted in with `prefault`). */
static zs_run *zs_granule_pick(zs_space *sp, unsigned c) {
    void *g = zs_dirty_take(sp, c);
    if (g) return zs_run_at(sp, (uintptr_t)g - sp->lo);
    if ((g = zs_clean_pop(sp)) != NULL) return zs_run_at(sp, (uintptr_t)g - sp->lo);
    if (sp->bump >= sp->span >> ZS_RUN_LOG2) return NULL;
    /* its header's entry first (the table is committed a page at a time
     * and never given back, so any entry below used can be read) */
    size_t need = (sp->bump + 1) << ZS_META_LOG2;
    if (need > sp->meta_commit) {
        size_t pg = hk_os_page_size() > ZS_META ? hk_os_page_size() : ZS_META;
        if (need > sp->meta_size || zs_commit(sp, sp->meta + sp->meta_commit, pg) != HK_OK) return NULL;
        sp->meta_commit += pg;
    }
    g = (unsigned char *)(sp->lo + (sp->bump << ZS_RUN_LOG2));
    if (zs_commit(sp, g, ZS_RUN) != HK_OK) return NULL;
    if (sp->prefault) (void)hk_os_prefault(g, ZS_RUN);
    zs_run *r = zs_run_at(sp, sp->bump << ZS_RUN_LOG2);
    r->base = (unsigned char *)g;
    sp->bump++;
    __atomic_store_n(&sp->used, sp->bump << ZS_RUN_LOG2, __ATOMIC_RELEASE);
    return r;
}

/* Gives back the pages of every granule of the dirty lists of epoch e,
 * which join the clean ones (lock held; one that finds no room stays
 * dirty, in this epoch's list of its class). Returns the granules cleaned.
 * O(classes with a dirty granule + granules). */
static size_t zs_clean_epoch(zs_space *sp, unsigned e) {
    size_t n = 0;
    uint64_t keep = 0;
    for (uint64_t m = sp->dmask[e]; m; m &= m - 1) {
        unsigned c = (unsigned)__builtin_ctzll(m);
        void *g;
        while ((g = zs_gpop(sp, &sp->dirty[e][c])) != NULL) {
            if (zs_clean_push(sp, g)) {
                n++;
                continue;
            }
            zs_gpush(sp, &sp->dirty[sp->young][c], g);
            if (e == sp->young) {
                keep |= (uint64_t)1 << c; /* where it was: the next trim tries again */
                break;
            }
            sp->dmask[sp->young] |= (uint64_t)1 << c;
        }
    }
    sp->dmask[e] = keep;
    __atomic_store_n(&sp->ndirty, sp->ndirty - n, __ATOMIC_RELAXED);
    return n;
}

void hk__zs_space_age(zs_space *sp, uint64_t now) {
    if (!sp->epoch_ns || now < __atomic_load_n(&sp->next_epoch, __ATOMIC_RELAXED)) return;
    hk_os_mutex_lock(&sp->mx);
    if (now >= sp->next_epoch) {
        /* the epoch before ends: its granules go back; this one's age */
        zs_clean_epoch(sp, !sp->young);
        sp->young = !sp->young;
        __atomic_store_n(&sp->next_epoch, now + sp->epoch_ns, __ATOMIC_RELAXED);
    }
    hk_os_mutex_unlock(&sp->mx);
}

size_t hk__zs_space_trim(zs_space *sp) {
    hk_os_mutex_lock(&sp->mx);
    size_t n = zs_clean_epoch(sp, !sp->young) + zs_clean_epoch(sp, sp->young);
    hk_os_mutex_unlock(&sp->mx);
    return n;
}

/* Puts granule r (no run) on this epoch's dirty list of its last class
 * (space lock held). */
static void zs_dirty_put(zs_space *sp, zs_run *r) {
    unsigned d = zs_dcls(zs_rcls(r));
    zs_gpush(sp, &sp->dirty[sp->young][d], r->base);
    sp->dmask[sp->young] |= (uint64_t)1 << d;
    __atomic_store_n(&sp->ndirty, sp->ndirty + 1, __ATOMIC_RELAXED);
}

zs_run *hk__zs_granule_take(zs_space *sp, unsigned c) {
    hk_os_mutex_lock(&sp->mx);
    zs_run *r = zs_granule_pick(sp, c);
    if (r) __atomic_store_n(&sp->runs, sp->runs + 1, __ATOMIC_RELAXED);
    hk_os_mutex_unlock(&sp->mx);
    return r;
}

void hk__zs_granule_give(zs_space *sp, zs_run *r) {
    hk__asan_poison(r->base + ZS_FIRST, ZS_RUN - ZS_FIRST); /* the bitmap stays readable (invariant 10) */
    hk_os_mutex_lock(&sp->mx);
    zs_dirty_put(sp, r);
    __atomic_store_n(&sp->runs, sp->runs - 1, __ATOMIC_RELAXED);
    hk_os_mutex_unlock(&sp->mx);
}

hk_result hk__zs_space_init(zs_space *sp, size_t span, hk__reporter *rep) {
    memset(sp, 0, sizeof *sp);
    span = (span + ZS_RUN - 1) & ~(ZS_RUN - 1);
    /* one granule more, to start on a ZS_RUN boundary */
    size_t os = span + ZS_RUN;
    size_t pg = hk_os_page_size();
    size_t cs_size = ((span >> ZS_RUN_LOG2) * sizeof(uint32_t) + pg - 1) & ~(pg - 1);
    size_t meta_size = (((span >> ZS_RUN_LOG2) << ZS_META_LOG2) + pg - 1) & ~(pg - 1);
    /* readable and writable from the start where the OS allows it, so that
     * a granule taken makes no system call; else reserved and committed as
     * used. Both ways as the three reservations go. */
    for (int lazy = 1; lazy >= 0; lazy--) {
        void *(*reserve)(size_t) = lazy ? hk_os_reserve_rw : hk_os_reserve;
        unsigned char *base = reserve(os);
        uint32_t *cstack = base ? reserve(cs_size) : NULL;
        unsigned char *meta = cstack ? reserve(meta_size) : NULL;
        if (meta) {
            sp->os_base = base;
            sp->os_size = os;
            sp->lo = ((uintptr_t)base + ZS_RUN - 1) & ~(uintptr_t)(ZS_RUN - 1);
            sp->span = span;
            sp->cs_size = cs_size;
            sp->cstack = cstack;
            sp->meta_size = meta_size;
            sp->meta = meta;
            sp->lazy = lazy;
            break;
        }
        if (cstack) hk_os_release(cstack, cs_size);
        if (base) hk_os_release(base, os);
    }
    if (!sp->meta) {
        memset(sp, 0, sizeof *sp);
        return HK_ERR_NOMEM;
    }
    sp->rep = rep;
    hk_os_mutex_init(&sp->mx);
    return HK_OK;
}

void hk__zs_space_fini(zs_space *sp) {
    if (!sp->os_base) return;
    hk_os_mutex_destroy(&sp->mx);
    /* poisoning outlives the mapping: whoever maps these addresses next
     * must find them clean */
    hk__asan_unpoison((void *)sp->lo, sp->used);
    hk_os_release(sp->cstack, sp->cs_size);
    hk_os_release(sp->meta, sp->meta_size);
    hk_os_release(sp->os_base, sp->os_size);
    memset(sp, 0, sizeof *sp);
}

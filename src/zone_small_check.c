/*
 * src/zone_small_check.c - what reads the small-block layer without changing
 * it: the stats sums over the space's runs, check (every invariant of
 * zone_small.c, against its header comment), walk and where. It reads the
 * structures of zone_small.h and calls nothing in zone_small.c.
 *
 * Invariants: none of its own. Stats may run while owners run (the fields
 * it reads are read atomically, zone_small.c invariants 1 and 10); check,
 * walk and where need the owners quiescent.
 */
#include "zone_small.h"

#include <string.h>

void hk__zs_sum_runs(const zs_space *sp, uint64_t *slots, uint64_t *bytes) {
    uint64_t n = 0, b = 0;
    size_t end = __atomic_load_n(&sp->used, __ATOMIC_ACQUIRE);
    for (size_t off = 0; off < end; off += ZS_RUN) {
        zs_run *r = (zs_run *)zs_run_at(sp, off); /* committed below used (invariant 1) */
        if (!__atomic_load_n(&r->heap, __ATOMIC_ACQUIRE)) continue;
        uint32_t u = zs_used(r);
        /* less the remote frees waiting (invariants 5 and 10) */
        if (__atomic_load_n(&r->rpend, __ATOMIC_ACQUIRE)) {
            uint32_t w = 0;
            const uint64_t *rb = zs_rbits(r);
            for (unsigned k = 0; k < ZS_WORDS; k++)
                w += (uint32_t)__builtin_popcountll(__atomic_load_n(rb + k, __ATOMIC_RELAXED));
            u = u > w ? u - w : 0;
        }
        n += u;
        b += (uint64_t)u * __atomic_load_n(&r->stride, __ATOMIC_RELAXED);
    }
    *slots = n;
    *bytes = b;
}

/* ---- check and walk ------------------------------------------------------------------ */

static hk_result zs_bad_k(hk__reporter *rep, hk_error_kind k, const zs_run *r, const char *what) {
    if (rep)
        hk__report(rep, HK_ERR_CORRUPT, k, r, ZS_META, NULL, "check: small-block run header %p: %s",
                   (const void *)r, what);
    return HK_ERR_CORRUPT;
}
static hk_result zs_bad(hk__reporter *rep, const zs_run *r, const char *what) {
    return zs_bad_k(rep, HK_EK_CORRUPT_STRUCTURE, r, what);
}

/* The set of r's free slots (fr, ZS_WORDS words) and their count, from its
 * list: each entry a carved slot, none twice, the list ending at the run
 * (owner quiescent). HK_ERR_CORRUPT, reported, otherwise. */
static hk_result zs_free_set(zs_run *r, uint32_t bump, uint64_t *fr, uint32_t *nfree, hk__reporter *rep) {
    memset(fr, 0, ZS_WORDS * sizeof *fr);
    uint32_t n = 0;
    for (unsigned char *p = r->free; p != r->base;) {
        uintptr_t o = (uintptr_t)p - (uintptr_t)r->base;
        uint32_t i = o < ZS_RUN ? zs_index(r, (uint32_t)o) : UINT32_MAX;
        if (i == UINT32_MAX || i >= bump)
            return zs_bad_k(rep, HK_EK_CORRUPT_FREE, r,
                            "free list leaves its carved slots (a free block written after its free?)");
        if ((fr[i >> 6] >> (i & 63u)) & 1u)
            return zs_bad_k(rep, HK_EK_CORRUPT_FREE, r, "free list holds a slot twice (a cycle)");
        fr[i >> 6] |= (uint64_t)1 << (i & 63u);
        n++;
        uint64_t w = zs_word(p);
        p = (unsigned char *)(uintptr_t)(w ^ r->key);
    }
    *nfree = n;
    return HK_OK;
}

static hk_result zs_check_run(const zs_heap *h, zs_run *r, hk__reporter *rep) {
    const zs_space *sp = h->sp;
    uintptr_t off = (uintptr_t)r - (uintptr_t)sp->meta;
    if (off >= (sp->used >> ZS_RUN_LOG2) << ZS_META_LOG2 || (off & (ZS_META - 1)) ||
        r->base != (unsigned char *)(sp->lo + ((off >> ZS_META_LOG2) << ZS_RUN_LOG2)))
        return zs_bad(rep, r, "not the header of a granule of the space");
    unsigned cls = zs_rcls(r);
    if (r->magic >> 16 != ZS_MAGIC || cls >= ZS_NCLS || r->stride != zs_stride_tab[cls] || r->heap != h ||
        zs_first(r) != ZS_FIRST + 64u * (uint32_t)(((uintptr_t)r->base >> ZS_RUN_LOG2) % ZS_COLORS) ||
        r->nslots != zs_nslots(r->stride, zs_first(r)) ||
        r->recip != (uint32_t)((((uint64_t)1 << 32) + r->stride - 1) / r->stride))
        return zs_bad(rep, r, "damaged fixed fields");
    uint32_t bump = __atomic_load_n(&r->bump, __ATOMIC_RELAXED);
    if (bump > r->nslots) return zs_bad(rep, r, "carved past its slots");
    if (r->limit != bump * r->stride) return zs_bad(rep, r, "carved end disagrees with its carved count");
    uint64_t fr[ZS_WORDS];
    uint32_t nfree;
    hk_result res = zs_free_set(r, bump, fr, &nfree, rep);
    if (res != HK_OK) return res;
    if (zs_used(r) != bump - nfree) return zs_bad(rep, r, "used count disagrees with its free list");
    uint64_t *rb = zs_rbits(r);
    for (uint32_t w = 0; w < ZS_WORDS; w++) {
        uint64_t x = __atomic_load_n(rb + w, __ATOMIC_RELAXED), lo = w * 64u;
        uint64_t carved = lo >= bump         ? 0
                          : lo + 64u <= bump ? ~(uint64_t)0
                                             : (((uint64_t)1 << (bump - lo)) - 1);
        if (x & ~carved) return zs_bad(rep, r, "a remote free of a slot never carved");
        if (x & fr[w]) return zs_bad(rep, r, "a remote free of a slot on the free list");
    }
    int nfree_ok = r->free == r->base ? nfree == 0 : nfree > 0;
    if (!nfree_ok) return zs_bad(rep, r, "free list head disagrees with its length");
    const zs_cls *c = &h->cls[cls];
    if (r->state == ZS_CUR    ? c->cur != r
        : r->state == ZS_FULL ? (nfree != 0 || bump != r->nslots)
                              : r->state != ZS_PARTIAL)
        return zs_bad(rep, r, "state disagrees with its class");
    if (r->state == ZS_FULL && r->used != 1)
        return zs_bad(rep, r, "a full run's used count is not its trap (1)");
    return HK_OK;
}

hk_result hk__zs_check_heap(const zs_heap *h, hk__reporter *rep, size_t *granules) {
    size_t nparts = 0, nruns = 0, flagged = 0;
    const zs_run *lone = NULL;
    for (zs_run *r = h->all; r; r = r->all_next) {
        hk_result res = zs_check_run(h, r, rep);
        if (res != HK_OK) return res;
        nparts += r->state == ZS_PARTIAL;
        nruns++;
        if (nruns > h->sp->runs) return zs_bad(rep, r, "the heap's run list is longer than the space's runs");
        /* flagged as queued with no freer in flight to push it: it must be
         * on the collection stack (invariant 5) */
        uint64_t pend = __atomic_load_n(&r->rpend, __ATOMIC_ACQUIRE);
        if ((pend & ZS_RQUEUED) && !(uint32_t)pend) flagged++, lone = r;
    }
    size_t stacked = 0; /* pushes racing with this walk only lengthen it */
    for (const zs_run *s = __atomic_load_n(&h->rstack, __ATOMIC_ACQUIRE); s && stacked <= nruns; s = s->rnext)
        stacked++;
    if (flagged > stacked)
        return zs_bad(rep, lone, "flagged as queued but not on its heap's collection stack");
    size_t listed = 0;
    for (unsigned c = 0; c < ZS_NCLS; c++) {
        const zs_run *cur = h->cls[c].cur;
        if (cur != &hk__zs_empty_run && (cur->heap != h || cur->state != ZS_CUR || zs_rcls(cur) != c))
            return zs_bad(rep, cur, "a class's current run is not the heap's current run of that class");
        for (zs_run *r = h->cls[c].partial; r; r = r->next) {
            if (r->state != ZS_PARTIAL || zs_rcls(r) != c || r->heap != h)
                return zs_bad(rep, r, "on the wrong partial list");
            if (++listed > nparts) return zs_bad(rep, r, "partial lists longer than the partial runs");
        }
    }
    if (listed != nparts) return zs_bad(rep, h->all, "a partial run is on no list");
    for (unsigned k = 0; k <= ZS_DIRECT_MAX / 8u; k++)
        if (h->direct[k] != h->cls[zs_cls_of(8u * k)].cur)
            return zs_bad(rep, h->direct[k], "a direct entry is not its class's current run");
    for (unsigned i = 0; i < ZS_SPARES; i++) {
        zs_run *spare = __atomic_load_n(&h->spare[i], __ATOMIC_ACQUIRE);
        if (!spare) continue;
        uintptr_t off = (uintptr_t)spare - (uintptr_t)h->sp->meta;
        if (off >= (h->sp->used >> ZS_RUN_LOG2) << ZS_META_LOG2 || (off & (ZS_META - 1)) || spare->heap)
            return zs_bad(rep, spare, "a heap's spare is no free granule of the space");
        for (unsigned j = 0; j < i; j++)
            if (__atomic_load_n(&h->spare[j], __ATOMIC_RELAXED) == spare)
                return zs_bad(rep, spare, "a granule is twice among a heap's spares");
        nruns++;
    }
    *granules += nruns;
    return HK_OK;
}

hk_result hk__zs_check(zs_heap *const *heaps, size_t nheaps, hk__reporter *rep) {
    size_t granules = 0;
    for (size_t k = 0; k < nheaps; k++) {
        hk_result res = hk__zs_check_heap(heaps[k], rep, &granules);
        if (res != HK_OK) return res;
    }
    if (nheaps && granules != heaps[0]->sp->runs)
        return zs_bad(rep, heaps[0]->all, "the heaps hold another number of runs than the space counts");
    return HK_OK;
}

int hk__zs_walk_run(const zs_run *cr, hk_walk_fn fn, void *user) {
    zs_run *r = (zs_run *)(uintptr_t)cr;
    uint64_t fr[ZS_WORDS];
    uint32_t nfree, bump = __atomic_load_n(&r->bump, __ATOMIC_RELAXED);
    if (zs_free_set(r, bump, fr, &nfree, NULL) != HK_OK) return -1; /* check reports it */
    for (uint32_t i = 0; i < bump; i++) {
        if ((fr[i >> 6] >> (i & 63u)) & 1u) continue;
        hk_block_info bi;
        memset(&bi, 0, sizeof bi);
        bi.address = zs_slot(r, i);
        bi.size = r->stride;
        bi.flags = HK_BLOCK_USED;
        bi.tag = 1; /* HK_TAG_STATIC */
        int rc = fn(&bi, user);
        if (rc) return rc;
    }
    return 0;
}

int hk__zs_walk(const zs_heap *h, hk_walk_fn fn, void *user) {
    for (zs_run *r = h->all; r; r = r->all_next) {
        int rc = hk__zs_walk_run(r, fn, user);
        if (rc) return rc;
    }
    return 0;
}

int hk__zs_where(const zs_space *sp, const void *addr, hk_block_info *info) {
    zs_run *r = zs_run_of(sp, addr);
    if (!r || !__atomic_load_n(&r->heap, __ATOMIC_RELAXED)) return 0;
    uint32_t off = (uint32_t)((uintptr_t)addr & (ZS_RUN - 1));
    memset(info, 0, sizeof *info);
    if (off < zs_first(r) || off - zs_first(r) >= r->limit) {
        info->address = r->base;
        info->overhead = zs_first(r);
        info->flags = HK_BLOCK_USED;
        info->name = "(small-block run)";
        return 1;
    }
    uint32_t i = (off - zs_first(r)) / r->stride, bump = __atomic_load_n(&r->bump, __ATOMIC_RELAXED);
    info->address = zs_slot(r, i);
    info->size = r->stride;
    if (i >= bump) return 1; /* never handed out: free */
    uint64_t fr[ZS_WORDS];
    uint32_t nfree;
    if (zs_free_set(r, bump, fr, &nfree, NULL) != HK_OK) return 1;
    if (!((fr[i >> 6] >> (i & 63u)) & 1u)) {
        info->flags = HK_BLOCK_USED;
        info->tag = 1; /* HK_TAG_STATIC */
    }
    return 1;
}

/*
 * src/zone.c - the zone's public entry points: create and destroy, the
 * allocation paths (slot from a run, plain block from the TLSF core, or a
 * tracked block with its tag record; purging and growing before failing),
 * free, realloc, usable_size, owns, stats and info. The top of the zone's
 * layers (see src/zone_internal.h): calls down into every other zone file
 * except zone_check.c, whose full check it only registers with the instance
 * core as the paranoid hook. Tags, purge and free_tags are in zone_tags.c;
 * check, walk, where and dump in zone_check.c.
 *
 * Invariants (with those of the files below; all verified by
 * hk_zone_check):
 *  - the control block (struct hk_zone) sits 64-byte aligned at the start
 *    of the first region's memory; the heap starts after it.
 *  - free_bytes, free_blocks, used_bytes, used_req, untracked_live and
 *    slot_bytes equal the sums over the blocks; alloc_count -
 *    free_count is the number of used blocks and slots (every path that
 *    makes or ends one counts it, so no separate live counter);
 *    used_bytes + free_bytes + runs.run_bytes = capacity; peak_used is the
 *    highest used_req seen.
 *  - with HK_FLAG_CANARY every used block's slack holds HK_FILL_PAD; with
 *    HK_FLAG_ZERO / HK_FLAG_FILL a new block's bytes are zero / HK_FILL_ALLOC.
 *  - runs_on is fixed at create: runs are off with HK_ZONE_NO_RUNS and with
 *    every debug flag (ZONE_RUN_OFF), so the paranoid check never has to
 *    follow the lock-free slot fast paths, which run only without lock
 *    hooks.
 *  - a failing call leaves the heap as it was (counting the failure in
 *    fail_count and reporting it).
 */
#include "zone_threads.h"

/* ---- reports ----------------------------------------------------------------- */

static void *zone_fail(hk_zone *z, hk_result r, hk_error_kind k, size_t n, const char *fmt_why) {
    z->fail_count++;
    if (k == HK_EK_NOMEM) {
        hk__report(
            ZONE_REP(z), r, k, NULL, n, NULL,
            "cannot allocate %zu bytes%s: capacity %zu, free %zu in %zu blocks, largest free block %zu", n,
            fmt_why ? fmt_why : "", z->capacity, z->free_bytes, z->free_blocks, zone_largest_class_start(z));
    } else {
        hk__report(ZONE_REP(z), r, k, NULL, n, NULL, "request of %zu bytes refused: %s", n, fmt_why);
    }
    return NULL;
}

/* ---- allocation --------------------------------------------------------------- */

/* Gets a block of `need` bytes when a search of the free lists has just
 * failed: empty runs go back first (searched again only if one did), then
 * purgeable blocks, then the zone grows. The second half of zone_obtain,
 * out of line. */
static HK__NOINLINE zone_blk *zone_obtain_slow(hk_zone *z, size_t need, size_t align, size_t *bsize) {
    zone_blk *b;
    if (z->runs.nruns && hk__zone_runs_trim(z)) { /* empty runs kept for reuse go back first */
        b = hk__zone_take(z, need, align, bsize);
        if (b) return b;
    }
    while (hk__zone_purge_one(z, z->purge_level)) {
        b = hk__zone_take(z, need, align, bsize);
        if (b) return b;
    }
    size_t grow_need = align > 16 ? need + align + ZONE_MIN_BLOCK : need;
    if (hk__zone_grow(z, grow_need)) return hk__zone_take(z, need, align, bsize);
    return NULL;
}

/* Gets a block of `need` bytes, purging then growing when needed. */
static zone_blk *zone_obtain(hk_zone *z, size_t need, size_t align, size_t *bsize) {
    zone_blk *b = hk__zone_take(z, need, align, bsize);
    return HK__LIKELY(b != NULL) ? b : zone_obtain_slow(z, need, align, bsize);
}

/* Turns a taken block into a used one and prepares its bytes. */
static void *zone_finish(hk_zone *z, zone_blk *b, size_t bsize, size_t n, unsigned tag, unsigned alog,
                         int tracked, void **owner, const char *name, const char *file, int line) {
    unsigned bits = ZB_USED | (b->bits & ZB_PREV_USED) | (alog << ZB_ALIGN_SHIFT);
    size_t area = bsize - (tracked ? ZONE_EXT_OVH : ZONE_PLAIN_OVH);
    unsigned char *user = zone_user(b);
    uint32_t flags = ZONE_FLAGS(z);
    zone_unpoison(user, bsize - ZONE_HDR);
    if (tracked) {
        bits |= ZB_EXT;
        zone_set_hdr(b, bsize, tag, bits, (unsigned)(area - n));
        zone_ext *e = zone_ext_of(b);
        e->owner = owner;
        e->name = name;
        if (flags & HK_FLAG_RECORD_SITE) {
            e->file = file;
            e->line = line;
        } else {
            e->file = NULL;
            e->line = 0;
        }
        zone_tag_append(z, b, tag);
    } else {
        zone_set_hdr(b, bsize, tag, bits, (unsigned)(area - n));
        z->untracked_live++;
    }
    if (HK__UNLIKELY(flags & (HK_FLAG_ZERO | HK_FLAG_FILL | HK_FLAG_CANARY))) {
        if (flags & HK_FLAG_ZERO)
            memset(user, 0, n);
        else if (flags & HK_FLAG_FILL)
            memset(user, HK_FILL_ALLOC, n);
        if (flags & HK_FLAG_CANARY) memset(user + n, HK_FILL_PAD, area - n);
    }
    {
        size_t pad_end = tracked ? area : (area > ZONE_OVERLAP ? area - ZONE_OVERLAP : 0);
        if (pad_end > n) zone_poison(user + n, pad_end - n);
    }
    z->used_req += n;
    z->used_bytes += bsize;
    z->alloc_count++;
    if (z->used_req > z->peak_used) z->peak_used = z->used_req;
    if (owner) *owner = user;
    return user;
}

static void *zone_alloc_impl(hk_zone *z, size_t n, size_t align, int tag, void **owner, const char *name,
                             const char *file, int line) {
    if (tag == 0) tag = HK_TAG_STATIC;
    if (HK__UNLIKELY(tag < 1 || tag > HK_ZONE_TAG_MAX)) {
        z->fail_count++;
        hk__report(ZONE_REP(z), HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, n, name,
                   "allocation of %zu bytes%s%s refused: tag %d is outside 1..%d", n, name ? " for " : "",
                   name ? name : "", tag, HK_ZONE_TAG_MAX);
        return NULL;
    }
    if (HK__UNLIKELY(tag >= z->purge_level && !owner)) {
        z->fail_count++;
        hk__report(ZONE_REP(z), HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, n, name,
                   "allocation of %zu bytes%s%s refused: purgeable tag %d needs an owner pointer", n,
                   name ? " for " : "", name ? name : "", tag);
        return NULL;
    }
    if (align == 0) align = 16;
    /* tested before rounding up: 3 is refused, not taken for 16 */
    if (HK__UNLIKELY(!hk_is_pow2(align) || align > ZONE_MAX_ALIGN)) {
        z->fail_count++;
        hk__report(ZONE_REP(z), HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, align, name,
                   "alignment %zu is not a power of two up to 2^34 (request of %zu bytes)", align, n);
        return NULL;
    }
    if (align < 16) align = 16;
    int tracked = tag != HK_TAG_STATIC || owner || name ||
                  (ZONE_FLAGS(z) & (HK_ZONE_TRACK_ALL | HK_FLAG_RECORD_SITE)) != 0;
    size_t need = zone_need(z, n, tracked);
    if (HK__UNLIKELY(!need))
        return zone_fail(z, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, n, "larger than a zone block (64 GiB)");
    size_t bsize;
    zone_blk *b = zone_obtain(z, need, align, &bsize);
    if (HK__UNLIKELY(!b)) return zone_fail(z, HK_ERR_NOMEM, HK_EK_NOMEM, n, NULL);
    unsigned alog = zone_msb(align) - 4;
    return zone_finish(z, b, bsize, n, (unsigned)tag, alog, tracked, owner, name, file, line);
}

/* ---- create / destroy --------------------------------------------------------- */

hk_zone *hk_zone_create(const hk_zone_desc *desc) {
    if (!desc) return NULL;
    hk__core core; /* first: a bad desc is refused (and reported) before any memory is taken */
    if (HK__CORE_INIT(&core, "zone", desc, hk__zone_check_core, NULL) != HK_OK) return NULL;
    unsigned char *mem;
    size_t size;
    zone_os_map os;
    memset(&os, 0, sizeof os);
    size_t ctl = (sizeof(hk_zone) + 63) & ~(size_t)63;
    if (desc->memory) {
        mem = (unsigned char *)desc->memory;
        size = desc->size;
    } else {
        size = desc->size ? desc->size : (desc->grow_size ? desc->grow_size : (size_t)1 << 20);
        if (!hk_size_add(size, ctl + 64, &size) || !hk_size_align(size, hk_os_page_size(), &size)) {
            hk__report(&core.rep, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, NULL, desc->size, NULL,
                       "create: a first region of %zu bytes overflows", desc->size);
            return NULL;
        }
        if (!hk__zone_os_first(desc, size, &os)) {
            hk__report(&core.rep, HK_ERR_NOMEM, HK_EK_NOMEM, NULL, size, NULL,
                       "create: the OS refused %zu bytes for the first region", size);
            return NULL;
        }
        mem = (unsigned char *)os.base;
    }
    uintptr_t start = hk_align_ptr((uintptr_t)mem, 64);
    if (size < start - (uintptr_t)mem + ctl + HK_ZONE_MIN_REGION) {
        hk__report(&core.rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, mem, size, NULL,
                   "create: %zu bytes of memory at %p cannot hold the control block (%zu bytes) and a region "
                   "of %u bytes",
                   size, (void *)mem, ctl, HK_ZONE_MIN_REGION);
        if (os.base) hk_os_release(os.base, os.os_size);
        return NULL;
    }
    hk_zone *z = (hk_zone *)start;
    memset(z, 0, sizeof *z);
    z->core = core;
    z->core.self = z;
    /* a tool on (src/track.h): no runs, so every block is a TLSF block whose
     * paths announce it (the slot paths do not) */
    z->runs_on = !(desc->flags & ZONE_RUN_OFF) && !z->core.track;
    z->threads = z->runs_on && (desc->flags & HK_ZONE_THREADS);
    z->purge_level = desc->purge_level > 0 ? desc->purge_level : HK_TAG_PURGELEVEL;
    z->grow_size = desc->grow_size;
    z->max_size = desc->max_size;
    z->seq = 1;
    z->ctl_os = os.base;
    z->ctl_os_size = os.os_size;
    hk__zone_decay_init(z, desc->decay_ms);
    if (HK__TRACKED(&z->core)) hk__track_create(&z->core);
    unsigned char *rmem = (unsigned char *)start + ctl;
    if (hk__zone_region_add(z, rmem, size - (size_t)(rmem - mem), NULL, 0, 0) < 0) {
        if (os.base) hk_os_release(os.base, os.os_size); /* cannot happen: the size was checked */
        return NULL;
    }
    if (os.reserve) z->regions[0].reserve_end = (unsigned char *)os.base + os.reserve;
    if (desc->flags & HK_ZONE_THREADS) {
        if (!z->core.lock.lock) {
            /* the zone's own lock for its shared core */
            hk_os_mutex_init(&z->mx);
            hk__core_set_lock(&z->core, hk_os_mutex_lock_hook, hk_os_mutex_unlock_hook, &z->mx);
        }
        if (z->threads && !hk__zone_thr_init(z)) z->threads = 0; /* registry full: the zone stays locked */
    }
    z->fast = z->threads                              ? ZONE_FAST_THREADS
              : (z->runs_on && !z->core.locked_hooks) ? ZONE_FAST_RUNS
                                                      : ZONE_FAST_NONE;
    return z;
}

void hk_zone_destroy(hk_zone *z) {
    if (!z) return;
    if (HK__TRACKED(&z->core)) (void)hk_zone_walk(z, hk__track_end_visit, &z->core); /* each block ends */
    if (z->threads) hk__zone_thr_fini(z);
    if (z->core.lock.user == &z->mx) hk_os_mutex_destroy(&z->mx);
    void *os = z->ctl_os;
    size_t os_size = z->ctl_os_size;
    hk__zone_release_all(z);
    if (HK__TRACKED(&z->core)) hk__track_destroy(&z->core);
    if (os) hk_os_release(os, os_size);
}

hk_result hk_zone_add_region(hk_zone *z, void *memory, size_t size) {
    if (!z) return HK_ERR_INVALID;
    hk__core_lock(&z->core);
    hk_result r = HK_OK;
    if (hk__zone_region_add(z, memory, size, NULL, 0, 1) < 0)
        r = (memory && size >= HK_ZONE_MIN_REGION && z->nregions >= HK_ZONE_MAX_REGIONS) ? HK_ERR_NOMEM
                                                                                         : HK_ERR_INVALID;
    hk__core_after(&z->core);
    hk__core_unlock(&z->core);
    return r;
}

/* ---- public: allocation ------------------------------------------------------- */

/* The malloc-like path (untracked, 16-aligned), lock held. */
static void *zone_alloc_plain(hk_zone *z, size_t size) {
    if (HK__LIKELY(z->runs_on && size <= ZONE_RUN_MAX_REQ)) {
        void *u = zone_slot_alloc(z, size);
        if (HK__LIKELY(u != NULL)) return u;
    }
    if (HK__LIKELY(!(ZONE_FLAGS(z) & (HK_ZONE_TRACK_ALL | HK_FLAG_RECORD_SITE | HK_FLAG_CANARY |
                                      HK_FLAG_ZERO | HK_FLAG_FILL | HK_FLAG_PARANOID)) &&
                   size <= ZONE_MAX_REQUEST)) {
        /* The plain block path: no debug work. */
        size_t need = (size + ZONE_PLAIN_OVH + 15) & ~(size_t)15;
        if (need < ZONE_MIN_BLOCK) need = ZONE_MIN_BLOCK;
        size_t bsize;
        zone_blk *b = zone_obtain(z, need, 16, &bsize); /* one search, then purge or growth */
        if (HK__LIKELY(b != NULL)) {
            unsigned char *user = zone_user(b);
            zone_unpoison(user, bsize - ZONE_HDR);
            zone_set_hdr(b, bsize, HK_TAG_STATIC, ZB_USED | (b->bits & ZB_PREV_USED),
                         (unsigned)(bsize - ZONE_PLAIN_OVH - size));
            if (bsize - ZONE_HDR > size) zone_poison(user + size, bsize - ZONE_HDR - size);
            z->untracked_live++;
            z->used_req += size;
            z->used_bytes += bsize;
            z->alloc_count++;
            if (z->used_req > z->peak_used) z->peak_used = z->used_req;
            return user;
        }
        return zone_fail(z, HK_ERR_NOMEM, HK_EK_NOMEM, size, NULL);
    }
    return zone_alloc_impl(z, size, 16, HK_TAG_STATIC, NULL, NULL, NULL, 0);
}

/* Tells the tools of a new block (src/track.h; call with HK__TRACKED). */
static HK__NOINLINE void zone_track_alloc(hk_zone *z, void *p, size_t n) {
    if (p) hk__track_alloc(&z->core, p, n, (ZONE_FLAGS(z) & HK_FLAG_ZERO) != 0);
}

static HK__NOINLINE void *zone_alloc_locked(hk_zone *z, size_t size) {
    hk__core_lock(&z->core);
    void *p = zone_alloc_plain(z, size);
    if (HK__TRACKED(&z->core)) zone_track_alloc(z, p, size);
    hk__core_after(&z->core);
    hk__core_unlock(&z->core);
    return p;
}

/* A threads zone's alloc of a run-served size whose inline pop found
 * nothing: the owner's slow path, else the locked one (out of line, so the
 * inline path keeps nothing live across a call). */
static HK__NOINLINE void *zone_alloc_thr_slow(hk_zone *z, size_t size) {
    void *u = hk__zone_thr_alloc_slow(z, size);
    return u ? u : zone_alloc_locked(z, size);
}

void *hk_zone_alloc(hk_zone *z, size_t size) {
    if (HK__UNLIKELY(!z)) return NULL;
    /* Fast paths: a slot from the class's current run, no lock hooks (runs
     * are off with every debug flag, so no check after); or a slot from the
     * calling thread's heap (threads zone), no lock. */
    if (HK__LIKELY(size <= ZONE_RUN_MAX_REQ)) {
        if (HK__LIKELY(z->fast == ZONE_FAST_RUNS)) {
            void *u = zone_slot_alloc_fast(z, size);
            if (HK__LIKELY(u != NULL)) return u;
        } else if (z->fast == ZONE_FAST_THREADS) {
            void *u = zone_thr_pop(z, size);
            if (HK__LIKELY(u != NULL)) return u;
            return zone_alloc_thr_slow(z, size);
        }
    }
    return zone_alloc_locked(z, size);
}

/* A threads zone's small block of a kept tag with no owner, no name and
 * the default alignment: a tagged slot from the calling thread's heap, no
 * lock. NULL: the locked path serves it (a tracked block). */
static void *zone_alloc_tagged_slot(hk_zone *z, size_t size, size_t align, int tag, void **owner,
                                    const char *name) {
    if (z->fast != ZONE_FAST_THREADS || size > ZONE_RUN_MAX_REQ || owner || name || align > 16 ||
        (align & (align - 1)) || tag <= HK_TAG_STATIC || tag > HK_ZONE_TAG_MAX || tag >= z->purge_level)
        return NULL;
    void *u = zone_thr_pop_tag(z, size, (unsigned)tag);
    return u ? u : hk__zone_thr_alloc_tagged(z, size, (unsigned)tag);
}

void *hk_zone_alloc_tagged(hk_zone *z, size_t size, int tag, void **owner, const char *name) {
    if (!z) return NULL;
    void *u = zone_alloc_tagged_slot(z, size, 16, tag, owner, name);
    if (u) return u;
    hk__core_lock(&z->core);
    void *p = zone_alloc_impl(z, size, 16, tag, owner, name, NULL, 0);
    if (HK__TRACKED(&z->core)) zone_track_alloc(z, p, size);
    hk__core_after(&z->core);
    hk__core_unlock(&z->core);
    return p;
}

void *hk_zone_alloc_ex(hk_zone *z, const hk_zone_alloc_desc *d) {
    if (!z) return NULL;
    void *u = d ? zone_alloc_tagged_slot(z, d->size, d->align, d->tag, d->owner, d->name) : NULL;
    if (u) return u;
    hk__core_lock(&z->core);
    void *p;
    if (!d) {
        z->fail_count++;
        hk__report(ZONE_REP(z), HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, 0, NULL,
                   "alloc_ex with a NULL desc");
        p = NULL;
    } else {
        p = zone_alloc_impl(z, d->size, d->align, d->tag, d->owner, d->name, d->file, d->line);
        if (HK__TRACKED(&z->core)) zone_track_alloc(z, p, d->size);
    }
    hk__core_after(&z->core);
    hk__core_unlock(&z->core);
    return p;
}

void *hk_zone_calloc(hk_zone *z, size_t count, size_t size) {
    if (!z) return NULL;
    size_t n;
    if (!hk_size_mul(count, size, &n)) {
        hk__core_lock(&z->core);
        z->fail_count++;
        hk__report(ZONE_REP(z), HK_ERR_OVERFLOW, HK_EK_OVERFLOW, NULL, size, NULL,
                   "calloc(%zu, %zu): the product overflows", count, size);
        hk__core_unlock(&z->core);
        return NULL;
    }
    void *p = hk_zone_alloc(z, n);
    if (p) memset(p, 0, n);
    return p;
}

void *hk_zone_alloc_aligned(hk_zone *z, size_t align, size_t size) {
    if (!z) return NULL;
    hk__core_lock(&z->core);
    void *p = zone_alloc_impl(z, size, align, HK_TAG_STATIC, NULL, NULL, NULL, 0);
    if (HK__TRACKED(&z->core)) zone_track_alloc(z, p, size);
    hk__core_after(&z->core);
    hk__core_unlock(&z->core);
    return p;
}

/* ---- public: free -------------------------------------------------------------- */

/* A threads zone's slot b freed by the locked paths (lock held), the
 * failure reported for the operation `op` on p. */
static hk_result zone_thr_free_held(hk_zone *z, zone_blk *b, const char *op, void *p) {
    hk_result res = hk__zone_thr_free_slot(z, b, 1);
    if (res == HK_ERR_NOMEM)
        return hk__report(ZONE_REP(z), HK_ERR_NOMEM, HK_EK_NOMEM, p, 0, NULL,
                          "%s(%p): no memory for the batch that hands the block back to the thread that "
                          "allocated it; the block stays allocated",
                          op, p);
    if (res != HK_OK)
        return hk__report(ZONE_REP(z), HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, p, 0, NULL,
                          "%s(%p): block is already free (freed by another thread at the same time)", op, p);
    return HK_OK;
}

/* The free under the lock (held): the lookup (which reports what p is when
 * it is no block), then a slot or a plain block. */
static hk_result zone_free_held(hk_zone *z, void *p) {
    hk_result res;
    zone_blk *b = hk__zone_lookup(z, p, "free", &res);
    if (HK__LIKELY(b != NULL) && z->threads && zone_snap_is_slot(zone_hdr_snap(b))) {
        /* a slot the lock-free check did not take, or another thread's free won */
        res = zone_thr_free_held(z, b, "free", p);
    } else if (HK__LIKELY(b != NULL) && zone_is_slot(b)) {
        zone_slot_free(z, b, zone_run_of_slot(b));
    } else if (HK__LIKELY(b != NULL)) {
        if (HK__UNLIKELY((ZONE_FLAGS(z) & HK_FLAG_CANARY) && !hk__zone_canary_ok(z, b, "free of")))
            res = HK_ERR_CORRUPT;
        zone_blk *m = hk__zone_release(z, b, 1);
        /* a block spanning a whole region starts with PREV_USED set and ends
         * at the region's end marker (size 0): only then look further */
        if (zone_spans_region(z, m)) hk__zone_maybe_release(z, m);
        zone_decay_tick(z); /* free pages back to the OS when due */
    }
    return res;
}

static HK__NOINLINE hk_result zone_free_lookup(hk_zone *z, void *p) {
    hk__core_lock(&z->core);
    hk_result res = zone_free_held(z, p);
    if (HK__TRACKED(&z->core) && res == HK_OK) hk__track_free(&z->core, p);
    hk__core_after(&z->core);
    hk__core_unlock(&z->core);
    return res;
}

/* Everything the inline paths of hk_zone_free did not take: in a threads
 * zone first a slot seen without the lock (another heap's, freed by the
 * remote path), then the lookup. Small, so that the remote path does not
 * pay the lookup's frame. */
static HK__NOINLINE hk_result zone_free_locked(hk_zone *z, void *p) {
    if (z->threads && hk__zone_thr_free_fast(z, p)) return HK_OK;
    return zone_free_lookup(z, p);
}

/* A threads zone's free: the owner's path (a slot of this thread's heap:
 * no lock), else the locked one. A function of its own, reached by a
 * tail call, so that the registers it needs cost the plain path nothing. */
static HK__NOINLINE hk_result zone_free_thr(hk_zone *z, void *p) {
    uint64_t w;
    zone_run *r;
    zone_heap *h;
    if (HK__LIKELY(zone_thr_owned_slot(z, p, &w, &r, &h)))
        return zone_thr_free_owner(h, zone_from_user(p), r, w);
    return zone_free_locked(z, p);
}

hk_result hk_zone_free(hk_zone *z, void *p) {
    if (HK__UNLIKELY(!z)) return HK_ERR_INVALID;
    if (HK__UNLIKELY(!p)) return HK_OK;
    /* Fast path: a used slot, no lock hooks (zone_fast_slot validates p
     * as an integer before reading any header). Anything unusual goes
     * through hk__zone_lookup, which reports. */
    if (HK__LIKELY(z->fast == ZONE_FAST_RUNS)) {
        uint64_t w;
        zone_run *r = zone_fast_slot(z, p, &w);
        if (HK__LIKELY(r != NULL)) {
            zone_slot_free_w(z, zone_from_user(p), r, w);
            return HK_OK;
        }
    } else if (z->fast == ZONE_FAST_THREADS) {
        return zone_free_thr(z, p);
    }
    return zone_free_locked(z, p);
}

size_t hk_zone_usable_size(hk_zone *z, const void *p) {
    if (!z || !p) return 0;
    hk__core_lock(&z->core);
    hk_result res;
    zone_blk *b = hk__zone_lookup(z, p, "usable_size", &res);
    size_t n = 0;
    if (b) n = (ZONE_FLAGS(z) & HK_FLAG_CANARY) ? zone_requested(b) : zone_area(b);
    hk__core_unlock(&z->core);
    return n;
}

bool hk_zone_owns(hk_zone *z, const void *p) {
    if (!z || !p) return false;
    hk__core_lock(&z->core);
    bool ok = hk__zone_is_block(z, p);
    hk__core_unlock(&z->core);
    return ok;
}

/* ---- public: realloc ------------------------------------------------------------ */

/* realloc of the used slot b: stays in place while n fits and wastes at
 * most half the slot (or n is of the slot's own class), else moves (to
 * another class or a block). */
static void *zone_slot_realloc(hk_zone *z, zone_blk *b, size_t n) {
    if (z->threads) {
        /* a thread heap's slot found by the locked lookup: always moves
         * (a tagged slot to a block of its tag) */
        size_t old_req = zone_requested(b);
        void *q = b->tag == HK_TAG_STATIC ? zone_alloc_plain(z, n)
                                          : zone_alloc_impl(z, n, 16, b->tag, NULL, NULL, NULL, 0);
        if (!q) return NULL;
        memcpy(q, zone_user(b), n < old_req ? n : old_req);
        if (zone_thr_free_held(z, b, "realloc", zone_user(b)) == HK_ERR_NOMEM) {
            (void)zone_free_held(z, q); /* nothing moved: p stays */
            return NULL;
        }
        return q;
    }
    if (zone_slot_resize(z, b, n)) return zone_user(b);
    if (n > ZONE_MAX_REQUEST)
        return zone_fail(z, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, n, "larger than a zone block (64 GiB)");
    size_t old_req = zone_requested(b);
    void *q = zone_alloc_plain(z, n);
    if (!q) return NULL; /* reported; the block is unchanged */
    memcpy(q, zone_user(b), n < old_req ? n : old_req);
    zone_slot_free(z, b, zone_run_of_slot(b));
    return q;
}

static void *zone_realloc_impl(hk_zone *z, void *p, size_t n) {
    hk_result res;
    zone_blk *b = hk__zone_lookup(z, p, "realloc", &res);
    if (!b) return NULL;
    if (zone_is_slot(b)) return zone_slot_realloc(z, b, n);
    if ((ZONE_FLAGS(z) & HK_FLAG_CANARY) && !hk__zone_canary_ok(z, b, "realloc of")) {
        /* repair the canary so the block stays usable; the report was made */
        size_t area = zone_area(b), req = area - zone_slack(b);
        zone_unpoison(zone_user(b) + req, area - req);
        memset(zone_user(b) + req, HK_FILL_PAD, area - req);
    }
    int tracked = (b->bits & ZB_EXT) != 0;
    size_t need = zone_need(z, n, tracked);
    if (!need) return zone_fail(z, HK_ERR_OVERFLOW, HK_EK_OVERFLOW, n, "larger than a zone block (64 GiB)");
    size_t old = zone_bsize(b), old_req = zone_requested(b);
    zone_ext saved;
    memset(&saved, 0, sizeof saved);
    zone_ext *olde = tracked ? zone_ext_of(b) : NULL;
    if (tracked) saved = *olde;
    if (need <= old) {
        if (old - need >= ZONE_MIN_BLOCK) {
            z->used_bytes -= old - need;
            zone_set_hdr(b, need, b->tag, b->bits, 0);
            zone_blk *r = zone_next(b);
            zone_unpoison(r, sizeof(zone_blk));
            zone_set_hdr(r, old - need, 0, ZB_PREV_USED, 0);
            zone_unpoison(zone_user(r), old - need - ZONE_HDR);
            if (ZONE_FLAGS(z) & HK_FLAG_FILL) memset(zone_user(r), HK_FILL_FREE, old - need - ZONE_HDR);
            hk__zone_merge_insert(z, r);
            hk__zone_relayout(z, b, need, n, &saved, olde, old_req);
        } else {
            hk__zone_relayout(z, b, old, n, &saved, olde, old_req);
        }
        return p;
    }
    zone_blk *nx = zone_next(b);
    if (!(nx->bits & ZB_USED) && old + zone_bsize(nx) >= need) {
        size_t total = hk__zone_absorb_next(z, b, nx, old, need);
        zone_set_hdr(b, total, b->tag, b->bits, 0);
        hk__zone_relayout(z, b, total, n, &saved, olde, old_req);
        return p;
    }
    /* Move. Keep b out of the purge candidates while allocating. */
    unsigned tag = b->tag;
    if (tracked) zone_tag_unlink(z, b, tag);
    size_t bsize;
    zone_blk *nb = zone_obtain(z, need, zone_align_of(b), &bsize);
    if (tracked) {
        /* b may have moved in the list order; re-append it (it was just used) */
        zone_tag_append(z, b, tag);
    }
    if (!nb) return zone_fail(z, HK_ERR_NOMEM, HK_EK_NOMEM, n, " (realloc; the block is unchanged)");
    void *q = zone_finish(z, nb, bsize, n, tag, b->bits >> ZB_ALIGN_SHIFT, tracked, saved.owner, saved.name,
                          saved.file, saved.line);
    memcpy(q, p, n < old_req ? n : old_req);
    hk__zone_release(z, b, 0);
    return q;
}

/* A plain zone's realloc of p, a used slot validated by zone_fast_slot
 * (run r, header word w; no lock hooks): in place when n fits the slot
 * (zone_slot_fits: the header changes by one xor), else moved to a block
 * from hk_zone_alloc with the bytes copied and p freed, or NULL when no
 * block could be had (p unchanged; the alloc reported). */
static void *zone_realloc_fast(hk_zone *z, void *p, size_t n, zone_run *r, uint64_t w) {
    zone_blk *b = zone_from_user(p);
    size_t area = r->stride - ZONE_OVERLAP, old_req = area - ((uint32_t)w >> 19);
    if (zone_slot_fits(w, area, n)) {
        zone_slot_resize_w(b, w, area, n);
        z->used_req = z->used_req - old_req + n;
        if (z->used_req > z->peak_used) z->peak_used = z->used_req;
        return p;
    }
    void *q = hk_zone_alloc(z, n);
    if (q) {
        memcpy(q, p, n < old_req ? n : old_req);
        zone_slot_free_w(z, b, r, w); /* p's run and header are as validated: a used slot stays */
    }
    return q;
}

/* A threads zone's realloc of p when it is a used slot of the calling
 * thread's own heap, p validated once: returns 1 with *out set to p itself
 * when n fits the slot (zone_slot_fits: it fits and wastes at
 * most half the slot, or is of the slot's own class; the header changes by
 * one xor), else to a new block from hk_zone_alloc with the bytes copied
 * and p freed by the owner's path, or to NULL when no block could be had (p
 * unchanged; the alloc reported). 0 when p is not such a slot. */
static int zone_realloc_owned(hk_zone *z, void *p, size_t n, void **out) {
    uint64_t w;
    zone_run *r;
    zone_heap *h;
    if (!zone_thr_owned_slot(z, p, &w, &r, &h)) return 0;
    zone_blk *b = zone_from_user(p);
    size_t area = r->stride - ZONE_OVERLAP, old_req = area - ((uint32_t)w >> 19);
    if (zone_slot_fits(w, area, n)) {
        zone_slot_resize_w(b, w, area, n);
        __atomic_store_n(&h->used_req, h->used_req - old_req + n, __ATOMIC_RELAXED);
        *out = p;
        return 1;
    }
    void *q = hk_zone_alloc(z, n);
    if (q) {
        memcpy(q, p, n < old_req ? n : old_req);
        /* the heap, the run and p's header are as validated: only this
         * thread changes them (a racing double free by another thread is
         * settled by the collection, as for any owner free) */
        zone_thr_free_owner(h, b, r, w);
    }
    *out = q;
    return 1;
}

void *hk_zone_realloc(hk_zone *z, void *p, size_t size) {
    if (!z) return NULL;
    if (!p) return hk_zone_alloc(z, size);
    if (HK__LIKELY(z->fast == ZONE_FAST_RUNS)) {
        uint64_t w;
        zone_run *r = zone_fast_slot(z, p, &w);
        if (HK__LIKELY(r != NULL)) return zone_realloc_fast(z, p, size, r, w);
    } else if (z->fast == ZONE_FAST_THREADS) {
        void *q;
        if (HK__LIKELY(zone_realloc_owned(z, p, size, &q))) return q;
    }
    if (z->threads) {
        size_t old_req;
        unsigned tag;
        int st = hk__zone_thr_resize(z, p, size, &old_req, &tag);
        if (st > 0) return p;
        if (st == 0) {
            /* a slot: move it without the lock where possible (a tagged
             * slot keeps its tag) */
            void *q = tag == HK_TAG_STATIC ? hk_zone_alloc(z, size)
                                           : hk_zone_alloc_tagged(z, size, (int)tag, NULL, NULL);
            if (!q) return NULL;
            memcpy(q, p, size < old_req ? size : old_req);
            (void)hk_zone_free(z, p);
            return q;
        }
    }
    hk__core_lock(&z->core);
    size_t old_req = 0;
    if (HK__TRACKED(&z->core) && hk__zone_is_block(z, p)) old_req = zone_requested(zone_from_user(p));
    void *q = zone_realloc_impl(z, p, size);
    if (HK__TRACKED(&z->core) && q) hk__track_realloc(&z->core, p, old_req, q, size);
    hk__core_after(&z->core);
    hk__core_unlock(&z->core);
    return q;
}

/* ---- public: stats, info ------------------------------------------------------- */

hk_result hk_zone_stats(const hk_zone *z, hk_stats *out) {
    if (!z || !out) return HK_ERR_INVALID;
    hk__core_lock(&z->core);
    memset(out, 0, sizeof *out);
    out->size = (uint32_t)sizeof *out;
    out->version = HK_STATS_VERSION;
    out->allocator = "zone";
    out->capacity = z->capacity;
    zone_sums sm;
    hk__zone_thr_sums(z, &sm, 1);
    out->used = sm.used_req;
    out->used_blocks_bytes = z->used_bytes + sm.slot_bytes;
    /* free slots and the uncarved part of runs are free for the user */
    out->free = z->free_bytes + (z->runs.run_bytes - sm.slot_bytes - z->runs.nruns * ZONE_RUN_HDR);
    size_t cs = zone_largest_class_start(z);
    if (cs) {
        size_t ovh =
            ((ZONE_FLAGS(z) & (HK_ZONE_TRACK_ALL | HK_FLAG_RECORD_SITE)) ? ZONE_EXT_OVH : ZONE_PLAIN_OVH) +
            ((ZONE_FLAGS(z) & HK_FLAG_CANARY) ? HK_CANARY_BYTES : 0);
        out->largest_free = cs > ovh ? cs - ovh : 0;
    }
    if (z->threads && sm.used_req > z->peak_used) ((hk_zone *)z)->peak_used = sm.used_req;
    out->peak_used = z->peak_used;
    out->overhead = out->used_blocks_bytes - sm.used_req + sizeof(hk_zone) + z->nregions * ZONE_HDR +
                    z->runs.nruns * ZONE_RUN_HDR;
    out->live_blocks = (size_t)(sm.alloc_count - sm.free_count);
    out->free_blocks = z->free_blocks;
    out->alloc_count = sm.alloc_count;
    out->free_count = sm.free_count;
    out->fail_count = z->fail_count;
    out->error_count = z->core.rep.error_count;
    hk__core_unlock(&z->core);
    return HK_OK;
}

hk_result hk_zone_get_info(const hk_zone *z, hk_zone_info *out) {
    if (!z || !out) return HK_ERR_INVALID;
    hk__core_lock(&z->core);
    memset(out, 0, sizeof *out);
    out->control_bytes = sizeof(hk_zone);
    out->grown_bytes = z->os_grown;
    out->regions = z->nregions;
    out->purge_level = z->purge_level;
    out->runs = z->runs.nruns;
    out->run_bytes = z->runs.run_bytes;
    zone_sums sm;
    hk__zone_thr_sums(z, &sm, 1);
    out->slot_bytes = sm.slot_bytes;
    out->untracked_blocks = z->untracked_live;
    out->purge_count = z->purge_count;
    out->grow_count = z->grow_count;
    out->decommitted_bytes = z->clean_bytes;
    out->decommit_count = z->decommit_count;
    hk__core_unlock(&z->core);
    return HK_OK;
}

/* ---- public: trim ------------------------------------------------------------------ */

size_t hk_zone_trim(hk_zone *z) {
    if (!z) return 0;
    hk__core_lock(&z->core);
    size_t n = 0;
    if (z->decay_on) {
        if (z->runs.nruns) hk__zone_runs_trim(z);
        if (z->threads) hk__zone_thr_trim(z);
        n = hk__zone_sweep(z, 1);
        z->decay_new = z->decay_old = 0; /* nothing dirty is left to decay */
        z->decay_check_at = ZONE_DECAY_ARM;
        __atomic_store_n(&z->decay_armed, 0, __ATOMIC_RELAXED);
    }
    hk__core_after(&z->core);
    hk__core_unlock(&z->core);
    return n;
}

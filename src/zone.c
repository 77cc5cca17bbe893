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
 *  - free_bytes, free_blocks, used_bytes, used_req and untracked_live equal
 *    the sums over the TLSF blocks; alloc_count - free_count is the number
 *    of used TLSF blocks (every path that makes or ends one counts it);
 *    used_bytes + free_bytes = capacity. Small blocks are counted by their
 *    runs and heaps (zone_small.h); stats add the two.
 *  - with HK_FLAG_CANARY every used block's slack holds HK_FILL_PAD; with
 *    HK_FLAG_ZERO / HK_FLAG_FILL a new block's bytes are zero / HK_FILL_ALLOC.
 *  - small_on is fixed at create: small blocks are off with HK_ZONE_NO_RUNS,
 *    every debug flag (ZONE_SMALL_OFF), and for a zone that may not call
 *    the OS (caller memory, no growth), so the paranoid check never has to
 *    follow the lock-free fast paths. A pointer in the small-block space is
 *    judged by zone_small.c, any other by the TLSF lookup.
 *  - a failing call leaves the heap as it was (counting the failure in
 *    fail_count and reporting it).
 */
#include "zone_heaps.h"

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
 * failed: purgeable blocks go first, then the zone grows. The second half of zone_obtain,
 * out of line. */
static HK__NOINLINE zone_blk *zone_obtain_slow(hk_zone *z, size_t need, size_t align, size_t *bsize) {
    zone_blk *b;
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

/* The small blocks' slow events (a free that empties or unfills a run, an
 * allocation whose run is empty) poll the decay clock (the TLSF core's and
 * the space's free granules'): every ZONE_POLL_IDLE events of a heap while
 * neither has anything to give back (one load each), else about every
 * ZONE_POLL_PERIOD ns at the heap's allocation rate (every event when they
 * are rare, at most every ZONE_POLL_MAX), so that pages go back on time
 * while a program only uses small blocks. */
#define ZONE_POLL_IDLE   64u
#define ZONE_POLL_MAX    4096u
#define ZONE_POLL_PERIOD 4000000u
static uint32_t zone_small_poll(void *user, zs_heap *h) {
    hk_zone *z = (hk_zone *)user;
    int armed = __atomic_load_n(&z->decay_armed, __ATOMIC_RELAXED);
    if (!armed && !__atomic_load_n(&z->small.ndirty, __ATOMIC_RELAXED)) return ZONE_POLL_IDLE;
    uint64_t now = hk_os_coarse_ns(), ac = zs_alloc_count(h), n = ac - h->poll_ac, dt = now - h->poll_ns;
    uint64_t skip = ZONE_POLL_MAX;
    if (n < ZONE_POLL_MAX)
        skip = dt ? n * ZONE_POLL_PERIOD / dt : 2 * n; /* the coarse clock's tick: double */
    h->poll_ns = now;
    h->poll_ac = ac;
    if (armed) hk__zone_decay_poll_at(z, now, h->locked);
    hk__zs_space_age(&z->small, now);
    return (uint32_t)(skip < 1 ? 1 : skip > ZONE_POLL_MAX ? ZONE_POLL_MAX : skip);
}

/* The small blocks' space and the zone's own heap (small_on cleared when
 * the OS refuses the space). Reports of a threads zone's lock-free paths
 * take the zone's lock; its own heap is used only under it. */
static void zone_small_init(hk_zone *z, const hk_zone_desc *desc) {
    size_t span = sizeof(void *) >= 8 ? ZONE_SMALL_SPAN : (size_t)256 << 20;
    if (desc->max_size && desc->max_size < span) span = desc->max_size;
    /* a smaller space where the OS refuses the address space (an address-
     * space limit, valgrind) */
    hk_result r = HK_ERR_NOMEM;
    hk__zs_init_tables();
    while (span >= ((size_t)16 << 20) && (r = hk__zs_space_init(&z->small, span, ZONE_REP(z))) != HK_OK)
        span /= 4;
    if (r != HK_OK) {
        if (z->threads) hk__zone_thr_fini(z);
        z->small_on = 0;
        z->threads = 0;
        return;
    }
    /* free granules go back to the OS as the TLSF core's free pages do */
    z->small.prefault = (desc->flags & HK_ZONE_PREFAULT) != 0;
    if (z->decay_on && z->decay_epoch_ns) {
        z->small.epoch_ns = z->decay_epoch_ns;
        z->small.next_epoch = hk_os_coarse_ns() + z->decay_epoch_ns;
        z->small.poll = zone_small_poll;
        z->small.poll_user = z;
    }
    hk__zs_heap_init(&z->own, &z->small);
    z->own.locked = z->core.locked_hooks;
    if (z->threads) {
        z->small.lock = z->core.lock.lock;
        z->small.unlock = z->core.lock.unlock;
        z->small.lock_user = z->core.lock.user;
    }
}

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
    /* small blocks: their space is reserved from the OS, so not for a zone
     * that may not call it; nor for one a tool watches (src/track.h): its
     * blocks are then all TLSF blocks, whose paths announce them */
    z->small_on = !(desc->flags & ZONE_SMALL_OFF) && (!desc->memory || desc->grow_size) && !z->core.track;
    z->threads = z->small_on && (desc->flags & HK_ZONE_THREADS);
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
    if (z->small_on) zone_small_init(z, desc);
    z->fast = z->threads                               ? ZONE_FAST_THREADS
              : (z->small_on && !z->core.locked_hooks) ? ZONE_FAST_OWN
                                                       : ZONE_FAST_NONE;
    return z;
}

void hk_zone_destroy(hk_zone *z) {
    if (!z) return;
    if (HK__TRACKED(&z->core)) (void)hk_zone_walk(z, hk__track_end_visit, &z->core); /* each block ends */
    if (z->threads) hk__zone_thr_fini(z);
    if (z->small_on) hk__zs_space_fini(&z->small);
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

/* The malloc-like path (untracked, 16-aligned above ZS_MAX), lock held. */
static void *zone_alloc_plain(hk_zone *z, size_t size) {
    if (HK__LIKELY(z->small_on && size <= ZS_MAX)) {
        void *u = zs_alloc(&z->own, size);
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

/* A threads zone's small alloc by a thread whose heap is not the one it
 * used last: its heap (found, adopted or made), else the locked path. */
static HK__NOINLINE void *zone_alloc_thr_slow(hk_zone *z, size_t size) {
    zs_heap *h = hk__zone_heap_get(z);
    void *u = h ? zs_alloc(h, size) : NULL;
    return u ? u : zone_alloc_locked(z, size);
}

/* What hk_zone_alloc's inline pop did not serve (reached by a tail call,
 * so that the pop needs no frame). */
static HK__NOINLINE void *zone_alloc_miss(hk_zone *z, size_t size) {
    if (HK__UNLIKELY(!z)) return NULL;
    /* a small block from the zone's own heap (no lock hooks; a debug flag
     * turns small blocks off, so no check after), or from the calling
     * thread's heap (threads zone), no lock */
    if (HK__LIKELY(size <= ZS_MAX) && HK__LIKELY(z->fast != ZONE_FAST_NONE)) {
        zs_heap *h = &z->own;
        if (z->fast == ZONE_FAST_THREADS && HK__UNLIKELY(!(h = zone_tl_heap(z))))
            return zone_alloc_thr_slow(z, size);
        void *u = zs_alloc(h, size);
        if (HK__LIKELY(u != NULL)) return u;
    }
    return zone_alloc_locked(z, size);
}

void *hk_zone_alloc(hk_zone *z, size_t size) {
    /* the pop from the direct entry of the zone's own heap, or of the
     * calling thread's heap in a threads zone when its cache names it */
    if (HK__LIKELY(z != NULL) && HK__LIKELY(size <= ZS_DIRECT_MAX) && HK__LIKELY(z->fast != ZONE_FAST_NONE)) {
        zs_heap *h = z->fast == ZONE_FAST_OWN ? &z->own : zone_tl_heap(z);
        if (HK__LIKELY(h != NULL)) {
            zs_run *r = h->direct[(size + 7u) >> 3];
            unsigned char *u = r->free;
            if (HK__LIKELY(u != r->base)) return zs_pop(h, r, u);
        }
    }
    return zone_alloc_miss(z, size);
}

void *hk_zone_alloc_tagged(hk_zone *z, size_t size, int tag, void **owner, const char *name) {
    if (!z) return NULL;
    hk__core_lock(&z->core);
    void *p = zone_alloc_impl(z, size, 16, tag, owner, name, NULL, 0);
    if (HK__TRACKED(&z->core)) zone_track_alloc(z, p, size);
    hk__core_after(&z->core);
    hk__core_unlock(&z->core);
    return p;
}

void *hk_zone_alloc_ex(hk_zone *z, const hk_zone_alloc_desc *d) {
    if (!z) return NULL;
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

/* The free under the lock (held): a small block of the zone's own heap, or
 * the lookup (which reports what p is when it is no block), then a plain
 * block. */
static hk_result zone_free_held(hk_zone *z, void *p, const char *op) {
    zs_run *r = z->small_on ? zs_run_of(&z->small, p) : NULL;
    if (r) return zs_free(&z->small, &z->own, r, p, op); /* its heap, or remote: no lock taken */
    hk_result res;
    zone_blk *b = hk__zone_lookup(z, p, op, &res);
    if (HK__LIKELY(b != NULL)) {
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

static HK__NOINLINE hk_result zone_free_locked(hk_zone *z, void *p) {
    if (!p) return HK_OK;
    hk__core_lock(&z->core);
    hk_result res = zone_free_held(z, p, "free");
    if (HK__TRACKED(&z->core) && res == HK_OK) hk__track_free(&z->core, p);
    hk__core_after(&z->core);
    hk__core_unlock(&z->core);
    return res;
}

/* A threads zone's free that the inline path did not take: a small block
 * through the calling thread's heap found out of the cache (its own, or
 * another heap's by the remote path), no lock; anything else, and any free
 * by a thread without a heap, locked. */
static HK__NOINLINE hk_result zone_free_thr(hk_zone *z, void *p) {
    zs_run *r = zs_run_of(&z->small, p);
    if (HK__LIKELY(r != NULL)) {
        /* a thread without a heap uses the zone's own under the lock */
        zs_heap *h = hk__zone_heap_find(z);
        if (HK__LIKELY(h != NULL)) return zs_free(&z->small, h, r, p, "free");
    }
    return zone_free_locked(z, p);
}

hk_result hk_zone_free(hk_zone *z, void *p) {
    if (HK__UNLIKELY(!z)) return HK_ERR_INVALID;
    /* Fast path: a small block of the zone's own heap, no lock hooks
     * (the offset's compare places p in the space before anything is read, and
     * fails for NULL; zs_free checks it). Anything else through the
     * lookup, which reports. */
    uintptr_t off = (uintptr_t)p - z->small.lo;
    if (HK__LIKELY(z->fast == ZONE_FAST_OWN)) {
        if (HK__LIKELY(off < ZS_LOAD(z->small.used)))
            return zs_free(&z->small, &z->own, zs_run_at(&z->small, off), p, "free");
    } else if (z->fast == ZONE_FAST_THREADS) {
        /* the calling thread's heap when the cache names it */
        zs_heap *h = zone_tl_heap(z);
        if (HK__LIKELY(off < ZS_LOAD(z->small.used)) && HK__LIKELY(h != NULL))
            return zs_free(&z->small, h, zs_run_at(&z->small, off), p, "free");
        return zone_free_thr(z, p);
    }
    return zone_free_locked(z, p);
}

/* Usable bytes of small block p (run r), or 0 when it is no used block,
 * judged by the calling thread's heap (its own runs' lists can be searched). */
static size_t zone_small_usable(hk_zone *z, zs_run *r, const void *p) {
    return hk__zs_usable(z->threads ? hk__zone_heap_find(z) : &z->own, r, p);
}

size_t hk_zone_usable_size(hk_zone *z, const void *p) {
    if (!z || !p) return 0;
    if (z->fast != ZONE_FAST_NONE) {
        zs_run *r = zs_run_of(&z->small, p);
        if (r) return zone_small_usable(z, r, p);
    }
    hk__core_lock(&z->core);
    size_t n = 0;
    zs_run *r = z->small_on ? zs_run_of(&z->small, p) : NULL;
    if (r) {
        n = zone_small_usable(z, r, p);
    } else {
        hk_result res;
        zone_blk *b = hk__zone_lookup(z, p, "usable_size", &res);
        if (b) n = (ZONE_FLAGS(z) & HK_FLAG_CANARY) ? zone_requested(b) : zone_area(b);
    }
    hk__core_unlock(&z->core);
    return n;
}

bool hk_zone_owns(hk_zone *z, const void *p) {
    if (!z || !p) return false;
    hk__core_lock(&z->core);
    zs_run *r = z->small_on ? zs_run_of(&z->small, p) : NULL;
    bool ok = r ? zone_small_usable(z, r, p) != 0 : hk__zone_is_block(z, p);
    hk__core_unlock(&z->core);
    return ok;
}

/* ---- public: realloc ------------------------------------------------------------ */

/* Whether small block p (`have` usable bytes, run r) keeps n bytes in place:
 * n fits and wastes at most half the slot, or is of the slot's own class;
 * and the slot is aligned as n asks (hk_zone_alloc's promise). */
static int zone_small_keeps(const zs_run *r, size_t have, size_t n) {
    size_t n8 = n < 8 ? 8 : (n + 7) & ~(size_t)7, want = n8 & (~n8 + 1), got = r->stride & (~r->stride + 1u);
    return n <= have && (n >= have / 2 || zs_cls_of(n) == zs_rcls(r)) && (got >= 16 || got >= want);
}

static void *zone_realloc_impl(hk_zone *z, void *p, size_t n) {
    zs_run *sr = z->small_on ? zs_run_of(&z->small, p) : NULL;
    if (sr) {
        size_t have = zone_small_usable(z, sr, p);
        if (!have) {
            (void)zone_free_held(z, p, "realloc"); /* reports what p is; frees nothing */
            return NULL;
        }
        if (zone_small_keeps(sr, have, n)) return p;
        void *q = zone_alloc_plain(z, n);
        if (!q) return NULL; /* reported; the block is unchanged */
        memcpy(q, p, n < have ? n : have);
        (void)zone_free_held(z, p, "realloc");
        return q;
    }
    hk_result res;
    zone_blk *b = hk__zone_lookup(z, p, "realloc", &res);
    if (!b) return NULL;
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

/* A lock-free zone's realloc of its own used small block p (run r, heap
 * h) that n does not keep in place: a new block from h (or a TLSF block
 * from hk_zone_alloc above ZS_MAX) with the bytes copied and p freed, or
 * NULL (p unchanged; the alloc reported). */
static HK__NOINLINE void *zone_realloc_small_move(hk_zone *z, zs_heap *h, zs_run *r, void *p, size_t n) {
    void *q = n <= ZS_MAX ? zs_alloc(h, n) : NULL;
    if (!q) q = hk_zone_alloc(z, n); /* a TLSF block, or NULL (reported; p unchanged) */
    if (q) {
        memcpy(q, p, n < r->stride ? n : r->stride);
        (void)zs_free(&z->small, h, r, p, "realloc");
    }
    return q;
}

/* The same for a p that is not the calling thread's own used block:
 * another heap's block, or no used block (reported by the free, NULL). */
static HK__NOINLINE void *zone_realloc_small_other(hk_zone *z, zs_run *r, void *p, size_t n) {
    size_t have = zone_small_usable(z, r, p);
    if (!have) {
        (void)zs_free(&z->small, z->threads ? hk__zone_heap_find(z) : &z->own, r, p, "realloc");
        return NULL;
    }
    if (zone_small_keeps(r, have, n)) return p;
    void *q = hk_zone_alloc(z, n);
    if (q) {
        memcpy(q, p, n < have ? n : have);
        (void)hk_zone_free(z, p);
    }
    return q;
}

/* The locked realloc: TLSF blocks, and every block of a zone without the
 * lock-free paths. */
static HK__NOINLINE void *zone_realloc_locked(hk_zone *z, void *p, size_t size) {
    hk__core_lock(&z->core);
    size_t old_req = 0;
    if (HK__TRACKED(&z->core) && hk__zone_is_block(z, p)) old_req = zone_requested(zone_from_user(p));
    void *q = zone_realloc_impl(z, p, size);
    if (HK__TRACKED(&z->core) && q) hk__track_realloc(&z->core, p, old_req, q, size);
    hk__core_after(&z->core);
    hk__core_unlock(&z->core);
    return q;
}

/* A lock-free zone's realloc of small block p (run r): in place when n
 * keeps it, else moved (zone_realloc_small_move); a block the calling
 * thread does not own, or misuse, takes zone_realloc_small_other. The
 * in-place case saves no register: the moves are out of line. */
static inline void *zone_realloc_small(hk_zone *z, zs_run *r, void *p, size_t n) {
    /* the calling thread's own used block (the checks of its free pass):
     * its heap's paths, no lookup */
    zs_heap *h = z->fast == ZONE_FAST_OWN ? &z->own : zone_tl_heap(z);
    if (HK__LIKELY(h != NULL) && HK__LIKELY(!zs_free_odd(h, r, p))) {
        if (zone_small_keeps(r, r->stride, n)) return p;
        return zone_realloc_small_move(z, h, r, p, n);
    }
    return zone_realloc_small_other(z, r, p, n);
}

void *hk_zone_realloc(hk_zone *z, void *p, size_t size) {
    if (!z) return NULL;
    if (!p) return hk_zone_alloc(z, size);
    if (z->fast != ZONE_FAST_NONE) {
        zs_run *r = zs_run_of(&z->small, p);
        if (r) return zone_realloc_small(z, r, p, size);
    }
    return zone_realloc_locked(z, p, size);
}

/* ---- public: stats, info ------------------------------------------------------- */

/* The small blocks' totals (lock held; owners may run: each figure is
 * read as it stands). The runs' used counts give the live blocks and
 * bytes, less the frees other threads made that their owners have not
 * collected; each heap counts its allocations, and the frees are the
 * difference. */
typedef struct zone_small_sums {
    size_t slot_bytes;
    uint64_t alloc_count, free_count;
} zone_small_sums;
static void zone_small_sum(hk_zone *z, zone_small_sums *s) {
    memset(s, 0, sizeof *s);
    if (!z->small_on) return;
    uint64_t live = 0, bytes = 0;
    for (zs_heap *h = zone_heap_first(z); h; h = zone_heap_next(z, h)) s->alloc_count += zs_alloc_count(h);
    hk__zs_sum_runs(&z->small, &live, &bytes);
    s->slot_bytes = (size_t)bytes;
    s->free_count = s->alloc_count > live ? s->alloc_count - live : 0;
}

hk_result hk_zone_stats(const hk_zone *cz, hk_stats *out) {
    if (!cz || !out) return HK_ERR_INVALID;
    hk_zone *z = (hk_zone *)(uintptr_t)cz;
    hk__core_lock(&z->core);
    memset(out, 0, sizeof *out);
    out->size = (uint32_t)sizeof *out;
    out->version = HK_STATS_VERSION;
    out->allocator = "zone";
    zone_small_sums sm;
    zone_small_sum(z, &sm);
    size_t runs = z->small_on ? __atomic_load_n(&z->small.runs, __ATOMIC_RELAXED) : 0;
    out->capacity = z->capacity + runs * ZS_RUN;
    /* a small block counts its slot's bytes as asked for: no header keeps
     * the request */
    size_t used = z->used_req + sm.slot_bytes;
    out->used = used;
    out->used_blocks_bytes = z->used_bytes + sm.slot_bytes;
    /* free slots and the uncarved part of runs are free for the user */
    size_t small_free = runs * (ZS_RUN - ZS_FIRST);
    out->free = z->free_bytes + (small_free > sm.slot_bytes ? small_free - sm.slot_bytes : 0);
    size_t cs = zone_largest_class_start(z);
    if (cs) {
        size_t ovh =
            ((ZONE_FLAGS(z) & (HK_ZONE_TRACK_ALL | HK_FLAG_RECORD_SITE)) ? ZONE_EXT_OVH : ZONE_PLAIN_OVH) +
            ((ZONE_FLAGS(z) & HK_FLAG_CANARY) ? HK_CANARY_BYTES : 0);
        out->largest_free = cs > ovh ? cs - ovh : 0;
    }
    /* small blocks are not followed one by one: the peak is the highest
     * total seen by the TLSF paths and by stats */
    if (used > z->peak_used) z->peak_used = used;
    out->peak_used = z->peak_used;
    out->overhead =
        out->used_blocks_bytes - used + sizeof(hk_zone) + z->nregions * ZONE_HDR + runs * ZS_FIRST;
    out->alloc_count = z->alloc_count + sm.alloc_count;
    out->free_count = z->free_count + sm.free_count;
    out->live_blocks = (size_t)(out->alloc_count - out->free_count);
    out->free_blocks = z->free_blocks;
    out->fail_count = z->fail_count;
    out->error_count = z->core.rep.error_count;
    hk__core_unlock(&z->core);
    return HK_OK;
}

hk_result hk_zone_get_info(const hk_zone *cz, hk_zone_info *out) {
    if (!cz || !out) return HK_ERR_INVALID;
    hk_zone *z = (hk_zone *)(uintptr_t)cz;
    hk__core_lock(&z->core);
    memset(out, 0, sizeof *out);
    out->control_bytes = sizeof(hk_zone);
    out->grown_bytes = z->os_grown;
    out->regions = z->nregions;
    out->purge_level = z->purge_level;
    zone_small_sums sm;
    zone_small_sum(z, &sm);
    out->runs = z->small_on ? __atomic_load_n(&z->small.runs, __ATOMIC_RELAXED) : 0;
    out->run_bytes = out->runs * ZS_RUN;
    out->runs_made = z->small_on ? __atomic_load_n(&z->small.made, __ATOMIC_RELAXED) : 0;
    out->slot_bytes = sm.slot_bytes;
    out->untracked_blocks = z->untracked_live;
    out->purge_count = z->purge_count;
    out->grow_count = z->grow_count;
    out->decommitted_bytes =
        z->clean_bytes +
        (z->small_on ? __atomic_load_n(&z->small.nclean, __ATOMIC_RELAXED) * (ZS_RUN - hk_os_page_size())
                     : 0);
    out->decommit_count = z->decommit_count;
    hk__core_unlock(&z->core);
    return HK_OK;
}

/* ---- public: trim ------------------------------------------------------------------ */

size_t hk_zone_trim(hk_zone *z) {
    if (!z) return 0;
    hk__core_lock(&z->core);
    size_t n = 0;
    if (z->small_on) {
        /* the zone's own heap, the caller's, and the abandoned ones: empty
         * runs and spares go back (their pages but the first) */
        size_t g = hk__zs_heap_shrink(&z->own);
        zs_heap *mine = z->threads ? hk__zone_heap_find(z) : NULL;
        if (mine) {
            mine->locked = 1; /* its reports: the lock is held */
            g += hk__zs_heap_shrink(mine);
            mine->locked = 0;
        }
        if (z->threads) hk__zone_thr_tidy(z);
        /* the other live heaps' spares (their owners may be making runs) */
        for (zs_heap *h = z->heaps; h; h = h->next)
            if (h != mine) g += hk__zs_heap_take_spare(h);
        (void)g;
        n += hk__zs_space_trim(&z->small) * (ZS_RUN - hk_os_page_size());
    }
    if (z->decay_on) {
        n += hk__zone_sweep(z, 1);
        z->decay_new = z->decay_old = 0; /* nothing dirty is left to decay */
        z->decay_check_at = ZONE_DECAY_ARM;
        __atomic_store_n(&z->decay_armed, 0, __ATOMIC_RELAXED);
    }
    hk__core_after(&z->core);
    hk__core_unlock(&z->core);
    return n;
}

/*
 * src/zone_small.c - the headerless small-block layer's runs, heaps and
 * slow paths (interface and fast paths: zone_small.h; the space of
 * granules the runs are laid out in: zone_space.c; stats sums, check, walk
 * and where: zone_small_check.c).
 *
 * Invariants (owners quiescent; "slot i" of run r is r->base +
 * zs_first(r) + i * stride, zs_first(r) being ZS_FIRST plus 64 times g mod
 * ZS_COLORS; r is granule g's entry of the header table, r->base = lo +
 * g * ZS_RUN):
 *
 *  1. A granule below lo + used is a run iff its header's heap is not NULL
 *     (any thread may read any of those headers and first pages:
 *     zone_space.c invariant 1). A header's fixed fields (stride, recip,
 *     nslots, secret, key, base) are written before the run is handed to
 *     its heap and not after while it is a run.
 *  2. Slots at or past `bump` have never been handed out: no list holds
 *     them and their remote bits are 0. bump <= nslots, and limit ==
 *     bump * stride (a free's one compare against limit also rejects a
 *     slot never carved).
 *  3. Slot i < bump is used (handed out, not back), or free: on r->free's
 *     list exactly once, its first word the encoded link. The list ends at
 *     the run's own address. zs_used == bump - (slots on the list); a run
 *     in state ZS_FULL has every slot used and its used field 1.
 *  4. A remote bit is set only on a used slot: the freer reads the slot's
 *     first word first and reports a double free when it may be a link; the
 *     owner's free sends a slot with its remote bit set to the slow path.
 *     The one exception is a double free whose two frees race (the owner's
 *     and another thread's at once): the collection finds that slot on the
 *     list, reports it and leaves it there.
 *  5. A run with a remote bit set is on its heap's collection stack (its
 *     rpend has ZS_RQUEUED), or the freer that set the bit is about to queue
 *     it: a freer that finds ZS_RQUEUED clear counts itself in rpend before
 *     its or and queues the run after it when its or of ZS_RQUEUED saw it
 *     clear; one that finds it set only sets its bit (one atomic write),
 *     then reads ZS_RQUEUED again, and when a collection cleared it
 *     meanwhile, counts itself and queues the run if its bit still waits
 *     (zs_requeue). So rpend == 0 means no remote bit is set but by a free
 *     that races with the reader's: stats, and the owner's free, read the
 *     bitmap only when rpend is not 0.
 *  6. A heap's run is its class's cur (state ZS_CUR), on its class's partial
 *     list (ZS_PARTIAL: it has a free or uncarved slot), or full (ZS_FULL:
 *     none, on no list). A run whose last used slot is freed, other than a
 *     cur, goes back to the space, unless it is queued or a remote freer is
 *     in flight on it (zs_run_quiet): then at the collection that unqueues
 *     it. A run on a collection stack never goes back. Every run of a heap
 *     is on its `all` list.
 *  7. Every free slot is poisoned for ASan; its first 8 bytes are touched
 *     only through zs_word / zs_link, which ASan does not check.
 *  9. h->direct[k] == h->cls[zs_cls_of(8k)].cur for every k (zs_set_cur).
 *  8. An abandoned heap (its thread gone) has fewer than ZS_ORPHAN_BATCH
 *     frees waiting once a free into it is done: the abandonment zeroes
 *     its orphan count, marks it, then collects (sequentially consistent),
 *     and a freer reads the mark after its push (so a push the collection
 *     missed sees the mark), counts itself, and collects under the zone's
 *     lock when the batch is full. Stats count waiting frees (remote bits
 *     set) as frees: they read the bitmaps of the runs whose rpend says
 *     some may be set.
 * 10. A granule's remote bitmap is never poisoned for ASan and its words
 *     are read and written atomically (a free granule's first word is its
 *     dirty-list link), so stats may read any of them.
 * 11. A heap's spare is a granule with a NULL heap, on no list, counted in
 *     the space's runs; only its owner puts one in place (any thread may
 *     take one out: an atomic exchange), and spare_tag, the owner's alone,
 *     says its last class.
 */
#include "zone_small.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

uint8_t hk__zs_cls_tab[ZS_MAX / 8u + 1u];
/* The run every class's `cur` points at while it has none: its list is
 * empty (free is its own address), so the fast path falls to the slow one,
 * which never writes it. */
zs_run hk__zs_empty_run = {.free = (unsigned char *)&hk__zs_empty_run,
                           .base = (unsigned char *)&hk__zs_empty_run};
#define ZS_E  &hk__zs_empty_run
#define ZS_E8 ZS_E, ZS_E, ZS_E, ZS_E, ZS_E, ZS_E, ZS_E, ZS_E
_Static_assert(ZS_DIRECT_MAX / 8u + 1u == 129u, "the none heap's initializer");
zs_heap hk__zs_none_heap = {.direct = {ZS_E8, ZS_E8, ZS_E8, ZS_E8, ZS_E8, ZS_E8, ZS_E8, ZS_E8, ZS_E8, ZS_E8,
                                       ZS_E8, ZS_E8, ZS_E8, ZS_E8, ZS_E8, ZS_E8, ZS_E}};
#undef ZS_E8
#undef ZS_E

/* The one report of the layer: under the space's lock hooks unless h is
 * used under that lock already. */
static hk_result zs_report(zs_space *sp, const zs_heap *h, hk_result res, hk_error_kind k, const void *p,
                           size_t n, const char *fmt, ...) HK__PRINTF(7, 8);
static hk_result zs_report(zs_space *sp, const zs_heap *h, hk_result res, hk_error_kind k, const void *p,
                           size_t n, const char *fmt, ...) {
    if (!sp->rep) return res;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int lock = sp->lock && !(h && h->locked);
    if (lock) sp->lock(sp->lock_user);
    hk__report(sp->rep, res, k, p, n, NULL, "%s", msg);
    if (lock) sp->unlock(sp->lock_user);
    return res;
}

void hk__zs_init_tables(void) {
    unsigned c = 0;
    for (unsigned k = 0; k <= ZS_MAX / 8u; k++) {
        size_t n = (size_t)k * 8u;
        while (zs_stride_tab[c] < n) c++;
        hk__zs_cls_tab[k] = (uint8_t)c;
    }
}

/* ---- runs ------------------------------------------------------------------------ */

/* A step of splitmix64: the runs' secrets. */
static uint64_t zs_mix(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Lays out a run of class c with its secret in header r (whose base is
 * set: the remote bitmap cleared, nothing carved); its heap is set by the
 * caller last. */
static void zs_run_format(zs_run *r, unsigned c, uint64_t secret) {
    uint32_t s = zs_stride_tab[c];
    /* field by field, heap (NULL) and base untouched; what stats read
     * (stride, used, nslots, state) by atomic stores: stats read them from
     * any thread (hk__zs_sum_runs) and may meet a granule being made into a
     * run */
    __atomic_store_n(&r->stride, s, __ATOMIC_RELAXED);
    r->recip = (uint32_t)((((uint64_t)1 << 32) + s - 1) / s);
    r->limit = 0;
    __atomic_store_n(&r->used, 0, __ATOMIC_RELAXED);
    r->free = r->base;
    r->secret = (secret & ~(uint64_t)(ZS_RUN - 1)) | ((uint64_t)1 << 63);
    r->key = (uint64_t)(uintptr_t)r->base ^ r->secret;
    /* the colour: slot 0 of the runs of neighbouring granules start on
     * different cache lines of a page, so that the slots a program uses
     * most (each run's first ones) do not all fall into the same few sets
     * of a set-associative cache (docs/zone.md) */
    uint32_t first = ZS_FIRST + 64u * (uint32_t)(((uintptr_t)r->base >> ZS_RUN_LOG2) % ZS_COLORS);
    r->org = (uint32_t)(uintptr_t)r->base + first;
    __atomic_store_n(&r->nslots, zs_nslots(s, first), __ATOMIC_RELAXED);
    r->magic = (ZS_MAGIC << 16) | c;
    r->bump = 0;
    __atomic_store_n(&r->state, 0, __ATOMIC_RELAXED);
    r->next = r->prev = r->all_next = r->all_prev = r->rnext = NULL;
    /* rpend is left as it is: 0, but while a late remote freer holds a
     * count on it (zs_requeue) */
    /* the remote bitmap; word by word under ThreadSanitizer, which would
     * take a memset racing with stats' atomic reads (invariant 10) for a
     * race (on the hosts heapkit supports aligned stores are single-copy
     * atomic, and a memset of 512 bytes costs a new run 150 instructions
     * less than the loop) */
#ifdef HK__TSAN
    uint64_t *rb = zs_rbits(r);
    for (unsigned w = 0; w < ZS_WORDS; w++) __atomic_store_n(rb + w, 0, __ATOMIC_RELAXED);
#else
    memset(zs_rbits(r), 0, ZS_WORDS * 8u);
#endif
}

/* Takes a spare of h whose last run was of class c (any class: c ==
 * ZS_NCLS), or NULL. Owner; a spare trim takes meanwhile is skipped. */
static zs_run *zs_spare_take(zs_heap *h, unsigned c) {
    for (unsigned i = 0; i < ZS_SPARES; i++) {
        zs_run *r = __atomic_load_n(&h->spare[i], __ATOMIC_RELAXED);
        if (r && (c == ZS_NCLS || (h->spare_tag[i] & 0xffu) == c) &&
            __atomic_compare_exchange_n(&h->spare[i], &r, NULL, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return r;
    }
    return NULL;
}

/* A new run of class c for heap h, cur-ready, or NULL: a spare whose last
 * run was of class c, else a granule of the space, else (the space has
 * none left) a spare of another class. */
static zs_run *zs_run_new(zs_heap *h, unsigned c) {
    zs_space *sp = h->sp;
    zs_run *r = zs_spare_take(h, c);
    if (!r && !(r = hk__zs_granule_take(sp, c)) && !(r = zs_spare_take(h, ZS_NCLS))) return NULL;
    hk__asan_unpoison(r->base, ZS_RUN);
    zs_run_format(r, c, zs_mix(&h->secret));
    hk__asan_poison(r->base + ZS_FIRST, ZS_RUN - ZS_FIRST);
    r->all_prev = NULL;
    r->all_next = h->all;
    if (h->all) h->all->all_prev = r;
    h->all = r;
    __atomic_store_n(&r->heap, h, __ATOMIC_RELEASE);
    __atomic_fetch_add(&sp->made, 1, __ATOMIC_RELAXED);
    return r;
}

/* Ends empty run r (on no class list): one of its heap's spares, in a free
 * place or in the oldest one's, which goes back to the space. */
static void zs_run_release(zs_heap *h, zs_run *r) {
    if (r->all_prev)
        r->all_prev->all_next = r->all_next;
    else
        h->all = r->all_next;
    if (r->all_next) r->all_next->all_prev = r->all_prev;
    __atomic_store_n(&r->heap, NULL, __ATOMIC_RELAXED);
    uint32_t now = (uint32_t)(zs_alloc_count(h) >> 8), oldest = 0, age = 0;
    /* spare_due is the earliest the spares may be due: this one's, or an
     * older one's */
    if ((int32_t)(now + (ZS_SPARE_AGE >> 8) - h->spare_due) < 0) h->spare_due = now + (ZS_SPARE_AGE >> 8);
    for (unsigned i = 0; i < ZS_SPARES; i++) {
        if (!__atomic_load_n(&h->spare[i], __ATOMIC_RELAXED)) {
            oldest = i;
            age = UINT32_MAX;
            break;
        }
        uint32_t a = (now - (h->spare_tag[i] >> 8)) & 0xffffffu;
        if (a > age || i == 0) oldest = i, age = a; /* a tie: the lower place */
    }
    h->spare_tag[oldest] = now << 8 | zs_rcls(r);
    zs_run *old = __atomic_exchange_n(&h->spare[oldest], r, __ATOMIC_ACQ_REL);
    if (old) hk__zs_granule_give(h->sp, old);
}

/* Gives back the spares of h that no run has taken for ZS_SPARE_AGE
 * allocations (owner, at its poll, once spare_due has come): they join
 * the space's free granules, whose pages go back to the OS when they stay
 * free. Sets spare_due from the spares left. */
static HK__NOINLINE void zs_spares_age(zs_heap *h, uint32_t now) {
    uint32_t due = now + (1u << 30); /* none left: far off (a spare's release sets it) */
    for (unsigned i = 0; i < ZS_SPARES; i++) {
        zs_run *r = __atomic_load_n(&h->spare[i], __ATOMIC_RELAXED);
        if (!r) continue;
        /* the stamps are 24 bits of 256 allocations: differences modulo 2^24 */
        uint32_t left = ((h->spare_tag[i] >> 8) + (ZS_SPARE_AGE >> 8) - now) & 0xffffffu;
        if (left == 0 || left >= 0x800000u) {
            if (__atomic_compare_exchange_n(&h->spare[i], &r, NULL, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
                hk__zs_granule_give(h->sp, r);
        } else if (left < due - now) {
            due = now + left;
        }
    }
    h->spare_due = due;
}

static void zs_partial_push(zs_cls *c, zs_run *r) {
    r->prev = NULL;
    r->next = c->partial;
    if (c->partial) c->partial->prev = r;
    c->partial = r;
    zs_set_state(r, ZS_PARTIAL);
}
static void zs_partial_unlink(zs_cls *c, zs_run *r) {
    if (r->prev)
        r->prev->next = r->next;
    else
        c->partial = r->next;
    if (r->next) r->next->prev = r->prev;
    r->next = r->prev = NULL;
}

/* Whether ZS_COLLECT_GAP allocations have passed since h's last collection
 * of its stack (owner). */
static int zs_collect_due(const zs_heap *h) { return zs_alloc_count(h) - h->collect_ac >= ZS_COLLECT_GAP; }

void hk__zs_poll(zs_heap *h) {
    zs_space *sp = h->sp;
    /* remote frees wait at most until here (hk__zs_alloc_slow) */
    if (__atomic_load_n(&h->rstack, __ATOMIC_RELAXED) && zs_collect_due(h)) hk__zs_collect(h);
    uint32_t now = (uint32_t)(zs_alloc_count(h) >> 8);
    if (HK__UNLIKELY((int32_t)(now - h->spare_due) >= 0)) zs_spares_age(h, now);
    uint32_t left = sp->poll ? sp->poll(sp->poll_user, h) : UINT32_MAX;
    if (!left) left = 1;
    /* the count so far is alloc_base - poll_left (0 when the countdown ran out) */
    __atomic_store_n(&h->alloc_base, h->alloc_base - h->poll_left + left, __ATOMIC_RELAXED);
    __atomic_store_n(&h->poll_left, left, __ATOMIC_RELAXED);
}

void *hk__zs_poll_ret(zs_heap *h, void *u) {
    hk__zs_poll(h);
    return u;
}

/* Whether empty run r may go back: no remote freer is between setting its
 * bit and queueing the run, and the run is on no collection stack (a
 * granule given back while a stack holds it would be reused under it). A
 * run that may not goes back at the collection that unqueues it. */
static int zs_run_quiet(zs_run *r) { return !__atomic_load_n(&r->rpend, __ATOMIC_SEQ_CST); }

hk_result hk__zs_free_tail(zs_heap *h, zs_run *r) {
    if (r->state == ZS_FULL) {
        /* its trap: every slot was used, and one came back */
        zs_partial_push(&h->cls[zs_rcls(r)], r);
        ZS_USED_SET(r, r->used - 1);
    }
    hk__zs_settle(h, r);
    /* 0 when zs_free counted an emptied current run down to it */
    if (h->tail_left <= 1) {
        h->tail_left = ZS_TAIL_POLL;
        zs_space *sp = h->sp;
        if (sp->poll) (void)sp->poll(sp->poll_user, h); /* the allocations' countdown stays */
    } else {
        h->tail_left--;
    }
    return HK_OK;
}

void hk__zs_settle(zs_heap *h, zs_run *r) {
    zs_cls *c = &h->cls[zs_rcls(r)];
    if (r->used == 0 && r->state == ZS_PARTIAL && zs_run_quiet(r)) {
        zs_partial_unlink(c, r);
        zs_run_release(h, r);
    }
}

/* Carves the slots that lie in the page of slot `bump` (at least one, at
 * most ZS_CARVE_MAX) onto r's empty free list, lowest address first. Returns 0 when
 * r has none left. */
static int zs_carve(zs_run *r) {
    uint32_t i = r->bump, s = r->stride;
    if (i >= r->nslots) return 0;
    unsigned char *first = zs_slot(r, i), *u = first;
    /* the whole slots from `first` to its page's end (one at least), by the
     * reciprocal: floor(room / s) exactly for room < 2^16 (zs_index) */
    uintptr_t page = hk_os_page_size();
    uint32_t room = (uint32_t)((((uintptr_t)first | (page - 1)) + 1) - (uintptr_t)first);
    uint32_t n = (uint32_t)(((uint64_t)room * r->recip) >> 32);
    if (n < 1) n = 1;
    if (n > ZS_CARVE_MAX) n = ZS_CARVE_MAX;
    if (n > r->nslots - i) n = r->nslots - i;
    /* linked in address order, the last to the list as it stood */
    for (uint32_t k = 1; k < n; k++, u += s) zs_link(u, (uint64_t)(uintptr_t)(u + s) ^ r->key);
    zs_link(u, (uint64_t)(uintptr_t)r->free ^ r->key);
    r->free = first;
    __atomic_store_n(&r->bump, i + n, __ATOMIC_RELAXED);
    __atomic_store_n(&r->limit, (i + n) * s, __ATOMIC_RELAXED);
    return 1;
}

/* Whether slot p of run r is on its free list (owner). O(free slots). */
static int zs_on_list(zs_run *r, const unsigned char *p) {
    uint32_t n = 0;
    for (unsigned char *u = r->free; u != r->base && n <= r->nslots; n++) {
        if (u == p) return 1;
        u = (unsigned char *)(uintptr_t)(zs_word(u) ^ r->key);
    }
    return 0;
}

/* Pushes slot p (used) on r's free list: the free's bookkeeping. */
static void zs_push(zs_heap *h, zs_run *r, unsigned char *p) {
    if (r->state == ZS_FULL) zs_partial_push(&h->cls[zs_rcls(r)], r); /* full no more */
    hk__asan_poison(p, r->stride);
    zs_link(p, (uint64_t)(uintptr_t)r->free ^ r->key);
    r->free = p;
    ZS_USED_SET(r, r->used - 1);
}

/* Collects run r's remote frees (owner). Returns the slots collected. */
static size_t zs_collect_run(zs_heap *h, zs_run *r) {
    size_t got = 0;
    uint64_t *rb = zs_rbits(r);
    /* only the carved slots' words: no bit past bump is set (invariant 2),
     * so a current run still being carved is scanned that far only */
    for (uint32_t w = 0; w < (r->bump + 63u) / 64u; w++) {
        if (!__atomic_load_n(rb + w, __ATOMIC_RELAXED)) continue;
        uint64_t x = __atomic_exchange_n(rb + w, 0, __ATOMIC_ACQUIRE);
        while (x) {
            unsigned b = (unsigned)__builtin_ctzll(x);
            x &= x - 1;
            unsigned char *p = zs_slot(r, w * 64u + b);
            if (HK__UNLIKELY(zs_maybe_link(r, zs_word(p))) && zs_on_list(r, p)) {
                /* invariant 4's exception: freed by its owner and by
                 * another thread at once; it stays on the list once */
                zs_report(h->sp, h, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, p, r->stride,
                          "free(%p): block %p (%u bytes, in a small-block run) was freed by its owner and by "
                          "another thread at once",
                          (void *)p, (void *)p, r->stride);
                continue;
            }
            zs_push(h, r, p);
            got++;
        }
    }
    return got;
}

size_t hk__zs_collect(zs_heap *h) {
    zs_run *s = __atomic_exchange_n(&h->rstack, NULL, __ATOMIC_SEQ_CST);
    size_t got = 0;
    h->collect_ac = zs_alloc_count(h);
    while (s) {
        zs_run *next = s->rnext;
        /* unqueue before reading the bits (invariant 5): a freer that sets a
         * bit after our exchange of it queues the run again */
        __atomic_fetch_and(&s->rpend, ~ZS_RQUEUED, __ATOMIC_SEQ_CST);
        got += zs_collect_run(h, s);
        if (zs_used(s) == 0 && s->state == ZS_PARTIAL && zs_run_quiet(s)) {
            zs_partial_unlink(&h->cls[zs_rcls(s)], s);
            zs_run_release(h, s);
        }
        s = next;
    }
    return got;
}

void hk__zs_set_cur(zs_heap *h, unsigned c, zs_run *r) {
    h->cls[c].cur = r;
    /* the requests of class c: (stride of c - 1, stride of c] bytes */
    unsigned k = c ? zs_stride_tab[c - 1] / 8u + 1u : 0u, end = zs_stride_tab[c] / 8u;
    for (; k <= end && k <= ZS_DIRECT_MAX / 8u; k++) h->direct[k] = r;
}

void *hk__zs_alloc_slow(zs_heap *h, unsigned c) {
    zs_cls *cl = &h->cls[c];
    zs_run *r = cl->cur;
    /* Remote frees are collected lazily: those of the current run when it
     * runs dry, before it is carved further (it stays queued; the stack's
     * collection finds its bits gone; carving first touched fresh pages
     * while freed slots waited: prodcons at 2 threads peaked at 1.87 MiB
     * against 0.77), the whole stack when the class has no partial run left or ZS_COLLECT_GAP
     * allocations after the last time (here or at the poll). A run stays
     * queued meanwhile, so that more of its remote frees find it queued
     * and take the one-write path (server at 2 threads: half of them found
     * their run unqueued when every slow path collected the stack). */
    if (r != &hk__zs_empty_run && r->free == r->base) {
        if (__atomic_load_n(&r->rpend, __ATOMIC_RELAXED) & ZS_RQUEUED) (void)zs_collect_run(h, r);
        zs_run *p = cl->partial;
        if (r->free == r->base && p && p->free != p->base && r->bump < r->nslots) {
            /* a partial run's freed slots before cur's fresh ones: their
             * pages are resident. Carving first, churn (1,024 blocks of 16
             * B to 1 KiB, 10 M iterations) kept 1.30 MiB of the space
             * resident at 1 thread, against 1.02: a class near a run's
             * size carved its second run deep while the first emptied */
            zs_partial_unlink(cl, p);
            zs_partial_push(cl, r);
            zs_set_state(p, ZS_CUR);
            hk__zs_set_cur(h, c, r = p);
            return zs_pop(h, r, r->free);
        }
        if (r->free == r->base && !zs_carve(r)) {
            /* cur is exhausted: full until a free comes back */
            zs_set_state(r, ZS_FULL);
            hk__zs_set_cur(h, c, r = &hk__zs_empty_run);
        }
    }
    if (r == &hk__zs_empty_run) {
        if (__atomic_load_n(&h->rstack, __ATOMIC_RELAXED) && (!cl->partial || zs_collect_due(h)))
            hk__zs_collect(h);
        r = cl->partial;
        if (r) {
            zs_partial_unlink(cl, r);
        } else if (!(r = zs_run_new(h, c))) {
            return NULL;
        }
        zs_set_state(r, ZS_CUR);
        hk__zs_set_cur(h, c, r);
        if (r->free == r->base && !zs_carve(r)) return NULL; /* a partial run always has one */
    }
    return zs_pop(h, r, r->free);
}

/* ---- frees the fast path did not take -------------------------------------------- */

static hk_result zs_double(zs_space *sp, zs_heap *h, zs_run *r, void *p, const char *op, const char *why) {
    return zs_report(sp, h, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, p, r->stride,
                     "%s(%p): block %p (%u bytes, in a small-block run) is already free%s", op, p, p,
                     r->stride, why);
}

/* Queues run r on its owner's collection stack unless it is there (or
 * about to be) already: the caller is in flight on r (invariant 5). */
static void zs_queue(zs_run *r, zs_heap *owner) {
    if (__atomic_load_n(&r->rpend, __ATOMIC_SEQ_CST) & ZS_RQUEUED) return;
    if (__atomic_fetch_or(&r->rpend, ZS_RQUEUED, __ATOMIC_SEQ_CST) & ZS_RQUEUED) return;
    zs_run *top = __atomic_load_n(&owner->rstack, __ATOMIC_RELAXED);
    do r->rnext = top;
    while (!__atomic_compare_exchange_n(&owner->rstack, &top, r, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
}

/* The rare end of a remote free that found run r queued before setting its
 * bit m (in word rw) and unqueued after: the collection that unqueued it
 * may have taken the bit, emptied the run, even given it back. Counted in
 * flight, the freer queues the run only if the bit is still set (the slot
 * still waits, so the run stays its owner's while the count holds it) and
 * the run is still `owner`'s (a run given back and made again elsewhere has
 * another freer for that bit). A count taken on a run given back only
 * delays that run's going back (invariant 6), and comes off again. */
static void zs_requeue(zs_run *r, const uint64_t *rw, uint64_t m, zs_heap *owner) {
    __atomic_fetch_add(&r->rpend, 1, __ATOMIC_SEQ_CST);
    if ((__atomic_load_n(rw, __ATOMIC_SEQ_CST) & m) && __atomic_load_n(&r->heap, __ATOMIC_SEQ_CST) == owner)
        zs_queue(r, owner);
    __atomic_fetch_sub(&r->rpend, 1, __ATOMIC_SEQ_CST);
}

hk_result hk__zs_free_slow(zs_space *sp, zs_heap *h, zs_run *r, void *p, const char *op) {
    if (h == &hk__zs_none_heap) h = NULL;
    uint32_t off = (uint32_t)((uintptr_t)p & (uint32_t)(ZS_RUN - 1));
    uint32_t i = zs_index_in(r, off, r->nslots * r->stride);
    zs_heap *owner = __atomic_load_n(&r->heap, __ATOMIC_ACQUIRE);
    if (!owner)
        return zs_report(sp, h, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, p, 0,
                         "%s(%p): pointer is in a small-block run given back (every block of it was freed): "
                         "freed already?",
                         op, p);
    if (i == UINT32_MAX) {
        if (off < zs_first(r) || off - zs_first(r) >= r->nslots * r->stride)
            return zs_report(sp, h, HK_ERR_INVALID, HK_EK_INTERIOR_PTR, p, 0,
                             "%s(%p): pointer is inside the header of small-block run %p, not a block", op, p,
                             (void *)r);
        unsigned char *b = zs_slot(r, (off - zs_first(r)) / r->stride);
        return zs_report(
            sp, h, HK_ERR_INVALID, HK_EK_INTERIOR_PTR, p, r->stride,
            "%s(%p): pointer is %td bytes into block %p (%u bytes, in a small-block run), not its "
            "start",
            op, p, (unsigned char *)p - b, (void *)b, r->stride);
    }
    if ((uint64_t)i * r->stride >= __atomic_load_n(&r->limit, __ATOMIC_RELAXED)) /* i >= bump, from line 0 */
        return zs_double(sp, h, r, p, op, " (never allocated)");
    uint64_t m = (uint64_t)1 << (i & 63u), *rw = zs_rbits(r) + (i >> 6);
    int maybe = zs_maybe_link(r, zs_word(p));
    if (owner == h) {
        if (__atomic_load_n(rw, __ATOMIC_RELAXED) & m)
            return zs_double(sp, h, r, p, op, " (freed by another thread, not collected yet)");
        if (maybe && zs_on_list(r, p)) return zs_double(sp, h, r, p, op, "");
        /* a used slot whose first word only looked like a link */
        zs_push(h, r, p);
        hk__zs_settle(h, r);
        return HK_OK;
    }
    /* another heap's slot (a bit already set is found by the atomic or
     * below: reading the word first would fetch its line shared, then again
     * to write it, on the line other freers and the owner's collection
     * write). Its owner's list cannot be searched from here:
     * a first word that may be a link is taken for one (a used block's
     * data passes that test with odds of 2^-47 per free) */
    if (maybe) return zs_double(sp, h, r, p, op, "");
    /* poisoned while still the freer's: once its bit is set, its owner may
     * collect it and hand it out again at once */
    hk__asan_poison(p, r->stride);
    if (HK__LIKELY(__atomic_load_n(&r->rpend, __ATOMIC_SEQ_CST) & ZS_RQUEUED)) {
        /* queued already: the bit is the one write (invariant 5) */
        if (__atomic_fetch_or(rw, m, __ATOMIC_SEQ_CST) & m)
            return zs_double(sp, h, r, p, op, " (freed by another thread, not collected yet)");
        if (HK__UNLIKELY(!(__atomic_load_n(&r->rpend, __ATOMIC_SEQ_CST) & ZS_RQUEUED)))
            zs_requeue(r, rw, m, owner);
    } else {
        /* in flight until the run is queued: its owner keeps the run
         * meanwhile (zs_run_quiet) */
        __atomic_fetch_add(&r->rpend, 1, __ATOMIC_SEQ_CST);
        if (__atomic_fetch_or(rw, m, __ATOMIC_SEQ_CST) & m) {
            __atomic_fetch_sub(&r->rpend, 1, __ATOMIC_SEQ_CST);
            return zs_double(sp, h, r, p, op, " (freed by another thread, not collected yet)");
        }
        zs_queue(r, owner);
        __atomic_fetch_sub(&r->rpend, 1, __ATOMIC_SEQ_CST);
    }
    /* a heap whose thread is gone has no owner to collect: a freer does,
     * under the lock that adoption takes, once ZS_ORPHAN_BATCH of its frees
     * wait (invariant 8) */
    if (HK__UNLIKELY(__atomic_load_n(&owner->abandoned, __ATOMIC_SEQ_CST)) && sp->lock &&
        __atomic_add_fetch(&owner->orphan_frees, 1, __ATOMIC_SEQ_CST) >= ZS_ORPHAN_BATCH) {
        int lock = !(h && h->locked);
        if (lock) sp->lock(sp->lock_user);
        if (__atomic_load_n(&owner->abandoned, __ATOMIC_RELAXED)) {
            /* the frees counted so far are collected now (later ones may
             * be too: counted, they only bring the next collection nearer) */
            uint64_t n = __atomic_load_n(&owner->orphan_frees, __ATOMIC_SEQ_CST);
            hk__zs_collect(owner);
            __atomic_fetch_sub(&owner->orphan_frees, n, __ATOMIC_SEQ_CST);
        }
        if (lock) sp->unlock(sp->lock_user);
    }
    return HK_OK;
}

size_t hk__zs_usable(const zs_heap *h, zs_run *r, const void *p) {
    uint32_t i = zs_index(r, (uint32_t)(uintptr_t)p & (uint32_t)(ZS_RUN - 1));
    const zs_heap *owner = __atomic_load_n(&r->heap, __ATOMIC_RELAXED);
    if (!owner || i == UINT32_MAX ||
        ((__atomic_load_n(zs_rbits(r) + (i >> 6), __ATOMIC_RELAXED) >> (i & 63u)) & 1u))
        return 0;
    if (zs_maybe_link(r, zs_word(p))) {
        /* free, or a used block whose first word looks like a link: only
         * the owner can search the list; anyone else takes it for free */
        if (owner != h || zs_on_list(r, (const unsigned char *)p)) return 0;
    }
    return r->stride;
}

/* ---- heaps ------------------------------------------------------------------------ */

void hk__zs_heap_init(zs_heap *h, zs_space *sp) {
    memset(h, 0, sizeof *h);
    h->sp = sp;
    h->secret = hk_now_ns() ^ ((uint64_t)(uintptr_t)h * 0x9E3779B97F4A7C15ull);
    h->poll_left = 1;
    h->alloc_base = 1;
    h->tail_left = ZS_TAIL_POLL;
    for (unsigned c = 0; c < ZS_NCLS; c++) hk__zs_set_cur(h, c, &hk__zs_empty_run);
}

/* Collects every run of h with a remote bit, queued or not: the stack is
 * emptied first (its runs unqueued), then every run's bitmap is read. */
static size_t zs_collect_all(zs_heap *h) {
    zs_run *s = __atomic_exchange_n(&h->rstack, NULL, __ATOMIC_SEQ_CST);
    while (s) {
        zs_run *next = s->rnext; /* before the unqueue: a freer may queue s again at once */
        __atomic_fetch_and(&s->rpend, ~ZS_RQUEUED, __ATOMIC_SEQ_CST);
        s = next;
    }
    size_t got = 0;
    for (zs_run *r = h->all; r; r = r->all_next) got += zs_collect_run(h, r);
    return got;
}

/* Gives back every empty run of h (its current ones too) and its spares. */
static size_t zs_release_empty(zs_heap *h) {
    size_t n = 0;
    for (unsigned c = 0; c < ZS_NCLS; c++) {
        zs_run *r = h->cls[c].cur;
        if (r != &hk__zs_empty_run) {
            hk__zs_set_cur(h, c, &hk__zs_empty_run);
            zs_partial_push(&h->cls[c], r);
        }
    }
    for (zs_run *r = h->all, *next; r; r = next) {
        next = r->all_next;
        if (zs_used(r) == 0 && zs_run_quiet(r)) {
            if (r->state == ZS_PARTIAL) zs_partial_unlink(&h->cls[zs_rcls(r)], r);
            zs_run_release(h, r);
            n++;
        }
    }
    n += hk__zs_heap_take_spare(h);
    return n;
}

size_t hk__zs_heap_take_spare(zs_heap *h) {
    size_t n = 0;
    for (unsigned i = 0; i < ZS_SPARES; i++) {
        zs_run *r = __atomic_exchange_n(&h->spare[i], NULL, __ATOMIC_ACQUIRE);
        if (!r) continue;
        hk__zs_granule_give(h->sp, r);
        n++;
    }
    return n;
}

void hk__zs_heap_fork_reset(zs_heap *h) {
    zs_collect_all(h); /* the stack emptied, every bitmap read */
    for (zs_run *r = h->all; r; r = r->all_next) {
        __atomic_store_n(&r->rpend, 0, __ATOMIC_RELAXED);
    }
}

size_t hk__zs_heap_shrink(zs_heap *h) {
    zs_collect_all(h);
    return zs_release_empty(h);
}

size_t hk__zs_heap_fini(zs_heap *h) {
    hk__zs_heap_shrink(h);
    size_t live = 0;
    for (zs_run *r = h->all; r; r = r->all_next) live += zs_used(r);
    return live;
}

size_t hk__zs_heap_free_all(zs_heap *h) {
    zs_collect_all(h);
    size_t n = 0;
    for (zs_run *r = h->all; r; r = r->all_next) {
        n += zs_used(r);
        ZS_USED_SET(r, 0);
    }
    for (unsigned c = 0; c < ZS_NCLS; c++) {
        hk__zs_set_cur(h, c, &hk__zs_empty_run);
        h->cls[c].partial = NULL;
    }
    while (h->all) {
        zs_run *r = h->all;
        zs_run_release(h, r);
    }
    hk__zs_heap_take_spare(h);
    return n;
}

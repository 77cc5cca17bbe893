/*
 * src/zone_threads.h - per-thread heaps of a HK_ZONE_THREADS zone: the data
 * layout and the owner's fast paths (inline, so hk_zone_alloc's slow branch
 * inlines them); slow paths, remote frees, collection, abandonment and
 * adoption are in src/zone_threads.c, whose opening comment gives the
 * protocol and its invariants. docs/zone.md ("Threads") has the picture.
 *
 * In short: each (thread, zone) pair has a heap (zone_heap): its own class
 * table of runs. Only its owner thread touches the table, the runs' free
 * lists, their `used`, `bump` and `state`: with plain loads and stores (and
 * relaxed atomic loads/stores where another thread may read the word), no
 * lock, no read-modify-write. A slot freed by another thread is claimed by
 * a compare-and-swap on its header (used -> remote) and marked in its run's
 * remote bitmap; the run is pushed once on its heap's remote stack; the
 * owner takes the stack on its next refill and turns the marked slots free.
 */
#ifndef HEAPKIT_ZONE_THREADS_H
#define HEAPKIT_ZONE_THREADS_H

#include "zone_runs.h"

/* The calling thread's last (zone id, heap) pair: the heap lookup of the
 * fast paths (one compare). */
typedef struct zone_tl_ent {
    uint64_t zid;
    zone_heap *h;
} zone_tl_ent;
extern _Thread_local zone_tl_ent hk__zone_tl_cur __attribute__((tls_model("initial-exec")));

/* ---- the slot header as one word (atomic access) ------------------------- */

typedef uint64_t zone_word __attribute__((may_alias));
static inline uint64_t zone_hdr_load(const zone_blk *b) {
    return __atomic_load_n((const zone_word *)((const unsigned char *)b + 8), __ATOMIC_RELAXED);
}
static inline void zone_hdr_store(zone_blk *b, uint64_t w) {
    __atomic_store_n((zone_word *)((unsigned char *)b + 8), w, __ATOMIC_RELEASE);
}
static inline uint64_t zone_hdr_make(const zone_blk *b, uint32_t word, unsigned tag, unsigned bits) {
    return (uint64_t)word | ((uint64_t)tag << 32) | ((uint64_t)bits << 40) |
           ((uint64_t)zone_slot_chk(b, word, tag, bits) << 48);
}
static inline unsigned zone_w_bits(uint64_t w) { return (unsigned)(w >> 40) & 0xffu; }
static inline unsigned zone_w_tag(uint64_t w) { return (unsigned)(w >> 32) & 0xffu; }

/* ---- slow paths (zone_threads.c) ------------------------------------------ */

/* The calling thread's heap in z: adopts an abandoned one or makes one.
 * NULL when none can be had (the caller uses the zone's own runs under the
 * lock). */
zone_heap *hk__zone_heap_get(hk_zone *z);
/* Fork hooks (the malloc shim): prepare takes the registry and zone locks;
 * the child abandons every heap but its own thread's. */
void hk__zone_fork_prepare(hk_zone *z);
void hk__zone_fork_parent(hk_zone *z);
void hk__zone_fork_child(hk_zone *z);
/* Refill of class ci of heap h (collection first). */
unsigned char *hk__zone_thr_refill(hk_zone *z, zone_heap *h, unsigned ci, zone_run **out, uint32_t *word);
/* A run of h left full or emptied by an owner free. */
void hk__zone_thr_settle(hk_zone *z, zone_heap *h, zone_run *r);
/* Frees p when it is a used slot seen without the lock (owner or remote
 * path): 1; otherwise 0 and nothing done (the locked path decides). */
int hk__zone_thr_free_fast(hk_zone *z, void *p);
/* Frees used slot b (found by the locked lookup) from any thread: HK_OK,
 * or HK_ERR_DOUBLE_FREE (not reported) when another thread's free won. */
hk_result hk__zone_thr_free_slot(hk_zone *z, zone_blk *b, int locked);
/* realloc of p in place when p is a slot of the calling thread's heap and
 * n fits it: 1; 0 (p is a slot: *old_req set; move it); -1 (not a slot
 * seen without the lock). */
int hk__zone_thr_resize(hk_zone *z, void *p, size_t n, size_t *old_req);
/* Setup at create (lock, registry) and teardown at destroy. 0: refused. */
int hk__zone_thr_init(hk_zone *z);
void hk__zone_thr_fini(hk_zone *z);
/* Lock held, any threads running: takes every heap's spare runs (an atomic
 * exchange each: their owners may be refilling) and gives them back to the
 * core; an abandoned heap is first collected, then its empty current runs
 * go too (hk_zone_trim). O(heaps x classes). */
void hk__zone_thr_trim(hk_zone *z);
/* Lock held, other threads quiescent: collects every heap's remote frees
 * (free_tags and purge call it before touching runs). */
void hk__zone_thr_collect_all(hk_zone *z);
/* The totals of the slot counters over the zone and every heap, less the
 * slots freed remotely and not collected yet (lock held). O(heaps + runs). */
typedef struct zone_sums {
    size_t used_req, slot_bytes;
    uint64_t alloc_count, free_count;
} zone_sums;
void hk__zone_thr_sums(const hk_zone *z, zone_sums *s, int pending);
/* ---- the owner's fast paths ------------------------------------------------- */

/* n <= ZONE_RUN_MAX_REQ bytes from the calling thread's heap; NULL: use the
 * locked path. No lock, no read-modify-write. */
static inline void *zone_thr_alloc(hk_zone *z, size_t n) {
    zone_heap *h = hk__zone_tl_cur.zid == z->zid ? hk__zone_tl_cur.h : hk__zone_heap_get(z);
    if (HK__UNLIKELY(!h)) return NULL;
    unsigned ci = zone_cls_of(n);
    zone_run *r = h->cls[ci].cur;
    unsigned char *u = NULL;
    uint32_t word = 0;
    if (HK__LIKELY(r != NULL)) {
        u = r->free;
        if (HK__LIKELY(u != NULL)) {
            zone_unpoison(u, sizeof(void *));
            r->free = *(unsigned char **)u;
            word = (uint32_t)zone_hdr_load(zone_from_user(u)) & 0x7ffffu;
        } else if (r->bump < r->nslots) {
            u = r->first + (size_t)r->bump * r->stride + ZONE_HDR;
            zone_unpoison(u - ZONE_HDR, ZONE_HDR);
            word = zone_slot_word(r->bump, r->cls, 0);
            __atomic_store_n(&r->bump, r->bump + 1, __ATOMIC_RELAXED);
        }
    }
    if (HK__UNLIKELY(!u)) {
        u = hk__zone_thr_refill(z, h, ci, &r, &word);
        if (!u) return NULL;
    }
    uint32_t slack = r->stride - ZONE_OVERLAP - (uint32_t)n;
    zone_blk *b = zone_from_user(u);
    zone_hdr_store(b, zone_hdr_make(b, word | (slack << 19), HK_TAG_STATIC, ZB_SLOT_USED));
    r->used++;
    zone_unpoison(u, n);
    if (slack > ZONE_OVERLAP) zone_poison(u + n, slack - ZONE_OVERLAP);
    __atomic_store_n(&h->slot_bytes, h->slot_bytes + r->stride, __ATOMIC_RELAXED);
    __atomic_store_n(&h->used_req, h->used_req + n, __ATOMIC_RELAXED);
    __atomic_store_n(&h->alloc_count, h->alloc_count + 1, __ATOMIC_RELAXED);
    return u;
}

/* The owner's decay poll, when its free count reached h->decay_poll_at
 * (zone_threads.c). */
void hk__zone_thr_poll(hk_zone *z, zone_heap *h, uint64_t fc);

/* Frees used slot b (header word w, verified) of run r owned by h, the
 * calling thread's heap. */
static inline void zone_thr_free_owner(hk_zone *z, zone_heap *h, zone_blk *b, zone_run *r, uint64_t w) {
    uint32_t stride = r->stride, word = (uint32_t)w;
    unsigned char *u = zone_user(b);
    zone_hdr_store(b, zone_hdr_make(b, word & 0x7ffffu, 0, ZB_SLOT_FREE));
    zone_unpoison(u, sizeof(void *));
    *(unsigned char **)u = r->free;
    r->free = u;
    zone_poison(u, stride - ZONE_HDR);
    __atomic_store_n(&h->used_req, h->used_req - (stride - ZONE_OVERLAP - (word >> 19)), __ATOMIC_RELAXED);
    __atomic_store_n(&h->slot_bytes, h->slot_bytes - stride, __ATOMIC_RELAXED);
    uint64_t fc = h->free_count + 1;
    __atomic_store_n(&h->free_count, fc, __ATOMIC_RELAXED);
    if (--r->used == 0 || r->state == ZONE_RUN_FULL) hk__zone_thr_settle(z, h, r);
    if (HK__UNLIKELY(fc >= __atomic_load_n(&h->decay_poll_at, __ATOMIC_RELAXED))) hk__zone_thr_poll(z, h, fc);
}

#endif /* HEAPKIT_ZONE_THREADS_H */

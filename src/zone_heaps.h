/*
 * src/zone_heaps.h - per-thread heaps of a HK_ZONE_THREADS zone: the
 * calling thread's heap in one compare (inline), and the slow paths in
 * src/zone_heaps.c (making, adopting and abandoning heaps, thread exit,
 * fork). The heaps themselves are the small-block layer's (zone_small.h):
 * a heap's owner allocates and frees its own blocks with no lock and no
 * atomic read-modify-write; another thread's free of its block sets a bit
 * in the block's run.
 */
#ifndef HEAPKIT_ZONE_HEAPS_H
#define HEAPKIT_ZONE_HEAPS_H

#include "zone_internal.h"

/* The calling thread's last (zone id, heap) pair: h is never NULL while zid
 * is a zone's (both are set and cleared together). */
typedef struct zone_tl_ent {
    uint64_t zid;
    zs_heap *h;
} zone_tl_ent;
extern _Thread_local zone_tl_ent hk__zone_tl_cur __attribute__((tls_model("initial-exec")));

/* The calling thread's heap in the process's main zone (the malloc shim's,
 * named by hk__zone_set_main), or &hk__zs_none_heap while it has none:
 * the shim's inline paths read it with no test of the zone. */
extern _Thread_local zs_heap *hk__zone_tl_main __attribute__((tls_model("initial-exec")));
/* Names threads zone z the main zone (at most one per process, never
 * destroyed while threads may use it; the shim's zone, at its creation). */
void hk__zone_set_main(hk_zone *z);

/* The calling thread's heap in threads zone z when it is the one it used
 * last, else NULL (hk__zone_heap_get then finds, adopts or makes one). */
static inline zs_heap *zone_tl_heap(const hk_zone *z) {
    return hk__zone_tl_cur.zid == z->zid ? hk__zone_tl_cur.h : NULL;
}

/* The calling thread's heap in z: its own, an abandoned one it adopts, or a
 * new one. NULL when none can be had (the thread uses the zone's own heap
 * under the lock). Lock not held. */
zs_heap *hk__zone_heap_get(hk_zone *z);
/* The calling thread's heap in z if it has one (no adoption, no making). */
zs_heap *hk__zone_heap_find(const hk_zone *z);

/* Every heap of z: its own first, then the threads' (lock held). */
static inline zs_heap *zone_heap_first(hk_zone *z) { return &z->own; }
static inline zs_heap *zone_heap_next(hk_zone *z, const zs_heap *h) {
    return h == &z->own ? z->heaps : h->next;
}

/* Setup at create (registry: 0 when it is full, and the zone stays
 * locked) and teardown at destroy (the heaps' memory). */
int hk__zone_thr_init(hk_zone *z);
void hk__zone_thr_fini(hk_zone *z);
/* Lock held: collects and shrinks every abandoned heap (hk_zone_trim,
 * before check and stats' exactness). */
void hk__zone_thr_tidy(hk_zone *z);
/* Fork hooks (the malloc shim): prepare takes the registry and zone locks;
 * the child abandons every heap but its own thread's. */
void hk__zone_fork_prepare(hk_zone *z);
void hk__zone_fork_parent(hk_zone *z);
void hk__zone_fork_child(hk_zone *z);

#endif /* HEAPKIT_ZONE_HEAPS_H */

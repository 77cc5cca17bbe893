/*
 * src/zone_heaps.c - per-thread heaps of a HK_ZONE_THREADS zone: finding
 * the calling thread's heap, making one, adopting an abandoned one,
 * abandoning a thread's heaps at its exit, and fork. Calls down into
 * zone_small.c only; zone.c calls it.
 *
 * Invariants (verified by hk_zone_check while no other thread is inside a
 * zone call):
 *  - z->heaps lists every heap made for z (live or abandoned); a heap is
 *    freed only by hk_zone_destroy. A thread's cache entry names the zone by
 *    zid, which is never reused, so a destroyed zone's entry never matches.
 *  - a heap has at most one owner thread: the one whose cache entry names
 *    it; an abandoned heap (its thread gone) has none, is touched only with
 *    the zone's lock held (its reports then take no lock: `locked`), and is
 *    adopted whole, runs and all, by the next thread that needs a heap.
 *  - a thread's exit abandons its heaps while their zones are registered
 *    (destroy unregisters first), collecting their remote frees and giving
 *    their empty runs back.
 */
#include "zone_heaps.h"

_Thread_local zone_tl_ent hk__zone_tl_cur __attribute__((tls_model("initial-exec")));
_Thread_local zs_heap *hk__zone_tl_main __attribute__((tls_model("initial-exec"))) = &hk__zs_none_heap;
static hk_zone *zone_main;

void hk__zone_set_main(hk_zone *z) { __atomic_store_n(&zone_main, z, __ATOMIC_RELEASE); }

/* Makes e the calling thread's cache entry (and its main heap when e is
 * the main zone's). */
static void zone_tl_set(const hk_zone *z, zone_tl_ent e) {
    hk__zone_tl_cur = e;
    if (z == __atomic_load_n(&zone_main, __ATOMIC_ACQUIRE)) hk__zone_tl_main = e.h;
}

/* The zones a thread holds heaps in (checked against the registry at exit). */
#define ZONE_TL_HELD 8u
static _Thread_local zone_tl_ent zone_tl_held[ZONE_TL_HELD] __attribute__((tls_model("initial-exec")));

/* Registry of live threads zones: a thread's exit touches a heap only while
 * its zone is registered. A spin lock: taken at zone create/destroy, heap
 * creation and thread exit only. */
#define ZONE_REG_MAX 256u
static struct {
    uint64_t zid;
    hk_zone *z;
} zone_reg[ZONE_REG_MAX];
static int zone_reg_lock_word;
static uint64_t zone_next_zid = 1;

static void zone_reg_lock(void) {
    while (__atomic_exchange_n(&zone_reg_lock_word, 1, __ATOMIC_ACQUIRE))
        while (__atomic_load_n(&zone_reg_lock_word, __ATOMIC_RELAXED)) {
        }
}
static void zone_reg_unlock(void) { __atomic_store_n(&zone_reg_lock_word, 0, __ATOMIC_RELEASE); }

static hk_zone *zone_reg_find(uint64_t zid) {
    for (unsigned i = 0; i < ZONE_REG_MAX; i++)
        if (zone_reg[i].zid == zid) return zone_reg[i].z;
    return NULL;
}

/* Abandons heap h, whose thread is gone (lock held): marked, its remote
 * frees collected, its empty runs given back. */
static void zone_heap_abandon(zs_heap *h) {
    h->locked = 1;
    /* counted from zero, marked before the collection (zone_small.c,
     * invariant 8) */
    __atomic_store_n(&h->orphan_frees, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&h->abandoned, 1, __ATOMIC_SEQ_CST);
    hk__zs_heap_shrink(h);
}

/* Abandons every heap the exiting thread holds (registered zones only). */
static void zone_thread_exit(void) {
    zone_reg_lock();
    for (unsigned i = 0; i < ZONE_TL_HELD; i++) {
        zone_tl_ent *e = &zone_tl_held[i];
        if (!e->h) continue;
        hk_zone *z = zone_reg_find(e->zid);
        if (z) {
            hk__core_lock(&z->core);
            zone_heap_abandon(e->h);
            hk__core_unlock(&z->core);
        }
        e->zid = 0;
        e->h = NULL;
    }
    hk__zone_tl_cur.zid = 0;
    hk__zone_tl_cur.h = NULL;
    hk__zone_tl_main = &hk__zs_none_heap;
    zone_reg_unlock();
}

zs_heap *hk__zone_heap_find(const hk_zone *z) {
    if (hk__zone_tl_cur.zid == z->zid) return hk__zone_tl_cur.h;
    for (unsigned i = 0; i < ZONE_TL_HELD; i++)
        if (zone_tl_held[i].zid == z->zid) {
            zone_tl_set(z, zone_tl_held[i]);
            return zone_tl_held[i].h;
        }
    return NULL;
}

HK__NOINLINE zs_heap *hk__zone_heap_get(hk_zone *z) {
    zs_heap *h = hk__zone_heap_find(z);
    if (h) return h;
    /* a free entry, or one whose zone is gone */
    zone_tl_ent *slot = NULL;
    zone_reg_lock();
    for (unsigned i = 0; i < ZONE_TL_HELD && !slot; i++)
        if (!zone_tl_held[i].h || !zone_reg_find(zone_tl_held[i].zid)) slot = &zone_tl_held[i];
    zone_reg_unlock();
    if (!slot || hk_os_on_thread_exit(zone_thread_exit) != HK_OK) return NULL;
    hk__core_lock(&z->core);
    for (h = z->heaps; h && !__atomic_load_n(&h->abandoned, __ATOMIC_RELAXED); h = h->next) {
    }
    if (h) {
        h->locked = 0; /* adopted, runs and all */
        __atomic_store_n(&h->abandoned, 0, __ATOMIC_RELAXED);
    } else {
        size_t size = (sizeof(zs_heap) + hk_os_page_size() - 1) & ~(hk_os_page_size() - 1);
        h = (zs_heap *)hk_os_alloc(size);
        if (h) {
            hk__zs_heap_init(h, &z->small);
            h->os_size = size;
            h->next = z->heaps;
            z->heaps = h;
        }
    }
    hk__core_unlock(&z->core);
    if (!h) return NULL;
    slot->zid = z->zid;
    slot->h = h;
    zone_tl_set(z, *slot);
    return h;
}

int hk__zone_thr_init(hk_zone *z) {
    zone_reg_lock();
    unsigned i = 0;
    while (i < ZONE_REG_MAX && zone_reg[i].zid) i++;
    if (i == ZONE_REG_MAX) {
        zone_reg_unlock();
        return 0;
    }
    z->zid = zone_next_zid++;
    zone_reg[i].zid = z->zid;
    zone_reg[i].z = z;
    zone_reg_unlock();
    return 1;
}

void hk__zone_thr_fini(hk_zone *z) {
    zone_reg_lock();
    for (unsigned i = 0; i < ZONE_REG_MAX; i++)
        if (zone_reg[i].zid == z->zid) {
            zone_reg[i].zid = 0;
            zone_reg[i].z = NULL;
        }
    zone_reg_unlock();
    if (hk__zone_tl_cur.zid == z->zid) hk__zone_tl_cur.h = NULL, hk__zone_tl_cur.zid = 0;
    if (z == __atomic_load_n(&zone_main, __ATOMIC_ACQUIRE)) {
        hk__zone_tl_main = &hk__zs_none_heap;
        __atomic_store_n(&zone_main, NULL, __ATOMIC_RELEASE);
    }
    for (unsigned i = 0; i < ZONE_TL_HELD; i++)
        if (zone_tl_held[i].zid == z->zid) zone_tl_held[i].zid = 0, zone_tl_held[i].h = NULL;
    zs_heap *h = z->heaps;
    z->heaps = NULL;
    while (h) {
        zs_heap *n = h->next;
        hk_os_release(h, h->os_size);
        h = n;
    }
}

void hk__zone_thr_tidy(hk_zone *z) {
    for (zs_heap *h = z->heaps; h; h = h->next)
        if (__atomic_load_n(&h->abandoned, __ATOMIC_RELAXED)) hk__zs_heap_shrink(h);
}

/* ---- fork ------------------------------------------------------------------------ */

/* The registry, the zone's lock and its small-block space's lock are held
 * across fork, so that the child inherits none of them in the middle of an
 * operation (a granule taken or given back by another thread). */
void hk__zone_fork_prepare(hk_zone *z) {
    zone_reg_lock();
    hk__core_lock(&z->core);
    if (z->small_on) hk_os_mutex_lock(&z->small.mx);
}
void hk__zone_fork_parent(hk_zone *z) {
    if (z->small_on) hk_os_mutex_unlock(&z->small.mx);
    hk__core_unlock(&z->core);
    zone_reg_unlock();
}
void hk__zone_fork_child(hk_zone *z) {
    /* the child's one thread keeps its heap; the others' threads are gone */
    if (z->small_on) hk_os_mutex_unlock(&z->small.mx); /* the abandonments give granules back */
    zs_heap *mine = z->threads ? hk__zone_heap_find(z) : NULL;
    /* a remote free cut short by the fork (its thread is not in the
     * child) leaves an in-flight count or a half-done queueing behind */
    for (zs_heap *h = z->heaps; h; h = h->next) {
        int was = h->locked;
        h->locked = 1; /* the zone's lock is held: a report must not take it */
        hk__zs_heap_fork_reset(h);
        h->locked = was;
    }
    for (zs_heap *h = z->heaps; h; h = h->next)
        if (h != mine && !__atomic_load_n(&h->abandoned, __ATOMIC_RELAXED)) zone_heap_abandon(h);
    hk__core_unlock(&z->core);
    zone_reg_unlock();
}

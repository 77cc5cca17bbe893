/* tests/zone_thr_test_util.h - what the tests of a HK_ZONE_THREADS zone
 * share (test_zone_threads.c, test_zone_thread_misuse.c,
 * test_zone_tagged_slots.c, test_zone_remote.c, test_zone_cache.c): a
 * growing threads zone whose reports are counted quietly (from the calling
 * thread, or from any thread by kind), its statistics, the end of a test
 * that freed everything, and a block's header and run with the pointer's
 * provenance hidden. */
#ifndef HK_ZONE_THR_TEST_UTIL_H
#define HK_ZONE_THR_TEST_UTIL_H

#include "heapkit/zone.h"
#include "hk_test.h"
#include "internal.h"
#include "zone_threads.h"

#include <string.h>

/* A growing threads zone (1 MiB, then 1 MiB more at a time) reporting to
 * fn(user) only. */
__attribute__((unused)) static hk_zone *mk_thr_reporting(hk_error_fn fn, void *user) {
    return hk_zone_create(&(hk_zone_desc){.size = 1 << 20,
                                          .grow_size = 1 << 20,
                                          .flags = HK_ZONE_THREADS | HK_FLAG_QUIET,
                                          .name = "thr",
                                          .on_error = fn,
                                          .error_user = user});
}

__attribute__((unused)) static hk_zone *mk_thr(hkt_errors *e) {
    memset(e, 0, sizeof *e);
    e->quiet = 1;
    return mk_thr_reporting(hkt_on_error, e);
}

/* Reports counted from any thread, by kind (the zone reports under its
 * lock; the counts are atomic as the reporting threads differ). */
typedef struct {
    int count, double_free, foreign, interior;
} trep;
__attribute__((unused)) static void trep_on_error(const hk_error *e, void *user) {
    trep *r = (trep *)user;
    __atomic_fetch_add(&r->count, 1, __ATOMIC_RELAXED);
    if (e->kind == HK_EK_DOUBLE_FREE) __atomic_fetch_add(&r->double_free, 1, __ATOMIC_RELAXED);
    if (e->kind == HK_EK_FOREIGN_PTR) __atomic_fetch_add(&r->foreign, 1, __ATOMIC_RELAXED);
    if (e->kind == HK_EK_INTERIOR_PTR) __atomic_fetch_add(&r->interior, 1, __ATOMIC_RELAXED);
}

/* The zone of mk_thr, its reports counted in *r. */
__attribute__((unused)) static hk_zone *mk_thr_counting(trep *r) {
    memset(r, 0, sizeof *r);
    return mk_thr_reporting(trep_on_error, r);
}

__attribute__((unused)) static hk_stats stats_of(hk_zone *z) {
    hk_stats s;
    hk_zone_stats(z, &s);
    return s;
}

__attribute__((unused)) static size_t live_of(hk_zone *z) { return stats_of(z).live_blocks; }

/* The end of a test that freed everything: no live block, nothing
 * asked, no report, a clean check; the zone destroyed. */
__attribute__((unused)) static void thr_end_empty(hk_zone *z, const hkt_errors *e) {
    hk_stats s = stats_of(z);
    CHECK_EQ(s.live_blocks, 0);
    CHECK_EQ(s.used, 0);
    CHECK_EQ(e->count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* The header of the block at p (the header lies before the object the
 * compiler knows of: p's provenance is hidden, see raw() in test_zone.c). */
__attribute__((unused)) static zone_blk *hdr_of(void *p) {
    __asm__ volatile("" : "+r"(p));
    return zone_from_user(p);
}

/* The run of slot p (provenance hidden as for hdr_of). */
__attribute__((unused)) static zone_run *run_of(void *p) { return zone_run_of_slot(hdr_of(p)); }

#endif

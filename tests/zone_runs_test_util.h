/* tests/zone_runs_test_util.h - what the tests of the zone's small-block
 * runs share (test_zone_runs.c, test_zone_runs_zones.c; test_zone_threads.c
 * and test_zone_cache.c for the last helpers): a zone on caller memory, a random stream, byte
 * patterns, the end-of-test check, the dump as a string and its run count,
 * a full run followed by a second one whose carved batch is used up, and
 * frees from another thread. */
#ifndef HK_ZONE_RUNS_TEST_UTIL_H
#define HK_ZONE_RUNS_TEST_UTIL_H

#include "heapkit/zone.h"
#include "hk_test.h"
#include "zone_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* p with its provenance hidden (see raw() in test_zone.c). */
__attribute__((unused)) static unsigned char *raw(void *p) {
    __asm__ volatile("" : "+r"(p));
    return (unsigned char *)p;
}

__attribute__((unused)) static unsigned char g_mem[4 << 20] __attribute__((aligned(64)));

__attribute__((unused)) static hk_zone *mk_in(hkt_errors *errs, void *mem, size_t size, uint32_t flags) {
    hkt_errors_reset(errs);
    memset(mem, 0, size); /* no stale headers from an earlier test */
    return hk_zone_create(&(hk_zone_desc){.memory = mem,
                                          .size = size,
                                          .flags = flags,
                                          .name = "runs",
                                          .on_error = hkt_on_error,
                                          .error_user = errs});
}
__attribute__((unused)) static hk_zone *mk(hkt_errors *errs, uint32_t flags) {
    return mk_in(errs, g_mem, sizeof g_mem, flags);
}

__attribute__((unused)) static uint64_t g_rng;
__attribute__((unused)) static uint32_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng >> 16);
}

__attribute__((unused)) static size_t stride_of(size_t n) { return zone_cls_stride(zone_cls_of(n)); }
__attribute__((unused)) static unsigned char pat(size_t i, size_t k) {
    return (unsigned char)(i * 31u + k * 7u + 1u);
}

__attribute__((unused)) static int bytes_are(const unsigned char *p, size_t n, size_t from) {
    for (size_t k = 0; k < n; k++)
        if (p[k] != pat(from, k)) return 0;
    return 1;
}

/* The zone holds nothing, nothing was reported, check passes; destroys it. */
__attribute__((unused)) static void end_empty(hk_zone *z, const hkt_errors *errs) {
    hk_stats st;
    hk_zone_stats(z, &st);
    CHECK_EQ(st.used, 0);
    CHECK_EQ(st.live_blocks, 0);
    CHECK_EQ(errs->count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* The dump as a string (free it); *runs gets the number of "run of" lines. */
__attribute__((unused)) static char *dump_str(hk_zone *z, size_t *runs) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return NULL;
    hk_zone_dump(z, hk_print_file, f);
    fclose(f);
    if (runs) {
        *runs = 0;
        for (const char *s = buf; (s = strstr(s, "run of")) != NULL; s++) (*runs)++;
    }
    return buf;
}
__attribute__((unused)) static size_t count_runs(hk_zone *z) {
    size_t n = 0;
    free(dump_str(z, &n));
    return n;
}

/* Two runs of the class of ZT_SZ-byte slots laid out by
 * zt_full_run_then_next: the first (r1) filled to its last slot
 * (c[0..ns-1]), the second (r2) with one slot (c[ns]) and its carved batch
 * used up (e[0..ne-1]), so that its only free slots are untouched ones
 * (carved2: its carved count then). */
enum { ZT_SZ = 6000, ZT_MAXB = 64 };
typedef struct zt_two_runs {
    void *c[ZT_MAXB + 1], *e[ZT_MAXB];
    unsigned ns, ne;
    zone_run *r1, *r2;
    uint32_t carved2;
} zt_two_runs;

/* Lays out t in z; 0 when a request fails or the runs are not laid out so. */
__attribute__((unused)) static int zt_full_run_then_next(hk_zone *z, zt_two_runs *t) {
    if (!(t->c[0] = hk_zone_alloc(z, ZT_SZ))) return 0;
    t->r1 = zone_run_of_slot(zone_from_user(raw(t->c[0])));
    t->ns = t->r1->nslots;
    if (t->ns < 2 || t->ns > ZT_MAXB) return 0;
    for (unsigned i = 1; i <= t->ns; i++)
        if (!(t->c[i] = hk_zone_alloc(z, ZT_SZ))) return 0;
    t->r2 = zone_run_of_slot(zone_from_user(raw(t->c[t->ns])));
    if (t->r2 == t->r1) return 0;
    t->ne = 0;
    while (t->r2->free && t->ne < ZT_MAXB)
        if (!(t->e[t->ne++] = hk_zone_alloc(z, ZT_SZ))) return 0;
    if (t->r2->free || t->r2->bump >= t->r2->nslots) return 0;
    t->carved2 = t->r2->bump;
    return 1;
}

/* After zt_full_run_then_next and the first ns - 1 slots of c freed (by
 * any thread): the next allocation comes from the first run r1 and the
 * second run r2 carves nothing more: r2 is then in state `r2_state` (set
 * aside on the partial list when r1 became the current run; still the
 * current run when a threads zone's cache served the slot); then that
 * block and the rest of c and e are freed. */
__attribute__((unused)) static void zt_older_run_serves_next(hk_zone *z, const zt_two_runs *t,
                                                             unsigned r2_state) {
    void *d = hk_zone_alloc(z, ZT_SZ);
    REQUIRE(d != NULL);
    CHECK(zone_run_of_slot(zone_from_user(raw(d))) == t->r1);
    CHECK_EQ(t->r2->bump, t->carved2);
    CHECK_EQ(t->r2->state, r2_state);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, d), HK_OK);
    for (unsigned i = t->ns - 1; i <= t->ns; i++) CHECK_EQ(hk_zone_free(z, t->c[i]), HK_OK);
    for (unsigned i = 0; i < t->ne; i++) CHECK_EQ(hk_zone_free(z, t->e[i]), HK_OK);
}

typedef struct {
    hk_zone *z;
    void **p;
    int n, fails;
} freer_arg;

__attribute__((unused)) static void *free_n(void *arg) {
    freer_arg *f = (freer_arg *)arg;
    for (int i = 0; i < f->n; i++)
        if (hk_zone_free(f->z, f->p[i]) != HK_OK) f->fails++;
    return NULL;
}

/* Frees p[0..n-1] from a thread of its own (its exit hands its batches to
 * the owners): the number of frees that did not return HK_OK, or -1 when
 * no thread could be made. */
__attribute__((unused)) static int remote_free_n(hk_zone *z, void **p, int n) {
    freer_arg f = {z, p, n, 0};
    pthread_t t;
    if (pthread_create(&t, NULL, free_n, &f) != 0) return -1;
    pthread_join(t, NULL);
    return f.fails;
}

#endif /* HK_ZONE_RUNS_TEST_UTIL_H */

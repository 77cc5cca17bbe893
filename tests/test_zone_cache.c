/* Zone with HK_ZONE_THREADS: the heap's cache of the slots its owner
 * freed (src/zone_runs.h, zone_heap): the next allocation of the class
 * takes the newest, the statistics count them free, a free finding its
 * list full goes to its run, the last used slot of a run goes
 * to the run, slots other threads freed come back through it, a double
 * free of a cached slot is reported (from the owner and from another
 * thread), the cache goes back to the runs when its
 * thread exits, when the thread trims and before free_tags, and check
 * verifies it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "zone_runs_test_util.h"
#include "zone_thr_test_util.h"

#include <pthread.h>

/* The calling thread's heap (it has one once it allocated). */
static zone_heap *my_heap(hk_zone *z) {
    REQUIRE(hk__zone_tl_cur.zid == z->zid);
    return hk__zone_tl_cur.h;
}

HKT_TEST(serves_the_class_lifo) {
    hkt_errors e;
    hk_zone *z = mk_thr(&e);
    REQUIRE(z != NULL);
    void *a = hk_zone_alloc(z, 100), *b = hk_zone_alloc(z, 100), *keep = hk_zone_alloc(z, 100);
    REQUIRE(a && b && keep);
    unsigned ci = zone_cls_of(100);
    REQUIRE(zone_cls_of(104) == ci);
    zone_heap *h = my_heap(z);
    zone_run *r = run_of(a);
    uint32_t used = r->used;
    CHECK_EQ(hk_zone_free(z, a), HK_OK);
    CHECK_EQ(hk_zone_free(z, b), HK_OK);
    CHECK_EQ(h->ncache[ci], 2);
    CHECK_EQ(r->used, used); /* the run still counts them */
    hk_stats s = stats_of(z);
    CHECK_EQ(s.live_blocks, 1);
    CHECK_EQ(s.used, 100);
    CHECK_EQ(s.used_blocks_bytes, zone_cls_stride(ci));
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* the newest first, for any size of the class */
    CHECK(hk_zone_alloc(z, 104) == b);
    CHECK(hk_zone_alloc(z, 100) == a);
    CHECK_EQ(h->ncache[ci], 0);
    s = stats_of(z);
    CHECK_EQ(s.live_blocks, 3);
    CHECK_EQ(s.used, 304);
    CHECK_EQ(hk_zone_usable_size(z, b), zone_cls_stride(ci) - 8);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, a), HK_OK);
    CHECK_EQ(hk_zone_free(z, b), HK_OK);
    CHECK_EQ(hk_zone_free(z, keep), HK_OK);
    thr_end_empty(z, &e);
}

/* 1 KiB slots: a list holds at most zone_cache_max_tab[class] (64) of
 * them; a free that finds it full puts its slot on the slot's run (each
 * slot of a burst of frees handled once), and the list keeps the slots
 * it holds. */
HKT_TEST(full_list_sends_frees_to_their_runs) {
    hkt_errors e;
    hk_zone *z = mk_thr(&e);
    REQUIRE(z != NULL);
    enum { N = 300 };
    static void *p[N];
    for (int i = 0; i < N; i++) REQUIRE((p[i] = hk_zone_alloc(z, 1000)) != NULL);
    unsigned ci = zone_cls_of(1000);
    unsigned max = zone_cache_max_tab[ci];
    REQUIRE(max == 64);
    zone_heap *h = my_heap(z);
    unsigned most = 0, to_runs = 0;
    unsigned char *head = NULL;
    for (int i = 0; i < N; i++) {
        zone_run *r = run_of(p[i]);
        uint32_t used = r->used;
        CHECK_EQ(hk_zone_free(z, p[i]), HK_OK);
        unsigned nc = h->ncache[ci];
        if (nc > most) most = nc;
        if (i + 1 == (int)max) head = h->cache[ci];
        if (i >= (int)max) {
            /* the list full: the slot went to its run, the list is as it was */
            CHECK_EQ(nc, max);
            CHECK(h->cache[ci] == head);
            if (used > 1)
                to_runs += r->used == used - 1;
            else
                to_runs++; /* its run's last slot: the run was settled (not read: it may be gone) */
        }
    }
    CHECK_EQ(most, max);
    CHECK_EQ(to_runs, N - max);
    CHECK_EQ(live_of(z), 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK(hk_zone_alloc(z, 1000) == head); /* the next allocation takes the list's head */
    CHECK_EQ(hk_zone_free(z, head), HK_OK);
    thr_end_empty(z, &e);
}

/* A run's last used slot goes onto the run (settled: kept as the spare),
 * not into the cache, so a run its owner empties goes back as before. */
HKT_TEST(last_used_slot_of_a_run_goes_to_the_run) {
    hkt_errors e;
    hk_zone *z = mk_thr(&e);
    REQUIRE(z != NULL);
    static zt_two_runs t;
    REQUIRE(zt_full_run_then_next(z, &t));
    zone_run *r = t.r1;
    unsigned ns = t.ns, ci = zone_cls_of(ZT_SZ);
    zone_heap *h = my_heap(z);
    for (unsigned i = 1; i < ns; i++) CHECK_EQ(hk_zone_free(z, t.c[i]), HK_OK);
    CHECK_EQ(h->ncache[ci], ns - 1);
    hk_zone_trim(z); /* the calling thread's cache goes back to the runs */
    CHECK_EQ(h->ncache[ci], 0);
    CHECK_EQ(r->used, 1);
    CHECK_EQ(r->state, ZONE_RUN_PARTIAL);
    CHECK_EQ(hk_zone_free(z, t.c[0]), HK_OK);
    CHECK_EQ(h->ncache[ci], 0);
    CHECK(h->cls[ci].spare == r);
    CHECK_EQ(r->used, 0);
    CHECK_EQ(hk_zone_free(z, t.c[ns]), HK_OK);
    for (unsigned i = 0; i < t.ne; i++) CHECK_EQ(hk_zone_free(z, t.e[i]), HK_OK);
    thr_end_empty(z, &e);
}

typedef struct {
    hk_zone *z;
    void *p;
    hk_result res;
    int n;
} other_arg;

static void *free_from_other(void *arg) {
    other_arg *a = (other_arg *)arg;
    a->res = hk_zone_free(a->z, a->p);
    return NULL;
}

HKT_TEST(double_free_reported_from_owner_and_other_thread) {
    hkt_errors e;
    hk_zone *z = mk_thr(&e);
    REQUIRE(z != NULL);
    void *a = hk_zone_alloc(z, 200), *b = hk_zone_alloc(z, 200);
    REQUIRE(a && b);
    CHECK_EQ(hk_zone_free(z, a), HK_OK); /* into the cache */
    CHECK_EQ(hk_zone_free(z, a), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(e.count, 1);
    CHECK_EQ(e.last_kind, HK_EK_DOUBLE_FREE);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    other_arg o = {z, a, HK_OK, 0};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, free_from_other, &o) == 0);
    pthread_join(t, NULL);
    CHECK_EQ(o.res, HK_ERR_DOUBLE_FREE);
    CHECK_EQ(e.count, 2);
    CHECK_EQ(e.last_kind, HK_EK_DOUBLE_FREE);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK(hk_zone_alloc(z, 200) == a); /* still cached once, still good */
    CHECK_EQ(hk_zone_free(z, a), HK_OK);
    CHECK_EQ(hk_zone_free(z, b), HK_OK);
    CHECK_EQ(live_of(z), 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

static void *alloc_free_and_exit(void *arg) {
    other_arg *a = (other_arg *)arg;
    void *p[40];
    for (int i = 0; i < 40; i++) p[i] = hk_zone_alloc(a->z, 16 + (size_t)i * 24);
    for (int i = 0; i < 40; i++)
        if (!p[i] || hk_zone_free(a->z, p[i]) != HK_OK) a->res = HK_ERR_INVALID;
    a->p = hk__zone_tl_cur.h;
    for (unsigned ci = 0; ci < ZONE_NCLS; ci++) a->n += (int)hk__zone_tl_cur.h->ncache[ci];
    return NULL;
}

HKT_TEST(goes_back_to_the_runs_when_its_thread_exits) {
    hkt_errors e;
    hk_zone *z = mk_thr(&e);
    REQUIRE(z != NULL);
    other_arg o = {z, NULL, HK_OK, 0};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, alloc_free_and_exit, &o) == 0);
    pthread_join(t, NULL);
    CHECK_EQ(o.res, HK_OK);
    CHECK(o.n > 0); /* the thread had cached slots */
    const zone_heap *h = (const zone_heap *)o.p;
    REQUIRE(h != NULL && h->abandoned);
    unsigned left = 0;
    for (unsigned ci = 0; ci < ZONE_NCLS; ci++) left += h->ncache[ci] + (h->cache[ci] != NULL);
    CHECK_EQ(left, 0);
    thr_end_empty(z, &e);
}

/* Slots another thread freed come back through the owner's cache when it
 * collects them: the class's next allocations take them, whatever run
 * they are in, before the current run carves a fresh slot (a producer
 * whose blocks consumers free keeps its footprint). */
HKT_TEST(collected_remote_frees_go_to_the_cache) {
    hkt_errors e;
    hk_zone *z = mk_thr(&e);
    REQUIRE(z != NULL);
    static zt_two_runs t; /* r1 full, r2 current with no freed or carved slot left */
    REQUIRE(zt_full_run_then_next(z, &t));
    unsigned ns = t.ns, ci = zone_cls_of(ZT_SZ);
    REQUIRE(ns >= 3 && ns - 1 <= zone_cache_max_tab[ci]);
    zone_heap *h = my_heap(z);
    CHECK_EQ(remote_free_n(z, t.c + 1, (int)ns - 1), 0); /* r1 keeps c[0] */
    CHECK_EQ(h->ncache[ci], 0);                          /* in the inbox until collected */
    void *back[ZT_MAXB];
    for (unsigned i = 0; i + 1 < ns; i++) {
        REQUIRE((back[i] = hk_zone_alloc(z, ZT_SZ)) != NULL); /* the first collects */
        CHECK(run_of(back[i]) == t.r1);
        CHECK_EQ(h->ncache[ci], ns - 2 - i);
    }
    CHECK_EQ(t.r2->bump, t.carved2); /* nothing fresh while freed slots waited */
    CHECK_EQ(t.r1->used, ns);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    for (unsigned i = 0; i + 1 < ns; i++) CHECK_EQ(hk_zone_free(z, back[i]), HK_OK);
    for (unsigned i = 0; i < t.ne; i++) CHECK_EQ(hk_zone_free(z, t.e[i]), HK_OK);
    CHECK_EQ(hk_zone_free(z, t.c[0]), HK_OK);
    CHECK_EQ(hk_zone_free(z, t.c[ns]), HK_OK);
    thr_end_empty(z, &e);
}

/* A collection fills the cache only up to its limit (64 slots of 1 KiB);
 * the other slots go to their runs' free lists. */
HKT_TEST(collection_fills_the_cache_up_to_its_limit) {
    hkt_errors e;
    hk_zone *z = mk_thr(&e);
    REQUIRE(z != NULL);
    enum { N = 100, SZ = 1000, MAXK = N + 64 };
    static void *p[MAXK];
    for (int i = 0; i < N; i++) REQUIRE((p[i] = hk_zone_alloc(z, SZ)) != NULL);
    unsigned ci = zone_cls_of(SZ), max = zone_cache_max_tab[ci];
    REQUIRE(max == 64);
    zone_heap *h = my_heap(z);
    zone_cls *c = &h->cls[ci];
    /* the current run's carved slots used up: the next allocation collects */
    int k = N;
    while (c->cur->free && k < MAXK) REQUIRE((p[k++] = hk_zone_alloc(z, SZ)) != NULL);
    REQUIRE(!c->cur->free);
    CHECK_EQ(remote_free_n(z, p, N), 0);
    void *d = hk_zone_alloc(z, SZ);
    REQUIRE(d != NULL);
    CHECK_EQ(h->ncache[ci], max - 1); /* filled to the limit, then one taken */
    /* the rest are on the free lists of the current run, the partial runs
     * and the spare (a run all of whose slots went back to it) */
    unsigned on_runs = 0;
    for (const zone_run *r = c->cur; r; r = r == c->cur ? c->partial : r->next)
        for (unsigned char *u = r->free; u; u = zone_free_next(u)) on_runs++;
    if (c->spare)
        for (unsigned char *u = c->spare->free; u; u = zone_free_next(u)) on_runs++;
    CHECK_EQ(on_runs, N - max);
    CHECK_EQ(live_of(z), (size_t)(k - N) + 1);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, d), HK_OK);
    for (int i = N; i < k; i++) CHECK_EQ(hk_zone_free(z, p[i]), HK_OK);
    thr_end_empty(z, &e);
}

/* free_tags over a range holding HK_TAG_STATIC frees whole runs of
 * untracked slots: the cached ones go back to their runs first (a run
 * given back with a slot still in a cache left the cache pointing into
 * freed memory). */
HKT_TEST(emptied_before_free_tags_frees_static_runs) {
    hkt_errors e;
    hk_zone *z = mk_thr(&e);
    REQUIRE(z != NULL);
    enum { N = 50 };
    void *p[N];
    for (int i = 0; i < N; i++) REQUIRE((p[i] = hk_zone_alloc(z, 48)) != NULL);
    for (int i = 0; i < N; i += 2) CHECK_EQ(hk_zone_free(z, p[i]), HK_OK);
    CHECK(my_heap(z)->ncache[zone_cls_of(48)] > 0);
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_STATIC, HK_ZONE_TAG_MAX), (size_t)N / 2);
    CHECK_EQ(my_heap(z)->ncache[zone_cls_of(48)], 0);
    CHECK_EQ(live_of(z), 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    for (int i = 0; i < N; i++) REQUIRE((p[i] = hk_zone_alloc(z, 48)) != NULL);
    for (int i = 0; i < N; i++) CHECK_EQ(hk_zone_free(z, p[i]), HK_OK);
    thr_end_empty(z, &e);
}

/* A write after free into a cached slot's link, and a list count that
 * is off, are reported by check; put back, the zone checks clean. */
HKT_TEST(check_reports_a_damaged_list) {
    hkt_errors e;
    hk_zone *z = mk_thr(&e);
    REQUIRE(z != NULL);
    void *a = hk_zone_alloc(z, 64), *b = hk_zone_alloc(z, 64);
    REQUIRE(a && b);
    CHECK_EQ(hk_zone_free(z, a), HK_OK);
    CHECK_EQ(hk_zone_free(z, b), HK_OK);
    unsigned ci = zone_cls_of(64);
    zone_heap *h = my_heap(z);
    REQUIRE(h->cache[ci] == (unsigned char *)b);
    unsigned char **link = (unsigned char **)(void *)((unsigned char *)hdr_of(b) + ZONE_HDR);
    zone_unpoison(link, sizeof *link); /* ASan builds: a cached slot is poisoned */
    unsigned char *saved = *link;
    *link = (unsigned char *)b + 16; /* the user's write after free */
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    CHECK_EQ(e.last_kind, HK_EK_CORRUPT_FREE);
    CHECK_STR_CONTAINS(e.last_message, "cache of freed");
    zone_unpoison(link, sizeof *link); /* the check's walk poisoned it again */
    *link = saved;
    zone_poison(link, sizeof *link);
    h->ncache[ci]++;
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(e.last_message, "its count says 3");
    h->ncache[ci]--;
    hkt_errors_reset(&e);
    e.quiet = 1;
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(e.count, 0);
    hk_zone_destroy(z);
}

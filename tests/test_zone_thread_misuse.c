/* Zone with HK_ZONE_THREADS: misuse under threads. The same block freed
 * by two threads at once (two non-owners, or the owner and another) is
 * reported once, whichever path catches it, and a batch reaching a heap
 * whose thread exited is collected (and its double frees reported) at
 * once; foreign and interior pointers freed from a non-owner thread are
 * reported. No CHECK inside worker threads: they count, the main thread
 * checks. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "heapkit/zone.h"
#include "hk_test.h"
#include "internal.h"
#include "zone_runs_test_util.h"
#include "zone_thr_test_util.h"
#include "zone_threads.h"

#include <pthread.h>

#define NB 2000
typedef struct {
    hk_zone *z;
    void **p;
    pthread_barrier_t *bar;
    int ok, bad;
} racer;

/* r's frees of r->p[0..NB-1], counted by their results. */
static void free_counting(racer *r) {
    for (int i = 0; i < NB; i++) {
        hk_result res = hk_zone_free(r->z, r->p[i]);
        if (res == HK_OK)
            r->ok++;
        else if (res == HK_ERR_DOUBLE_FREE)
            r->bad++;
    }
}

static void *free_all(void *arg) {
    racer *r = (racer *)arg;
    pthread_barrier_wait(r->bar);
    free_counting(r);
    return NULL;
}

static void *alloc_nb(void *arg) {
    racer *r = (racer *)arg;
    for (int i = 0; i < NB; i++) r->p[i] = hk_zone_alloc(r->z, 24 + (size_t)(i % 7) * 16);
    return NULL;
}

/* Runs fa(a) and fb(b) on two threads of their own, both sharing the
 * two-thread barrier in a->bar, and joins them. */
static void run_pair(racer *a, void *(*fa)(void *), racer *b, void *(*fb)(void *)) {
    pthread_barrier_init(a->bar, NULL, 2);
    pthread_t ta, tb;
    REQUIRE(pthread_create(&ta, NULL, fa, a) == 0);
    REQUIRE(pthread_create(&tb, NULL, fb, b) == 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    pthread_barrier_destroy(a->bar);
}

HKT_TEST(same_block_freed_by_two_other_threads_reported_once) {
    trep rep;
    hk_zone *z = mk_thr_counting(&rep);
    static void *p[NB];
    pthread_barrier_t bar;
    racer a = {z, p, &bar, 0, 0}, b = {z, p, &bar, 0, 0};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, alloc_nb, &a) == 0);
    pthread_join(t, NULL);
    run_pair(&a, free_all, &b, free_all);
    CHECK_EQ(a.ok + b.ok, NB);
    CHECK_EQ(a.bad + b.bad, NB);
    CHECK_EQ(rep.double_free, NB);
    CHECK_EQ(rep.count, NB);
    CHECK_EQ(live_of(z), 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* The owner frees its blocks while another thread frees the same ones. */

static void *owner_allocs_then_frees(void *arg) {
    racer *r = (racer *)arg;
    alloc_nb(r);
    pthread_barrier_wait(r->bar); /* the other thread may start */
    free_counting(r);
    /* reuse the slots (collection runs on the refills) */
    for (int i = 0; i < NB; i++) {
        void *q = hk_zone_alloc(r->z, 40);
        if (q) hk_zone_free(r->z, q);
    }
    return NULL;
}

HKT_TEST(owner_and_other_thread_free_same_blocks_reported_once) {
    trep rep;
    hk_zone *z = mk_thr_counting(&rep);
    static void *p[NB];
    pthread_barrier_t bar;
    racer a = {z, p, &bar, 0, 0}, b = {z, p, &bar, 0, 0};
    run_pair(&a, owner_allocs_then_frees, &b, free_all);
    /* every block was freed twice: exactly one free of each failed or was
     * reported later (a race both passed is caught by the collection of
     * the other thread's batch: the owner's, when the batch reaches it
     * first, else the other thread's own as it pushes the batch onto the
     * heap the owner abandoned) */
    CHECK_EQ(rep.double_free, NB);
    CHECK_EQ(a.ok + b.ok + a.bad + b.bad, 2 * NB);
    CHECK_EQ(live_of(z), 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* Batches that reach a heap after its owner exited are collected by the
 * thread that pushes them, at once: the runs they empty go back then, not
 * at the next adoption or trim (regression: they waited on the abandoned
 * heap's inbox, and so did the report of a double free found in them). */
typedef struct {
    hk_zone *z;
    void **p;
    pthread_barrier_t *owner_done, *owner_gone;
    int fails;
} late_ctx;

static void *late_owner(void *arg) {
    late_ctx *c = (late_ctx *)arg;
    for (int i = 0; i < NB; i++) c->p[i] = hk_zone_alloc(c->z, 24 + (size_t)(i % 7) * 16);
    pthread_barrier_wait(c->owner_done);
    return NULL; /* its heap is abandoned, every block live */
}

static void *late_freer(void *arg) {
    late_ctx *c = (late_ctx *)arg;
    void *mine = hk_zone_alloc(c->z, 24); /* a heap of its own: it adopts none */
    pthread_barrier_wait(c->owner_done);
    pthread_barrier_wait(c->owner_gone);
    for (int i = 0; i < NB; i++)
        if (hk_zone_free(c->z, c->p[i]) != HK_OK) c->fails++;
    if (hk_zone_free(c->z, mine) != HK_OK) c->fails++;
    return NULL; /* its exit pushes its last batch */
}

HKT_TEST(batches_reaching_an_abandoned_heap_are_collected_at_once) {
    trep rep;
    hk_zone *z = mk_thr_counting(&rep);
    static void *p[NB];
    pthread_barrier_t done, gone;
    pthread_barrier_init(&done, NULL, 2);
    pthread_barrier_init(&gone, NULL, 2);
    late_ctx c = {z, p, &done, &gone, 0};
    pthread_t owner, freer;
    REQUIRE(pthread_create(&owner, NULL, late_owner, &c) == 0);
    REQUIRE(pthread_create(&freer, NULL, late_freer, &c) == 0);
    pthread_join(owner, NULL);
    pthread_barrier_wait(&gone);
    pthread_join(freer, NULL);
    CHECK_EQ(c.fails, 0);
    /* every run emptied: the dump lists each with none used */
    size_t runs = 0, empty = 0;
    char *d = dump_str(z, &runs);
    REQUIRE(d != NULL);
    for (const char *q = d; (q = strstr(q, "-byte blocks: 0 of ")) != NULL; q++) empty++;
    free(d);
    CHECK(runs >= 7);
    CHECK_EQ(empty, runs);
    CHECK_EQ(live_of(z), 0);
    CHECK_EQ(rep.count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    pthread_barrier_destroy(&done);
    pthread_barrier_destroy(&gone);
    hk_zone_destroy(z);
}

typedef struct {
    hk_zone *z;
    void *blk;
    hk_result foreign, interior;
} bad_ctx;

static void *free_bad(void *arg) {
    bad_ctx *c = (bad_ctx *)arg;
    int local;
    c->foreign = hk_zone_free(c->z, &local);
    c->interior = hk_zone_free(c->z, (unsigned char *)c->blk + 16);
    return NULL;
}

HKT_TEST(foreign_and_interior_pointer_from_other_thread_reported) {
    trep rep;
    hk_zone *z = mk_thr_counting(&rep);
    bad_ctx c = {.z = z, .blk = hk_zone_alloc(z, 200)};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, free_bad, &c) == 0);
    pthread_join(t, NULL);
    CHECK_EQ(c.foreign, HK_ERR_FOREIGN);
    CHECK_EQ(rep.foreign, 1);
    CHECK(c.interior != HK_OK);
    CHECK_EQ(rep.count, 2);
    CHECK_EQ(live_of(z), 1);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, c.blk), HK_OK);
    hk_zone_destroy(z);
}

/* Zone with HK_ZONE_THREADS: the batches that carry slots freed by another
 * thread back to their owner heap (src/zone_remote.c). A free with no
 * memory for a batch fails cleanly; check finds a damaged batch; a freer's
 * partly filled batch reaches its owner when the freer's heap grows, and
 * one that reaches an abandoned owner is collected at once.
 * (Protocol races and stress: tests/test_zone_threads.c.) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "os.h"
#include "zone_thr_test_util.h"

#include <pthread.h>
#include <sched.h>
#ifndef _WIN32
#include <sys/wait.h>
#include <unistd.h>
#endif

#define NB 16

typedef struct {
    hk_zone *z;
    void *p[NB];
    int fails;
} maker;

/* Allocates NB blocks in a heap of its own and exits (the heap is
 * abandoned; its blocks stay valid). The calling thread holds a heap of
 * its own first, or its next call would adopt this one. */
static void *make_blocks(void *arg) {
    maker *m = (maker *)arg;
    for (int i = 0; i < NB; i++)
        if (!(m->p[i] = hk_zone_alloc(m->z, 48 + (size_t)i))) m->fails++;
    return NULL;
}

/* A block of this thread's heap (so that it adopts no other), then NB
 * blocks of another thread's heap, abandoned (m->p), or NULL. */
static void *own_then_abandoned(hk_zone *z, maker *m) {
    void *mine = hk_zone_alloc(z, 64);
    pthread_t t;
    m->z = z;
    m->fails = 0;
    if (!mine || pthread_create(&t, NULL, make_blocks, m) != 0) return NULL;
    pthread_join(t, NULL);
    return m->fails ? NULL : mine;
}

/* A threads zone with a block of this thread's heap (*mine) and NB blocks
 * of an abandoned heap (m->p), or NULL. */
static hk_zone *zone_with_abandoned(hkt_errors *e, maker *m, void **mine) {
    hk_zone *z = mk_thr(e);
    *mine = z ? own_then_abandoned(z, m) : NULL;
    return *mine ? z : NULL;
}

/* The calling thread's heap in z (after it has one). */
static zone_heap *my_heap(hk_zone *z) { return hk__zone_tl_cur.zid == z->zid ? hk__zone_tl_cur.h : NULL; }

HKT_TEST(remote_free_without_memory_for_a_batch_fails_cleanly) {
    hkt_errors e;
    maker m;
    void *mine;
    hk_zone *z = zone_with_abandoned(&e, &m, &mine); /* no batch yet */
    REQUIRE(z != NULL);
    /* the first batch's node page cannot be had */
    hk_os_fail_after(1, true);
    CHECK_EQ(hk_zone_free(z, m.p[0]), HK_ERR_NOMEM);
    hk_os_fail_after(0, false);
    CHECK_EQ(e.count, 1);
    CHECK_EQ(e.last_kind, HK_EK_NOMEM);
    CHECK_EQ(live_of(z), NB + 1); /* nothing freed */
    CHECK_EQ(hk_zone_usable_size(z, m.p[0]) >= 48, 1);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* with memory again the same free works */
    CHECK_EQ(hk_zone_free(z, m.p[0]), HK_OK);
    CHECK_EQ(live_of(z), NB);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    for (int i = 1; i < NB; i++) CHECK_EQ(hk_zone_free(z, m.p[i]), HK_OK);
    CHECK_EQ(hk_zone_free(z, mine), HK_OK);
    CHECK_EQ(live_of(z), 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(e.count, 1);
    hk_zone_destroy(z);
}

HKT_TEST(check_finds_a_damaged_batch) {
    hkt_errors e;
    maker m;
    void *mine;
    hk_zone *z = zone_with_abandoned(&e, &m, &mine); /* no batch yet */
    REQUIRE(z != NULL);
    for (int i = 0; i < 3; i++) CHECK_EQ(hk_zone_free(z, m.p[i]), HK_OK);
    zone_heap *h = my_heap(z);
    REQUIRE(h != NULL);
    zone_rnode *n = NULL;
    for (unsigned w = 0; w < ZONE_OUT_WAYS; w++)
        if (h->rs.out[w].node && h->rs.out[w].node->n) n = h->rs.out[w].node;
    REQUIRE(n != NULL);
    CHECK_EQ(n->n, 3u);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* an entry lost: a slot freed by another thread that no batch lists */
    n->n = 2;
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    n->n = 3;
    /* an entry that is no slot of the zone */
    void *saved = n->slot[1];
    n->slot[1] = &e;
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    n->slot[1] = saved;
    /* a node made and found nowhere */
    z->rnodes_made++;
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    z->rnodes_made--;
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* a batch left on the inbox of a heap that has no owner */
    zone_heap *owner = zone_run_ext(run_of(m.p[0]))->heap;
    REQUIRE(owner != NULL && owner->abandoned && owner->inbox == NULL);
    unsigned way = 0;
    while (h->rs.out[way].node != n) way++;
    h->rs.out[way].node = NULL;
    owner->inbox = n;
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    owner->inbox = NULL;
    h->rs.out[way].node = n;
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* ... or a slot in its cache (freed as its owner would, consistently) */
    void *last = m.p[NB - 1];
    zone_blk *b = hdr_of(last);
    REQUIRE(run_of(last)->used > 1);
    CHECK_EQ(zone_thr_free_owner(owner, b, run_of(last), zone_hdr_load(b)), HK_OK);
    REQUIRE(owner->ncache[zone_cls_of(48 + NB - 1)] == 1);
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    hk__core_lock(&z->core);
    hk__zone_thr_cache_flush_all(z, owner, 1);
    hk__core_unlock(&z->core);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* ... or a batch in one of its outboxes (this thread's block freed
     * as a free by the owner's thread would have) */
    zone_blk *mb = hdr_of(mine);
    hk__core_lock(&z->core);
    CHECK_EQ(hk__zone_thr_remote(z, mb, h, zone_hdr_load(mb), &owner->rs, 1), HK_OK);
    hk__core_unlock(&z->core);
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    hk__core_lock(&z->core);
    hk__zone_out_flush(&owner->rs, 1); /* onto this thread's heap's inbox: its owner lives */
    hk__core_unlock(&z->core);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    for (int i = 3; i < NB - 1; i++) CHECK_EQ(hk_zone_free(z, m.p[i]), HK_OK);
    CHECK_EQ(live_of(z), 0); /* mine was freed through the batch */
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(partly_filled_batch_reaches_its_owner_when_the_freer_grows) {
    hkt_errors e;
    maker m;
    void *mine;
    hk_zone *z = zone_with_abandoned(&e, &m, &mine); /* no batch yet */
    REQUIRE(z != NULL);
    zone_heap *owner = zone_run_ext(run_of(m.p[0]))->heap;
    REQUIRE(owner != NULL);
    for (int i = 0; i < NB; i++) CHECK_EQ(hk_zone_free(z, m.p[i]), HK_OK);
    /* NB < ZONE_RNODE_SLOTS: the batch waits in this thread's outbox */
    CHECK(__atomic_load_n(&owner->inbox, __ATOMIC_ACQUIRE) == NULL);
    CHECK_EQ(live_of(z), 1);
    /* this thread's heap takes a new run: its batches go first */
    for (int i = 0; i < NB; i++) CHECK_EQ(zone_w_bits(zone_hdr_load(hdr_of(m.p[i]))), ZB_SLOT_REMOTE);
    void *q = hk_zone_alloc(z, 3000);
    REQUIRE(q != NULL);
    /* the owner is gone: the batch was collected as it was pushed (the
     * slots are free in their runs: the abandoned heap's current runs,
     * which stay) */
    CHECK(__atomic_load_n(&owner->inbox, __ATOMIC_ACQUIRE) == NULL);
    for (int i = 0; i < NB; i++) CHECK_EQ(zone_w_bits(zone_hdr_load(hdr_of(m.p[i]))), ZB_SLOT_FREE);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, q), HK_OK);
    CHECK_EQ(hk_zone_free(z, mine), HK_OK);
    CHECK_EQ(live_of(z), 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(e.count, 0);
    hk_zone_destroy(z);
}

typedef struct {
    hk_zone *z;
    void *p;
    int made, go;
} waiter;

/* Allocates a block, then waits (not inside a zone call) until told to
 * exit: its heap stays owned meanwhile. */
static void *alloc_and_wait(void *arg) {
    waiter *w = (waiter *)arg;
    w->p = hk_zone_alloc(w->z, 200);
    __atomic_store_n(&w->made, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&w->go, __ATOMIC_ACQUIRE)) sched_yield();
    return NULL;
}

/* Starts alloc_and_wait for w on thread *t and waits for its block: the
 * heap owning it (live until w->go), or NULL when it has no block. */
static zone_heap *start_waiter(hk_zone *z, waiter *w, pthread_t *t) {
    *w = (waiter){z, NULL, 0, 0};
    if (pthread_create(t, NULL, alloc_and_wait, w) != 0) return NULL;
    while (!__atomic_load_n(&w->made, __ATOMIC_ACQUIRE)) sched_yield();
    return w->p ? zone_run_ext(run_of(w->p))->heap : NULL;
}

/* A thread that cannot get a heap frees another heap's block through the
 * zone's own pool, under the lock; the batch goes to the owner at once. */
HKT_TEST(free_by_a_thread_without_a_heap_reaches_the_owner) {
    hkt_errors e;
    hk_zone *z = mk_thr(&e);
    REQUIRE(z != NULL);
    waiter w;
    pthread_t t;
    zone_heap *owner = start_waiter(z, &w, &t);
    REQUIRE(owner != NULL);
    hk_os_fail_after(1, false); /* this thread's heap cannot be mapped */
    CHECK_EQ(hk_zone_free(z, w.p), HK_OK);
    hk_os_fail_after(0, false);
    CHECK(my_heap(z) == NULL);
    CHECK(__atomic_load_n(&owner->inbox, __ATOMIC_ACQUIRE) != NULL);
    CHECK_EQ(live_of(z), 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    __atomic_store_n(&w.go, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    hk_zone_trim(z); /* collects the abandoned owner */
    CHECK(__atomic_load_n(&owner->inbox, __ATOMIC_ACQUIRE) == NULL);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(e.count, 0);
    hk_zone_destroy(z);
}

#ifndef _WIN32
/* fork's child: the owner's thread is gone there, so the child abandons
 * its heap and collects the batch waiting on its inbox (the child can
 * reuse the slots, and check finds no batch on a heap without an owner). */
HKT_TEST(fork_child_collects_the_heaps_it_abandons) {
    hkt_errors e;
    hk_zone *z = mk_thr(&e);
    REQUIRE(z != NULL);
    void *mine = hk_zone_alloc(z, 64); /* this thread's heap: it adopts none */
    REQUIRE(mine != NULL);
    waiter w;
    pthread_t t;
    zone_heap *owner = start_waiter(z, &w, &t);
    REQUIRE(owner != NULL);
    CHECK_EQ(hk_zone_free(z, w.p), HK_OK);
    void *q = hk_zone_alloc(z, 3000); /* this heap grows: its batch goes to the owner */
    REQUIRE(q != NULL);
    REQUIRE(__atomic_load_n(&owner->inbox, __ATOMIC_ACQUIRE) != NULL); /* the owner lives */
    hk__zone_fork_prepare(z);
    pid_t pid = fork();
    if (pid == 0) {
        hk__zone_fork_child(z);
        /* 1: a batch left; 2: the slot not free; 3: check failed */
        int rc = owner->inbox != NULL                                      ? 1
                 : zone_w_bits(zone_hdr_load(hdr_of(w.p))) != ZB_SLOT_FREE ? 2
                 : hk_zone_check(z) != HK_OK                               ? 3
                                                                           : 0;
        _exit(rc);
    }
    hk__zone_fork_parent(z);
    REQUIRE(pid > 0);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK_EQ(WEXITSTATUS(status), 0);
    /* the parent's owner still lives: its batch waits for it */
    CHECK(__atomic_load_n(&owner->inbox, __ATOMIC_ACQUIRE) != NULL);
    __atomic_store_n(&w.go, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    CHECK_EQ(hk_zone_free(z, q), HK_OK);
    CHECK_EQ(hk_zone_free(z, mine), HK_OK);
    thr_end_empty(z, &e);
}
#endif

/* The slot bytes of a threads zone come from the runs' used counts (no
 * counter on the owner's paths): a block of this thread's heap, blocks of
 * an abandoned heap, then half of those freed from here (waiting in this
 * thread's batch: free already in the figures), then the rest. */
static size_t stride_of(size_t n) { return zone_cls_stride(zone_cls_of(n)); }

HKT_TEST(slot_bytes_sum_the_runs_of_every_heap_less_the_batches) {
    hkt_errors e;
    maker m;
    void *mine;
    hk_zone *z = zone_with_abandoned(&e, &m, &mine);
    REQUIRE(z != NULL);
    void *big[10];
    for (int i = 0; i < 10; i++) REQUIRE((big[i] = hk_zone_alloc(z, 200)) != NULL);
    size_t want = stride_of(64) + 10 * stride_of(200), freed = 0;
    for (int i = 0; i < NB; i++) want += stride_of(48 + (size_t)i);
    hk_zone_info in;
    REQUIRE(hk_zone_get_info(z, &in) == HK_OK);
    CHECK_EQ(in.slot_bytes, want);
    CHECK_EQ(stats_of(z).used_blocks_bytes, want);
    for (int i = 0; i < NB; i += 2) {
        CHECK_EQ(hk_zone_free(z, m.p[i]), HK_OK);
        freed += stride_of(48 + (size_t)i);
    }
    REQUIRE(hk_zone_get_info(z, &in) == HK_OK);
    CHECK_EQ(in.slot_bytes, want - freed);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    for (int i = 1; i < NB; i += 2) CHECK_EQ(hk_zone_free(z, m.p[i]), HK_OK);
    for (int i = 0; i < 10; i++) CHECK_EQ(hk_zone_free(z, big[i]), HK_OK);
    CHECK_EQ(hk_zone_free(z, mine), HK_OK);
    REQUIRE(hk_zone_get_info(z, &in) == HK_OK);
    CHECK_EQ(in.slot_bytes, 0);
    CHECK_EQ(stats_of(z).live_blocks, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(e.count, 0);
    hk_zone_destroy(z);
}

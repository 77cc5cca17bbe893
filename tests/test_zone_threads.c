/* Zone with HK_ZONE_THREADS: per-thread heaps under threads (stress with
 * cross-thread frees, threads exiting with live blocks, adoption, a level
 * unload with free_tags), many remote freers racing the owner's
 * collections, exact statistics, slot bookkeeping, reuse before carving,
 * the owner's realloc and carving. (Misuse under threads:
 * tests/test_zone_thread_misuse.c; fork: tests/zone_preload_prog.c,
 * through the malloc shim, which registers the fork hooks.) No CHECK
 * inside worker threads: they count failures, the main thread checks. */
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
#include <stdatomic.h>
#include <sched.h>

/* ---- stress ---------------------------------------------------------------- */

#define NT    4
#define RING  256
#define KEEP  64
#define ITERS 20000

typedef struct {
    pthread_mutex_t mx;
    void *ring[RING];
    unsigned char mark[RING];
    unsigned head, tail;
} xring;

typedef struct {
    hk_zone *z;
    xring *x;
    unsigned id;
    int bad; /* failures seen by this thread */
    void *level[8];
    void *keep[KEEP]; /* left live at exit */
} tctx;

static uint32_t rnd_s(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static int ring_put(xring *x, void *p, unsigned char m) {
    pthread_mutex_lock(&x->mx);
    int ok = x->head - x->tail < RING;
    if (ok) {
        x->ring[x->head % RING] = p;
        x->mark[x->head % RING] = m;
        x->head++;
    }
    pthread_mutex_unlock(&x->mx);
    return ok;
}
static void *ring_get(xring *x, unsigned char *m) {
    void *p = NULL;
    pthread_mutex_lock(&x->mx);
    if (x->head != x->tail) {
        p = x->ring[x->tail % RING];
        *m = x->mark[x->tail % RING];
        x->tail++;
    }
    pthread_mutex_unlock(&x->mx);
    return p;
}

static void *stress_thread(void *arg) {
    tctx *c = (tctx *)arg;
    uint32_t s = 0x9e3779b9u * (c->id + 1);
    void *mine[32] = {0};
    size_t msz[32] = {0};
    unsigned char m = (unsigned char)(0x10 + c->id);
    for (int it = 0; it < ITERS; it++) {
        unsigned k = rnd_s(&s) % 32, op = rnd_s(&s) % 16;
        if (mine[k]) {
            if (((unsigned char *)mine[k])[0] != m || ((unsigned char *)mine[k])[msz[k] - 1] != m) c->bad++;
            if (op < 5) {
                if (!ring_put(c->x, mine[k], m)) hk_zone_free(c->z, mine[k]);
            } else if (op < 8) {
                size_t n = 1 + rnd_s(&s) % 3000;
                void *q = hk_zone_realloc(c->z, mine[k], n);
                if (!q) {
                    c->bad++;
                    continue;
                }
                size_t keep = n < msz[k] ? n : msz[k];
                if (((unsigned char *)q)[0] != m || ((unsigned char *)q)[keep - 1] != m) c->bad++;
                memset(q, m, n);
                mine[k] = q;
                msz[k] = n;
                continue;
            } else if (hk_zone_free(c->z, mine[k]) != HK_OK) {
                c->bad++;
            }
            mine[k] = NULL;
        } else {
            size_t n = (op < 12) ? 1 + rnd_s(&s) % 1024 : 1 + rnd_s(&s) % 20000;
            void *p = (op == 15) ? hk_zone_alloc_aligned(c->z, (size_t)64 << (rnd_s(&s) % 4), n)
                                 : hk_zone_alloc(c->z, n);
            if (!p) {
                c->bad++;
                continue;
            }
            memset(p, m, n);
            mine[k] = p;
            msz[k] = n;
        }
        unsigned char om;
        void *q = ring_get(c->x, &om);
        if (q) {
            if (((unsigned char *)q)[0] != om) c->bad++;
            if (hk_zone_free(c->z, q) != HK_OK) c->bad++;
        }
    }
    for (int k = 0; k < 32; k++)
        if (mine[k] && hk_zone_free(c->z, mine[k]) != HK_OK) c->bad++;
    for (int i = 0; i < 8; i++) {
        c->level[i] = hk_zone_alloc_tagged(c->z, 100 + (size_t)i * 40, HK_TAG_LEVEL, NULL, "level");
        if (!c->level[i]) c->bad++;
    }
    for (int i = 0; i < KEEP; i++) {
        c->keep[i] = hk_zone_alloc(c->z, 16 + (size_t)i * 8);
        if (!c->keep[i]) c->bad++;
    }
    return NULL;
}

HKT_TEST(stress_cross_thread_frees_exit_and_level_unload) {
    trep rep;
    hk_zone *z = mk_thr_counting(&rep);
    REQUIRE(z != NULL);
    xring x;
    memset(&x, 0, sizeof x);
    pthread_mutex_init(&x.mx, NULL);
    tctx c[NT];
    pthread_t th[NT];
    memset(c, 0, sizeof c);
    for (unsigned i = 0; i < NT; i++) {
        c[i].z = z;
        c[i].x = &x;
        c[i].id = i;
        REQUIRE(pthread_create(&th[i], NULL, stress_thread, &c[i]) == 0);
    }
    for (unsigned i = 0; i < NT; i++) pthread_join(th[i], NULL);
    /* the ring's leftovers: freed by the main thread (remote frees into
     * abandoned heaps) */
    unsigned char om;
    for (void *q; (q = ring_get(&x, &om)) != NULL;) CHECK_EQ(hk_zone_free(z, q), HK_OK);
    for (unsigned i = 0; i < NT; i++) CHECK_EQ(c[i].bad, 0);
    CHECK_EQ(rep.count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(live_of(z), (size_t)NT * (KEEP + 8));
    /* level unload: the tagged blocks go at once */
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_LEVEL, HK_TAG_LEVEL), (size_t)NT * 8);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* new threads adopt the abandoned heaps; the kept blocks of the exited
     * threads are freed from here */
    for (unsigned i = 0; i < 2; i++) {
        c[i].bad = 0;
        REQUIRE(pthread_create(&th[i], NULL, stress_thread, &c[i]) == 0);
    }
    for (unsigned i = 0; i < NT; i++)
        for (int k = 0; k < KEEP; k++)
            if (i >= 2) CHECK_EQ(hk_zone_free(z, c[i].keep[k]), HK_OK);
    for (unsigned i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (void *q; (q = ring_get(&x, &om)) != NULL;) CHECK_EQ(hk_zone_free(z, q), HK_OK);
    CHECK_EQ(c[0].bad + c[1].bad, 0);
    CHECK_EQ(rep.count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free_tags(z, 1, HK_ZONE_TAG_MAX),
             2 * (size_t)(KEEP + 8) +
                 2 * (size_t)KEEP); /* the second round, and threads 0-1's first kept blocks */
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_stats s;
    hk_zone_stats(z, &s);
    CHECK_EQ(s.live_blocks, 0);
    CHECK_EQ(s.used, 0);
    CHECK_EQ(s.alloc_count, s.free_count);
    pthread_mutex_destroy(&x.mx);
    hk_zone_destroy(z);
}

/* ---- many remote freers on the owner's runs ------------------------------------- */

enum { FAN = 3, FAN_SLOTS = 64, FAN_BLOCKS = 30000 };

/* One single-producer single-consumer queue per freer. */
typedef struct {
    _Alignas(64) atomic_ulong head; /* written by the owner */
    _Alignas(64) atomic_ulong tail; /* written by the freer */
    void *slot[FAN_SLOTS];
} fan_q;

typedef struct {
    hk_zone *z;
    fan_q q[FAN];
    atomic_int done;
    int bad[FAN + 1];
} fan_ctx;

typedef struct {
    fan_ctx *c;
    int id;
} fan_arg;

static void *fan_owner(void *arg) {
    fan_ctx *c = (fan_ctx *)arg;
    uint32_t s = 12345;
    for (int i = 0; i < FAN_BLOCKS; i++) {
        /* two classes, so that the frees land in a few runs at once */
        size_t n = (rnd_s(&s) & 1) ? 40 : 72;
        unsigned char *p = hk_zone_alloc(c->z, n);
        if (!p) {
            c->bad[FAN]++;
            continue;
        }
        p[0] = p[n - 1] = (unsigned char)i;
        fan_q *q = &c->q[i % FAN];
        unsigned long h = atomic_load_explicit(&q->head, memory_order_relaxed);
        while (h - atomic_load_explicit(&q->tail, memory_order_acquire) >= FAN_SLOTS) sched_yield();
        q->slot[h % FAN_SLOTS] = p;
        atomic_store_explicit(&q->head, h + 1, memory_order_release);
    }
    atomic_store_explicit(&c->done, 1, memory_order_release);
    return NULL;
}

static void *fan_freer(void *arg) {
    fan_arg *a = (fan_arg *)arg;
    fan_q *q = &a->c->q[a->id];
    for (;;) {
        unsigned long t = atomic_load_explicit(&q->tail, memory_order_relaxed);
        if (atomic_load_explicit(&q->head, memory_order_acquire) == t) {
            if (atomic_load_explicit(&a->c->done, memory_order_acquire) &&
                atomic_load_explicit(&q->head, memory_order_acquire) == t)
                return NULL;
            sched_yield();
            continue;
        }
        void *p = q->slot[t % FAN_SLOTS];
        atomic_store_explicit(&q->tail, t + 1, memory_order_release);
        if (hk_zone_free(a->c->z, p) != HK_OK) a->c->bad[a->id]++;
    }
}

/* Three threads free the blocks one owner keeps allocating from two
 * classes: their announces, bits and queueings race each other and the
 * owner's collections on the same runs (ThreadSanitizer runs this too).
 * Every free is counted once, nothing is reported, check passes. */
HKT_TEST(three_remote_freers_race_the_owners_collections) {
    trep rep;
    hk_zone *z = mk_thr_counting(&rep);
    REQUIRE(z != NULL);
    static fan_ctx c;
    memset(&c, 0, sizeof c);
    c.z = z;
    for (int i = 0; i < FAN; i++) {
        atomic_init(&c.q[i].head, 0);
        atomic_init(&c.q[i].tail, 0);
    }
    atomic_init(&c.done, 0);
    pthread_t own, fr[FAN];
    fan_arg a[FAN];
    for (int i = 0; i < FAN; i++) {
        a[i] = (fan_arg){&c, i};
        REQUIRE(pthread_create(&fr[i], NULL, fan_freer, &a[i]) == 0);
    }
    REQUIRE(pthread_create(&own, NULL, fan_owner, &c) == 0);
    pthread_join(own, NULL);
    for (int i = 0; i < FAN; i++) pthread_join(fr[i], NULL);
    for (int i = 0; i <= FAN; i++) CHECK_EQ(c.bad[i], 0);
    CHECK_EQ(rep.count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(live_of(z), 0);
    hk_stats st;
    hk_zone_stats(z, &st);
    CHECK_EQ(st.alloc_count, (uint64_t)FAN_BLOCKS);
    CHECK_EQ(st.free_count, (uint64_t)FAN_BLOCKS);
    CHECK_EQ(st.used, 0);
    hk_zone_destroy(z);
}

/* ---- statistics -------------------------------------------------------------- */

typedef struct {
    hk_zone *z;
    void *p[100];
} owner_ctx;

static void *alloc_100(void *arg) {
    owner_ctx *o = (owner_ctx *)arg;
    for (int i = 0; i < 100; i++) o->p[i] = hk_zone_alloc(o->z, 40);
    return NULL;
}

HKT_TEST(stats_exact_with_frees_pending_collection) {
    trep rep;
    hk_zone *z = mk_thr_counting(&rep);
    owner_ctx o = {.z = z};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, alloc_100, &o) == 0);
    pthread_join(t, NULL);
    hk_stats s;
    hk_zone_stats(z, &s);
    CHECK_EQ(s.live_blocks, 100);
    CHECK_EQ(s.used, 4000);
    for (int i = 0; i < 50; i++) CHECK_EQ(hk_zone_free(z, o.p[i]), HK_OK); /* remote: not collected yet */
    hk_zone_stats(z, &s);
    CHECK_EQ(s.live_blocks, 50);
    CHECK_EQ(s.used, 2000);
    CHECK_EQ(s.free_count, 50);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* a freed-remotely block is already free to every other call */
    CHECK_EQ(hk_zone_free(z, o.p[0]), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(rep.double_free, 1);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    for (int i = 50; i < 100; i++) CHECK_EQ(hk_zone_free(z, o.p[i]), HK_OK);
    hk_zone_stats(z, &s);
    CHECK_EQ(s.live_blocks, 0);
    CHECK_EQ(s.used, 0);
    hk_zone_destroy(z);
}

/* Regression: a run's last slot may be written up to its usable size, which
 * reaches 8 bytes past the slots (into the next slot's header position);
 * the run's remote bitmap once started right there, so a full write of the
 * last slot set remote marks that no free had made, and check failed (and
 * collections freed live slots). Every class, every slot written whole. */
static void *fill_every_class(void *arg) {
    hk_zone *z = (hk_zone *)arg;
    enum { PER = 80 };
    static void *blocks[64 * PER];
    size_t nb = 0;
    for (unsigned c = 0; zone_cls_stride(c) <= 1024 && nb + PER <= 64 * PER; c++)
        for (int i = 0; i < PER; i++) {
            size_t n = zone_cls_stride(c) - ZONE_OVERLAP; /* the class's whole slot: no poisoned slack */
            unsigned char *p = hk_zone_alloc(z, n);
            if (!p) return NULL;
            memset(p, 0xff, hk_zone_usable_size(z, p));
            blocks[nb++] = p;
        }
    return blocks;
}

HKT_TEST(last_slot_written_whole_leaves_run_bookkeeping_intact) {
    trep rep;
    hk_zone *z = mk_thr_counting(&rep);
    pthread_t t;
    void *res = NULL;
    REQUIRE(pthread_create(&t, NULL, fill_every_class, z) == 0);
    pthread_join(t, &res);
    REQUIRE(res != NULL);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    void **blocks = (void **)res;
    size_t nb = 0;
    for (unsigned c = 0; zone_cls_stride(c) <= 1024 && nb + 80 <= 64 * 80; c++) nb += 80;
    for (size_t i = 0; i < nb; i++) CHECK_EQ(hk_zone_free(z, blocks[i]), HK_OK); /* remote frees */
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(live_of(z), 0);
    CHECK_EQ(rep.count, 0);
    hk_zone_destroy(z);
}

/* The owner's paths turn a free slot header into a used one and back by one
 * xor (zone_w_use_delta) instead of rehashing, and a remote free turns a
 * used one into a remote one by another (ZONE_W_REMOTE_K): for every class,
 * index and slack the xor must give exactly the header zone_hdr_make
 * computes. */
HKT_TEST(slot_header_xor_matches_full_header) {
    static zone_blk slots[64] __attribute__((aligned(16)));
    int bad = 0, tried = 0;
    for (size_t n = 0; n <= ZONE_RUN_MAX_REQ; n += 1 + n / 64) {
        unsigned cls = zone_cls_of(n);
        uint32_t slack = zone_cls_stride(cls) - ZONE_OVERLAP - (uint32_t)n;
        for (uint32_t idx = 0; idx < 4096; idx += 97, tried++) {
            const zone_blk *b = &slots[(idx + cls) & 63];
            uint32_t word = zone_slot_word(idx, cls, 0);
            uint64_t freew = zone_hdr_make(b, word, 0, ZB_SLOT_FREE);
            uint64_t usedw = zone_hdr_make(b, word | (slack << 19), HK_TAG_STATIC, ZB_SLOT_USED);
            if ((freew ^ zone_w_use_delta(slack)) != usedw) bad++;
            if ((usedw ^ zone_w_use_delta(slack)) != freew) bad++;
            /* the remote free's claim: used -> remote by one xor */
            uint64_t remw = zone_hdr_make(b, word | (slack << 19), HK_TAG_STATIC, ZB_SLOT_REMOTE);
            if ((usedw ^ ZONE_W_REMOTE_K) != remw) bad++;
        }
    }
    CHECK(tried > 10000);
    CHECK_EQ(bad, 0);
}

/* ---- a run emptied by a collection while its last remote freer is mid-way ---- */

typedef struct {
    hk_zone *z;
    void *a;
    int fails, freed, go;
} hold_arg;

/* Frees one block of another thread's heap, then waits (not inside a zone
 * call) until told to exit: its batch holds the block meanwhile. */
static void *free_one_and_wait(void *arg) {
    hold_arg *f = (hold_arg *)arg;
    if (hk_zone_free(f->z, f->a) != HK_OK) f->fails++;
    __atomic_store_n(&f->freed, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&f->go, __ATOMIC_ACQUIRE)) sched_yield();
    return NULL; /* exiting pushes the batch on the owner's inbox */
}

/* A slot freed by another thread waits in that thread's batch, counted as
 * used in its run: the run cannot go back to the core under it, however
 * its owner frees the rest (an earlier design gave a run back while a
 * freer still had to touch it: a producer/consumer program crashed). The
 * free counts at once in the statistics; check finds the slot in the
 * batch; the owner turns it free once the batch reaches its inbox. */
HKT_TEST(run_kept_while_a_slot_of_it_waits_in_a_batch) {
    trep rep;
    hk_zone *z = mk_thr_counting(&rep);
    REQUIRE(z != NULL);
    enum { SZ = 6000, MAXB = 64 };
    void *b[2 * MAXB];
    b[0] = hk_zone_alloc(z, SZ);
    REQUIRE(b[0] != NULL);
    zone_run *r = run_of(b[0]);
    unsigned ns = r->nslots;
    REQUIRE(ns >= 2 && ns <= MAXB);
    for (unsigned i = 1; i < ns + 1; i++) REQUIRE((b[i] = hk_zone_alloc(z, SZ)) != NULL);
    REQUIRE(run_of(b[ns - 1]) == r && run_of(b[ns]) != r); /* r is full, the next run current */
    hold_arg f = {z, b[0], 0, 0, 0};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, free_one_and_wait, &f) == 0);
    while (!__atomic_load_n(&f.freed, __ATOMIC_ACQUIRE)) sched_yield();
    CHECK_EQ(live_of(z), (size_t)ns);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    for (unsigned i = 1; i < ns; i++) CHECK_EQ(hk_zone_free(z, b[i]), HK_OK);
    hk_zone_trim(z);         /* the slots in this thread's cache go back to their runs */
    CHECK(r->first != NULL); /* still a run: its slot in the batch counts */
    CHECK_EQ(r->used, 1u);
    CHECK_EQ(live_of(z), 1);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    __atomic_store_n(&f.go, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    CHECK_EQ(f.fails, 0);
    zone_heap *h = zone_run_ext(run_of(b[ns]))->heap;
    CHECK(__atomic_load_n(&h->inbox, __ATOMIC_ACQUIRE) != NULL);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* a refill (a class this heap has no run of) collects: r empties */
    void *other = hk_zone_alloc(z, 100);
    CHECK(other != NULL);
    CHECK(__atomic_load_n(&h->inbox, __ATOMIC_ACQUIRE) == NULL);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, other), HK_OK);
    CHECK_EQ(hk_zone_free(z, b[ns]), HK_OK);
    CHECK_EQ(live_of(z), 0);
    CHECK_EQ(rep.count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* ---- reuse before carving ------------------------------------------------------- */

/* Regression (peak RSS of a producer whose blocks other threads free: 2.0
 * MiB against mimalloc's 0.8 on a 2-thread ring): slots freed by other
 * threads went back to their owner only at its refill, so every run was
 * carved to its end first, faulting in all of its pages. The owner now
 * collects before carving a fresh slot, and takes a run of the class with
 * freed slots before the current run's untouched ones. */
HKT_TEST(owner_reuses_remotely_freed_slots_before_carving) {
    trep rep;
    hk_zone *z = mk_thr_counting(&rep);
    REQUIRE(z != NULL);
    enum { MAXK = 512 };
    static void *a[MAXK], *b[MAXK];
    /* one run, every slot carved so far used (slots are carved in batches:
     * allocate until its free list is empty), all freed remotely: the same
     * slots serve the next K and nothing more is carved */
    REQUIRE((a[0] = hk_zone_alloc(z, 40)) != NULL);
    zone_run *r = run_of(a[0]);
    int K = 1;
    while (r->free && K < MAXK) REQUIRE((a[K++] = hk_zone_alloc(z, 40)) != NULL);
    REQUIRE(!r->free && run_of(a[K - 1]) == r);
    uint32_t carved = r->bump;
    CHECK_EQ(carved, (uint32_t)K);
    CHECK_EQ(remote_free_n(z, a, K), 0);
    for (int i = 0; i < K; i++) REQUIRE((b[i] = hk_zone_alloc(z, 40)) != NULL);
    CHECK(run_of(b[K - 1]) == r);
    CHECK_EQ(r->bump, carved);
    for (int i = 0; i < K; i++) {
        int found = 0;
        for (int j = 0; j < K; j++) found |= b[i] == a[j];
        CHECK(found);
    }
    /* a full run's slots freed remotely come before the current run's
     * untouched slots, once the collection is due (ZONE_COLLECT_EVERY
     * allocations after the last one): the collection puts them in the
     * heap's cache, which serves the class first */
    static zt_two_runs t;
    REQUIRE(zt_full_run_then_next(z, &t));
    for (unsigned i = 0; i < ZONE_COLLECT_EVERY; i++) CHECK_EQ(hk_zone_free(z, hk_zone_alloc(z, 300)), HK_OK);
    CHECK_EQ(remote_free_n(z, t.c, (int)t.ns - 1), 0); /* r1 keeps one used slot */
    zt_older_run_serves_next(z, &t, ZONE_RUN_CUR);
    for (int i = 0; i < K; i++) CHECK_EQ(hk_zone_free(z, b[i]), HK_OK);
    CHECK_EQ(live_of(z), 0);
    CHECK_EQ(rep.count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* The entries waiting in heap h's inbox. */
static unsigned inbox_entries(zone_heap *h) {
    unsigned n = 0;
    for (zone_rnode *b = __atomic_load_n(&h->inbox, __ATOMIC_ACQUIRE); b; b = b->next) n += b->n;
    return n;
}

/* Collections are spaced: remote frees pushed right after a collection
 * wait until the heap has made ZONE_COLLECT_EVERY more allocations while
 * the class has untouched slots to carve (one exchange of the inbox then
 * takes every batch that came meanwhile); a refill that finds no partial
 * run collects at once. */
HKT_TEST(remote_frees_collected_every_collect_every_allocations) {
    trep rep;
    hk_zone *z = mk_thr_counting(&rep);
    REQUIRE(z != NULL);
    enum { MAXN = 64 };
    void *a[MAXN];
    /* the slots carved so far, all used (the run's free list empty) */
    REQUIRE((a[0] = hk_zone_alloc(z, 40)) != NULL);
    zone_run *r = run_of(a[0]);
    zone_heap *h = zone_run_ext(r)->heap;
    int N = 1;
    while (r->free && N < MAXN) REQUIRE((a[N++] = hk_zone_alloc(z, 40)) != NULL);
    REQUIRE(!r->free && N >= 4 && r->bump < r->nslots);
    /* a first collection (due: none yet), then frees queued right after it */
    CHECK_EQ(remote_free_n(z, a, 1), 0);
    void *b = hk_zone_alloc(z, 40); /* the freed slot, collected */
    CHECK(b == a[0]);
    uint64_t next = h->collect_at;
    CHECK(next > h->alloc_count);
    CHECK_EQ(remote_free_n(z, a + 1, N / 2), 0);
    CHECK_EQ(inbox_entries(h), (unsigned)(N / 2));
    /* not due: allocations carve and the run stays queued */
    enum { MAXC = 3 * ZONE_COLLECT_EVERY }; /* and a carve's batch at most */
    void *c[MAXC];
    unsigned n = 0;
    while (h->alloc_count + 1 < next && n < MAXC) REQUIRE((c[n++] = hk_zone_alloc(z, 40)) != NULL);
    CHECK_EQ(inbox_entries(h), (unsigned)(N / 2));
    CHECK(r->bump > (uint32_t)N); /* carved instead */
    /* due: the next carve or reuse collects first */
    while (__atomic_load_n(&h->inbox, __ATOMIC_ACQUIRE) && n < MAXC)
        REQUIRE((c[n++] = hk_zone_alloc(z, 40)) != NULL);
    CHECK(__atomic_load_n(&h->inbox, __ATOMIC_ACQUIRE) == NULL);
    CHECK(h->alloc_count >= next);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    for (unsigned i = 0; i < n; i++) CHECK_EQ(hk_zone_free(z, c[i]), HK_OK);
    for (int i = 1 + N / 2; i < N; i++) CHECK_EQ(hk_zone_free(z, a[i]), HK_OK);
    CHECK_EQ(hk_zone_free(z, b), HK_OK);
    CHECK_EQ(live_of(z), 0);
    CHECK_EQ(rep.count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* The same for the owner's own frees: a run of the class with freed slots
 * serves the next allocation before the current run's untouched slots
 * (a churning thread's peak RSS: 1.5 -> 1.3 MiB on suite threads). */
HKT_TEST(owner_reuses_own_freed_slots_in_older_runs_before_carving) {
    trep rep;
    hk_zone *z = mk_thr_counting(&rep);
    REQUIRE(z != NULL);
    static zt_two_runs t;
    REQUIRE(zt_full_run_then_next(z, &t));
    for (unsigned i = 0; i + 1 < t.ns; i++) CHECK_EQ(hk_zone_free(z, t.c[i]), HK_OK); /* r1 keeps one */
    /* out of this thread's cache (whose newest slot the next allocation
     * would take: zone_cache_serves_the_class_lifo) into r1's free list */
    hk_zone_trim(z);
    zt_older_run_serves_next(z, &t, ZONE_RUN_PARTIAL);
    CHECK_EQ(live_of(z), 0);
    CHECK_EQ(rep.count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* ---- the owner's realloc and carving ------------------------------------------- */

typedef struct {
    hk_zone *z;
    void *p, *q;
} realloc_arg;

static void *realloc_other(void *arg) {
    realloc_arg *a = (realloc_arg *)arg;
    a->q = hk_zone_realloc(a->z, a->p, 500);
    return NULL;
}

/* realloc of the calling thread's own slot: in place while the size fits
 * the slot and wastes at most half of it, else moved (bytes kept, the old
 * slot freed by the owner's path); exact statistics either way; a freed
 * slot reported; another thread's slot handled by the general path. */
HKT_TEST(owner_realloc_in_place_moved_and_misused) {
    trep rep;
    hk_zone *z = mk_thr_counting(&rep);
    REQUIRE(z != NULL);
    unsigned char *p = hk_zone_alloc(z, 200);
    REQUIRE(p != NULL);
    for (int i = 0; i < 200; i++) p[i] = (unsigned char)i;
    unsigned char *q = hk_zone_realloc(z, p, 150); /* stride 208: 150 >= 200 / 2 */
    CHECK(q == p);
    hk_stats s;
    hk_zone_stats(z, &s);
    CHECK_EQ(s.used, 150);
    CHECK_EQ(s.live_blocks, 1);
    CHECK_EQ(hk_zone_usable_size(z, q), 200);
    q = hk_zone_realloc(z, p, 190); /* grows in place */
    CHECK(q == p);
    unsigned char *m = hk_zone_realloc(z, q, 300); /* another class: moved */
    REQUIRE(m != NULL);
    CHECK(m != q);
    for (int i = 0; i < 150; i++) CHECK_EQ(m[i], (unsigned char)i);
    hk_zone_stats(z, &s);
    CHECK_EQ(s.used, 300);
    CHECK_EQ(s.live_blocks, 1);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* the old slot is free: realloc of it is a double free, reported */
    CHECK(hk_zone_realloc(z, q, 40) == NULL);
    CHECK_EQ(rep.double_free, 1);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* another thread reallocs this thread's block */
    realloc_arg a = {z, m, NULL};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, realloc_other, &a) == 0);
    pthread_join(t, NULL);
    REQUIRE(a.q != NULL);
    for (int i = 0; i < 150; i++) CHECK_EQ(((unsigned char *)a.q)[i], (unsigned char)i);
    CHECK_EQ(hk_zone_free(z, a.q), HK_OK);
    CHECK_EQ(live_of(z), 0);
    CHECK_EQ(rep.count, 1);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* A carve takes, besides the slot it returns, the run's next slots whose
 * header and link lie in the page that slot already touches, onto the free
 * list (so the next allocations take the inline path); none beyond it, and
 * at most ZONE_CARVE_MAX slots in all (a bound on the carve's work). Two
 * sizes: 40 bytes (84 slots a page: the count bound applies) and 1000
 * (4 a page: the page bound applies). */
HKT_TEST(carve_batch_stays_in_the_touched_page) {
    static const size_t sizes[] = {40, 1000};
    for (unsigned t = 0; t < 2; t++) {
        size_t N = sizes[t];
        trep rep;
        hk_zone *z = mk_thr_counting(&rep);
        REQUIRE(z != NULL);
        unsigned char *p = hk_zone_alloc(z, N); /* a new run: its first slot, carved */
        REQUIRE(p != NULL);
        zone_run *r = run_of(p);
        unsigned char *q = hk_zone_alloc(z, N); /* from the carve's batch */
        REQUIRE(q != NULL && run_of(q) == r);
        uintptr_t pg = ZONE_CARVE_SPAN;
        uintptr_t end = ((uintptr_t)p - ZONE_HDR + r->stride + ZONE_OVERLAP + pg - 1) & ~(pg - 1);
        uint32_t carved = r->bump;
        CHECK(carved >= 2 && carved <= ZONE_CARVE_MAX);
        CHECK((uintptr_t)r->first + (size_t)(carved - 1) * r->stride + ZONE_HDR + sizeof(void *) <= end);
        if (t == 0) CHECK_EQ(carved, ZONE_CARVE_MAX);
        if (t == 1) /* the next slot's link would end past the page */
            CHECK((uintptr_t)r->first + (size_t)carved * r->stride + ZONE_HDR + sizeof(void *) > end);
        CHECK_EQ(hk_zone_check(z), HK_OK);
        hk_stats s;
        hk_zone_stats(z, &s);
        CHECK_EQ(s.live_blocks, 2);
        CHECK_EQ(s.used, 2 * N);
        /* the batch serves the next allocations without carving */
        void *more[512];
        unsigned k = 0;
        while (r->free && k < 512) REQUIRE((more[k++] = hk_zone_alloc(z, N)) != NULL);
        CHECK_EQ(r->bump, carved);
        CHECK_EQ(k, carved - 2);
        for (unsigned i = 0; i < k; i++) CHECK_EQ(hk_zone_free(z, more[i]), HK_OK);
        CHECK_EQ(hk_zone_free(z, p), HK_OK);
        CHECK_EQ(hk_zone_free(z, q), HK_OK);
        CHECK_EQ(live_of(z), 0);
        CHECK_EQ(rep.count, 0);
        CHECK_EQ(hk_zone_check(z), HK_OK);
        hk_zone_destroy(z);
    }
}

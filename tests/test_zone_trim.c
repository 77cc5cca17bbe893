/* Zone memory given back to the OS (src/zone_decay.c, hk_zone_trim): trim
 * gives back every free page (mincore says they left), decay after half to
 * all of the decay time and not before, the hysteresis (little freed memory
 * and short alloc/free cycles cost no system call), statistics unchanged,
 * check verifying the given-back spans, per-thread heaps' spare runs (and
 * an abandoned heap's runs) trimmed, memory reused after being given back,
 * caller memory and HK_FLAG_FILL left alone, and trimming while other
 * threads allocate (run under ThreadSanitizer by make check-tsan). The
 * preload scenario of issue 21 is tests/zone_trim_prog.c. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "heapkit/zone.h"
#include "hk_test.h"
#include "zone_internal.h"

#include <pthread.h>
#include <time.h>

static hk_zone *mk(int decay_ms, uint32_t flags) {
    return hk_zone_create(&(hk_zone_desc){
        .size = 1 << 20, .grow_size = 1 << 20, .flags = flags, .name = "trim", .decay_ms = decay_ms});
}

static hk_zone_info info_of(hk_zone *z) {
    hk_zone_info i;
    hk_zone_get_info(z, &i);
    return i;
}

static void sleep_ms(unsigned ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Pages of [p, p+n) resident now (n a multiple of the page size). */
static size_t resident_pages(void *p, size_t n) {
    size_t page = hk_page_size(), np = n / page, r = 0;
    unsigned char *vec = malloc(np ? np : 1);
    if (!vec || hk_os_resident(p, n, vec) != 0) {
        free(vec);
        return (size_t)-1;
    }
    for (size_t i = 0; i < np; i++) r += vec[i] & 1;
    free(vec);
    return r;
}

/* Allocates n blocks of sz bytes, each written whole. */
static void fill_blocks(hk_zone *z, void **b, int n, size_t sz) {
    for (int i = 0; i < n; i++) {
        b[i] = hk_zone_alloc(z, sz);
        if (b[i]) memset(b[i], 0x77, sz);
    }
}

/* Every clean free block's span is out of memory (mincore). Returns the
 * spans' resident pages (0 expected). Zone not in use elsewhere. */
static size_t clean_resident(hk_zone *z) {
    size_t res = 0;
    for (uint32_t ri = 0; ri < z->nregions; ri++) {
        zone_region *r = &z->regions[ri];
        for (zone_blk *b = (zone_blk *)r->base; (unsigned char *)b < r->end; b = zone_next(b)) {
            if ((b->bits & ZB_USED) || !(b->bits & ZB_FREE_CLEAN)) continue;
            uintptr_t lo;
            size_t span = zone_free_span(z, b, zone_bsize(b), &lo);
            res += resident_pages((void *)lo, span);
        }
    }
    return res;
}

HKT_TEST(gives_back_every_free_page) {
    hk_zone *z = mk(-1, 0);
    REQUIRE(z);
    static void *b[256];
    fill_blocks(z, b, 256, 64 << 10); /* 16 MiB of plain blocks, resident */
    for (int i = 0; i < 256; i++) REQUIRE(b[i]);
    for (int i = 0; i < 256; i += 2) hk_zone_free(z, b[i]); /* holes of 64 KiB */
    hk_stats before, after;
    hk_zone_stats(z, &before);
    size_t n = hk_zone_trim(z);
    hk_zone_stats(z, &after);
    hk_zone_info in = info_of(z);
    CHECK(n >= 128u * (60u << 10)); /* each hole gives back at least 60 KiB */
    CHECK_EQ(in.decommitted_bytes, n);
    CHECK(in.decommit_count >= 128);
    CHECK_EQ(clean_resident(z), 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* statistics do not move: free memory stays free */
    CHECK_EQ(before.capacity, after.capacity);
    CHECK_EQ(before.free, after.free);
    CHECK_EQ(before.used, after.used);
    CHECK_EQ(before.live_blocks, after.live_blocks);
    CHECK_EQ(before.largest_free, after.largest_free);
    /* the live blocks kept their bytes */
    for (int i = 1; i < 256; i += 2) {
        unsigned char *c = b[i];
        CHECK(c[0] == 0x77 && c[(64 << 10) - 1] == 0x77);
    }
    CHECK_EQ(hk_zone_trim(z), 0); /* nothing left to give */
    for (int i = 1; i < 256; i += 2) hk_zone_free(z, b[i]);
    CHECK(hk_zone_trim(z) > 0);
    CHECK_EQ(clean_resident(z), 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(reuse_reads_as_written) {
    /* runs and plain blocks carved from given-back memory: every byte
     * written reads back, calloc's bytes are zero, check passes throughout */
    hk_zone *z = mk(-1, 0);
    REQUIRE(z);
    enum { N = 20000 };
    static unsigned char *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = hk_zone_alloc(z, 16 + (size_t)(i % 200));
        REQUIRE(p[i]);
        memset(p[i], 0xa5, 16 + (size_t)(i % 200));
    }
    size_t runs_before = info_of(z).runs;
    for (int i = 0; i < N; i++) hk_zone_free(z, p[i]);
    CHECK(hk_zone_trim(z) > (size_t)1 << 20);
    CHECK(info_of(z).runs < runs_before / 4); /* empty runs went back too */
    CHECK_EQ(hk_zone_check(z), HK_OK);
    for (int i = 0; i < N; i++) {
        size_t n = 16 + (size_t)(i % 200);
        p[i] = (i & 1) ? hk_zone_calloc(z, 1, n) : hk_zone_alloc(z, n);
        REQUIRE(p[i]);
        if (i & 1)
            for (size_t k = 0; k < n; k++) CHECK(p[i][k] == 0);
        memset(p[i], i & 0xff, n);
    }
    unsigned char *big = hk_zone_alloc(z, 3 << 20);
    REQUIRE(big);
    memset(big, 0x3c, 3 << 20);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    int bad = 0;
    for (int i = 0; i < N; i++)
        for (size_t k = 0; k < 16 + (size_t)(i % 200); k++) bad += p[i][k] != (unsigned char)(i & 0xff);
    for (size_t k = 0; k < (3u << 20); k++) bad += big[k] != 0x3c;
    CHECK_EQ(bad, 0);
    for (int i = 0; i < N; i++) hk_zone_free(z, p[i]);
    hk_zone_free(z, big);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(decay_after_half_to_full_time) {
    /* 200 ms decay: nothing goes back at once, everything within the decay
     * time (plus the poll interval: a small alloc/free every 10 ms) */
    hk_zone *z = mk(200, 0);
    REQUIRE(z);
    static void *b[64];
    fill_blocks(z, b, 64, 128 << 10); /* 8 MiB */
    for (int i = 0; i < 64; i++) REQUIRE(b[i]);
    uint64_t t0 = hk_now_ns();
    for (int i = 0; i < 64; i++) hk_zone_free(z, b[i]);
    CHECK_EQ(info_of(z).decommitted_bytes, 0);
    uint64_t t_back = 0;
    while (hk_now_ns() - t0 < 2000000000ull) {
        void *s = hk_zone_alloc(z, 40);
        hk_zone_free(z, s);
        if (info_of(z).decommitted_bytes >= (size_t)7 << 20) {
            t_back = hk_now_ns() - t0;
            break;
        }
        sleep_ms(10);
    }
    CHECK(t_back >= 100000000ull);          /* not before half the decay time */
    CHECK(t_back && t_back < 800000000ull); /* the decay time, plus slack for a busy machine */
    CHECK_EQ(clean_resident(z), 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(decay_never_when_negative) {
    hk_zone *z = mk(-1, 0);
    REQUIRE(z);
    static void *b[32];
    fill_blocks(z, b, 32, 128 << 10);
    for (int i = 0; i < 32; i++) hk_zone_free(z, b[i]);
    for (int k = 0; k < 30; k++) {
        hk_zone_free(z, hk_zone_alloc(z, 40));
        hk_zone_free(z, hk_zone_alloc(z, 100 << 10));
        sleep_ms(5);
    }
    CHECK_EQ(info_of(z).decommitted_bytes, 0);
    CHECK(hk_zone_trim(z) > 0);
    hk_zone_destroy(z);
}

HKT_TEST(prefault_keeps_pages_unless_asked) {
    /* HK_ZONE_PREFAULT promises no page fault on reuse: no decay by default */
    hk_zone *z = mk(0, HK_ZONE_PREFAULT);
    REQUIRE(z);
    CHECK_EQ(z->decay_epoch_ns, 0);
    static void *b[24];
    fill_blocks(z, b, 24, 128 << 10);
    for (int i = 0; i < 24; i++) hk_zone_free(z, b[i]);
    for (int k = 0; k < 30; k++) {
        hk_zone_free(z, hk_zone_alloc(z, 40));
        hk_zone_free(z, hk_zone_alloc(z, 200 << 10));
        sleep_ms(2);
    }
    CHECK_EQ(info_of(z).decommit_count, 0);
    CHECK(z->decay_armed == 0);
    CHECK(hk_zone_trim(z) > 0); /* asked for: given back */
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
    /* a decay time set explicitly is honoured */
    z = mk(40, HK_ZONE_PREFAULT);
    REQUIRE(z);
    CHECK(z->decay_epoch_ns == 20000000u);
    hk_zone_destroy(z);
}

HKT_TEST(hysteresis_no_thrash) {
    /* a 4 MiB block allocated, written and freed over and over across many
     * epochs (20 ms decay: 10 ms epochs) is never given back: each free
     * dirties it in the current epoch (16 MiB growth chunks: the block is
     * carved from the region, not given a region of its own) */
    hk_zone *z = hk_zone_create(&(hk_zone_desc){.size = 1 << 20, .grow_size = 16 << 20, .decay_ms = 20});
    REQUIRE(z);
    void *keep = hk_zone_alloc(z, 1000); /* so the zone is never empty */
    REQUIRE(keep);
    uint64_t t0 = hk_now_ns();
    int cycles = 0;
    while (cycles < 20 || hk_now_ns() - t0 < 150000000ull) { /* many epochs, however slow the build */
        unsigned char *p = hk_zone_alloc(z, 4 << 20);
        REQUIRE(p);
        memset(p, 1, 4 << 20);
        hk_zone_free(z, p);
        cycles++;
    }
    CHECK_EQ(info_of(z).decommit_count, 0);
    CHECK_EQ(info_of(z).regions, 1); /* the block came from the region */
    /* below ZONE_DECAY_ARM freed, the clock never runs: 512 KiB stays */
    hk_zone *y = mk(1, 0);
    REQUIRE(y);
    void *q = hk_zone_alloc(y, 512 << 10);
    REQUIRE(q);
    memset(q, 1, 512 << 10);
    hk_zone_free(y, q);
    for (int k = 0; k < 20; k++) {
        hk_zone_free(y, hk_zone_alloc(y, 40));
        sleep_ms(2);
    }
    CHECK_EQ(info_of(y).decommit_count, 0);
    CHECK(y->decay_armed == 0);
    hk_zone_free(z, keep);
    hk_zone_destroy(y);
    hk_zone_destroy(z);
}

HKT_TEST(check_verifies_given_back_spans) {
    hk_zone *z = mk(-1, 0);
    REQUIRE(z);
    static void *b[16];
    fill_blocks(z, b, 16, 64 << 10);
    for (int i = 0; i < 16; i += 2) hk_zone_free(z, b[i]);
    REQUIRE(hk_zone_trim(z) > 0);
    REQUIRE(hk_zone_check(z) == HK_OK);
    /* the total disagrees with the blocks */
    z->clean_bytes += z->page;
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    z->clean_bytes -= z->page;
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
    /* a free block of caller memory marked as given back */
    static unsigned char mem[1 << 20] __attribute__((aligned(4096)));
    hk_zone *c = hk_zone_create(&(hk_zone_desc){.memory = mem, .size = sizeof mem, .flags = HK_FLAG_QUIET});
    REQUIRE(c);
    void *s = hk_zone_alloc(c, 100 << 10);
    void *t = hk_zone_alloc(c, 100 << 10);
    REQUIRE(s && t);
    hk_zone_free(c, s); /* a free block between the start and t */
    zone_blk *fb = (zone_blk *)c->regions[0].base;
    REQUIRE(!(fb->bits & ZB_USED));
    zone_set_hdr(fb, zone_bsize(fb), 0, fb->bits | ZB_FREE_CLEAN, 0);
    CHECK_EQ(hk_zone_check(c), HK_ERR_CORRUPT);
    zone_set_hdr(fb, zone_bsize(fb), 0, fb->bits & ~ZB_FREE_CLEAN, 0);
    CHECK_EQ(hk_zone_check(c), HK_OK);
    hk_zone_destroy(c);
}

HKT_TEST(double_free_still_reported) {
    /* a block's old header in given-back memory reads as zeros: the double
     * free is still found (free space) and nothing changes */
    hkt_errors errs = {0};
    hk_zone *z = hk_zone_create(&(hk_zone_desc){.size = 1 << 20,
                                                .grow_size = 1 << 20,
                                                .decay_ms = -1,
                                                .on_error = hkt_on_error,
                                                .error_user = &errs});
    REQUIRE(z);
    void *a = hk_zone_alloc(z, 100);
    void *p = hk_zone_alloc(z, 256 << 10);
    void *c = hk_zone_alloc(z, 100);
    REQUIRE(a && p && c);
    void *inner = (unsigned char *)p + (64 << 10); /* a pointer into p, its page given back below */
    hk_zone_free(z, p);
    REQUIRE(hk_zone_trim(z) > 0);
    CHECK_EQ(hk_zone_free(z, inner), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(errs.count, 1);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_free(z, a);
    hk_zone_free(z, c);
    hk_zone_destroy(z);
}

HKT_TEST(leaves_caller_memory_and_fill) {
    static unsigned char mem[4 << 20] __attribute__((aligned(4096)));
    hk_zone *z = hk_zone_create(&(hk_zone_desc){.memory = mem, .size = sizeof mem, .flags = HK_FLAG_QUIET});
    REQUIRE(z);
    void *p = hk_zone_alloc(z, 1 << 20);
    REQUIRE(p);
    memset(p, 1, 1 << 20);
    hk_zone_free(z, p);
    CHECK_EQ(hk_zone_trim(z), 0);
    CHECK_EQ(info_of(z).decommitted_bytes, 0);
    hk_zone_destroy(z);
    /* a grown zone with caller memory added: only its own memory goes */
    memset(mem, 0, sizeof mem); /* every page resident */
    hk_zone *g = mk(-1, 0);
    REQUIRE(g);
    REQUIRE(hk_zone_add_region(g, mem, sizeof mem) == HK_OK);
    static void *b[64];
    fill_blocks(g, b, 64, 100 << 10); /* some in mem, some grown */
    for (int i = 0; i < 64; i++) REQUIRE(b[i]);
    for (int i = 0; i < 64; i++) hk_zone_free(g, b[i]);
    CHECK(hk_zone_trim(g) > 0);
    CHECK_EQ(resident_pages(mem, sizeof mem), sizeof mem / hk_page_size()); /* untouched by trim */
    CHECK_EQ(hk_zone_check(g), HK_OK);
    hk_zone_destroy(g);
    /* HK_FLAG_FILL: the free fill must stay checkable */
    hk_zone *f = mk(1, HK_FLAG_FILL);
    REQUIRE(f);
    p = hk_zone_alloc(f, 2 << 20);
    REQUIRE(p);
    hk_zone_free(f, p);
    CHECK_EQ(hk_zone_trim(f), 0);
    CHECK_EQ(hk_zone_check(f), HK_OK);
    hk_zone_destroy(f);
}

/* ---- per-thread heaps ------------------------------------------------------------ */

typedef struct {
    hk_zone *z;
    pthread_barrier_t *bar;
    int fail;
} tjob;

/* Allocates and frees small blocks of several classes (the heap keeps a
 * spare run per class), waits for the trim, allocates again and checks the
 * bytes. */
static void *heap_worker(void *arg) {
    tjob *j = arg;
    enum { N = 6000 };
    static unsigned char *p[N];
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < N; i++) {
            p[i] = hk_zone_alloc(j->z, 24 + (size_t)(i % 8) * 100);
            if (!p[i]) {
                j->fail++;
                return NULL;
            }
            memset(p[i], (i + r) & 0xff, 24);
        }
        for (int i = 0; i < N; i++) {
            if (p[i][0] != (unsigned char)((i + r) & 0xff)) j->fail++;
            hk_zone_free(j->z, p[i]);
        }
        pthread_barrier_wait(j->bar); /* the main thread trims */
        pthread_barrier_wait(j->bar);
    }
    return NULL;
}

HKT_TEST(thread_heaps_spare_runs) {
    hk_zone *z = mk(-1, HK_ZONE_THREADS);
    REQUIRE(z);
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    tjob j = {z, &bar, 0};
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, heap_worker, &j) == 0);
    for (int r = 0; r < 2; r++) {
        pthread_barrier_wait(&bar);
        size_t runs = info_of(z).runs;
        CHECK(runs >= 8); /* the worker's heap holds at least its spare runs */
        CHECK(hk_zone_trim(z) > 0);
        CHECK(info_of(z).runs < runs); /* its spares went back (its current runs stay) */
        CHECK_EQ(hk_zone_check(z), HK_OK);
        CHECK_EQ(clean_resident(z), 0);
        pthread_barrier_wait(&bar);
    }
    pthread_join(t, NULL);
    CHECK_EQ(j.fail, 0);
    /* the thread exited: its heap was abandoned, its empty runs (its
     * current ones too) given back; trim cleans their pages */
    CHECK_EQ(info_of(z).runs, 0);
    (void)hk_zone_trim(z);
    CHECK_EQ(info_of(z).runs, 0);
    hk_stats s;
    hk_zone_stats(z, &s);
    CHECK_EQ(s.live_blocks, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* a new thread adopts the heap and allocates from given-back memory */
    j.fail = 0;
    REQUIRE(pthread_create(&t, NULL, heap_worker, &j) == 0);
    for (int r = 0; r < 2; r++) {
        pthread_barrier_wait(&bar);
        pthread_barrier_wait(&bar);
    }
    pthread_join(t, NULL);
    CHECK_EQ(j.fail, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    pthread_barrier_destroy(&bar);
    hk_zone_destroy(z);
}

/* Threads churn small and large blocks while the main thread trims over and
 * over; the decay clock (5 ms) runs from every thread's slow paths. */
typedef struct {
    hk_zone *z;
    int stop, fail;
    unsigned seed;
} cjob;

static void *churn_worker(void *arg) {
    cjob *j = arg;
    enum { K = 512 };
    unsigned char *slot[K] = {0};
    size_t len[K] = {0};
    unsigned s = j->seed;
    while (!__atomic_load_n(&j->stop, __ATOMIC_RELAXED)) {
        s = s * 1103515245u + 12345u;
        unsigned i = (s >> 8) % K;
        if (slot[i]) {
            if (slot[i][0] != (unsigned char)i || slot[i][len[i] - 1] != (unsigned char)i) j->fail++;
            hk_zone_free(j->z, slot[i]);
        }
        len[i] = (s >> 20) % 16 == 0 ? (size_t)(64 << 10) + (s % 4096) : 16 + (s >> 4) % 2000;
        slot[i] = hk_zone_alloc(j->z, len[i]);
        if (!slot[i]) {
            j->fail++;
            continue;
        }
        slot[i][0] = slot[i][len[i] - 1] = (unsigned char)i;
    }
    for (unsigned i = 0; i < K; i++) hk_zone_free(j->z, slot[i]);
    return NULL;
}

HKT_TEST(races_with_thread_heaps) {
    hk_zone *z = mk(5, HK_ZONE_THREADS);
    REQUIRE(z);
    enum { T = 3 };
    cjob j[T];
    pthread_t t[T];
    for (int i = 0; i < T; i++) {
        j[i] = (cjob){z, 0, 0, 7u + (unsigned)i};
        REQUIRE(pthread_create(&t[i], NULL, churn_worker, &j[i]) == 0);
    }
    uint64_t t0 = hk_now_ns();
    int trims = 0;
    while (hk_now_ns() - t0 < 400000000ull) {
        (void)hk_zone_trim(z);
        trims++;
        sleep_ms(2);
    }
    for (int i = 0; i < T; i++) __atomic_store_n(&j[i].stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < T; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < T; i++) CHECK_EQ(j[i].fail, 0);
    CHECK(trims > 10);
    CHECK(info_of(z).decommit_count > 0);
    hk_stats s;
    hk_zone_stats(z, &s);
    CHECK_EQ(s.live_blocks, 0);
    CHECK_EQ(s.used, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* The decay clock is read from a thread's frees even when no run ever
 * empties (its small blocks share their run with live ones), in a thread
 * heap and in the zone's own runs (a thread holding heaps in 8 other zones
 * gets none in a 9th and uses the zone's runs under the lock). */
static int decays_while_pinging(hk_zone *z) {
    void *live[16];
    for (int i = 0; i < 16; i++) live[i] = hk_zone_alloc(z, 48); /* the ping-pong class keeps live blocks */
    static void *b[64];
    fill_blocks(z, b, 64, 128 << 10);
    for (int i = 0; i < 64; i++) hk_zone_free(z, b[i]);
    int ok = 0;
    uint64_t t0 = hk_now_ns();
    while (!ok && hk_now_ns() - t0 < 2000000000ull) {
        sleep_ms(20);
        volatile char *s = hk_zone_alloc(z, 48);
        s[0] = 1;
        hk_zone_free(z, (void *)s);
        ok = info_of(z).decommitted_bytes >= (size_t)7 << 20;
    }
    for (int i = 0; i < 16; i++) hk_zone_free(z, live[i]);
    return ok;
}

HKT_TEST(decay_polls_from_busy_runs) {
    hk_zone *z = mk(100, HK_ZONE_THREADS);
    REQUIRE(z);
    CHECK(decays_while_pinging(z));
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
    /* heap-less: this thread already holds heaps in 8 zones */
    hk_zone *other[8];
    for (int i = 0; i < 8; i++) {
        other[i] = mk(-1, HK_ZONE_THREADS);
        REQUIRE(other[i]);
        hk_zone_free(other[i], hk_zone_alloc(other[i], 40));
    }
    z = mk(100, HK_ZONE_THREADS);
    REQUIRE(z);
    CHECK(decays_while_pinging(z));
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
    for (int i = 0; i < 8; i++) hk_zone_destroy(other[i]);
}

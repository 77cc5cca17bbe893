/*
 * tests/test_gc_handles.c - the gc's references on the shared handle table:
 * the misuse table (the same answers as pool IDs and cache handles),
 * generations across slot reuse, wrapping (default) and retirement
 * (HK_GC_RETIRE) with recycle, the index-space limit, create refusals, the
 * paranoid after-op check and lock hooks through the instance core, growth
 * (reserved table pages, 64 slots at a time, desc.reserve_objects), four
 * threads growing one collector under its lock hooks, and the chunked
 * table a collector gets when the OS refuses the reservation.
 */
#include "hk_test.h"
#include "gc_internal.h"
#include "gc_test_util.h"

#include <pthread.h>

static const hk_gc_type k_leaf = {"leaf", 8, NULL, NULL, NULL};

static hkt_errors g_errs;

static hk_gc *mk(uint32_t flags, uint32_t index_bits) {
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    hk_gc_desc d = {0};
    d.flags = flags;
    d.index_bits = index_bits;
    d.name = "h";
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    return hk_gc_create(&d);
}

#define EXPECT(call, res, kind)                                                                              \
    do {                                                                                                     \
        int n_ = g_errs.count;                                                                               \
        CHECK_EQ((call), (res));                                                                             \
        CHECK_EQ(g_errs.count, n_ + 1);                                                                      \
        CHECK_EQ(g_errs.last_kind, (kind));                                                                  \
        CHECK_EQ(g_errs.last_result, (res));                                                                 \
    } while (0)

HKT_TEST(gc_references_are_handles) {
    hk_gc *gc = mk(0, 0);
    REQUIRE(gc);
    hk_gc_info in;
    hk_gc_get_info(gc, &in);
    CHECK_EQ(in.index_bits, HK_GC_DEFAULT_INDEX_BITS);
    hk_gc_obj *a = hk_gc_alloc(gc, &k_node), *b = hk_gc_alloc(gc, &k_node);
    uintptr_t va = (uintptr_t)a, vb = (uintptr_t)b;
    CHECK(va != 0 && va <= UINT32_MAX);
    CHECK_EQ(va & ((1u << 22) - 1u), 0); /* slot 0, then slot 1 */
    CHECK_EQ(vb & ((1u << 22) - 1u), 1);
    CHECK_EQ(va >> 22, vb >> 22); /* fresh slots: the same first generation */
    hk_block_info bi;
    CHECK_EQ(hk_gc_where(gc, a, &bi), HK_OK);
    CHECK_EQ(bi.id, (uint32_t)va);
    CHECK(bi.owner == (void *)a);
    hk_gc_release(gc, a);
    hk_gc_release(gc, b);
    hk_gc_collect(gc);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

HKT_TEST(gc_misuse_table) {
    hk_gc *gc = mk(HK_GC_IMMEDIATE, 0);
    REQUIRE(gc);
    hk_gc_obj *keep = hk_gc_alloc(gc, &k_node);
    hk_gc_obj *a = hk_gc_alloc(gc, &k_leaf);
    hk_gc_obj *field = NULL;
    /* NULL */
    EXPECT(hk_gc_retain(gc, NULL), HK_ERR_INVALID, HK_EK_INVALID_ARG);
    EXPECT(hk_gc_release(gc, NULL), HK_ERR_INVALID, HK_EK_INVALID_ARG);
    /* never issued: a slot never used, a generation ahead, generation 0, a real pointer */
    EXPECT(hk_gc_retain(gc, (hk_gc_obj *)((uintptr_t)a + 100u)), HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR);
    EXPECT(hk_gc_retain(gc, (hk_gc_obj *)((uintptr_t)a + (1u << 22))), HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR);
    EXPECT(hk_gc_release(gc, (hk_gc_obj *)(uintptr_t)1u), HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR);
    EXPECT(hk_gc_release(gc, (hk_gc_obj *)(void *)&field), HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR);
#ifndef _WIN32 /* a Windows stack lies below 4 GiB, where its address decodes as a (foreign) handle */
    CHECK_STR_CONTAINS(g_errs.last_message, "not a reference of this collector");
#endif
    /* another collector's */
    hk_gc_desc d2 = {0};
    d2.flags = HK_FLAG_QUIET;
    hk_gc *other = hk_gc_create(&d2);
    hk_gc_obj *theirs = hk_gc_alloc(other, &k_leaf);
    EXPECT(hk_gc_release(gc, theirs), HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR);
    EXPECT(hk_gc_assign(gc, &field, theirs), HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR);
    CHECK(field == NULL);
    CHECK_EQ(hk_gc_refcount(other, theirs), 1);
    hk_gc_destroy(other);
    /* released to zero (reclaimed at once in immediate mode): a second
     * release is a double free, every other use is stale */
    CHECK_EQ(hk_gc_release(gc, a), HK_OK);
    EXPECT(hk_gc_release(gc, a), HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE);
    EXPECT(hk_gc_retain(gc, a), HK_ERR_STALE, HK_EK_STALE);
    EXPECT(hk_gc_assign(gc, &field, a), HK_ERR_STALE, HK_EK_STALE);
    g_errs.count = 0;
    CHECK(hk_gc_data(gc, a) == NULL);
    CHECK_EQ(hk_gc_size(gc, a), 0);
    CHECK(hk_gc_type_of(gc, a) == NULL);
    CHECK_EQ(hk_gc_refcount(gc, a), 0);
    CHECK_EQ(g_errs.count, 4);
    CHECK_EQ(g_errs.last_kind, HK_EK_STALE);
    /* a field holding it, released through assign: the same double free */
    field = a;
    EXPECT(hk_gc_assign(gc, &field, NULL), HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE);
    CHECK(field == NULL);
    /* its slot reused (FIFO: after every other free slot of the chunk) */
    hk_gc_obj *fill[HK_GC_CHUNK_OBJECTS];
    int n = 0, reused = -1;
    while (n < (int)HK_GC_CHUNK_OBJECTS && reused < 0) {
        fill[n] = hk_gc_alloc(gc, &k_leaf);
        if (((uintptr_t)fill[n] & ((1u << 22) - 1u)) == ((uintptr_t)a & ((1u << 22) - 1u))) reused = n;
        n++;
    }
    REQUIRE(reused >= 0);
    CHECK((uintptr_t)fill[reused] != (uintptr_t)a); /* a new generation */
    EXPECT(hk_gc_release(gc, a), HK_ERR_STALE, HK_EK_STALE);
    EXPECT(hk_gc_retain(gc, a), HK_ERR_STALE, HK_EK_STALE);
    CHECK_EQ(hk_gc_refcount(gc, fill[reused]), 1);
    for (int i = 0; i < n; i++) hk_gc_release(gc, fill[i]);
    hk_gc_release(gc, keep);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

/* Default: generations wrap, the collector never runs out of slots. */
HKT_TEST(gc_generations_wrap_by_default) {
    hk_gc *gc = mk(HK_GC_IMMEDIATE, 24); /* 255 generations per slot */
    REQUIRE(gc);
    hk_gc_obj *first = hk_gc_alloc(gc, &k_leaf);
    hk_gc_release(gc, first);
    for (uint32_t i = 0; i < 300u * HK_GC_CHUNK_OBJECTS; i++) {
        hk_gc_obj *o = hk_gc_alloc(gc, &k_leaf);
        REQUIRE(o != NULL);
        hk_gc_release(gc, o);
    }
    hk_gc_info in;
    hk_gc_get_info(gc, &in);
    CHECK_EQ(in.retired_slots, 0);
    hk_stats st;
    hk_gc_stats(gc, &st);
    CHECK_EQ(st.free_blocks, HK_GC_GROW_OBJECTS); /* one growth was enough: FIFO reuse */
    /* every generation of slot 0 was issued: an old reference is stale, not foreign */
    g_errs.count = 0;
    CHECK_EQ(hk_gc_retain(gc, first), HK_ERR_STALE);
    CHECK_EQ(g_errs.last_kind, HK_EK_STALE);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

/* HK_GC_RETIRE: a slot that used every generation is never reused until
 * hk_gc_recycle. */
HKT_TEST(gc_retire_and_recycle) {
    hk_gc *gc = mk(HK_GC_IMMEDIATE | HK_GC_RETIRE, 24);
    REQUIRE(gc);
    hk_gc_obj *last0 = NULL;
    for (uint32_t i = 0; i < 256u * HK_GC_CHUNK_OBJECTS; i++) {
        hk_gc_obj *o = hk_gc_alloc(gc, &k_leaf);
        REQUIRE(o != NULL);
        if (((uintptr_t)o & ((1u << 24) - 1u)) == 0) last0 = o;
        hk_gc_release(gc, o);
    }
    hk_gc_info in;
    hk_gc_get_info(gc, &in);
    CHECK(in.retired_slots >= HK_GC_CHUNK_OBJECTS);
    EXPECT(hk_gc_release(gc, last0), HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE);
    CHECK_STR_CONTAINS(g_errs.last_message, "retired");
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    long n = hk_gc_recycle(gc);
    CHECK_EQ(n, (long)in.retired_slots);
    hk_gc_get_info(gc, &in);
    CHECK_EQ(in.retired_slots, 0);
    CHECK(hk_gc_alloc(gc, &k_leaf) != NULL);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

/* The index space bounds the objects allocated at once; failure is clean. */
HKT_TEST(gc_index_space_limit) {
    hk_gc *gc = mk(0, 10); /* 1023 objects */
    REQUIRE(gc);
    static hk_gc_obj *all[1023];
    for (int i = 0; i < 1023; i++) REQUIRE((all[i] = hk_gc_alloc(gc, &k_leaf)) != NULL);
    g_errs.count = 0;
    CHECK(hk_gc_alloc(gc, &k_leaf) == NULL);
    CHECK_EQ(g_errs.count, 1);
    CHECK_EQ(g_errs.last_kind, HK_EK_NOMEM);
    CHECK_STR_CONTAINS(g_errs.last_message, "all 1023 object slots");
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_release(gc, all[5]);
    hk_gc_step(gc, UINT64_MAX);
    CHECK(hk_gc_alloc(gc, &k_leaf) != NULL);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

HKT_TEST(gc_create_refusals_are_reported) {
    hkt_errors errs = {0};
    errs.quiet = 1;
    hk_gc_desc d = {0};
    d.on_error = hkt_on_error;
    d.error_user = &errs;
    d.lock.unlock = hkt_unlock; /* no lock */
    CHECK(hk_gc_create(&d) == NULL);
    CHECK_EQ(errs.count, 1);
    CHECK_EQ(errs.last_kind, HK_EK_INVALID_ARG);
    CHECK_STR_CONTAINS(errs.last_message, "lock hooks need both");
    d.lock.unlock = NULL;
    d.backing.alloc = (void *(*)(size_t, void *))abort; /* no free */
    CHECK(hk_gc_create(&d) == NULL);
    CHECK_EQ(errs.count, 2);
    CHECK_STR_CONTAINS(errs.last_message, "backing hooks need both");
    d.backing.alloc = NULL;
    d.index_bits = 9;
    CHECK(hk_gc_create(&d) == NULL);
    CHECK_EQ(errs.count, 3);
    CHECK_STR_CONTAINS(errs.last_message, "index_bits 9 is outside 10..24");
    d.index_bits = 25;
    CHECK(hk_gc_create(&d) == NULL);
    CHECK_EQ(errs.count, 4);
}

/* HK_FLAG_PARANOID: damage is reported by the next call that changes the
 * collector. */
HKT_TEST(gc_paranoid_reports_damage_on_next_call) {
    hk_gc *gc = mk(HK_FLAG_PARANOID, 0);
    REQUIRE(gc);
    hk_gc_obj *a = hk_gc_alloc(gc, &k_node), *b = hk_gc_alloc(gc, &k_node);
    CHECK_EQ(g_errs.count, 0);
    ((node *)hk_gc_data(gc, a))->ref[0] = b; /* an uncounted reference: b's count 1 covers it */
    CHECK_EQ(hk_gc_retain(gc, a), HK_OK);
    CHECK_EQ(g_errs.count, 0);
    ((node *)hk_gc_data(gc, a))->ref[1] = b; /* two references, count 1 */
    CHECK_EQ(hk_gc_release(gc, a), HK_OK);
    CHECK_EQ(g_errs.count, 1);
    CHECK_EQ(g_errs.last_result, HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(g_errs.last_message, "lower than the 2 references");
    ((node *)hk_gc_data(gc, a))->ref[0] = ((node *)hk_gc_data(gc, a))->ref[1] = NULL;
    /* a damaged header, found through the reference */
    gc_hdr *h = gc_find(gc, b);
    REQUIRE(h != NULL);
    h->rc = 0;
    hk_gc_obj *c = hk_gc_alloc(gc, &k_leaf);
    CHECK(c != NULL);
    CHECK_EQ(g_errs.count, 2);
    CHECK_STR_CONTAINS(g_errs.last_message, "live object with count zero");
    h->rc = 1;
    hk_gc_release(gc, c);
    CHECK_EQ(g_errs.count, 2);
    hk_gc_release(gc, a);
    hk_gc_release(gc, b);
    hk_gc_collect(gc);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

HKT_TEST(gc_lock_hooks_via_core) {
    hkt_errors_reset(&g_errs);
    hk_gc_desc d = {0};
    d.lock.lock = hkt_lock;
    d.lock.unlock = hkt_unlock;
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    hk_gc *gc = hk_gc_create(&d);
    REQUIRE(gc);
    hkt_lock_calls = 0;
    hkt_lock_max = 0;
    hk_gc_obj *a = hk_gc_alloc(gc, &k_leaf);
    CHECK(hk_gc_data(gc, a) != NULL);
    CHECK_EQ(hk_gc_release(gc, a), HK_OK);
    hk_gc_step(gc, UINT64_MAX);
    CHECK_EQ(hkt_lock_calls, 4);
    CHECK_EQ(hkt_lock_max, 1);
    CHECK_EQ(hkt_lock_depth, 0);
    hk_gc_destroy(gc);
    CHECK_EQ(hkt_lock_depth, 0);
}

/* Growth: slots are made free 64 at a time, chunks and table pages come
 * as needed, and nothing moves: a reference taken before a growth past a
 * table commit still resolves, a stale one is still reported as stale. */
HKT_TEST(gc_growth_past_table_commits) {
    hk_gc *gc = mk(0, 0);
    REQUIRE(gc);
    enum { N = 40000 };
    static hk_gc_obj *all[N];
    hk_gc_obj *dead = hk_gc_alloc(gc, &k_leaf);
    REQUIRE(dead);
    CHECK_EQ(hk_gc_release(gc, dead), HK_OK);
    CHECK(hk_gc_step(gc, UINT64_MAX) == 1);
    for (int i = 0; i < N; i++) REQUIRE((all[i] = hk_gc_alloc(gc, &k_leaf)) != NULL);
    hk_stats st;
    hk_gc_stats(gc, &st);
    CHECK_EQ(st.live_blocks, N);
    CHECK(st.free_blocks < HK_GC_GROW_OBJECTS);
    CHECK(hk_gc_data(gc, all[0]) != NULL && hk_gc_refcount(gc, all[N - 1]) == 1);
    EXPECT(hk_gc_retain(gc, dead), HK_ERR_STALE, HK_EK_STALE); /* its slot was reused */
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    for (int i = 0; i < N; i++) CHECK_EQ(hk_gc_release(gc, all[i]), HK_OK);
    (void)hk_gc_collect(gc);
    EXPECT(hk_gc_release(gc, all[N - 1]), HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

typedef struct gc_count_hooks {
    long allocs, frees;
} gc_count_hooks;
static void *gch_alloc(size_t n, void *user) {
    ((gc_count_hooks *)user)->allocs++;
    return malloc(n);
}
static void gch_free(void *p, size_t n, void *user) {
    (void)n;
    ((gc_count_hooks *)user)->frees++;
    free(p);
}

/* desc.reserve_objects: everything the objects need but their data is
 * made at create, so allocating up to that many calls the backing hooks
 * for nothing else and the overhead does not change. */
HKT_TEST(gc_reserve_objects) {
    static const hk_gc_type k_empty = {"empty", 0, NULL, NULL, NULL};
    gc_count_hooks ch = {0, 0};
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    hk_gc_desc d = {0};
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    d.backing.alloc = gch_alloc;
    d.backing.free = gch_free;
    d.backing.user = &ch;
    d.reserve_objects = 20000;
    hk_gc *gc = hk_gc_create(&d);
    REQUIRE(gc);
    hk_stats a, b;
    hk_gc_stats(gc, &a);
    CHECK(a.free_blocks >= 20000 && a.free_blocks < 20000 + HK_GC_GROW_OBJECTS);
    long before = ch.allocs;
    static hk_gc_obj *all[20000];
    for (int i = 0; i < 20000; i++) REQUIRE((all[i] = hk_gc_alloc(gc, &k_empty)) != NULL);
    CHECK_EQ(ch.allocs, before); /* size 0: no data; nothing else was allocated */
    hk_gc_stats(gc, &b);
    CHECK_EQ(b.overhead, a.overhead);
    for (int i = 0; i < 20000; i++) CHECK_EQ(hk_gc_release(gc, all[i]), HK_OK);
    (void)hk_gc_collect(gc);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
    CHECK_EQ(ch.allocs, ch.frees);
    /* a reserve past the index space is capped; one the hooks cannot meet fails create */
    d.index_bits = 10;
    d.reserve_objects = 1u << 20;
    gc = hk_gc_create(&d);
    REQUIRE(gc);
    hk_gc_stats(gc, &a);
    CHECK_EQ(a.free_blocks, 1023);
    hk_gc_destroy(gc);
}

/* Lock hooks: four threads allocate, release and step one collector at
 * once, well past a commit of the reference table (16,384 slots) and many
 * header chunks; every reference a thread holds stays its own object (its
 * data says so), and check passes at the end. Under TSan (make check-tsan)
 * this also shows the growth is inside the lock. */
static pthread_mutex_t g_gmu = PTHREAD_MUTEX_INITIALIZER;
static void gmu_lock(void *u) {
    (void)u;
    pthread_mutex_lock(&g_gmu);
}
static void gmu_unlock(void *u) {
    (void)u;
    pthread_mutex_unlock(&g_gmu);
}

typedef struct gc_thr {
    hk_gc *gc;
    int id, bad;
} gc_thr;

enum { GC_THR_N = 4, GC_THR_LIVE = 6000, GC_THR_ROUNDS = 3 };
static const hk_gc_type k_word = {"word", sizeof(uint32_t), NULL, NULL, NULL};

static void *gc_thr_main(void *arg) {
    gc_thr *t = (gc_thr *)arg;
    static hk_gc_obj *held[GC_THR_N][GC_THR_LIVE];
    hk_gc_obj **h = held[t->id];
    for (int round = 0; round < GC_THR_ROUNDS; round++) {
        for (int i = 0; i < GC_THR_LIVE; i++) {
            h[i] = hk_gc_alloc(t->gc, &k_word);
            uint32_t *d = h[i] ? (uint32_t *)hk_gc_data(t->gc, h[i]) : NULL;
            if (!d) {
                t->bad++;
                continue;
            }
            *d = (uint32_t)(t->id << 24 | i);
        }
        for (int i = 0; i < GC_THR_LIVE; i++) {
            uint32_t *d = (uint32_t *)hk_gc_data(t->gc, h[i]);
            if (!d || *d != (uint32_t)(t->id << 24 | i)) t->bad++;
            if (hk_gc_release(t->gc, h[i]) != HK_OK) t->bad++;
            if (i % 512 == 0) (void)hk_gc_step(t->gc, UINT64_MAX);
        }
    }
    return NULL;
}

HKT_TEST(gc_threads_grow_under_the_lock) {
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    hk_gc_desc d = {0};
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    d.lock.lock = gmu_lock;
    d.lock.unlock = gmu_unlock;
    hk_gc *gc = hk_gc_create(&d);
    REQUIRE(gc);
    gc_thr t[GC_THR_N];
    pthread_t th[GC_THR_N];
    for (int i = 0; i < GC_THR_N; i++) {
        t[i].gc = gc;
        t[i].id = i;
        t[i].bad = 0;
        REQUIRE(pthread_create(&th[i], NULL, gc_thr_main, &t[i]) == 0);
    }
    for (int i = 0; i < GC_THR_N; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ(t[i].bad, 0);
    }
    (void)hk_gc_collect(gc);
    hk_stats st;
    hk_gc_stats(gc, &st);
    CHECK_EQ(st.live_blocks, 0);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

/* When the OS refuses the table's reservation (as on a 32-bit host), the
 * table lives in chunks of 4096 slots from the backing hooks: growth adds
 * a chunk and never moves a word (a doubling table would copy them all),
 * every verdict and check works as on reserved storage, and the index
 * space fills to its limit. */
HKT_TEST(gc_table_fallback_is_chunked) {
    hk_os_fail_after(1, false); /* the reservation, the first OS call of the create */
    hk_gc *gc = mk(0, 15);
    hk_os_fail_after(0, false);
    REQUIRE(gc);
    CHECK(gc->ht.wdir != NULL && gc->ht.sdir != NULL);
    CHECK(!(gc->ht.flags & HK__HT_RESERVED));
    hk_gc_obj *first = hk_gc_alloc(gc, &k_leaf);
    REQUIRE(first);
    const uint32_t *w0 = hk__ht_w(&gc->ht, 0);
    CHECK_EQ(*w0, (uint32_t)(uintptr_t)first);
    enum { N = 20000 };
    static hk_gc_obj *all[N];
    for (int i = 0; i < N; i++) REQUIRE((all[i] = hk_gc_alloc(gc, &k_leaf)) != NULL);
    CHECK(gc->ht.room >= N && gc->ht.room % HK__HT_CHUNK_SLOTS == 0);
    CHECK(hk__ht_w(&gc->ht, 0) == w0); /* nothing moved */
    CHECK(hk_gc_data(gc, all[N - 1]) != NULL && hk_gc_refcount(gc, all[12345]) == 1);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    CHECK_EQ(hk_gc_release(gc, all[7]), HK_OK);
    CHECK(hk_gc_step(gc, UINT64_MAX) == 1);
    EXPECT(hk_gc_release(gc, all[7]), HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE);
    hk_gc_obj *again = hk_gc_alloc(gc, &k_leaf);
    REQUIRE(again);
    EXPECT(hk_gc_retain(gc, (hk_gc_obj *)(uintptr_t)0x7ffe), HK_ERR_FOREIGN, HK_EK_FOREIGN_PTR);
    /* to the limit of 15 index bits: 32,767 slots */
    hk_gc_obj *o;
    int more = 0;
    while ((o = hk_gc_alloc(gc, &k_leaf)) != NULL) more++;
    CHECK_EQ(gc->ht.cap, gc->ht.index_mask);
    CHECK_EQ(gc->ht.room, gc->ht.index_mask);
    CHECK(more > 0);
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    /* check sees a missing chunk */
    uint32_t *keep = gc->ht.wdir[2];
    gc->ht.wdir[2] = NULL;
    CHECK_EQ(hk_gc_check(gc), HK_ERR_CORRUPT);
    gc->ht.wdir[2] = keep;
    CHECK_EQ(hk_gc_check(gc), HK_OK);
    hk_gc_destroy(gc);
}

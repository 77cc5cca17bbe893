/* tests/test_pool_internal.c - what only a look inside the pool
 * (src/pool_internal.h) can test: the release pass at the end of a defer
 * scope (the dense copy of the pending queue it reads, the free order it
 * keeps, check's comparison of the copy with the queue), and check's tree
 * walk (a forged cycle found, a deep chain checked in linear time), the
 * overflow path's incremental hash growth and its segments, and the frame
 * lists' growth a bounded step per push. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif
#include "hk_test.h"
#include "pool_internal.h"

#include <time.h>

static hkt_errors g_errs;

static hk_pool *mk(uint32_t cap, uint32_t flags) {
    hkt_errors_reset(&g_errs);
    g_errs.quiet = 1;
    hk_pool_desc d = {0};
    d.elem_size = 64;
    d.capacity = cap;
    d.flags = flags;
    d.name = "rel";
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    return hk_pool_create(&d);
}

/* ---- the release pass and its dense copy of the pending queue ------------- */

/* Slots go back to the free ring in the order their objects were freed,
 * through the dense copy (only fast slots pending) or the queue itself (an
 * overflow object pending too). */
HKT_TEST(release_keeps_the_free_order) {
    for (int with_overflow = 0; with_overflow < 2; with_overflow++) {
        hk_pool *p = mk(4, 0);
        REQUIRE(p);
        void *o[6];
        hk_pool_id ids[6];
        int n = with_overflow ? 6 : 4;
        for (int i = 0; i < n; i++) ids[i] = hk_pool_alloc(p, &o[i]);
        hk_pool_defer_begin(p);
        hk_pool_free(p, ids[2], HK_POOL_FREE_SUBTREE);
        if (with_overflow) hk_pool_free(p, ids[5], HK_POOL_FREE_SUBTREE);
        hk_pool_free(p, ids[0], HK_POOL_FREE_SUBTREE);
        hk_pool_free(p, ids[3], HK_POOL_FREE_SUBTREE);
        CHECK_EQ(p->pend_ok, !with_overflow);
        CHECK_EQ(hk_pool_check(p), HK_OK);
        CHECK_EQ(hk_pool_defer_end(p), HK_OK);
        void *a, *b, *c;
        hk_pool_alloc(p, &a);
        hk_pool_alloc(p, &b);
        hk_pool_alloc(p, &c);
        CHECK(a == o[2]);
        CHECK(b == o[0]);
        CHECK(c == o[3]);
        CHECK_EQ(p->npend, 0);
        CHECK_EQ(p->pend_ok, 1);
        CHECK_EQ(hk_pool_check(p), HK_OK);
        hk_pool_destroy(p);
    }
}

/* check compares the dense copy with the queue. */
HKT_TEST(check_finds_a_damaged_pending_copy) {
    hk_pool *p = mk(16, 0);
    REQUIRE(p);
    hk_pool_id ids[4];
    for (int i = 0; i < 4; i++) ids[i] = hk_pool_alloc(p, NULL);
    hk_pool_defer_begin(p);
    for (int i = 0; i < 3; i++) hk_pool_free(p, ids[i], HK_POOL_FREE_SUBTREE);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    uint32_t saved = p->pend[1];
    p->pend[1] = p->pend[2];
    CHECK_EQ(hk_pool_check(p), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(g_errs.last_message, "dense copy");
    p->pend[1] = saved;
    p->npend--;
    CHECK_EQ(hk_pool_check(p), HK_ERR_CORRUPT);
    p->npend++;
    CHECK_EQ(hk_pool_check(p), HK_OK);
    CHECK_EQ(hk_pool_defer_end(p), HK_OK);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* ---- check's tree walk ----------------------------------------------------- */

/* Two live objects made each other's parent (and child) by damage: no root
 * reaches them, and check says so. */
HKT_TEST(check_finds_a_parent_cycle) {
    hk_pool *p = mk(16, 0);
    REQUIRE(p);
    hk_pool_id a = hk_pool_alloc(p, NULL), b = hk_pool_alloc(p, NULL), r = hk_pool_alloc(p, NULL);
    CHECK_EQ(hk_pool_set_parent(p, b, r), HK_OK); /* a tree that stays sound */
    CHECK_EQ(hk_pool_check(p), HK_OK);
    uint32_t sa = a.value & p->imask, sb = b.value & p->imask, sr = r.value & p->imask;
    pool_meta *ma = pool_m(p, sa), *mb = pool_m(p, sb), *mr = pool_m(p, sr);
    pool_meta save_a = *ma, save_b = *mb, save_r = *mr;
    unsigned char busy_a = p->busy[sa], busy_r = p->busy[sr];
    /* b leaves r; a and b become each other's only child */
    mr->first_child = mr->last_child = POOL_NIL;
    mr->nchildren = 0;
    ma->parent = sb;
    ma->first_child = ma->last_child = sb;
    ma->nchildren = 1;
    ma->next_sib = ma->prev_sib = POOL_NIL;
    mb->parent = sa;
    mb->first_child = mb->last_child = sa;
    mb->nchildren = 1;
    mb->next_sib = mb->prev_sib = POOL_NIL;
    p->busy[sa] = 1;
    p->busy[sr] = 0;
    CHECK_EQ(hk_pool_check(p), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(g_errs.last_message, "cycle");
    *ma = save_a;
    *mb = save_b;
    *mr = save_r;
    p->busy[sa] = busy_a;
    p->busy[sr] = busy_r;
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* check walks a 250,000-deep chain in linear time (it walked every
 * object's parent chain: 3e10 steps here, minutes). Most of the chain is on
 * the overflow path (at most 2^18 - 1 overflow objects live by default). */
HKT_TEST(check_deep_chain_is_linear) {
    hk_pool *p = mk(0, 0);
    REQUIRE(p);
    hk_pool_id x = hk_pool_alloc(p, NULL);
    for (int i = 0; i < 250000 && x.value; i++) x = hk_pool_alloc_child(p, x, NULL);
    REQUIRE(x.value);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    CHECK(secs < 20.0); /* about 0.05 s now; over a minute before */
    CHECK_EQ(g_errs.count, 0);
    hk_pool_destroy(p);
}

/* ---- the overflow path's incremental growth ---------------------------------- */

/* Thousands of overflow objects, allocated and freed in a pattern that
 * keeps the hash tables growing while keys are deleted: the tables are
 * seen mid-growth (a next table being zeroed, a previous one being moved)
 * and every live object resolves by ID and by address through it, every
 * freed ID is reported stale or double-freed, and check passes. No insert
 * does more than a step of growth: the bucket counts say so. */
HKT_TEST(overflow_hash_grows_incrementally) {
    hk_pool *p = mk(8, 0);
    REQUIRE(p);
    enum { N = 6000 };
    static hk_pool_id ids[N];
    static void *objs[N];
    void *o;
    for (int i = 0; i < 8; i++) REQUIRE(hk_pool_alloc(p, &o).value);
    int saw_zeroing = 0, saw_moving = 0, live = 0;
    for (int i = 0; i < N; i++) {
        uint32_t before = p->oid.size;
        ids[i] = hk_pool_alloc(p, &objs[i]);
        REQUIRE(ids[i].value);
        live++;
        /* one insert switches to the next table at most once: the size at most doubles */
        CHECK(p->oid.size == before || p->oid.size == (before ? before * 2 : 64));
        saw_zeroing |= p->oid.nkeys != NULL;
        saw_moving |= p->oid.okeys != NULL;
        if (i % 3 == 2) { /* free an older one: deletions while the tables grow */
            int v = i - 2;
            CHECK_EQ(hk_pool_free(p, ids[v], HK_POOL_DETACH), HK_OK);
            live--;
        }
        if (i % 61 == 0) {
            for (int k = 0; k <= i; k++) {
                int dead = k % 3 == 0 && k + 2 <= i;
                CHECK((hk_pool_get(p, ids[k]) == NULL) == dead);
                if (!dead) CHECK_EQ(hk_pool_id_of(p, objs[k]).value, ids[k].value);
            }
            CHECK_EQ(hk_pool_check(p), HK_OK);
        }
    }
    CHECK(saw_zeroing && saw_moving);
    CHECK_EQ(p->oid.n, (uint32_t)live);
    CHECK_EQ(p->optr.n, (uint32_t)live);
    /* misuse during growth: stale and double frees are reported, check passes */
    int before = g_errs.count;
    CHECK(hk_pool_get(p, ids[0]) == NULL);
    CHECK_EQ(hk_pool_free(p, ids[0], HK_POOL_DETACH), HK_ERR_STALE);           /* its slot was reused */
    CHECK_EQ(hk_pool_free(p, ids[N - 3], HK_POOL_DETACH), HK_ERR_DOUBLE_FREE); /* freed last */
    CHECK(g_errs.count > before);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    for (int k = 0; k < N; k++)
        if (!(k % 3 == 0 && k + 2 < N)) CHECK_EQ(hk_pool_free(p, ids[k], HK_POOL_DETACH), HK_OK);
    CHECK_EQ(p->oid.n, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* A lookup of the tombstone's value (1: hk_pool_id_of of address 1) finds
 * no slot, though a table being moved holds tombstones (a regression: the
 * fuzz target's wild address 1 got a live object's ID). */
HKT_TEST(overflow_hash_lookup_skips_tombstones) {
    uint64_t okeys[8];
    uint32_t ovals[8];
    for (int i = 0; i < 8; i++) okeys[i] = 1, ovals[i] = 5; /* every bucket a tombstone */
    pool_hash h;
    memset(&h, 0, sizeof h);
    h.okeys = okeys;
    h.ovals = ovals;
    h.osize = 8;
    h.oshift = 61;
    CHECK_EQ(hk__pool_hash_find(&h, 1), POOL_NIL);
}

/* Overflow slots live in segments that never move: an object's metadata
 * stays where it was while later segments are added. */
HKT_TEST(overflow_segments_never_move) {
    hk_pool *p = mk(4, 0);
    REQUIRE(p);
    void *o;
    for (int i = 0; i < 4; i++) REQUIRE(hk_pool_alloc(p, &o).value);
    hk_pool_id first = hk_pool_alloc(p, &o);
    REQUIRE(first.value);
    pool_meta *m = pool_m(p, p->cap);
    for (int i = 0; i < 1000; i++) REQUIRE(hk_pool_alloc(p, &o).value);
    CHECK(p->nosegs >= 4);
    CHECK(pool_m(p, p->cap) == m);
    CHECK_EQ(m->id, first.value);
    CHECK_EQ(p->ohigh, 1001);
    CHECK(p->ocap >= p->ohigh);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

/* A frame list grows without a pause: from 3/4 of its room, each push
 * copies at most 4 entries into the next array, the switch comes before
 * the old one is full, the entries keep their order, an iteration running
 * across the switch reads the new array, a clear in the middle of a growth
 * takes the larger room at once, and check passes after every push. */
HKT_TEST(flist_grows_a_bounded_step_per_push) {
    hk_pool *p = mk(5000, 0);
    REQUIRE(p);
    static hk_pool_id ids[4000];
    void *o;
    for (int i = 0; i < 4000; i++) REQUIRE((ids[i] = hk_pool_alloc(p, &o)).value);
    hk_pool_flist fl = hk_pool_flist_create(p, 0, "grow");
    uint32_t fi = (fl.value & 0xFFFFu) - 1u;
    hk__pool_fl *f = &p->fl[fi];
    /* an iteration over the first 10 entries, running while the list grows */
    for (int i = 0; i < 10; i++) CHECK_EQ(hk_pool_flist_push(p, fl, ids[i]), HK_OK);
    hk_pool_fiter it = hk_pool_fiter_begin(p, fl);
    CHECK(hk_pool_fiter_next(&it) != NULL);
    int saw_growth = 0, switches = 0;
    for (int i = 10; i < 4000; i++) {
        uint32_t room = f->room, copied = f->copied, had_next = f->next != NULL;
        CHECK_EQ(hk_pool_flist_push(p, fl, ids[i]), HK_OK);
        if (f->room != room) {
            switches++;
            CHECK(f->room == room * 2 || room == 0);
            CHECK(it.f.ents == f->ents); /* the running iteration follows */
        } else if (had_next || f->next) {
            saw_growth = 1;
            CHECK(f->copied - copied <= 4u); /* the bound */
        }
        CHECK(f->count <= f->room);
        if (i % 97 == 0) CHECK_EQ(hk_pool_check(p), HK_OK);
    }
    CHECK(saw_growth && switches >= 5);
    for (uint32_t e = 0; e < f->count; e++) CHECK_EQ(f->ents[e], ids[e].value);
    int k = 1;
    while (hk_pool_fiter_next(&it) != NULL) k++;
    CHECK_EQ(k, 10); /* entries pushed meanwhile are not visited */
    /* a clear in the middle of a growth */
    while (!f->next) CHECK_EQ(hk_pool_flist_push(p, fl, ids[f->count % 4000]), HK_OK);
    uint32_t room = f->room;
    CHECK_EQ(hk_pool_flist_clear(p, fl), HK_OK);
    CHECK(f->next == NULL && f->room == room * 2 && f->count == 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    /* recycle in the middle of a growth: the dead entries go, the copy restarts */
    while (!f->next) CHECK_EQ(hk_pool_flist_push(p, fl, ids[100 + f->count % 3900]), HK_OK);
    for (int i = 0; i < 100; i++) CHECK_EQ(hk_pool_free(p, ids[i], HK_POOL_DETACH), HK_OK);
    CHECK(hk_pool_recycle(p) >= 0);
    CHECK_EQ(f->copied, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    room = f->room;
    for (int i = 0; f->room == room && i < 4000; i++)
        CHECK_EQ(hk_pool_flist_push(p, fl, ids[100 + i % 3900]), HK_OK);
    CHECK(f->room > room);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    /* a reserve is room without growth: the inline push appends them all */
    hk_pool_flist r = hk_pool_flist_create(p, 1000, "reserved");
    hk__pool_fl *g = &p->fl[(r.value & 0xFFFFu) - 1u];
    uint32_t *arr = g->ents;
    for (int i = 0; i < 1000; i++) CHECK_EQ(hk_pool_flist_push(p, r, ids[100 + i]), HK_OK);
    CHECK(g->ents == arr && g->next == NULL);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_pool_check(p), HK_OK);
    hk_pool_destroy(p);
}

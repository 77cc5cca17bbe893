/* Zone: small-block runs (size-class slots carved from TLSF blocks): the
 * class table, slot accounting, run lifecycle and trimming, misuse of
 * slots, realloc, tags, free_tags, walk/where/dump, and freed slots reused
 * before untouched ones (zones of other shapes: test_zone_runs_zones.c).
 * Includes zone_internal.h (through zone_runs_test_util.h) for the class
 * table (zone_cls_of, zone_cls_stride). */
#define _GNU_SOURCE 1 /* open_memstream */
#include "zone_runs_test_util.h"

HKT_TEST(runs_class_table) {
    CHECK_EQ(ZONE_NCLS, 63);
    CHECK_EQ(ZONE_RUN_MAX_REQ, 16376);
    CHECK_EQ(zone_cls_stride(0), 32);
    CHECK_EQ(zone_cls_stride(ZONE_NCLS - 1), 16384);
    /* every other value of the header's class field has stride 0 */
    for (unsigned c = ZONE_NCLS; c < 128; c++) CHECK_EQ(zone_cls_stride(c), 0);
    for (unsigned c = 1; c < ZONE_NCLS; c++) {
        uint32_t s = zone_cls_stride(c), p = zone_cls_stride(c - 1);
        CHECK(s > p && s % 16 == 0);
        if (s <= 256) {
            CHECK_EQ(s - p, 16);
        } else { /* 8 classes per doubling */
            uint32_t pow = 1u << (31 - __builtin_clz(s - 1));
            CHECK_EQ(s - p, pow / 8);
        }
    }
    unsigned char seen[ZONE_NCLS] = {0};
    size_t bad = 0, first_bad = 0;
    for (size_t n = 0; n <= ZONE_RUN_MAX_REQ; n++) {
        unsigned c = zone_cls_of(n);
        int ok = c < ZONE_NCLS && zone_cls_stride(c) >= n + 8 && (c == 0 || zone_cls_stride(c - 1) < n + 8);
        /* the bound docs/zone.md states: max(32, n + 23) up to 248 bytes, < n + n/8 + 9 above */
        size_t s = c < ZONE_NCLS ? zone_cls_stride(c) : 0;
        ok = ok && (n <= 248 ? s <= (n + 23 > 32 ? n + 23 : 32) : s < n + n / 8 + 9);
        if (!ok && bad++ == 0) first_bad = n;
        if (c < ZONE_NCLS) seen[c] = 1;
    }
    CHECK_EQ(bad, 0);
    if (bad) printf("    first bad request size: %zu\n", first_bad);
    for (unsigned c = 0; c < ZONE_NCLS; c++) CHECK(seen[c]);
}

/* Every request size up to ZONE_RUN_MAX_REQ is a slot of its class. */
HKT_TEST(runs_every_small_size_is_a_slot) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    size_t bad = 0, first = 0;
    for (size_t n = 0; n <= ZONE_RUN_MAX_REQ; n++) {
        hk_stats a, b, c;
        hk_zone_stats(z, &a);
        void *p = hk_zone_alloc(z, n);
        REQUIRE(p != NULL);
        hk_zone_stats(z, &b);
        size_t st = stride_of(n);
        int ok = hk_zone_usable_size(z, p) == st - 8 && b.used_blocks_bytes - a.used_blocks_bytes == st &&
                 b.used - a.used == n && b.live_blocks == a.live_blocks + 1;
        ok &= hk_zone_free(z, p) == HK_OK;
        hk_zone_stats(z, &c);
        ok &=
            c.used == a.used && c.used_blocks_bytes == a.used_blocks_bytes && c.live_blocks == a.live_blocks;
        if (!ok && bad++ == 0) first = n;
    }
    CHECK_EQ(bad, 0);
    if (bad) printf("    first size not served as a slot: %zu\n", first);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(runs_slot_stats_calloc_and_random_mix) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    hk_stats a, b;
    hk_zone_stats(z, &a);
    unsigned char *p = hk_zone_alloc(z, 100);
    REQUIRE(p != NULL);
    hk_zone_stats(z, &b);
    CHECK_EQ(hk_zone_usable_size(z, p), 104); /* stride 112 */
    CHECK_EQ(b.used, 100);
    CHECK_EQ(b.used_blocks_bytes - a.used_blocks_bytes, 112);
    CHECK_EQ(b.live_blocks, 1);
    CHECK_EQ(((uintptr_t)p & 15), 0);
    memset(p, 0xEE, 100); /* under ASan only the requested bytes are addressable */
    CHECK_EQ(hk_zone_free(z, p), HK_OK);
    hk_zone_stats(z, &b);
    CHECK_EQ(b.used, 0);
    CHECK_EQ(b.used_blocks_bytes, a.used_blocks_bytes);
    CHECK_EQ(b.live_blocks, 0);
    /* calloc gets the same (LIFO) slot back and zeroes it */
    unsigned char *q = hk_zone_calloc(z, 10, 10);
    CHECK(q == p);
    for (int i = 0; i < 100; i++) CHECK_EQ(q[i], 0);
    CHECK_EQ(hk_zone_free(z, q), HK_OK);

    /* mixed small sizes with patterns, partly recycled, freed in random order */
    enum { N = 1200 };
    static unsigned char *ps[N];
    static size_t ns[N];
    g_rng = 0x9E3779B97F4A7C15ull;
    size_t asked = 0;
    for (size_t i = 0; i < N; i++) {
        uint32_t r = rnd() % 100;
        size_t n = r < 70   ? rnd() % 513
                   : r < 95 ? 513 + rnd() % 3584
                            : 4097 + rnd() % (ZONE_RUN_MAX_REQ - 4096);
        ps[i] = hk_zone_alloc(z, n);
        REQUIRE(ps[i] != NULL);
        ns[i] = n;
        asked += n;
        CHECK_EQ(hk_zone_usable_size(z, ps[i]), stride_of(n) - 8);
        for (size_t k = 0; k < n; k++) ps[i][k] = pat(i, k);
        if (i % 3 == 2) { /* free an earlier one and reuse its index */
            size_t j = rnd() % i;
            CHECK_EQ(hk_zone_free(z, ps[j]), HK_OK);
            asked -= ns[j];
            ns[j] = rnd() % 300;
            ps[j] = hk_zone_alloc(z, ns[j]);
            REQUIRE(ps[j] != NULL);
            asked += ns[j];
            for (size_t k = 0; k < ns[j]; k++) ps[j][k] = pat(j, k);
        }
    }
    hk_zone_stats(z, &b);
    CHECK_EQ(b.used, asked);
    CHECK_EQ(b.live_blocks, N);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    static size_t order[N];
    for (size_t i = 0; i < N; i++) order[i] = i;
    for (size_t i = N - 1; i > 0; i--) { /* shuffle */
        size_t j = rnd() % (i + 1), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    size_t damaged = 0;
    for (size_t i = 0; i < N; i++) {
        size_t j = order[i];
        if (!bytes_are(ps[j], ns[j], j)) damaged++;
        CHECK_EQ(hk_zone_free(z, ps[j]), HK_OK);
        if (i % 500 == 0) CHECK_EQ(hk_zone_check(z), HK_OK);
    }
    CHECK_EQ(damaged, 0);
    end_empty(z, &errs);
}

/* Several runs of one class (the first of ZONE_RUN_FIRST bytes of slots,
 * each one replacing a full run twice its size, up to ZONE_RUN_TARGET bytes
 * of slots); freeing everything
 * keeps the current run and one spare; a request needing nearly the whole
 * zone trims them. */
HKT_TEST(runs_lifecycle_and_trim) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    hk_stats s0, s;
    hk_zone_stats(z, &s0);
    const size_t n = 200, st = stride_of(n);
    CHECK_EQ(st, 208);
    enum { M = 400 };
    static void *ps[M];
    for (size_t i = 0; i < M; i++) {
        ps[i] = hk_zone_alloc(z, n);
        REQUIRE(ps[i] != NULL);
        memset(ps[i], (int)i, n);
    }
    /* the runs in allocation order: 78 slots, then twice the bytes of the
     * one before, up to ZONE_RUN_TARGET bytes */
    size_t runs = 0, slots = 0, k = ZONE_RUN_FIRST / st;
    while (slots < M) {
        CHECK_EQ(zone_run_of_slot(zone_from_user(ps[slots]))->nslots, k);
        slots += k, runs++;
        k = k * 2 * st > ZONE_RUN_TARGET ? ZONE_RUN_TARGET / st : k * 2;
    }
    CHECK(runs >= 3);
    CHECK_EQ(count_runs(z), runs);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    g_rng = 12345;
    for (size_t i = M - 1; i > 0; i--) {
        size_t j = rnd() % (i + 1);
        void *t = ps[i];
        ps[i] = ps[j], ps[j] = t;
    }
    for (size_t i = 0; i < M; i++) CHECK_EQ(hk_zone_free(z, ps[i]), HK_OK);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(count_runs(z), 2); /* the (empty) current run and one spare */
    hk_zone_stats(z, &s);
    CHECK_EQ(s.used, 0);
    CHECK_EQ(s.live_blocks, 0);
    /* a request of nearly the whole capacity, in the class of the single
     * free block the zone would have without runs */
    size_t big = s0.capacity - 4096;
    unsigned fl1, sl1, fl2, sl2;
    zone_mapping(s0.capacity, &fl1, &sl1);
    zone_mapping((big + ZONE_PLAIN_OVH + 15) & ~(size_t)15, &fl2, &sl2);
    REQUIRE(fl1 == fl2 && sl1 == sl2);
    CHECK(s.largest_free < big); /* the kept runs are in the way */
    void *p = hk_zone_alloc(z, big);
    CHECK(p != NULL);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(count_runs(z), 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, p), HK_OK);
    hk_zone_stats(z, &s);
    CHECK_EQ(s.free_blocks, 1);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* An allocation gives empty runs back before it purges anything. */
HKT_TEST(runs_trim_before_purge) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    enum { M = 400 };
    static void *ps[M];
    for (size_t i = 0; i < M; i++) REQUIRE((ps[i] = hk_zone_alloc(z, 200)) != NULL); /* 6 runs */
    void *owner = NULL;
    void *cache = hk_zone_alloc_tagged(z, 64, HK_TAG_CACHE, &owner, "cache");
    REQUIRE(cache != NULL && owner == cache);
    hk_stats s; /* fill the rest of the zone */
    for (hk_zone_stats(z, &s); s.largest_free >= 1024; hk_zone_stats(z, &s))
        REQUIRE(hk_zone_alloc_ex(z, &(hk_zone_alloc_desc){.size = s.largest_free}) != NULL);
    /* in order: the first run becomes the spare, the last stays current,
     * the four between go back and merge */
    for (size_t i = 0; i < M; i++) CHECK_EQ(hk_zone_free(z, ps[i]), HK_OK);
    CHECK_EQ(count_runs(z), 2);
    hk_zone_stats(z, &s);
    void *p = hk_zone_alloc(z, s.largest_free + 16384); /* fits only with the two runs' space */
    CHECK(p != NULL);
    CHECK(owner == cache); /* not purged */
    CHECK_EQ(count_runs(z), 0);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(runs_misuse) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    /* first three slots of the class's first run (stride 112) */
    unsigned char *a = raw(hk_zone_alloc(z, 100)), *b = raw(hk_zone_alloc(z, 100)),
                  *c = raw(hk_zone_alloc(z, 100));
    REQUIRE(a && b && c);
    CHECK(b == a + 112 && c == b + 112);
    memset(a, 0x11, 100);
    memset(b, 0x11, 100);
    memset(c, 0x11, 100);
    /* double free */
    CHECK_EQ(hk_zone_free(z, b), HK_OK);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_zone_free(z, b), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(errs.count, 1);
    CHECK_EQ(errs.last_kind, HK_EK_DOUBLE_FREE);
    CHECK(errs.last_address == b);
    CHECK_STR_CONTAINS(errs.last_message, "small-block run");
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* interior of a used slot, aligned and unaligned */
    CHECK_EQ(hk_zone_free(z, a + 16), HK_ERR_INVALID);
    CHECK_EQ(errs.last_kind, HK_EK_INTERIOR_PTR);
    CHECK_STR_CONTAINS(errs.last_message, "16 bytes into block");
    CHECK_EQ(hk_zone_free(z, a + 5), HK_ERR_INVALID);
    CHECK_EQ(errs.last_kind, HK_EK_INTERIOR_PTR);
    CHECK(hk_zone_realloc(z, a + 32, 10) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_INTERIOR_PTR);
    CHECK(!hk_zone_owns(z, a + 16));
    CHECK_EQ(errs.count, 4);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* interior of a free slot */
    CHECK_EQ(hk_zone_free(z, b + 32), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(errs.last_kind, HK_EK_DOUBLE_FREE);
    CHECK_EQ(errs.count, 5);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* a write after free into b's free-list link: check finds it */
    unsigned char save[8];
    hk__san_access(b, 8);
    memcpy(save, b, 8);
    memcpy(b, &c, sizeof c); /* now "links" to a used slot */
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    CHECK_EQ(errs.last_kind, HK_EK_CORRUPT_FREE);
    hk__san_access(b, 8); /* check poisoned it again */
    memcpy(b, save, 8);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(errs.count, 6);
    /* the uncarved part of the run (slot 50 was never handed out) */
    CHECK_EQ(hk_zone_free(z, a + 50 * 112), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(errs.last_kind, HK_EK_DOUBLE_FREE);
    CHECK_EQ(errs.count, 7);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* foreign */
    int local;
    CHECK_EQ(hk_zone_free(z, &local), HK_ERR_FOREIGN);
    CHECK_EQ(errs.last_kind, HK_EK_FOREIGN_PTR);
    CHECK_EQ(errs.count, 8);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* the run's own header, found through where */
    hk_block_info info;
    CHECK_EQ(hk_zone_where(z, a - 24, &info), HK_OK);
    CHECK_STR_CONTAINS(info.name, "(small-block run)");
    CHECK(info.address != NULL && (unsigned char *)info.address < a);
    CHECK(hk_zone_free(z, info.address) != HK_OK);
    CHECK_EQ(errs.count, 9);
    CHECK_EQ(errs.last_kind, HK_EK_INTERIOR_PTR);
    CHECK_STR_CONTAINS(errs.last_message, "small-block run");
    CHECK(!hk_zone_owns(z, info.address));
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(errs.count, 9);
    /* damaged slot header: the free is refused, check finds it; restored,
     * everything works again */
    hk__san_access(c - 8, 8);
    memcpy(save, c - 8, 8);
    memset(c - 8, 0xA5, 8);
    CHECK_EQ(hk_zone_free(z, c), HK_ERR_CORRUPT);
    CHECK_EQ(errs.count, 10);
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    CHECK_EQ(errs.count, 11);
    memcpy(c - 8, save, 8);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, c), HK_OK);
    CHECK_EQ(hk_zone_free(z, a), HK_OK);
    CHECK_EQ(errs.count, 11);
    hk_stats s;
    hk_zone_stats(z, &s);
    CHECK_EQ(s.live_blocks, 0);
    CHECK_EQ(s.error_count, 11);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* a run struct claiming one slot more than a run may hold (the remote
     * bitmap's 512, also more than its block holds) is damage check
     * reports; restored, it passes */
    unsigned char *d = hk_zone_alloc(z, 20); /* 32-byte slots: 512 a run */
    REQUIRE(d != NULL);
    zone_run *dr = zone_run_of_slot(zone_from_user(raw(d)));
    uint32_t ns = dr->nslots;
    CHECK_EQ(dr->nslots, ZONE_RUN_CAP_SLOTS);
    dr->nslots = ZONE_RUN_CAP_SLOTS + 1;
    CHECK_EQ(hk_zone_check(z), HK_ERR_CORRUPT);
    CHECK_EQ(errs.count, 12);
    dr->nslots = ns;
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, d), HK_OK);
    CHECK_EQ(errs.count, 12);
    hk_zone_destroy(z);
}

HKT_TEST(runs_realloc) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    hk_stats s;
    unsigned char *p = hk_zone_alloc(z, 80); /* stride 96, usable 88 */
    REQUIRE(p != NULL);
    CHECK_EQ(hk_zone_usable_size(z, p), 88);
    for (size_t k = 0; k < 80; k++) p[k] = pat(1, k);
    /* grow within the slot, shrink by less than half: in place */
    unsigned char *q = hk_zone_realloc(z, p, 88);
    CHECK(q == p);
    for (size_t k = 80; k < 88; k++) q[k] = pat(1, k); /* the new bytes are usable */
    hk_zone_stats(z, &s);
    CHECK_EQ(s.used, 88);
    q = hk_zone_realloc(z, q, 44);
    CHECK(q == p);
    CHECK(bytes_are(q, 44, 1));
    hk_zone_stats(z, &s);
    CHECK_EQ(s.used, 44);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* shrink below half: moves to a smaller class */
    q = hk_zone_realloc(z, q, 43);
    REQUIRE(q != NULL);
    CHECK(q != p);
    CHECK_EQ(hk_zone_usable_size(z, q), stride_of(43) - 8);
    CHECK(bytes_are(q, 43, 1));
    CHECK(!hk_zone_owns(z, p));
    /* grow past the slot: moves */
    p = q;
    q = hk_zone_realloc(z, q, 1000);
    REQUIRE(q != NULL);
    CHECK(q != p);
    CHECK(bytes_are(q, 43, 1));
    CHECK_EQ(hk_zone_usable_size(z, q), stride_of(1000) - 8);
    for (size_t k = 0; k < 1000; k++) q[k] = pat(2, k);
    /* past the largest slot: becomes a TLSF block */
    q = hk_zone_realloc(z, q, ZONE_RUN_MAX_REQ + 1);
    REQUIRE(q != NULL);
    CHECK(bytes_are(q, 1000, 2));
    CHECK(hk_zone_usable_size(z, q) >= ZONE_RUN_MAX_REQ + 1);
    hk_zone_stats(z, &s);
    CHECK_EQ(s.used, ZONE_RUN_MAX_REQ + 1);
    CHECK_EQ(s.live_blocks, 1);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_result r = hk_zone_change_tag(z, q, HK_TAG_LEVEL); /* room or not: either is fine */
    CHECK(r == HK_OK || r == HK_ERR_NOMEM);
    CHECK_EQ(hk_zone_tag(z, q), r == HK_OK ? HK_TAG_LEVEL : HK_TAG_STATIC);
    CHECK_EQ(errs.count, r == HK_OK ? 0 : 1);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, q), HK_OK);
    hkt_errors_reset(&errs);
    /* size 0 keeps a minimal block (no free) */
    p = hk_zone_alloc(z, 300);
    REQUIRE(p != NULL);
    hk_zone_stats(z, &s);
    size_t live = s.live_blocks;
    q = hk_zone_realloc(z, p, 0);
    CHECK(q != NULL);
    CHECK(hk_zone_owns(z, q));
    hk_zone_stats(z, &s);
    CHECK_EQ(s.live_blocks, live);
    CHECK_EQ(s.used, 0);
    /* a slot of the smallest class shrunk to 0 stays a valid block */
    q = hk_zone_realloc(z, q, 0);
    CHECK(q != NULL && hk_zone_owns(z, q));
    /* NULL acts as alloc */
    p = hk_zone_realloc(z, NULL, 24);
    CHECK(p != NULL && hk_zone_usable_size(z, p) == 24);
    /* a failed realloc leaves the slot alone */
    memset(p, 0x5C, 24);
    CHECK(hk_zone_realloc(z, p, (size_t)8 << 20) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_NOMEM);
    CHECK(hk_zone_owns(z, p));
    CHECK_EQ(p[23], 0x5C);
    CHECK_EQ(errs.count, 1);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, p), HK_OK);
    CHECK_EQ(hk_zone_free(z, q), HK_OK);
    hk_zone_stats(z, &s);
    CHECK_EQ(s.live_blocks, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(runs_change_tag_tag_owns) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    void *p = hk_zone_alloc(z, 40);
    REQUIRE(p != NULL);
    CHECK_EQ(hk_zone_tag(z, p), HK_TAG_STATIC);
    CHECK(hk_zone_owns(z, p));
    CHECK_EQ(hk_zone_change_tag(z, p, HK_TAG_STATIC), HK_OK);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_zone_change_tag(z, p, HK_TAG_LEVEL), HK_ERR_NOMEM);
    CHECK_EQ(errs.count, 1);
    CHECK_EQ(errs.last_kind, HK_EK_NOMEM);
    CHECK_STR_CONTAINS(errs.last_message, "small-block run");
    CHECK_EQ(hk_zone_tag(z, p), HK_TAG_STATIC);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_change_tag(z, p, HK_TAG_CACHE), HK_ERR_INVALID);
    CHECK_EQ(errs.count, 2);
    CHECK_EQ(errs.last_kind, HK_EK_INVALID_ARG);
    CHECK_EQ(hk_zone_change_tag(z, p, 0), HK_ERR_INVALID);
    CHECK_EQ(errs.count, 3);
    CHECK_EQ(hk_zone_tag(z, p), HK_TAG_STATIC);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, p), HK_OK);
    CHECK(!hk_zone_owns(z, p));
    CHECK_EQ(errs.count, 3);
    CHECK_EQ(hk_zone_tag(z, p), 0); /* reported: already free */
    CHECK_EQ(errs.count, 4);
    CHECK_EQ(errs.last_kind, HK_EK_DOUBLE_FREE);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

HKT_TEST(runs_free_tags_static) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    enum { N = 600 };
    static void *ps[N];
    g_rng = 777;
    for (int i = 0; i < N; i++) {
        ps[i] = hk_zone_alloc(z, rnd() % 3000);
        REQUIRE(ps[i] != NULL);
    }
    for (int i = 0; i < N; i += 7) CHECK_EQ(hk_zone_free(z, ps[i]), HK_OK); /* some partial runs */
    size_t freed_before = (N + 6) / 7;
    void *plain = hk_zone_alloc(z, 40000); /* an untracked TLSF block */
    void *owner = NULL;
    void *lvl = hk_zone_alloc_tagged(z, 64, HK_TAG_LEVEL, &owner, "level");
    REQUIRE(plain && lvl);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_STATIC, HK_TAG_STATIC), N - freed_before + 1);
    hk_stats s;
    hk_zone_stats(z, &s);
    CHECK_EQ(s.live_blocks, 1); /* the HK_TAG_LEVEL block */
    CHECK_EQ(s.used, 64);
    CHECK(owner == lvl && hk_zone_owns(z, lvl));
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(hk_zone_free(z, lvl), HK_OK);
    hk_zone_stats(z, &s);
    CHECK_EQ(s.live_blocks, 0);
    CHECK_EQ(s.used, 0);
    CHECK_EQ(count_runs(z), 0);
    /* stale pointers: reported, nothing breaks */
    CHECK(hk_zone_free(z, ps[1]) != HK_OK);
    CHECK_EQ(errs.count, 1);
    CHECK(hk_zone_free(z, ps[N - 1]) != HK_OK);
    CHECK_EQ(errs.count, 2);
    CHECK(!hk_zone_owns(z, ps[2]));
    CHECK_EQ(hk_zone_check(z), HK_OK);
    /* and the zone is usable again */
    void *p = hk_zone_alloc(z, 100);
    CHECK(p != NULL);
    CHECK_EQ(hk_zone_free_tags(z, 1, HK_ZONE_TAG_MAX), 1);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

typedef struct walk_tally {
    size_t used, free, used_req;
} walk_tally;
static int walk_count(const hk_block_info *i, void *user) {
    walk_tally *t = (walk_tally *)user;
    if (i->flags & HK_BLOCK_USED) {
        t->used++;
        t->used_req += i->requested;
        if (i->tag != HK_TAG_STATIC && i->tag != HK_TAG_LEVEL) return 1;
    } else {
        t->free++;
    }
    return 0;
}

/* free_tags over HK_TAG_STATIC when only slots are live (no untracked
 * plain block): the walk must still run (it is skipped only when neither
 * untracked blocks nor used slots exist). */
HKT_TEST(runs_free_tags_static_slots_only) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    void *ps[40];
    for (int i = 0; i < 40; i++) REQUIRE((ps[i] = hk_zone_alloc(z, 24 + (size_t)i * 50)) != NULL);
    hk_stats s;
    hk_zone_stats(z, &s);
    CHECK_EQ(s.live_blocks, 40);
    CHECK_EQ(hk_zone_free_tags(z, HK_TAG_STATIC, HK_TAG_STATIC), 40);
    hk_zone_stats(z, &s);
    CHECK_EQ(s.live_blocks, 0);
    CHECK_EQ(count_runs(z), 0);
    end_empty(z, &errs);
}

/* A freed slot's header is the one a full rehash gives (the free path
 * updates the check by xor instead), for every class and many slacks; a
 * double free of it is still caught. */
HKT_TEST(runs_free_header_matches_rehash) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    size_t n_ok = 0;
    for (unsigned c = 0; c < ZONE_NCLS; c++) {
        size_t hi = zone_cls_stride(c) - ZONE_OVERLAP, lo = c ? zone_cls_stride(c - 1) - ZONE_OVERLAP + 1 : 1;
        size_t sizes[4] = {lo, hi, lo + (hi - lo) / 2, lo + (hi - lo) / 3};
        for (int k = 0; k < 4; k++) {
            unsigned char *p = raw(hk_zone_alloc(z, sizes[k]));
            REQUIRE(p != NULL);
            zone_blk *b = zone_from_user(p);
            REQUIRE(zone_is_slot(b));
            uint32_t word = b->size16;
            CHECK_EQ(hk_zone_free(z, p), HK_OK);
            CHECK_EQ(b->size16, word & 0x7ffffu);
            CHECK_EQ(b->tag, 0);
            CHECK_EQ(b->bits, ZB_SLOT_FREE);
            if (b->chk == zone_slot_chk(b, word & 0x7ffffu, 0, ZB_SLOT_FREE)) n_ok++;
            CHECK(hk_zone_free(z, p) != HK_OK); /* double free */
        }
    }
    CHECK_EQ(n_ok, 4u * ZONE_NCLS);
    CHECK_EQ(errs.count, 4u * ZONE_NCLS);
    hkt_errors_reset(&errs);
    end_empty(z, &errs);
}

HKT_TEST(runs_walk_where_dump) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    void *ps[50];
    for (int i = 0; i < 50; i++) {
        ps[i] = hk_zone_alloc(z, (size_t)(i * 37 % 900));
        REQUIRE(ps[i] != NULL);
    }
    for (int i = 0; i < 50; i += 5) hk_zone_free(z, ps[i]);
    void *owner = NULL;
    void *big = hk_zone_alloc(z, 50000), *tagged = hk_zone_alloc_tagged(z, 10, HK_TAG_LEVEL, &owner, "t");
    REQUIRE(big && tagged);
    hk_stats s;
    hk_zone_stats(z, &s);
    walk_tally t = {0, 0, 0};
    CHECK_EQ(hk_zone_walk(z, walk_count, &t), 0);
    CHECK_EQ(t.used, s.live_blocks);
    CHECK_EQ(t.used_req, s.used);
    CHECK(t.free > 10); /* free slots and uncarved run tails */
    hk_block_info info;
    unsigned char *p = ps[3];
    CHECK_EQ(hk_zone_where(z, p, &info), HK_OK);
    CHECK(info.address == p);
    CHECK(info.flags & HK_BLOCK_USED);
    CHECK_EQ(info.requested, 3 * 37);
    CHECK_EQ(info.size, stride_of(3 * 37) - 8);
    CHECK_EQ(info.tag, HK_TAG_STATIC);
    CHECK_EQ(hk_zone_where(z, p + 50, &info), HK_OK); /* inside it */
    CHECK(info.address == p);
    CHECK_EQ(hk_zone_where(z, ps[5], &info), HK_OK); /* a free slot */
    CHECK(!(info.flags & HK_BLOCK_USED));
    /* the run holding ps[1] (first of its class: slot 0) */
    CHECK_EQ(hk_zone_where(z, (unsigned char *)ps[1] - 24, &info), HK_OK);
    CHECK_STR_CONTAINS(info.name, "(small-block run)");
    CHECK_EQ(info.tag, HK_TAG_STATIC);
    size_t runs = 0;
    char *d = dump_str(z, &runs);
    REQUIRE(d != NULL);
    CHECK_STR_CONTAINS(d, "run of");
    CHECK_STR_CONTAINS(d, "run of 40-byte blocks"); /* ps[1]: 37 bytes, stride 48 */
    CHECK(runs >= 10);
    free(d);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* A run of the class with freed slots serves the next allocation before
 * the current run's untouched slots are carved (hk__zone_slot_reuse): the
 * current run goes on the partial list partly carved, and check accepts
 * that. */
HKT_TEST(freed_slots_in_older_run_reused_before_carving) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    static zt_two_runs t;
    REQUIRE(zt_full_run_then_next(z, &t));
    for (unsigned i = 0; i + 1 < t.ns; i++) CHECK_EQ(hk_zone_free(z, t.c[i]), HK_OK); /* r1 keeps one */
    zt_older_run_serves_next(z, &t, ZONE_RUN_PARTIAL);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    hk_zone_destroy(z);
}

/* A carve makes at most ZONE_CARVE_MAX slots (a bound on the work of the
 * allocation that carves: the worst case of a refill), and only slots
 * whose header and link lie in the pages the first one touches: 32-byte
 * slots, 128 to a page, come 8 at a time, fewer only where a page ends. */
HKT_TEST(runs_carve_makes_at_most_carve_max_slots) {
    hkt_errors errs = {0};
    hk_zone *z = mk(&errs, 0);
    REQUIRE(z != NULL);
    CHECK_EQ(ZONE_CARVE_MAX, 8);
    enum { N = 200 };
    static unsigned char *p[N];
    uint32_t bump = 0, carves = 0, full = 0;
    zone_run *r = NULL;
    for (int i = 0; i < N; i++) {
        REQUIRE((p[i] = raw(hk_zone_alloc(z, 16))) != NULL);
        if (!r) r = zone_run_of_slot(zone_from_user(p[0]));
        REQUIRE(zone_run_of_slot(zone_from_user(p[i])) == r);
        if (r->bump != bump) { /* this allocation carved */
            CHECK(r->bump - bump <= ZONE_CARVE_MAX);
            CHECK_EQ(bump, (uint32_t)i); /* only when every carved slot was used */
            full += r->bump - bump == ZONE_CARVE_MAX;
            carves++;
            bump = r->bump;
        }
    }
    CHECK(carves >= N / ZONE_CARVE_MAX);
    CHECK(full >= carves - 4); /* short only at a page's end */
    for (int i = 0; i < N; i++) CHECK_EQ(hk_zone_free(z, p[i]), HK_OK);
    CHECK_EQ(hk_zone_check(z), HK_OK);
    CHECK_EQ(errs.count, 0);
    hk_zone_destroy(z);
}

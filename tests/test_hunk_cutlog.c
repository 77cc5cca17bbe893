/* The hunk's cut log: a free to a mark after cuts decides from the log of
 * the end's cuts (at most HUNK_CUT_LOG entries) instead of walking the
 * headers under the mark, and walks only when the log dropped the cuts the
 * mark needs. A damaged header below the mark tells the two apart: the walk
 * refuses the mark there, the log never reads it. */
#include "hunk_internal.h"
#include "hunk_test_util.h"
#include "internal.h"

/* Breaks (or restores) the sentinel of the block whose user bytes start at p. */
static uint32_t swap_sentinel(void *p, uint32_t v) {
    unsigned char *hdr = unbounded(p) - HUNK_HDR;
    hk__asan_unpoison(hdr, HUNK_HDR);
    uint32_t old;
    memcpy(&old, hdr, sizeof old);
    memcpy(hdr, &v, sizeof v);
    hk__asan_poison(hdr, HUNK_HDR);
    return old;
}

/* Nested marks freed inner first (the Quake pattern): the outer mark is
 * decided by the log, so it reads no header. */
HKT_TEST(nested_marks_decided_without_reading_headers) {
    hk_hunk *h = make(1 << 20, 0);
    REQUIRE(h);
    void *first = hk_hunk_alloc(h, 100, "first");
    for (int i = 0; i < 50; i++) REQUIRE(hk_hunk_alloc(h, 64, "level"));
    hk_hunk_mark a = hk_hunk_low_mark(h);
    REQUIRE(hk_hunk_alloc(h, 64, "x"));
    hk_hunk_mark b = hk_hunk_low_mark(h);
    REQUIRE(hk_hunk_alloc(h, 64, "y"));
    CHECK_EQ(hk_hunk_free_to_low_mark(h, b), HK_OK); /* a cut above a */
    uint32_t s = swap_sentinel(first, 0xBADu);       /* a walk would stop here and refuse */
    CHECK_EQ(hk_hunk_free_to_low_mark(h, a), HK_OK);
    CHECK_EQ(g_errs.count, 0);
    swap_sentinel(first, s);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    /* the high end, with temp blocks released in between (not cuts) */
    void *top = hk_hunk_alloc_high(h, 100, "top");
    hk_hunk_mark ha = hk_hunk_high_mark(h);
    REQUIRE(hk_hunk_alloc_high(h, 64, "x"));
    hk_hunk_mark hb = hk_hunk_high_mark(h);
    REQUIRE(hk_hunk_alloc_high(h, 64, "y"));
    REQUIRE(hk_hunk_alloc_temp(h, 500));
    hk_hunk_free_temp(h);
    CHECK_EQ(hk_hunk_free_to_high_mark(h, hb), HK_OK);
    s = swap_sentinel(top, 0xBADu);
    CHECK_EQ(hk_hunk_free_to_high_mark(h, ha), HK_OK);
    swap_sentinel(top, s);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

/* A cut below a mark makes it stale, whatever was allocated over it since;
 * the log says so without reading the newer blocks. */
HKT_TEST(cut_below_a_mark_makes_it_stale) {
    hk_hunk *h = make(1 << 20, 0);
    REQUIRE(h);
    hk_hunk_mark z = hk_hunk_low_mark(h);
    REQUIRE(hk_hunk_alloc(h, 64, "a"));
    hk_hunk_mark a = hk_hunk_low_mark(h);
    REQUIRE(hk_hunk_alloc(h, 64, "b"));
    hk_hunk_mark b = hk_hunk_low_mark(h);
    REQUIRE(hk_hunk_alloc(h, 64, "c"));
    CHECK_EQ(hk_hunk_free_to_low_mark(h, a), HK_OK); /* below b */
    for (int i = 0; i < 10; i++) REQUIRE(hk_hunk_alloc(h, 16, "over"));
    hkt_errors_reset(&g_errs);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, b), HK_ERR_INVALID);
    CHECK_STR_CONTAINS(g_errs.last_message, "stale");
    CHECK_EQ(hk_hunk_free_to_low_mark(h, a), HK_OK); /* a itself is fine */
    CHECK_EQ(hk_hunk_free_to_low_mark(h, z), HK_OK);
    CHECK_EQ(low_used(h), 0);
    /* reset is a cut to 0 on both ends */
    REQUIRE(hk_hunk_alloc(h, 64, "d"));
    hk_hunk_mark d = hk_hunk_low_mark(h);
    REQUIRE(hk_hunk_alloc(h, 64, "e"));
    hk_hunk_reset(h);
    REQUIRE(hk_hunk_alloc(h, 200, "f"));
    hkt_errors_reset(&g_errs);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, d), HK_ERR_INVALID);
    CHECK_EQ(g_errs.count, 1);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

/* More cuts at rising levels than the log holds: the first ones are
 * dropped, and a mark that needs them is decided by the walk (valid or
 * stale as before). */
HKT_TEST(log_overflow_falls_back_to_the_walk) {
    hk_hunk *h = make(1 << 20, 0);
    REQUIRE(h);
    void *first = hk_hunk_alloc(h, 100, "first");
    hk_hunk_mark a = hk_hunk_low_mark(h);
    REQUIRE(hk_hunk_alloc(h, 64, "x"));
    hk_hunk_mark stale = hk_hunk_low_mark(h);
    REQUIRE(hk_hunk_alloc(h, 64, "y"));
    CHECK_EQ(hk_hunk_free_to_low_mark(h, a), HK_OK); /* a cut below `stale` */
    for (int i = 0; i < HUNK_CUT_LOG + 3; i++) {     /* cuts at rising levels */
        REQUIRE(hk_hunk_alloc(h, 64, "rise"));
        hk_hunk_mark m = hk_hunk_low_mark(h);
        REQUIRE(hk_hunk_alloc(h, 64, "gone"));
        CHECK_EQ(hk_hunk_free_to_low_mark(h, m), HK_OK);
    }
    hkt_errors_reset(&g_errs);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, stale), HK_ERR_INVALID);
    CHECK_EQ(g_errs.count, 1);
    /* a is valid, and the walk proves it: with the bottom header damaged it
     * is refused, so the walk (not the log) decided */
    uint32_t s = swap_sentinel(first, 0xBADu);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, a), HK_ERR_INVALID);
    swap_sentinel(first, s);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, a), HK_OK);
    CHECK_EQ(low_used(h), hk_hunk_low_mark(h).offset);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    /* the cut to a is logged again: the next nested use is O(1) */
    REQUIRE(hk_hunk_alloc(h, 64, "x"));
    hk_hunk_mark b = hk_hunk_low_mark(h);
    REQUIRE(hk_hunk_alloc(h, 64, "y"));
    CHECK_EQ(hk_hunk_free_to_low_mark(h, b), HK_OK);
    s = swap_sentinel(first, 0xBADu);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, a), HK_OK);
    swap_sentinel(first, s);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

/* Misuse on the way leaves the log alone: refused frees to marks are no
 * cuts, and a mark of another hunk or end is refused as before. */
HKT_TEST(refused_frees_log_no_cut) {
    hk_hunk *h = make(1 << 20, 0), *other = make(1 << 16, 0);
    REQUIRE(h && other);
    REQUIRE(hk_hunk_alloc(h, 64, "a"));
    hk_hunk_mark a = hk_hunk_low_mark(h);
    REQUIRE(hk_hunk_alloc(h, 64, "b"));
    hk_hunk_mark foreign = hk_hunk_low_mark(other);
    uint32_t n = h->cutlog[0].n, cuts = h->cuts[0];
    CHECK_EQ(hk_hunk_free_to_low_mark(h, foreign), HK_ERR_INVALID);
    CHECK_EQ(hk_hunk_free_to_high_mark(h, a), HK_ERR_INVALID);
    hk_hunk_mark beyond = a;
    beyond.offset += 4096;
    CHECK_EQ(hk_hunk_free_to_low_mark(h, beyond), HK_ERR_INVALID);
    CHECK_EQ(h->cutlog[0].n, n);
    CHECK_EQ(h->cuts[0], cuts);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, a), HK_OK);
    CHECK_EQ(h->cutlog[0].n, 1u);
    CHECK_EQ(h->cutlog[0].level[h->cutlog[0].head], a.offset);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(other);
    hk_hunk_destroy(h);
}

/* check sees a damaged cut log (a level above the end, levels out of order). */
HKT_TEST(check_sees_a_damaged_cut_log) {
    hk_hunk *h = make(1 << 20, 0);
    REQUIRE(h);
    REQUIRE(hk_hunk_alloc(h, 64, "a"));
    hk_hunk_mark a = hk_hunk_low_mark(h);
    REQUIRE(hk_hunk_alloc(h, 64, "b"));
    hk_hunk_mark b = hk_hunk_low_mark(h);
    REQUIRE(hk_hunk_alloc(h, 64, "c"));
    CHECK_EQ(hk_hunk_free_to_low_mark(h, b), HK_OK);
    REQUIRE(hk_hunk_alloc(h, 64, "d"));
    hk_hunk_mark d = hk_hunk_low_mark(h);
    REQUIRE(hk_hunk_alloc(h, 64, "e"));
    CHECK_EQ(hk_hunk_free_to_low_mark(h, d), HK_OK); /* two entries, rising */
    hunk_cut_log *l = &h->cutlog[0];
    REQUIRE(l->n == 2);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    uint32_t at = (l->head + 1u) & (HUNK_CUT_LOG - 1u);
    size_t keep = l->level[at];
    l->level[at] = low_used(h) + 4096; /* above the end */
    CHECK_EQ(hk_hunk_check(h), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(g_errs.last_message, "cut log");
    l->level[at] = 0; /* below the entry before it */
    CHECK_EQ(hk_hunk_check(h), HK_ERR_CORRUPT);
    l->level[at] = keep;
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, a), HK_OK);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

/* A model of mark validity against random allocations, marks, frees to
 * marks and resets on both ends: a mark is valid while no cut since it
 * went below its offset. The hunk (log, or walk when the log dropped what
 * it needs) must answer as the model at every step, and pass check. */
HKT_TEST(random_marks_match_the_model) {
    hk_hunk *h = make(1 << 20, HK_FLAG_QUIET);
    REQUIRE(h);
    enum { NM = 24 };
    hk_hunk_mark marks[2][NM];
    int alive[2][NM] = {{0}}, nm[2] = {0, 0};
    uint64_t seed = 0x39C;
    int bad = 0, walked_or_logged = 0, seen_lost = 0;
    for (int step = 0; step < 20000 && !bad; step++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        int end = (int)((seed >> 20) & 1u), op = (int)((seed >> 33) % 16u), k = (int)((seed >> 40) % NM);
        if (op < 7) {
            size_t n = 16 + (size_t)((seed >> 50) % 200);
            if (end ? !hk_hunk_alloc_high(h, n, "r") : !hk_hunk_alloc(h, n, "r")) {
                hk_hunk_reset(h);
                for (int e = 0; e < 2; e++)
                    for (int i = 0; i < nm[e]; i++) alive[e][i] = alive[e][i] && marks[e][i].offset == 0;
            }
        } else if (op < 11) {
            int at = nm[end] < NM ? nm[end]++ : k;
            marks[end][at] = end ? hk_hunk_high_mark(h) : hk_hunk_low_mark(h);
            alive[end][at] = 1;
        } else if (op < 15 && k < nm[end]) {
            hk_hunk_mark m = marks[end][k];
            size_t used = end ? high_used(h) : low_used(h);
            int want = alive[end][k] && m.offset <= used;
            hk_result r = end ? hk_hunk_free_to_high_mark(h, m) : hk_hunk_free_to_low_mark(h, m);
            if ((r == HK_OK) != want) {
                CHECK_EQ((int)(r == HK_OK), want);
                bad = 1;
            }
            if (r == HK_OK && m.offset < used) {
                walked_or_logged++;
                for (int i = 0; i < nm[end]; i++)
                    if (marks[end][i].offset > m.offset) alive[end][i] = 0;
            }
        } else if (op == 15 && (seed >> 60) == 0) {
            REQUIRE(hk_hunk_alloc_temp(h, 300));
        }
        seen_lost |= h->cutlog[0].lost_any | h->cutlog[1].lost_any;
        if (step % 500 == 0 && hk_hunk_check(h) != HK_OK) {
            CHECK(0);
            bad = 1;
        }
    }
    CHECK(walked_or_logged > 100);
    CHECK(seen_lost); /* the log overflowed on the way: the walk decided some */
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

/* The hunk's marks: freeing back to a mark, nesting, and the marks it must
 * refuse (bad, foreign, stale inside a newer block); tenant claims. Shared
 * helpers: hunk_test_util.h. */
#include "hunk_test_util.h"
#include "internal.h"

HKT_TEST(marks_free_everything_after_them) {
    hk_hunk *h = make(1 << 20, 0);
    hk_hunk_alloc(h, 100, "base");
    hk_hunk_mark m = hk_hunk_low_mark(h);
    size_t low_at_mark = low_used(h);
    hk_stats before;
    hk_hunk_stats(h, &before);
    for (int i = 0; i < 100; i++) hk_hunk_alloc(h, 1000, "level");
    CHECK(low_used(h) > low_at_mark);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, m), HK_OK);
    CHECK_EQ(low_used(h), low_at_mark);
    hk_stats after;
    hk_hunk_stats(h, &after);
    CHECK_EQ(after.used, before.used);
    CHECK_EQ(after.live_blocks, before.live_blocks);
    CHECK_EQ(after.free_count, 100);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    /* Freeing to the current top is a no-op. */
    CHECK_EQ(hk_hunk_free_to_low_mark(h, m), HK_OK);

    hk_hunk_mark hm = hk_hunk_high_mark(h);
    for (int i = 0; i < 10; i++) hk_hunk_alloc_high(h, 64, "hi");
    CHECK_EQ(hk_hunk_free_to_high_mark(h, hm), HK_OK);
    CHECK_EQ(high_used(h), 0);
    CHECK_EQ(g_errs.count, 0);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

HKT_TEST(nested_marks) {
    hk_hunk *h = make(1 << 20, 0);
    hk_hunk_mark m0 = hk_hunk_low_mark(h);
    hk_hunk_alloc(h, 10, "a");
    hk_hunk_mark m1 = hk_hunk_low_mark(h);
    hk_hunk_alloc(h, 10, "b");
    hk_hunk_mark m2 = hk_hunk_low_mark(h);
    hk_hunk_alloc(h, 10, "c");
    CHECK_EQ(hk_hunk_free_to_low_mark(h, m2), HK_OK);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, m1), HK_OK);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, m0), HK_OK);
    CHECK_EQ(low_used(h), 0);
    CHECK_EQ(g_errs.count, 0);
    hk_hunk_destroy(h);
}

HKT_TEST(bad_marks_are_refused) {
    hk_hunk *h = make(1 << 20, 0);
    hk_hunk_alloc(h, 10, "a");
    hk_hunk_mark low = hk_hunk_low_mark(h);
    hk_hunk_mark high = hk_hunk_high_mark(h);

    /* A mark from the other end. */
    CHECK_EQ(hk_hunk_free_to_high_mark(h, low), HK_ERR_INVALID);
    CHECK_EQ(g_errs.last_kind, HK_EK_INVALID_ARG);
    CHECK_STR_CONTAINS(g_errs.last_message, "other end");
    CHECK_EQ(hk_hunk_free_to_low_mark(h, high), HK_ERR_INVALID);

    /* A mark beyond the current top. */
    hk_hunk_alloc(h, 10, "b");
    hk_hunk_mark above = hk_hunk_low_mark(h);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, low), HK_OK);
    hkt_errors_reset(&g_errs);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, above), HK_ERR_INVALID);
    CHECK_STR_CONTAINS(g_errs.last_message, "beyond the current top");

    /* A stale mark: taken above a position freed since, the hunk grown back. */
    hk_hunk_alloc(h, 10, "c");
    hk_hunk_alloc(h, 10, "d");
    CHECK(low_used(h) > above.offset);
    hkt_errors_reset(&g_errs);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, above), HK_ERR_INVALID);
    CHECK_STR_CONTAINS(g_errs.last_message, "stale");
    CHECK(low_used(h) > above.offset); /* nothing was freed */

    /* Same on the high end. */
    hk_hunk_mark h0 = hk_hunk_high_mark(h);
    hk_hunk_alloc_high(h, 32, "x");
    hk_hunk_mark h1 = hk_hunk_high_mark(h);
    hk_hunk_alloc_high(h, 32, "y");
    CHECK_EQ(hk_hunk_free_to_high_mark(h, h0), HK_OK);
    hk_hunk_alloc_high(h, 32, "z");
    hk_hunk_alloc_high(h, 32, "w");
    hkt_errors_reset(&g_errs);
    CHECK_EQ(hk_hunk_free_to_high_mark(h, h1), HK_ERR_INVALID);
    CHECK_STR_CONTAINS(g_errs.last_message, "stale");

    /* A forged mark that is not block-aligned. */
    hk_hunk_mark forged = hk_hunk_low_mark(h);
    forged.offset -= 8;
    CHECK_EQ(hk_hunk_free_to_low_mark(h, forged), HK_ERR_INVALID);

    CHECK_EQ(hk_hunk_check(h), HK_OK);
    CHECK_EQ(hk_hunk_free_to_low_mark(NULL, low), HK_ERR_INVALID);
    hk_hunk_destroy(h);
}

static void paint(unsigned char *p, size_t n, unsigned char seed) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(seed + i);
}
static int painted(const unsigned char *p, size_t n, unsigned char seed) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(seed + i)) return 0;
    return 1;
}

/* Two hunks with the same layout (block lengths, sequence numbers) but
 * different requested sizes: A's mark lines up with B's blocks. B must
 * refuse it, and stay consistent. */
HKT_TEST(mark_of_another_hunk_refused) {
    hk_hunk *a = make(1 << 16, 0), *b = make(1 << 16, 0);
    REQUIRE(a && b);
    hk_hunk_alloc(a, 20, "x");
    hk_hunk_alloc(a, 20, "x");
    hk_hunk_mark ma = hk_hunk_low_mark(a);
    hk_hunk_alloc(a, 20, "x");
    hk_hunk_mark ha = hk_hunk_high_mark(a);
    unsigned char *bp[3];
    for (int i = 0; i < 3; i++) {
        bp[i] = hk_hunk_alloc(b, 17, "y"); /* 17 and 20 give blocks of the same length */
        REQUIRE(bp[i]);
        paint(bp[i], 17, (unsigned char)i);
    }
    hkt_errors_reset(&g_errs);
    CHECK_EQ(hk_hunk_free_to_low_mark(b, ma), HK_ERR_INVALID);
    CHECK_EQ(g_errs.count, 1);
    CHECK_STR_CONTAINS(g_errs.last_message, "another hunk");
    CHECK_EQ(hk_hunk_free_to_high_mark(b, ha), HK_ERR_INVALID);
    hk_hunk_mark none;
    memset(&none, 0, sizeof none);
    CHECK_EQ(hk_hunk_free_to_low_mark(b, none), HK_ERR_INVALID); /* a zeroed mark names no hunk */
    CHECK_EQ(hk_hunk_check(b), HK_OK);
    hk_stats st;
    hk_hunk_stats(b, &st);
    CHECK_EQ(st.live_blocks, 3);
    CHECK_EQ(st.used, 3 * 17);
    for (int i = 0; i < 3; i++) CHECK(painted(bp[i], 17, (unsigned char)i));
    CHECK_EQ(hk_hunk_free_to_low_mark(a, ma), HK_OK); /* and A's own mark still works on A */
    CHECK_EQ(hk_hunk_check(a), HK_OK);
    hk_hunk_destroy(a);
    hk_hunk_destroy(b);
}

/* The sequence: a stale mark whose old edge header now lies inside
 * the user bytes of a newer, live block (bytes left as they were). */
HKT_TEST(stale_mark_inside_newer_block_refused) {
    hk_hunk *h = make(1 << 16, 0);
    REQUIRE(h);
    hk_hunk_mark m1 = hk_hunk_low_mark(h);
    hk_hunk_alloc(h, 16, "a");
    hk_hunk_alloc(h, 16, "b");
    hk_hunk_mark m2 = hk_hunk_low_mark(h);
    hk_hunk_alloc(h, 64, "c");
    CHECK_EQ(hk_hunk_free_to_low_mark(h, m1), HK_OK);
    unsigned char *big = hk_hunk_alloc(h, 300, "big"); /* the old headers are in its bytes, untouched */
    unsigned char *small = hk_hunk_alloc(h, 16, "small");
    REQUIRE(big && small);
    paint(small, 16, 9);
    hkt_errors_reset(&g_errs);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, m2), HK_ERR_INVALID);
    CHECK_STR_CONTAINS(g_errs.last_message, "stale");
    hk_stats st;
    hk_hunk_stats(h, &st);
    CHECK_EQ(st.live_blocks, 2);
    CHECK_EQ(st.used, 316);
    CHECK(painted(small, 16, 9));
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    /* The same when the newer block's owner wrote its bytes. */
    paint(big, 300, 3);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, m2), HK_ERR_INVALID);
    CHECK(painted(big, 300, 3));
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

/* Marks stay valid across cuts above them (the walk accepts them), on
 * both ends, with alignment padding and a temp block in between. */
HKT_TEST(marks_below_a_cut_still_accepted) {
    hk_hunk *h = make(1 << 16, 0);
    REQUIRE(h);
    hk_hunk_alloc(h, 40, "a");
    hk_hunk_alloc_aligned(h, 256, 10, "aligned");
    hk_hunk_mark lo1 = hk_hunk_low_mark(h);
    hk_hunk_alloc(h, 40, "b");
    hk_hunk_mark lo2 = hk_hunk_low_mark(h);
    hk_hunk_alloc(h, 40, "c");
    CHECK_EQ(hk_hunk_free_to_low_mark(h, lo2), HK_OK);
    hk_hunk_alloc(h, 100, "d");
    CHECK_EQ(hk_hunk_free_to_low_mark(h, lo2), HK_OK); /* after a cut at its own offset */
    CHECK_EQ(hk_hunk_free_to_low_mark(h, lo1), HK_OK);
    hk_hunk_alloc_high(h, 40, "e");
    hk_hunk_alloc_high_aligned(h, 512, 8, "f");
    hk_hunk_mark hi1 = hk_hunk_high_mark(h);
    hk_hunk_alloc_high(h, 40, "g");
    hk_hunk_mark hi2 = hk_hunk_high_mark(h);
    hk_hunk_alloc_temp(h, 500);
    hk_hunk_free_temp(h); /* a cut of the high end above both marks */
    CHECK_EQ(hk_hunk_free_to_high_mark(h, hi2), HK_OK);
    CHECK_EQ(hk_hunk_free_to_high_mark(h, hi1), HK_OK);
    hk_hunk_alloc_high(h, 8, "h");
    hk_hunk_alloc_high(h, 8, "i");
    hkt_errors_reset(&g_errs);
    CHECK_EQ(hk_hunk_free_to_high_mark(h, hi2), HK_ERR_INVALID); /* now stale */
    CHECK_EQ(hk_hunk_free_to_high_mark(h, hi1), HK_OK);
    hk_hunk_reset(h);
    CHECK_EQ(hk_hunk_free_to_high_mark(h, hi1), HK_ERR_INVALID); /* beyond the top */
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

/* A claim that starts past the free middle (inside the high blocks, or past
 * the hunk) is refused: the size check must not underflow. */
HKT_TEST(tenant_claim_past_free_middle_refused) {
    hk_hunk *h = make(1 << 16, 0);
    REQUIRE(h);
    unsigned char *hi = hk_hunk_alloc_high(h, 1000, "high");
    REQUIRE(hi);
    paint(hi, 1000, 5);
    void *ms;
    size_t mn;
    hk_hunk_free_range(h, &ms, &mn);
    unsigned char *mid_end = (unsigned char *)ms + mn;
    hkt_errors_reset(&g_errs);
    CHECK_EQ(hk_hunk_set_tenant(h, no_reclaim, NULL, mid_end + 16, 16), HK_ERR_INVALID);
    CHECK_EQ(g_errs.count, 1);
    CHECK_EQ(hk_hunk_set_tenant(h, no_reclaim, NULL, mid_end + 1024, 32), HK_ERR_INVALID);
    CHECK_EQ(hk_hunk_set_tenant(h, no_reclaim, NULL, (void *)(uintptr_t)-4096, 16), HK_ERR_INVALID);
    CHECK_EQ(hk_hunk_set_tenant(h, no_reclaim, NULL, mid_end - 32, 48), HK_ERR_INVALID);
    CHECK_EQ(hk_hunk_set_tenant(h, no_reclaim, NULL, mid_end - 32, 32), HK_OK); /* the last 32 bytes: fine */
    CHECK_EQ(hk_hunk_set_tenant_range(h, mid_end, 16), HK_ERR_INVALID);
    CHECK_EQ(hk_hunk_set_tenant_range(h, mid_end, 0), HK_OK);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    CHECK(painted(hi, 1000, 5));
    hk_hunk_set_tenant(h, NULL, NULL, NULL, 0);
    hk_hunk_destroy(h);
}

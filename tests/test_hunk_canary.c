/* tests/test_hunk_canary.c - what a block costs and what check still sees
 * with the trailing canary off (the default) and on (HK_FLAG_CANARY). */
#include "hunk_test_util.h"
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* Without the flag a block is its header and its bytes rounded up to 16. */
HKT_TEST(no_canary_block_is_header_and_rounded_bytes) {
    hk_hunk *h = make(1 << 16, 0);
    REQUIRE(h);
    size_t sizes[] = {1, 15, 16, 17, 32, 100, 4096};
    size_t used = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = hk_hunk_alloc(h, sizes[i], "plain");
        REQUIRE(p);
        CHECK_EQ((uintptr_t)p % 16, 0);
        used += 16 + ((sizes[i] + 15) & ~(size_t)15);
        CHECK_EQ(low_used(h), used);
        memset(p, 0x5a, sizes[i]);
    }
    /* the high end: the same length */
    CHECK(hk_hunk_alloc_high(h, 16, "hi") != NULL);
    CHECK_EQ(high_used(h), 32);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

/* With the flag every block carries 8..23 canary bytes. */
HKT_TEST(canary_block_adds_eight_to_twenty_three_bytes) {
    hk_hunk *h = make(1 << 16, HK_FLAG_CANARY);
    REQUIRE(h);
    CHECK(hk_hunk_alloc(h, 16, "c") != NULL);
    CHECK_EQ(low_used(h), 16 + 32);
    CHECK(hk_hunk_alloc(h, 8, "c") != NULL);
    CHECK_EQ(low_used(h), 16 + 32 + 16 + 16);
    CHECK(hk_hunk_alloc_high(h, 16, "c") != NULL);
    CHECK_EQ(high_used(h), 16 + 32);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

/* Size 0 without canary still gives a pointer of its own, which where()
 * attributes to its block and not to the next header. */
HKT_TEST(no_canary_zero_size_blocks_are_distinct) {
    hk_hunk *h = make(1 << 16, 0);
    REQUIRE(h);
    void *a = hk_hunk_alloc(h, 0, "zero");
    void *b = hk_hunk_alloc(h, 0, "zero");
    void *c = hk_hunk_alloc_high(h, 0, "zhigh");
    REQUIRE(a && b && c);
    CHECK(a != b);
    CHECK_EQ(low_used(h), 64);
    hk_block_info bi;
    CHECK_EQ(hk_hunk_where(h, a, &bi), HK_OK);
    CHECK(bi.address == a);
    CHECK_EQ(bi.requested, 0);
    CHECK_EQ(hk_hunk_where(h, c, &bi), HK_OK);
    CHECK(bi.address == c);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

/* Without canary an overrun that reaches the next block's header is found
 * by check through its sentinel; the overrun block's own slack is not
 * compared (nothing was written there). */
HKT_TEST(no_canary_overrun_is_caught_at_next_sentinel) {
    if (hk__asan_enabled()) return;
    hk_hunk *h = make(1 << 16, 0);
    REQUIRE(h);
    unsigned char *p = unbounded(hk_hunk_alloc(h, 20, "overrun"));
    unsigned char *q = unbounded(hk_hunk_alloc(h, 16, "next"));
    REQUIRE(p && q);
    CHECK(q == p + 32 + 16); /* 20 bytes round up to 32, then q's header */
    p[20] = 0;               /* into the slack: not compared without canary */
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    unsigned char saved[16];
    memcpy(saved, q - 16, 16);
    memset(p + 20, 0x41, 16); /* runs into q's header */
    CHECK_EQ(hk_hunk_check(h), HK_ERR_CORRUPT);
    CHECK_EQ(g_errs.last_kind, HK_EK_CORRUPT_HEADER);
    CHECK_STR_CONTAINS(g_errs.last_message, "sentinel");
    memcpy(q - 16, saved, 16);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

/* The same overrun by one byte is caught at once with the flag. */
HKT_TEST(canary_catches_one_byte_overrun) {
    if (hk__asan_enabled()) return;
    hk_hunk *h = make(1 << 16, HK_FLAG_CANARY);
    REQUIRE(h);
    unsigned char *p = unbounded(hk_hunk_alloc(h, 20, "overrun"));
    unsigned char *hp = unbounded(hk_hunk_alloc_high(h, 32, "hover"));
    REQUIRE(p && hp);
    p[20] = 0;
    CHECK_EQ(hk_hunk_check(h), HK_ERR_CORRUPT);
    CHECK_EQ(g_errs.last_kind, HK_EK_CORRUPT_CANARY);
    CHECK_STR_CONTAINS(g_errs.last_message, "'overrun'");
    p[20] = HK_FILL_PAD;
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hp[32] = 0;
    CHECK_EQ(hk_hunk_check(h), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(g_errs.last_message, "'hover'");
    hp[32] = HK_FILL_PAD;
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

/* A header whose flags claim a canary on a padding block is damage. */
HKT_TEST(check_refuses_padding_block_flagged_canary) {
    if (hk__asan_enabled()) return;
    hk_hunk *h = make(1 << 16, HK_FLAG_CANARY);
    REQUIRE(h);
    /* the padding block starts at the low end's top, when the block's user
     * bytes could not start 16 bytes above it (whatever the control
     * block's size makes of the area's alignment) */
    void *lo;
    size_t n;
    hk_hunk_free_range(h, &lo, &n);
    while ((((uintptr_t)lo + 16u) & 255u) == 0) {
        REQUIRE(hk_hunk_alloc(h, 16, "first"));
        hk_hunk_free_range(h, &lo, &n);
    }
    unsigned char *pad = (unsigned char *)lo;
    unsigned char *p = unbounded(hk_hunk_alloc_aligned(h, 256, 16, "aligned"));
    REQUIRE(p);
    REQUIRE(p > pad + 16);
    uint64_t word;
    memcpy(&word, pad + 8, 8);
    CHECK((word >> 60) & 4u); /* HUNK_F_PAD */
    uint64_t bad = word | ((uint64_t)8u << 60);
    memcpy(pad + 8, &bad, 8);
    CHECK_EQ(hk_hunk_check(h), HK_ERR_CORRUPT);
    CHECK_EQ(g_errs.last_kind, HK_EK_CORRUPT_HEADER);
    memcpy(pad + 8, &word, 8);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

/* The largest request that fits, as stats tells it, follows the flag. */
HKT_TEST(stats_largest_free_follows_the_flag) {
    hk_hunk *a = make(1 << 16, 0);
    hk_hunk *b = make(1 << 16, HK_FLAG_CANARY);
    REQUIRE(a && b);
    hk_stats sa, sb;
    CHECK_EQ(hk_hunk_stats(a, &sa), HK_OK);
    CHECK_EQ(hk_hunk_stats(b, &sb), HK_OK);
    CHECK_EQ(sa.largest_free, sa.free - 16);
    CHECK_EQ(sb.largest_free, sb.free - 16 - 8);
    /* the largest request fits exactly, one more does not */
    hkt_errors_reset(&g_errs);
    CHECK(hk_hunk_alloc(a, sa.largest_free + 1, "big") == NULL);
    CHECK(hk_hunk_alloc(a, sa.largest_free, "big") != NULL);
    CHECK(hk_hunk_alloc(b, sb.largest_free + 1, "big") == NULL);
    CHECK(hk_hunk_alloc(b, sb.largest_free, "big") != NULL);
    CHECK_EQ(hk_hunk_check(a), HK_OK);
    CHECK_EQ(hk_hunk_check(b), HK_OK);
    hk_hunk_destroy(a);
    hk_hunk_destroy(b);
}

/* Guard heap: placement, fill patterns, quarantine, misuse reports,
 * sampling, the mapping cap with 100,000 live blocks, leaks, walk and
 * where. Threads, lock hooks, the randomized sequence against a shadow
 * model and slot reuse are in test_guard_model.c; fault reports (signals)
 * in test_guard_fault.c. */
#include "guard_test_util.h"
/* ---- leaks ---------------------------------------------------------------- */

static void *guard_leak_kept[2];
static uintptr_t guard_leak_hidden[50];

static HK__NOINLINE void guard_leak_make(hk_guard *g) {
    for (int i = 0; i < 50; i++) guard_leak_hidden[i] = ~(uintptr_t)hk_guard_alloc(g, 40);
    void **parent = hk_guard_alloc(g, sizeof(void *));
    *parent = hk_guard_alloc(g, 77); /* reachable through parent */
    guard_leak_kept[0] = parent;
}
static HK__NOINLINE void guard_scrub(void) {
    volatile char junk[32768];
    memset((char *)junk, 0, sizeof junk);
}

HKT_TEST(guard_leaks) {
    if (hk__tsan_enabled()) {
        /* The scan reads every writable mapping, and ThreadSanitizer's shadow
         * is terabytes of them: minutes of page faults, nothing learned. */
        printf("    skipped under ThreadSanitizer\n");
        return;
    }
    /* First test of the program, on a reservation of its own size: no stale
     * pointer from an earlier heap at the same addresses can make blocks look
     * reachable (the scan is conservative). */
    /* 16-aligned blocks: the padding tests below write past an end */
    hk_guard *g = mk((hk_guard_desc){.reserve = ((size_t)1 << 30) + 777 * pg(), .align_min = 16});
    REQUIRE(g);
    guard_leak_make(g);
    guard_scrub();
    size_t bytes = 0, n;
    if (!hk__asan_enabled()) { /* ASan keeps its own copies of pointers (allocation stacks) */
        n = hk_guard_leaks(g, HK_GUARD_LEAKS_UNREACHABLE, &bytes);
        /* the 50 hidden blocks are unreachable (a stale copy of the last one in a
         * register or dead stack slot may keep it); parent and child are not */
        if (n < 49 || n > 50) printf("    unreachable: %zu (%zu bytes)\n", n, bytes);
        CHECK(n >= 49 && n <= 50);
        CHECK(bytes >= 49 * 40 && bytes <= 50 * 40);
        CHECK_EQ(errs.last_kind, HK_EK_LEAK);
        CHECK_STR_CONTAINS(errs.last_message, "unreachable at exit");
    }
    n = hk_guard_leaks(g, HK_GUARD_LEAKS_ALL, &bytes);
    CHECK_EQ(n, 52);
    CHECK_EQ(bytes, 50 * 40 + sizeof(void *) + 77);
    for (int i = 0; i < 50; i++) hk_guard_free(g, (void *)~guard_leak_hidden[i]);
    hk_guard_free(g, *(void **)guard_leak_kept[0]);
    hk_guard_free(g, guard_leak_kept[0]);
    hkt_errors_reset(&errs);
    CHECK_EQ(hk_guard_leaks(g, HK_GUARD_LEAKS_ALL, &bytes), 0);
    CHECK_EQ(bytes, 0);
    CHECK_EQ(errs.count, 0);
    /* damage found at exit */
    unsigned char *p = hk_guard_alloc(g, 10);
    poke(p, 10, 0);
    hk_guard_leaks(g, HK_GUARD_LEAKS_ALL, NULL);
    CHECK_STR_CONTAINS(errs.last_message, "leak"); /* the leak line comes last */
    CHECK_EQ(errs.count, 2);
    poke(p, 10, HK_FILL_PAD);
    hk_guard_free(g, p);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    hk_guard_destroy(g);
}

/* Each bad desc is refused with a report naming what is wrong. */
HKT_TEST(guard_bad_descs) {
    CHECK(hk_guard_create(NULL) == NULL);
    hk_guard_desc d = {0};
    d.on_error = hkt_on_error;
    d.error_user = &errs;
    hkt_errors_reset(&errs);
    d.align = 3;
    CHECK(hk_guard_create(&d) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_INVALID_ARG);
    CHECK_STR_CONTAINS(errs.last_message, "align");
    d.align = pg() * 2;
    CHECK(hk_guard_create(&d) == NULL);
    d.align = 0;
    d.backing.malloc = malloc;
    CHECK(hk_guard_create(&d) == NULL);
    CHECK_STR_CONTAINS(errs.last_message, "backing");
    d.backing.malloc = NULL;
    d.frames = HK_GUARD_MAX_FRAMES + 1;
    CHECK(hk_guard_create(&d) == NULL);
    CHECK_STR_CONTAINS(errs.last_message, "frames");
    d.frames = 0;
    d.side = (hk_guard_side)7;
    CHECK(hk_guard_create(&d) == NULL);
    CHECK_STR_CONTAINS(errs.last_message, "side");
    d.side = HK_GUARD_SIDE_END;
    CHECK_EQ(errs.count, 5);
    hk_guard_destroy(NULL);
}

/* Lock hooks are both set or both unset (the instance core refuses the
 * rest, with a report). */
static void guard_half_lock(void *u) { (void)u; }
HKT_TEST(guard_half_set_lock_hooks_refused) {
    hk_guard_desc d = {0};
    d.on_error = hkt_on_error;
    d.error_user = &errs;
    hkt_errors_reset(&errs);
    d.lock.lock = guard_half_lock;
    CHECK(hk_guard_create(&d) == NULL);
    CHECK_EQ(errs.count, 1);
    CHECK_EQ(errs.last_kind, HK_EK_INVALID_ARG);
    CHECK_STR_CONTAINS(errs.last_message, "unlock is missing");
    d.lock.lock = NULL;
    d.lock.unlock = guard_half_lock;
    CHECK(hk_guard_create(&d) == NULL);
    CHECK_STR_CONTAINS(errs.last_message, "lock is missing");
    CHECK_EQ(errs.count, 2);
}

/* HK_FLAG_PARANOID: a write into a block's padding (no fault: it is on the
 * block's own page) is reported by the next mutating call, not only when
 * that block is freed. Without the flag the same write stays unseen until
 * the block's free. */
HKT_TEST(guard_paranoid_reports_damage_on_next_call) {
    for (int paranoid = 0; paranoid < 2; paranoid++) {
        hk_guard *g = mk((hk_guard_desc){.flags = paranoid ? HK_FLAG_PARANOID : 0u, .align_min = 16});
        REQUIRE(g);
        unsigned char *p = hk_guard_alloc(g, 100);
        REQUIRE(p);
        CHECK_EQ(errs.count, 0);
        poke(p, 100 + (paranoid ? 3 : 5), 0x42); /* in the padding after the block */
        void *q = hk_guard_alloc(g, 10);         /* an unrelated call */
        REQUIRE(q);
        if (paranoid) {
            CHECK_EQ(errs.count, 1);
            CHECK_EQ(errs.last_kind, HK_EK_HEAP_OVERFLOW);
            CHECK_STR_CONTAINS(errs.last_message, "padding of 100-byte block");
        } else {
            CHECK_EQ(errs.count, 0);
        }
        poke(p, 100 + (paranoid ? 3 : 5), HK_FILL_PAD); /* repaired */
        hkt_errors_reset(&errs);
        CHECK_EQ(hk_guard_free(g, q), HK_OK);
        q = hk_guard_realloc(g, NULL, 30);
        CHECK_EQ(hk_guard_free(g, q), HK_OK);
        CHECK_EQ(hk_guard_free(g, p), HK_OK);
        CHECK_EQ(errs.count, 0);
        hk_guard_destroy(g);
    }
}

HKT_TEST(guard_get_info_bad_args) {
    hk_guard_info gi;
    CHECK_EQ(hk_guard_get_info(NULL, &gi), HK_ERR_INVALID);
    CHECK_EQ(gi.live_guarded, 0);
    hk_guard *g = mk((hk_guard_desc){0});
    REQUIRE(g);
    CHECK_EQ(hk_guard_get_info(g, NULL), HK_ERR_INVALID);
    hk_guard_destroy(g);
}

HKT_TEST(guard_end_placement_and_fill) {
    hk_guard *g = mk((hk_guard_desc){0});
    REQUIRE(g);
    static const size_t sizes[] = {1, 13, 16, 100, 4095, 4096, 4097, 100000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        unsigned char *p = hk_guard_alloc(g, n);
        REQUIRE(p);
        size_t a = (n & (~n + 1)) < 16 ? (n & (~n + 1)) : 16; /* what its size needs, at most 16 */
        CHECK(((uintptr_t)p & (a - 1)) == 0);
        size_t span = (n + a - 1) & ~(a - 1);
        CHECK(page_aligned(p + span)); /* against the trailing guard */
        CHECK_EQ(span, n);             /* ends on it: no padding after the block */
        CHECK_EQ(hk_fill_check(p, n, HK_FILL_ALLOC), n);
        CHECK_EQ(hk_guard_usable_size(g, p), n);
        CHECK(hk_guard_owns(g, p));
        CHECK(!hk_guard_owns(g, p + 1));
        hk_block_info bi;
        CHECK_EQ(hk_guard_where(g, p + n / 2, &bi), HK_OK);
        CHECK(bi.address == p && bi.size == n && (bi.flags & HK_BLOCK_USED) && (bi.flags & HK_BLOCK_GUARDED));
        CHECK_EQ(hk_guard_check(g), HK_OK);
        CHECK_EQ(hk_guard_free(g, p), HK_OK);
        CHECK_EQ(hk_guard_where(g, p, &bi), HK_OK);
        CHECK(bi.flags & HK_BLOCK_QUARANTINED);
    }
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    hk_stats st;
    CHECK_EQ(hk_guard_stats(g, &st), HK_OK);
    CHECK_EQ(st.size, sizeof st);
    CHECK_EQ(st.version, HK_STATS_VERSION);
    CHECK(strcmp(st.allocator, "guard") == 0);
    CHECK_EQ(st.live_blocks, 0);
    CHECK_EQ(st.alloc_count, 8);
    CHECK_EQ(st.free_count, 8);
    CHECK_EQ(st.peak_used, 100000);
    hk_guard_destroy(g);
}

/* align_min = 16 (glibc's alignment for every block): an odd-sized block
 * keeps padding after it, checked at free; an aligned request gets exactly
 * its alignment, and a plain one never less than align_min. */
HKT_TEST(guard_align_min_and_aligned_requests) {
    hk_guard *g = mk((hk_guard_desc){.align_min = 16});
    REQUIRE(g);
    static const size_t sizes[] = {1, 13, 24, 100, 4095};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i], span = (n + 15) & ~(size_t)15;
        unsigned char *p = hk_guard_alloc(g, n);
        REQUIRE(p);
        CHECK(((uintptr_t)p & 15) == 0);
        CHECK(page_aligned(p + span));
        CHECK_EQ(hk_fill_check(p + n, span - n, HK_FILL_PAD), span - n);
        p = hk_guard_realloc(g, p, n + 1);
        REQUIRE(p);
        CHECK(((uintptr_t)p & 15) == 0);
        CHECK_EQ(hk_guard_free(g, p), HK_OK);
    }
    hk_guard_destroy(g);
    g = mk((hk_guard_desc){0});
    REQUIRE(g);
    unsigned char *q = hk_guard_alloc_aligned(g, 64, 50); /* asked 64: 14 bytes of padding kept */
    REQUIRE(q);
    CHECK(((uintptr_t)q & 63) == 0);
    CHECK(page_aligned(q + 64));
    CHECK_EQ(hk_fill_check(q + 50, 14, HK_FILL_PAD), 14);
    CHECK_EQ(hk_guard_free(g, q), HK_OK);
    q = hk_guard_alloc_aligned(g, 2, 24); /* asked less than the size needs: 8 */
    REQUIRE(q);
    CHECK(((uintptr_t)q & 7) == 0);
    CHECK(page_aligned(q + 24));
    CHECK_EQ(hk_guard_free(g, q), HK_OK);
    q = hk_guard_realloc(g, NULL, 13); /* realloc places like alloc: on the guard */
    REQUIRE(q);
    CHECK(page_aligned(q + 13));
    q = hk_guard_realloc(g, q, 22);
    REQUIRE(q);
    CHECK(((uintptr_t)q & 1) == 0);
    CHECK(page_aligned(q + 22));
    CHECK_EQ(hk_guard_free(g, q), HK_OK);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    hk_guard_destroy(g);
    /* align_min must be a power of two no larger than align */
    CHECK(mk((hk_guard_desc){.align_min = 3}) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_INVALID_ARG);
    CHECK(mk((hk_guard_desc){.align = 8, .align_min = 16}) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_INVALID_ARG);
}

HKT_TEST(guard_size_zero_is_unique_and_off_limits) {
    hk_guard *g = mk((hk_guard_desc){0});
    REQUIRE(g);
    void *a = hk_guard_alloc(g, 0), *b = hk_guard_alloc(g, 0);
    REQUIRE(a && b);
    CHECK(a != b);
    CHECK_EQ(hk_guard_usable_size(g, a), 0);
    CHECK_EQ(hk_guard_free(g, a), HK_OK);
    CHECK_EQ(hk_guard_free(g, b), HK_OK);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    hk_guard_destroy(g);
}

HKT_TEST(guard_start_random_exact_zero) {
    hk_guard *g = mk((hk_guard_desc){.side = HK_GUARD_SIDE_START});
    REQUIRE(g);
    unsigned char *p = hk_guard_alloc(g, 13);
    REQUIRE(p);
    CHECK(page_aligned(p));
    CHECK_EQ(hk_fill_check(p + 13, pg() - 13, HK_FILL_PAD), pg() - 13);
    hk_guard_free(g, p);
    hk_guard_destroy(g);

    g = mk((hk_guard_desc){.side = HK_GUARD_SIDE_RANDOM, .seed = 42});
    REQUIRE(g);
    int starts = 0, ends = 0;
    for (int i = 0; i < 64; i++) {
        unsigned char *q = hk_guard_alloc(g, 40);
        REQUIRE(q);
        if (page_aligned(q))
            starts++;
        else if (page_aligned(q + 40)) /* 8-aligned: a 40-byte block ends on the guard */
            ends++;
        hk_guard_free(g, q);
    }
    CHECK(starts > 0 && ends > 0);
    CHECK_EQ(starts + ends, 64);
    hk_guard_destroy(g);

    g = mk((hk_guard_desc){.align = 1});
    REQUIRE(g);
    for (size_t n = 1; n < 40; n += 3) {
        unsigned char *q = hk_guard_alloc(g, n);
        REQUIRE(q);
        CHECK(page_aligned(q + n)); /* exact: no padding after the block */
        hk_guard_free(g, q);
    }
    CHECK_EQ(hk_guard_check(g), HK_OK);
    hk_guard_destroy(g);

    g = mk((hk_guard_desc){.flags = HK_FLAG_ZERO, .quarantine_blocks = 1}); /* resident pages get reused */
    REQUIRE(g);
    for (int i = 0; i < 20; i++) {
        unsigned char *q = hk_guard_alloc(g, 300);
        REQUIRE(q);
        CHECK_EQ(hk_fill_check(q, 300, 0), 300);
        memset(q, 0x55, 300);
        hk_guard_free(g, q);
    }
    hk_guard_destroy(g);
}

HKT_TEST(guard_aligned) {
    hk_guard *g = mk((hk_guard_desc){0});
    REQUIRE(g);
    for (size_t a = 16; a <= 3 * pg(); a *= 2) {
        void *p = hk_guard_alloc_aligned(g, a, 100);
        REQUIRE(p);
        CHECK(((uintptr_t)p & (a - 1)) == 0);
        memset(p, 1, 100);
        CHECK_EQ(hk_guard_free(g, p), HK_OK);
    }
    CHECK(hk_guard_alloc_aligned(g, 24, 10) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_INVALID_ARG);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    hk_guard_destroy(g);
}

HKT_TEST(guard_overflowing_sizes) {
    hk_guard *g = mk((hk_guard_desc){0});
    REQUIRE(g);
    CHECK(hk_guard_alloc(g, SIZE_MAX) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_OVERFLOW);
    CHECK(hk_guard_alloc(g, SIZE_MAX - 8) == NULL);
    CHECK(hk_guard_alloc_aligned(g, 64, SIZE_MAX - 100) == NULL);
    CHECK(hk_guard_alloc_unguarded(g, SIZE_MAX) == NULL);
    void *p = hk_guard_alloc(g, 10);
    CHECK(hk_guard_realloc(g, p, SIZE_MAX) == NULL);
    CHECK_EQ(hk_guard_usable_size(g, p), 10); /* p kept */
    hk_stats st;
    hk_guard_stats(g, &st);
    CHECK(st.fail_count >= 4);
    CHECK_EQ(hk_guard_free(g, p), HK_OK);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    hk_guard_destroy(g);
}

static char guard_test_global[64];

HKT_TEST(guard_misuse_reports) {
    hk_guard *g = mk((hk_guard_desc){.name = "t"});
    REQUIRE(g);
    char *p = hk_guard_alloc(g, 64);
    REQUIRE(p);
    /* interior */
    CHECK_EQ(hk_guard_free(g, p + 8), HK_ERR_FOREIGN);
    CHECK_EQ(errs.last_kind, HK_EK_INTERIOR_PTR);
    CHECK_STR_CONTAINS(errs.last_message, "guard 't': interior pointer");
    CHECK_STR_CONTAINS(errs.last_message, "offset +8 of 64-byte block");
    CHECK_EQ(hk_guard_check(g), HK_OK);
    /* stack and global */
    char local[32];
    CHECK_EQ(hk_guard_free(g, local + 16), HK_ERR_FOREIGN);
    CHECK_EQ(errs.last_kind, HK_EK_FOREIGN_PTR);
    CHECK_STR_CONTAINS(errs.last_message, "never returned");
    CHECK_EQ(hk_guard_free(g, guard_test_global + 16), HK_ERR_FOREIGN);
    CHECK_EQ(errs.last_kind, HK_EK_FOREIGN_PTR);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    /* double free */
    CHECK_EQ(hk_guard_free(g, p), HK_OK);
    int before = errs.count;
    CHECK_EQ(hk_guard_free(g, p), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(errs.count, before + 1);
    CHECK_EQ(errs.last_kind, HK_EK_DOUBLE_FREE);
    CHECK_STR_CONTAINS(errs.last_message, "already freed");
    CHECK_EQ(hk_guard_check(g), HK_OK);
    /* realloc of a freed block, of a foreign pointer */
    CHECK(hk_guard_realloc(g, p, 100) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_USE_AFTER_FREE);
    CHECK_STR_CONTAINS(errs.last_message, "realloc of freed block");
    CHECK(hk_guard_realloc(g, local, 100) == NULL);
    CHECK_EQ(errs.last_kind, HK_EK_FOREIGN_PTR);
    /* usable size of junk */
    CHECK_EQ(hk_guard_usable_size(g, local), 0);
    CHECK_EQ(hk_guard_usable_size(g, p), 0);
    /* an arena address never allocated */
    hk_stats st;
    hk_guard_stats(g, &st);
    CHECK(st.error_count >= 8);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    CHECK_EQ(hk_guard_report_count(g), (uint64_t)errs.count - 2); /* usable_size reports are not counted */
    hk_guard_destroy(g);
}

HKT_TEST(guard_padding_damage) {
    hk_guard *g = mk((hk_guard_desc){.align_min = 16}); /* padding after odd-sized blocks */
    REQUIRE(g);
    unsigned char *p = hk_guard_alloc(g, 13);
    poke(p, 13, 0);
    CHECK_EQ(hk_guard_check(g), HK_ERR_CORRUPT);
    CHECK_EQ(errs.last_kind, HK_EK_HEAP_OVERFLOW);
    poke(p, 13, HK_FILL_PAD); /* repaired: check passes again */
    CHECK_EQ(hk_guard_check(g), HK_OK);
    poke(p, 15, 1);
    CHECK_EQ(hk_guard_free(g, p), HK_ERR_CORRUPT);
    CHECK_EQ(errs.last_kind, HK_EK_HEAP_OVERFLOW);
    CHECK_STR_CONTAINS(errs.last_message, "write past the end of 13-byte block");
    CHECK_STR_CONTAINS(errs.last_message, "found at free: padding damaged at offset +15");
    CHECK_EQ(hk_guard_check(g), HK_OK); /* the block was still freed */
    hk_guard_info gi;
    CHECK_EQ(hk_guard_get_info(g, &gi), HK_OK);
    CHECK_EQ(gi.live_guarded, 0);

    unsigned char *q = hk_guard_alloc(g, 32);
    poke(q, -1, 7);
    CHECK_EQ(hk_guard_free(g, q), HK_ERR_CORRUPT);
    CHECK_EQ(errs.last_kind, HK_EK_HEAP_UNDERFLOW);
    CHECK_STR_CONTAINS(errs.last_message, "write before the start of 32-byte block");
    CHECK_STR_CONTAINS(errs.last_message, "padding damaged at offset -1 ");
    CHECK_EQ(hk_guard_check(g), HK_OK);

    /* unguarded blocks: the canary */
    unsigned char *u = hk_guard_alloc_unguarded(g, 20);
    REQUIRE(u);
    CHECK(hk_guard_owns(g, u));
    CHECK_EQ(hk_guard_usable_size(g, u), 20);
    poke(u, 21, 0);
    CHECK_EQ(hk_guard_free(g, u), HK_ERR_CORRUPT);
    CHECK_EQ(errs.last_kind, HK_EK_HEAP_OVERFLOW);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    hk_guard_destroy(g);
}

HKT_TEST(guard_realloc_keeps_contents) {
    hk_guard *g = mk((hk_guard_desc){0});
    REQUIRE(g);
    unsigned char *p = hk_guard_realloc(g, NULL, 10);
    REQUIRE(p);
    for (int i = 0; i < 10; i++) p[i] = (unsigned char)i;
    unsigned char *q = hk_guard_realloc(g, p, 5000);
    REQUIRE(q && q != p);
    for (int i = 0; i < 10; i++) CHECK_EQ(q[i], i);
    CHECK_EQ(hk_guard_usable_size(g, q), 5000);
    hk_block_info bi;
    CHECK_EQ(hk_guard_where(g, p, &bi), HK_OK);
    CHECK(bi.flags & HK_BLOCK_QUARANTINED); /* the old block is quarantined */
    unsigned char *r = hk_guard_realloc(g, q, 3);
    REQUIRE(r);
    CHECK(r[0] == 0 && r[2] == 2);
    unsigned char *z = hk_guard_realloc(g, r, 0);
    REQUIRE(z);
    CHECK_EQ(hk_guard_usable_size(g, z), 0);
    CHECK_EQ(hk_guard_free(g, z), HK_OK);
    /* unguarded to unguarded */
    hk_guard_destroy(g);
    g = mk((hk_guard_desc){.sample_rate = 1000000});
    REQUIRE(g);
    unsigned char *u = hk_guard_alloc(g, 1); /* the first allocation of a thread is sampled */
    hk_guard_free(g, u);
    u = hk_guard_alloc(g, 8);
    REQUIRE(u);
    memcpy(u, "abcdefgh", 8);
    unsigned char *v = hk_guard_realloc(g, u, 100000);
    REQUIRE(v);
    CHECK(memcmp(v, "abcdefgh", 8) == 0);
    CHECK_EQ(hk_guard_usable_size(g, v), 100000);
    CHECK_EQ(hk_guard_free(g, v), HK_OK);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    hk_guard_destroy(g);
}

HKT_TEST(guard_quarantine_fifo_and_bounds) {
    hk_guard *g = mk((hk_guard_desc){.quarantine_blocks = 2});
    REQUIRE(g);
    void *a = hk_guard_alloc(g, 100), *b = hk_guard_alloc(g, 100), *c = hk_guard_alloc(g, 100);
    hk_guard_free(g, a);
    hk_guard_free(g, b);
    hk_guard_info gi;
    CHECK_EQ(hk_guard_get_info(g, &gi), HK_OK);
    CHECK_EQ(gi.quarantine_blocks, 2);
    hk_guard_free(g, c); /* a, the oldest, leaves */
    CHECK_EQ(hk_guard_get_info(g, &gi), HK_OK);
    CHECK_EQ(gi.quarantine_blocks, 2);
    hk_block_info bi;
    CHECK_EQ(hk_guard_where(g, a, &bi), HK_ERR_FOREIGN);
    CHECK_EQ(hk_guard_where(g, b, &bi), HK_OK);
    void *d = hk_guard_alloc(g, 100);
    CHECK(d == a); /* only the evicted range is reused */
    hk_guard_free(g, d);
    /* double free of a block that already left the quarantine */
    void *e = hk_guard_alloc(g, 5000), *f = hk_guard_alloc(g, 5000), *h = hk_guard_alloc(g, 5000);
    hk_guard_free(g, e);
    hk_guard_free(g, f);
    hk_guard_free(g, h);
    CHECK_EQ(hk_guard_free(g, e), HK_ERR_DOUBLE_FREE);
    CHECK_STR_CONTAINS(errs.last_message, "has left the quarantine");
    CHECK_EQ(hk_guard_check(g), HK_OK);
    hk_guard_destroy(g);

    g = mk((hk_guard_desc){.quarantine_bytes = 3 * pg()});
    REQUIRE(g);
    for (int i = 0; i < 10; i++) hk_guard_free(g, hk_guard_alloc(g, 10));
    CHECK_EQ(hk_guard_get_info(g, &gi), HK_OK);
    CHECK_EQ(gi.quarantine_bytes, 3 * pg());
    CHECK_EQ(gi.quarantine_blocks, 3);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    hk_guard_destroy(g);
}

HKT_TEST(guard_reservation_exhaustion_reuses_and_falls_back) {
    /* 64 pages of address space: slots of 2 pages, quarantine shortened on demand */
    hk_guard *g = mk(
        (hk_guard_desc){.reserve = 64 * pg(), .quarantine_blocks = SIZE_MAX, .quarantine_bytes = SIZE_MAX});
    REQUIRE(g);
    for (int i = 0; i < 200; i++) {
        void *p = hk_guard_alloc(g, 100);
        REQUIRE(p);
        hk_guard_free(g, p);
    }
    void *big = hk_guard_alloc(g, 200 * pg()); /* larger than the reservation: unguarded */
    REQUIRE(big);
    memset(big, 1, 200 * pg());
    hk_guard_info gi;
    CHECK_EQ(hk_guard_get_info(g, &gi), HK_OK);
    CHECK_EQ(gi.live_unguarded, 1);
    CHECK_EQ(hk_guard_free(g, big), HK_OK);
    /* mixed sizes split and reuse larger free slots */
    void *v[20];
    for (int i = 0; i < 20; i++) v[i] = hk_guard_alloc(g, (size_t)(i % 3 + 1) * pg());
    for (int i = 0; i < 20; i++) CHECK_EQ(hk_guard_free(g, v[i]), HK_OK);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    hk_guard_destroy(g);
}

HKT_TEST(guard_sampling) {
    hk_guard *g = mk((hk_guard_desc){.sample_rate = 10, .seed = 7});
    REQUIRE(g);
    static void *v[10000];
    for (int i = 0; i < 10000; i++) {
        v[i] = hk_guard_alloc(g, 32);
        REQUIRE(v[i]);
    }
    hk_guard_info gi;
    CHECK_EQ(hk_guard_get_info(g, &gi), HK_OK);
    CHECK(gi.live_guarded > 500 && gi.live_guarded < 2000);
    CHECK_EQ(gi.live_guarded + gi.live_unguarded, 10000);
    hk_stats st;
    hk_guard_stats(g, &st);
    CHECK_EQ(st.live_blocks, 10000);
    CHECK_EQ(st.used, 320000);
    for (int i = 0; i < 10000; i++) CHECK_EQ(hk_guard_free(g, v[i]), HK_OK);
    memset(v, 0, sizeof v);
    hk_guard_stats(g, &st);
    CHECK_EQ(st.live_blocks, 0);
    CHECK_EQ(st.used, 0);
    CHECK_EQ(st.free_count, 10000);
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    hk_guard_destroy(g);
}

HKT_TEST(guard_cap_on_live_guarded_blocks) {
    hk_guard *g = mk((hk_guard_desc){.max_guarded = 100});
    REQUIRE(g);
    void *v[300];
    for (int i = 0; i < 300; i++) v[i] = hk_guard_alloc(g, 8);
    hk_guard_info gi;
    CHECK_EQ(hk_guard_get_info(g, &gi), HK_OK);
    CHECK_EQ(gi.live_guarded, 100);
    CHECK_EQ(gi.live_unguarded, 200);
    CHECK_EQ(gi.over_cap, 200);
    CHECK_EQ(gi.max_guarded, 100);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    for (int i = 0; i < 300; i++) CHECK_EQ(hk_guard_free(g, v[i]), HK_OK);
    hk_guard_destroy(g);
}

/* 100,000 live blocks: twice what vm.max_map_count would allow if every one
 * were guarded with its own mappings. The process must stay under the limit
 * and every allocation must succeed. */
static void guard_many_live(uint32_t sample) {
    hk_guard *g = mk((hk_guard_desc){.sample_rate = sample, .reserve = (size_t)4 << 30});
    REQUIRE(g);
    enum { N = 100000 };
    static unsigned char *v[N];
    for (int i = 0; i < N; i++) {
        v[i] = hk_guard_alloc(g, 24);
        REQUIRE(v[i]);
        memset(v[i], i & 0x7f, 24);
    }
    size_t maps = hk_os_map_count(), limit = hk_os_max_map_count();
    hk_guard_info gi;
    CHECK_EQ(hk_guard_get_info(g, &gi), HK_OK);
    if (getenv("HKT_VERBOSE"))
        printf("    maps %zu / %zu, guarded %zu (cap %zu), unguarded %zu\n", maps, limit, gi.live_guarded,
               gi.max_guarded, gi.live_unguarded);
    CHECK(maps > 0 && maps < limit);
    CHECK(gi.live_guarded <= gi.max_guarded);
    CHECK(gi.live_guarded > 0);
    CHECK_EQ(gi.live_guarded + gi.live_unguarded, N);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    int ok = 1;
    for (int i = 0; i < N; i++) ok &= v[i][23] == (unsigned char)(i & 0x7f);
    CHECK(ok);
    for (int i = 0; i < N; i++) hk_guard_free(g, v[i]);
    memset(v, 0, sizeof v); /* stale pointers would keep later heaps' blocks "reachable" */
    CHECK_EQ(errs.count, 0);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    hk_guard_destroy(g);
}
HKT_TEST(guard_100k_live_blocks_full) { guard_many_live(0); }
HKT_TEST(guard_100k_live_blocks_sampled) { guard_many_live(3); }

static int guard_walk_count(const hk_block_info *bi, void *user) {
    int *c = (int *)user;
    if (bi->flags & HK_BLOCK_USED) c[0]++;
    if (bi->flags & HK_BLOCK_QUARANTINED) c[1]++;
    return 0;
}
static int guard_walk_stop(const hk_block_info *bi, void *user) {
    (void)bi;
    (void)user;
    return 5;
}

HKT_TEST(guard_walk_and_where) {
    hk_guard *g = mk((hk_guard_desc){0});
    REQUIRE(g);
    char *v[10];
    for (int i = 0; i < 10; i++) v[i] = hk_guard_alloc(g, (size_t)(i + 1) * 100);
    for (int i = 0; i < 4; i++) hk_guard_free(g, v[i]);
    int c[2] = {0, 0};
    CHECK_EQ(hk_guard_walk(g, guard_walk_count, c), 0);
    CHECK_EQ(c[0], 6);
    CHECK_EQ(c[1], 4);
    CHECK_EQ(hk_guard_walk(g, guard_walk_stop, NULL), 5);
    hk_block_info bi;
    CHECK_EQ(hk_guard_where(g, v[5] - 1, &bi), HK_OK); /* padding before the block */
    CHECK(bi.address == v[5]);
    int local;
    CHECK_EQ(hk_guard_where(g, &local, &bi), HK_ERR_FOREIGN);
    for (int i = 4; i < 10; i++) hk_guard_free(g, v[i]);
    hk_guard_destroy(g);
}

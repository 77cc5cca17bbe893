/* How a free to a mark after cuts is decided (src/hunk.c, marks). By the
 * end's mark stack, in O(1) whatever the cuts (on OS memory a reserved
 * stack, on caller memory HUNK_MSTACK_FIXED entries per end); for a mark
 * that got no entry (past a fixed stack's levels, or with its room set to 0
 * here so that every mark is one), by the log of the end's cuts (at most
 * HUNK_CUT_LOG entries), walking the headers under the mark only when the
 * log dropped the cuts the mark needs. A damaged header below the mark
 * tells them apart: the walk refuses the mark there, the stack and the log
 * never read it. */
#include "hunk_internal.h"
#include "hunk_test_util.h"
#include "internal.h"

#include <stdlib.h>

/* A hunk on caller memory: with its fixed mark stacks, or (stack 0) with
 * their room set to 0 (test hook), so that no mark gets an entry and the
 * cut log and the walk decide every one. */
static unsigned char g_mem[2][1 << 20] __attribute__((aligned(64)));
static hk_hunk *make_mem(int which, uint32_t flags, int stack) {
    hkt_errors_reset(&g_errs);
    hk_hunk_desc d = {0};
    d.memory = g_mem[which];
    d.size = sizeof g_mem[which];
    d.flags = flags;
    d.name = "test";
    d.on_error = hkt_on_error;
    d.error_user = &g_errs;
    hk_hunk *h = hk_hunk_create(&d);
    if (!h || h->mres || h->mstack[0].room != HUNK_MSTACK_FIXED) return NULL; /* the fixed stacks */
    if (!stack) h->mstack[0].room = h->mstack[1].room = 0;
    return h;
}
/* Has this hunk (on OS memory) its reserved mark stacks (not the fixed ones)?
 * Required of every hunk on OS memory here: the hosts heapkit is tested on
 * grant the reservation, and a test that skipped without it would pass
 * with the stacks broken. */
static int stacked(const hk_hunk *h) { return h->mres != NULL; }

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
static void nested_marks(hk_hunk *h) {
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
HKT_TEST(nested_marks_decided_without_reading_headers) {
    nested_marks(make(1 << 20, 0));
    nested_marks(make_mem(0, 0, 1));
    nested_marks(make_mem(0, 0, 0));
}

/* A cut below a mark makes it stale, whatever was allocated over it since;
 * the stack or the log says so without reading the newer blocks. */
static void cut_below(hk_hunk *h) {
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
HKT_TEST(cut_below_a_mark_makes_it_stale) {
    cut_below(make(1 << 20, 0));
    cut_below(make_mem(0, 0, 1));
    cut_below(make_mem(0, 0, 0));
}

/* Without stack entries, more cuts at rising levels than the log holds: the
 * first ones are dropped, and a mark that needs them is decided by the walk
 * (valid or stale as before). */
HKT_TEST(log_overflow_falls_back_to_the_walk) {
    hk_hunk *h = make_mem(0, 0, 0);
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
    hk_hunk *h = make_mem(0, 0, 0), *other = make(1 << 16, 0);
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
    hk_hunk *h = make_mem(0, 0, 0);
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
static int random_marks(hk_hunk *h, int with_log) { /* 1: the log overflows, 0: never, -1: either */
    if (!h) {
        CHECK(0);
        return 0;
    }
    enum { NM = 24 };
    hk_hunk_mark marks[2][NM];
    int alive[2][NM] = {{0}}, nm[2] = {0, 0};
    uint64_t seed = 0x39C;
    int bad = 0, walked_or_logged = 0, seen_lost = 0, unstacked = 0;
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
                unstacked += m.offset && !(m.end & HUNK_MARK_STACKED);
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
    if (with_log == 1)
        CHECK(seen_lost); /* the log overflowed on the way: the walk decided some */
    else if (with_log == 0)
        CHECK(!seen_lost); /* the stack decided every one */
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
    return unstacked;
}
HKT_TEST(random_marks_match_the_model) {
    random_marks(make_mem(0, HK_FLAG_QUIET, 0), 1);
    hk_hunk *h = make(1 << 20, HK_FLAG_QUIET);
    REQUIRE(h);
    REQUIRE(stacked(h));
    CHECK_EQ(random_marks(h, 0), 0); /* every mark above 0 had an entry */
    /* the fixed stacks of caller memory: marks nest past their levels at
     * times, so marks with and without entries mix */
    CHECK(random_marks(make_mem(0, HK_FLAG_QUIET, 1), -1) > 100); /* frees to marks without an entry */
}

/* The same model on a stack whose room is a few entries and whose next
 * chunk the OS refuses half the time: marks with and without entries mix,
 * and every answer must still be the model's. */
HKT_TEST(random_marks_with_refused_chunks) {
    hk_hunk *h = make(1 << 20, HK_FLAG_QUIET);
    REQUIRE(h);
    REQUIRE(stacked(h));
    h->mstack[0].room = 3; /* the pages stay committed: a later commit is granted or refused as any */
    h->mstack[1].room = 2;
    hk_os_fail_random(500000, 0x39);
    int unstacked = random_marks(h, 0);
    hk_os_fail_random(0, 0);
    CHECK(unstacked > 10); /* frees below a cut to marks without an entry: decided by the walk */
}

/* The stack decides a mark older than any number of cuts at rising levels
 * in O(1): with the bottom header damaged, the walk would refuse the valid
 * mark; the stack accepts it without reading a header, and still refuses
 * the stale one. Both ends; a reserved stack, and a fixed one (caller
 * memory: the rising marks past its levels get no entry, the two marks
 * decided here have one). */
static void stack_decides(hk_hunk *h) {
    REQUIRE(h);
    for (int high = 0; high < 2; high++) {
        void *first = high ? hk_hunk_alloc_high(h, 100, "first") : hk_hunk_alloc(h, 100, "first");
        REQUIRE(first);
        hk_hunk_mark a = high ? hk_hunk_high_mark(h) : hk_hunk_low_mark(h);
        REQUIRE(high ? hk_hunk_alloc_high(h, 64, "x") : hk_hunk_alloc(h, 64, "x"));
        hk_hunk_mark stale = high ? hk_hunk_high_mark(h) : hk_hunk_low_mark(h);
        REQUIRE(high ? hk_hunk_alloc_high(h, 64, "y") : hk_hunk_alloc(h, 64, "y"));
        CHECK_EQ(high ? hk_hunk_free_to_high_mark(h, a) : hk_hunk_free_to_low_mark(h, a), HK_OK);
        for (int i = 0; i < 40 * HUNK_CUT_LOG; i++) { /* cuts at rising levels */
            REQUIRE(high ? hk_hunk_alloc_high(h, 64, "rise") : hk_hunk_alloc(h, 64, "rise"));
            hk_hunk_mark m = high ? hk_hunk_high_mark(h) : hk_hunk_low_mark(h);
            REQUIRE(high ? hk_hunk_alloc_high(h, 64, "gone") : hk_hunk_alloc(h, 64, "gone"));
            CHECK_EQ(high ? hk_hunk_free_to_high_mark(h, m) : hk_hunk_free_to_low_mark(h, m), HK_OK);
        }
        size_t want = 40 * HUNK_CUT_LOG + 1;
        CHECK_EQ(h->mstack[high].height, h->mres ? want : HUNK_MSTACK_FIXED);
        CHECK(a.end & stale.end & HUNK_MARK_STACKED);
        uint32_t s = swap_sentinel(first, 0xBADu); /* a walk would stop here and refuse */
        hkt_errors_reset(&g_errs);
        CHECK_EQ(high ? hk_hunk_free_to_high_mark(h, stale) : hk_hunk_free_to_low_mark(h, stale),
                 HK_ERR_INVALID);
        CHECK_STR_CONTAINS(g_errs.last_message, "stale");
        CHECK_EQ(high ? hk_hunk_free_to_high_mark(h, a) : hk_hunk_free_to_low_mark(h, a), HK_OK);
        CHECK_EQ(g_errs.count, 1);
        swap_sentinel(first, s);
        CHECK_EQ(h->mstack[high].height, (size_t)1);
        CHECK_EQ(high ? high_used(h) : low_used(h), a.offset);
        CHECK_EQ(hk_hunk_check(h), HK_OK);
    }
    hk_hunk_destroy(h);
}
HKT_TEST(stack_decides_after_many_rising_cuts) {
    hk_hunk *h = make(1 << 20, 0);
    REQUIRE(h);
    REQUIRE(stacked(h));
    stack_decides(h);
    stack_decides(make_mem(0, 0, 1));
}

/* Caller memory, marks nested past the fixed stack's levels: the marks past
 * them get no entry; after a cut above such a mark the log decides it
 * without reading a header, after more cuts at rising levels than the log
 * keeps the walk does (a damaged header below the mark makes it refuse),
 * and a free to a mark with an entry makes every one of them stale and
 * lets the stack take entries again. */
HKT_TEST(fixed_stack_full_falls_back_to_log_and_walk) {
    hk_hunk *h = make_mem(1, HK_FLAG_QUIET, 1);
    REQUIRE(h);
    void *first = hk_hunk_alloc(h, 100, "first");
    REQUIRE(first);
    hk_hunk_mark lv[HUNK_MSTACK_FIXED];
    for (unsigned i = 0; i < HUNK_MSTACK_FIXED; i++) {
        REQUIRE(hk_hunk_alloc(h, 16, "level"));
        lv[i] = hk_hunk_low_mark(h);
        CHECK(lv[i].end & HUNK_MARK_STACKED);
    }
    CHECK_EQ(h->mstack[0].height, (size_t)HUNK_MSTACK_FIXED);
    REQUIRE(hk_hunk_alloc(h, 64, "u"));
    hk_hunk_mark u = hk_hunk_low_mark(h);
    CHECK(!(u.end & HUNK_MARK_STACKED));
    CHECK(h->mstack[0].full);
    REQUIRE(hk_hunk_alloc(h, 64, "x"));
    hk_hunk_mark x = hk_hunk_low_mark(h);
    REQUIRE(hk_hunk_alloc(h, 64, "y"));
    CHECK_EQ(hk_hunk_free_to_low_mark(h, x), HK_OK); /* a cut above u */
    uint32_t s = swap_sentinel(first, 0xBADu);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, u), HK_OK); /* the log: no header read */
    swap_sentinel(first, s);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    /* more cuts at rising levels than the log keeps */
    REQUIRE(hk_hunk_alloc(h, 64, "v"));
    hk_hunk_mark v = hk_hunk_low_mark(h);
    REQUIRE(hk_hunk_alloc(h, 64, "x"));
    hk_hunk_mark stale = hk_hunk_low_mark(h);
    REQUIRE(hk_hunk_alloc(h, 64, "y"));
    CHECK_EQ(hk_hunk_free_to_low_mark(h, v), HK_OK); /* a cut below `stale` */
    for (int i = 0; i < HUNK_CUT_LOG + 3; i++) {
        REQUIRE(hk_hunk_alloc(h, 64, "rise"));
        hk_hunk_mark m = hk_hunk_low_mark(h);
        CHECK(!(m.end & HUNK_MARK_STACKED));
        REQUIRE(hk_hunk_alloc(h, 64, "gone"));
        CHECK_EQ(hk_hunk_free_to_low_mark(h, m), HK_OK);
    }
    CHECK(h->cutlog[0].lost_any);
    hkt_errors_reset(&g_errs);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, stale), HK_ERR_INVALID);
    s = swap_sentinel(first, 0xBADu);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, v), HK_ERR_INVALID); /* the walk decided, and met the damage */
    swap_sentinel(first, s);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, v), HK_OK);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, u), HK_OK);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    /* a free to a mark with an entry: the marks above it are stale, the
     * stack takes entries again */
    CHECK_EQ(hk_hunk_free_to_low_mark(h, lv[9]), HK_OK);
    CHECK(!h->mstack[0].full);
    CHECK_EQ(h->mstack[0].height, (size_t)10);
    REQUIRE(hk_hunk_alloc(h, 300, "w"));
    CHECK_EQ(hk_hunk_free_to_low_mark(h, u), HK_ERR_INVALID);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, lv[20]), HK_ERR_INVALID);
    hk_hunk_mark w = hk_hunk_low_mark(h);
    CHECK(w.end & HUNK_MARK_STACKED);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, lv[3]), HK_OK);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, w), HK_ERR_INVALID);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

/* Marks nested deeper than a chunk of the stack holds: the stack commits
 * the next chunks, every mark is freed to in turn, and the stale ones are
 * refused. */
HKT_TEST(stack_deep_nesting_commits_chunks) {
    hk_hunk *h = make(1 << 20, HK_FLAG_QUIET);
    REQUIRE(h);
    REQUIRE(stacked(h));
    enum { N = 5000 };
    hk_hunk_mark *m = (hk_hunk_mark *)malloc(N * sizeof *m);
    REQUIRE(m);
    size_t room0 = h->mstack[0].room;
    for (int i = 0; i < N; i++) {
        REQUIRE(hk_hunk_alloc(h, 16, "n"));
        m[i] = hk_hunk_low_mark(h);
    }
    CHECK(room0 < (size_t)N);
    CHECK(h->mstack[0].room >= (size_t)N);
    CHECK_EQ(h->mstack[0].height, (size_t)N);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    for (int i = N - 1; i >= 0; i -= 7) {
        CHECK_EQ(hk_hunk_free_to_low_mark(h, m[i]), HK_OK);
        if (i + 3 < N) CHECK_EQ(hk_hunk_free_to_low_mark(h, m[i + 3]), HK_ERR_INVALID); /* above: stale */
    }
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    free(m);
    hk_hunk_destroy(h);
}

/* The OS refuses the next chunk of the stack: the marks that get no entry
 * are decided by the cut count and the walk, no entry is pushed above them
 * while they may be valid, and a cut to a mark with an entry makes them
 * stale and lets the stack grow again. */
HKT_TEST(stack_chunk_refused_falls_back) {
    hk_hunk *h = make(1 << 20, HK_FLAG_QUIET);
    REQUIRE(h);
    REQUIRE(stacked(h));
    size_t room = h->mstack[0].room;
    hk_hunk_mark top;
    memset(&top, 0, sizeof top);
    for (size_t i = 0; i < room; i++) {
        REQUIRE(hk_hunk_alloc(h, 16, "n"));
        top = hk_hunk_low_mark(h);
    }
    CHECK_EQ(h->mstack[0].height, room);
    hk_os_fail_after(1, true);
    REQUIRE(hk_hunk_alloc(h, 16, "u")); /* no OS call */
    hk_hunk_mark u1 = hk_hunk_low_mark(h);
    REQUIRE(hk_hunk_alloc(h, 16, "u"));
    hk_hunk_mark u2 = hk_hunk_low_mark(h);
    hk_os_fail_after(0, false);
    CHECK(!(u1.end & HUNK_MARK_STACKED));
    CHECK(!(u2.end & HUNK_MARK_STACKED));
    CHECK(h->mstack[0].full);
    REQUIRE(hk_hunk_alloc(h, 16, "u"));
    CHECK_EQ(hk_hunk_free_to_low_mark(h, u2), HK_OK); /* no cut since: valid */
    CHECK_EQ(hk_hunk_free_to_low_mark(h, u1), HK_OK); /* a cut above it since: the walk */
    REQUIRE(hk_hunk_alloc(h, 16, "u"));
    hk_hunk_mark u3 = hk_hunk_low_mark(h); /* still no entry, though the OS would now say yes */
    CHECK(!(u3.end & HUNK_MARK_STACKED));
    CHECK_EQ(h->mstack[0].room, room);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, top), HK_OK); /* a mark with an entry */
    CHECK(!h->mstack[0].full);
    REQUIRE(hk_hunk_alloc(h, 16, "v"));
    CHECK_EQ(hk_hunk_free_to_low_mark(h, u1), HK_ERR_INVALID);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, u3), HK_ERR_INVALID);
    hk_hunk_mark v = hk_hunk_low_mark(h); /* the stack grows again */
    CHECK(v.end & HUNK_MARK_STACKED);
    CHECK(h->mstack[0].room > room);
    REQUIRE(hk_hunk_alloc(h, 16, "w"));
    CHECK_EQ(hk_hunk_free_to_low_mark(h, v), HK_OK);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, top), HK_OK);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}

/* check sees a damaged mark stack (the top's level above the end, levels
 * out of order, room past the stack's, entries elsewhere). */
static void damaged_stack(hk_hunk *h) {
    REQUIRE(h);
    REQUIRE(hk_hunk_alloc(h, 64, "a"));
    hk_hunk_mark a = hk_hunk_low_mark(h);
    REQUIRE(hk_hunk_alloc(h, 64, "b"));
    hk_hunk_mark b = hk_hunk_low_mark(h);
    REQUIRE(hk_hunk_alloc(h, 64, "c"));
    hunk_mark_stack *s = &h->mstack[0];
    REQUIRE(s->height == 2);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    size_t keep = s->top;
    s->top = low_used(h) + 4096; /* above the end */
    CHECK_EQ(hk_hunk_check(h), HK_ERR_CORRUPT);
    CHECK_STR_CONTAINS(g_errs.last_message, "mark stack");
    s->top = keep;
    uint64_t e = s->stamps[0];
    s->stamps[0] = hunk_mstack_entry((uint32_t)e, b.offset + 16); /* above the entry after it */
    CHECK_EQ(hk_hunk_check(h), HK_ERR_CORRUPT);
    s->stamps[0] = e;
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    size_t room = s->room;
    s->room = h->mcap + 1;
    CHECK_EQ(hk_hunk_check(h), HK_ERR_CORRUPT);
    s->room = room;
    uint64_t *at = s->stamps;
    s->stamps = h->mstack[1].stamps; /* the other end's entries */
    CHECK_EQ(hk_hunk_check(h), HK_ERR_CORRUPT);
    s->stamps = at;
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, b), HK_OK);
    CHECK_EQ(hk_hunk_free_to_low_mark(h, a), HK_OK);
    CHECK_EQ(hk_hunk_check(h), HK_OK);
    hk_hunk_destroy(h);
}
HKT_TEST(check_sees_a_damaged_mark_stack) {
    hk_hunk *h = make(1 << 20, 0);
    REQUIRE(h);
    REQUIRE(stacked(h));
    damaged_stack(h);
    damaged_stack(make_mem(0, 0, 1));
}

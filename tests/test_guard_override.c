/* heapkit/guard_override.h: with HK_GUARD_OVERRIDE, this file's malloc
 * family lands on the one shared guard heap (this file also holds it:
 * HK_GUARD_OVERRIDE_IMPLEMENT). The fault it then catches is run in a
 * child process by fault_exit_override_overflow (tests/CMakeLists.txt). */
#include "hk_test.h"

#define HK_GUARD_OVERRIDE           1
#define HK_GUARD_OVERRIDE_IMPLEMENT 1
#define HK_GUARD_OVERRIDE_FLAGS                                                                              \
    (HK_GUARD_REPORT | HK_FLAG_QUIET) /* reports, no abort: misuse is tested here */
#include "heapkit/guard_override.h"

HKT_TEST(override_maps_the_malloc_family) {
    (void)hkt_on_error;
    char *p = malloc(40);
    REQUIRE(p != NULL);
    hk_guard *g = hk_guard_override_heap();
    REQUIRE(g != NULL);
    CHECK(hk_guard_owns(g, p));
    CHECK_EQ(hk_guard_usable_size(g, p), 40);
    memset(p, 'x', 40);
    char *q = realloc(p, 4000);
    REQUIRE(q != NULL);
    CHECK(hk_guard_owns(g, q));
    CHECK(q[0] == 'x' && q[39] == 'x');
    unsigned char *z = calloc(100, 3);
    REQUIRE(z != NULL);
    int zero = 1;
    for (int i = 0; i < 300; i++) zero &= z[i] == 0;
    CHECK(zero);
    CHECK(hk_guard_owns(g, z));
    char *s = strdup("guarded");
    REQUIRE(s != NULL);
    CHECK(strcmp(s, "guarded") == 0);
    CHECK(hk_guard_owns(g, s));
    hk_stats st;
    CHECK_EQ(hk_guard_stats(g, &st), HK_OK);
    CHECK(st.live_blocks >= 3);
    free(q);
    free(z);
    free(s);
    free(NULL); /* nothing, as the C library's */
    CHECK_EQ(hk_guard_check(g), HK_OK);
    CHECK_EQ(hk_guard_report_count(g), 0);
}

HKT_TEST(override_calloc_overflow_and_realloc_null) {
    CHECK(calloc((size_t)-1 / 2, 4) == NULL); /* n * size overflows: refused */
    char *p = realloc(NULL, 16);              /* realloc(NULL, n) allocates */
    REQUIRE(p != NULL);
    CHECK(hk_guard_owns(hk_guard_override_heap(), p));
    free(p);
}

HKT_TEST(override_aligned) {
#ifdef _WIN32
    void *p = _aligned_malloc(100, 256);
#else
    void *p = aligned_alloc(256, 256);
#endif
    REQUIRE(p != NULL);
    CHECK(((uintptr_t)p & 255u) == 0);
    CHECK(hk_guard_owns(hk_guard_override_heap(), p));
#ifdef _WIN32
    _aligned_free(p);
#else
    free(p);
#endif
    CHECK_EQ(hk_guard_check(hk_guard_override_heap()), HK_OK);
}

HKT_TEST(override_double_free_reported) {
    char *p = malloc(10);
    REQUIRE(p != NULL);
    uint64_t before = hk_guard_report_count(hk_guard_override_heap());
    free(p);
    free(p); /* reported (no abort with this file's flags) */
    CHECK_EQ(hk_guard_report_count(hk_guard_override_heap()), before + 1);
}

/* Core: results, error kinds, fill patterns, checked arithmetic, OS layer. */
#include "hk_test.h"
#include "internal.h"

HKT_TEST(result_strings) {
    CHECK(strcmp(hk_result_str(HK_OK), "ok") == 0);
    CHECK(strcmp(hk_result_str(HK_ERR_NOMEM), "out of memory") == 0);
    CHECK(strcmp(hk_result_str((hk_result)-999), "unknown result") == 0);
    for (int k = 0; k < HK_EK_COUNT; k++)
        CHECK(strcmp(hk_error_kind_str((hk_error_kind)k), "unknown error") != 0);
    CHECK(strcmp(hk_error_kind_str(HK_EK_COUNT), "unknown error") == 0);
    CHECK_EQ(hk_version(), HK_VERSION);
}

HKT_TEST(size_helpers) {
    size_t r = 0;
    CHECK(hk_size_add(1, 2, &r) && r == 3);
    CHECK(!hk_size_add(SIZE_MAX, 1, &r));
    CHECK(hk_size_mul(0, SIZE_MAX, &r) && r == 0);
    CHECK(!hk_size_mul(SIZE_MAX / 2 + 1, 2, &r));
    CHECK(hk_size_align(17, 16, &r) && r == 32);
    CHECK(!hk_size_align(SIZE_MAX - 3, 16, &r));
    CHECK(!hk_size_align(10, 12, &r));
    CHECK(hk_is_pow2(1) && hk_is_pow2(4096) && !hk_is_pow2(0) && !hk_is_pow2(12));
}

HKT_TEST(fill_patterns) {
    unsigned char buf[100];
    hk_fill(buf, sizeof buf, HK_FILL_FREE);
    CHECK_EQ(hk_fill_check(buf, sizeof buf, HK_FILL_FREE), sizeof buf);
    buf[57] = 0;
    CHECK_EQ(hk_fill_check(buf, sizeof buf, HK_FILL_FREE), 57);
    CHECK_EQ(hk_fill_check(buf + 3, 10, HK_FILL_FREE), 10);
    CHECK_EQ(hk_fill_check(buf, 0, HK_FILL_FREE), 0);
}

HKT_TEST(reporter_formats_one_line) {
    hkt_errors errs = {0};
    hk__reporter rep = {hkt_on_error, &errs, "zone", "level", 0, 0};
    hk_result r = hk__report(&rep, HK_ERR_DOUBLE_FREE, HK_EK_DOUBLE_FREE, (void *)0x1000, 32, "ammo",
                             "block at %p was already free", (void *)0x1000);
    CHECK_EQ(r, HK_ERR_DOUBLE_FREE);
    CHECK_EQ(errs.count, 1);
    CHECK_EQ(rep.error_count, 1);
    CHECK_STR_CONTAINS(errs.last_message, "zone 'level': double free: block at");
    CHECK(strchr(errs.last_message, '\n') == NULL);
}

static int g_default_calls;
static void default_handler(const hk_error *e, void *u) {
    (void)e;
    (void)u;
    g_default_calls++;
}

HKT_TEST(default_handler_and_quiet) {
    hk_set_default_error_handler(default_handler, NULL);
    hk__reporter rep = {NULL, NULL, "hunk", NULL, 0, 0};
    hk__report(&rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, 0, NULL, "x");
    CHECK_EQ(g_default_calls, 1);
    rep.flags = HK_FLAG_QUIET;
    hk__report(&rep, HK_ERR_INVALID, HK_EK_INVALID_ARG, NULL, 0, NULL, "x");
    CHECK_EQ(g_default_calls, 1);
    CHECK_EQ(rep.error_count, 2);
    hk_set_default_error_handler(NULL, NULL);
}

HKT_TEST(os_pages) {
    size_t ps = hk_os_page_size();
    CHECK(ps >= 4096 && hk_is_pow2(ps));
    unsigned char *p = hk_os_reserve(4 * ps);
    REQUIRE(p != NULL);
    CHECK(((uintptr_t)p % ps) == 0);
    CHECK_EQ(hk_os_commit(p, 2 * ps), HK_OK);
    p[0] = 1;
    p[2 * ps - 1] = 2;
    CHECK_EQ(hk_os_decommit(p, 2 * ps), HK_OK);
    CHECK_EQ(hk_os_commit(p, ps), HK_OK);
    CHECK_EQ(p[0], 0); /* decommitted pages come back zeroed */
    CHECK_EQ(hk_os_protect(p, ps, HK_PROT_READ), HK_OK);
    CHECK_EQ(hk_os_protect(p + 1, ps, HK_PROT_READ), HK_ERR_INVALID);
    hk_os_release(p, 4 * ps);
    CHECK(hk_os_reserve(0) == NULL);
    CHECK(hk_os_alloc(SIZE_MAX) == NULL);
    unsigned char *q = hk_os_alloc(100);
    REQUIRE(q != NULL);
    CHECK_EQ(q[99], 0);
    hk_os_release(q, 100);
}

/* hk_os_prefault keeps what the pages hold and refuses a bad range. (That
 * it takes the page faults ahead is tested through HK_ZONE_PREFAULT in
 * test_zone.c.) */
HKT_TEST(os_prefault_keeps_contents) {
    size_t ps = hk_os_page_size();
    unsigned char *p = hk_os_alloc(8 * ps);
    REQUIRE(p != NULL);
    for (size_t i = 0; i < 8; i += 2) p[i * ps + 7] = (unsigned char)(0x40 + i); /* every other page */
    CHECK_EQ(hk_os_prefault(p, 8 * ps), HK_OK);
    for (size_t i = 0; i < 8; i++) CHECK_EQ(p[i * ps + 7], i % 2 ? 0 : 0x40 + i);
    CHECK_EQ(hk_os_prefault(p + 1, ps), HK_ERR_INVALID);
    CHECK_EQ(hk_os_prefault(p, 0), HK_ERR_INVALID);
    CHECK_EQ(hk_os_prefault(NULL, ps), HK_ERR_INVALID);
    hk_os_release(p, 8 * ps);
}

HKT_TEST(os_clock_monotonic) {
    uint64_t a = hk_os_now_ns(), b = hk_os_now_ns();
    CHECK(b >= a);
    CHECK(a > 0);
}

static HK__NOINLINE int capture_here(void **frames, int n) { return hk_os_stack_capture(frames, n, 0); }

HKT_TEST(os_stack_capture_and_symbolize) {
    void *frames[16];
    hk_os_stack_init();
    int n = capture_here(frames, 16);
    CHECK(n >= 2);
    char buf[256];
    size_t len = hk_os_symbolize(frames[0], buf, sizeof buf);
    CHECK(len > 0);
    /* The innermost captured frame is capture_here (static: dladdr may only
     * know the module); the symbolized text names at least the module. */
    CHECK(strstr(buf, "test_core") != NULL || strstr(buf, "capture_here") != NULL);
    char tiny[4];
    CHECK(hk_os_symbolize(frames[0], tiny, sizeof tiny) <= 3);
    CHECK_EQ(hk_os_stack_capture(frames, 0, 0), 0);
}

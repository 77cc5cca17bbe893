/* Core: results, error kinds, fill patterns, checked arithmetic, and the
 * host layer (src/os.h): pages, the failure point, stack capture,
 * symbolization, fault callbacks. */
#include "hk_test.h"
#include "internal.h"
#include "heapkit/guard.h"
#include "heapkit/hunk.h"
#include "heapkit/zone.h"

#include <pthread.h>
#ifndef _WIN32 /* the cases that need these are POSIX-only (cmake/windows.cmake) */
#include <execinfo.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

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
    CHECK(hk_now_ns() >= b); /* the public name of the same clock */
    CHECK_EQ(hk_page_size(), hk_os_page_size());
}

/* Preparing the unback call does nothing visible and may be repeated;
 * unback then still gives zero pages (the binding itself is measured by
 * bench/icount.sh, not here). */
HKT_TEST(os_unback_prepare_then_unback) {
    hk_os_unback_prepare();
    hk_os_unback_prepare();
    size_t ps = hk_os_page_size();
    unsigned char *p = hk_os_alloc(2 * ps);
    REQUIRE(p != NULL);
    memset(p, 0x5a, 2 * ps);
    CHECK_EQ(hk_os_unback(p, ps), HK_OK);
    CHECK_EQ(p[0], 0);
    CHECK_EQ(p[ps - 1], 0);
    CHECK_EQ(p[ps], 0x5a); /* the page after stays */
    hk_os_release(p, 2 * ps);
}

/* The coarse clock never goes back and follows the precise one over a
 * sleep longer than its tick (Windows ticks are 10-16 ms). */
HKT_TEST(os_clock_coarse) {
    uint64_t c0 = hk_os_coarse_ns(), n0 = hk_os_now_ns();
    CHECK(c0 > 0);
    uint64_t last = c0;
    int back = 0;
    while (hk_os_now_ns() - n0 < 60000000ull) { /* 60 ms of reads */
        uint64_t c = hk_os_coarse_ns();
        back += c < last;
        last = c;
    }
    CHECK_EQ(back, 0);
    uint64_t dc = last - c0;
    CHECK(dc >= 30000000ull);  /* at least 60 ms less two ticks */
    CHECK(dc <= 200000000ull); /* and not wildly more */
}

/* Long fill compares (the memcmp path) find the same first bad byte as
 * short ones, for the three fill bytes and for any other byte. */
HKT_TEST(fill_check_long_runs) {
    static unsigned char buf[5000];
    static const unsigned pats[] = {HK_FILL_PAD, HK_FILL_FREE, HK_FILL_ALLOC, 0x00, 0x5a};
    for (size_t k = 0; k < sizeof pats / sizeof pats[0]; k++) {
        hk_fill(buf, sizeof buf, pats[k]);
        CHECK_EQ(hk_fill_check(buf, sizeof buf, pats[k]), sizeof buf);
        static const size_t at[] = {0, 1, 63, 64, 1023, 1024, 1025, 2047, 4999};
        for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
            buf[at[i]] ^= 1;
            CHECK_EQ(hk_fill_check(buf, sizeof buf, pats[k]), at[i]);
            CHECK_EQ(hk_fill_check(buf + 1, sizeof buf - 1, pats[k]),
                     at[i] == 0 ? sizeof buf - 1 : at[i] - 1);
            buf[at[i]] ^= 1;
        }
    }
}

/* ---- the failure point ------------------------------------------------------ */

HKT_TEST(os_fail_after_counts_acquisitions) {
    size_t ps = hk_os_page_size();
    uint64_t before = hk_os_fail_count();
    hk_os_fail_after(3, false);
    void *a = hk_os_reserve(ps), *b = hk_os_alloc(ps);
    CHECK(a != NULL && b != NULL);
    CHECK_EQ(hk_os_commit(a, ps), HK_ERR_NOMEM); /* the third */
    CHECK_EQ(hk_os_fail_count(), before + 1);
    CHECK_EQ(hk_os_commit(a, ps), HK_OK); /* disarmed after firing */
    hk_os_fail_after(1, false);
    CHECK(hk_os_alloc(ps) == NULL);
    hk_os_fail_after(2, false);
    hk_os_fail_after(0, false); /* disarmed before firing */
    void *c = hk_os_reserve(ps), *d = hk_os_reserve(ps);
    CHECK(c != NULL && d != NULL);
    CHECK_EQ(hk_os_fail_count(), before + 2);
    hk_os_fail_after(2, true); /* persistent: the second and every later one */
    void *e = hk_os_reserve(ps);
    CHECK(e != NULL);
    CHECK(hk_os_reserve(ps) == NULL);
    CHECK(hk_os_alloc(ps) == NULL);
    CHECK_EQ(hk_os_commit(c, ps), HK_ERR_NOMEM);
    hk_os_fail_after(0, false);
    CHECK_EQ(hk_os_commit(c, ps), HK_OK);
    CHECK_EQ(hk_os_fail_count(), before + 5);
    hk_os_release(a, ps);
    hk_os_release(b, ps);
    hk_os_release(c, ps);
    hk_os_release(d, ps);
    hk_os_release(e, ps);
}

/* For N = 1, 2, ...: create an instance and use it with the N-th page
 * acquisition refused (once, or from then on), until one run sees no
 * refusal. Each run must fail cleanly: create returns NULL (with an
 * HK_EK_NOMEM report at most) or a working instance, whose calls may fail
 * but leave it consistent (check passes); nothing is left mapped after
 * destroy. Returns the number of runs whose create failed. */
typedef void *(*oom_create_fn)(hkt_errors *errs);
typedef int (*oom_use_fn)(void *x); /* 0 when the instance is consistent */
typedef void (*oom_destroy_fn)(void *x);

static int oom_run(bool persistent, oom_create_fn create, oom_use_fn use, oom_destroy_fn destroy) {
    int failed_runs = 0;
    for (uint64_t n = 1; n < 64; n++) {
        hkt_errors errs = {.quiet = 1};
        size_t maps = hk_os_map_count();
        uint64_t fired = hk_os_fail_count();
        hk_os_fail_after(n, persistent);
        void *x = create(&errs);
        if (x) CHECK_EQ(use(x), 0);
        hk_os_fail_after(0, false);
        bool injected = hk_os_fail_count() != fired;
        if (x) {
            CHECK_EQ(use(x), 0); /* and works again once memory is back */
            destroy(x);
        } else {
            CHECK(injected); /* only the injected failure may make it fail */
            CHECK(errs.count == 0 || errs.last_kind == HK_EK_NOMEM);
            failed_runs++;
        }
        /* nothing leaked (under ASan or TSan their runtime, whose
         * allocator the guard's unguarded blocks use, maps memory of its own) */
        if (!hk__asan_enabled() && !hk__tsan_enabled()) CHECK_EQ(hk_os_map_count(), maps);
        if (!injected) return failed_runs;
    }
    int page_acquisitions_within_64 = 0;
    CHECK(page_acquisitions_within_64);
    return failed_runs;
}

static void *oom_zone_create(hkt_errors *errs) {
    hk_zone_desc d = {0};
    d.size = 1 << 20;
    d.grow_size = 1 << 20;
    d.on_error = hkt_on_error;
    d.error_user = errs;
    return hk_zone_create(&d);
}
static int oom_zone_use(void *x) {
    hk_zone *z = (hk_zone *)x;
    void *p = hk_zone_alloc(z, 3 << 20); /* a growth: more acquisitions (may fail) */
    void *q = hk_zone_alloc(z, 100);     /* from the first region */
    if (!q) return 1;
    if (p) hk_zone_free(z, p);
    hk_zone_free(z, q);
    return hk_zone_check(z) == HK_OK ? 0 : 1;
}
static void oom_zone_destroy(void *x) { hk_zone_destroy((hk_zone *)x); }

static void *oom_hunk_create(hkt_errors *errs) {
    hk_hunk_desc d = {0};
    d.size = 1 << 20;
    d.on_error = hkt_on_error;
    d.error_user = errs;
    return hk_hunk_create(&d);
}
static int oom_hunk_use(void *x) {
    hk_hunk *h = (hk_hunk *)x;
    hk_hunk_mark m = hk_hunk_low_mark(h);
    void *p = hk_hunk_alloc(h, 1000, "block");
    if (!p) return 1;
    hk_hunk_free_to_low_mark(h, m);
    return hk_hunk_check(h) == HK_OK ? 0 : 1;
}
static void oom_hunk_destroy(void *x) { hk_hunk_destroy((hk_hunk *)x); }

static void *oom_guard_create(hkt_errors *errs) {
    hk_guard_desc d = {0};
    d.reserve = (size_t)1 << 28;
    d.on_error = hkt_on_error;
    d.error_user = errs;
    return hk_guard_create(&d);
}
static int oom_guard_use(void *x) {
    hk_guard *g = (hk_guard *)x;
    void *p[40];
    for (int i = 0; i < 40; i++) p[i] = hk_guard_alloc(g, (size_t)(i + 1) * 3000); /* metadata grows */
    for (int i = 0; i < 40; i++) hk_guard_free(g, p[i]);
    return hk_guard_check(g) == HK_OK ? 0 : 1;
}
static void oom_guard_destroy(void *x) { hk_guard_destroy((hk_guard *)x); }

HKT_TEST(os_fail_point_zone_fails_cleanly) {
    (void)oom_run(false, oom_zone_create, oom_zone_use, oom_zone_destroy); /* may fall back: never fail */
    CHECK(oom_run(true, oom_zone_create, oom_zone_use, oom_zone_destroy) >= 1);
}
HKT_TEST(os_fail_point_hunk_fails_cleanly) {
    CHECK(oom_run(false, oom_hunk_create, oom_hunk_use, oom_hunk_destroy) >= 1);
    CHECK(oom_run(true, oom_hunk_create, oom_hunk_use, oom_hunk_destroy) >= 1);
}
HKT_TEST(os_fail_point_guard_fails_cleanly) {
    CHECK(oom_run(false, oom_guard_create, oom_guard_use, oom_guard_destroy) >= 1);
    CHECK(oom_run(true, oom_guard_create, oom_guard_use, oom_guard_destroy) >= 1);
}

/* ---- stack capture and symbolization ----------------------------------------------- */

static HK__NOINLINE int capture_here(void **frames, int n, unsigned flags) {
    int r = hk_os_stack_capture(frames, n, 0, flags);
    __asm__ volatile("" ::: "memory");
    return r;
}

HKT_TEST(os_stack_capture_and_symbolize) {
    void *frames[16];
    hk_os_stack_init();
    hk_os_symbolize_init();
    for (unsigned flags = 0; flags <= HK_OS_STACK_EXACT; flags += HK_OS_STACK_EXACT) {
        int n = capture_here(frames, 16, flags);
        CHECK(n >= 2);
        hk_os_symbol sym[2];
        memset(sym, 0, sizeof sym);
        sym[0].pc = (uintptr_t)frames[0];
        sym[0].return_address = 1;
        size_t (*exported)(void) = hk_page_size; /* an exported function */
        memcpy(&sym[1].pc, &exported, sizeof sym[1].pc);
        hk_os_symbolize(sym, 2, HK_OS_SYMBOLIZE_LINES);
        /* The innermost captured frame is in capture_here (static: dladdr
         * knows the module only; addr2line, when installed, the function). */
        REQUIRE(sym[0].module != NULL);
        CHECK(strstr(sym[0].module, "test_core") != NULL);
        CHECK_EQ(sym[0].base, hk_os_main_base());
        CHECK(sym[0].func[0] == 0 || strstr(sym[0].func, "capture_here") != NULL);
        CHECK(sym[1].func[0] == 0 || strstr(sym[1].func, "hk_page_size") != NULL);
        CHECK_EQ(hk_os_module_base(frames[0]), sym[0].base);
    }
    CHECK_EQ(hk_os_stack_capture(frames, 0, 0, 0), 0);
}

#ifndef _WIN32 /* glibc backtrace(), fork: see cmake/windows.cmake */
/* The learned-frame-size stack walker against glibc's backtrace(): the
 * same frames on every call, through recursion, two call paths into the
 * same function at the same depth, and frames whose size varies (VLAs). */
typedef struct uw_snap {
    void *fast[24], *ex[26];
    int nf, ne;
} uw_snap;
static volatile int uw_sink;

static HK__NOINLINE void uw_leaf(uw_snap *s) {
    s->nf = hk_os_stack_capture(s->fast, 24, 0, 0);
    s->ne = backtrace(s->ex, 26);
    uw_sink++;
}
static HK__NOINLINE void uw_vla(uw_snap *s, int n) {
    volatile char buf[n + 1];
    buf[0] = (char)n;
    uw_leaf(s);
    uw_sink += buf[0];
}
static HK__NOINLINE void uw_rec(uw_snap *s, int depth, int vla) {
    if (depth == 0) {
        if (vla)
            uw_vla(s, vla);
        else
            uw_leaf(s);
    } else {
        uw_rec(s, depth - 1, vla);
    }
    uw_sink++;
}
static HK__NOINLINE void uw_path_a(uw_snap *s) {
    uw_rec(s, 2, 0);
    uw_sink++;
}
static HK__NOINLINE void uw_path_b(uw_snap *s) {
    uw_rec(s, 2, 0);
    uw_sink += 2;
}

static int uw_same(const uw_snap *s) {
    /* frame 0 is a pc in uw_leaf (two different call sites); the rest match.
     * backtrace() may add frames of its own first (ASan intercepts it). */
    int k = 1;
    while (k < 4 && s->nf > 1 && s->ex[k] != s->fast[1]) k++;
    if (k == 4) return 0;
    int want = s->ne - (k - 1) < 24 ? s->ne - (k - 1) : 24;
    if (s->nf != want) return 0;
    for (int i = 1; i < s->nf; i++)
        if (s->fast[i] != s->ex[i + k - 1]) return 0;
    return 1;
}

static void *uw_thread(void *arg) {
    int *bad = (int *)arg;
    uw_snap s;
    for (int i = 0; i < 200; i++) {
        memset(&s, 0, sizeof s);
        if (i & 1)
            uw_path_a(&s);
        else
            uw_rec(&s, i % 5, (i % 3) * 100);
        if (!uw_same(&s)) (*bad)++;
    }
    return NULL;
}

HKT_TEST(os_fast_stacks_match_backtrace) {
    uw_snap s;
    int bad = 0;
    for (int i = 0; i < 600; i++) {
        memset(&s, 0, sizeof s);
        switch (i % 4) {
        case 0: uw_path_a(&s); break;
        case 1: uw_path_b(&s); break;
        case 2: uw_rec(&s, i % 7, 0); break;
        default: uw_rec(&s, i % 3, 1 + (i * 37) % 3000); break;
        }
        if (!uw_same(&s)) {
            if (bad++ < 3) {
                fprintf(stderr, "case %d nf %d ne %d\n", i % 4, s.nf, s.ne);
                for (int k = 0; k < 26; k++) fprintf(stderr, "  %p %p\n", k < 24 ? s.fast[k] : NULL, s.ex[k]);
            }
        }
    }
    CHECK_EQ(bad, 0);
    pthread_t t;
    int tbad = 0;
    REQUIRE(pthread_create(&t, NULL, uw_thread, &tbad) == 0);
    pthread_join(t, NULL);
    CHECK_EQ(tbad, 0);
}

/* ---- faults ------------------------------------------------------------------------ */

/* A registered callback sees every fault: the address, the access type and
 * the stack from the faulting function; callbacks that return pass the
 * fault on (to the next one, then to the default action). Runs in a child
 * (skipped under AddressSanitizer, which owns SIGSEGV). */
static unsigned char *fault_page;
static int fault_pipe = -1;

static void fault_cb_pass(const hk_os_fault *f, void *user) {
    (void)f;
    (*(int *)user)++;
}
static void fault_cb_report(const hk_os_fault *f, void *user) {
    int passed = *(int *)user;
    char line[200];
    int in_victim = 0;
    for (int i = 0; i < f->nframes && i < 3; i++) {
        hk_os_symbol s;
        memset(&s, 0, sizeof s);
        s.pc = (uintptr_t)f->frames[i];
        hk_os_symbolize(&s, 1, HK_OS_SYMBOLIZE_LINES);
        if (strstr(s.func, "fault_victim")) in_victim = 1;
    }
    int n = snprintf(line, sizeof line, "%s at page+%ld access %d passed %d victim %d\n", f->signame,
                     (long)((unsigned char *)f->addr - fault_page), f->access, passed, in_victim);
    hk_os_write(fault_pipe, line, (size_t)n);
    _exit(42);
}

static HK__NOINLINE void fault_victim(void) {
    fault_page[100] = 1;
    __asm__ volatile("" ::: "memory");
}

static void fault_protected_fn(void *arg) { *(volatile unsigned char *)arg = 7; }

HKT_TEST(os_fault_callbacks) {
    if (hk__asan_enabled()) {
        printf("    skipped under AddressSanitizer\n");
        return;
    }
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        fault_pipe = fds[1];
        hk_os_stack_init();
        hk_os_symbolize_init();
        fault_page = hk_os_reserve(hk_os_page_size());
        static int passed;
        if (hk_os_fault_register(fault_cb_pass, &passed) != HK_OK) _exit(3);
        if (hk_os_fault_register(fault_cb_pass, &passed) != HK_OK) _exit(3); /* the same: once */
        if (hk_os_fault_register(fault_cb_report, &passed) != HK_OK) _exit(3);
        /* a fault inside a protected call comes back as -1 */
        if (hk_os_protected_call(fault_protected_fn, fault_page) != -1) _exit(4);
        fault_victim();
        _exit(0);
    }
    close(fds[1]);
    char out[256] = {0};
    size_t have = 0;
    ssize_t r;
    while ((r = read(fds[0], out + have, sizeof out - 1 - have)) > 0) have += (size_t)r;
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 42);
    CHECK_STR_CONTAINS(out, "SIGSEGV at page+100");
#if defined(__x86_64__)
    CHECK_STR_CONTAINS(out, "access 2"); /* HK_OS_ACCESS_WRITE */
#endif
    CHECK_STR_CONTAINS(out, "passed 1");
    if (strstr(out, "victim 0")) printf("    (no function names: addr2line missing?)\n");
}

/* Stopping the world in a process that never started a thread stops none
 * (and does not go through /proc/self/task); once a thread runs, it is
 * stopped, its stack pointer recorded. Each case runs in a fresh process. */
typedef struct world_seen {
    int calls, n;
    uintptr_t sp;
} world_seen;
static void world_fn(const hk_os_thread_state *threads, int n, void *user) {
    world_seen *w = (world_seen *)user;
    w->calls++;
    w->n = n;
    w->sp = n > 0 ? threads[0].sp : 0;
}
static volatile int world_stop_thread;
static void *world_thread(void *arg) {
    volatile char here = 0; /* on this thread's stack, near where it spins */
    __atomic_store_n((uintptr_t *)arg, (uintptr_t)&here, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&world_stop_thread, __ATOMIC_ACQUIRE)) sched_yield();
    return NULL;
}
HKT_TEST(os_stop_world_single_then_threaded) {
    world_seen w = {0};
    CHECK_EQ(hk_os_stop_world(world_fn, &w), 0);
    CHECK_EQ(w.calls, 1);
    CHECK_EQ(w.n, 0);
    uintptr_t local = 0;
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, world_thread, &local) == 0);
    while (!__atomic_load_n(&local, __ATOMIC_ACQUIRE)) sched_yield();
    memset(&w, 0, sizeof w);
    CHECK_EQ(hk_os_stop_world(world_fn, &w), 1);
    CHECK_EQ(w.calls, 1);
    CHECK_EQ(w.n, 1);
    /* the stopped thread's stack pointer: in its own stack, below its local */
    CHECK(w.sp != 0 && w.sp <= local && local - w.sp < ((uintptr_t)64 << 10));
    __atomic_store_n(&world_stop_thread, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
}
#endif /* !_WIN32 */

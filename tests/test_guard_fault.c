/* Guard heap fault reports: each case runs in a child process with the
 * fault handler installed and reports going to a pipe; the parent checks
 * the child died of SIGABRT and what the report says. (Skipped under
 * AddressSanitizer, which owns SIGSEGV there.) */
#include "hk_test.h"

/* These tests write past blocks and ask for absurd sizes on purpose; the
 * allocation attributes of heapkit/guard.h (HK_ALLOC_SIZE) let the compiler
 * see that. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#pragma GCC diagnostic ignored "-Walloc-size-larger-than="
#endif
#include "internal.h"
#include "heapkit/guard.h"

#ifndef _WIN32 /* fork per fault: POSIX-only (cmake/windows.cmake); tests/test_fault_exit.c runs faults on   \
                  both */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

typedef void (*guard_case_fn)(hk_guard *g);

static char guard_out[1 << 16];

/* Runs fn in a child; returns the termination signal (0 if it exited). */
static int guard_run_child(guard_case_fn fn, uint32_t extra_flags, hk_guard_side side, size_t align) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        hk_guard_desc d = {0};
        d.reserve = (size_t)1 << 28;
        d.flags = HK_GUARD_FAULT_HANDLER | HK_GUARD_REPORT | HK_FLAG_QUIET | extra_flags;
        d.report_fd = fds[1];
        d.side = side;
        d.align = align;
        hk_guard *g = hk_guard_create(&d);
        if (!g) _exit(3);
        fn(g);
        _exit(0);
    }
    close(fds[1]);
    size_t have = 0;
    for (;;) {
        ssize_t r = read(fds[0], guard_out + have, sizeof guard_out - 1 - have);
        if (r <= 0) break;
        have += (size_t)r;
    }
    guard_out[have] = 0;
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    if (getenv("HKT_VERBOSE")) printf("%s", guard_out);
    return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

static volatile unsigned char guard_sink;

static HK__NOINLINE void guard_case_overflow_write(hk_guard *g) {
    volatile unsigned char *p = hk_guard_alloc(g, 32);
    p[32] = 1;
}
static HK__NOINLINE void guard_case_overflow_read(hk_guard *g) {
    volatile unsigned char *p = hk_guard_alloc(g, 48);
    guard_sink = p[50];
}
static HK__NOINLINE void guard_case_underflow_write(hk_guard *g) {
    volatile unsigned char *p = hk_guard_alloc(g, 20);
    p[-3] = 1;
}
static HK__NOINLINE void guard_case_uaf_read(hk_guard *g) {
    volatile unsigned char *p = hk_guard_alloc(g, 100);
    hk_guard_free(g, (void *)(uintptr_t)p);
    guard_sink = p[10];
}
static HK__NOINLINE void guard_case_uaf_write_evicted(hk_guard *g) {
    volatile unsigned char *p = hk_guard_alloc(g, 100);
    hk_guard_free(g, (void *)(uintptr_t)p);
    for (int i = 0; i < 20; i++)
        hk_guard_free(g, hk_guard_alloc(g, (size_t)4 << 20)); /* p leaves the quarantine */
    p[0] = 1;
}
static HK__NOINLINE void guard_case_double_free(hk_guard *g) {
    void *p = hk_guard_alloc(g, 10);
    hk_guard_free(g, p);
    hk_guard_free(g, p);
}
static HK__NOINLINE void guard_case_uninit_pointer(hk_guard *g) {
    struct node {
        struct node *next;
        int v;
    } *n = hk_guard_alloc(g, sizeof *n);
    struct node *next = *(struct node *volatile *)&n->next; /* never written: 0xcdcd... */
    guard_sink = (unsigned char)next->v;
}
static HK__NOINLINE void guard_case_clean(hk_guard *g) {
    for (int i = 0; i < 100; i++) hk_guard_free(g, hk_guard_alloc(g, (size_t)i * 10));
}

HKT_TEST(guard_fault_reports) {
    (void)hkt_on_error;
    if (hk__asan_enabled()) {
        printf("    skipped under AddressSanitizer\n");
        return;
    }
    CHECK_EQ(guard_run_child(guard_case_overflow_write, 0, HK_GUARD_SIDE_END, 0), SIGABRT);
    CHECK_STR_CONTAINS(guard_out, "heap overflow (write of");
    CHECK_STR_CONTAINS(guard_out, "offset +32 of 32-byte block");
    CHECK_STR_CONTAINS(guard_out, "0 bytes past its end");
    CHECK_STR_CONTAINS(guard_out, "allocated at:");
    CHECK_STR_CONTAINS(guard_out, "aborting");

    CHECK_EQ(guard_run_child(guard_case_overflow_read, 0, HK_GUARD_SIDE_END, 0), SIGABRT);
    CHECK_STR_CONTAINS(guard_out, "heap overflow (read of");
    CHECK_STR_CONTAINS(guard_out, "2 bytes past its end");

    CHECK_EQ(guard_run_child(guard_case_underflow_write, 0, HK_GUARD_SIDE_START, 0), SIGABRT);
    CHECK_STR_CONTAINS(guard_out, "heap underflow (write of");
    CHECK_STR_CONTAINS(guard_out, "3 bytes before its start");

    CHECK_EQ(guard_run_child(guard_case_uaf_read, 0, HK_GUARD_SIDE_END, 0), SIGABRT);
    CHECK_STR_CONTAINS(guard_out, "use after free (read of");
    CHECK_STR_CONTAINS(guard_out, "offset +10 of 100-byte freed block");
    CHECK_STR_CONTAINS(guard_out, "freed at:");

    CHECK_EQ(guard_run_child(guard_case_uaf_write_evicted, 0, HK_GUARD_SIDE_END, 0), SIGABRT);
    CHECK_STR_CONTAINS(guard_out, "use after free (write of");
    CHECK_STR_CONTAINS(guard_out, "left the quarantine");

    CHECK_EQ(guard_run_child(guard_case_double_free, HK_GUARD_ABORT, HK_GUARD_SIDE_END, 0), SIGABRT);
    CHECK_STR_CONTAINS(guard_out, "double free");
    CHECK_STR_CONTAINS(guard_out, "freed at:");

    CHECK_EQ(guard_run_child(guard_case_double_free, 0, HK_GUARD_SIDE_END, 0), 0); /* no abort flag */
    CHECK_STR_CONTAINS(guard_out, "double free");

    CHECK_EQ(guard_run_child(guard_case_uninit_pointer, 0, HK_GUARD_SIDE_END, 0), SIGABRT);
    CHECK_STR_CONTAINS(guard_out, "uninitialized heap memory used as a pointer");

    CHECK_EQ(guard_run_child(guard_case_clean, HK_GUARD_ABORT, HK_GUARD_SIDE_END, 0), 0);
    CHECK(guard_out[0] == 0);
}

/* HK_GUARD_FAST_REUSE (heapkit guard's second run): a freed slot is the
 * next one of its size handed out, still read/write, and the guard page
 * before each block faults, fresh or reused. */
static HK__NOINLINE void guard_case_fast_reuse_underread(hk_guard *g) {
    void *a = hk_guard_alloc(g, 64);
    hk_guard_free(g, a);
    volatile unsigned char *p = hk_guard_alloc(g, 64); /* a's slot again */
    if ((void *)(uintptr_t)p != a) _exit(4);
    guard_sink = p[-8];
}
static HK__NOINLINE void guard_case_fast_reuse_fresh_underread(hk_guard *g) {
    volatile unsigned char *p = 0;
    for (int i = 0; i < 600; i++) p = hk_guard_alloc(g, (size_t)(i % 7 + 1) * 1000); /* past a 2 MiB chunk */
    guard_sink = p[-1];
}
/* fresh one-page slots are carved in batches (one call installs the
 * batch's guard pages): a block from inside a batch, not its first, has
 * its guard page too */
static HK__NOINLINE void guard_case_fast_reuse_batch_underread(hk_guard *g) {
    volatile unsigned char *p[20];
    for (int i = 0; i < 20; i++) p[i] = hk_guard_alloc(g, 64);
    guard_sink = p[13][-1];
}
static HK__NOINLINE void guard_case_fast_reuse_stays_open(hk_guard *g) {
    volatile unsigned char *p = hk_guard_alloc(g, 100);
    hk_guard_free(g, (void *)(uintptr_t)p);
    guard_sink = p[10]; /* no quarantine in this mode: no fault (the first run reports this) */
}

/* hk_guard_lead_from_now (the forked second run): blocks made before keep
 * their side; new ones are against the leading guard, freed ones reused */
static HK__NOINLINE void guard_case_lead_from_now(hk_guard *g) {
    unsigned char *old = hk_guard_alloc(g, 40);
    unsigned char *gone = hk_guard_alloc(g, 100);
    hk_guard_free(g, gone); /* quarantined: stays so */
    hk_guard_lead_from_now(g);
    if (((uintptr_t)(old + 40) & 4095u) != 0) _exit(5); /* still against its trailing guard */
    volatile unsigned char *p = 0;
    for (int i = 0; i < 50; i++) {
        p = hk_guard_alloc(g, 64);
        if (((uintptr_t)p & 4095u) != 0) _exit(6); /* at its page's start */
        p[0] = 1;
    }
    hk_guard_free(g, old);
    /* its slot is reused at once, the new block at the page's start */
    if ((uintptr_t)hk_guard_alloc(g, 40) != ((uintptr_t)old & ~(uintptr_t)4095u)) _exit(8);
    if (hk_guard_check(g) != HK_OK) _exit(7);
    guard_sink = p[-1];
}

HKT_TEST(guard_fast_reuse) {
    (void)hkt_on_error;
    hk_guard_desc d = {0};
    d.reserve = (size_t)1 << 28;
    d.flags = HK_GUARD_FAST_REUSE | HK_FLAG_QUIET;
    d.side = HK_GUARD_SIDE_START;
    hk_guard *g = hk_guard_create(&d);
    CHECK(g != NULL);
    void *v[300];
    for (int i = 0; i < 300; i++) {
        v[i] = hk_guard_alloc(g, (size_t)(i % 5 + 1) * 900);
        CHECK(v[i] != NULL && ((uintptr_t)v[i] & 4095u) == 0); /* side start: at the page's start */
        memset(v[i], i & 0xff, (size_t)(i % 5 + 1) * 900);
    }
    for (int i = 0; i < 300; i += 2) hk_guard_free(g, v[i]);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    for (int i = 0; i < 300; i += 2) {
        void *q = hk_guard_alloc(g, (size_t)(i % 5 + 1) * 900);
        CHECK(q != NULL);
        memset(q, 0x5a, (size_t)(i % 5 + 1) * 900);
        v[i] = q;
    }
    hk_guard_info info;
    CHECK_EQ(hk_guard_get_info(g, &info), HK_OK);
    CHECK_EQ(info.live_guarded, 300u);
    CHECK_EQ(info.quarantine_blocks, 0u);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    CHECK_EQ(hk_guard_check_padding(g), 0u);
    void *last = v[298];
    hk_guard_free(g, last);
    CHECK(hk_guard_alloc(g, 3 * 900 + 1) == last); /* same page count: the slot just freed */
    /* fresh one-page slots come in a batch, handed out in address order:
     * each block a guard page and a data page after the one before */
    unsigned char *b[40];
    for (int i = 0; i < 40; i++) {
        b[i] = hk_guard_alloc(g, 100);
        CHECK(b[i] != NULL && ((uintptr_t)b[i] & 4095u) == 0);
        memset(b[i], 0x11, 100);
    }
    int in_order = 0;
    for (int i = 1; i < 40; i++) in_order += b[i] == b[i - 1] + 2 * 4096;
    CHECK(in_order >= 30); /* a batch ends every 32 one-page slots at most */
    CHECK_EQ(hk_guard_check(g), HK_OK);
    for (int i = 0; i < 40; i++) CHECK_EQ(hk_guard_free(g, b[i]), HK_OK);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    /* a sound free keeps no stack in this mode; every misuse is still found */
    CHECK_EQ(hk_guard_free(g, b[7]), HK_ERR_DOUBLE_FREE);
    unsigned char *c = hk_guard_alloc(g, 100);
    CHECK(c != NULL);
    CHECK_EQ(hk_guard_free(g, c + 1), HK_ERR_FOREIGN); /* interior */
    CHECK_EQ(hk_guard_free(g, c), HK_OK);
    CHECK_EQ(hk_guard_free(g, c), HK_ERR_DOUBLE_FREE);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    hk_guard_destroy(g);
    if (hk__asan_enabled()) {
        printf("    faults skipped under AddressSanitizer\n");
        return;
    }
    CHECK_EQ(guard_run_child(guard_case_fast_reuse_underread, HK_GUARD_FAST_REUSE, HK_GUARD_SIDE_START, 0),
             SIGABRT);
    CHECK_STR_CONTAINS(guard_out, "heap underflow (read of 1 byte)");
    CHECK_STR_CONTAINS(guard_out, "8 bytes before its start");
    CHECK_EQ(
        guard_run_child(guard_case_fast_reuse_fresh_underread, HK_GUARD_FAST_REUSE, HK_GUARD_SIDE_START, 0),
        SIGABRT);
    CHECK_STR_CONTAINS(guard_out, "heap underflow (read of 1 byte)");
    CHECK_EQ(
        guard_run_child(guard_case_fast_reuse_batch_underread, HK_GUARD_FAST_REUSE, HK_GUARD_SIDE_START, 0),
        SIGABRT);
    CHECK_STR_CONTAINS(guard_out, "heap underflow (read of 1 byte)");
    CHECK_STR_CONTAINS(guard_out, "(1 byte before its start)");
    CHECK_EQ(guard_run_child(guard_case_fast_reuse_stays_open, HK_GUARD_FAST_REUSE, HK_GUARD_SIDE_START, 0),
             0);
    CHECK(guard_out[0] == 0);
    CHECK_EQ(guard_run_child(guard_case_lead_from_now, 0, HK_GUARD_SIDE_END, 0), SIGABRT);
    CHECK_STR_CONTAINS(guard_out, "heap underflow (read of 1 byte)");
    CHECK_STR_CONTAINS(guard_out, "guard_case_lead_from_now");
}
#endif /* !_WIN32 */

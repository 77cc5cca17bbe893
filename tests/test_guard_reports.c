/* Guard heap: the regression tests of issues 21 and 22 that run in process.
 *  - padding damage on live blocks: reported by hk_guard_check_padding for
 *    every block and by hk_guard_check, with the block's allocation stack
 *    and the first and last damaged offsets (issue 22, bug 1);
 *  - the leak scan ignores the dead stack below the stack pointer
 *    (issue 22, bug 3);
 *  - report wording: plurals, the "freed at" label of a misuse found at
 *    free (issue 22, bug 4);
 *  - an allocation too large for the heap is reported as HK_EK_NOMEM
 *    (issue 21);
 *  - hk_guard_owns racing with a free in another thread is no data race
 *    (issue 21; ThreadSanitizer reports it without the stripe locks);
 *  - under an address-space limit create reserves what the limit allows
 *    and says so (issue 21).
 * The corpus (tests/guard_corpus, run under `heapkit guard`) covers the
 * same bugs end to end, and the smashed stack (issue 22, bug 2). */
#include "hk_test.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Walloc-size-larger-than="
#endif
#include "internal.h"
#include "heapkit/guard.h"

#include <pthread.h>
#ifndef _WIN32
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#else
#include <io.h> /* read, close */
#endif

static hkt_errors errs = {.quiet = 1};
static char rep_out[1 << 16];
static int rep_fds[2] = {-1, -1};

/* A heap whose detailed reports go to a pipe (read back by rep_read). */
static hk_guard *mk_reporting(hk_guard_desc d) {
    d.on_error = hkt_on_error;
    d.error_user = &errs;
    if (!d.reserve) d.reserve = (size_t)1 << 28;
    d.flags |= HK_GUARD_REPORT | HK_FLAG_QUIET;
    if (rep_fds[0] < 0 && pipe(rep_fds) != 0) return NULL;
    d.report_fd = rep_fds[1];
    hkt_errors_reset(&errs);
    return hk_guard_create(&d);
}

/* What the heap wrote to its report pipe since the last call. */
static const char *rep_read(void) {
    size_t have = 0;
    close(rep_fds[1]);
    for (;;) {
        ssize_t r = read(rep_fds[0], rep_out + have, sizeof rep_out - 1 - have);
        if (r <= 0) break;
        have += (size_t)r;
    }
    rep_out[have] = 0;
    close(rep_fds[0]);
    rep_fds[0] = rep_fds[1] = -1;
    return rep_out;
}

static void poke(void *p, ptrdiff_t i, unsigned v) { ((volatile unsigned char *)p)[i] = (unsigned char)v; }

static HK__NOINLINE void *reports_alloc_site(hk_guard *g, size_t n) {
    void *p = hk_guard_alloc(g, n);
    __asm__ volatile("" ::: "memory");
    return p;
}

HKT_TEST(guard_padding_of_live_blocks_reported_in_full) {
    hk_guard *g = mk_reporting((hk_guard_desc){.align_min = 16});
    REQUIRE(g);
    unsigned char *a = reports_alloc_site(g, 100); /* 16-byte alignment: 12 bytes of tail padding */
    unsigned char *b = reports_alloc_site(g, 50);
    unsigned char *c = reports_alloc_site(g, 40);
    for (int i = 1; i <= 8; i++) poke(a, -i, 'C'); /* an underwrite of 8 bytes */
    poke(b, 50, 1);                                /* two bytes past the end */
    poke(b, 51, 2);
    CHECK_EQ(hk_guard_check_padding(g), 2);
    CHECK_EQ(hk_guard_report_count(g), 2);
    CHECK_EQ(errs.count, 2);
    CHECK_EQ(errs.last_kind, HK_EK_HEAP_OVERFLOW);
    CHECK_STR_CONTAINS(errs.last_message, "write past the end of live 50-byte block");
    CHECK_STR_CONTAINS(errs.last_message, "found at exit: padding damaged at offsets +50 to +51");
    const char *out = rep_read();
    CHECK_STR_CONTAINS(out, "write before the start of live 100-byte block");
    CHECK_STR_CONTAINS(out, "padding damaged at offsets -8 to -1");
    CHECK_STR_CONTAINS(out, "(100 bytes) allocated at:");
    CHECK_STR_CONTAINS(out, "reports_alloc_site");
    CHECK(strstr(out, "1 bytes") == NULL);
    /* check: the first damaged block, with the same detail, "by check" */
    g = (hk_guard_destroy(g), mk_reporting((hk_guard_desc){.align_min = 16}));
    REQUIRE(g);
    a = reports_alloc_site(g, 30);
    poke(a, 31, 9);
    CHECK_EQ(hk_guard_check(g), HK_ERR_CORRUPT);
    CHECK_EQ(errs.last_kind, HK_EK_HEAP_OVERFLOW);
    CHECK_STR_CONTAINS(errs.last_message, "found by check: padding damaged at offset +31 ");
    out = rep_read();
    CHECK_STR_CONTAINS(out, "(30 bytes) allocated at:");
    CHECK_STR_CONTAINS(out, "reports_alloc_site");
    poke(a, 31, HK_FILL_PAD);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    CHECK_EQ(hk_guard_free(g, a), HK_OK);
    (void)c;
    hk_guard_destroy(g);
}

HKT_TEST(guard_free_misuse_labels_the_free_stack) {
    hk_guard *g = mk_reporting((hk_guard_desc){0});
    REQUIRE(g);
    void *p = reports_alloc_site(g, 1);
    CHECK_EQ(hk_guard_free(g, p), HK_OK);
    CHECK_EQ(hk_guard_free(g, p), HK_ERR_DOUBLE_FREE);
    const char *out = rep_read();
    CHECK_STR_CONTAINS(out, "  freed at:\n");          /* this free */
    CHECK_STR_CONTAINS(out, "(1 byte) allocated at:"); /* singular */
    CHECK_STR_CONTAINS(out, "  first freed at:\n");    /* the earlier one */
    CHECK(strstr(out, "__libc_start") == NULL);
    hk_guard_destroy(g);
}

/* Leaves the only copy of a block's pointer at the bottom of a 64 KiB
 * frame, which is dead (below the stack pointer) once this returns. */
static HK__NOINLINE void reports_leave_pointer_behind(hk_guard *g) {
    volatile uintptr_t slots[8192];
    slots[0] = (uintptr_t)hk_guard_alloc(g, 64);
    for (int i = 1; i < 8192; i += 512) slots[i] = 0;
    __asm__ volatile("" : : "r"(slots) : "memory");
}

HKT_TEST(guard_leak_scan_ignores_dead_stack) {
    if (hk__tsan_enabled()) return; /* the scan would read TSan's shadow mappings */
#ifdef HK__ASAN
    return; /* ASan's fake stacks put frames elsewhere */
#endif
    hk_guard *g = mk_reporting((hk_guard_desc){0});
    REQUIRE(g);
    reports_leave_pointer_behind(g);
    size_t bytes = 0;
    for (int run = 0; run < 3; run++) { /* the same verdict every time */
        CHECK_EQ(hk_guard_leaks(g, HK_GUARD_LEAKS_UNREACHABLE, &bytes), 1);
        CHECK_EQ(bytes, 64);
    }
    const char *out = rep_read();
    CHECK_STR_CONTAINS(out, "leak: 64 bytes in 1 block unreachable");
    CHECK_STR_CONTAINS(out, "leak summary: 64 bytes in 1 block from 1 allocation stack");
    hk_guard_destroy(g);
}

/* A backing allocator over a few static chunks, handed out round robin
 * and never really freed (as a thread cache reuses an address at once);
 * it refuses anything over 1 KiB. No sanitizer allocator is involved, so
 * the tests see the heap's own synchronization, and a refusal is a NULL. */
#define TB_CHUNKS 4
static _Alignas(64) unsigned char tb_mem[TB_CHUNKS][1024];
static unsigned tb_next;
static void *tb_malloc(size_t n) {
    if (n > sizeof tb_mem[0]) return NULL;
    return tb_mem[__atomic_fetch_add(&tb_next, 1, __ATOMIC_RELAXED) % TB_CHUNKS];
}
static void tb_free(void *p) { (void)p; }
static void *tb_realloc(void *p, size_t n) { return n <= sizeof tb_mem[0] ? p : NULL; }
static void *tb_memalign(size_t a, size_t n) { return a <= 64 ? tb_malloc(n) : NULL; }
static size_t tb_usable(void *p) {
    (void)p;
    return sizeof tb_mem[0];
}
static hk_guard_backing tb_backing(void) {
    hk_guard_backing b = {tb_malloc, tb_free, tb_realloc, tb_memalign, tb_usable};
    return b;
}

HKT_TEST(guard_too_large_allocation_reports_nomem) {
    hk_guard *g = mk_reporting((hk_guard_desc){.reserve = (size_t)1 << 26, .backing = tb_backing()});
    REQUIRE(g);
    size_t huge = (size_t)1 << 40; /* past the reservation, and the backing refuses it */
    CHECK(hk_guard_alloc(g, huge) == NULL);
    CHECK_EQ(errs.count, 1);
    CHECK_EQ(errs.last_result, HK_ERR_NOMEM);
    CHECK_EQ(errs.last_kind, HK_EK_NOMEM);
    CHECK_STR_CONTAINS(errs.last_message, "too large for the guard heap");
    CHECK(hk_guard_alloc_aligned(g, 64, huge) == NULL);
    CHECK_EQ(errs.count, 2);
    CHECK_EQ(errs.last_kind, HK_EK_NOMEM);
    CHECK_EQ(hk_guard_check(g), HK_OK);
    (void)rep_read();
    hk_guard_destroy(g);
}

/* ---- wild frees (issue 21): reported, never a crash ---------------------------------- */

/* In a child (a crash must not take the test runner with it): frees of
 * pointers whose page is unmapped while the 16 bytes below them lie on the
 * same page, and of the highest aligned addresses. Each must be reported as
 * a foreign pointer; the heap keeps working. Exit 0 when all is as it
 * should be, 1 when a report is missing, and a signal when it crashed
 * (the bug: hk__guard_fb_read read the header without a probe). */
static int wild_free_body(uint32_t flags) {
    {
        hk_guard *g = mk_reporting((hk_guard_desc){.flags = flags});
        if (!g) return 3;
        uintptr_t wild[] = {
            0x12345670u, (uintptr_t)0x7ff0000000ull, UINTPTR_MAX - 15, UINTPTR_MAX - 7, 16, 8};
        int bad = 0;
        for (size_t i = 0; i < sizeof wild / sizeof wild[0]; i++) {
            int before = errs.count;
            hk_result r = hk_guard_free(g, (void *)wild[i]);
            if (r != HK_ERR_FOREIGN || errs.count != before + 1 || errs.last_kind != HK_EK_FOREIGN_PTR)
                bad = 1;
            if (hk_guard_realloc(g, (void *)wild[i], 10) != NULL) bad = 1;
            if (hk_guard_usable_size(g, (void *)wild[i]) != 0 || hk_guard_owns(g, (void *)wild[i])) bad = 1;
        }
        void *p = hk_guard_alloc(g, 40);
        if (!p || hk_guard_free(g, p) != HK_OK || hk_guard_check(g) != HK_OK) bad = 1;
        return bad;
    }
}
static int wild_free_child(uint32_t flags) {
#ifdef _WIN32
    return wild_free_body(flags); /* no fork there: in this process (CTest runs each case in its own) */
#else
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(wild_free_body(flags));
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
#endif
}

HKT_TEST(guard_wild_free_reported_without_crash) {
    CHECK_EQ(wild_free_child(0), 0); /* probed with a system call */
#ifndef HK__ASAN
    CHECK_EQ(wild_free_child(HK_GUARD_FAULT_HANDLER), 0); /* a protected read */
#endif
}

/* ---- hk_guard_owns against a free and a new block at the same address -------------- */

typedef struct owns_race {
    hk_guard *g;
    void *volatile slot; /* published with atomics */
    int stop;
} owns_race;

static void *owns_race_freer(void *arg) {
    owns_race *r = (owns_race *)arg;
    for (int i = 0; i < 4000; i++) {
        void *p = hk_guard_alloc_unguarded(r->g, 48);
        if (i < TB_CHUNKS) __atomic_store_n(&r->slot, p, __ATOMIC_RELEASE);
        hk_guard_free(r->g, p); /* its header rewritten (dead), then again by the next alloc there */
    }
    __atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* ThreadSanitizer reported the header reads of hk_guard_owns racing with
 * the header writes of alloc and free (issue 21): they now hold the
 * header's stripe lock. */
HKT_TEST(guard_owns_races_no_free) {
    owns_race r;
    memset(&r, 0, sizeof r);
    hk_guard_desc d = {0};
    d.reserve = (size_t)1 << 26;
    d.backing = tb_backing();
    r.g = hk_guard_create(&d);
    REQUIRE(r.g);
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, owns_race_freer, &r) == 0);
    size_t asked = 0;
    while (!__atomic_load_n(&r.stop, __ATOMIC_ACQUIRE)) {
        void *p = __atomic_load_n(&r.slot, __ATOMIC_ACQUIRE);
        if (p) {
            (void)hk_guard_owns(r.g, p); /* live or freed: either answer, no race */
            asked++;
        }
    }
    pthread_join(t, NULL);
    CHECK(!hk_guard_owns(r.g, __atomic_load_n(&r.slot, __ATOMIC_ACQUIRE))); /* all freed now */
    CHECK_EQ(hk_guard_check(r.g), HK_OK);
    hk_guard_destroy(r.g);
}

#ifndef _WIN32 /* setrlimit and fork: POSIX-only (cmake/windows.cmake) */
/* ---- address-space limit ----------------------------------------------------------- */

HKT_TEST(guard_reserve_shrinks_under_address_space_limit) {
    if (hk__tsan_enabled()) return; /* sanitizers reserve terabytes of shadow */
#ifdef HK__ASAN
    return;
#endif
    size_t vm = hkt_vm_size();
    if (!vm) return;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {vm + ((size_t)1 << 30), vm + ((size_t)1 << 30)};
        if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(2);
        hkt_errors e = {.quiet = 1};
        hk_guard_desc d = {0};
        d.on_error = hkt_on_error;
        d.error_user = &e;
        d.reserve = (size_t)64 << 30;
        hk_guard *g = hk_guard_create(&d);
        if (!g) _exit(3);
        hk_guard_info info;
        if (hk_guard_get_info(g, &info) != HK_OK) _exit(4);
        if (info.reserve_size >= d.reserve || info.reserve_size < ((size_t)16 << 20)) _exit(5);
        if (e.count != 1 || e.last_kind != HK_EK_NOMEM || !strstr(e.last_message, "address space limited"))
            _exit(6);
        void *p = hk_guard_alloc(g, 100);
        if (!p || hk_guard_free(g, p) != HK_OK || hk_guard_check(g) != HK_OK) _exit(7);
        /* a limit too small for any heap: create fails, with a report */
        hk_guard_destroy(g);
        struct rlimit tiny = {vm + ((size_t)4 << 20), vm + ((size_t)4 << 20)};
        if (setrlimit(RLIMIT_AS, &tiny) != 0) _exit(8);
        e.count = 0;
        if (hk_guard_create(&d) != NULL || e.count == 0 || e.last_kind != HK_EK_NOMEM) _exit(9);
        _exit(0);
    }
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st));
    CHECK_EQ(WEXITSTATUS(st), 0);
}
#endif

/* The host layer's protected calls and thread-exit callbacks, in process
 * on every host (Windows included: the vectored exception handler's
 * landing path, the FLS / winpthreads-key exit path). Fault reports that
 * end the program: tests/fault_exit_prog.c. */
#include "hk_test.h"
#include "internal.h"

#include <pthread.h>

static int fault_cb_calls;
static void fault_cb(const hk_os_fault *f, void *user) {
    (void)f;
    (void)user;
    fault_cb_calls++;
}
static void fault_touch(void *p) { *(volatile unsigned char *)p = 7; }
static int fault_inner_rc;
static void fault_nested(void *p) {
    fault_inner_rc = hk_os_protected_call(fault_touch, p); /* faults: comes back here */
    ((volatile unsigned char *)p)[-1] = 9;                 /* the outer call's page: writable */
}

/* A fault inside hk_os_protected_call comes back as -1, without reaching
 * the fault callbacks, as often as it happens; calls nest. */
HKT_TEST(os_protected_call_returns_after_a_fault) {
    (void)hkt_on_error;
    if (hk__asan_enabled() || hk__tsan_enabled()) {
        printf("    skipped under a sanitizer (it owns SIGSEGV)\n");
        return;
    }
    size_t ps = hk_os_page_size();
    REQUIRE(hk_os_fault_register(fault_cb, NULL) == HK_OK);
    unsigned char *page = hk_os_reserve(2 * ps);
    REQUIRE(page != NULL);
    CHECK_EQ(hk_os_protected_call(fault_touch, page), -1); /* reserved: inaccessible */
    CHECK_EQ(hk_os_commit(page, ps), HK_OK);
    CHECK_EQ(hk_os_protected_call(fault_touch, page), 0);
    CHECK_EQ(page[0], 7);
    CHECK_EQ(hk_os_protect(page, ps, HK_PROT_READ), HK_OK);
    int faults = 0;
    for (int i = 0; i < 100; i++) faults += hk_os_protected_call(fault_touch, page) == -1; /* read-only */
    CHECK_EQ(faults, 100);
    CHECK_EQ(page[0], 7);
    CHECK_EQ(hk_os_protect(page, ps, HK_PROT_READ_WRITE), HK_OK);
    CHECK_EQ(hk_os_protected_call(fault_nested, page + ps), 0); /* the inner call faults, the outer not */
    CHECK_EQ(fault_inner_rc, -1);
    CHECK_EQ(page[ps - 1], 9);
    CHECK_EQ(fault_cb_calls, 0);
    hk_os_release(page, 2 * ps);
}

/* A thread-exit callback runs once per thread that armed it, while the
 * thread's _Thread_local variables still hold their values (the zone and
 * the guard keep per-thread state there). Regression: with MinGW GCC's
 * emulated TLS, FLS callbacks ran after the variables were freed (read 0). */
static _Thread_local int exit_tl_value;
static int exit_seen[4];
static int exit_calls;
static void exit_fn(void) {
    int v = exit_tl_value;
    if (v >= 1 && v <= 4) __atomic_store_n(&exit_seen[v - 1], v, __ATOMIC_RELAXED);
    __atomic_add_fetch(&exit_calls, 1, __ATOMIC_RELAXED);
}
static void *exit_thread(void *arg) {
    exit_tl_value = (int)(intptr_t)arg;
    if (hk_os_on_thread_exit(exit_fn) != HK_OK) return (void *)1;
    if (hk_os_on_thread_exit(exit_fn) != HK_OK) return (void *)1; /* again: still once */
    return NULL;
}

HKT_TEST(os_thread_exit_sees_thread_locals) {
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        REQUIRE(pthread_create(&t[i], NULL, exit_thread, (void *)(intptr_t)(i + 1)) == 0);
    for (int i = 0; i < 4; i++) {
        void *rc = NULL;
        pthread_join(t[i], &rc);
        CHECK(rc == NULL);
    }
    CHECK_EQ(exit_calls, 4);
    for (int i = 0; i < 4; i++) CHECK_EQ(exit_seen[i], i + 1);
}

/* Guard heap leak scan with other threads running (issue 22, "like
 * LeakSanitizer's for every thread"): the scan stops every other thread
 * and reads each one's live stack, from its stack pointer up, and its
 * registers; nothing below a stack pointer keeps a block alive.
 *  - a thread that left the only copy of a pointer in a returned (dead)
 *    frame and then blocked: its block is reported (before the stop, the
 *    other threads' stacks were scanned whole, and the stale copy hid it);
 *  - a thread blocked (in a condition wait) holding a pointer on its live stack, and one spinning
 *    with a pointer only in a register: neither block is reported;
 *  - the threads run on afterwards (resumed), and the verdict is the same
 *    on every scan.
 * Skipped under AddressSanitizer (fake stacks move frames elsewhere) and
 * ThreadSanitizer (the scan would read its shadow mappings). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "hk_test.h"

#include "internal.h"
#include "heapkit/guard.h"

#include <pthread.h>
#include <sched.h>

#ifndef _WIN32 /* under Wine the dead frame's copy is still seen (cmake/windows.cmake) */
static hkt_errors errs = {.quiet = 1};

/* Lets the other threads run for about ms milliseconds. */
static void lt_sleep_ms(long ms) {
    uint64_t t0 = hk_now_ns();
    while (hk_now_ns() - t0 < (uint64_t)ms * 1000000u) sched_yield();
}

#define HIDE_MASK ((uintptr_t)0x5a5a5a5a5a5a5a5aull)

typedef struct lt_shared {
    hk_guard *g;
    int ready;          /* threads that reached their waiting point */
    int stop;           /* set to let them finish */
    pthread_mutex_t mu; /* the blocked threads wait on cv until stop */
    pthread_cond_t cv;
    void *held_stack; /* (only for the final free) */
    uintptr_t held_reg_hidden, dead_hidden;
} lt_shared;

/* Leaves the only plain copy of a fresh block's address at the bottom of a
 * 64 KiB frame, then returns: the copy lies in dead stack below the
 * thread's stack pointer from then on. The caller keeps it XOR-masked. */
static HK__NOINLINE uintptr_t lt_leave_pointer_behind(hk_guard *g) {
    volatile uintptr_t slots[8192];
    slots[0] = (uintptr_t)hk_guard_alloc(g, 48);
    slots[1] = 0;
    __asm__ volatile("" : : "r"(slots) : "memory");
    return slots[0] ^ HIDE_MASK;
}

/* Blocks in the kernel (a futex wait) until the test sets stop. */
static void lt_block(lt_shared *s) {
    pthread_mutex_lock(&s->mu);
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

static void *lt_dead_thread(void *arg) {
    lt_shared *s = (lt_shared *)arg;
    s->dead_hidden = lt_leave_pointer_behind(s->g);
    __atomic_add_fetch(&s->ready, 1, __ATOMIC_RELEASE);
    lt_block(s);
    return NULL;
}

static void *lt_live_stack_thread(void *arg) {
    lt_shared *s = (lt_shared *)arg;
    void *volatile held = hk_guard_alloc(s->g, 56); /* on this frame, live while blocked */
    s->held_stack = held;
    __atomic_add_fetch(&s->ready, 1, __ATOMIC_RELEASE);
    lt_block(s);
    __asm__ volatile("" : : "r"(held) : "memory");
    return NULL;
}

static void *lt_register_thread(void *arg) {
    lt_shared *s = (lt_shared *)arg;
    s->held_reg_hidden = (uintptr_t)hk_guard_alloc(s->g, 40) ^ HIDE_MASK;
    __atomic_add_fetch(&s->ready, 1, __ATOMIC_RELEASE);
#if defined(__x86_64__)
    /* the address only in r12 (memory holds it masked) while spinning */
    register uintptr_t r __asm__("r12") = s->held_reg_hidden;
    __asm__ volatile("xorq %1, %0" : "+r"(r) : "r"(HIDE_MASK));
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) __asm__ volatile("" : "+r"(r));
    __asm__ volatile("xorq %1, %0" : "+r"(r) : "r"(HIDE_MASK));
    s->held_reg_hidden = r;
#else
    void *volatile held = (void *)(s->held_reg_hidden ^ HIDE_MASK);
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
    }
    __asm__ volatile("" : : "r"(held) : "memory");
#endif
    return NULL;
}

HKT_TEST(guard_leak_scan_stops_threads_reads_live_stacks_and_registers) {
#ifdef HK__ASAN
    return;
#endif
    if (hk__tsan_enabled()) return;
    lt_shared s;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    s.g = hk_guard_create(&(hk_guard_desc){
        .on_error = hkt_on_error, .error_user = &errs, .reserve = (size_t)1 << 28, .flags = HK_FLAG_QUIET});
    REQUIRE(s.g);
    hkt_errors_reset(&errs);
    pthread_t t[3];
    REQUIRE(pthread_create(&t[0], NULL, lt_dead_thread, &s) == 0);
    REQUIRE(pthread_create(&t[1], NULL, lt_live_stack_thread, &s) == 0);
    REQUIRE(pthread_create(&t[2], NULL, lt_register_thread, &s) == 0);
    while (__atomic_load_n(&s.ready, __ATOMIC_ACQUIRE) < 3) lt_sleep_ms(1);
    lt_sleep_ms(20); /* into their waits and the spin loop */
    for (int run = 0; run < 3; run++) {
        size_t bytes = 0;
        CHECK_EQ(hk_guard_leaks(s.g, HK_GUARD_LEAKS_UNREACHABLE, &bytes), 1);
        CHECK_EQ(bytes, 48); /* the dead frame's block only */
    }
    /* the threads were resumed: they finish */
    pthread_mutex_lock(&s.mu);
    __atomic_store_n(&s.stop, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&s.cv);
    pthread_mutex_unlock(&s.mu);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    CHECK_EQ(hk_guard_free(s.g, (void *)(s.dead_hidden ^ HIDE_MASK)), HK_OK);
    CHECK_EQ(hk_guard_free(s.g, s.held_stack), HK_OK);
    CHECK_EQ(hk_guard_free(s.g, (void *)(s.held_reg_hidden ^ HIDE_MASK)), HK_OK);
    CHECK_EQ(hk_guard_leaks(s.g, HK_GUARD_LEAKS_UNREACHABLE, NULL), 0);
    CHECK_EQ(hk_guard_check(s.g), HK_OK);
    hk_guard_destroy(s.g);
    pthread_cond_destroy(&s.cv);
    pthread_mutex_destroy(&s.mu);
}
#endif /* !_WIN32 */
